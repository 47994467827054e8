"""Worlds kept warm between builds (`farmer watch`, `farmer serve`) as one build uses them:
a kept world adopted while it is alive and idle, a fork of the process serving its parent
now, set up under the fingerprint its world has now, and unchanged what its set-up read;
handed back at the build's end with the fingerprint it was started or adopted under."""

from __future__ import annotations

import os
import selectors
from collections.abc import Callable

from farmer.run.worlds.link import Proc
from farmer.run.worlds.manager import WarmWorlds, WorldTree
from farmer.run.worlds.protocol import ProtocolError

_TICK_NS = 20_000_000  # time stamps lag the clock by up to a kernel tick (cache/use.py's margin)

Callback = Callable[[int], None]  # what a selector's key calls with its descriptor


class Adoption:
    """The keeper's worlds, taken by one build's world executor and given back."""

    __slots__ = ("fingerprint", "fingerprints", "root", "tree", "warm")

    def __init__(self, warm: WarmWorlds, tree: WorldTree, root: str,
                 fingerprint: Callable[[str], str | None] | None) -> None:
        self.warm = warm
        self.tree = tree
        self.root = root
        self.fingerprint = fingerprint
        self.fingerprints: dict[str, str | None] = {}  # as each world was started or adopted

    def adopt(self, name: str, ensure: Callable[[str], Proc]) -> Proc | None:
        """The kept process of world `name`, if it is alive, a fork of the process serving
        its parent now (`ensure(parent)`, which may raise OSError), and set up under the
        fingerprint the world has now; still on the keeper's selector."""
        kept = self.warm.take(name)
        if kept is None:
            return None
        proc, was = kept
        parent_name = self.tree.parent(name)
        try:
            parent = ensure(parent_name) if parent_name is not None else None
        except OSError:  # no parent to be a fork of: neither is this one
            self.warm.discard(proc)
            raise
        now = self.fingerprint(name) if self.fingerprint else None
        if now is None or now != was or proc.parent is not parent or not idle_alive(proc) \
                or not setup_reads_hold(self.root, proc.setup_reads):
            self.warm.discard(proc)
            return None
        self.fingerprints[name] = now
        return proc

    def started(self, name: str) -> None:
        """World `name` is started afresh: it is kept, later, under its fingerprint now."""
        self.fingerprints[name] = self.fingerprint(name) if self.fingerprint else None

    def hand_back(self, proc: Proc, selector: selectors.BaseSelector) -> None:
        """`proc`, idle and ready, off the build's `selector` and to the keeper."""
        move(proc, selector, self.warm.selector)
        self.warm.keep(proc, self.fingerprints.get(proc.name) or "")


def move(proc: Proc, old: selectors.BaseSelector, new: selectors.BaseSelector,
         on_output: Callback | None = None, on_exit: Callback | None = None) -> None:
    """Its descriptors from one selector to the other: a build's, with its executor's
    callbacks, or the keeper's between builds (no callbacks)."""
    for fd, callback in ((proc.out_fd, on_output), (proc.pidfd, on_exit)):
        if fd is not None and not (fd == proc.out_fd and proc.eof):
            old.unregister(fd)
            new.register(fd, selectors.EVENT_READ, callback)
    proc.selector = new


def idle_alive(proc: Proc) -> bool:
    """Whether a kept world lived through the time between builds. An idle world says
    nothing then but, for a child world it forked that ended, `done`."""
    if proc.parent is None and proc.reap(block=False):
        return False
    try:
        messages, at_eof = proc.read()
    except ProtocolError:
        return False
    for msg in messages:
        if msg["t"] != "done" or proc.forked_worlds.pop(msg["job"], None) is None:
            return False
    return not at_eof


def setup_reads_hold(root: str, reads: list | None) -> bool:
    """Whether every file a kept world's setup read (`reads`: [began_ns, paths], as its
    `ready` said) is unchanged since the setup began: its change time, which nothing sets
    back, is older than that (by a kernel tick, by which time stamps lag the clock). Its
    fingerprint leaves them out."""
    if reads is None:
        return True  # (a world of a driver that does not say: nothing read is known)
    began, paths = reads
    for path in paths:
        try:
            if os.stat(os.path.join(root, path)).st_ctime_ns >= began - _TICK_NS:
                return False
        except OSError:
            return False
    return True
