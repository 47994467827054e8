"""`farmer build`'s flow, in a workspace for a request (build/workspace.py):
the no-op proof first (before anything heavy is imported), then the graph, the stale-output
sweep, a build.ninja's regeneration, and the build itself (build/run.py). The command line
that asks for it is farmer/cli/; how every command ends (exit statuses, signals) is
farmer/cli/exit.py.
"""

from __future__ import annotations

import os
import sys
import time

from farmer.errors import TaskError, UsageError

TYPE_CHECKING = False  # start-up rule (docs/performance.md): no typing on the build path
if TYPE_CHECKING:
    from farmer.build.deferred import Deferred
    from farmer.build.workspace import BuildRequest, Workspace
    from farmer.files.lock import ProjectLock
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec
    from farmer.report.console import Progress
    from farmer.store.proof import Proof
    from farmer.store.state import State


def enter(directory: str | None) -> None:
    """`-C DIR`: change to DIR before anything else."""
    if directory is not None:
        try:
            os.chdir(directory)
        except OSError as e:
            raise UsageError(f"-C {directory}: {e.strerror}") from None


def find_farmfile(farmfile: str, given: bool) -> str:
    """The Farmfile's absolute path: `-f FILE` as given, else `Farmfile` in the current
    directory or the nearest parent that has one (SPEC §3, as git, cargo and just do)."""
    if given:
        return os.path.abspath(farmfile)
    start = here = os.getcwd()
    while True:
        path = os.path.join(here, farmfile)
        if os.path.exists(path):
            return path
        parent = os.path.dirname(here)
        if parent == here:
            raise UsageError(f"no {farmfile} in {start} nor in any directory above it (up to "
                             f"{here}); write one, cd into the project, or pass -f FILE")
        here = parent


def is_ninja(farmfile: str, ninja: bool) -> bool:
    return ninja or farmfile.endswith(".ninja")


def load_project(directory: str | None, farmfile: str, write_cache: bool, ninja: bool = False,
                 farmfile_given: bool = True, base_dir: str | None = None,
                 deferred: Deferred | None = None) -> tuple[Spec, Graph]:
    """Read the Farmfile (or with `ninja`, a ninja manifest: docs/ninja.md) and traverse it;
    the project root becomes the working directory. `base_dir`: --base-dir (a manifest's).
    `deferred`: where the graph cache's write goes instead of being done now (a build's
    first commands need not wait for it)."""
    enter(directory)
    if is_ninja(farmfile, ninja):
        from farmer.build import ninja as manifest

        return manifest.load(farmfile if farmfile_given else "build.ninja", write_cache, base_dir, deferred)
    from farmer.graph import load as project

    path = find_farmfile(farmfile, farmfile_given)
    if deferred is None or not write_cache:
        return project.load(path, write_cache)
    spec, graph, save = project.load_later(path)
    if save is not None:
        deferred.graph_cache = save
    return spec, graph


def _interrupted_before_planning(lock: ProjectLock, started_at: float, jobs: int) -> None:
    """A signal while the graph was read, under the lock: last-build.json says interrupted
    (no computation was known yet), as SPEC §4 asks of every build that got the lock."""
    from farmer.report import lastbuild
    from farmer.files.atomic import write_atomically

    head = lastbuild.header(started_at, jobs, "interrupted", time.time() - started_at, 0.0, 0.0)
    try:
        write_atomically(os.path.join(lock.dir, "last-build.json"), lastbuild.document(head, [b"[]"]))
    except OSError:
        pass


def build(ws: Workspace, request: BuildRequest, progress: Progress | None = None) -> int:
    """`farmer build` in `ws` (Workspace.build): its exit status."""
    request = request.checked()
    targets, slots, dry_run, trace_file = request.targets, request.jobs, request.dry_run, request.trace_file
    directory, farmfile, farmfile_given = request.directory, request.farmfile, request.farmfile_given
    ninja = request.is_ninja()
    started_at = time.time()
    proof = None
    from farmer.files.atomic import collector_paused

    # The cyclic collector waits until the first commands have started (then the deferred
    # work resumes it): up to there a build imports its modules and makes its graph and
    # plan, thousands of objects and no cycles to free, and the collector's passes over
    # them would delay a first build's first command.
    paused = collector_paused()
    paused.__enter__()
    try:
        if not dry_run and not trace_file and not ninja:
            # First, the cheap proof that nothing changed (farmer/build/noop.py), under the lock
            # the build keeps if it has to go on.
            from farmer.build import noop

            enter(directory)
            directory = None
            # The full path, found upwards unless -f named it, starts from the project root.
            farmfile, farmfile_given = find_farmfile(farmfile, farmfile_given), True
            root = os.path.dirname(farmfile)
            if os.path.isdir(root):
                os.chdir(root)
                ws.take_lock(root)
                outcome = noop.try_build(farmfile, targets, slots)
                if isinstance(outcome, int):
                    return _built(outcome)
                proof = outcome
        elif not dry_run and not trace_file:
            enter(directory)
            directory = None
            farmfile = os.path.abspath(farmfile if farmfile_given else "build.ninja")
            farmfile_given = True
            code = _ninja_noop(farmfile, targets, slots, ws.lock, request.base_dir)
            if code is not None:
                return _built(code)
        from farmer.build.deferred import Deferred

        deferred = Deferred()  # work the first commands need not wait for
        warm = None
        if not ninja and directory is None and farmfile_given:
            # (a dry run writes nothing: a warm graph's cache is left for the next build to write)
            warm = ws.warm_graph(os.path.abspath(farmfile), None if dry_run else deferred)
        if warm is not None:
            spec, graph = warm
        else:
            spec, graph = load_project(directory, farmfile, not dry_run, ninja, farmfile_given,
                                       request.base_dir, deferred)
        state = None
        if not dry_run:
            from farmer.plan import stale

            ws.take_lock(spec.root)
            state = ws.open_state()  # the build's too: state.db opened once
        if not dry_run and not ninja:
            reload = lambda: load_project(None, os.fspath(spec.path), True)  # noqa: E731
            spec, graph, removed = stale.sweep(spec, graph, reload, state)
            if removed:
                deferred.graph_cache = None  # the graph was made again, and its cache written
        if not ninja and graph is not ws.graph:
            ws.keep_graph(spec, graph)
        live = sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb" and not dry_run
        opts = request.replace(live=live, cache_dir=os.path.abspath(request.cache_dir) if request.cache_dir else None)
        deferred.collector = paused.__exit__
        if not ninja or dry_run:
            code = _run(ws, spec, graph, opts, state, proof, deferred, progress)
            return code if dry_run else _built(code, graph)
        from farmer.build import ninja as manifest  # as ninja: remake the manifest first

        # Taken before the regeneration edge is checked: a change after it is seen next time.
        regenerated_from = manifest.regeneration_inputs(spec, graph)
        read_spec = spec
        spec, graph, code = manifest.regenerate(spec, graph, opts, ws.lock, state)
        if code:
            return code
        if spec is not read_spec:
            deferred.graph_cache = None  # the manifest was read again, and its cache written
        elif regenerated_from is not None and not trace_file:
            # Once the first commands have started, after the graph cache's write (whose
            # files it names): without a proof (this build failed or was stopped) it vouches
            # for nothing (farmer/store/ninja_stamp.py).
            deferred.ninja_stamp = lambda: manifest.stamp(read_spec, regenerated_from)
        code = _run(ws, spec, graph, opts, state, proof, deferred, progress)
        return _built(code, graph)
    except KeyboardInterrupt:
        lock = ws.lock
        if lock is not None and lock.early and lock.fd is not None:  # before the build began
            _interrupted_before_planning(lock, started_at, slots)
        raise
    except TaskError as e:  # a missing input found by the no-op proof's selection
        from farmer.manifest.farmfile import locate

        raise locate(e, farmfile) from None
    finally:
        paused.__exit__()  # (a build that started commands resumed it then)
        ws.end_build()


def _run(ws: Workspace, spec: Spec, graph: Graph, opts: BuildRequest, state: State | None,
         proof: Proof | None, deferred: Deferred, progress: Progress | None) -> int:
    """The build itself (build/run.py) with what the workspace holds; then, unless the
    workspace keeps them, state.db is closed and the lock released."""
    from farmer.build.run import run_build

    code = run_build(spec, graph, opts, ws.lock, state, proof, ws.engines.executor, ws.engines.cache,
                     ws.worlds, ws.digests_for(state), deferred, progress)
    ws.end_build()
    return code


def _built(code: int, graph: Graph | None = None) -> int:
    """The end of a build that wrote last-build.json (the working directory is the project
    root): in GitHub Actions, its annotations and job summary (docs/ci.md). `graph`: the
    build's, for the summary's critical path (a no-op build has none to show)."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from farmer.report.pages.github import report_build

        report_build(os.path.join(os.getcwd(), ".farmer"), graph)
    return code


def _ninja_noop(manifest: str, targets: list[str], slots: int, lock: ProjectLock | None,
                base_dir: str | None = None) -> int | None:
    """A no-op build of a ninja manifest finished without parsing it (its exit status), when
    neither it nor what regenerates it changed (farmer/store/ninja_stamp.py) and the no-op proof
    holds; None: the build goes the full way."""
    from farmer.build import noop
    from farmer.store import ninja_stamp as ninjastamp
    from farmer.files.lock import ProjectLock

    root = os.path.dirname(manifest)
    farmer_dir = os.path.join(root, ".farmer")
    if not os.path.isfile(os.path.join(farmer_dir, ninjastamp.NAME)):
        return None
    os.chdir(root)
    own = lock is None
    if own:
        lock = ProjectLock(farmer_dir)
        lock.acquire()
    try:
        digest = ninjastamp.digest(farmer_dir, manifest)
        if digest and (base_dir or os.environ.get("FARMER_BASE_DIR") or "+" in digest):
            from farmer.graph import basedir  # the proof holds for the base directory it was taken with

            given, source = basedir.setting(base_dir)
            digest = basedir.tagged(digest, basedir.resolve(given, root, source))
        outcome = noop.try_build(manifest, targets, slots, digest) if digest else None
        return outcome if isinstance(outcome, int) else None
    finally:
        if own:  # the full path takes it again (regenerating runs builds of its own)
            lock.release()
