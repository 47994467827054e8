"""Which of many files changed since their stat data was recorded: the no-op proof's check
(farmer/noop.py), shared among forked children when there are enough files and CPUs.

The stat data is a flat table: FIELDS native int64s per file (mtime_ns, size, inode,
ctime_ns) in one bytearray, read and written as bytes and compared as one list of ints, not
as tens of thousands of tuples. (A memoryview reads it: the array module would import
collections, 2 ms of every no-op build.)

Threads would not help: the GIL serialises the stat calls. A child that cannot start or
fails leaves its part to the parent; an interrupted check kills and reaps every child.
Like noop.py, this is on every no-op build's path: it imports only os, sys and marshal.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False  # start-up rule (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from farmer.grains import StatKey

FIELDS = 4  # int64s per file in a table
STAT_BYTES = 8 * FIELDS  # bytes per file in a table
_MISSING = (-1, -1, -1, -1)  # a file that cannot be statted: no recorded stat has size -1
_BLOCK = FIELDS * 64  # ints compared at a time when looking for the files that differ


def table(keys: Iterable[StatKey]) -> bytearray:
    """These stat keys laid flat, as `changed` compares them."""
    flat = bytearray()
    for key in keys:
        flat += packed(key)
    return flat


def packed(key: StatKey) -> bytes:
    """One file's entry in a table."""
    return b"".join(v.to_bytes(8, sys.byteorder, signed=True) for v in key)


def ints(data: bytes | bytearray | memoryview, lo: int = 0, hi: int | None = None) -> list[int]:
    """The native int64s of `data` from the `lo`th to before the `hi`th."""
    with memoryview(data) as raw:
        return raw[8 * lo:None if hi is None else 8 * hi].cast("q").tolist()


def stat_of(stats: bytearray, n: int) -> StatKey:
    """The stat key of the table's `n`th file."""
    return tuple(ints(stats, FIELDS * n, FIELDS * n + FIELDS))  # type: ignore[return-value]


def changed(paths: list[str], stats: bytearray, lo: int, hi: int) -> list[int]:
    """The indices in [lo, hi) of the files whose stat data is not as recorded in `stats`."""
    now: list[int] = []
    add = now.extend
    try:
        for s in map(os.stat, paths[lo:hi]):
            add((s.st_mtime_ns, s.st_size, s.st_ino, s.st_ctime_ns))
    except OSError:
        now = []
        for p in paths[lo:hi]:
            now.extend(stat_key(p) or _MISSING)
    recorded = ints(stats, FIELDS * lo, FIELDS * hi)
    if now == recorded:
        return []
    found = []
    for at in range(0, len(now), _BLOCK):  # blocks first: a few files differ among thousands
        if now[at:at + _BLOCK] != recorded[at:at + _BLOCK]:
            found += [lo + k // FIELDS for k in range(at, min(at + _BLOCK, len(now)), FIELDS)
                      if now[k:k + FIELDS] != recorded[k:k + FIELDS]]
    return found


# A forked checker pays for itself from about this many files (fork, pipe, reap: ~1 ms).
_FILES_PER_PROCESS = 3000


def changed_in_parallel(paths: list[str], stats: bytearray) -> set[int] | None:
    """`changed` over all files, the work shared with forked children when there are
    enough files and CPUs for it to pay (as git's preload-index shares its lstat calls
    among threads; here the GIL would serialise threads). None: check them here alone."""
    parts = min(len(os.sched_getaffinity(0)), len(paths) // _FILES_PER_PROCESS, 8)
    threading = sys.modules.get("threading")
    if parts < 2 or (threading is not None and threading.active_count() > 1):
        return None  # forking a process with threads could copy a lock held mid-operation
    bounds = [len(paths) * k // parts for k in range(parts + 1)]
    children: list[tuple[int, int, int, int]] = []  # pid, read end, lo, hi
    found_all: set[int] = set()
    try:
        for lo, hi in zip(bounds[1:-1], bounds[2:]):
            try:
                children.append((*_fork_checker(paths, stats, lo, hi), lo, hi))
            except OSError:  # no process to spare: this one checks that part
                found_all.update(changed(paths, stats, lo, hi))
        found_all.update(changed(paths, stats, 0, bounds[1]))
        while children:
            pid, fd, lo, hi = children.pop()
            found = _collect(pid, fd)
            found_all.update(changed(paths, stats, lo, hi) if found is None else found)
    except BaseException:  # interrupted: no child outlives the check
        for pid, fd, _, _ in children:
            _collect(pid, fd, kill=True)
        raise
    return found_all


def _fork_checker(paths: list[str], stats: bytearray, lo: int, hi: int) -> tuple[int, int]:
    """A child that writes `changed(lo, hi)`, marshalled, to the pipe it returns."""
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # the child: whatever happens, it ends here (os._exit: no cleanup of the parent's)
        code = 1
        try:
            os.close(r)
            data = memoryview(marshal.dumps(changed(paths, stats, lo, hi)))
            while data:
                data = data[os.write(w, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, fd: int, kill: bool = False) -> list[int] | None:
    """What the checker child found, or None if it failed. The child is reaped in any
    case (killed first with `kill`, or if this is interrupted before it is done)."""
    chunks, done = [], False
    try:
        while not kill and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
        done = not kill
    finally:
        os.close(fd)
        if not done:
            try:
                os.kill(pid, 9)  # SIGKILL
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    try:
        found = marshal.loads(b"".join(chunks))
    except (EOFError, ValueError, TypeError):
        return None
    return found if isinstance(found, list) else None


def stat_key(path: str) -> StatKey | None:
    try:
        s = os.stat(path)
    except OSError:
        return None
    return (s.st_mtime_ns, s.st_size, s.st_ino, s.st_ctime_ns)
