"""The world processes of one build: started (a root world spawned, a child world forked by
its parent, or a warm one adopted), spoken to, read, and released. `WorldExecutor`
(world.py) runs tasks in them: what a world says (`_handle`) and how its end settles its
tasks (`_end`) are its business."""

from __future__ import annotations

import json
import os
import selectors
import time
from collections.abc import Callable
from pathlib import Path

from farmer.files.private import make_dir, open_file
from farmer.run.executors.world_setups import SetupSteps
from farmer.run.executors.world_warm import Adoption, move
from farmer.run.worlds.link import Job, Proc, spawn
from farmer.run.worlds.manager import FifoDir, WarmWorlds, WorldTree
from farmer.run.worlds.protocol import ProtocolError


class WorldProcesses:
    """The processes serving a build's worlds: `current` (world -> its process now) and
    `procs` (every process not ended yet)."""

    def __init__(self, tree: WorldTree, root: str, logs: str | os.PathLike, t0: float,
                 selector: selectors.BaseSelector, warm: WarmWorlds | None,
                 fingerprint: Callable[[str], str | None] | None) -> None:
        self.tree = tree
        self.root = root
        self.logs = Path(logs)
        self.selector = selector
        self.warm = warm
        self.adoption = Adoption(warm, tree, root, fingerprint) if warm is not None else None
        self.fifos = warm.fifos if warm is not None else FifoDir(os.path.join(root, ".farmer"))
        self.current: dict[str, Proc] = {}  # the process serving each world now
        self.procs: list[Proc] = []  # every process not ended yet
        self.setups = SetupSteps(t0)  # world set-ups, measured, and their ends for the scheduler
        self.stopping = False
        self._next_id = 0
        self._logs_begun: set[str] = set()

    def _handle(self, proc: Proc, msg: dict) -> None:
        """What `proc` said (one message)."""
        raise NotImplementedError

    def _end(self, proc: Proc) -> None:
        """The process is gone (or is made to go): settle everything that depended on it."""
        raise NotImplementedError

    # -- starting worlds ------------------------------------------------------------------

    def _ensure(self, name: str) -> Proc:
        """The process of world `name`, started (with its ancestors) if none is."""
        proc = self.current.get(name)
        if proc is not None and proc.error is None:
            return proc
        if proc is not None:  # being killed: its jobs come back through its end
            del self.current[name]
        if self.adoption is not None:
            proc = self.adoption.adopt(name, self._ensure)
            if proc is not None:
                move(proc, self.adoption.warm.selector, self.selector,
                     lambda _fd, p=proc: self._read(p), lambda _fd, p=proc: self._exited(p))
                self.current[name] = proc
                self.procs.append(proc)
                return proc
            self.adoption.started(name)
        parent_name = self.tree.parent(name)
        parent = self._ensure(parent_name) if parent_name is not None else None
        base = self.fifos.pair(name)
        # Our read end first: the world's open of its write end then does not block.
        out_fd = os.open(base + ".out", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        proc = Proc(name, base, out_fd, parent, self.selector)
        self.setups.begin(proc)
        self.selector.register(out_fd, selectors.EVENT_READ, lambda _fd, p=proc: self._read(p))
        self.current[name] = proc
        self.procs.append(proc)
        if parent is None:
            try:
                self._spawn(proc)
            except OSError:
                self._release(proc)
                raise
        elif parent.state == "ready":
            self._fork_world(parent, proc)
        else:
            parent.pending_children.append(proc)
        return proc

    def _world_log(self, name: str) -> str:
        """The world's own output (setup prints, its tracebacks); a restart appends."""
        path = self.logs / "worlds" / f"{name}.log"
        if name not in self._logs_begun:
            make_dir(str(path.parent))
            os.close(open_file(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
            self._logs_begun.add(name)
        return str(path)

    def _spawn(self, proc: Proc) -> None:
        node = self.tree.nodes[proc.name]
        self.setups.began(proc.name)
        spawn(proc, self.root, json.dumps(node.setup), {**os.environ, **node.env},
              self._world_log(proc.name))
        if proc.pidfd is not None:
            self.selector.register(proc.pidfd, selectors.EVENT_READ,
                                   lambda _fd, p=proc: self._exited(p))

    def _fork_world(self, parent: Proc, proc: Proc) -> None:
        node = self.tree.nodes[proc.name]
        self.setups.began(proc.name)
        proc.spawn_job = self._new_id()
        parent.forked_worlds[proc.spawn_job] = proc
        self._send(parent, "world", job=proc.spawn_job, name=proc.name, base=proc.base,
                   setup=node.setup, env=node.env, log=self._world_log(proc.name))

    def _send(self, proc: Proc, kind: str, **fields: object) -> None:
        if proc.error is not None:
            return  # it is being killed; its EOF brings the retries
        try:
            proc.send(kind, **fields)
        except OSError as e:  # dead or hung: make sure it is dead
            proc.error = f"cannot send it {kind}: {e.strerror or e}"
            proc.kill()

    def _new_id(self) -> int:
        if self.warm is not None:
            self.warm.next_id += 1
            return self.warm.next_id
        self._next_id += 1
        return self._next_id

    # -- what worlds say, and their ends ----------------------------------------------------

    def _read(self, proc: Proc) -> None:
        if proc.eof:
            return
        try:
            messages, at_eof = proc.read()
        except ProtocolError as e:  # garbage: the world is broken, never waited for
            messages, at_eof = [], True
            proc.error = f"protocol error: {e}"
            proc.kill()
        for msg in messages:
            self._handle(proc, msg)
        if at_eof and not proc.eof:
            proc.stop_reading()
            self._after_eof(proc)

    def _exited(self, proc: Proc) -> None:
        """A root world's pidfd fired (or, without pidfds, a poll): once it is reaped, its
        FIFO holds all it said; read that, then settle what depended on it."""
        if proc.state != "ended" and proc.reap(block=False):
            self._read(proc)
            self._end(proc)

    def _after_eof(self, proc: Proc) -> None:
        if self.stopping:
            return  # `stop` reports and releases everything itself
        if proc.parent is None:
            if proc.reap(block=False):
                self._end(proc)
        elif proc.closing_normally and not proc.jobs or proc.status is not None \
                or proc.parent.state == "ended":
            self._end(proc)  # a child world's status comes from its parent's `done`
        if proc.state != "ended":
            proc.eof_at = time.monotonic()  # the status may still come; `tick` ends it

    def _release(self, proc: Proc) -> None:
        """Forget a process: its descriptors, FIFOs and (for a root world) its zombie."""
        if proc.state == "ended":
            return
        # (one stopped as no longer needed did not fail: its tasks were found up to date)
        self.setups.over(proc, "cancelled" if proc.error == "no longer needed" else "failed")
        proc.close()
        proc.state = "ended"
        proc.eof_at = None
        self.fifos.remove(proc.base)
        if proc in self.procs:
            self.procs.remove(proc)
        if self.current.get(proc.name) is proc:
            del self.current[proc.name]

    def _stranded(self, proc: Proc) -> list[Job]:
        """Jobs waiting on `proc`, and on child worlds it was to fork and never did."""
        jobs, proc.waiting = proc.waiting, []
        children = proc.pending_children + [c for c in proc.forked_worlds.values() if c.pid is None]
        proc.pending_children = []
        for child in children:
            jobs += self._stranded(child)
            child.kill_when_forked = True
            self._release(child)
        return jobs
