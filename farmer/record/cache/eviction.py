"""The cache kept within its limit: least recently used entries evicted, then every blob no
entry names and stale temporary files removed, under `gc.lock` held exclusively (a farmer
storing holds it shared, so no blob it is about to name goes)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time

from farmer.record.cache.blobs import on_disk, remove_stale_tmp, unlink
from farmer.record.cache.database import query
from farmer.record.cache.entry import Entry
from farmer.record.cache.errors import CacheError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.record.cache.blobs import Blobs


class GcResult:
    __slots__ = ("entries", "removed", "bytes", "freed")

    def __init__(self, entries: int, removed: int, size: int, freed: int) -> None:
        self.entries, self.removed, self.bytes, self.freed = entries, removed, size, freed


def lock(dir: str, kind: int, wait_s: float | None) -> int:
    """`gc.lock` in `dir` held (`kind`: fcntl.LOCK_SH or LOCK_EX), waiting up to `wait_s`
    (None: for ever); a fd to close when done."""
    try:
        fd = os.open(os.path.join(dir, "gc.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise CacheError(f"cannot use {dir}: {e.strerror or e}") from None
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if deadline is not None and time.monotonic() > deadline:
                os.close(fd)
                raise CacheError(f"{dir} is locked by another farmer (gc.lock)") from None
            time.sleep(0.02)


def evict(db: sqlite3.Connection, db_path: str, blobs: Blobs, max_size: int) -> GcResult:
    """Least recently used entries evicted until the blobs the others name (and their
    inline bytes) fit in `max_size`; damaged or incomplete entries at once; then the blobs
    no entry names. The caller holds gc.lock exclusively."""
    rows = query(db, db_path, "SELECT key, data FROM entry ORDER BY used_at")
    blobs_there = on_disk(blobs.cas)
    refs: dict[str, int] = {}
    evicted: list[str] = []
    kept: list[tuple[str, list[str], int]] = []  # oldest first: key, blobs, bytes inline
    for key, data in rows:
        entry = Entry.loads(key, data)
        digests = [] if entry is None else [d for d, _ in entry.blobs()]
        if entry is None or any(d not in blobs_there for d in digests):
            evicted.append(key)  # damaged or incomplete: never a hit, evicted at once
            continue
        kept.append((key, digests, entry.inline_size()))
        for d in digests:
            refs[d] = refs.get(d, 0) + 1
    total = sum(blobs_there[d] for d in refs) + sum(inline for _, _, inline in kept)
    for key, digests, inline in kept:
        if total <= max_size:
            break
        evicted.append(key)
        total -= inline
        for d in digests:
            refs[d] -= 1
            if refs[d] == 0:
                del refs[d]
                total -= blobs_there[d]
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("DELETE FROM entry WHERE key=?", [(k,) for k in evicted])
        db.execute("UPDATE meta SET value=? WHERE key='bytes'", (str(total),))
        db.execute("COMMIT")
    except sqlite3.Error as e:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise CacheError(f"cannot write {db_path}: {e}") from None
    freed = 0
    for d, size in blobs_there.items():  # entries are gone first: none names a removed blob
        if d not in refs:
            unlink(blobs.path(d))
            freed += size
    remove_stale_tmp(blobs.tmp)
    return GcResult(len(rows) - len(evicted), len(evicted), total, freed)


def clear(db: sqlite3.Connection, db_path: str, blobs: Blobs) -> int:
    """Every entry and blob removed; the entries removed. The caller holds gc.lock
    exclusively."""
    count = query(db, db_path, "SELECT COUNT(*) FROM entry")[0][0]
    try:
        db.execute("DELETE FROM entry")
        db.execute("UPDATE meta SET value='0' WHERE key='bytes'")
    except sqlite3.Error as e:
        raise CacheError(f"cannot write {db_path}: {e}") from None
    for d in on_disk(blobs.cas):
        unlink(blobs.path(d))
    remove_stale_tmp(blobs.tmp, 0.0)
    return count
