"""`farmer build`: a project's graph, its state and the scheduler brought together.

The order of a build: under the lock its workspace holds (build/workspace.py), open the
session (state, proof, selection: session.py),
decide what would run and predict it, then run the scheduler with an executor (processes
and worlds, or one handed in), each run prepared and recorded by the recorder
(recorder.py). last-build.json is written at the end of every build that got the lock,
whatever its outcome; the no-op proof only after a good one.
"""

from __future__ import annotations

import os
import sys
import time

from farmer.build.deferred import Deferred
from farmer.files.lock import ProjectLock
from farmer.files.private import make_dir
from farmer.plan.latency import critical
from farmer.plan.latency.predict import Prediction
from farmer.plan.latency.seconds import Seconds
from farmer.plan.session import Session, open_session
from farmer.report import console as report
from farmer.report import lastbuild
from farmer.report.lastbuild import summary_line
from farmer.run import orphans
from farmer.run.executors.base import Executor, Outcome
from farmer.run.scheduler import FAILED, SKIPPED, Scheduler, Settled, Span, WorldSpan
from farmer.startup.cheap import signal
from farmer.store import proof as noop

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.build.request import BuildRequest
    from farmer.files.digests import Digests
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec
    from farmer.record.runcache import RunCache
    from farmer.report.console import Progress
    from farmer.run.executors.simulated import WorldSetups
    from farmer.run.worlds.manager import WarmWorlds
    from farmer.store.state import State

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# From this many computations to run (and -j 2 or more: one at a time, nothing overlaps
# the spawns), processes are started from a forked child (executors/forked.py): the fork
# costs about what one spawn's wait does.
_FORK_FROM = 32


def run_build(spec: Spec, graph: Graph, opts: BuildRequest, lock: ProjectLock | None = None,
              state: State | None = None, proof: noop.Proof | None = None,
              executor: Executor | None = None, cache: RunCache | None = None,
              worlds: WarmWorlds | None = None, digests: Digests | None = None,
              deferred: Deferred | None = None, progress: Progress | None = None) -> int:
    """One build of a checked request (`opts`). `lock`: the project's, which the caller
    holds and releases (taken here if it does not hold it yet); `state`: state.db as the
    caller opened it (left open; None: opened and closed here, read-only for a dry run);
    `proof`: the no-op proof the caller checked; `executor`: what runs the computations
    instead of processes and worlds (a fake one in tests, as ninja's FakeCommandRunner);
    `cache`: where outputs are looked up before a run and stored after (recorder.py);
    `worlds`: world processes kept warm across builds (farmer watch); `digests`: the stat
    cache the caller keeps across builds; `deferred`: work done once the first commands
    have started, or at the end of a build that ran none, under the lock; `progress`: what
    the user sees (None: a live view on a terminal, else plain lines)."""
    farmer_dir = os.path.join(spec.root, ".farmer")
    build = _Build(opts, farmer_dir, cache, worlds)
    build.deferred = deferred if deferred is not None else Deferred()
    if not opts.dry_run:
        lock = lock or ProjectLock(farmer_dir)
        if lock.fd is None:
            lock.acquire()
        # What killed farmers left, whether or not this build starts a world (theirs only,
        # never a live farmer's): once the first commands have started.
        build.deferred.sweep = _sweep_fifo_dirs
        orphans.kill_orphans(farmer_dir)  # before planning: they would race this build
        build.early = lock.early  # a signal since the lock was taken stops this build
        lock.defer_signals()
    build.session = open_session(spec, graph, farmer_dir, opts.targets, opts.dry_run, proof,
                                 state=state, digests=digests)
    try:
        if not opts.dry_run:
            noop.forget(farmer_dir)  # read above; this build may change what it rests on
        code = build.run(executor, progress)
        build.deferred.run()  # when nothing started, nothing ran it
        build.conclude()
        return code
    finally:
        if state is None:
            build.session.state.close()


class _Build:
    """One build, from its session to its summary line."""

    __slots__ = ("opts", "farmer_dir", "cache", "worlds", "started_at", "t0", "early", "session",
                 "prediction", "groups", "ending", "deferred")

    def __init__(self, opts: BuildRequest, farmer_dir: str, cache: RunCache | None,
                 worlds: WarmWorlds | None) -> None:
        self.opts = opts
        self.farmer_dir = farmer_dir
        self.cache = cache
        self.worlds = worlds
        self.started_at = time.time()
        self.t0 = time.monotonic()  # the build's start: every time in last-build.json counts from here
        self.early: list[int] = []  # a signal while planning: the build stops before it runs anything
        self.session: Session
        self.prediction: Prediction
        self.groups = orphans.GroupLog(farmer_dir)  # the process groups it starts
        self.ending: tuple[bytearray | None, str] | None = None  # finish's: what `conclude` does

    def run(self, given: Executor | None, progress: Progress | None) -> int:
        session, opts = self.session, self.opts
        comps = session.graph.computations
        self.prediction = prediction = session.predict(session.to_run(), opts.jobs,
                                                       worlds=not opts.no_worlds)
        to_run = prediction.to_run
        if self.early:  # interrupted while planning: nothing ran, last-build.json says so
            return self.finish({i: Settled(SKIPPED, "build stopped") for i in session.selected},
                               {}, self.early[0], {}, [])
        if opts.dry_run and opts.front == "ninja":  # `farmer ninja -n`: ninja's lines
            from farmer.report.ninja_status import NINJA_STATUS, dry_run_lines

            sys.stdout.write(dry_run_lines(comps, [i for i in session.selected if i in to_run], opts.jobs,
                                           os.environ.get("NINJA_STATUS", NINJA_STATUS), opts.verbose, opts.quiet))
            return 0
        if opts.dry_run:
            from farmer.plan.stale import would_remove

            for path in would_remove(session.spec, session.graph, session.state):  # a build's first step
                print(f"farmer: would remove stale output {path} (no computation declares it now)")
            for i in prediction.simulation.start_order:
                print(f"{comps[i].task} {comps[i].id}: {to_run[i]}")
            predicted = f"predicted {prediction.makespan_s:.2f} s" if prediction.known else "no history yet"
            print(f"farmer: would run {len(to_run)} of {len(session.selected)} computations; {predicted}")
            return 0
        if not to_run:
            # Nothing is out of date: the scheduler would only settle everything as up to date.
            return self.finish({}, {}, None, {}, [])
        # Start-up rule (docs/performance.md): what runs computations is imported by a build
        # that has some to run.
        from farmer.build.compose import compose
        from farmer.build.hooks import BuildHooks
        from farmer.files.confine import check_inside
        from farmer.record.engine import EngineContext
        from farmer.record.recorder import Recorder

        if not (session.graph.paths_first or session.graph.inside_checked):
            # a cached graph's symlinks were checked on another day
            check_inside(session.spec.root, [comps[i] for i in to_run])

        logs = os.path.join(self.farmer_dir, "logs")
        logs_new = not os.path.lexists(logs)  # a first build: no log of an older run to remove
        make_dir(logs)
        if progress is None and (opts.verbose or opts.quiet or opts.front == "ninja"):
            from farmer.report.ninja_status import reporter_for

            progress = reporter_for(opts.verbose, opts.quiet, opts.front == "ninja")
        elif progress is None:
            live = opts.live and not self._console(to_run)  # it owns the terminal
            progress = report.LiveReporter(len(session.selected)) if live else report.PlainReporter(sys.stdout)
        reporter = progress
        live = reporter.threaded  # (its thread, once started, would keep the starter from forking)
        engines = compose(EngineContext(session.spec, session, opts, logs, reporter.message, self.t0), self.cache)
        cache = engines.cache
        recorder = Recorder(comps, session.spec.root, session.digests, session.state, session.world_fingerprint,
                            session, reporter.message, cache, engines.observers, logs,
                            session.graph.world_inputs)
        recorder.keep = opts.keep
        hooks = BuildHooks(session, opts, prediction, recorder, reporter, logs, self.t0)
        hooks.deferred = self.deferred
        # last-build.json's predicted makespan, simulated once the first commands run (after
        # the graph cache's write): at the end the build holds the most (at 100 000
        # computations, the simulation's tables on top of it were the build's peak).
        self.deferred.prediction = lambda p=prediction: p.makespan_s
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old_handlers = {s: signal.signal(s, hooks.on_signal) for s in _SIGNALS}
        if self.early and hooks.signal is None:  # one that came since the check above
            hooks.signal = self.early[0]
        old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        if not hasattr(os, "pidfd_open"):
            signal.signal(signal.SIGCHLD, lambda *_: None)
        # (a live view's thread, or a cache's, would keep the process starter from forking
        # once it runs: it forks before)
        if given is not None:  # used as it is, without the engines' layers
            executor, jobs = given, opts.jobs
        else:
            # make's jobserver, or farmer's own for the commands (before they get the environment)
            from farmer.run.jobserver import Jobserved, for_build

            server = for_build(opts.jobs, opts.jobserver, reporter.message)
            local = self._executor(to_run, logs, wake_r, reporter.message, logs_new, live or cache is not None, engines.wrap)
            executor, jobs = engines.stack(local if server is None else Jobserved(local, server), opts.jobs)
        # Only what the plan would run goes through the scheduler: nothing else can change,
        # because every consumer of something that runs is in the plan too.
        # Each world to set up is a step of the schedule, started as early as a slot is free.
        scheduler = Scheduler(comps, [i for i in session.affected if i in to_run], prediction.latency,
                              jobs, session.spec.pools, opts.keep_going, executor, hooks,
                              prediction.worlds, prediction.world_latency)
        hooks.scheduler = scheduler
        hooks.executor = executor
        reporter.started(executor.worlds_setting_up)
        try:
            settled = scheduler.run()
        finally:
            executor.close()
            self.groups.close()  # all it started has ended or been killed
            signal.set_wakeup_fd(old_wakeup)
            for s in old_handlers:  # the outcome is decided: a signal now changes it no more
                signal.signal(s, self._late_signal)
            os.close(wake_r)
            os.close(wake_w)
            scheduler.take_setup_ends()  # those that ended as the executor closed
            hooks.print_finished()
            reporter.close()
            recorder.record_world_setups(executor.worlds_set_up())
            recorder.hash_discovered()
            recorder.rewritten_outputs()
            recorder.flush()
            recorder.cache.close(interrupted=hooks.signal is not None)
        if session.graph.paths_first:  # a build.ninja: ninja's logs told what ran, for ninja
            from farmer.build.ninja_logs import record_ran

            record_ran(os.fspath(session.spec.path), session.graph, hooks.outcomes, session.fresh_discovered,
                       self.farmer_dir)
        # The handlers stay recording: farmer exits right after, or `farmer watch` stops once
        # this build has returned (a ninja manifest rebuild runs the next build, which stops
        # before it runs anything).
        hooks.scheduler = hooks.executor = None  # no cycles: all of it goes once `run` returns
        outcomes, signum = hooks.outcomes, hooks.signal
        slots_of = scheduler.slots_of if opts.trace_file else {}
        world_spans = scheduler.world_spans
        # The end needs nothing else of the run, nor of the prediction but its makespan: their
        # tables go before it is made (at 100 000 computations, tens of MB).
        prediction.keep_makespan()
        del scheduler, hooks, recorder, executor, reporter, prediction, to_run
        # e.g. --remote-strict: the outputs are right, but the CI job fails, and
        # last-build.json says why
        failure = engines.failure() if signum is None else None
        code = self.finish(settled, outcomes, signum, slots_of, world_spans, failure)
        if failure and code == 1:
            print(f"farmer: error: {failure}", file=sys.stderr, flush=True)
        return code

    def _late_signal(self, signum: int, frame: object) -> None:
        """A signal once the outcome is decided: kept for whoever holds the lock next (the
        lock's `early`: a watch stops, a build that follows under it stops before running)."""
        self.early.append(signum)

    def _executor(self, to_run: dict[int, str], logs: str, wake_fd: int, warn, logs_new: bool,
                  threads: bool, wrap=None) -> Executor:
        """Processes; and worlds when the plan has a world task (not with --no-worlds,
        where each runs in a fresh python3). Every computation that can run is in the plan,
        so a plan without world tasks needs no world, nor the modules that drive them.
        `threads`: threads may start before the first command (executors/forked.py); `wrap`:
        what runs instead of a command's argv (the engines', `Composition.wrap`)."""
        from farmer.run.executors.process import ProcessExecutor

        opts, comps = self.opts, self.session.graph.computations
        executor = ProcessExecutor(logs, self.t0, opts.timeout, wake_fd, opts.load)
        executor.groups = self.groups
        executor.logs_new = logs_new
        executor.wrap = wrap  # before a fork (executors/forked.py): the starter has it too
        # (only a Farmfile that declares worlds has world tasks)
        if opts.no_worlds or not self.session.spec.worlds or all(comps[i].world is None for i in to_run):
            # (the console pool's commands run in farmer's process group, on its terminal)
            if opts.jobs > 1 and len(to_run) >= _FORK_FROM and not self._console(to_run):
                from farmer.run.executors.forked import forked

                return forked(executor, comps, wake_fd, at_once=threads,  # a starter a CPU
                              starters=min(opts.jobs, os.cpu_count() or 1))
            return executor
        from farmer.run.executors.composite import with_worlds

        return with_worlds(executor, self.session.spec, comps, to_run, logs, self.t0, opts.timeout,
                           warn, self.worlds, self.session.world_declared_fingerprint)

    def _console(self, to_run: dict[int, str]) -> bool:
        """Whether the plan runs a command of ninja's console pool (only a build.ninja has
        one: a Farmfile's graph is not looked through)."""
        comps = self.session.graph.computations
        return self.session.graph.paths_first and any(comps[i].ninja and comps[i].ninja.console
                                                      for i in to_run)

    def finish(self, settled: dict[int, Settled], outcomes: dict[int, Outcome],
               signum: int | None, slots_of: dict[int, list[int]], world_spans: list[WorldSpan],
               failure: str | None = None) -> int:
        """The end of every build that got the lock: last-build.json, the trace, the summary.
        `settled`: how computations settled; every selected one not in it is up to date;
        `world_spans`: the worlds set up (or found warm); `failure`: an engine's problem that
        fails a build whose computations all succeeded (--remote-strict's remote error)."""
        session, opts = self.session, self.opts
        comps = session.graph.computations
        if not opts.dry_run:  # what was hashed this build need not be hashed the next
            session.state.save([], [], [], session.digests.changed)
            session.digests.changed = {}
        wall = time.monotonic() - self.t0
        measured = Seconds(len(comps), session.affected)  # by index: no dict of floats at 100 000
        for i in session.affected:
            outcome = outcomes.get(i)
            if outcome is not None:
                measured[i] = outcome.end_s - outcome.start_s
        setups = self._measured_setups(world_spans)
        if setups is None:
            critical_s = max(critical.latencies(comps, session.affected, measured).values(), default=0.0)
        else:  # a set-up on the longest chain is part of it
            ran_latency, steps = critical.latencies_with_setups(comps, session.affected, measured, setups)
            critical_s = max(max(ran_latency.values(), default=0.0), max(steps.latency.values(), default=0.0))
        if signum is not None:
            status, code = "interrupted", 128 + signum
        elif any(s.status == FAILED for s in settled.values()):
            status, code = "failed", 1
        else:
            status, code = "ok", 0
        outputs_right = status == "ok"  # a remote error under --remote-strict leaves the outputs right
        if failure and status == "ok":
            status, code = "failed", 1
        counts = lastbuild.tally(len(session.selected), [(s.status, s.reason) for s in settled.values()])
        head = lastbuild.header(self.started_at, opts.jobs, status, wall, critical_s,
                                self.prediction.makespan_s, lastbuild.world_entries(world_spans))
        if failure:
            head["remote_error"] = failure
        lastbuild.write(self.farmer_dir, head, session.last_build_tasks(settled, outcomes))
        if opts.trace_file:
            from farmer.report.timeline import write_chrome_trace

            spans = [Span(i, slots_of[i], o.start_s, o.end_s) for i, o in outcomes.items() if i in slots_of]
            measured = {i: o.end_s - o.start_s for i, o in outcomes.items()}
            ran = [i for i in session.affected if i in outcomes]
            if setups is None:
                ran_latency = critical.expected_latency(comps, ran, measured)
                path: set[int | str] = set(critical.critical_path(comps, ran_latency))
            else:
                by_index, steps = critical.latencies_with_setups(comps, ran, measured, setups)
                path = set(critical.critical_steps(comps, by_index, steps))
            write_chrome_trace(opts.trace_file, spans, comps, path, "farmer build",
                               [w for w in world_spans if w.start_s is not None])
        ran = session.ran(outcomes) if outputs_right else None  # the no-op proof's
        if opts.front == "ninja":  # `farmer ninja` ends as ninja does
            from farmer.report.ninja_status import end_line

            line = None if opts.quiet and status == "ok" else end_line(counts, status)
        else:
            line = summary_line(counts, wall, critical_s, status)
        self.ending = (ran, line)
        return code

    def _measured_setups(self, spans: list[WorldSpan]) -> WorldSetups | None:
        """The worlds set up in this build as steps with their measured durations (the
        last set-up of each, if one restarted), for the critical path; None: none."""
        seconds = {w.world: w.end_s - w.start_s for w in spans
                   if w.start_s is not None and w.end_s is not None and w.status in ("ok", "failed")}
        if not seconds:
            return None
        from farmer.run.executors.simulated import WorldSetups

        worlds = self.session.spec.worlds
        return WorldSetups(seconds, {w: worlds[w].parent if w in worlds else None for w in seconds},
                           self.session.world_producers(seconds))

    def conclude(self) -> None:
        """After `run`: a good build's proof, then the summary line. Apart from `finish`, so
        that the proof is made once the scheduler, the recorder, the outcomes and the
        prediction are gone (at 100 000 computations, tens of MB it can reuse)."""
        if self.ending is None:
            return
        (ran, line), self.ending = self.ending, None
        self.prediction = None  # type: ignore[assignment]
        if ran is not None:
            self.session.write_proof(self.farmer_dir, self.opts.targets, ran)
        if line is not None:
            print(line, flush=True)


def _sweep_fifo_dirs() -> None:
    from farmer.run.worlds.sweep import sweep

    sweep()

