"""Which of many files changed since their stat data was recorded: the no-op proof's check
(farmer/store/proof.py), shared among forked children when there are enough files and CPUs.

The stat data is a flat table of stat keys (farmer/files/stattable.py).

Threads would not help: the GIL serialises the stat calls. A child that cannot start or
fails leaves its part to the parent; an interrupted check kills and reaps every child.
Like proof.py, this is on every no-op build's path: it imports only os, sys and marshal.
"""

from __future__ import annotations

import marshal
import os
import sys

from farmer.files.stattable import FIELDS, ints, stat_key_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_MISSING = (-1, -1, -1, -1)  # a file that cannot be statted: no recorded stat has size -1
_BLOCK = FIELDS * 64  # ints compared at a time when looking for the files that differ


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
            now.extend(stat_key_of(p) or _MISSING)
    recorded = ints(stats, FIELDS * lo, FIELDS * hi)
    if now == recorded:
        return []
    found = []
    for at in range(0, len(now), _BLOCK):  # blocks first: a few files differ among thousands
        if now[at:at + _BLOCK] != recorded[at:at + _BLOCK]:
            found += [lo + k // FIELDS for k in range(at, min(at + _BLOCK, len(now)), FIELDS)
                      if now[k:k + FIELDS] != recorded[k:k + FIELDS]]
    return found


# A forked checker pays for itself (a fork, a pipe and a reap) from about this many files.
_FILES_PER_PROCESS = 3000
_CHUNK = 256  # files a process takes from the shared queue at a time (at most 255 chunks)


def changed_in_parallel(paths: list[str], stats: bytearray,
                        meanwhile: Callable[[], object] | None = None,
                        exiting: list[int] | None = None) -> set[int] | None:
    """`changed` over all files, the work shared with forked children when there are
    enough files and CPUs for it to pay (as git's preload-index shares its lstat calls
    among threads; here the GIL would serialise threads). None: check them here alone.

    The files are cut into chunks, and each process takes the next chunk from a shared
    queue (a pipe holding one byte per chunk: a read takes a byte from it for one reader
    only) until none is left. So a child that waits for a CPU on a loaded machine leaves
    its chunks to the parent instead of keeping it waiting, and the parent can do other
    work while the children go on: `meanwhile` is called once, between two chunks, as soon
    as a changed file is seen by any process (a build that goes on imports its engine
    then). A chunk that a failed child took is checked here again.

    `exiting`: where the pids of children that have answered but not yet ended go, for the
    caller to `reap` later, instead of waiting here while each one's address space is torn
    down (a millisecond or two); without it, every child is reaped here."""
    parts = min(len(os.sched_getaffinity(0)), len(paths) // _FILES_PER_PROCESS, 8)
    threading = sys.modules.get("threading")
    if parts < 2 or (threading is not None and threading.active_count() > 1):
        return None  # forking a process with threads could copy a lock held mid-operation
    size = max(_CHUNK, -(-len(paths) // 255))
    bounds = list(range(0, len(paths), size)) + [len(paths)]
    queue, fill = os.pipe2(os.O_CLOEXEC)
    seen, tell = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)  # a byte from a child that saw a change
    children: list[tuple[int, int]] = []  # pid, read end of what it found
    found_all: set[int] = set()
    done: set[int] = set()
    try:
        os.write(fill, bytes(range(len(bounds) - 1)))  # fewer bytes than a pipe holds: at once
        os.close(fill)  # the queue, once read empty, reads as its end
        fill = -1
        for _ in range(parts - 1):
            try:
                children.append(_fork_checker(paths, stats, bounds, queue, tell))
            except OSError:  # no process to spare: this one checks more chunks
                break
        os.close(tell)
        tell = -1
        while chunk := os.read(queue, 1):
            k = chunk[0]
            found_all.update(changed(paths, stats, bounds[k], bounds[k + 1]))
            done.add(k)
            if meanwhile is not None and (found_all or _any_seen(seen)):
                meanwhile, call = None, meanwhile
                call()
        while children:
            pid, fd = children.pop()
            answer = _collect(pid, fd, exiting=exiting)
            if answer is not None:
                done.update(answer[0])
                found_all.update(answer[1])
        for k in range(len(bounds) - 1):
            if k not in done:  # taken by a child that failed
                found_all.update(changed(paths, stats, bounds[k], bounds[k + 1]))
    except BaseException:  # interrupted: no child outlives the check
        for pid, fd in children:
            _collect(pid, fd, kill=True)
        raise
    finally:
        for fd in (queue, fill, seen, tell):
            if fd >= 0:
                os.close(fd)
    return found_all


def _any_seen(seen: int) -> bool:
    try:
        return bool(os.read(seen, 1))
    except BlockingIOError:
        return False


def _fork_checker(paths: list[str], stats: bytearray, bounds: list[int], queue: int,
                  tell: int) -> tuple[int, int]:
    """A child that checks chunks from `queue` until it is empty, writes a byte to `tell`
    when it first finds a changed file, and at the end the chunks it checked and the
    changed files it found, marshalled, to the pipe it returns."""
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
            done, found = [], []
            while chunk := os.read(queue, 1):
                k = chunk[0]
                more = changed(paths, stats, bounds[k], bounds[k + 1])
                if more and not found:
                    os.write(tell, b"!")
                found += more
                done.append(k)
            data = memoryview(marshal.dumps((done, found)))
            while data:
                data = data[os.write(w, data):]
            os.close(w)  # the answer is whole: the parent need not wait for this exit
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, fd: int, kill: bool = False,
             exiting: list[int] | None = None) -> tuple[list[int], list[int]] | None:
    """The chunks the checker child checked and the changed files it found, or None if it
    failed. The child is reaped (killed first with `kill`, or if this is interrupted before
    it is done), or, once it has answered, put in `exiting` if it has not ended yet: it
    writes its answer only when it is whole, so an answer that reads whole is one."""
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
        ended, status = os.waitpid(pid, os.WNOHANG if done and exiting is not None else 0)
        if not ended and exiting is not None:
            exiting.append(pid)
    if status != 0:
        return None
    try:
        found = marshal.loads(b"".join(chunks))
    except (EOFError, ValueError, TypeError):
        return None
    return found if isinstance(found, tuple) and len(found) == 2 else None


def reap(pids: list[int]) -> None:
    """Wait for the checker children `changed_in_parallel` left ending (and empty the list)."""
    while pids:
        try:
            os.waitpid(pids.pop(), 0)
        except ChildProcessError:  # reaped already (by a wait for any child)
            pass

