"""Writing a cache entry's files back into the project: verified copies, never hard links.

Each file is copied from its blob to a temporary file beside its destination, hashed while
it is copied and compared with the digest it was stored under, given its recorded mode,
and only when every file of the entry is staged so are they renamed into place: a build
sees a computation's outputs all restored or none. A hard link would let a later in-place
edit of the output change the cache (ccache issue 599); a copy cannot.

An output that was a symbolic link (`libx.so -> libx.so.1.0`) is made again as that link,
its target the bytes its entry keeps, staged and renamed like the others; only if it leads,
once the entry is in place, to a regular file inside the project root (the rule every output
keeps, farmer/files/confine.py): a link from another checkout (an absolute target) or to a file no
longer there would be an output the run would not have made here.
"""

from __future__ import annotations

import errno
import os
import stat

import xxhash

from farmer.files.atomic import Staged
from farmer.record.cache.blobs import inside
from farmer.record.cache.entry import BadDigest, FileRecord, blob_name, is_link
from farmer.record.cache.leftovers import temporary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_CHUNK = 1 << 20
_HOPS = 40  # links followed from one output at most (Linux's limit for a path)


class NotHere(Exception):
    """An entry whose link would lead out of this project root or to no regular file."""


class BadBlob(Exception):
    """A blob missing, cut short or with other content than its name says; `damaged`: the
    digests of every blob of the entry found present but damaged."""

    def __init__(self, digest: str, what: str) -> None:
        super().__init__(f"blob {digest} {what}")
        self.digest, self.what = digest, what
        self.damaged: list[str] = []


def restore_files(blob_path: Callable[[str], str], files: list[FileRecord], inline: dict[str, bytes],
                  real_root: str = "") -> None:
    """Write `files` (path, digest, size, mode) from the bytes kept in their entry
    (`inline`, by digest) or from their blobs (`blob_path(digest)`), in the project whose
    root's realpath is `real_root` (the working directory's when empty). BadBlob for
    damaged or missing bytes, NotHere for a link that must not be made here, OSError if a
    file cannot be written; then nothing was changed in the project."""
    bad: BadBlob | None = None
    with Staged() as staged:
        for path, digest, size, mode in files:
            tmp = temporary(path)
            staged.add(tmp, path)
            try:
                if is_link(mode):
                    _link_verified(inline.get(digest), tmp, digest, size)
                elif digest in inline:
                    _write_verified(inline[digest], tmp, digest, size, mode)
                else:
                    _copy_verified(_blob(blob_path, digest), tmp, digest, size, mode)
            except BadBlob as e:  # the others are looked at too: all the damage is found at once
                bad = bad or e
                if e.what != "is missing":
                    bad.damaged.append(digest)
        if bad is not None:
            raise bad
        links = {p: os.fsdecode(inline[d]) for p, d, _, mode in files if is_link(mode)}
        regular = [p for p, _, _, mode in files if not is_link(mode)]
        root = real_root or os.path.realpath(".")
        for path in links:
            if not _lands_inside(path, links, regular, root):
                raise NotHere(path)
        staged.commit()


def _lands_inside(path: str, links: dict[str, str], regular: list[str], real_root: str) -> bool:
    """Whether the link `path` of an entry (`links`: each link's target; `regular`: its
    other files) leads, once the entry is in place, to a regular file inside the root."""
    placed = {_physical(p): p for p in [*links, *regular]}
    point = path
    for _ in range(_HOPS):
        there = _physical(os.path.join(os.path.dirname(point), links[point]))
        if os.path.basename(there) in ("", ".", ".."):
            return False  # a directory
        point = placed.get(there, "")
        if point in links:
            continue
        if point:  # one of the entry's files
            return inside(real_root, there)
        real = os.path.realpath(there)  # a file that is there already, and stays
        return inside(real_root, real) and os.path.isfile(real)
    return False  # a loop


def _physical(path: str) -> str:
    """`path` with its folder resolved (its last part as it is: it may be one of the links)."""
    return os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))


def _link_verified(target: bytes | None, dest: str, digest: str, size: int) -> None:
    if target is None:
        raise BadBlob(digest, "is missing")
    if len(target) != size or xxhash.xxh3_128_hexdigest(target) != blob_name(digest):
        raise BadBlob(digest, "kept in its entry has other content than its name says")
    try:
        os.unlink(dest)  # what a restore killed with this pid left
    except FileNotFoundError:
        pass
    try:
        os.symlink(os.fsdecode(target), dest)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.symlink(os.fsdecode(target), dest)


def _blob(blob_path: Callable[[str], str], digest: str) -> str:
    try:
        return blob_path(digest)
    except BadDigest:  # a loaded entry has none: refused again where it would become a path
        raise BadBlob("(not a digest)", "is missing") from None


def _create(dest: str) -> int:
    """A new file at `dest`: what a killed restore with this pid left there is removed
    first, and a link or FIFO put there is never opened (O_EXCL, O_NOFOLLOW)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.unlink(dest)
    except FileNotFoundError:
        pass
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
    src = _open_blob(blob, digest)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise BadBlob(digest, "is not a regular file")
        if st.st_size != size:
            raise BadBlob(digest, f"has {st.st_size} bytes, not {size}")
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


def _open_blob(blob: str, digest: str) -> int:
    """The blob open to read. Never blocks (O_NONBLOCK: a FIFO at its path would hang the
    build for ever) nor follows a link (the cache writes none): what is not a regular file
    is a damaged blob."""
    try:
        return os.open(blob, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        raise BadBlob(digest, "is missing") from None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP):  # a link, a socket
            raise BadBlob(digest, "is not a regular file") from None
        raise
