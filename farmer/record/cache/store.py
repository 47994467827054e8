"""The local cache's directory: content-addressed blobs and the entries that name them.

    DIR/            the user's own: mode 0700 when farmer makes it (an existing folder is
                    used as it is, if it is fit for a cache: `_cache_dir`)
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

import errno
import fcntl
import marshal
import os
import sqlite3
import stat
import threading
import time

from farmer.files.digests import THIN_PREFIX, hash_bytes
from farmer.record.cache.key import variant_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SCHEMA = "3"  # 3: an entry's data holds its own key, and its records may be symbolic links
INLINE_MAX = 16 * 1024  # files up to this size are kept in their entry, not in a blob
VARIANTS_KEPT = 8  # entries per first-level key (discovered-input variants), newest first
_TOUCH_EVERY_S = 60.0  # an entry's last use is written again only when older than this
_STALE_TMP_S = 3600.0  # temporary files older than this belong to no live farmer
LINK_MODE = stat.S_IFLNK | 0o777  # a record's mode for a symbolic link
_HEX = frozenset("0123456789abcdef")  # a digest's digits, as xxh3's hexdigest writes them

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entry (
    key TEXT PRIMARY KEY, key1 TEXT NOT NULL, data BLOB NOT NULL, size INTEGER NOT NULL,
    inline INTEGER NOT NULL, used_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS entry_key1 ON entry (key1, used_at);
CREATE INDEX IF NOT EXISTS entry_used ON entry (used_at);
"""

FileRecord = tuple[str, str, int, int]  # path, digest, size, mode


class CacheError(Exception):
    """The cache as a whole cannot be used (unwritable, locked, not a cache): the build goes
    on without it."""


class CacheFull(CacheError):
    """No room left for a blob (ENOSPC, EDQUOT, EFBIG): nothing more is stored this build."""


class Changed(Exception):
    """A file changed between being digested and being copied into the cache."""


class Unstorable(Exception):
    """A file of a run that the cache does not keep as it is (a symbolic link leading out of
    the project root, which a build refuses as an output): the run is not stored."""


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


class GcResult:
    __slots__ = ("entries", "removed", "bytes", "freed")

    def __init__(self, entries: int, removed: int, size: int, freed: int) -> None:
        self.entries, self.removed, self.bytes, self.freed = entries, removed, size, freed


def _schema_row(db: sqlite3.Connection) -> tuple | None:
    """The cache's schema row, or None before the cache's tables exist."""
    try:
        return db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return None
        raise


class LocalCache:
    """The cache at `dir`. Open it with `open()`; every method may raise CacheError."""

    def __init__(self, dir: str, busy_timeout_s: float = 2.0, read_only: bool = False) -> None:
        self.dir = dir
        self._asked_read_only = read_only  # open it as one that cannot be written
        # Why the open cache is only read ("" when it is written too): nothing is written
        # to it then, not even an entry found damaged dropped.
        self.read_only = ""
        self.cas = os.path.join(dir, "cas")
        self.tmp = os.path.join(dir, "tmp")
        self.db_path = os.path.join(dir, "ac.db")
        self.busy_timeout_s = busy_timeout_s
        self._db: sqlite3.Connection | None = None
        self._serial = 0
        self._serial_lock = threading.Lock()

    # -- opening ---------------------------------------------------------------------------

    def open(self) -> LocalCache:
        """Create the directory (0700) if needed and connect; CacheError if it cannot be used.
        A cache that cannot be written (a read-only mount, a folder this user may not write,
        a disk too full for SQLite's -shm) is opened read-only if it can be: `read_only`
        then says why."""
        try:
            _cache_dir(self.dir)
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
        """A connection that writes nothing, to a cache that cannot be written (`why`, raised
        again when it cannot be read either). SQLite reads a WAL database read-only when
        its -shm is there or can be made; when it cannot (a read-only folder or mount, a
        full disk), only as `immutable`, which reads the database file alone: so only
        when no -wal holds pages that are not in it yet (nobody writes it then, and none can
        start to where the -shm cannot be made)."""
        from urllib.parse import quote  # only a cache that cannot be written comes here

        if not os.path.isfile(self.db_path):
            raise why  # nothing stored to read
        uri = f"file:{quote(self.db_path)}?"
        for mode in ("mode=ro", "immutable=1"):
            if mode == "immutable=1" and _has_pages(self.db_path + "-wal"):
                break
            try:
                db = sqlite3.connect(uri + mode, uri=True, timeout=self.busy_timeout_s,
                                     isolation_level=None, check_same_thread=False)
            except sqlite3.Error:
                continue
            try:
                row = _schema_row(db)
                if row is None or row[0] != SCHEMA:
                    break  # not this farmer's cache (yet): nothing to read
                db.execute("SELECT key, key1, data, size, inline, used_at FROM entry LIMIT 1").fetchall()
            except sqlite3.Error as e:
                db.close()
                if "locked" in str(e):
                    break  # being written now: not a file to read as it lies
                continue
            except BaseException:
                db.close()
                raise
            self.read_only = str(why)
            return db
        raise why

    def connect(self) -> sqlite3.Connection:
        """A connection of its own (one per thread). Two farmers that open a new cache at
        the same moment both try to switch it to WAL, which SQLite answers with "database is
        locked" at once, without waiting on the busy timeout: that is tried again until the
        timeout runs out."""
        deadline = time.monotonic() + 2 * self.busy_timeout_s
        while True:
            try:
                return self._connect()
            except CacheError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _connect(self) -> sqlite3.Connection:
        try:
            _create_private(self.db_path)  # its -wal and -shm get its mode: entries hold outputs' bytes
            db = sqlite3.connect(self.db_path, timeout=self.busy_timeout_s, isolation_level=None,
                                 check_same_thread=False)
        except sqlite3.Error as e:
            raise CacheError(f"cannot open {self.db_path}: {e}") from None
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            row = _schema_row(db) if db.execute("PRAGMA journal_mode").fetchone()[0] == "wal" else None
            if row is None:  # a new cache: the only connect that writes (a write waits for a lock)
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA,))
                db.execute("INSERT OR IGNORE INTO meta VALUES ('bytes', '0')")
                row = _schema_row(db)
            if row[0] != SCHEMA:  # an older farmer's: its entries are only lost rebuilds
                raise sqlite3.DatabaseError(f"schema {row[0]}")
            db.execute("SELECT key, key1, data, size, inline, used_at FROM entry LIMIT 1").fetchall()
        except sqlite3.DatabaseError as e:
            db.close()
            if not (_corrupt(e) or str(e).startswith("schema ")):
                raise CacheError(f"cannot use {self.db_path}: {e}") from None
            # Damaged: set aside (entries only point at blobs; losing them costs rebuilds).
            aside = f"{self.db_path}.corrupt-{int(time.time())}"
            try:
                os.replace(self.db_path, aside)
            except OSError as moved:  # (connecting again would find it damaged again)
                raise CacheError(f"cannot use {self.db_path}: {e}, and cannot set it aside: "
                                 f"{moved.strerror or moved}") from None
            for suffix in ("-wal", "-shm"):
                try:
                    os.replace(self.db_path + suffix, aside + suffix)
                except OSError:
                    pass
            return self._connect()
        except BaseException:
            db.close()
            raise
        return db

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
        if not valid_digest(digest):
            raise BadDigest(f"not a digest: {digest!r}")
        name = blob_name(digest)
        return os.path.join(self.cas, name[:2], name[2:])

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self.db.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise CacheError(f"cannot read {self.db_path}: {e}") from None

    # -- writing ---------------------------------------------------------------------------

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
            before = _stat_key(st)
            if not stat.S_ISREG(st.st_mode) or stat_then is not None and before != tuple(stat_then):
                raise Changed(source)
            if st.st_size <= INLINE_MAX:
                data = _read_all(src, st.st_size)
                if _stat_key(os.fstat(src)) != before:  # written to while it was read
                    raise Changed(source)
                return st.st_size, st.st_size, stat.S_IMODE(st.st_mode), data
            final = self.blob_path(digest)
            if _blob_there(final, st.st_size):
                return 0, st.st_size, stat.S_IMODE(st.st_mode), None
            tmp = self._tmp_name()
            _remove(tmp)  # what a farmer killed with this pid left (never opened: a FIFO would block)
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
            if _stat_key(os.fstat(src)) != before:  # written to while it was copied
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
                _unlink(tmp)
            os.close(src)

    def _tmp_name(self) -> str:
        with self._serial_lock:
            self._serial += 1
            return os.path.join(self.tmp, f"{os.getpid()}-{threading.get_ident()}-{self._serial}")

    def put_link(self, path: str, stat_then: tuple | None, real_root: str) -> tuple[str, bytes]:
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
        if not stat.S_ISLNK(after.st_mode) or _stat_key(before) != _stat_key(after) or \
                stat_then is not None and _stat_key(through) != tuple(stat_then):
            raise Changed(path)
        if not inside(real_root, os.path.realpath(path)):
            raise Unstorable(f"{path} leads out of the project root")
        return hash_bytes(target), target

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
                _remove(self.blob_path(digest))
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
        return self._lock(fcntl.LOCK_SH, wait_s)

    def _lock(self, kind: int, wait_s: float | None) -> int:
        try:
            fd = os.open(os.path.join(self.dir, "gc.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise CacheError(f"cannot use {self.dir}: {e.strerror or e}") from None
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, kind | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if deadline is not None and time.monotonic() > deadline:
                    os.close(fd)
                    raise CacheError(f"{self.dir} is locked by another farmer (gc.lock)") from None
                time.sleep(0.02)

    def stats(self) -> tuple[int, int]:
        """Entries, and bytes: in blobs (as on disk) and kept in entries."""
        entries, inline = self._query("SELECT COUNT(*), COALESCE(SUM(inline), 0) FROM entry")[0]
        return entries, sum(self._blobs_on_disk().values()) + inline

    def gc(self, max_size: int, wait_s: float | None = None) -> GcResult:
        """Evict least recently used entries until the blobs the others name fit in
        `max_size`, and remove every blob no entry names and stale temporary files."""
        self._writable()
        fd = self._lock(fcntl.LOCK_EX, wait_s)
        try:
            return self._gc(max_size)
        finally:
            os.close(fd)

    def _gc(self, max_size: int) -> GcResult:
        rows = self._query("SELECT key, data FROM entry ORDER BY used_at")
        on_disk = self._blobs_on_disk()
        refs: dict[str, int] = {}
        evict: list[str] = []
        kept: list[tuple[str, list[str], int]] = []  # oldest first: key, blobs, bytes inline
        for key, data in rows:
            entry = Entry.loads(key, data)
            digests = [] if entry is None else [d for d, _ in entry.blobs()]
            if entry is None or any(d not in on_disk for d in digests):
                evict.append(key)  # damaged or incomplete: never a hit, evicted at once
                continue
            kept.append((key, digests, entry.inline_size()))
            for d in digests:
                refs[d] = refs.get(d, 0) + 1
        total = sum(on_disk[d] for d in refs) + sum(inline for _, _, inline in kept)
        for key, digests, inline in kept:
            if total <= max_size:
                break
            evict.append(key)
            total -= inline
            for d in digests:
                refs[d] -= 1
                if refs[d] == 0:
                    del refs[d]
                    total -= on_disk[d]
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("DELETE FROM entry WHERE key=?", [(k,) for k in evict])
            db.execute("UPDATE meta SET value=? WHERE key='bytes'", (str(total),))
            db.execute("COMMIT")
        except sqlite3.Error as e:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise CacheError(f"cannot write {self.db_path}: {e}") from None
        freed = 0
        for d, size in on_disk.items():  # entries are gone first: none names a removed blob
            if d not in refs:
                _unlink(self.blob_path(d))
                freed += size
        self._remove_stale_tmp()
        return GcResult(len(rows) - len(evict), len(evict), total, freed)

    def clear(self) -> int:
        """Remove every entry and blob; the entries removed."""
        self._writable()
        fd = self._lock(fcntl.LOCK_EX, None)
        try:
            count = self._query("SELECT COUNT(*) FROM entry")[0][0]
            try:
                self.db.execute("DELETE FROM entry")
                self.db.execute("UPDATE meta SET value='0' WHERE key='bytes'")
            except sqlite3.Error as e:
                raise CacheError(f"cannot write {self.db_path}: {e}") from None
            for d in self._blobs_on_disk():
                _unlink(self.blob_path(d))
            self._remove_stale_tmp(0.0)
            return count
        finally:
            os.close(fd)

    def _writable(self) -> None:
        if self.read_only:
            raise CacheError(f"{self.read_only}; the cache is read-only")

    def _blobs_on_disk(self) -> dict[str, int]:
        out = {}
        try:
            shards = os.listdir(self.cas)
        except OSError:
            return out
        for shard in shards:
            try:
                with os.scandir(os.path.join(self.cas, shard)) as it:
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

    def _remove_stale_tmp(self, older_than_s: float = _STALE_TMP_S) -> None:
        now = time.time()
        try:
            with os.scandir(self.tmp) as it:
                for e in it:
                    try:
                        if now - e.stat(follow_symlinks=False).st_mtime >= older_than_s:
                            os.unlink(e.path)
                    except OSError:
                        pass
        except OSError:
            pass


def inside(real_root: str, real_path: str) -> bool:
    """Whether `real_path` (a realpath) lies below the root (a realpath), as
    farmer/files/confine.py asks of every output."""
    return real_path.startswith(real_root.rstrip(os.sep) + os.sep)


def blob_name(digest: str) -> str:
    """A content digest without the mark of a thin archive: the hash of the bytes."""
    return digest[len(THIN_PREFIX):] if digest.startswith(THIN_PREFIX) else digest


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
    _remove(final)
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


_CACHE_NAMES = ("ac.db", "cas")  # a folder holding one of these is a farmer cache already


def _cache_dir(path: str) -> None:
    """`path` ready to be the cache's folder. One that farmer makes is made 0700 (SPEC §5:
    the user's own). One that exists is never changed (it may be /tmp, a home folder, a
    project, a team's folder, whose mode is not farmer's to take away): it is used as it is
    when it is the user's own, no other user may write to it (who can write the cache
    decides what it restores), and it is a farmer cache already or empty; else an OSError
    says why, and the build goes on without the cache."""
    if _made(path):
        os.chmod(path, 0o700)  # a umask may have taken the owner's bits too
        return
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
    if st.st_uid != os.getuid():
        raise PermissionError(errno.EPERM, f"owned by another user (uid {st.st_uid})", path)
    if st.st_mode & stat.S_IWOTH:
        raise PermissionError(errno.EPERM, f"every user may write to it (mode {stat.S_IMODE(st.st_mode):o}); "
                                           "name a folder of your own", path)
    names = os.listdir(path)
    if names and not any(name in _CACHE_NAMES for name in names):
        raise PermissionError(errno.EPERM, "it holds other files and no farmer cache; name a new or "
                                           "empty folder, or one below it", path)


def _made(path: str) -> bool:
    """Whether `path` was made now (with its missing parents), rather than found."""
    try:
        os.makedirs(path, mode=0o700)
    except FileExistsError:
        return False
    return True


def _has_pages(wal: str) -> bool:
    """Whether a -wal file holds anything (one that cannot be looked at might)."""
    try:
        return os.stat(wal).st_size > 0
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _create_private(path: str) -> None:
    """An empty `path` of mode 0600 if there is none (SQLite takes an empty file for a new
    database, and would make it 0644)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    except OSError as e:
        raise CacheError(f"cannot open {path}: {e.strerror or e}") from None


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove(path: str) -> None:
    """Whatever is at `path`, a directory with what it holds too (never through a link)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            import shutil  # rare: a directory where a blob belongs

            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _corrupt(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
