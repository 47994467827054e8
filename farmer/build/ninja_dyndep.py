"""dyndep in a build.ninja: when each dyndep file is read, and the graph it amends.

An edge with `dyndep = FILE` learns more implicit inputs and outputs (Fortran and C++20
modules: which module files a compile writes and which it reads) from FILE, which another
edge writes (CMake's and Meson's scanners). ninja reads FILE once its producer has run,
during the build. farmer brings the dyndep files up to date before the build instead, in
rounds: a round builds every dyndep file whose producer does not depend on an edge whose own
dyndep file is not yet read (a program's module list waits for its library's compiles),
then reads them and makes the graph again from the manifest with what they add; the build
itself then runs on the complete graph, in which the producers are up to date. Commands that
build nothing (`plan`, `-n`, `query`, `graph`) read the dyndep files that exist.
"""

from __future__ import annotations

from farmer.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.build.request import BuildRequest
    from farmer.files.lock import ProjectLock
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec
    from farmer.store.state import State

_MAX_ROUNDS = 64


def files(graph: Graph) -> dict[str, list[int]]:
    """The dyndep files the graph's edges name, each with the edges that name it."""
    out: dict[str, list[int]] = {}
    for comp in graph.computations:
        edge = comp.ninja
        if edge is not None and edge.dyndep is not None:
            out.setdefault(edge.dyndep, []).append(comp.index)
    return out


def amended(spec: Spec, graph: Graph, only: set[str] | None = None) -> Graph:
    """The graph made again from the manifest with what its dyndep files that exist say
    (`only`: of these files alone); `graph` itself when no edge names one."""
    named = files(graph)
    if not named:
        return graph
    from farmer.graph.ninja_edges import build_graph
    from farmer.manifest import ninja_dyndep
    from farmer.manifest.ninja_parser import parse_manifest

    manifest = parse_manifest(spec.path)
    restat: set[int] = set()
    for path, users in named.items():
        if only is not None and path not in only:
            continue
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                text = f.read()
        except FileNotFoundError:
            continue  # not made yet: the edges that name it wait for its producer
        except OSError as e:
            raise UsageError(f"{path}: cannot read the dyndep file: {e.strerror}") from None
        bindings = ninja_dyndep.parse(path, text)
        for b in bindings:
            i = manifest.producer.get(b.output)
            if i is not None and i not in users:
                raise UsageError(f"{b.where}: '{b.output}' is not made by an edge with dyndep = {path}")
        restat |= ninja_dyndep.apply(manifest, bindings)
    _, new, _ = build_graph(manifest)
    for i in restat:
        edge = new.computations[i].ninja
        if edge is not None:
            edge.restat = True
    return new


def prepare(spec: Spec, graph: Graph, opts: BuildRequest, lock: ProjectLock, state: State,
            plan_targets: Callable[[Spec, Graph, list[str], State], dict[int, str]],
            rebase: Callable[[Graph], Graph]) -> tuple[Graph, int]:
    """Bring the dyndep files up to date and read them, in rounds (the module's docstring).
    Returns the complete graph and the exit code of the rounds' builds (0: go on).
    `plan_targets`: what a build of some targets would run (build/ninja.py's); `rebase`: a
    graph made again, its commands rewritten for --base-dir as the first one's were."""
    from farmer.build.run import run_build

    named = files(graph)
    if not named:
        return graph, 0
    read: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        pending = [f for f in named if f not in read]
        if not pending:
            break
        ready = [f for f in pending if not _waits(graph, f, read)]
        if not ready:
            stuck = ", ".join(sorted(pending)[:3])
            raise UsageError(f"{spec.path}: dyndep files depend on each other's edges: {stuck}")
        targets = [f for f in ready if f in graph.producer]
        if targets and plan_targets(spec, graph, targets, state):
            code = run_build(spec, graph, opts.replace(targets=targets, trace_file=None), lock, state)
            if code != 0:
                return graph, code
        read.update(ready)
        graph = rebase(amended(spec, graph, read))
        named = files(graph)
    return graph, 0


def _waits(graph: Graph, path: str, read: set[str]) -> bool:
    """Whether the producer of the dyndep file `path` depends on an edge whose dyndep file
    is not read yet."""
    comps = graph.computations
    start = graph.producer.get(path)
    if start is None:
        return False
    seen = {start}
    stack = [start]
    while stack:
        comp = comps[stack.pop()]
        edge = comp.ninja
        if edge is not None and edge.dyndep is not None and edge.dyndep not in read and comp.index != start:
            return True
        for p in comp.producers:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return False
