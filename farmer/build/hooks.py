"""The scheduler's hooks in a real build (farmer/build/run.py runs them): each verdict from the
session, each run prepared and recorded by the recorder, the `[done/total]` lines and the
ETA through the reporter, and the signal that stops the build."""

from __future__ import annotations

import time

from farmer.plan.latency.predict import Prediction, eta
from farmer.plan.session import Session
from farmer.record.recorder import Recorder
from farmer.report import console as report
from farmer.run.executors.base import Executor, Outcome
from farmer.run.executors.process import keep_log, log_path
from farmer.run.scheduler import Hooks, Scheduler

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.build.deferred import Deferred
    from farmer.build.request import BuildRequest
    from farmer.graph.graph import Computation

_STUCK_S = 0.5  # a signal this long after the first, while stopping, stops at once
_ETA_EVERY_S = 0.25


def _setup_failed(reason: str | None) -> bool:
    """A world task that did not run because its world's setup raised (SPEC §4's words)."""
    return reason is not None and reason.startswith("world ") and reason.endswith(" setup failed")


class BuildHooks(Hooks):
    """The scheduler's hooks in a real build: verdicts from the session, each run through
    the recorder, what the user sees through the reporter, and the signal that stops it."""

    def __init__(self, session: Session, opts: BuildRequest, prediction: Prediction,
                 recorder: Recorder, reporter: report.Progress, logs: str, t0: float) -> None:
        self.s = session
        self.comps = session.graph.computations
        self.opts = opts
        self.prediction = prediction
        self.recorder = recorder
        self.reporter = reporter
        self.logs = logs
        self.t0 = t0
        self.signal: int | None = None
        self._signal_at = 0.0
        self.outcomes: dict[int, Outcome] = {}
        self.running: dict[int, float] = {}  # index -> monotonic start
        self.explain_later: dict[int, str] = {}  # --explain's reason, said once it ended (looks_up)
        self.scheduler: Scheduler | None = None
        self.executor: Executor | None = None
        self._eta: float | None = None
        self._last_eta = 0.0
        self._unprinted: tuple[Computation, str] | None = None
        self.deferred: Deferred | None = None  # run once the first commands have started

    def idle(self) -> None:
        if self.deferred is not None:
            deferred, self.deferred = self.deferred, None
            deferred.run()
        self.recorder.idle()  # the headers of what ran, now that its consumers run (recorder.py)

    def check(self, index: int, producers_ran: bool) -> str | None:
        if not producers_ran:
            return self.s.check(index)  # nothing it reads changed since the plan
        return self.s.recheck(index)

    def starting(self, index: int, reason: str) -> Outcome | None:
        comp = self.comps[index]
        now = time.monotonic()
        done = self.recorder.prepare(comp, now - self.t0)
        if self.opts.explain:
            if done is None and self.executor is not None and self.executor.looks_up:
                self.explain_later[index] = reason  # it may yet be restored: one line once it ended
            else:
                restored = f"; restored from the {done.origin.name} cache" if done is not None and done.origin.restored else ""
                self.reporter.message(f"farmer: explain: {comp.id}: {reason}{restored}")
        if done is None:
            self.running[index] = now
            self._progress()
        return done

    def will_succeed(self, outcome: Outcome) -> bool:
        return outcome.ok and self.recorder.outputs_there(self.comps[outcome.index])

    def finished(self, outcome: Outcome) -> Outcome:
        self.print_finished()
        comp = self.comps[outcome.index]
        self.running.pop(outcome.index, None)
        reason = self.explain_later.pop(outcome.index, None)
        if self.opts.explain and (reason is not None or outcome.local_because):
            # looked up alongside other work (farmer/remote/lookups.py): restored, or run here and why
            if outcome.origin.restored:
                more = f"restored from the {outcome.origin.name} cache"
            else:
                more = f"ran here, not remotely: {outcome.local_because}" if outcome.local_because else ""
            line = "; ".join(part for part in (reason, more) if part)
            self.reporter.message(f"farmer: explain: {comp.id}: {line}")
        outcome = self.recorder.record(comp, outcome)
        silent = outcome.origin.restored or outcome.printed is False
        # (a silent success has no log to name or read: its path is not made)
        log = "" if outcome.ok and silent else log_path(self.logs, comp.id)
        output = "" if silent else report.read_output(log)
        if outcome.ok:
            self._unprinted = (comp, output)
        else:
            done, total = self.line_counts()
            self.reporter.finished(comp, done + 1, total, "")
            if outcome.reason == "interrupted":
                self.reporter.message(f"interrupted: {comp.task} {comp.id}")
            elif _setup_failed(outcome.reason):  # the traceback was printed once, by the world
                self.reporter.message(f"FAILED: {comp.task} {comp.id} ({outcome.reason}; "
                                      "traceback above)")
            else:
                keep_log(log)
                self.reporter.failed(comp, outcome.reason or "failed", log, output,
                                     self.recorder.failed_kept.pop(comp.index, []))
        self.outcomes[outcome.index] = outcome
        self._progress()
        return outcome

    def done(self) -> int:
        """Computations finished so far, up-to-date ones included (SPEC: `[done/total]`)."""
        ran_or_checked = self.scheduler.done if self.scheduler else 0
        return len(self.s.selected) - len(self.prediction.to_run) + ran_or_checked

    def line_counts(self) -> tuple[int, int]:
        """A progress line's `[done/total]`: farmer's (SPEC), or with `farmer ninja` ninja's,
        which counts only what the plan would run (cli/ninja.py)."""
        if self.opts.front == "ninja" and self.scheduler is not None:
            return self.scheduler.done, len(self.scheduler.selected)
        return self.done(), len(self.s.selected)

    def print_finished(self) -> None:
        """The `[done/total]` line of the computation that succeeded last, printed at the
        scheduler's next call, once the consumers it released were checked: those found up
        to date count in `done`, so a complete build's last line reads `[total/total]`."""
        if self._unprinted is not None:
            comp, output = self._unprinted
            self._unprinted = None
            self.reporter.finished(comp, *self.line_counts(), output)

    def interrupted(self) -> int | None:
        self.print_finished()  # called first in each round of the scheduler
        return self.signal

    def _progress(self) -> None:
        if self.scheduler is None:
            return
        if not self.opts.live:
            if self.reporter.counts_running:  # NINJA_STATUS's %r and %s (report/ninja_status.py)
                self.reporter.progress(*self.line_counts(), [self.comps[i] for i in self.running], None)
            return
        now = time.monotonic()
        if now - self._last_eta > _ETA_EVERY_S:
            self._eta, self._last_eta = self._remaining(now), now
        running = [self.comps[i] for i in self.running]
        self.reporter.progress(self.done(), len(self.s.selected), running, self._eta)

    def _remaining(self, now: float) -> float | None:
        settled = self.scheduler.settled
        left = [i for i in self.scheduler.selected if i not in settled and i not in self.outcomes]
        measured = {i: o.end_s - o.start_s for i, o in self.outcomes.items() if o.ok}
        running_for = {i: now - started for i, started in self.running.items()}
        ready = self.executor.worlds_set_up() if self.executor else {}
        began = self.executor.worlds_setting_up() if self.executor else {}
        return eta(self.prediction, self.comps, left, measured, running_for, ready, began, now,
                   self.s.spec.pools)

    def on_signal(self, signum: int, frame: object) -> None:
        if self.signal is None:
            self.signal, self._signal_at = signum, time.monotonic()
        elif time.monotonic() - self._signal_at > _STUCK_S:
            # Stopping has not ended (something blocks, a FIFO say): leave the hard way. The
            # finally blocks on the way out still kill what runs and record what finished.
            stop = KeyboardInterrupt()
            stop.signum = signum  # type: ignore[attr-defined]
            raise stop
