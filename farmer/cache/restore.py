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

from farmer.cache.store import FileRecord, blob_name

_CHUNK = 1 << 20


class BadBlob(Exception):
    """A blob missing, cut short or with other content than its name says."""

    def __init__(self, digest: str, what: str) -> None:
        super().__init__(f"blob {digest} {what}")
        self.digest, self.what = digest, what


def restore_files(blob_path, files: list[FileRecord]) -> None:
    """Write `files` (path, digest, size, mode) from their blobs (`blob_path(digest)`).
    BadBlob for a damaged or missing blob, OSError if a file cannot be written; then
    nothing was changed in the project."""
    staged: list[tuple[str, str]] = []
    try:
        for path, digest, size, mode in files:
            tmp = f"{path}.{os.getpid()}.cache-tmp"
            staged.append((tmp, path))
            _copy_verified(blob_path(digest), tmp, digest, size, mode)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise


def _copy_verified(blob: str, dest: str, digest: str, size: int, mode: int) -> None:
    try:
        src = os.open(blob, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise BadBlob(digest, "is missing") from None
    try:
        if os.fstat(src).st_size != size:
            raise BadBlob(digest, f"has {os.fstat(src).st_size} bytes, not {size}")
        parent = os.path.dirname(dest)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        try:
            dst = os.open(dest, flags, 0o600)
        except FileNotFoundError:
            os.makedirs(parent, exist_ok=True)
            dst = os.open(dest, flags, 0o600)
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
