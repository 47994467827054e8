"""A workspace: what outlives a build, and the requests it builds. `farmer build` holds one
for its one build; `farmer watch` holds one for its lifetime, and its builds share what the
workspace keeps.

It owns the project's lock, state.db (`State`), the stat cache behind the digests, the graph
once read, the warm worlds, and the engines handed in. Its one entry is `build(request,
progress)`, where a `BuildRequest` is what one build is asked to do (`farmer build`'s
targets and options, as the command line, a test, or `farmer watch` for each of its builds
gives them); the flow itself is build/command.py.

What a workspace keeps between builds (`keep`): the lock (released once, by `close`),
state.db open, the stat cache in memory (state.db's, read once, with what each build
learned), the graph while its Farmfile and the listings it matched are unchanged, and the
worlds set up. Without `keep`, a build takes the lock and opens state.db itself and gives
both up at its end, as a one-shot `farmer build` always has.
"""

from __future__ import annotations

import os

from farmer.errors import UsageError

TYPE_CHECKING = False  # start-up rule (docs/performance.md): no typing on the build path
if TYPE_CHECKING:
    from farmer.build.deferred import Deferred
    from farmer.files.digests import Digests
    from farmer.files.lock import ProjectLock
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec
    from farmer.record.recorder import RunCache
    from farmer.report.console import Progress
    from farmer.run.executors.base import Executor
    from farmer.run.worlds.manager import WarmWorlds
    from farmer.store.state import State


def job_slots(value: int | None) -> int:
    """-j as given (None: not given) -> the scheduler's CPU slots."""
    if value is None:
        return -(-5 * (os.cpu_count() or 1) // 4)  # SPEC: ceil(1.25 x CPUs)
    if value < 1:
        raise UsageError(f"-j {value}: the number of jobs must be at least 1")
    return min(value, 4096)  # like make's unlimited -j; slots are lists, not unbounded


class BuildRequest:
    """`farmer build`'s arguments. `checked` makes the copy a build runs with: `jobs` in
    slots, `trace_file` absolute, each value checked; the build then sets `live` and makes
    `cache_dir` absolute from the project root."""

    __slots__ = ("targets", "directory", "farmfile", "farmfile_given", "ninja", "jobs", "load",
                 "keep_going", "dry_run", "explain", "no_worlds", "timeout", "trace_file", "cache",
                 "cache_dir", "remote", "base_dir", "live")

    def __init__(self, targets: list[str], directory: str | None = None, farmfile: str = "Farmfile",
                 farmfile_given: bool = True, ninja: bool = False, jobs: int | None = None,
                 load: float | None = None, keep_going: bool = False, dry_run: bool = False,
                 explain: bool = False, no_worlds: bool = False, timeout: float | None = None,
                 trace_file: str | None = None, cache: bool | None = None, cache_dir: str | None = None,
                 remote: dict | None = None, base_dir: str | None = None, live: bool = False) -> None:
        self.targets = targets
        self.directory = directory  # -C
        self.farmfile = farmfile  # -f, else the default name, found upwards (`farmfile_given`)
        self.farmfile_given = farmfile_given
        self.ninja = ninja  # --ninja: the manifest is a build.ninja (so is any *.ninja)
        self.jobs = jobs  # -j as given; the slots once `checked`
        self.load = load
        self.keep_going = keep_going
        self.dry_run = dry_run
        self.explain = explain
        self.no_worlds = no_worlds
        self.timeout = timeout
        self.trace_file = trace_file
        self.cache = cache  # --cache (True), --no-cache (False), neither (None)
        self.cache_dir = cache_dir
        self.remote = remote or {}  # --remote* flags, for farmer.remote.config.resolve
        self.base_dir = base_dir  # --base-dir (farmer/graph/basedir.py); None: FARMER_BASE_DIR
        self.live = live  # the live view on a terminal (set by the build)

    def replace(self, **changes) -> BuildRequest:
        """A copy with `changes` (option names as keywords) made."""
        return BuildRequest(**{**{name: getattr(self, name) for name in self.__slots__}, **changes})

    def checked(self) -> BuildRequest:
        """The request as a build runs it; a bad value is a usage error before the build
        takes the lock. (Again on a checked request: the same.)"""
        if self.timeout is not None and not 0 < self.timeout <= 1e9:  # nan and inf too
            raise UsageError(f"--timeout {self.timeout:g}: must be above 0 seconds (and finite)")
        slots = job_slots(self.jobs)
        if os.environ.get("FARMER_CACHE"):
            from farmer.record.cache.settings import cache_switch

            cache_switch(os.environ)
        return self.replace(jobs=slots, trace_file=os.path.abspath(self.trace_file) if self.trace_file else None)

    def is_ninja(self) -> bool:
        return self.ninja or self.farmfile.endswith(".ninja")


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
        from farmer.build import command

        try:
            return command.build(self, request, progress)
        except BaseException:
            if self.keep:  # what it left half done is not kept: the next build starts afresh
                self._release_state()
                self.forget_graph()
            raise

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
