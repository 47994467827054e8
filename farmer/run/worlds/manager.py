"""The world tree and its futures: which worlds a task needs started, whether a task is a
fork-job or its world's last future (an execute-job), and when a world may close.

A world's *futures* are the computations of the world that will still run in this build:
first those the plan says will run, then each started one until it ends (a retry stays a
future). A world is needed while it or any descendant has a future: a child world is a fork
of its parent, so the parent must outlive it (a crashed child world restarts from the
parent). The I/O lives in `farmer.run.executors.world_procs`; this module only decides.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field

from farmer.files.lock import mark_fifos, unmark_fifos
from farmer.manifest.spec import WorldSpec
from farmer.run.worlds.sweep import PREFIX, fifo_parent, sweep

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.run.worlds.link import Proc


@dataclass(slots=True)
class WorldNode:
    name: str
    parent: str | None
    setup: list[str]  # its own lines; a child world runs them in a fork of its parent
    env: dict[str, str]  # its own variables, on top of its parent's
    children: list[str] = field(default_factory=list)


class WorldTree:
    def __init__(self, worlds: dict[str, WorldSpec]) -> None:
        self.nodes = {name: WorldNode(name, w.parent, list(w.setup), dict(w.env))
                      for name, w in worlds.items()}
        for node in self.nodes.values():
            if node.parent is not None:
                self.nodes[node.parent].children.append(node.name)

    def parent(self, name: str) -> str | None:
        return self.nodes[name].parent

    def chain(self, name: str) -> list[str]:
        """`name` and its ancestors, root first."""
        out: list[str] = []
        at: str | None = name
        while at is not None:
            out.append(at)
            at = self.nodes[at].parent
        out.reverse()
        return out

    def ancestors(self, name: str) -> list[str]:
        """The ancestors of `name`, nearest first."""
        return self.chain(name)[-2::-1]


class Futures:
    """Per world, how many of its computations may still run in this build."""

    def __init__(self, tree: WorldTree, world_of: dict[int, str], expected: Iterable[int]) -> None:
        self.tree = tree
        self.world_of = world_of  # computation index -> its world, for world tasks
        self.own: dict[str, int] = dict.fromkeys(tree.nodes, 0)
        self.counted: set[int] = set()
        for i in expected:
            self.add(i)

    def add(self, index: int) -> None:
        """A computation of a world will run (idempotent: the plan may have counted it)."""
        if index in self.world_of and index not in self.counted:
            self.counted.add(index)
            self.own[self.world_of[index]] += 1

    def remove(self, index: int) -> str | None:
        """It ended, or it will not run after all; its world, if it was counted."""
        if index not in self.counted:
            return None
        self.counted.discard(index)
        world = self.world_of[index]
        self.own[world] -= 1
        return world

    def needed(self, name: str) -> int:
        """Futures of `name` and of every world descending from it."""
        node = self.tree.nodes[name]
        return self.own[name] + sum(self.needed(c) for c in node.children)

    def is_last(self, name: str) -> bool:
        """Is the one future left in `name`'s subtree the task about to run? Then it runs in
        the world process itself, which ends with it (no fork, no copy-on-write)."""
        return self.needed(name) == 1 and self.own[name] == 1

    def closable(self, name: str) -> list[str]:
        """`name` and the ancestors that nothing pending needs any more, nearest first;
        stops at the first world still needed (its ancestors are needed then too)."""
        out = []
        for world in [name, *self.tree.ancestors(name)]:
            if self.needed(world) > 0:
                break
            out.append(world)
        return out


class FifoDir:
    """A fresh directory only the user can open (mode 0700, as `mkdtemp` makes it) for
    the worlds' FIFOs; removed at the end of the build whatever happened. `farmer_dir`: the
    project's `.farmer/`, marked while the directory exists (farmer/files/lock.py)."""

    def __init__(self, farmer_dir: str | None = None) -> None:
        self.path: str | None = None
        self.farmer_dir = farmer_dir
        self._count = 0

    def pair(self, world: str) -> str:
        """Make `BASE.in` and `BASE.out` for a new process of `world`; return BASE."""
        if self.path is None:
            where = fifo_parent()
            sweep(where)
            if self.farmer_dir is not None:
                mark_fifos(self.farmer_dir)
            self.path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=where)
            os.chmod(self.path, 0o700)  # mkdtemp does this already; the contract depends on it
        self._count += 1
        base = os.path.join(self.path, f"{world}.{self._count}")
        os.mkfifo(base + ".in", 0o600)
        os.mkfifo(base + ".out", 0o600)
        return base

    def remove(self, base: str) -> None:
        for suffix in (".in", ".out"):
            try:
                os.unlink(base + suffix)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
            if self.farmer_dir is not None:
                unmark_fifos(self.farmer_dir)


class WarmWorlds:
    """World processes kept between the builds of `farmer watch`: each idle and ready,
    with the fingerprint it was set up under, its descriptors on a selector of its own
    while no build runs, its FIFOs in one directory for the whole watch. A build adopts
    the ones whose fingerprint still holds (`farmer.run.executors.world_warm`); `close` kills the
    rest at the end of the watch. `farmer_dir`: the project's `.farmer/` (`FifoDir`)."""

    def __init__(self, farmer_dir: str | None = None) -> None:
        import selectors

        self.fifos = FifoDir(farmer_dir)
        self.selector = selectors.DefaultSelector()
        self.kept: dict[str, tuple[Proc, str]] = {}  # world -> its process, its fingerprint
        self.next_id = 0  # job ids, unique across builds: a kept world's forks keep theirs

    def keep(self, proc: Proc, fingerprint: str) -> None:
        self.kept[proc.name] = (proc, fingerprint)

    def retain(self, names: Iterable[str]) -> None:
        """Kill the kept worlds the Farmfile no longer declares."""
        keep = set(names)
        for proc, _ in [kept for name, kept in self.kept.items() if name not in keep]:
            if self.kept.get(proc.name, (None,))[0] is proc:
                self.discard(proc)

    def take(self, name: str) -> tuple[Proc, str] | None:
        return self.kept.pop(name, None)

    def discard(self, proc: Proc) -> None:
        """Kill a kept process and the kept worlds forked from it (a fork of a world that
        is gone, or that was set up from a stale one, must go too)."""
        doomed = [p for p, _ in self.kept.values() if _descends(p, proc)]
        for p in doomed if proc in doomed else [proc, *doomed]:
            if self.kept.get(p.name, (None,))[0] is p:
                del self.kept[p.name]
            p.kill()
            p.close()
            p.state = "ended"  # its parent's `done` for it, when it comes, is no news
            self.fifos.remove(p.base)

    def close(self) -> None:
        while self.kept:
            self.discard(next(iter(self.kept.values()))[0])
        self.selector.close()
        self.fifos.close()


def _descends(proc: Proc, ancestor: Proc) -> bool:
    at: Proc | None = proc
    while at is not None and at is not ancestor:
        at = at.parent
    return at is ancestor
