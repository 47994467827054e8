"""A workspace: what outlives a build, and the requests it builds. `farmer build` holds one
for its one build; `farmer watch` holds one for its lifetime, and its builds share what the
workspace keeps.

It owns the project's lock, state.db (`State`), the stat cache behind the digests, the graph
once read, the warm worlds, and the engines handed in. Its one entry is `build(request,
progress)`, where a `BuildRequest` is what one build is asked to do (`farmer build`'s
targets and options, as the command line, a test, or `farmer watch` for each of its builds
gives them); `build` is the flow: the no-op proof first (before anything heavy is imported),
then the graph, the stale-output sweep, a build.ninja's regeneration, and the build itself
(build/run.py).

What a workspace keeps between builds (`keep`): the lock (released once, by `close`),
state.db open, the stat cache in memory (state.db's, read once, with what each build
learned), the graph while its Farmfile and the listings it matched are unchanged, and the
worlds set up. Without `keep`, a build takes the lock and opens state.db itself and gives
both up at its end, as a one-shot `farmer build` always has.
"""

from __future__ import annotations

import os
import sys
import time

from farmer.build import command
from farmer.errors import TaskError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.build.deferred import Deferred
    from farmer.build.request import BuildRequest
    from farmer.files.digests import Digests
    from farmer.files.lock import ProjectLock
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec
    from farmer.record.recorder import RunCache
    from farmer.report.console import Progress
    from farmer.run.executors.base import Executor
    from farmer.run.worlds.manager import WarmWorlds
    from farmer.store.proof import Proof
    from farmer.store.state import State


class OtherProject(Exception):
    """A build of another project than the one whose lock the workspace holds (a server's
    client's, say): it cannot run here."""


class Engines:
    """What runs computations and what remembers their outputs, when handed in (tests'
    fakes, as ninja's FakeCommandRunner); None: each build makes its own from the request's
    flags (processes and worlds; the local and remote caches: build/run.py)."""

    __slots__ = ("executor", "cache")

    def __init__(self, executor: Executor | None = None, cache: RunCache | None = None) -> None:
        self.executor = executor
        self.cache = cache


class Workspace:
    """What outlives a build (see the module's docstring). `keep`: hold what a build takes
    until `close`; `role`: the lock's, as a second farmer names its holder (`watch`)."""

    __slots__ = ("engines", "keep", "role", "root", "lock", "state", "digests", "spec", "graph",
                 "graph_save", "worlds")

    def __init__(self, engines: Engines | None = None, keep: bool = False, role: str = "") -> None:
        self.engines = engines or Engines()
        self.keep = keep
        self.role = role
        self.root: str | None = None  # the project root, once a build or `hold` found it
        self.lock: ProjectLock | None = None
        self.state: State | None = None
        self.digests: Digests | None = None  # the last build's, whose stat cache the next one starts from
        self.spec: Spec | None = None  # the graph kept warm (only with `keep`)
        self.graph: Graph | None = None
        self.graph_save = None  # its cache's write, for the next build to do once it runs
        self.worlds: WarmWorlds | None = None

    def build(self, request: BuildRequest, progress: Progress | None = None) -> int:
        """One build: its exit status; last-build.json and the rest as `farmer build` writes
        them. `progress`: what the user sees of it (None: the build chooses, a live view on
        a terminal, else plain lines: report/console.py)."""
        try:
            return self._build(request, progress)
        except BaseException:
            if self.keep:  # what it left half done is not kept: the next build starts afresh
                self._release_state()
                self.forget_graph()
            raise

    def _build(self, request: BuildRequest, progress: Progress | None) -> int:
        """The flow of `build`."""
        request = request.checked()
        if not (request.farmfile_given or request.ninja):  # which manifest depends on what is there
            farmfile, given = command.named_manifest(request.directory, request.farmfile, False, False)
            request = request.replace(directory=None, farmfile=farmfile, farmfile_given=given)
        targets, slots, dry_run, trace_file = request.targets, request.jobs, request.dry_run, request.trace_file
        directory, farmfile, farmfile_given = request.directory, request.farmfile, request.farmfile_given
        ninja = request.is_ninja()
        started_at = time.time()
        proof = None
        from farmer.startup.cheap import collector_paused

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

                command.enter(directory)
                directory = None
                # The full path, found upwards unless -f named it, starts from the project root.
                farmfile, farmfile_given = command.find_farmfile(farmfile, farmfile_given), True
                root = os.path.dirname(farmfile)
                if os.path.isdir(root):
                    os.chdir(root)
                    self.take_lock(root)
                    outcome = noop.try_build(farmfile, targets, slots)
                    if isinstance(outcome, int):
                        return command.built(outcome)
                    proof = outcome
            elif not dry_run and not trace_file:
                command.enter(directory)
                directory = None
                farmfile = os.path.abspath(farmfile if farmfile_given else "build.ninja")
                farmfile_given = True
                code = command.ninja_noop(farmfile, targets, slots, self.lock, request.base_dir,
                                          request.ending())
                if code is not None:
                    return command.built(code)
            from farmer.build.deferred import Deferred

            deferred = Deferred()  # work the first commands need not wait for
            warm = None
            if not ninja and directory is None and farmfile_given:
                # (a dry run writes nothing: a warm graph's cache is left for the next build to write)
                warm = self.warm_graph(os.path.abspath(farmfile), None if dry_run else deferred)
            if warm is not None:
                spec, graph = warm
            else:
                spec, graph = command.load_project(directory, farmfile, not dry_run, ninja, farmfile_given,
                                                   request.base_dir, deferred)
            state = None
            if not dry_run:
                from farmer.plan import stale

                self.take_lock(spec.root)
                state = self.open_state()  # the build's too: state.db opened once
                if ninja:  # what ninja built since farmer's last build, taken as built (build/ninja_logs.py)
                    from farmer.build.ninja_logs import adopt

                    adopt(os.fspath(spec.path), graph, state, self.lock.dir)
            if not dry_run and not ninja:
                reload = lambda: command.load_project(None, os.fspath(spec.path), True)  # noqa: E731
                spec, graph, removed = stale.sweep(spec, graph, reload, state)
                if removed:
                    deferred.graph_cache = None  # the graph was made again, and its cache written
            if not ninja and graph is not self.graph:
                self.keep_graph(spec, graph)
            live = sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb" and not dry_run \
                and not (request.verbose or request.quiet or request.front == "ninja")  # plain lines
            cache_dir = os.path.abspath(request.cache_dir) if request.cache_dir else None
            opts = request.replace(live=live, cache_dir=cache_dir)
            deferred.collector = paused.__exit__
            if not ninja or dry_run:
                code = self._run(spec, graph, opts, state, proof, deferred, progress)
                return code if dry_run else command.built(code, graph)
            from farmer.build import ninja as manifest  # as ninja: remake the manifest first

            # Taken before the regeneration edge is checked: a change after it is seen next time.
            regenerated_from = manifest.regeneration_inputs(spec, graph)
            read_spec = spec
            spec, graph, code = manifest.regenerate(spec, graph, opts, self.lock, state)
            if code:
                return code
            if spec is not read_spec:
                deferred.graph_cache = None  # the manifest was read again, and its cache written
            elif regenerated_from is not None and not trace_file:
                # Once the first commands have started, after the graph cache's write (whose
                # files it names): without a proof (this build failed or was stopped) it vouches
                # for nothing (farmer/store/ninja_stamp.py).
                deferred.ninja_stamp = lambda: manifest.stamp(read_spec, regenerated_from)
            code = self._run(spec, graph, opts, state, proof, deferred, progress)
            return command.built(code, graph)
        except KeyboardInterrupt:
            lock = self.lock
            if lock is not None and lock.early and lock.fd is not None:  # before the build began
                command.interrupted_before_planning(lock, started_at, slots)
            raise
        except TaskError as e:  # a missing input found by the no-op proof's selection
            from farmer.manifest.farmfile import locate

            raise locate(e, farmfile) from None
        finally:
            paused.__exit__()  # (a build that started commands resumed it then)
            self.end_build()

    def _run(self, spec: Spec, graph: Graph, opts: BuildRequest, state: State | None,
             proof: Proof | None, deferred: Deferred, progress: Progress | None) -> int:
        """The build itself (build/run.py) with what the workspace holds (`_build` ends it:
        `end_build`)."""
        from farmer.build.run import run_build

        return run_build(spec, graph, opts, self.lock, state, proof, self.engines.executor, self.engines.cache,
                         self.worlds, self.digests_for(state), deferred, progress)

    # -- the lock --------------------------------------------------------------------

    def hold(self, root: str, early: list[int] | None = None) -> None:
        """Take the project's lock now and keep it (with `keep`, worlds kept warm under it).
        `early`: where signals that come while a build holds them back are kept, for the
        holder to see (farmer watch's)."""
        self._lock_for(root)
        if early is not None:
            self.lock.early = early
        self.lock.acquire()
        if self.keep and self.worlds is None:
            from farmer.run.worlds.manager import WarmWorlds

            self.worlds = WarmWorlds(self.lock.dir)

    def take_lock(self, root: str) -> ProjectLock:
        """The project's lock, taken if not held yet; from then until the build installs its
        own handlers, a signal stops the build and last-build.json says so (lock.py)."""
        lock = self._lock_for(root)
        if lock.fd is None:
            lock.acquire()
            lock.defer_signals(stop_now=True)
        return lock

    def _lock_for(self, root: str) -> ProjectLock:
        if self.lock is not None and root != self.root and os.path.realpath(root) != os.path.realpath(self.root):
            raise OtherProject(root)
        if self.lock is None:
            from farmer.files.lock import ProjectLock

            self.root = root
            self.lock = ProjectLock(os.path.join(root, ".farmer"), self.role)
        return self.lock

    # -- state.db and the digests ----------------------------------------------------------

    def open_state(self) -> State:
        """state.db, opened once while the workspace holds the lock (its warnings said)."""
        if self.state is None:
            from farmer.plan.stale import open_state

            self.state = open_state(self.lock.dir)
        return self.state

    def digests_for(self, state: State | None) -> Digests | None:
        """With `keep`, the digests a build of `state` starts from: the stat cache as the last
        build left it (state.db's, read at the first build). Else None: the build reads
        what it needs of state.db itself."""
        if not self.keep or state is None or state is not self.state:
            return None
        from farmer.files.digests import Digests

        cache = self.digests.entries() if self.digests is not None else state.stat_cache()
        self.digests = Digests(cache)
        return self.digests

    # -- the graph ---------------------------------------------------------------------

    def warm_graph(self, farmfile: str, deferred: Deferred | None) -> tuple[Spec, Graph] | None:
        """The graph kept from the last build of `farmfile` (an absolute path), while it is
        still the graph the Farmfile makes: its bytes and the listings its foreach patterns
        and globs matched are as they were (what the graph cache checks). Its cache's
        write, if still to be done, goes into `deferred` (None: it waits for another
        build). The project root becomes the working directory."""
        spec, graph = self.spec, self.graph
        if spec is None or graph is None or os.fspath(spec.path) != farmfile:
            return None
        from farmer.errors import UsageError
        from farmer.files.digests import hash_bytes
        from farmer.manifest.spec import read

        try:
            if hash_bytes(read(farmfile)) != spec.digest:
                return None
        except UsageError:  # unreadable now: the full read says why
            return None
        if graph.listings:
            from farmer.graph.matching import list_files, listing_digest

            if any(listing_digest(list_files(spec.root, prefix)) != digest
                   for prefix, digest in graph.listings.items()):
                return None
        os.chdir(spec.root)
        # What a build learns of the files on the graph is learnt anew, as from the cache.
        graph.missing_known = False
        graph.inside_checked = False
        if deferred is not None:
            deferred.graph_cache, self.graph_save = self.graph_save, None
        return spec, graph

    def read_graph(self, farmfile: str, directory: str | None = None,
                   given: bool = True) -> tuple[Spec, Graph]:
        """Read the Farmfile (`-C`, `-f` as `farmer build` takes them) into the graph the
        next build starts from (with `keep`); its cache is written by that build, under
        the lock. The project root becomes the working directory."""
        from farmer.build import command
        from farmer.build.deferred import Deferred

        self.forget_graph()
        later = Deferred()
        spec, graph = command.load_project(directory, farmfile, True, False, given, None, later)
        self.keep_graph(spec, graph, later.graph_cache)
        return spec, graph

    def keep_graph(self, spec: Spec, graph: Graph, save=None) -> None:
        """With `keep`, the graph the last build used, for the next (`warm_graph`);
        `save`: its cache's write, not done yet."""
        if self.keep:
            self.spec, self.graph, self.graph_save = spec, graph, save

    def forget_graph(self) -> None:
        self.spec = self.graph = self.graph_save = None

    # -- the end -----------------------------------------------------------------------

    def end_build(self) -> None:
        """After each build: without `keep`, state.db closed and the lock released."""
        if not self.keep:
            self._release()

    def close(self) -> None:
        """The end of the workspace: its worlds stopped, state.db closed, the lock released
        (once)."""
        try:
            if self.worlds is not None:
                self.worlds.close()
                self.worlds = None
        finally:
            self._release()
            self.forget_graph()

    def _release(self) -> None:
        try:
            self._release_state()
        finally:
            if self.lock is not None:
                self.lock.release()

    def _release_state(self) -> None:
        """state.db closed, and the stat cache kept from it forgotten."""
        state, self.state, self.digests = self.state, None, None
        if state is not None:
            state.close()
