"""Runs world tasks in persistent world processes (SPEC §1 "Worlds").

A world process starts when the scheduler starts its set-up, a step of the schedule ahead of
its tasks (`start_setup`; or when a task needs a world that is not running, one that died):
a root world is spawned (posix_spawn, its own process group) running the driver; a child
world is forked by its parent world. farmer waits for `ready` on the world's `.out` FIFO,
then writes commands to its `.in` FIFO: a fork-job while the world has other futures, an
execute-job for its last one. Outputs of every world arrive on the build's one selector (the
process executor's), so world tasks obey `-j`, priorities and pools like any computation.

Faults. A world that dies (EOF on its `.out` with tasks on it, or garbage on it) takes its
process group and its running jobs' groups down; its running and waiting tasks are retried
once on a restarted world, then fail as `world NAME died (...)`. A setup that raises fails
every task of the world and of its descendants with the traceback in their logs (and said
once, through `warn`). `stop()`
kills every world and job group it knows, reads the FIFOs for pids announced meanwhile,
and repeats until nothing new turns up.

Beside this module: the processes themselves (started, written to, read, released) in
world_procs.py, set-ups as schedule steps in world_setups.py, and the worlds `farmer watch`
and `farmer serve` keep warm between builds in world_warm.py.
"""

from __future__ import annotations

import os
import selectors
import shlex
import time
from collections.abc import Callable

from farmer.files.private import open_file
from farmer.graph.graph import Computation
from farmer.manifest.spec import WorldSpec
from farmer.run.executors.base import (
    SETUP_STARTED,
    SETUP_WARM,
    Executor,
    Outcome,
    SetupEnd,
)
from farmer.run.executors.process import drop_empty_log, log_path, reads_path
from farmer.run.executors.world_procs import WorldProcesses
from farmer.run.worlds.link import Job, Proc, code_of, killpg, status_text
from farmer.run.worlds.manager import Futures, WarmWorlds, WorldTree

_STATUS_WAIT_S = 1.0  # after EOF, how long to wait for the exit status of a dead world


class WorldExecutor(WorldProcesses, Executor):
    def __init__(self, worlds: dict[str, WorldSpec], root: str | os.PathLike,
                 logs: str | os.PathLike, t0: float, timeout: float | None,
                 selector: selectors.BaseSelector, comps: list[Computation], expected: list[int],
                 warn: Callable[[str], None], warm: WarmWorlds | None = None,
                 fingerprint: Callable[[str], str | None] | None = None) -> None:
        """`warm`: worlds kept from earlier builds (`farmer watch`): adopted while their
        `fingerprint` holds, handed back at `close`, and no task runs in a world process
        itself, which must outlive the build."""
        WorldProcesses.__init__(self, WorldTree(worlds), str(root), logs, t0, selector, warm, fingerprint)
        world_of = {c.index: c.world for c in comps if c.world is not None}
        self.futures = Futures(self.tree, world_of, expected)
        self.t0 = t0
        self.default_timeout = timeout
        self.warn = warn
        self.setup_failed: dict[str, str] = {}  # world -> traceback of its setup
        self.broken: dict[str, str] = {}  # world -> why (it died twice before `ready`)
        self.setup_deaths: dict[str, int] = {}
        self._finished: list[Outcome] = []
        self._warned: set[str] = set()

    # -- the executor protocol --------------------------------------------------------

    def start(self, comp: Computation) -> None:
        timeout = comp.timeout if comp.timeout is not None else self.default_timeout
        self.futures.add(comp.index)
        self._submit(Job(comp, time.monotonic(), timeout))

    def discard(self, index: int) -> None:
        world = self.futures.remove(index)
        if world is not None:
            self._close_unneeded(world)

    def running(self) -> int:
        return sum(len(p.jobs) + len(p.waiting) for p in self.procs) + len(self._finished)

    def start_setup(self, world: str) -> str:
        """The world's set-up as a step of the schedule, before its first task starts (a
        task started later joins it, or finds it ready)."""
        now = time.monotonic()
        for name in self.tree.chain(world):
            if name in self.setup_failed or name in self.broken:  # its tasks fail with why
                self.setups.failed(world, now)
                return SETUP_STARTED
        said = self.setups.said()
        try:
            proc = self._ensure(world)
        except OSError:  # its tasks fail with why, as when they start it
            if not self.setups.said_of(world, said):  # (or its process said it)
                self.setups.failed(world, now)
            return SETUP_STARTED
        return SETUP_WARM if proc.state == "ready" else SETUP_STARTED

    def setups_ended(self) -> list[SetupEnd]:
        return self.setups.take()

    def worlds_setting_up(self) -> dict[str, float]:
        return self.setups.setting_up(self.current)

    def worlds_set_up(self) -> dict[str, float | None]:
        return self.setups.set_up(self.current)

    def take(self) -> list[Outcome]:
        done, self._finished = self._finished, []
        return done

    def next_deadline(self) -> float | None:
        times = [j.deadline for p in self.procs for j in p.jobs.values()
                 if j.deadline is not None and j.killed_for is None]
        times += [p.eof_at + _STATUS_WAIT_S for p in self.procs if p.eof_at is not None]
        if any(p.parent is None and p.pidfd is None and not p.reaped for p in self.procs):
            times.append(time.monotonic() + 0.05)  # no pidfd: poll for its exit
        return min(times, default=None)

    def tick(self) -> None:
        """Timeouts, and ends of worlds whose exit status is not coming."""
        now = time.monotonic()
        for p in list(self.procs):
            for job in list(p.jobs.values()):
                if job.deadline is not None and now >= job.deadline and job.killed_for is None:
                    job.killed_for = f"timeout after {job.timeout:g} s"
                    self._kill_job(p, job)
            if p.parent is None and p.pidfd is None and p.pid and not p.reaped:
                self._exited(p)
            if p.eof_at is not None and now >= p.eof_at + _STATUS_WAIT_S and p.state != "ended":
                self._end(p)

    def stop(self) -> None:
        """Kill every world and every job, then report each job as interrupted."""
        self.stopping = True
        killed: set[int] = set()
        while True:
            worlds = [p for p in self.procs if p.pid and p.pid not in killed]
            jobs = {j.pid for p in self.procs for j in p.jobs.values() if j.pid} - killed
            if not worlds and not jobs:
                break
            for pid in [p.pid for p in worlds if p.pid] + list(jobs):
                killpg(pid)
                killed.add(pid)
            deadline = time.monotonic() + 1.0
            for p in worlds:
                # Once it is gone, everything it said is in its FIFO: a `forked` it wrote
                # just before it died names a group to kill in the next round.
                p.wait_gone(deadline)
                self._read(p)
        for p in list(self.procs):
            for job in [*p.jobs.values(), *p.waiting]:
                self._report(job, False, job.killed_for or "interrupted", None)
            p.jobs.clear()
            p.waiting.clear()
            self._release(p)

    def close(self) -> None:
        """End of the build: close idle worlds (or keep them warm), give them a moment to
        exit (their setup's exit handlers run), then kill whatever is left."""
        if self.adoption is not None and not self.stopping:
            for p in list(self.procs):
                if p.state == "ready" and not p.jobs and not p.waiting and p.error is None:
                    self.procs.remove(p)
                    if self.current.get(p.name) is p:
                        del self.current[p.name]
                    self.adoption.hand_back(p, self.selector)
        if not self.stopping:
            for p in list(self.procs):
                if p.state == "ready" and not p.jobs and not p.waiting:
                    self._send(p, "close")
                    p.state, p.closing_normally = "closing", True
            deadline = time.monotonic() + 2.0
            while self.procs and all(p.state == "closing" and not p.jobs for p in self.procs) \
                    and time.monotonic() < deadline:
                for key, _ in self.selector.select(0.05):
                    if callable(key.data):  # ours; the process executor's keys wait for it
                        key.data(key.fd)
                self.tick()
        if self.procs:
            self.stop()
        self._finished = []
        if self.warm is None:
            self.fifos.close()

    # -- starting worlds and sending work ----------------------------------------------

    def _submit(self, job: Job) -> None:
        world = job.comp.world
        assert world is not None
        for name in self.tree.chain(world):
            if name in self.setup_failed:
                self._fail_setup(job, name)
                return
            if name in self.broken:
                self._report(job, False, f"world {name} died ({self.broken[name]})",
                             f"farmer: world {name} died twice while setting up ({self.broken[name]}); "
                             "see its log in .farmer/logs/worlds/\n")
                return
        try:
            proc = self._ensure(world)
        except OSError as e:  # no FIFO, no process: as a command that cannot start
            self._report(job, False, f"world {world} died (cannot start: {e.strerror or e})",
                         f"farmer: cannot start world {world}: {e}\n")
            return
        if proc.state == "ready":
            self._dispatch(proc, job)
        else:
            proc.waiting.append(job)

    def _dispatch(self, proc: Proc, job: Job) -> None:
        comp = job.comp
        try:
            args = shlex.split(comp.action or "")
        except ValueError as e:  # as python3 would refuse its command line
            self._report(job, False, "exit 2", f"farmer: cannot split the python line: {e}\n",
                         exit_code=2)
            return
        job.id = self._new_id()
        last = self.warm is None and self.futures.is_last(proc.name) and not proc.jobs \
            and not proc.waiting and not proc.forked_worlds and not proc.pending_children
        job.mode = "exec" if last else "fork"
        job.dispatched = time.monotonic()
        job.ran = True
        job.deadline = job.dispatched + job.timeout if job.timeout else None
        proc.jobs[job.id] = job
        self._send(proc, "run", job=job.id, args=args,
                   log=str(log_path(self.logs, comp.id)), env=comp.env, mode=job.mode,
                   reads=reads_path(self.logs, comp.id))
        if last:  # the world ends with this job; a later task starts a new one
            proc.state = "closing"
            proc.closing_normally = True
            if self.current.get(proc.name) is proc:
                del self.current[proc.name]

    # -- what worlds say -------------------------------------------------------------

    def _handle(self, proc: Proc, msg: dict) -> None:
        kind = msg["t"]
        if kind == "forked":
            job = proc.jobs.get(msg["job"])
            child = proc.forked_worlds.get(msg["job"])
            if job is not None:
                job.pid = msg["pid"]
                if job.killed_for is not None or self.stopping:
                    killpg(job.pid)
            elif child is not None:
                child.pid = msg["pid"]
                if child.kill_when_forked or self.stopping:
                    killpg(child.pid)
        elif self.stopping:
            return  # only pids matter now
        elif kind == "ready":
            self._ready(proc, msg)
        elif kind == "done":
            self._done(proc, msg)
        elif kind == "setup-failed":
            self.setup_failed[proc.name] = msg["traceback"]
            self.setups.over(proc, "failed")
            # Said once here; each task that cannot run gets one line (and the traceback in
            # its log), not the traceback again.
            self.warn(f"farmer: the setup of world {proc.name} failed, so no task of it (or of a "
                      f"world forked from it) can run:\n{msg['traceback'].rstrip()}")
            for job in self._stranded(proc):
                self._fail_setup(job, proc.name)
            proc.state = "closing"  # it exits by itself
            proc.closing_normally = True
            if self.current.get(proc.name) is proc:
                del self.current[proc.name]
        elif kind == "error":
            proc.error = f"it could not read farmer's command: {msg['message']}"
        else:
            proc.error = f"protocol error: a world does not send {kind!r}"
            proc.kill()

    def _ready(self, proc: Proc, msg: dict) -> None:
        if proc.state != "starting":
            return
        proc.state = "ready"
        self.setups.ready(proc.name)
        self.setups.over(proc, "ok")
        proc.pid = proc.pid or msg["pid"]
        proc.setup_reads = msg.get("reads")
        try:
            proc.open_input()
        except OSError as e:
            proc.error = f"cannot open its input FIFO: {e.strerror}"
            proc.kill()
            return
        if msg["threads"] > 1 and proc.name not in self._warned:
            self._warned.add(proc.name)
            self.warn(f"farmer: warning: world {proc.name}: its setup left {msg['threads'] - 1} "
                      "other thread(s) running; a fork copies only the forking thread, so tasks "
                      "may hang on locks those threads held. Stop them in setup, or use --no-worlds.")
        for child in proc.pending_children:
            self._fork_world(proc, child)
        proc.pending_children.clear()
        while proc.waiting and proc.state == "ready":
            self._dispatch(proc, proc.waiting.pop(0))
        self._close_unneeded(proc.name)

    def _done(self, proc: Proc, msg: dict) -> None:
        child = proc.forked_worlds.pop(msg["job"], None)
        if child is not None:  # a child world ended; its parent saw how
            child.status = status_text(msg["code"], msg["signal"])
            if child.state != "ended":
                self._read(child)
                self._end(child)
            return
        job = proc.jobs.pop(msg["job"], None)
        if job is None:
            return
        code, sig = msg["code"], msg["signal"]
        # What the task left running in its process group (`sleep 20 &`) goes with it, as
        # under Bazel; an execute-job's group is its world's, which ends with it anyway.
        if job.pid is not None:
            killpg(job.pid)
        if job.killed_for is not None:
            ok, reason = False, job.killed_for
        elif sig is not None:
            ok, reason = False, f"signal {sig}"
        else:
            ok, reason = code == 0, None if code == 0 else f"exit {code}"
        self._report(job, ok, reason, None, exit_code=-sig if sig is not None else code,
                     wall=msg["wall"], cpu=msg["cpu"], rss_kb=msg["rss_kb"])
        self._close_unneeded(proc.name)

    # -- ends of worlds -----------------------------------------------------------------

    def _end(self, proc: Proc) -> None:
        """The process is gone (or is made to go): settle everything that depended on it."""
        if proc.state == "ended" or self.stopping:
            return
        was_ready = proc.in_fd is not None
        normal = proc.closing_normally and not proc.jobs and proc.error is None
        if not normal:
            proc.kill()
        self._release(proc)
        if normal or self.stopping:
            return
        why = proc.error or proc.status or "its FIFO closed"
        retry: list[Job] = []
        for job in list(proc.jobs.values()):
            if job.pid is not None:
                killpg(job.pid)
            if job.mode == "exec" and job.killed_for is None and proc.status and not proc.error:
                # The job ran in the world process itself: how the process ended is how the
                # job ended, as for a fresh python3 (no retry).
                self._report(job, False, proc.status, None, exit_code=code_of(proc.status))
            elif job.killed_for is not None:
                self._report(job, False, job.killed_for, None)
            else:
                retry.append(job)
        proc.jobs.clear()
        retry += self._stranded(proc)
        self._retry(proc, retry, why, was_ready)

    def _retry(self, proc: Proc, jobs: list[Job], why: str, was_ready: bool) -> None:
        before_ready = not was_ready
        # (a world killed as no longer needed did not die; one set up ahead of its tasks,
        # as a step of the schedule, has no jobs yet and did)
        if before_ready and (jobs or proc.error != "no longer needed"):
            self.setup_deaths[proc.name] = self.setup_deaths.get(proc.name, 0) + 1
            if self.setup_deaths[proc.name] >= 2:
                self.broken[proc.name] = why
        for job in jobs:
            job.hits += 1
            job.id, job.pid, job.dispatched, job.deadline = 0, None, None, None
            if job.hits >= 2:
                when = "while setting up" if before_ready else "while this task ran or waited in it"
                self._report(job, False, f"world {proc.name} died ({why})",
                             f"farmer: world {proc.name} died {when} ({why}), and again on the "
                             f"restarted world; see .farmer/logs/worlds/{proc.name}.log\n")
            else:
                self._submit(job)

    def _close_unneeded(self, world: str) -> None:
        if self.warm is not None:
            return  # kept for the next build
        for name in self.futures.closable(world):
            proc = self.current.get(name)
            if proc is None or proc.jobs or proc.waiting:
                continue
            del self.current[name]
            proc.closing_normally = True
            if proc.state == "ready":
                self._send(proc, "close")
                proc.state = "closing"
            else:  # still setting up, and no longer needed
                proc.state = "closing"
                proc.error = proc.error or "no longer needed"
                proc.kill()
                if proc.parent is not None and proc.pid is None:
                    proc.kill_when_forked = True
                    if proc in proc.parent.pending_children:
                        proc.parent.pending_children.remove(proc)
                        self._release(proc)

    # -- kills and reports -------------------------------------------------------------

    def _kill_job(self, proc: Proc, job: Job) -> None:
        if job.mode == "exec":
            proc.kill()  # the job is the world process itself
        elif job.pid is not None:
            killpg(job.pid)

    def _fail_setup(self, job: Job, world: str) -> None:
        self._report(job, False, f"world {world} setup failed",
                     f"farmer: the setup of world {world} failed, so this task did not run:\n"
                     + self.setup_failed[world])

    def _report(self, job: Job, ok: bool, reason: str | None, note: str | None,
                exit_code: int | None = None, wall: float | None = None,
                cpu: float | None = None, rss_kb: int | None = None) -> None:
        comp = job.comp
        if note is not None:  # after the task's own output when it ran, else alone
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if job.ran else os.O_TRUNC)
            with os.fdopen(open_file(log_path(self.logs, comp.id), flags, 0o644), "w") as f:
                f.write(note)
        elif ok:
            drop_empty_log(log_path(self.logs, comp.id))
        end = time.monotonic()
        start = job.queued
        if wall is not None and job.dispatched is not None:
            start = max(job.dispatched, end - wall)  # the task's own run, not its world's setup
        self._finished.append(Outcome(comp.index, ok, reason, exit_code, start - self.t0,
                                      end - self.t0, cpu, rss_kb))
        world = self.futures.remove(comp.index)
        if world is not None and not self.stopping:
            self._close_unneeded(world)

