"""The cache's blobs: files of the runs it stores, content-addressed under `cas/`, each
written whole into `tmp/` and renamed into place (so a reader never sees half of one, and
two farmers storing the same blob write the same bytes); what lies on disk, for eviction."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time

from farmer.files.digests import hash_bytes
from farmer.record.cache.entry import INLINE_MAX, BadDigest, blob_name, valid_digest
from farmer.record.cache.errors import CacheError, CacheFull, Changed, Unstorable

STALE_TMP_S = 3600.0  # temporary files older than this belong to no live farmer


class Blobs:
    """The blobs of the cache at `dir`: where each lies, and files copied in."""

    __slots__ = ("dir", "cas", "tmp", "_serial", "_serial_lock")

    def __init__(self, dir: str) -> None:
        self.dir = dir
        self.cas = os.path.join(dir, "cas")
        self.tmp = os.path.join(dir, "tmp")
        self._serial = 0
        self._serial_lock = threading.Lock()

    def path(self, digest: str) -> str:
        """Where the blob of content `digest` (hash_file's: maybe marked thin) lies;
        BadDigest for anything else."""
        if not valid_digest(digest):
            raise BadDigest(f"not a digest: {digest!r}")
        name = blob_name(digest)
        return os.path.join(self.cas, name[:2], name[2:])


    def put_file(self, source: str, digest: str,
                 stat_then: tuple | None = None) -> tuple[int, int, int, bytes | None]:
        """Copy `source`, whose content has `digest`, into the cache unless a blob of that
        name is there already: (bytes added, its size, its mode, and its bytes when it is
        small enough to be kept in its entry instead of a blob). `stat_then`: its
        (mtime_ns, size, inode, ctime_ns) when it was digested; Changed if the file is not
        that content any more; Unstorable if something that is no blob is in the way of
        this one."""
        try:  # O_NONBLOCK: a FIFO put where the output was must not hang the writer
            src = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            raise Changed(source) from None
        tmp = ""
        try:
            st = os.fstat(src)
            before = stat_key(st)
            if not stat.S_ISREG(st.st_mode) or stat_then is not None and before != tuple(stat_then):
                raise Changed(source)
            if st.st_size <= INLINE_MAX:
                data = _read_all(src, st.st_size)
                if stat_key(os.fstat(src)) != before:  # written to while it was read
                    raise Changed(source)
                return st.st_size, st.st_size, stat.S_IMODE(st.st_mode), data
            final = self.path(digest)
            if _blob_there(final, st.st_size):
                return 0, st.st_size, stat.S_IMODE(st.st_mode), None
            tmp = self._tmp_name()
            remove(tmp)  # what a farmer killed with this pid left (never opened: a FIFO would block)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                dst = os.open(tmp, flags, 0o400)
            except FileNotFoundError:  # tmp/ removed (the cache cleared meanwhile)
                os.makedirs(self.tmp, mode=0o700, exist_ok=True)
                dst = os.open(tmp, flags, 0o400)
            try:
                copy_fd(src, dst, st.st_size)
            finally:
                os.close(dst)
            if stat_key(os.fstat(src)) != before:  # written to while it was copied
                raise Changed(source)
            _publish(tmp, final)
            tmp = ""
            return st.st_size, st.st_size, stat.S_IMODE(st.st_mode), None
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise CacheFull(f"no room in {self.dir} ({e.strerror})") from None
            raise CacheError(f"cannot write to {self.dir}: {e.strerror or e}") from None
        finally:
            if tmp:
                unlink(tmp)
            os.close(src)

    def _tmp_name(self) -> str:
        with self._serial_lock:
            self._serial += 1
            return os.path.join(self.tmp, f"{os.getpid()}-{threading.get_ident()}-{self._serial}")


def link_target(path: str, stat_then: tuple | None, real_root: str) -> tuple[str, bytes]:
    """The digest and bytes of the target of the symbolic link `path`, an output kept as
    that link (its target's bytes in its entry, never a copy of the file it leads to).
    Changed when it no longer leads to the file that was digested (`stat_then`, the
    stat through the link) or was replaced while read; Unstorable when it leads out of
    the root `real_root` (a realpath)."""
    try:
        before = os.lstat(path)
        target = os.readlink(os.fsencode(path))
        after = os.lstat(path)
        through = os.stat(path)
    except OSError:
        raise Changed(path) from None
    if not stat.S_ISLNK(after.st_mode) or stat_key(before) != stat_key(after) or \
            stat_then is not None and stat_key(through) != tuple(stat_then):
        raise Changed(path)
    if not inside(real_root, os.path.realpath(path)):
        raise Unstorable(f"{path} leads out of the project root")
    return hash_bytes(target), target


def inside(real_root: str, real_path: str) -> bool:
    """Whether `real_path` (a realpath) lies below the root (a realpath), as
    farmer/files/confine.py asks of every output."""
    return real_path.startswith(real_root.rstrip(os.sep) + os.sep)


def copy_fd(src: int, dst: int, size: int) -> None:
    """All `size` bytes of `src` to `dst`, by the kernel where it can (copy_file_range)."""
    offset = 0
    while offset < size:
        try:
            n = os.copy_file_range(src, dst, size - offset, offset)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
                raise
            n = 0
        if n == 0:  # a file system without it, or the source ended early
            data = os.pread(src, min(size - offset, 1 << 20), offset)
            if not data:
                raise Changed("the file ended early")
            view = memoryview(data)
            while view:
                view = view[os.write(dst, view):]
            n = len(data)
        offset += n


def _read_all(fd: int, size: int) -> bytes:
    parts, offset = [], 0
    while offset < size:
        data = os.pread(fd, size - offset, offset)
        if not data:
            raise Changed("the file ended early")
        parts.append(data)
        offset += len(data)
    return b"".join(parts)


def _blob_there(final: str, size: int) -> bool:
    """Whether the blob `final` is in place with `size` bytes; if not, whatever is at its
    path (one cut short, a directory, a FIFO, a link) is removed, for the new one."""
    try:
        st = os.lstat(final)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False  # its shard is a file: _publish says so
    if stat.S_ISREG(st.st_mode) and st.st_size == size:
        return True
    remove(final)
    return False


def _publish(tmp: str, final: str) -> None:
    """Put the complete blob `tmp` in place as `final` (over one another farmer put there
    meanwhile: the name is the digest, so its content is the same). Unstorable when
    something is in the way that could not be removed (a directory, its shard a file): that
    blob only is not stored."""
    try:
        try:
            os.replace(tmp, final)
        except FileNotFoundError:  # its shard directory is new
            os.makedirs(os.path.dirname(final), mode=0o700, exist_ok=True)
            os.replace(tmp, final)
    except OSError as e:
        if e.errno in (errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise Unstorable(f"{final}: {e.strerror}") from None
        raise


def on_disk(cas: str) -> dict[str, int]:
    """The blobs in `cas`: digest -> bytes on disk."""
    out = {}
    try:
        shards = os.listdir(cas)
    except OSError:
        return out
    for shard in shards:
        try:
            with os.scandir(os.path.join(cas, shard)) as it:
                for e in it:
                    if not valid_digest(shard + e.name):
                        continue  # not a blob (nothing the cache writes has that name)
                    try:
                        out[shard + e.name] = e.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
        except OSError:
            pass
    return out


def remove_stale_tmp(tmp: str, older_than_s: float = STALE_TMP_S) -> None:
    """The temporary files in `tmp` older than `older_than_s` removed (killed farmers')."""
    now = time.time()
    try:
        with os.scandir(tmp) as it:
            for e in it:
                try:
                    if now - e.stat(follow_symlinks=False).st_mtime >= older_than_s:
                        os.unlink(e.path)
                except OSError:
                    pass
    except OSError:
        pass


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def remove(path: str) -> None:
    """Whatever is at `path`, a directory with what it holds too (never through a link)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            import shutil  # rare: a directory where a blob belongs

            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass

