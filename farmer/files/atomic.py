"""farmer's own files: written whole (readers see the old file or the new one, never half
of one), and caches read back fast.

Kept free of heavy imports: the no-op build reads and writes through here.
"""

from __future__ import annotations

import marshal
import os

from farmer.startup.cheap import collector_paused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


class OpenFile:
    """One of farmer's files kept open to read pieces of it when they are needed. Every
    such file is replaced by renaming a new one over it, so what is read later is always
    from the file as it was opened."""

    __slots__ = ("fd", "size")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size

    @staticmethod
    def open(path: str | os.PathLike) -> OpenFile | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return OpenFile(fd)
        except OSError:
            os.close(fd)
            return None

    def read(self, offset: int, length: int) -> bytes:
        """These bytes; OSError if the file ends before them."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise OSError(f"{length} bytes at {offset} of a file of {self.size}")
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise OSError(f"{length} bytes at {offset}: the file ended after {len(data)}")
        return data

    def __del__(self) -> None:
        os.close(self.fd)


class FileRange:
    """Bytes of an open file, written out by the kernel (copy_file_range) without passing
    through farmer: last-build.json is mostly the no-op proof's rendered entries."""

    __slots__ = ("file", "offset", "length")

    def __init__(self, file: OpenFile, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > file.size:
            raise OSError(f"{length} bytes at {offset} of a file of {file.size}")
        self.file, self.offset, self.length = file, offset, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, part: slice) -> FileRange:
        start, stop, _ = part.indices(self.length)
        return FileRange(self.file, self.offset + start, max(0, stop - start))

    def bytes(self) -> bytes:
        return self.file.read(self.offset, self.length)


Part = bytes | memoryview | FileRange


def write_atomically(path: str | os.PathLike, data: bytes | Iterable[Part], mode: int = 0o666) -> None:
    """Write `data` (or its parts, one after the other, as they come: a big file made of
    slices of another, or rendered a piece at a time, is written without being held whole)
    to a temporary file next to `path` and rename it over `path`; if making a part fails,
    the temporary file is removed and `path` is as it was. `mode` is masked by the umask,
    as for any file a program creates."""
    path = os.fspath(path)
    # One writer per project holds the lock, so the pid names the temporary file uniquely;
    # O_TRUNC reuses one that a killed farmer with the same pid left behind.
    tmp = f"{path}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(tmp, flags, mode)
    try:
        try:
            _write_all(fd, [data] if isinstance(data, bytes) else data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def unnamed_file(directory: str | os.PathLike) -> int | None:
    """A new file in `directory` with no name, open to read and write (O_TMPFILE: it goes
    with its last descriptor, whatever becomes of farmer), to keep bytes out of memory until
    they are copied into a file written whole; None where the file system has no such files."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return None
    try:
        return os.open(directory, flag | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:
        return None


def write_parts(fd: int, parts: Iterable[Part]) -> None:
    """All of these parts at the descriptor's position, one after the other (a `FileRange`
    copied by the kernel)."""
    _write_all(fd, parts)


def write_all(fd: int, data: bytes | bytearray) -> None:
    """All of `data` at the descriptor's position, however the kernel splits the write."""
    _writev_all(fd, [memoryview(data)])


_HELD = 1 << 20  # bytes of parts gathered for one writev: parts made as they are written are not all held


def _write_all(fd: int, parts: Iterable[Part]) -> None:
    views: list[memoryview] = []
    held = 0
    for part in parts:
        if isinstance(part, FileRange):
            _writev_all(fd, views)
            views, held = [], 0
            _copy_range(part, fd)
        elif len(part):
            views.append(memoryview(part))
            held += len(part)
            if held >= _HELD:
                _writev_all(fd, views)
                views, held = [], 0
    _writev_all(fd, views)


def _writev_all(fd: int, views: list[memoryview]) -> None:
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


def _copy_range(part: FileRange, fd: int) -> None:
    offset, left = part.offset, part.length
    while left:
        try:
            copied = os.copy_file_range(part.file.fd, fd, left, offset)
        except OSError:  # a file system without it (or the files on two)
            copied = 0
        if not copied:  # through farmer then (read says if the file ended)
            _writev_all(fd, [memoryview(part.file.read(offset, left))])
            return
        offset, left = offset + copied, left - copied


class Staged:
    """Temporary files written beside their destinations, renamed into place together by
    `commit`; leaving the `with` block by an exception removes every one, so the destinations
    get all of the new files or none (a restore from the local or the remote cache)."""

    __slots__ = ("pairs",)

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []  # (temporary file, destination)

    def add(self, tmp: str, path: str) -> None:
        self.pairs.append((tmp, path))

    def commit(self) -> None:
        for tmp, path in self.pairs:
            os.replace(tmp, path)

    def __enter__(self) -> Staged:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            for tmp, _path in self.pairs:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


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
    containers and no garbage."""
    with collector_paused():
        return marshal.loads(data)
