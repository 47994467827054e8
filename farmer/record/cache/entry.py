"""A cache entry: what one stored run read beyond its declared inputs and what it wrote,
its records checked before anything is made of them (a digest names a blob's path only
when it is one the cache writes)."""

from __future__ import annotations

import marshal
import stat

from farmer.files.digests import THIN_PREFIX

INLINE_MAX = 16 * 1024  # files up to this size are kept in their entry, not in a blob
LINK_MODE = stat.S_IFLNK | 0o777  # a record's mode for a symbolic link
_HEX = frozenset("0123456789abcdef")  # a digest's digits, as xxh3's hexdigest writes them

FileRecord = tuple[str, str, int, int]  # path, digest, size, mode


class BadDigest(ValueError):
    """Not a digest the cache writes: never made into a path (a crafted entry's
    `../../home/me/x` would name a file outside the cache)."""


class Entry:
    """One stored variant: what the run read beyond its declared inputs, and what it wrote.
    Small files' bytes are kept in the entry itself (`inline`), by digest, the others in
    blobs: a cold build of many small outputs then creates no file per output in the cache."""

    __slots__ = ("key", "discovered", "outputs", "depfile", "log", "inline")

    def __init__(self, key: str, discovered: list[tuple[str, str]], outputs: list[FileRecord],
                 depfile: FileRecord | None, log: tuple[str, int] | None,
                 inline: dict[str, bytes] | None = None) -> None:
        self.key = key  # the variant's key (key.variant_key)
        self.discovered = discovered  # depfile inputs: (path, digest), in the depfile's order
        self.outputs = outputs  # declared outputs, in declared order
        self.depfile = depfile  # the depfile the run wrote, restored with the outputs
        self.log = log  # (digest, size) of what the command printed, if anything
        self.inline = {} if inline is None else inline  # digest -> bytes, for small files

    def files(self) -> list[tuple[str, int]]:
        """(digest, size) of every file of the entry, each digest once."""
        out = [(d, size) for _, d, size, _ in self.outputs]
        if self.depfile is not None:
            out.append((self.depfile[1], self.depfile[2]))
        if self.log is not None:
            out.append(self.log)
        return list(dict(out).items())

    def blobs(self) -> list[tuple[str, int]]:
        """The files kept in blobs: (digest, size)."""
        return [(d, size) for d, size in self.files() if d not in self.inline]

    def inline_size(self) -> int:
        return sum(len(data) for data in self.inline.values())

    def size(self) -> int:
        return sum(size for _, size in self.files())

    def dumps(self) -> bytes:
        return marshal.dumps((self.key, self.discovered, self.outputs, self.depfile, self.log,
                              self.inline))

    @staticmethod
    def loads(key: str, data: bytes) -> Entry | None:
        """The entry stored as `data` under `key`, or None when it is damaged or malformed
        (a miss): every digest the hex the cache writes, every record's fields of their
        types, and the key the one it was stored under (a row holding another's data is no
        hit)."""
        try:
            own_key, discovered, outputs, depfile, log, inline = marshal.loads(data)
            entry = Entry(key, [tuple(pair) for pair in discovered], [tuple(r) for r in outputs],
                          None if depfile is None else tuple(depfile),
                          None if log is None else tuple(log), dict(inline))
        except Exception:  # marshal's data can be anything: whatever it raises is a miss
            return None
        return entry if own_key == key and entry.well_formed() else None

    def well_formed(self) -> bool:
        records = list(self.outputs) + ([self.depfile] if self.depfile is not None else [])
        return (all(len(pair) == 2 and _all_str(pair) for pair in self.discovered)
                and all(_record_ok(record) for record in records)
                and all(r[1] in self.inline for r in records if is_link(r[3]))  # a link's target
                and (self.log is None or len(self.log) == 2 and valid_digest(self.log[0])
                     and _size_ok(self.log[1]))
                and all(valid_digest(d) and type(b) is bytes for d, b in self.inline.items()))


def valid_digest(digest: object) -> bool:
    """Whether `digest` is one the cache writes: 32 lowercase hex digits (xxh3-128), after
    the thin mark if any."""
    if type(digest) is not str:
        return False
    name = blob_name(digest)
    return len(name) == 32 and all(c in _HEX for c in name)


def is_link(mode: int) -> bool:
    """Whether an entry's record with this mode is a symbolic link (its target the bytes
    kept in the entry under its digest)."""
    return stat.S_IFMT(mode) == stat.S_IFLNK


def _all_str(values: tuple) -> bool:
    return all(type(v) is str for v in values)


def _size_ok(size: object) -> bool:
    return type(size) is int and size >= 0


def _record_ok(record: tuple) -> bool:
    """A file record (path, digest, size, mode): a regular file's mode holds permission bits
    only (masked to 0o777 when restored), a link's is LINK_MODE."""
    if len(record) != 4:
        return False
    path, digest, size, mode = record
    return (type(path) is str and bool(path) and valid_digest(digest) and _size_ok(size)
            and type(mode) is int and (mode == LINK_MODE or 0 <= mode <= 0o7777))


def blob_name(digest: str) -> str:
    """A content digest without the mark of a thin archive: the hash of the bytes."""
    return digest[len(THIN_PREFIX):] if digest.startswith(THIN_PREFIX) else digest
