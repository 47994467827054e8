"""A build directory shared with ninja (docs/ninja.md, "Switching between ninja and farmer").

`adopt`: before a build of a build.ninja, the edges ninja ran since farmer last looked at
its `.ninja_log` (the lines past the mark in `.farmer/ninja-log.seen`) whose outputs are not
as farmer's own record left them (or that farmer never recorded), and that ninja would call
up to date now -- the same command hash, every output there and at least as new as every
input, declared or in the deps log (or depfile) -- get a trace as if farmer had run them,
so that farmer's first build after ninja's runs nothing that ninja would not.

`record_ran`: after a build, a log line for each edge farmer ran (and a deps record for a
`deps = gcc` edge), in the log's own version (5, 6 or 7: ninja 1.10 to 1.13), so that
ninja's next build runs nothing that farmer just ran. A log of another version is left
alone both ways.

A problem with either file is never a failed build: farmer goes on without it."""

from __future__ import annotations

import os

from farmer.store import ninja_log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.files.digests import Digests
    from farmer.graph.graph import Computation, Graph
    from farmer.run.executors.base import Outcome
    from farmer.store.state import State

_ONE_BY_ONE = 256  # candidates whose traces are read one by one; more: all at once
SEEN = "ninja-log.seen"  # in .farmer/: how far farmer has read (or written) .ninja_log
_NEW_LOG_VERSION = 6  # without a log, nor a ninja to ask: ninja 1.12's


def logs_dir(manifest: str) -> str | None:
    """Where ninja keeps its logs for `manifest`: its directory, or the top-level `builddir`
    it sets (relative to it); None when that is made of variables farmer does not evaluate
    here (the logs are then not shared)."""
    where = "."
    try:
        with open(manifest, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                if line.startswith("builddir") and line[8:].lstrip(" ").startswith("="):
                    where = line.split("=", 1)[1].strip() or "."
    except OSError:
        return None
    return None if "$" in where else where


def _mark(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _read_mark(farmer_dir: str) -> list[int] | None:
    try:
        with open(os.path.join(farmer_dir, SEEN)) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return None


def _write_mark(farmer_dir: str, log: str) -> None:
    try:
        st = os.stat(log)
        with open(os.path.join(farmer_dir, SEEN), "w") as f:
            f.write(" ".join(map(str, _mark(st))) + "\n")
    except OSError:
        pass


def _command(comp: Computation) -> str:
    """What ninja's log hashes: the command, and `;rspfile=CONTENT` when it has one."""
    content = comp.ninja.rspfile_content if comp.ninja is not None else None
    return comp.action + (";rspfile=" + content if content else "")


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def depfile_inputs(path: str) -> list[str] | None:
    """The inputs a depfile lists, canonical as ninja makes them; None when it cannot be read."""
    from farmer.record.depfile import DepfileError, parse

    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return [os.path.normpath(p) for p in parse(f.read())]
    except (OSError, DepfileError):
        return None


def deps_log_inputs(manifest: str, output: str) -> list[str] | None:
    """What ninja's deps log records as `output`'s inputs, when the record is as new as the
    file (ninja's own test: an older one is stale); None without such a record."""
    where = logs_dir(manifest)
    mtime = _mtime(output)
    if where is None or mtime is None:
        return None
    found = ninja_log.read_deps(os.path.join(where, ninja_log.DEPS)).get(output)
    if found is None or found[0] < mtime:
        return None
    return found[1]


def adopt(manifest: str, graph: Graph, state: State, farmer_dir: str) -> int:
    """Traces for the edges ninja built since farmer last read its log (see the module's
    docstring), saved now; how many. The working directory is the manifest's."""
    where = logs_dir(manifest)
    if where is None:
        return 0
    log = os.path.join(where, ninja_log.LOG)
    try:
        st = os.stat(log)
    except OSError:
        return 0
    seen = _read_mark(farmer_dir)
    if seen == _mark(st):
        return 0
    try:
        with open(log, "rb") as f:
            data = f.read()
    except OSError:
        return 0
    version, entries = ninja_log.parse_log(data.decode("utf-8", "surrogateescape"))
    # Only what was appended since farmer's mark is ninja's news (a log rewritten by a
    # recompaction starts over: every line is).
    start = seen[1] if seen is not None and seen[0] == st.st_ino and seen[1] <= st.st_size else 0
    _, fresh = ninja_log.parse_log(data[start:].decode("utf-8", "surrogateescape"))
    count = 0
    if version in ninja_log.KNOWN_VERSIONS and fresh:
        count = _adopt_edges(graph, state, version, entries, list(fresh), os.path.join(where, ninja_log.DEPS))
    _write_mark(farmer_dir, log)
    return count


def _adopt_edges(graph: Graph, state: State, version: int, entries: dict, outputs: list[str],
                 deps_path: str) -> int:
    from farmer.files.digests import Digests
    from farmer.plan.uptodate import timed_outputs
    from farmer.record.recorder import digest_text
    from farmer.store.state import Trace

    comps = graph.computations
    chosen = sorted({i for i in (graph.producer.get(p) for p in outputs) if i is not None
                     and comps[i].kind == "cmd" and comps[i].ninja is not None})
    if not chosen:
        return 0
    deps_log = ninja_log.read_deps(deps_path) if any(_deps_logged(comps[i]) for i in chosen) else {}
    digests = Digests(state.stat_cache())
    digests.timed = timed_outputs(graph)
    known = state.traces() if len(chosen) > _ONE_BY_ONE else None
    traces = []
    for i in chosen:
        comp = comps[i]
        # What farmer recorded and still finds as it left it stands: its own check (by
        # content) decides, not ninja's (a log rewritten by `-t recompact` or `-t restat`
        # lists edges ninja did not run). An output rewritten since (its stat is not the one
        # farmer last saw) was ninja's run, though its bytes may be the same (a compile of an
        # edit that changes no code): ninja's judgement is taken.
        trace = known.get(comp.id) if known is not None else state.trace(comp.id)
        if trace is not None and not _rewritten(digests, comp.outputs) \
                and trace.outputs == [(p, digest_text(digests, p)) for p in comp.outputs]:
            continue
        found = _clean_for_ninja(comp, version, entries, deps_log)
        if found is None:
            continue
        declared = set(comp.inputs)
        traces.append(Trace(comp.id, comp.fingerprint, None, [(p, digest_text(digests, p)) for p in comp.inputs],
                            [(p, digest_text(digests, p)) for p in found if p not in declared],
                            [(p, digest_text(digests, p)) for p in comp.outputs]))
    if traces:
        state.save(traces, [], [], digests.changed)
    return len(traces)


def _rewritten(digests: Digests, outputs: list[str]) -> bool:
    """Whether one of `outputs` was written since farmer last took its digest (its stat now
    differs from the stat data farmer keeps; unknown: not rewritten). The mtime is left out:
    farmer keeps none for a file it saw in the racy window, and a write changes the ctime."""
    from farmer.files.stattable import stat_key_of

    for path in outputs:
        cached = digests.cache.get(path)
        now = stat_key_of(path)
        if cached is not None and (now is None or cached[0][1:] != now[1:]):
            return True
    return False


def _deps_logged(comp: Computation) -> bool:
    """Whether ninja keeps what `comp` read in its deps log: `deps = gcc` (its depfile deleted)
    or `deps = msvc` (the headers its output named)."""
    edge = comp.ninja
    return edge is not None and (bool(comp.depfile and edge.remove_depfile) or edge.msvc_prefix is not None)


def _clean_for_ninja(comp: Computation, version: int, entries: dict,
                     deps_log: dict[str, tuple[int, list[str]]]) -> list[str] | None:
    """What `comp` read by its depfile, when ninja would call it up to date now (ninja's
    RecomputeOutputDirty, without the log's start-time subtleties); None when not."""
    expected = ninja_log.command_hash(version, _command(comp))
    outputs = {}
    for out in comp.outputs:
        entry = entries.get(out)
        mtime = _mtime(out)
        if entry is None or mtime is None or (not comp.ninja.generator and entry.hash != expected):
            return None
        outputs[out] = (mtime, entry.mtime_ns)
    found: list[str] = []
    if comp.depfile or comp.ninja.msvc_prefix:
        if _deps_logged(comp):  # deps = gcc or msvc: the deps log has them
            first = comp.outputs[0]
            deps = deps_log.get(first)
            if deps is None or deps[0] < outputs[first][0]:
                return None
            found = deps[1]
        else:  # a depfile ninja reads where the command left it
            found = depfile_inputs(comp.depfile)
            if found is None:
                return None
    newest = 0
    for path in [*comp.inputs, *found]:
        mtime = _mtime(path)
        if mtime is None:
            return None
        newest = max(newest, mtime)
    for mtime, logged in outputs.values():
        if logged < newest or (mtime < newest and not comp.ninja.restat):
            return None
    return found


def record_ran(manifest: str, graph: Graph, outcomes: dict[int, Outcome], discovered: dict[int, list[str]],
               farmer_dir: str) -> None:
    """Log lines (and deps records) for the ninja edges that ran in this build (see the
    module's docstring). The working directory is the manifest's."""
    comps = graph.computations
    ran = [(comps[i], o) for i, o in outcomes.items() if o.ok and comps[i].kind == "cmd" and comps[i].ninja]
    where = logs_dir(manifest) if ran else None
    if where is None:
        return
    log, deps = os.path.join(where, ninja_log.LOG), os.path.join(where, ninja_log.DEPS)
    try:
        version = _log_version(log)
        if version not in ninja_log.KNOWN_VERSIONS:
            return
        lines, records = [], []
        for comp, outcome in ran:
            mtimes = {out: _mtime(out) for out in comp.outputs}
            latest = max((m for m in mtimes.values() if m is not None), default=0)
            h = ninja_log.command_hash(version, _command(comp))
            start, end = int(outcome.start_s * 1000), int(outcome.end_s * 1000)
            lines += [ninja_log.LogEntry(start, end, latest, out, h) for out in comp.outputs]
            if _deps_logged(comp):
                found = discovered.get(comp.index, [])
                declared = [p for p in comp.inputs if p not in found]
                records += [(out, m, declared + found) for out, m in mtimes.items() if m is not None]
        seen = _read_mark(farmer_dir)
        caught_up = seen is not None and _stat_mark(log) == seen
        os.makedirs(where, exist_ok=True)  # (ninja makes its builddir too)
        ninja_log.append_log(log, version, lines)
        ninja_log.append_deps(deps, records)
        if caught_up or seen is None:
            _write_mark(farmer_dir, log)  # farmer's own lines are no news to the next `adopt`
    except OSError:
        pass


def _stat_mark(log: str) -> list[int] | None:
    try:
        return _mark(os.stat(log))
    except OSError:
        return None


def _log_version(log: str) -> int | None:
    """The version of the log there is; without one, the one the `ninja` on PATH writes."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            head = f.readline()
        if head.startswith(ninja_log.LOG_HEADER):
            digits = head[len(ninja_log.LOG_HEADER):].strip()
            return int(digits) if digits.isdigit() else None
    except FileNotFoundError:
        pass
    return _ninja_writes()


def _ninja_writes() -> int:
    """The log version of the ninja on PATH: 5 before 1.12, 6 for 1.12, 7 from 1.13. (Asked
    with os's calls alone: a first build imports neither subprocess nor shutil.)"""
    ninja = next((p for d in os.environ.get("PATH", "").split(os.pathsep) if d
                  for p in [os.path.join(d, "ninja")] if os.access(p, os.X_OK) and os.path.isfile(p)), None)
    if ninja is None:
        return _NEW_LOG_VERSION
    read, write = os.pipe()
    try:
        try:
            null = os.open(os.devnull, os.O_RDWR)
            try:
                pid = os.posix_spawn(ninja, [ninja, "--version"], os.environ, file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, write, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
            finally:
                os.close(null)
        finally:
            os.close(write)
        chunks = []
        while chunk := os.read(read, 256):
            chunks.append(chunk)
        os.waitpid(pid, 0)
        major, minor = (int(x) for x in b"".join(chunks).decode().strip().split(".")[:2])
    except (OSError, ValueError):
        return _NEW_LOG_VERSION
    finally:
        os.close(read)
    return 5 if (major, minor) < (1, 12) else 6 if (major, minor) < (1, 13) else 7
