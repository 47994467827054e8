"""farmer's own files: written whole (readers see the old file or the new one, never half
of one), and caches read back fast.

Kept free of heavy imports: the no-op build reads and writes through here.
"""

from __future__ import annotations

import gc
import marshal
import os


def write_atomically(path: str | os.PathLike, data: bytes | list[bytes | memoryview],
                     mode: int = 0o666) -> None:
    """Write `data` (or its parts, one after the other: a big file made of slices of
    another is written without joining them first) to a temporary file next to `path` and
    rename it over `path`. `mode` is masked by the umask, as for any file a program creates."""
    path = os.fspath(path)
    # One writer per project holds the lock, so the pid names the temporary file uniquely;
    # O_TRUNC reuses one that a killed farmer with the same pid left behind.
    tmp = f"{path}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(tmp, flags, mode)
    try:
        try:
            _write_all(fd, data if isinstance(data, list) else [data])
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    views = [memoryview(p) for p in parts if len(p)]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first:first + 1024])  # at most IOV_MAX buffers a call
        while written:  # a short write (a signal, a full disk) goes on where it stopped
            size = len(views[first])
            if written < size:
                views[first] = views[first][written:]
                break
            written -= size
            first += 1


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    write_atomically(path, text.encode("utf-8", "surrogateescape"))


def save_marshalled(path: str | os.PathLike, data: object) -> None:
    """Write a cache file atomically. Failing to write a cache only costs the next build
    time, so that is not an error."""
    try:
        write_atomically(path, marshal.dumps(data), 0o600)
    except (OSError, ValueError):
        pass


def load_marshalled(data: bytes | memoryview) -> object:
    """marshal.loads with the cyclic collector paused: a cache is thousands of fresh
    containers and no garbage, which the collector would scan again and again (half the
    time of loading a 10k-computation graph)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return marshal.loads(data)
    finally:
        if collecting:
            gc.enable()
