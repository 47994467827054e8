"""`farmer build` as a plain function, and what every command ends with: errors as one-line
messages and exit statuses, signals as a clean exit.

cli.py reaches `build` through click. The common form of `farmer build` (targets, -j, -C,
-f, -k) is also read by hand (`quick_build_args`), so that a no-op build, which must finish
in a few tens of milliseconds, never imports click or the build engine (SPEC §3's options
mean the same either way: anything else goes through click).
"""

from __future__ import annotations

import _signal as signal  # start-up rule (docs/performance.md): not `signal`, which imports enum
import os
import sys
import time

from farmer.errors import LockHeld, TaskError, UsageError

TYPE_CHECKING = False  # start-up rule (docs/performance.md): no typing on the build path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

    from farmer.run.executors.base import Executor
    from farmer.graph.graph import Graph
    from farmer.files.lock import ProjectLock
    from farmer.record.recorder import RunCache
    from farmer.manifest.spec import Spec
    from farmer.run.worlds.manager import WarmWorlds


def job_slots(value: int | None) -> int:
    if value is None:
        return -(-5 * (os.cpu_count() or 1) // 4)  # SPEC: ceil(1.25 x CPUs)
    if value < 1:
        raise UsageError(f"-j {value}: the number of jobs must be at least 1")
    return min(value, 4096)  # like make's unlimited -j; slots are lists, not unbounded


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
                 later: list[Callable[[], None]] | None = None) -> tuple[Spec, Graph]:
    """Read the Farmfile (or with `ninja`, a ninja manifest: docs/ninja.md) and traverse it;
    the project root becomes the working directory. `base_dir`: --base-dir (a manifest's).
    `later`: where the graph cache's write goes instead of being done now (a build's first
    commands need not wait for it)."""
    enter(directory)
    if is_ninja(farmfile, ninja):
        from farmer.build import ninja as manifest

        return manifest.load(farmfile if farmfile_given else "build.ninja", write_cache, base_dir, later)
    from farmer.graph import load as project

    path = find_farmfile(farmfile, farmfile_given)
    if later is None or not write_cache:
        return project.load(path, write_cache)
    spec, graph, save = project.load_later(path)
    if save is not None:
        later.append(save)
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


def build(targets: list[str], directory: str | None = None, farmfile: str = "Farmfile",
          jobs: int | None = None, load: float | None = None, keep_going: bool = False,
          dry_run: bool = False, explain: bool = False, no_worlds: bool = False,
          timeout: float | None = None, trace_file: str | None = None, ninja: bool = False,
          farmfile_given: bool = True, executor: Executor | None = None,
          lock: ProjectLock | None = None, worlds: WarmWorlds | None = None,
          cache: RunCache | None = None, use_cache: bool | None = None,
          cache_dir: str | None = None, remote: dict | None = None, base_dir: str | None = None) -> int:
    """`farmer build`: its exit status. `executor`, `cache`: see `build.run_build`; `lock`: the
    project's, taken by the caller, and `worlds` kept warm from its earlier builds (`farmer
    watch` holds both across builds); `use_cache`: --cache (True) or --no-cache (False);
    `cache_dir`: --cache-dir (docs/cache.md); `remote`: the --remote* flags
    (docs/remote.md); `base_dir`: --base-dir (farmer/graph/basedir.py)."""
    if timeout is not None and not 0 < timeout <= 1e9:  # nan and inf too
        raise UsageError(f"--timeout {timeout:g}: must be above 0 seconds (and finite)")
    slots = job_slots(jobs)
    if os.environ.get("FARMER_CACHE"):  # a bad value is an error before the build takes the lock
        from farmer.record.cache.settings import cache_switch

        cache_switch(os.environ)
    started_at = time.time()
    trace_file = os.path.abspath(trace_file) if trace_file else None
    proof = state = None
    from farmer.files.atomic import collector_paused

    # The cyclic collector waits until the first commands have started (then `later`
    # resumes it): up to there a build imports its modules and makes its graph and plan,
    # thousands of objects and no cycles to free, and the collector's passes over them were
    # 2-4 ms of a first build's way to its first command.
    paused = collector_paused()
    paused.__enter__()
    try:
        if not dry_run and not trace_file and not is_ninja(farmfile, ninja):
            # First, the cheap proof that nothing changed (farmer/build/noop.py), under the lock
            # the build keeps if it has to go on.
            from farmer.build import noop
            from farmer.files.lock import ProjectLock

            enter(directory)
            directory = None
            # The full path, found upwards unless -f named it, starts from the project root.
            farmfile, farmfile_given = find_farmfile(farmfile, farmfile_given), True
            root = os.path.dirname(farmfile)
            if os.path.isdir(root):
                os.chdir(root)
                if lock is None:
                    lock = ProjectLock(os.path.join(root, ".farmer"))
                    lock.acquire()
                    lock.defer_signals(stop_now=True)  # a signal now ends in last-build.json
                outcome = noop.try_build(farmfile, targets, slots)
                if isinstance(outcome, int):
                    return _built(outcome)
                proof = outcome
        elif not dry_run and not trace_file:
            enter(directory)
            directory = None
            farmfile = os.path.abspath(farmfile if farmfile_given else "build.ninja")
            farmfile_given = True
            code = _ninja_noop(farmfile, targets, slots, lock, base_dir)
            if code is not None:
                return _built(code)
        from farmer.build.run import BuildOptions, run_build

        later: list[Callable[[], None]] = []  # work the first commands need not wait for
        spec, graph = load_project(directory, farmfile, not dry_run, ninja, farmfile_given, base_dir,
                                   later)
        if not dry_run:
            from farmer.plan import stale
            from farmer.files.lock import ProjectLock

            if lock is None:
                lock = ProjectLock(os.path.join(spec.root, ".farmer"))
            if lock.fd is None:
                lock.acquire()
                lock.defer_signals(stop_now=True)
            state = stale.open_state(lock.dir)  # the build's too: state.db opened once
        if not dry_run and not is_ninja(farmfile, ninja):
            reload = lambda: load_project(None, os.fspath(spec.path), True)  # noqa: E731
            spec, graph, removed = stale.sweep(spec, graph, reload, state)
            if removed:
                later.clear()  # the graph was made again, and its cache written
        live = sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb" and not dry_run
        opts = BuildOptions(targets=targets, jobs=slots, load=load, keep_going=keep_going,
                            dry_run=dry_run, explain=explain, no_worlds=no_worlds,
                            timeout=timeout, live=live, trace_file=trace_file, worlds=worlds,
                            cache=use_cache, cache_dir=os.path.abspath(cache_dir) if cache_dir else None,
                            remote=remote, base_dir=base_dir)
        later.insert(0, paused.__exit__)  # run last: after the graph cache's write
        if not is_ninja(farmfile, ninja) or dry_run:
            code = run_build(spec, graph, opts, lock, proof, executor, cache, state, later)
            return code if dry_run else _built(code, graph)
        from farmer.build import ninja as manifest  # as ninja: remake the manifest first

        # Taken before the regeneration edge is checked: a change after it is seen next time.
        regenerated_from = manifest.regeneration_inputs(spec, graph)
        read_spec = spec
        spec, graph, state, code = manifest.regenerate(spec, graph, opts, lock, state)
        if code:
            return code
        if spec is not read_spec:
            later[1:] = []  # the manifest was read again, and its cache written
        elif regenerated_from is not None and not trace_file:
            # Once the first commands have started, after the graph cache's write (whose
            # files it names), not after the last: without a proof (this build failed or
            # was stopped) it vouches for nothing (farmer/store/ninja_stamp.py).
            later.insert(1, lambda: manifest.stamp(read_spec, regenerated_from))
        code = run_build(spec, graph, opts, lock, proof, executor, cache, state, later)
        return _built(code, graph)
    except KeyboardInterrupt:
        if lock is not None and lock.early and lock.fd is not None:  # before the build began
            _interrupted_before_planning(lock, started_at, slots)
        raise
    except TaskError as e:  # a missing input found by the no-op proof's selection
        from farmer.manifest.farmfile import locate

        raise locate(e, farmfile) from None
    finally:
        paused.__exit__()  # (a build that started commands resumed it then)
        if state is not None:
            state.close()  # the build closed it, unless it ended before the build began
        if lock is not None:
            lock.release()


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


def quick_build_args(argv: list[str]) -> dict | None:
    """The arguments of `farmer build` in its common form, read without click; None for
    anything else (click then reads it, and says what is wrong with it)."""
    if not argv or argv[0] != "build":
        return None
    args: dict = {"targets": []}
    names = {"-C": "directory", "-f": "farmfile", "-j": "jobs"}
    i, n = 1, len(argv)
    while i < n:
        arg = argv[i]
        i += 1
        if arg == "--":
            args["targets"].extend(argv[i:])
            break
        if arg == "-":
            return None  # what a lone dash means is click's to say
        if not arg.startswith("-"):
            args["targets"].append(arg)
        elif arg == "-k":
            args["keep_going"] = True
        elif arg[:2] in names:
            value = arg[2:] if len(arg) > 2 else (argv[i] if i < n else None)
            i += len(arg) == 2
            if not value or value.startswith("-"):
                return None
            if arg[:2] == "-j":
                if not (value.isascii() and value.isdigit()):
                    return None
                value = int(value)
            args[names[arg[:2]]] = value
        else:
            return None
    return args


class Stopped(BaseException):
    """SIGTERM or SIGHUP outside a build's own handling: the same clean exit as Ctrl-C.
    (Not a KeyboardInterrupt: click would turn that into Abort, exit 130.)"""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


class ReaderGone:
    """sys.stdout or sys.stderr that, once its reader has gone (`farmer build | head -1`
    closes the pipe), drops what follows instead of failing: the build goes on, writes
    last-build.json and exits with its own status, as if nobody was reading."""

    __slots__ = ("stream",)

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        # /dev/null in the pipe's place: what the stream still buffers, and every later
        # write, by farmer or at interpreter exit, goes nowhere without an error.
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def main(command: Callable[[], int | None], leave_at_once: bool = False) -> NoReturn:
    """Run a command and exit with its status; errors end it with a one-line message.
    `leave_at_once`: end without the interpreter's teardown (`leave`)."""
    if sys.stdout is not None and not isinstance(sys.stdout, ReaderGone):
        sys.stdout = ReaderGone(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, ReaderGone):
        sys.stderr = ReaderGone(sys.stderr)
    try:
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, _stop)
        code = _guarded(command)
    finally:
        # The outcome is decided: a signal now (a second Ctrl-C while farmer exits) must
        # not turn the exit status into a KeyboardInterrupt or a death by signal.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
    if leave_at_once:
        leave(code)
    sys.exit(code)


def leave(code: int) -> NoReturn:
    """Exit with `code` through os._exit, once a build has ended: the interpreter's own
    teardown (freeing the graph, the modules, every object one by one) costs a build
    milliseconds of CPU, more the larger its graph, and changes nothing on disk. What it
    would do that matters is done here: a build has closed state.db (its checkpoint),
    last-build.json and the logs itself, and stdout and stderr are flushed (a reader that
    has gone: ReaderGone). Anything unusual takes the ordinary way out: a thread still
    running (the interpreter joins it), exit handlers or a profiler or tracer (`python -m
    cProfile`, coverage: they save their data at exit), a flush that fails."""
    import atexit  # built in

    threading = sys.modules.get("threading")
    running = threading is not None and any(t.is_alive() and not t.daemon and t is not threading.main_thread()
                                            for t in threading.enumerate())
    if running or getattr(atexit, "_ncallbacks", lambda: 1)() or sys.getprofile() or sys.gettrace():
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            sys.exit(code)
    os._exit(code)


def interrupted(code: int) -> NoReturn:
    """Leave at once with 128 + the signal. (Not through sys.exit: a KeyboardInterrupt that
    passed through an exec() of a string, as dataclasses do while farmer imports, leaves
    CPython 3.11 set to kill itself with SIGINT at exit, whatever the exit status.)"""
    print("farmer: interrupted", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _guarded(command: Callable[[], int | None]) -> int:
    try:
        return command() or 0
    except (UsageError, LockHeld) as e:
        print(f"farmer: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # The file system said no (read-only, full, permissions): say what and where.
        where = f"{e.filename}: " if e.filename else ""
        print(f"farmer: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Stopped) as e:
        interrupted(128 + getattr(e, "signum", signal.SIGINT))
    except Exception as e:
        sqlite3 = sys.modules.get("_sqlite3")  # only a command that opened state.db has it (state.py)
        if sqlite3 is None or not isinstance(e, sqlite3.Error):
            raise
        # Full, read-only, I/O: the disk's trouble, and the state is intact; else damage.
        hint = ("check the disk's free space and permissions" if isinstance(e, sqlite3.OperationalError)
                else "remove .farmer/ to start afresh")
        print(f"farmer: error: .farmer/state.db: {e}; {hint}", file=sys.stderr)
        return 2
