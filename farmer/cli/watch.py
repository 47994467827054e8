"""`farmer watch`: build, then build again whenever an input of the selected graph changes.

The loop: take the project's lock and keep it, in a workspace (build/workspace.py) that also
keeps state.db, the stat cache, the graph and the worlds warm between builds; build; wait for
file events under the project root (the kernel's inotify through `watchfiles`, else polling); keep of them only what a
build could see differently (`Inputs.changes`); build again. What a build could see:

- a declared input of a selected computation, or a file its depfile listed (a header),
  whose content differs from what a reader's trace recorded (a change saved while the
  build ran included: that trace recorded it as changed), a declared output edited by
  hand (other than its trace), a world input other than state.db's stat cache has it.
  Farmer's own writes (outputs, logs, depfiles) are recorded there already, so they never
  start a build, and a file touched but unchanged costs a stat, a trace read and a hash;
- a file added to or removed from a directory a foreach pattern or glob lists (not a
  declared output, which patterns match whether it exists or not);
- the Farmfile's bytes, which re-read the graph.

A change made while a build runs is caught after it: it differs from what that build saw.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable

from farmer.build import command
from farmer.build.workspace import Workspace
from farmer.errors import UsageError
from farmer.files.digests import hash_bytes, hash_file, stat_key
from farmer.graph.matching import list_files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.build.request import BuildRequest
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec
    from farmer.store.state import State, Trace

QUIET_MS = 30  # a burst of saves ends after this long without another event
DEBOUNCE_MS = 500  # and is cut at this length (a long checkout is built in pieces)
POLL_S = 0.5
ADDED, MODIFIED, DELETED = 1, 2, 3  # watchfiles' Change values; the polling watcher's too
_SKIP = (".farmer", ".git")
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Inputs:
    """What the selected graph rests on, to judge file events by."""

    __slots__ = ("root", "farmfile", "farmfile_digest", "files", "readers", "makers", "elsewhere",
                 "own", "listings", "discovering")

    def __init__(self, spec: Spec, graph: Graph, targets: list[str]) -> None:
        from farmer.graph.graph import select_targets

        self.root = spec.root
        self.farmfile = os.path.relpath(spec.path, spec.root)
        self.farmfile_digest = spec.digest
        comps = graph.computations
        selected = select_targets(spec, graph, targets)
        chosen = set(selected)
        readers: dict[str, str] = {}  # a declared input -> a selected computation reading it
        discovering: list[str] = []  # the selected computations with a depfile
        makers: dict[str, str] = {}  # a declared output -> its selected computation
        worlds: set[str] = set()
        for i in selected:
            comp = comps[i]
            for path in comp.inputs:
                readers.setdefault(path, comp.id)
            for path in comp.outputs:
                makers[path] = comp.id
            if comp.world is not None:
                worlds.add(comp.world)
            if comp.depfile:
                discovering.append(comp.id)
        files = set(readers) | set(makers)
        for w in worlds:
            files.update(graph.world_inputs.get(w, ()))
        own = set(graph.producer)  # declared outputs: patterns match them, present or not
        elsewhere: set[str] = set()  # what only computations not selected read or write
        for comp in comps:
            for path in (comp.depfile, comp.ninja and comp.ninja.rspfile):
                if path:
                    own.add(path)
            if comp.index not in chosen:
                elsewhere.update(comp.inputs)
                elsewhere.update(comp.outputs)
        self.files, self.readers, self.makers, self.discovering = files, readers, makers, discovering
        self.elsewhere, self.own = elsewhere - files, own
        self.listings = {prefix: set(list_files(spec.root, prefix)) for prefix in graph.listings}

    def changes(self, events: Iterable[tuple[int, str]], recorded: Recorded) -> tuple[list[str], bool]:
        """What of `events` (kind, absolute path) a build would see differently, as the
        user would name it (`+new`, `-gone` in a listed directory), and whether the graph
        must be read again."""
        changed: list[str] = []
        listed: set[str] = set()
        reload = False
        for kind, path in events:
            rel = self._relative(path)
            if rel is None:
                continue
            if kind != MODIFIED:
                listed.add(rel)
            if rel == self.farmfile:
                if _farmfile_digest(path) != self.farmfile_digest:
                    changed.append(rel)
                    reload = True
            elif rel not in self.elsewhere and self._differs(rel, recorded):
                changed.append(rel)
        for prefix, before in self.listings.items():
            if not any(prefix == "" or p.startswith(prefix + "/") for p in listed):
                continue
            now = set(list_files(self.root, prefix))
            news = [f"+{p}" for p in sorted(now - before) if p not in self.own]
            news += [f"-{p}" for p in sorted(before - now) if p not in self.own]
            self.listings[prefix] = now
            if news:
                changed += news
                reload = True
        named = {c[1:] for c in changed if c[0] in "+-"}
        return sorted({c for c in changed if c not in named}), reload

    def _differs(self, path: str, recorded: Recorded) -> bool:
        """Whether a build would find `path` other than the last build left it: an output
        there other than its trace says, an input other than a reader's trace read it (changed
        while that ran, say; a file a reader's depfile listed as well), another file farmer
        digested (a world input) other than the stat cache has it. Files farmer never looked
        at do not count."""
        if path in self.makers:  # edited by hand; gone is no news: farmer removes failed ones
            if not os.path.exists(path):
                return False
            trace = recorded.trace(self.makers[path])
            was = dict(trace.outputs).get(path) if trace is not None else None
        elif path in self.readers:
            trace = recorded.trace(self.readers[path])
            if trace is None:  # never built, or it failed: the change may be its fix
                return True
            was = dict(trace.inputs).get(path)
        elif path in self.own:
            return False
        else:
            entry = recorded.stat_entry(path)
            if entry is None:  # never digested (an editor's swap file): no trace to read
                return False
            read = recorded.discovered(self.discovering).get(path)
            if read:  # a header: as its readers' traces recorded it (changed while one ran?)
                now = recorded.digest(path)
                return any(was != now for was in read)
            was = entry[1]
        return recorded.digest(path) != was

    def _relative(self, path: str) -> str | None:
        """`path` relative to the root; None outside it and in .farmer/ and .git/."""
        if not path.startswith(self.root + os.sep):
            return None
        rel = path[len(self.root) + 1:]
        return None if rel.split(os.sep, 1)[0] in _SKIP else rel


def _farmfile_digest(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hash_bytes(f.read())
    except OSError:
        return None


class Recorded:
    """What the last build recorded, from state.db as the workspace keeps it open (asked for
    when first needed)."""

    def __init__(self, state: Callable[[], State]) -> None:
        self._state = state
        self._discovered: dict[str, list[str]] | None = None

    @property
    def state(self) -> State:
        return self._state()

    def trace(self, cid: str) -> Trace | None:
        return self.state.trace(cid)

    def stat_entry(self, path: str) -> tuple | None:
        return self.state.stat_entry(path)

    def discovered(self, cids: list[str]) -> dict[str, list[str]]:
        """The files the traces of `cids` list as discovered (their depfiles'), each with
        the digests they recorded of it; read once (the traces of the last build)."""
        if self._discovered is None:
            self._discovered = {}
            for cid in cids:
                trace = self.trace(cid)
                for path, digest in trace.discovered if trace is not None else ():
                    self._discovered.setdefault(path, []).append(digest)
        return self._discovered

    def digest(self, path: str) -> str | None:
        """`path`'s content digest now (None: missing), hashed unless the stat cache has
        its stat as it is (a racy entry never matches: its file is hashed)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        entry = self.stat_entry(path)
        if entry is not None and entry[0] == stat_key(st):
            return entry[1]
        try:
            return hash_file(path)
        except OSError:
            return "unreadable"


class Watcher:
    """File events under the project root, a burst at a time, from inotify (watchfiles'
    Rust core: its thread collects events from the moment it is made, also while a build
    runs)."""

    def __init__(self, root: str) -> None:
        from watchfiles._rust_notify import RustNotify

        self._notify = RustNotify([root], False, False, 0, True, True)

    def track(self, paths: dict[str, tuple | None], listings: dict[str, set[str]]) -> None:
        """inotify sees every file under the root: nothing to add."""

    def wait(self, clients=None) -> set[tuple[int, str]]:
        """`clients`: a server's (cli/server.py): a client waiting ends the wait, with no events."""
        while True:
            got = self._notify.watch(DEBOUNCE_MS, QUIET_MS, 0, clients)
            if got == "signal":  # our handler raised; watchfiles dropped the exception
                raise KeyboardInterrupt
            if got == "stop":
                return set()
            if isinstance(got, set):
                return got

    def close(self) -> None:
        self._notify.close()


class PollingWatcher:
    """The same events from stat calls every POLL_S, where watchfiles is missing: only the
    files `track` names, and additions and removals in the listed directories."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.stats: dict[str, tuple | None] = {}
        self.listings: dict[str, set[str]] = {}

    def track(self, paths: dict[str, tuple | None], listings: dict[str, set[str]]) -> None:
        """`paths`: absolute path -> the stat key the last build saw (None: unknown), and
        `listings` as the graph was read, so that a change made while the build ran is an
        event at the first poll."""
        self.stats = {p: key if key is not None else _stat(p) for p, key in paths.items()}
        self.listings = {prefix: set(files) for prefix, files in listings.items()}

    def wait(self, clients=None) -> set[tuple[int, str]]:
        events: set[tuple[int, str]] = set()
        while True:
            time.sleep(POLL_S if not events else QUIET_MS / 1000)
            if clients is not None and not events and clients.is_set():
                return events
            found = self._poll()
            if not found and events:
                return events
            events |= found

    def _poll(self) -> set[tuple[int, str]]:
        found = set()
        for path, was in self.stats.items():
            now = _stat(path)
            if now != was:
                self.stats[path] = now
                found.add((ADDED if was is None else DELETED if now is None else MODIFIED, path))
        for prefix, before in self.listings.items():
            now = set(list_files(self.root, prefix))
            found |= {(ADDED, os.path.join(self.root, p)) for p in now - before}
            found |= {(DELETED, os.path.join(self.root, p)) for p in before - now}
            self.listings[prefix] = now
        return found

    def close(self) -> None:
        pass


def _stat(path: str) -> tuple | None:
    try:
        return stat_key(os.stat(path))
    except OSError:
        return None


def _watcher(root: str) -> Watcher | PollingWatcher:
    try:
        return Watcher(root)
    except ImportError as e:
        why = "watchfiles is not installed" if e.name == "watchfiles" else f"watchfiles cannot be used ({e})"
        hint = "; `pip install watchfiles` to be woken by the kernel (inotify)"
    except OSError as e:  # no inotify, or too few watches (fs.inotify.max_user_watches)
        why, hint = f"inotify cannot watch {root} ({e})", ""
    print(f"farmer: warning: {why}, so farmer watch polls the inputs every {POLL_S:g} s{hint}",
          file=sys.stderr)
    return PollingWatcher(root)


class _Signals:
    """While the watch waits: Ctrl-C, SIGTERM and SIGHUP end it with 128 + the signal.
    The handler raises KeyboardInterrupt, the one exception watchfiles passes on from its
    wait; the signal's number rides on it. Every signal is also kept in `early`, the lock's
    list, where a build's handlers keep those they do not act on (one that comes as a build
    ends: build.py, lock.py): the watch stops for any of them (`stopped`), also for one whose
    exception something swallowed."""

    def __init__(self) -> None:
        self.early: list[int] = []

    @property
    def signum(self) -> int:
        return self.early[0] if self.early else signal.SIGINT

    def stopped(self) -> int | None:
        """128 + the first signal that came, if one did."""
        return 128 + self.early[0] if self.early else None

    def install(self) -> None:
        for s in _SIGNALS:
            signal.signal(s, self._raise)

    def _raise(self, signum: int, frame: object) -> None:
        self.early.append(signum)
        stop = KeyboardInterrupt()
        stop.signum = self.signum  # type: ignore[attr-defined]
        raise stop

    def ignore(self) -> None:
        for s in _SIGNALS:
            signal.signal(s, signal.SIG_IGN)


def _say(text: str) -> None:
    print(f"farmer: watch: {text}", file=sys.stderr, flush=True)


def watch(request: BuildRequest, runner=None) -> int:
    """`farmer watch`: a build of `request`, then one more after each change, in one
    workspace that holds the lock, state.db, the graph and the worlds until the watch
    ends. Returns the exit status when a signal (or a build's) ends the watch. `runner`:
    how a client's command runs (cli/app.py's `run_served`): the watch serves its clients
    between its builds (cli/server.py)."""
    farmfile, given = command.named_manifest(request.directory, request.farmfile, request.farmfile_given,
                                             request.ninja)
    request = request.replace(directory=None, farmfile=farmfile, farmfile_given=given)
    if request.is_ninja():
        name = os.path.relpath(farmfile) if os.path.isabs(farmfile) else farmfile
        raise UsageError(f"{name}: farmer watch reads Farmfiles, not ninja manifests; "
                         "run `farmer build -f` on it after each change")
    signals = _Signals()
    signals.install()
    ws = Workspace(keep=True, role="watch")
    spec, graph = ws.read_graph(request.farmfile, request.directory, request.farmfile_given)
    targets = request.targets
    request = request.replace(directory=None, farmfile=os.fspath(spec.path), farmfile_given=True)
    # The builds' handlers keep the signals they do not act on in the lock's list: this one.
    ws.hold(spec.root, signals.early)
    watcher = server = None
    try:
        if runner is not None:
            from farmer.cli.server import Server

            server = Server(spec.root, float("inf"), runner, ws, signals.install)
            server.listen()
        watcher = _watcher(spec.root)  # before the first build, so that no change is missed
        inputs = Inputs(spec, graph, targets)
        del graph  # (the workspace keeps it for the builds)
        code = _build(ws, request, signals)
        failed_setups: dict[str, str] = {}  # world -> the fingerprint its set-up failed under
        while code < 128:  # not stopped by a signal
            _warm_up(ws, request, failed_setups)
            _track(watcher, inputs, ws)
            _say(f"waiting for changes to {len(inputs.files)} files (Ctrl-C to stop)")
            changed: list[str] = []
            while not changed:
                stopped = signals.stopped()
                if stopped is not None:  # one whose exception did not reach us
                    return stopped
                try:
                    events = watcher.wait(server)
                except KeyboardInterrupt as e:
                    e.signum = signals.signum  # type: ignore[attr-defined]
                    raise
                if server is not None and not server.serve_pending():
                    return 0  # farmer serve --stop
                changed, reload = inputs.changes(events, Recorded(ws.open_state))
            _say(f"{time.strftime('%H:%M:%S')} {', '.join(changed[:10])}"
                 f"{f' and {len(changed) - 10} more' if len(changed) > 10 else ''} changed")
            if reload:
                try:
                    spec, graph = ws.read_graph(request.farmfile)
                    inputs = Inputs(spec, graph, targets)
                    del graph
                    ws.worlds.retain(spec.worlds)
                except UsageError as e:  # fixed by the next edit, most likely
                    print(f"farmer: error: {e}", file=sys.stderr, flush=True)
                    inputs.farmfile_digest = _farmfile_digest(spec.path)
                    continue
            code = _build(ws, request, signals)
        return code
    finally:
        signals.ignore()  # a second Ctrl-C must not cut the cleanup short
        try:
            if server is not None:
                server.unlisten()
            ws.close()  # its worlds stopped, then the lock released
        finally:
            if watcher is not None:
                watcher.close()


def _build(ws: Workspace, request: BuildRequest, signals: _Signals) -> int:
    try:
        code = ws.build(request)
    except UsageError as e:  # a missing input, a cycle: the next edit may fix it
        print(f"farmer: error: {e}", file=sys.stderr, flush=True)
        code = e.exit_code
    except OSError as e:  # the file system said no (full, read-only): maybe not next time
        print(f"farmer: error: {f'{e.filename}: ' if e.filename else ''}{e.strerror or e}",
              file=sys.stderr, flush=True)
        code = 2
    signals.install()  # a build leaves its own handlers, keeping what comes, behind
    stopped = signals.stopped()  # one that came as the build ended, or under a no-op's
    return code if stopped is None or code >= 128 else stopped


def _warm_up(ws: Workspace, request: BuildRequest, failed_setups: dict[str, str]) -> None:
    """The worlds the selected tasks need, set up now if they are not warm: the next save
    builds as fast as the ones after it (build/warmup.py)."""
    if request.no_worlds:
        return
    from farmer.build.warmup import warm_up

    try:
        line = warm_up(ws, request.targets, failed_setups, _say).line()
    except OSError as e:  # no FIFO, no process: the next build tries and says why
        line = f"cannot set up the worlds now ({e.strerror or e})"
    if line is not None:
        _say(line)


def _track(watcher: Watcher | PollingWatcher, inputs: Inputs, ws: Workspace) -> None:
    if isinstance(watcher, Watcher):
        return
    cache = ws.open_state().stat_cache()
    paths = {p for p in cache if not os.path.isabs(p) and p not in inputs.elsewhere}
    paths |= {p for p in inputs.files if not os.path.isabs(p)}
    paths.add(inputs.farmfile)
    watcher.track({os.path.join(inputs.root, p): cache[p][0] if p in cache else None for p in paths},
                  inputs.listings)
