"""`farmer build`: a project's graph, its state and the scheduler brought together.

The order of a build: take the lock, read state, decide what would run (the plan), estimate
and simulate it (the prediction), then run the scheduler with the process executor. Traces
are written in batches as computations finish; last-build.json is written at the end of
every build that got the lock, whatever its outcome.
"""

from __future__ import annotations

import _signal as signal  # not `signal`, which imports enum (the same functions, ints for enums)
import os
import stat
import sys
import time
from collections.abc import Callable

from farmer import depfile, lastbuild, noop, report
from farmer.atomic import Part, write_atomically
from farmer.errors import TaskError
from farmer.executors.process import ProcessExecutor, log_path
from farmer.grains import Digests, NotAFile
from farmer.lastbuild import Counts, summary_line
from farmer.graph import Computation, Graph, check_inputs, select
from farmer.latency import critical, estimates
from farmer.latency.predict import Prediction, predict
from farmer.latency.simulate import simulate
from farmer.inside import check_inside
from farmer.lock import ProjectLock
from farmer.private import make_dir
from farmer.executors.base import Executor, Outcome
from farmer.scheduler import FAILED, RAN, SKIPPED, UP_TO_DATE, Hooks, Scheduler, Settled, Span
from farmer.state import Sample, State, Trace
from farmer.worlds.sweep import sweep as sweep_fifo_dirs
from farmer.uptodate import out_of_date, plan, timed_outputs

TYPE_CHECKING = False  # not typing's: importing typing costs a build 3 ms
if TYPE_CHECKING:
    from farmer.spec import Spec
    from farmer.worlds.manager import WarmWorlds

_FLUSH_EVERY_S = 1.0
_STUCK_S = 0.5  # a signal this long after the first, while stopping, stops at once
_ETA_EVERY_S = 0.25
_PRIOR_RUNS = 5000  # the newest measured runs a never measured computation is guessed from
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class BuildOptions:
    __slots__ = ("targets", "jobs", "load", "keep_going", "dry_run", "explain", "no_worlds",
                 "timeout", "live", "trace_file", "worlds")

    def __init__(self, targets: list[str], jobs: int, load: float | None = None,
                 keep_going: bool = False, dry_run: bool = False, explain: bool = False,
                 no_worlds: bool = False, timeout: float | None = None, live: bool = False,
                 trace_file: str | None = None, worlds: WarmWorlds | None = None) -> None:
        self.targets, self.jobs, self.load, self.keep_going = targets, jobs, load, keep_going
        self.dry_run, self.explain, self.no_worlds = dry_run, explain, no_worlds
        self.timeout, self.live, self.trace_file = timeout, live, trace_file
        self.worlds = worlds  # world processes kept across builds (farmer watch)

    def replace(self, **changes) -> BuildOptions:
        """A copy with `changes` (option names as keywords) made."""
        return BuildOptions(**{**{name: getattr(self, name) for name in self.__slots__}, **changes})


def targets_of(spec: Spec, graph: Graph, targets: list[str],
               exists: Callable[[str], bool] | None = None) -> list[int]:
    try:
        if targets:
            return select(graph, targets, exists)
        if spec.default is not None:
            return select(graph, spec.default, exists)
        return check_inputs(graph, list(graph.order), exists)
    except TaskError as e:  # a missing input: where its task is written
        from farmer.farmfile import locate

        raise locate(e, spec.path) from None


class Session:
    """What a build knows before it runs anything: state read, the plan made."""

    __slots__ = ("spec", "graph", "state", "digests", "traces", "selected", "worlds", "verdicts",
                 "all_traces", "dirty", "proof", "rank", "rechecked", "affected")

    def __init__(
        self,
        spec: Spec,
        graph: Graph,
        state: State,
        digests: Digests,
        traces: dict[str, Trace],  # read from state.db when first needed, unless all are here
        selected: list[int],
        worlds: dict[str, str],  # world fingerprints, taken when first needed
        verdicts: dict[int, str | None] | None = None,
        all_traces: bool = True,
        # From the last good build's proof (farmer/noop.py): the computations a file of which
        # changed since (None: no proof, so none is known to be up to date; the others are,
        # without a look at their traces), and each selected one's position in the proof.
        dirty: set[int] | None = None,
        proof: noop.Proof | None = None,
        rank: dict[int, int] | None = None,
        rechecked: set[int] | None = None,  # checked against their traces this build
        # What this build looks at, in topological order: all of `selected` without a proof;
        # with one, what a changed file touches and everything downstream of that. Everything
        # else selected is up to date, and nothing of it needs to be read.
        affected: list[int] | None = None,
    ) -> None:
        self.spec, self.graph, self.state, self.digests = spec, graph, state, digests
        digests.timed = timed_outputs(graph)
        self.traces, self.selected, self.worlds = traces, selected, worlds
        self.verdicts = {} if verdicts is None else verdicts
        self.all_traces, self.dirty, self.proof = all_traces, dirty, proof
        self.rank = {} if rank is None else rank
        self.rechecked = set() if rechecked is None else rechecked
        self.affected = [] if affected is None else affected

    def trace(self, cid: str) -> Trace | None:
        if cid not in self.traces and not self.all_traces:
            self.traces[cid] = self.state.trace(cid)
        return self.traces.get(cid)

    def check(self, i: int) -> str | None:
        """The computation's own verdict, taken once per build (see `recheck`)."""
        verdict = self.verdicts.get(i, "")
        if verdict == "":
            comp = self.graph.computations[i]
            clean = self.dirty is not None and i not in self.dirty and not comp.always
            verdict = self.verdicts[i] = None if clean else self.recheck(i)
        return verdict

    def recheck(self, i: int) -> str | None:
        """A fresh verdict: after a producer ran, its outputs may or may not have changed."""
        self.rechecked.add(i)
        comp = self.graph.computations[i]
        if comp.kind is None:
            return None
        return out_of_date(comp, self.trace(comp.id), self.world_fingerprint(comp.world),
                           self.digests)

    def world_fingerprint(self, name: str | None) -> str | None:
        if name is None:
            return None
        if not self.worlds:
            from farmer.worlds.chain import fingerprints

            self.worlds = fingerprints(self.spec, self.digests)
        return self.worlds[name]

    def outputs_written(self, paths: list[str]) -> None:
        """A world whose input was just rebuilt has a new fingerprint."""
        if self.worlds and any(i in paths for inputs in self.graph.world_inputs.values()
                               for i in inputs):
            self.worlds = {}

    def plan(self) -> dict[int, str]:
        return plan(self.graph.computations, self.affected, self.check)

    def predict(self, to_run: dict[int, str], jobs: int, compare: bool = False) -> Prediction:
        comps = self.graph.computations
        sizes = {i: self.digests.total_size(comps[i].inputs) for i in to_run}
        # Only estimates need history, and only of the tasks that run (their others fill in).
        history = self.state.history({comps[i].task for i in to_run}) if to_run else {}

        def prior() -> estimates.Prior:  # for computations of tasks never measured
            def program_of(cid: str) -> str | None:
                i = self.graph.by_id.get(cid)
                return estimates.program(comps[i]) if i is not None else None

            return estimates.Prior.of(self.state.recent(_PRIOR_RUNS), program_of)

        est = estimates.estimate(comps, list(to_run), history, sizes, prior)
        return predict(comps, self.affected, to_run, est, jobs, self.spec.pools, compare)


def open_session(spec: Spec, graph: Graph, farmer_dir: str | os.PathLike, targets: list[str],
                 readonly: bool = False, proof: noop.Proof | None = None) -> Session:
    """`proof`: the no-op proof as the no-op check read and checked it, if it did."""
    state = State(farmer_dir, readonly=readonly)
    for warning in state.warnings:
        print(f"farmer: warning: {warning}", file=sys.stderr)
    if proof is None or not noop.matches(proof, spec.path, spec.digest, targets):
        proof = noop.read(farmer_dir, spec.path, spec.digest, targets) if spec.digest else None
    if proof is None:
        selected = targets_of(spec, graph, targets)
        return Session(spec, graph, state, Digests(state.stat_cache()), state.traces(), selected, {},
                       affected=selected)
    positions = proof.dirty()
    exists = lambda p: proof.kept(p) is not None or os.path.exists(p)  # noqa: E731
    proven = _proven_selection(graph, proof, positions, exists)
    if proven is None:  # the proof does not fit the graph: no proof
        selected = targets_of(spec, graph, targets, exists)
        return Session(spec, graph, state, Digests(state.stat_cache()), state.traces(), selected, {},
                       affected=selected)
    selected, affected, rank = proven
    dirty = {selected[k] for k in positions}
    if len(dirty) > 1000 and len(dirty) > len(selected) // 8:  # one query beats thousands of small ones
        digests, traces, lazy = Digests(state.stat_cache()), state.traces(), False
    else:  # most are clean: read only the traces and stat entries the others need
        digests, traces, lazy = Digests({}, state.stat_entry), {}, True
    return Session(spec, graph, state, digests, traces, selected, {}, all_traces=not lazy,
                   dirty=dirty, proof=proof, rank=rank, affected=affected)


def _proven_selection(graph: Graph, proof: noop.Proof, positions: set[int],
                      exists: Callable[[str], bool]) -> tuple[list[int], list[int], dict[int, int]] | None:
    """What the proof's build selected (the same Farmfile and targets select the same),
    what of it this build must look at (the computations at `positions`, whose files
    changed, and all that is downstream of them), and each one's position. None when the
    proof does not fit the graph."""
    selected = proof.selected
    if selected is None or len(selected) != proof.count or proof.graph != graph.identify():
        return None  # a graph with other computations at these indices (another farmer)
    comps = graph.computations
    rank = dict(zip(selected, range(len(selected))))
    seeds = [selected[k] for k in sorted(positions)]
    check_inputs(graph, seeds, exists)  # only a changed file can be missing
    seen, stack = set(seeds), list(seeds)
    while stack:
        for c in comps[stack.pop()].consumers:
            if c not in seen and c in rank:
                seen.add(c)
                stack.append(c)
    return selected, sorted(seen, key=rank.__getitem__), rank


class _BuildHooks(Hooks):
    """The scheduler's hooks for a real build: checks, records, reports."""

    def __init__(self, session: Session, opts: BuildOptions, prediction: Prediction,
                 reporter: report.PlainReporter, logs: str, t0: float) -> None:
        self.s = session
        self.comps = session.graph.computations
        self.opts = opts
        self.prediction = prediction
        self.reporter = reporter
        self.logs = logs
        self.t0 = t0
        self.signal: int | None = None
        self._signal_at = 0.0
        self.outcomes: dict[int, Outcome] = {}
        self.running: dict[int, float] = {}  # index -> monotonic start
        self.scheduler: Scheduler | None = None
        self._eta: float | None = None
        self._last_eta = 0.0
        self._pending_traces: list[Trace] = []
        self._inputs_before: dict[int, list[tuple[str, str]]] = {}  # input digests at start
        self._pending_samples: list[Sample] = []
        self._last_flush = time.monotonic()
        self._unprinted: tuple[Computation, str] | None = None

    # -- Hooks protocol ------------------------------------------------------------------

    def check(self, index: int, producers_ran: bool) -> str | None:
        if not producers_ran:
            return self.s.check(index)  # nothing it reads changed since the plan
        return self.s.recheck(index)

    def starting(self, index: int, reason: str) -> None:
        comp = self.comps[index]
        digests = self.s.digests
        before = []
        for path in comp.inputs:  # the content the run reads, recorded in its trace
            if digests.moved(path):  # changed since it was digested earlier in this build
                digests.unstable.add(path)
                digests.forget(path)
            before.append((path, _digest_text(digests, path)))
        self._inputs_before[index] = before
        for out in comp.outputs:
            parent = os.path.dirname(out)
            if parent:
                os.makedirs(parent, exist_ok=True)
        if comp.depfile and os.path.dirname(comp.depfile):
            os.makedirs(os.path.dirname(comp.depfile), exist_ok=True)
        if comp.rspfile:  # ninja: written before the command, removed once it succeeded
            if os.path.dirname(comp.rspfile):
                os.makedirs(os.path.dirname(comp.rspfile), exist_ok=True)
            with open(comp.rspfile, "w", errors="surrogateescape") as f:
                f.write(comp.rspfile_content or "")
        if self.opts.explain:
            self.reporter.message(f"farmer: explain: {comp.id}: {reason}")
        self.running[index] = time.monotonic()
        self._progress()

    def finished(self, outcome: Outcome) -> Outcome:
        self.print_finished()
        i = outcome.index
        comp = self.comps[i]
        self.running.pop(i, None)
        digests = self.s.digests
        outputs: list[tuple[str, str]] = []
        if outcome.ok:
            for path in comp.outputs:
                digests.forget(path)
                try:
                    d = digests.digest(path)
                except NotAFile:
                    d, outcome.reason = None, f"declared output {path} is not a file"
                if d is None and comp.optional_outputs:  # ninja: no check; it runs again next time
                    d, outcome.reason = "not-a-file" if outcome.reason else "missing", None
                if d is None:
                    outcome.ok = False
                    outcome.reason = outcome.reason or f"declared output {path} missing"
                    break
                outputs.append((path, d))
        log = log_path(self.logs, comp.id)
        output = report.read_output(log)
        if outcome.ok:
            self._warn_changed_inputs(comp)
            self._record(comp, outcome, outputs)
            self.s.outputs_written(comp.outputs)
            self._unprinted = (comp, output)
        else:
            self.reporter.finished(comp, self.done() + 1, len(self.s.selected), "")
            for path in comp.outputs:  # a failed computation leaves no output behind
                digests.forget(path)
                try:
                    os.unlink(path)
                except (FileNotFoundError, IsADirectoryError, PermissionError):
                    pass
            if outcome.reason == "interrupted":
                self.reporter.message(f"interrupted: {comp.task} {comp.id}")
            else:
                self.reporter.message(report.failure_text(comp, outcome.reason or "failed", log, output))
        self.outcomes[i] = outcome
        if time.monotonic() - self._last_flush > _FLUSH_EVERY_S:
            self.flush()
        self._progress()
        return outcome

    def done(self) -> int:
        """Computations finished so far, up-to-date ones included (SPEC: `[done/total]`)."""
        ran_or_checked = self.scheduler.done if self.scheduler else 0
        return len(self.s.selected) - len(self.prediction.to_run) + ran_or_checked

    def print_finished(self) -> None:
        """The `[done/total]` line of the computation that succeeded last, printed at the
        scheduler's next call, once the consumers it released were checked: those found up
        to date count in `done`, so a complete build's last line reads `[total/total]`."""
        if self._unprinted is not None:
            comp, output = self._unprinted
            self._unprinted = None
            self.reporter.finished(comp, self.done(), len(self.s.selected), output)

    def interrupted(self) -> int | None:
        self.print_finished()  # called first in each round of the scheduler
        return self.signal

    # -- recording ---------------------------------------------------------------------

    def _warn_changed_inputs(self, comp) -> None:
        """An input that changed while the command ran: its trace keeps the digest from
        before the run, so the computation is not up to date and runs again next build."""
        digests = self.s.digests
        for path, before in self._inputs_before.get(comp.index, ()):
            if digests.moved(path, strict=True):
                digests.forget(path)
                if _digest_text(digests, path) != before:
                    digests.unstable.add(path)
                    self.reporter.message(f"farmer: warning: input {path} changed while {comp.id} ran; "
                                          "it will run again next build")

    def _record(self, comp, outcome: Outcome, outputs: list[tuple[str, str]]) -> None:
        digests = self.s.digests
        inputs = self._inputs_before.pop(comp.index, None) or [(p, _digest_text(digests, p)) for p in comp.inputs]
        discovered: list[tuple[str, str]] = []
        if comp.depfile:
            text = _depfile_text(comp.depfile)
            if text is None:
                self.reporter.message(f"farmer: warning: {comp.depfile}: not a regular file; no inputs discovered")
                text = ""
            try:
                declared = set(comp.inputs)
                for p in depfile.parse(text):
                    p = os.path.normpath(p)
                    if p not in declared:
                        declared.add(p)
                        discovered.append((p, _digest_text(digests, p)))
            except depfile.DepfileError as e:
                self.reporter.message(f"farmer: warning: {comp.depfile}: {e}; no inputs discovered")
            if comp.remove_depfile:  # ninja's `deps = gcc`: what it lists is kept, not the file
                _unlink(comp.depfile)
        if comp.rspfile:
            _unlink(comp.rspfile)
        trace = Trace(comp.id, comp.fingerprint, self.s.world_fingerprint(comp.world), inputs,
                      discovered, outputs)
        self.s.traces[comp.id] = trace
        self._pending_traces.append(trace)
        self._pending_samples.append(Sample(
            comp.id, comp.task, time.time(), outcome.end_s - outcome.start_s, outcome.cpu_s,
            outcome.max_rss_kb, digests.total_size(comp.inputs)))

    def flush(self) -> None:
        self.s.state.save(self._pending_traces, [], self._pending_samples, self.s.digests.changed)
        self._pending_traces, self._pending_samples = [], []
        self.s.digests.changed = {}
        self._last_flush = time.monotonic()

    def _progress(self) -> None:
        if self.scheduler is None or not self.opts.live:
            return
        now = time.monotonic()
        if now - self._last_eta > _ETA_EVERY_S:
            self._eta, self._last_eta = self._remaining(now), now
        running = [self.comps[i] for i in self.running]
        self.reporter.progress(self.done(), len(self.s.selected), running, self._eta)

    def _remaining(self, now: float) -> float | None:
        """Re-simulate what is left: running computations first, for what remains of their
        estimates, then everything not settled yet. None (no ETA) while computations with
        no history yet run and nothing of this build has been measured to go by."""
        settled = self.scheduler.settled
        left = [i for i in self.scheduler.selected if i not in settled and i not in self.outcomes]
        est = self.prediction.estimates
        if self.prediction.unknown:
            measured = {i: o.end_s - o.start_s for i, o in self.outcomes.items() if o.ok}
            if not measured:
                return None
            est = estimates.fill_unknown(est, self.prediction.unknown, self.comps, measured)
        durations = {i: est.get(i, 0.0) for i in left}
        latency = critical.expected_latency(self.comps, left, durations)
        for i, started in self.running.items():
            durations[i] = estimates.remaining_s(durations[i], now - started)
            latency[i] = float("inf")
        to_run = {i: "" for i in left if i in self.prediction.to_run or i in self.running}
        return simulate(self.comps, left, to_run, durations, latency, self.opts.jobs,
                        self.s.spec.pools).makespan_s

    def on_signal(self, signum: int, frame: object) -> None:
        if self.signal is None:
            self.signal, self._signal_at = signum, time.monotonic()
        elif time.monotonic() - self._signal_at > _STUCK_S:
            # Stopping has not ended (something blocks, a FIFO say): leave the hard way. The
            # finally blocks on the way out still kill what runs and record what finished.
            stop = KeyboardInterrupt()
            stop.signum = signum  # type: ignore[attr-defined]
            raise stop


def _depfile_text(path: str) -> str | None:
    """A depfile's text ("" when there is none), or None when it is not a regular file (a
    FIFO would block farmer for ever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read().decode("utf-8", "surrogateescape")


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _digest_text(digests: Digests, path: str) -> str:
    try:
        return digests.digest(path) or "missing"
    except NotAFile:
        return "not-a-file"


def run_build(spec: Spec, graph: Graph, opts: BuildOptions, lock: ProjectLock | None = None,
              proof: noop.Proof | None = None, executor: Executor | None = None) -> int:
    """`lock`: the project's, when the caller holds it already (it is released here);
    `proof`: the no-op proof the caller checked; `executor`: what runs the computations
    instead of processes and worlds (a fake one in tests, as ninja's FakeCommandRunner)."""
    root = spec.root
    farmer_dir = os.path.join(root, ".farmer")
    started_at = time.time()
    t0 = time.monotonic()  # the build's start: every time in last-build.json counts from here
    lock = lock or ProjectLock(farmer_dir)
    early: list[int] = []  # a signal while planning: the build stops before it runs anything
    if not opts.dry_run:
        if lock.fd is None:
            lock.acquire()
        sweep_fifo_dirs()  # what killed farmers left, whether or not this build starts a world

        def defer(signum: int, frame: object) -> None:
            if early:  # a second one: stop at once
                os._exit(128 + early[0])
            early.append(signum)

        for s in _SIGNALS:
            signal.signal(s, defer)
    try:
        session = open_session(spec, graph, farmer_dir, opts.targets, opts.dry_run, proof)
        if not opts.dry_run:
            noop.forget(farmer_dir)  # read above; this build may change what it rests on
        try:
            return _build(session, opts, farmer_dir, started_at, t0, early, executor)
        finally:
            session.state.close()
    finally:
        lock.release()


def _build(session: Session, opts: BuildOptions, farmer_dir: str, started_at: float,
           t0: float, early: list[int], given: Executor | None) -> int:
    comps = session.graph.computations
    prediction = session.predict(session.plan(), opts.jobs)
    to_run = prediction.to_run
    if early:  # interrupted while planning: nothing ran, last-build.json says so
        settled = {i: Settled(SKIPPED, "build stopped") for i in session.selected}
        return _finish(session, opts, farmer_dir, started_at, t0, settled, {}, early[0], {}, prediction)
    if opts.dry_run:
        for i in prediction.simulation.start_order:
            print(f"{comps[i].task} {comps[i].id}: {to_run[i]}")
        predicted = f"predicted {prediction.makespan_s:.2f} s" if prediction.known else "no history yet"
        print(f"farmer: would run {len(to_run)} of {len(session.selected)} computations; {predicted}")
        return 0

    if not to_run:
        # Nothing is out of date: the scheduler would only settle everything as up to date.
        return _finish(session, opts, farmer_dir, started_at, t0, {}, {}, None, {}, prediction)
    if not session.graph.paths_first:  # a cached graph's symlinks were checked on another day
        check_inside(session.spec.root, [comps[i] for i in to_run])

    logs = os.path.join(farmer_dir, "logs")
    make_dir(logs)
    live = opts.live and not any(comps[i].console for i in to_run)  # it owns the terminal
    reporter = report.LiveReporter(len(session.selected)) if live else report.PlainReporter(sys.stdout)
    hooks = _BuildHooks(session, opts, prediction, reporter, logs, t0)
    hooks.signal = early[0] if early else None  # one that came since the check above
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    old_handlers = {s: signal.signal(s, hooks.on_signal) for s in _SIGNALS}
    old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    if not hasattr(os, "pidfd_open"):
        signal.signal(signal.SIGCHLD, lambda *_: None)
    executor: Executor
    if given is not None:
        executor = given
    else:
        executor = ProcessExecutor(logs, t0, opts.timeout, wake_r, opts.load)
    # --no-worlds: fresh python3 per task. Every computation that can run is in the plan, so
    # a plan without world tasks needs no world (nor the modules that drive them).
    if given is None and not opts.no_worlds and any(comps[i].world is not None for i in to_run):
        from farmer.executors.composite import with_worlds

        executor = with_worlds(executor, session.spec, comps, to_run, logs, t0, opts.timeout,
                               reporter.message, opts.worlds, session.world_fingerprint)
    # Only what the plan would run goes through the scheduler: nothing else can change,
    # because every consumer of something that runs is in the plan too.
    scheduler = Scheduler(comps, [i for i in session.affected if i in to_run], prediction.latency,
                          opts.jobs, session.spec.pools, opts.keep_going, executor, hooks)
    hooks.scheduler = scheduler
    try:
        settled = scheduler.run()
    finally:
        executor.close()
        signal.set_wakeup_fd(old_wakeup)
        for s in old_handlers:  # the outcome is decided: a signal now changes nothing
            signal.signal(s, _ignore_signal)
        os.close(wake_r)
        os.close(wake_w)
        hooks.print_finished()
        reporter.close()
        hooks.flush()
    # The handlers stay ignoring: farmer exits right after (a ninja manifest rebuild runs
    # the next build, which installs its own).
    return _finish(session, opts, farmer_dir, started_at, t0, settled, hooks.outcomes,
                   hooks.signal, scheduler.slots_of, prediction)


def _ignore_signal(signum: int, frame: object) -> None:
    pass


def _finish(session: Session, opts: BuildOptions, farmer_dir: str, started_at: float,
            t0: float, settled: dict[int, Settled], outcomes: dict[int, Outcome],
            signum: int | None, slots_of: dict[int, list[int]], prediction: Prediction) -> int:
    """The end of every build that got the lock: last-build.json, the trace, the summary.
    `settled`: how computations settled; every selected one not in it is up to date."""
    comps = session.graph.computations
    if not opts.dry_run:  # what was hashed this build need not be hashed the next
        session.state.save([], [], [], session.digests.changed)
        session.digests.changed = {}
    wall = time.monotonic() - t0

    measured = {i: o.end_s - o.start_s for i, o in outcomes.items()}
    ran_latency = critical.expected_latency(comps, session.affected, measured)
    critical_s = max(ran_latency.values(), default=0.0)
    if signum is not None:
        status, code = "interrupted", 128 + signum
    elif any(s.status == FAILED for s in settled.values()):
        status, code = "failed", 1
    else:
        status, code = "ok", 0
    counts = Counts(up_to_date=len(session.selected) - len(settled))
    for s in settled.values():
        if s.status == RAN:
            counts.ran += 1
        elif s.status == UP_TO_DATE:
            counts.up_to_date += 1
        elif s.status == FAILED:
            counts.failed += 1
        elif s.status == SKIPPED:
            counts.skipped += 1
    head = lastbuild.header(started_at, opts.jobs, status, wall, critical_s, prediction.makespan_s)
    write_atomically(os.path.join(farmer_dir, "last-build.json"),
                     lastbuild.document(head, _tasks_json(session, settled, outcomes)))
    if opts.trace_file:
        from farmer.timeline import write_chrome_trace

        spans = [Span(i, slots_of[i], o.start_s, o.end_s) for i, o in outcomes.items() if i in slots_of]
        path = set(critical.critical_path(comps, {i: ran_latency[i] for i in outcomes}))
        write_chrome_trace(opts.trace_file, spans, comps, path, "farmer build")
    if status == "ok":
        _write_noop_proof(session, opts, farmer_dir, {p for i in outcomes for p in comps[i].outputs})
    print(summary_line(counts, wall, critical_s, status), flush=True)
    return code


def _tasks_json(session: Session, settled: dict[int, Settled],
                outcomes: dict[int, Outcome]) -> list[Part]:
    """last-build.json's tasks, in parts. The proof keeps them as they are when everything
    is up to date: only the others are rendered."""
    comps, selected, proof = session.graph.computations, session.selected, session.proof
    if proof is None or proof.count != len(selected):
        return [report.compact_json(report.last_build_tasks(comps, selected, settled, outcomes)).encode()]
    others = [i for i, s in settled.items() if s.status != UP_TO_DATE or i in outcomes]
    tasks = report.last_build_tasks(comps, others, settled, outcomes)
    # session.rank: each selected computation's position in the proof (open_session)
    entries = report.compact_json_each(tasks)
    return proof.tasks_with({session.rank[i]: entry for i, entry in zip(others, entries)})


def _write_noop_proof(session: Session, opts: BuildOptions, farmer_dir: str,
                      written: set[str]) -> None:
    """Everything selected is up to date now: record the stat of every file that verdict
    rests on, so that the next build of the same targets can check just those. With the
    last build's proof at hand, only what was checked against traces this build is redone.
    `written`: the outputs of what ran."""
    comps = session.graph.computations
    spec = session.spec
    old = session.proof  # written only when no computation is `always`, and for this graph
    if not spec.digest or old is None and any(comps[i].always for i in session.selected):
        return
    if session.digests.unstable:  # a file changed while the build ran: no snapshot holds
        return
    taken = session.digests.taken()
    kept = old.kept if old is not None else _nothing_kept
    for p, (key, _, _) in taken.items():
        was = kept(p)
        if was is not None and key != was and p not in written:
            return  # seen unchanged at the start, yet changed since: clean ones may rest on it
    if old is not None:  # its second part read by open_session (Proof.dirty)
        redo = sorted((session.dirty or set()) | session.rechecked)
        proof = noop.Proof(list(old.paths), list(old.stats), dict(old.racy), old.tasks,
                           old.count, list(old.files_of), old.ends, old.selected)
        proof.serial, proof.graph = old.serial, old.graph
        slot = session.rank
        position = dict(old.position())
    else:
        redo = session.selected
        entries = report.compact_json_each(report.last_build_tasks(comps, redo, {}, {}))
        proof = noop.Proof.of(entries, redo)
        proof.graph = session.graph.identify()
        slot = {i: k for k, i in enumerate(redo)}
        position = {}
    snapshot = old is None  # whether the files the proof rests on changed
    for i in redo:
        comp = comps[i]
        trace = session.trace(comp.id)
        paths = comp.inputs + comp.outputs
        if trace is not None:
            paths = paths + [p for p, _ in trace.discovered]
            # The stat recorded must be that of the content the trace names: a file hashed
            # again after the trace was taken (it changed while the build ran) breaks that.
            for p, digest in trace.inputs + trace.discovered + trace.outputs:
                entry = taken.get(p)
                if entry is not None and entry[1] != digest:
                    return
        if comp.world is not None:
            paths = paths + session.graph.world_inputs[comp.world]
        indices = []
        for p in paths:
            n = position.get(p)
            if p not in taken and (n is None or kept(p) is None):
                return  # neither digested in this build nor known unchanged: no proof
            if n is None:
                n = position[p] = len(proof.paths)
                proof.paths.append(p)
                proof.stats.append(taken[p][0])
            indices.append(n)
        k = slot[i]
        if proof.files_of[k] != indices:
            proof.files_of[k], snapshot = indices, True
    for p, (key, digest, racy) in taken.items():  # as it was when digested
        n = position.get(p)
        if n is not None:
            proof.stats[n] = key
            if racy:
                proof.racy[n] = digest
            else:
                proof.racy.pop(n, None)
    if old is not None and any(old.paths[n] not in taken for n in old.changed or ()):
        proof, snapshot = _compacted(proof), True  # a changed file nothing rests on any more
    noop.write(farmer_dir, spec.path, spec.digest, opts.targets, session.graph.listings, proof,
               snapshot)


def _compacted(proof: noop.Proof) -> noop.Proof:
    """The proof without the files no computation rests on."""
    position: dict[int, int] = {}
    paths, stats, racy, files_of = [], [], {}, []
    for files in proof.files_of:
        indices = []
        for n in files:
            m = position.get(n)
            if m is None:
                m = position[n] = len(paths)
                paths.append(proof.paths[n])
                stats.append(proof.stats[n])
                if n in proof.racy:
                    racy[m] = proof.racy[n]
            indices.append(m)
        files_of.append(indices)
    compact = noop.Proof(paths, stats, racy, proof.tasks, proof.count, files_of, proof.ends,
                         proof.selected)
    compact.graph = proof.graph
    return compact


def _nothing_kept(path: str) -> None:
    return None
