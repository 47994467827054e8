"""The cache's folder made or checked, and its `ac.db` (SQLite, WAL) connected: written,
with a new cache's tables made and a damaged database set aside; or, for a cache that
cannot be written (a read-only mount, a folder this user may not write, a disk too full for
SQLite's -shm), read only, or as `immutable` when even a -shm cannot be made."""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import time

from farmer.record.cache.errors import CacheError

SCHEMA = "3"  # 3: an entry's data holds its own key, and its records may be symbolic links

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entry (
    key TEXT PRIMARY KEY, key1 TEXT NOT NULL, data BLOB NOT NULL, size INTEGER NOT NULL,
    inline INTEGER NOT NULL, used_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS entry_key1 ON entry (key1, used_at);
CREATE INDEX IF NOT EXISTS entry_used ON entry (used_at);
"""

_CACHE_NAMES = ("ac.db", "cas")  # a folder holding one of these is a farmer cache already


def query(db: sqlite3.Connection, db_path: str, sql: str, params: tuple = ()) -> list[tuple]:
    """The rows of `sql`; CacheError when the database cannot be read."""
    try:
        return db.execute(sql, params).fetchall()
    except sqlite3.Error as e:
        raise CacheError(f"cannot read {db_path}: {e}") from None


def connect(db_path: str, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection of its own (one per thread). Two farmers that open a new cache at
    the same moment both try to switch it to WAL, which SQLite answers with "database is
    locked" at once, without waiting on the busy timeout: that is tried again until the
    timeout runs out."""
    deadline = time.monotonic() + 2 * busy_timeout_s
    while True:
        try:
            return _connect(db_path, busy_timeout_s)
        except CacheError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _connect(db_path: str, busy_timeout_s: float) -> sqlite3.Connection:
    try:
        _create_private(db_path)  # its -wal and -shm get its mode: entries hold outputs' bytes
        db = sqlite3.connect(db_path, timeout=busy_timeout_s, isolation_level=None,
                             check_same_thread=False)
    except sqlite3.Error as e:
        raise CacheError(f"cannot open {db_path}: {e}") from None
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
            raise CacheError(f"cannot use {db_path}: {e}") from None
        # Damaged: set aside (entries only point at blobs; losing them costs rebuilds).
        aside = f"{db_path}.corrupt-{int(time.time())}"
        try:
            os.replace(db_path, aside)
        except OSError as moved:  # (connecting again would find it damaged again)
            raise CacheError(f"cannot use {db_path}: {e}, and cannot set it aside: "
                             f"{moved.strerror or moved}") from None
        for suffix in ("-wal", "-shm"):
            try:
                os.replace(db_path + suffix, aside + suffix)
            except OSError:
                pass
        return _connect(db_path, busy_timeout_s)
    except BaseException:
        db.close()
        raise
    return db


def connect_read_only(db_path: str, busy_timeout_s: float, why: CacheError) -> sqlite3.Connection:
    """A connection that writes nothing, to a cache that cannot be written (`why`, raised
    again when it cannot be read either). SQLite reads a WAL database read-only when
    its -shm is there or can be made; when it cannot (a read-only folder or mount, a
    full disk), only as `immutable`, which reads the database file alone: so only
    when no -wal holds pages that are not in it yet (nobody writes it then, and none can
    start to where the -shm cannot be made)."""
    from urllib.parse import quote  # only a cache that cannot be written comes here

    if not os.path.isfile(db_path):
        raise why  # nothing stored to read
    uri = f"file:{quote(db_path)}?"
    for mode in ("mode=ro", "immutable=1"):
        if mode == "immutable=1" and _has_pages(db_path + "-wal"):
            break
        try:
            db = sqlite3.connect(uri + mode, uri=True, timeout=busy_timeout_s,
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
        return db
    raise why


def _schema_row(db: sqlite3.Connection) -> tuple | None:
    """The cache's schema row, or None before the cache's tables exist."""
    try:
        return db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return None
        raise


def cache_dir(path: str) -> None:
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


def _corrupt(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
