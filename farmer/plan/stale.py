"""Stale outputs (SPEC §2): files an earlier build of the same Farmfile wrote as declared
outputs, which no computation of the current graph declares. A build removes them at its
start, each named on stderr, before its graph is final: a glob or a foreach that matched one
is matched again without it, so an incremental build sees the files a clean build would.
`farmer clean --dead` removes only those; `farmer build -n` and `farmer plan` list those a
build would remove first.

state.db keeps, per Farmfile, the outputs its graph declared when it was last made, with the
computation that declared each. A file is removed only if that computation's trace says
farmer wrote it with the content it has now: a file edited since, or one a build never
wrote (declared, never built), is the user's and is kept. A graph made from the same
Farmfile text and the same file listings as the last one recorded declares the same
outputs, so a build whose graph came from the graph cache usually looks no further.
"""

from __future__ import annotations

import os
import sys

from farmer.errors import UsageError
from farmer.files.digests import Digests, NotAFile, hash_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec
    from farmer.store.state import State

_ROUNDS = 10  # removing outputs a foreach matched may make more of them stale


def graph_key(spec: Spec, graph: Graph) -> str:
    """Equal for two graphs of the same Farmfile text over the same file listings."""
    return hash_text(graph.identify(), spec.digest or "", repr(sorted(graph.listings.items())))


def remove_stale(spec: Spec, graph: Graph, state: State, force: bool = False) -> list[str]:
    """Remove the stale outputs of `graph` (each named on stderr) and record what it
    declares; the paths removed. `force`: look even when the graph's key is the recorded one."""
    farmfile = os.fspath(spec.path)
    key = graph_key(spec, graph)
    if not force and state.declared_key(farmfile) == key:
        return []
    before = state.declared(farmfile)
    now = _declared_now(graph)
    stale, forget = _stale(spec, graph, state, before, now)
    removed: list[str] = []
    for path in stale:
        os.unlink(path)
        removed.append(path)
        print(f"farmer: removed stale output {path} (no computation declares it now)", file=sys.stderr)
    state.set_declared(farmfile, before, now, key, sorted(forget))
    return removed


def would_remove(spec: Spec, graph: Graph, state: State) -> list[str]:
    """The stale outputs a build of `graph` would remove first (`-n`, `plan`), reading
    `state` only. Removing them may make more stale (a foreach that matched one matches
    again without it): the build removes those too, which this cannot know beforehand.
    A build.ninja's graph has none (its stale outputs are ninja -t cleandead's)."""
    if graph.paths_first:
        return []
    farmfile = os.fspath(spec.path)
    if state.declared_key(farmfile) == graph_key(spec, graph):
        return []
    return _stale(spec, graph, state, state.declared(farmfile), _declared_now(graph))[0]


def _declared_now(graph: Graph) -> dict[str, str]:
    """Each output the graph declares, with the id of the computation that declares it."""
    comps = graph.computations
    return {path: comps[i].id for path, i in graph.producer.items() if comps[i].kind is not None}


def _stale(spec: Spec, graph: Graph, state: State, before: dict[str, str],
           now: dict[str, str]) -> tuple[list[str], set[str]]:
    """The outputs declared `before` and not `now` that farmer wrote with the content they
    have today (the files to remove), and the computations gone from the graph (whose
    traces to forget)."""
    gone = [(path, cid) for path, cid in before.items() if path not in now]
    stale: list[str] = []
    forget: set[str] = set()
    if not gone:
        return stale, forget
    real_root = os.path.realpath(spec.root)
    digests = Digests({})
    traces: dict[str, dict[str, str]] = {}
    for path, cid in gone:
        if cid not in traces:
            trace = state.trace(cid)
            traces[cid] = dict(trace.outputs) if trace is not None else {}
        if cid not in graph.by_id:
            forget.add(cid)  # its computation is gone: nothing will match its trace
        written = traces[cid].get(path)
        if written is None:
            continue
        folder = os.path.realpath(os.path.dirname(os.path.join(spec.root, path)))
        if folder != real_root and not folder.startswith(real_root + os.sep):
            raise UsageError(f"stale output {path!r} leads outside the project root through "
                             "a symlink; remove it by hand if it is yours")
        try:
            if digests.digest(path) != written:
                continue  # missing, or edited since farmer wrote it: not farmer's to remove
        except NotAFile:
            continue
        stale.append(path)
    return stale, forget


def sweep(spec: Spec, graph: Graph, reload: Callable[[], tuple[Spec, Graph]], state: State,
          force: bool = False) -> tuple[Spec, Graph, int]:
    """Remove stale outputs (the caller holds the lock and has `state` open: the build's
    own, so that state.db is opened once), and make the graph again while that changed
    what it matched (`reload()` makes it); the graph and how many went. `force`: look even
    when the graph's key is the one recorded (`clean --dead`)."""
    count = 0
    for _ in range(_ROUNDS):
        removed = remove_stale(spec, graph, state, force)
        if not removed:
            break
        count += len(removed)
        spec, graph = reload()
    return spec, graph, count


def open_state(farmer_dir: str) -> State:
    """The build's state.db (farmer/store/state.py), its warnings said on stderr."""
    from farmer.store.state import State

    state = State(farmer_dir)
    for warning in state.warnings:
        print(f"farmer: warning: {warning}", file=sys.stderr)
    return state


def clean_dead(spec: Spec, graph: Graph, reload: Callable[[], tuple[Spec, Graph]]) -> str:
    """`farmer clean --dead`: only the stale outputs; the summary line."""
    from farmer.files.lock import ProjectLock

    farmer_dir = os.path.join(spec.root, ".farmer")
    with ProjectLock(farmer_dir):
        state = open_state(farmer_dir)
        try:
            count = sweep(spec, graph, reload, state, force=True)[2]
        finally:
            state.close()
    return f"farmer: removed {count} stale outputs"
