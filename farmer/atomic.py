"""farmer's own files: written whole (readers see the old file or the new one, never half
of one), and caches read back fast.

Kept free of heavy imports: the no-op build reads and writes through here.
"""

from __future__ import annotations

import gc
import marshal
import os


def write_atomically(path: str | os.PathLike, data: bytes, mode: int = 0o666) -> None:
    """Write `data` to a temporary file next to `path` and rename it over `path`. `mode` is
    masked by the umask, as for any file a program creates."""
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
        with open(fd, "wb", closefd=True) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
