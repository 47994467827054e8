"""build.ninja support: `farmer build -f build.ninja` (or `--ninja`).

`load` reads a ninja manifest (lexer.py, parser.py) into the same graph of computations a
Farmfile gives (graph.py), so the scheduler, state, reports, plan, graph, query and clean
work unchanged. `regenerate` does what ninja does before a build: when the manifest is
itself the output of an edge (CMake's re-run rule), it brings that edge up to date first and
reads the manifest again. See docs/ninja.md.
"""

from __future__ import annotations

import os
import sys

from farmer.errors import UsageError
from farmer.graph.graph import Graph
from farmer.manifest.spec import Spec
from farmer.startup.cheap import collector_paused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.build.deferred import Deferred
    from farmer.files.lock import ProjectLock
    from farmer.graph.graph import Computation
    from farmer.store.state import State

_MAX_REGENERATIONS = 3


def is_manifest(name: str) -> bool:
    return name.endswith(".ninja")


def absolute(path: str | os.PathLike) -> str:
    """`path` from the root, as pathlib's `Path(path).absolute()` gives it (what the graph
    cache's key has always named; pathlib itself, with `fnmatch`, `re` and `urllib.parse`,
    is not imported for it): relative to the working directory, without `.` components
    and doubled slashes, `..` kept (folding it would skip a symlink)."""
    path = os.fspath(path)
    if not path.startswith("/"):
        path = os.path.join(os.getcwd(), path)
    lead = "//" if path.startswith("//") and not path.startswith("///") else "/"
    return lead + "/".join(p for p in path.split("/") if p and p != ".")


def load(path: str | os.PathLike, write_cache: bool = False, base_dir: str | None = None,
         deferred: Deferred | None = None) -> tuple[Spec, Graph]:
    """Read the manifest at `path` and make its graph (from the graph cache while no manifest
    file changed); the manifest's directory becomes the working directory, as with
    `ninja -C`. Only commands that hold the lock write the cache (`write_cache`).
    `base_dir`: --base-dir (else FARMER_BASE_DIR): the commands are rewritten (farmer/graph/basedir.py).
    `deferred`: where the cache's write goes instead of being done now (command.load_project)."""
    from farmer.graph import ninja_cache as cache
    from farmer.graph.ninja_edges import build_graph
    from farmer.manifest.ninja_parser import parse_manifest

    path = absolute(path)
    root = os.path.dirname(path)
    farmer_dir = os.path.join(root, ".farmer")
    if not os.path.isdir(root):
        raise UsageError(f"{path}: cannot read the ninja manifest: no such directory")
    os.chdir(root)
    with collector_paused():  # reading makes objects and frees almost none (a fifth of a 20k-edge parse)
        cached = cache.load(farmer_dir, path)
        if cached is None:
            manifest = parse_manifest(path)
            spec, graph, checks = build_graph(manifest)
    if cached is not None:
        spec, graph, warnings = cached
    else:
        warnings = manifest.warnings
        if write_cache:
            def save() -> None:  # (not functools.partial: the start-up rule)
                cache.save(farmer_dir, path, manifest.stats, warnings, spec, graph, checks)

            if deferred is None or _rebased(base_dir):  # saved before the rebase below
                save()
            else:
                deferred.graph_cache = save
    for w in warnings:
        print(f"farmer: warning: {w}", file=sys.stderr)
    if any(c.ninja is not None and c.ninja.dyndep is not None for c in graph.computations):
        from farmer.build import ninja_dyndep

        # A graph of its own: the cache's write above keeps the manifest's graph alone.
        complete = ninja_dyndep.amended(spec, graph)
        return _rebase(spec, complete, base_dir)
    return _rebase(spec, graph, base_dir)


def _rebase(spec: Spec, graph: Graph, base_dir: str | None, tag: bool = True) -> tuple[Spec, Graph]:
    """`graph`'s commands rewritten for the base directory when one is set (farmer/graph/basedir.py);
    `tag`: the spec's digest names it too (once per spec)."""
    root = spec.root
    if _rebased(base_dir):
        from farmer.graph import basedir

        given, source = basedir.setting(base_dir)
        base = basedir.resolve(given, root, source)
        basedir.rebase(graph, base)
        if tag:
            spec.digest = basedir.tagged(spec.digest, base)
    return spec, graph


def _rebased(base_dir: str | None) -> bool:
    """Whether a base directory is set (`basedir.setting`'s value), without importing
    farmer/graph/basedir.py: nearly every build has none."""
    return bool(base_dir if base_dir is not None else os.environ.get("FARMER_BASE_DIR"))


def regenerate(spec: Spec, graph: Graph, opts, lock: ProjectLock, state: State) -> tuple[Spec, Graph, int]:
    """Bring the manifest up to date when an edge makes it, and read it again when that edge
    ran. Returns the (new) spec and graph, and the exit code of the regeneration (0: go
    on). `lock`, `state`: the project's lock and state.db as the caller holds them, for the
    regeneration's own builds too (they stay the caller's)."""
    from farmer.build.run import run_build

    name = os.path.basename(spec.path)
    for _ in range(_MAX_REGENERATIONS):
        i = regenerator(graph, name)
        if i is None:
            break
        to_run = _plan(spec, graph, name, state)
        # Made by the user (`cmake -G Ninja`, `cmake -DX=1 .`) after its inputs changed.
        if i in to_run and _adopt(spec, graph, i, state=state):
            to_run = _plan(spec, graph, name, state)
        if not to_run:
            break
        code = run_build(spec, graph, opts.replace(targets=[name], trace_file=None), lock, state)
        if code != 0:
            return spec, graph, code
        spec, graph = load(spec.path, write_cache=True, base_dir=opts.base_dir)
        # It just ran: its edge in the new manifest (whose inputs may be listed anew) is built.
        j = regenerator(graph, name)
        if j is not None:
            _adopt(spec, graph, j, ran=True, state=state)
    if any(c.ninja is not None and c.ninja.dyndep is not None for c in graph.computations):
        from farmer.build import ninja_dyndep

        def rebase(made: Graph) -> Graph:
            return _rebase(spec, made, opts.base_dir, tag=False)[1]

        graph, code = ninja_dyndep.prepare(spec, graph, opts, lock, state, plan_targets, rebase)
        if code != 0:
            return spec, graph, code
    return spec, graph, 0


def regeneration_inputs(spec: Spec, graph: Graph) -> list[tuple[str, tuple]] | None:
    """The stat data of the inputs of the edge that makes the manifest (none without one),
    for the no-op stamp; None when one of them cannot vouch for itself (farmer/store/ninja_stamp.py)."""
    from farmer.store import ninja_stamp as ninjastamp

    i = regenerator(graph, os.path.basename(spec.path))
    if i is None:
        return []
    comp = graph.computations[i]
    listed = _depfile_inputs(comp, spec.path)
    if listed is None:
        return None  # what it lists is not known here (deleted by another tool, never made)
    return ninjastamp.observe(list(comp.inputs) + [p for p in listed if p not in comp.inputs])


def regenerator(graph: Graph, name: str) -> int | None:
    """The edge that remakes the manifest `name`: its producer, or the one edge a phony
    alias of it stands for (GN: `build build.ninja: phony build.ninja.stamp`)."""
    comps = graph.computations
    i = graph.producer.get(name)
    seen: set[int] = set()
    while i is not None and comps[i].kind is None and i not in seen:
        seen.add(i)
        real = [p for p in comps[i].producers if comps[p].kind is not None]
        i = real[0] if len(real) == 1 else None
    return i


def _depfile_inputs(comp: Computation, manifest: str) -> list[str] | None:
    """The files the edge's depfile lists now (GN's `build.ninja.d`: every BUILD.gn, .gni and
    args.gn the generator read); none without a depfile. A depfile that ninja read and
    deleted (`deps = gcc`): what ninja's deps log (.ninja_deps) recorded of it, when that
    record is not older than the edge's first output (as ninja trusts it). None when neither
    can be read."""
    if not comp.depfile:
        return []
    from farmer.build import ninja_logs

    listed = ninja_logs.depfile_inputs(comp.depfile)
    if listed is not None or os.path.exists(comp.depfile):
        return listed
    # (farmer keeps a generator's depfile, so its edge does not say `deps`: only ninja's log can)
    return ninja_logs.deps_log_inputs(manifest, comp.outputs[0]) if comp.ninja is not None else None


def stamp(spec: Spec, regenerated_from: list[tuple[str, tuple]]) -> None:
    """What a build's no-op proof rests on besides itself (written once its first commands
    have started: without the proof, which only a good build writes, it proves nothing)."""
    from farmer.graph import ninja_cache as cache
    from farmer.store import ninja_stamp as ninjastamp

    farmer_dir = os.path.join(spec.root, ".farmer")
    files = cache.manifest_files(farmer_dir, spec.path)
    if files is None:  # not cached (read too soon after it changed): the next build stamps
        ninjastamp.forget(farmer_dir)
        return
    ninjastamp.write(farmer_dir, spec.path, spec.digest, files + regenerated_from)


def _plan(spec: Spec, graph: Graph, target: str, state: State | None = None) -> dict[int, str]:
    """What a build of `target` would run; `state`: the caller's (left open), else read alone."""
    return plan_targets(spec, graph, [target], state)


def plan_targets(spec: Spec, graph: Graph, targets: list[str], state: State | None = None) -> dict[int, str]:
    """What a build of `targets` would run; `state` as `_plan`'s."""
    from farmer.plan.session import open_session

    session = open_session(spec, graph, os.path.join(spec.root, ".farmer"), targets,
                           readonly=state is None, state=state)
    try:
        return session.to_run()
    finally:
        if state is None:
            session.state.close()


def _adopt(spec: Spec, graph: Graph, i: int, ran: bool = False, state: State | None = None) -> bool:
    """A generator edge out of date for farmer (never run by it, or an input changed: the user
    ran cmake) whose outputs are all newer than its inputs, as ninja judges it, is taken as
    built: its trace is recorded now, so the build does not rerun the generator. Its inputs must be source files (or phony aliases).
    `ran`: the edge just ran (in the manifest before this one): record it as it is now.
    `state`: the caller's, who holds the lock (left open); else both are taken here."""
    comps = graph.computations
    comp = comps[i]
    if not ran:
        if not comp.ninja.generator or any(comps[p].kind is not None for p in comp.producers):
            return False
        try:
            oldest_output = min(os.stat(p).st_mtime_ns for p in comp.outputs)
            newest_input = max((os.stat(p).st_mtime_ns for p in comp.inputs), default=0)
        except (OSError, ValueError):
            return False
        if newest_input > oldest_output:
            return False
        # The inputs its depfile lists (GN lists every BUILD.gn there and nothing in the
        # manifest): one that is gone or newer than the outputs makes it run.
        for p in _depfile_inputs(comp, spec.path) or []:
            try:
                if os.stat(p).st_mtime_ns > oldest_output:
                    return False
            except OSError:
                return False
    if state is not None:
        _record_now(spec, graph, comp, state)
        return True
    from farmer.files.lock import ProjectLock
    from farmer.store.state import State

    farmer_dir = os.path.join(spec.root, ".farmer")
    with ProjectLock(farmer_dir):
        state = State(farmer_dir)
        try:
            _record_now(spec, graph, comp, state)
        finally:
            state.close()
    return True


def _record_now(spec: Spec, graph: Graph, comp: Computation, state: State) -> None:
    """Save `comp`'s trace as its inputs and outputs are now, with the files its depfile
    lists as discovered inputs (ninja reads a generator's depfile as any edge's)."""
    from farmer.files.digests import Digests, NotAFile
    from farmer.plan.uptodate import timed_outputs
    from farmer.store.state import Trace

    digests = Digests(state.stat_cache())
    digests.timed = timed_outputs(graph)

    def digest(path: str) -> str:
        try:
            return digests.digest(path) or "missing"
        except NotAFile:
            return "not-a-file"

    declared = set(comp.inputs)
    listed = [p for p in _depfile_inputs(comp, spec.path) or [] if p not in declared]
    if not listed and comp.depfile:  # read and deleted by the run (`deps = gcc`): as the run recorded them
        known = state.trace(comp.id)
        listed = [p for p, _ in known.discovered] if known is not None else []
    trace = Trace(comp.id, comp.fingerprint, None, [(p, digest(p)) for p in comp.inputs],
                  [(p, digest(p)) for p in dict.fromkeys(listed)], [(p, digest(p)) for p in comp.outputs])
    # A first build makes state.db with its first batch, after its first commands have started.
    state.save_later([trace], digests.changed)
