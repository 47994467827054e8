"""Writing a cache entry's files back into the project: verified copies, never links.

Each file is copied from its blob to a temporary file beside its destination, hashed while
it is copied and compared with the digest it was stored under, given its recorded mode,
and only when every file of the entry is staged so are they renamed into place: a build
sees a computation's outputs all restored or none. A hard link would let a later in-place
edit of the output change the cache (ccache issue 599); a copy cannot.
"""

from __future__ import annotations

import os

import xxhash

from farmer.atomic import Staged
from farmer.cache.store import BadDigest, FileRecord, blob_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_CHUNK = 1 << 20


class BadBlob(Exception):
    """A blob missing, cut short or with other content than its name says; `damaged`: the
    digests of every blob of the entry found present but damaged."""

    def __init__(self, digest: str, what: str) -> None:
        super().__init__(f"blob {digest} {what}")
        self.digest, self.what = digest, what
        self.damaged: list[str] = []


def restore_files(blob_path: Callable[[str], str], files: list[FileRecord], inline: dict[str, bytes]) -> None:
    """Write `files` (path, digest, size, mode) from the bytes kept in their entry
    (`inline`, by digest) or from their blobs (`blob_path(digest)`). BadBlob for damaged
    or missing bytes, OSError if a file cannot be written; then nothing was changed in the
    project."""
    bad: BadBlob | None = None
    with Staged() as staged:
        for path, digest, size, mode in files:
            tmp = f"{path}.{os.getpid()}.cache-tmp"
            staged.add(tmp, path)
            try:
                if digest in inline:
                    _write_verified(inline[digest], tmp, digest, size, mode)
                else:
                    _copy_verified(_blob(blob_path, digest), tmp, digest, size, mode)
            except BadBlob as e:  # the others are looked at too: all the damage is found at once
                bad = bad or e
                if e.what != "is missing":
                    bad.damaged.append(digest)
        if bad is not None:
            raise bad
        staged.commit()


def _blob(blob_path: Callable[[str], str], digest: str) -> str:
    try:
        return blob_path(digest)
    except BadDigest:  # a loaded entry has none: refused again where it would become a path
        raise BadBlob("(not a digest)", "is missing") from None


def _create(dest: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        return os.open(dest, flags, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        return os.open(dest, flags, 0o600)


def _write_verified(data: bytes, dest: str, digest: str, size: int, mode: int) -> None:
    if len(data) != size or xxhash.xxh3_128_hexdigest(data) != blob_name(digest):
        raise BadBlob(digest, "kept in its entry has other content than its name says")
    dst = _create(dest)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(dst, view):]
        os.fchmod(dst, mode & 0o777)
    finally:
        os.close(dst)


def _copy_verified(blob: str, dest: str, digest: str, size: int, mode: int) -> None:
    try:
        src = os.open(blob, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise BadBlob(digest, "is missing") from None
    try:
        if os.fstat(src).st_size != size:
            raise BadBlob(digest, f"has {os.fstat(src).st_size} bytes, not {size}")
        dst = _create(dest)
        try:
            h = xxhash.xxh3_128()
            while data := os.read(src, _CHUNK):
                h.update(data)
                view = memoryview(data)
                while view:
                    view = view[os.write(dst, view):]
            os.fchmod(dst, mode & 0o777)
        finally:
            os.close(dst)
        if h.hexdigest() != blob_name(digest):
            raise BadBlob(digest, "has other content than its name says")
    finally:
        os.close(src)
