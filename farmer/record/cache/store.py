"""The local cache's directory: content-addressed blobs and the entries that name them.

    DIR/            the user's own: mode 0700 when farmer makes it (an existing folder is
                    used as it is, if it is fit for a cache: `database.cache_dir`)
      ac.db         SQLite (WAL), mode 0600: one row per entry (a variant of a first-level key)
      cas/ab/HEX    blobs, named by the xxh3-128 of their content, read-only
      tmp/          blobs being written (renamed into cas/ when complete)
      gc.lock       flock: shared while a farmer stores, exclusive while one evicts

Every write is a temporary file renamed into place, or one SQLite transaction, so a reader
never sees half of a blob or of an entry, and a farmer killed at any point leaves at most a
temporary file (removed by the next gc) or a blob no entry names yet (likewise). Farmers of
any project and checkout share the directory: SQLite serialises writers, blobs of the same
name have the same content, and an entry is written only after its blobs are in place
(under the shared lock, so an eviction cannot remove them in between).

Entries record their outputs' sizes and the time they were last used; the limit is kept by
evicting the least recently used entries, then every blob no entry names (`gc`).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time

from farmer.record.cache import eviction
from farmer.record.cache.blobs import Blobs, link_target, on_disk, remove
from farmer.record.cache.database import cache_dir, connect, connect_read_only, query
from farmer.record.cache.entry import Entry, valid_digest
from farmer.record.cache.errors import CacheError, CacheFull
from farmer.record.cache.key import variant_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

VARIANTS_KEPT = 8  # entries per first-level key (discovered-input variants), newest first
_TOUCH_EVERY_S = 60.0  # an entry's last use is written again only when older than this


class LocalCache:
    """The cache at `dir`. Open it with `open()`; every method may raise CacheError."""

    def __init__(self, dir: str, busy_timeout_s: float = 2.0, read_only: bool = False) -> None:
        self.dir = dir
        self._asked_read_only = read_only  # open it as one that cannot be written
        # Why the open cache is only read ("" when it is written too): nothing is written
        # to it then, not even an entry found damaged dropped.
        self.read_only = ""
        self.blobs = Blobs(dir)
        self.cas = self.blobs.cas
        self.tmp = self.blobs.tmp
        self.db_path = os.path.join(dir, "ac.db")
        self.busy_timeout_s = busy_timeout_s
        self._db: sqlite3.Connection | None = None

    # -- opening ---------------------------------------------------------------------------

    def open(self) -> LocalCache:
        """Create the directory (0700) if needed and connect; CacheError if it cannot be used.
        A cache that cannot be written (a read-only mount, a folder this user may not write,
        a disk too full for SQLite's -shm) is opened read-only if it can be: `read_only`
        then says why."""
        try:
            cache_dir(self.dir)
        except OSError as e:
            raise CacheError(f"cannot use {self.dir}: {e.strerror or e}") from None
        if self._asked_read_only:
            self._db = self._connect_read_only(CacheError(f"{self.dir}: opened read-only"))
            return self
        try:
            self._db = self._open_writable()
        except CacheError as e:
            if "locked" in str(e):  # another farmer holds it: waiting is for the next build
                raise
            self._db = self._connect_read_only(e)
        return self

    def _open_writable(self) -> sqlite3.Connection:
        try:
            for sub in (self.cas, self.tmp):
                os.makedirs(sub, mode=0o700, exist_ok=True)
        except OSError as e:
            raise CacheError(f"cannot use {self.dir}: {e.strerror or e}") from None
        return self.connect()

    def _connect_read_only(self, why: CacheError) -> sqlite3.Connection:
        db = connect_read_only(self.db_path, self.busy_timeout_s, why)
        self.read_only = str(why)
        return db

    def connect(self) -> sqlite3.Connection:
        """A connection of its own (one per thread), database.connect's."""
        return connect(self.db_path, self.busy_timeout_s)

    def close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self.open()
        return self._db  # type: ignore[return-value]

    # -- reading ---------------------------------------------------------------------------

    def variants(self, key1: str,
                 on_damaged: Callable[[str], None] | None = None) -> list[tuple[Entry, float]]:
        """The stored variants of a first-level key, most recently used first, with their
        last use. A row that is damaged, malformed or not of this key (its variant key is
        not `key1`'s with its discovered inputs: a row holding another's data) is no
        variant: it is dropped, and `on_damaged(key)` told."""
        rows = self._query("SELECT key, data, used_at FROM entry WHERE key1=? ORDER BY used_at DESC",
                           (key1,))
        out = []
        for key, data, used_at in rows:
            entry = Entry.loads(key, data)
            if entry is None or variant_key(key1, entry.discovered) != key:
                self.forget(key, [])
                if on_damaged is not None:
                    on_damaged(key)
                continue
            out.append((entry, used_at))
        return out

    def lookup(self, key1: str, digest_now: Callable[[str], str | None],
               on_damaged: Callable[[str], None] | None = None) -> tuple[Entry, float] | None:
        """The most recently used variant whose every discovered input has, now, the
        digest it was stored with (`digest_now(path)`), or None."""
        for entry, used_at in self.variants(key1, on_damaged):
            if all(digest_now(path) == digest for path, digest in entry.discovered):
                return entry, used_at
        return None

    def blob_path(self, digest: str) -> str:
        """Where the blob of content `digest` (hash_file's: maybe marked thin) lies;
        BadDigest for anything else."""
        return self.blobs.path(digest)

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        return query(self.db, self.db_path, sql, params)

    # -- writing ---------------------------------------------------------------------------

    def put_file(self, source: str, digest: str,
                 stat_then: tuple | None = None) -> tuple[int, int, int, bytes | None]:
        """Blobs.put_file: `source` copied in unless its blob is there (bytes added, its
        size, its mode, and its bytes when small enough to be kept in its entry)."""
        return self.blobs.put_file(source, digest, stat_then)

    def put_link(self, path: str, stat_then: tuple | None, real_root: str) -> tuple[str, bytes]:
        """The digest and bytes of the target of the symbolic link `path` (blobs.link_target)."""
        return link_target(path, stat_then, real_root)

    def put_entries(self, db: sqlite3.Connection, entries: list[tuple[str, Entry]], added: int) -> None:
        """Record `entries` ((first-level key, entry), their blobs in place) in one
        transaction, keeping only the newest variants of each key; `added`: the bytes of
        the blobs these stores created (two farmers storing one blob at once count it
        twice: the next gc counts again)."""
        now = time.time()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("INSERT OR REPLACE INTO entry VALUES (?,?,?,?,?,?)",
                               [(e.key, key1, e.dumps(), e.size(), e.inline_size(), now)
                                for key1, e in entries])
                db.executemany("DELETE FROM entry WHERE key1=? AND key NOT IN "
                               "(SELECT key FROM entry WHERE key1=? ORDER BY used_at DESC LIMIT ?)",
                               [(key1, key1, VARIANTS_KEPT) for key1 in {k for k, _ in entries}])
                if added:
                    db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key='bytes'",
                               (added,))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            if "full" in str(e):
                raise CacheFull(f"no room in {self.dir} ({e})") from None
            raise CacheError(f"cannot write {self.db_path}: {e}") from None

    def touch(self, db: sqlite3.Connection, used: list[tuple[str, float]]) -> None:
        """Mark entries used now (LRU), those not marked within the last minute."""
        now = time.time()
        stale = [(now, key) for key, used_at in used if now - used_at > _TOUCH_EVERY_S]
        if not stale:
            return
        try:
            db.executemany("UPDATE entry SET used_at=? WHERE key=?", stale)
        except sqlite3.Error as e:
            raise CacheError(f"cannot write {self.db_path}: {e}") from None

    def forget(self, key: str, damaged: list[str]) -> None:
        """Drop an entry found broken, and the blobs of it found damaged (whatever is at
        their path: a directory or a FIFO too)."""
        if self.read_only:
            return  # it stays a miss each time it is looked up
        for digest in damaged:
            if valid_digest(digest):
                remove(self.blob_path(digest))
        try:
            self.db.execute("DELETE FROM entry WHERE key=?", (key,))
        except sqlite3.Error:
            pass  # it stays a miss each time it is looked up

    def recorded_bytes(self) -> int:
        rows = self._query("SELECT value FROM meta WHERE key='bytes'")
        return int(rows[0][0]) if rows else 0

    # -- eviction and the commands ------------------------------------------------------------

    def shared_lock(self, wait_s: float = 5.0) -> int:
        """Hold off evictions while blobs are stored and named (a fd to close when done)."""
        return eviction.lock(self.dir, fcntl.LOCK_SH, wait_s)

    def stats(self) -> tuple[int, int]:
        """Entries, and bytes: in blobs (as on disk) and kept in entries."""
        entries, inline = self._query("SELECT COUNT(*), COALESCE(SUM(inline), 0) FROM entry")[0]
        return entries, sum(on_disk(self.cas).values()) + inline

    def gc(self, max_size: int, wait_s: float | None = None) -> eviction.GcResult:
        """Evict least recently used entries until the blobs the others name fit in
        `max_size`, and remove every blob no entry names and stale temporary files."""
        self._writable()
        fd = eviction.lock(self.dir, fcntl.LOCK_EX, wait_s)
        try:
            return eviction.evict(self.db, self.db_path, self.blobs, max_size)
        finally:
            os.close(fd)

    def clear(self) -> int:
        """Remove every entry and blob; the entries removed."""
        self._writable()
        fd = eviction.lock(self.dir, fcntl.LOCK_EX, None)
        try:
            return eviction.clear(self.db, self.db_path, self.blobs)
        finally:
            os.close(fd)

    def _writable(self) -> None:
        if self.read_only:
            raise CacheError(f"{self.read_only}; the cache is read-only")
