"""`.farmer/state.db`: traces, the stat cache and measured history, in SQLite.

Everything is read in one query per table when a build starts and written back in batches, one
transaction each, so a crash loses at most the last batch and never corrupts the file. Between
builds the file is in rollback-journal mode (DELETE), which read-only commands open without
creating anything. A connection that writes once or twice commits those batches in that mode
(one journal, two syncs each); from its third batch on it switches to WAL, where a batch
commits without waiting for the disk, and it switches back when it closes: a checkpoint and a
journalled header write, the two switches costing more than a small build's one or two batches
(see bench/results/issue17-passes.md#clean-builds-the-first-command-the-1k-clean-build-the-meson-series).
A connection that only reads (the stale-output check of a cached graph) changes nothing. A
database that cannot be read is moved aside and farmer starts afresh: removing state only ever
costs rebuilding.

A project without state.db reads as empty, and the file is made by the first write (its
schema in one transaction): a first build starts its commands without waiting for SQLite
to create a database and its tables, which hold nothing yet.
"""

from __future__ import annotations

import marshal
import os
import sys
import time

from farmer.files.digests import StatKey
from farmer.files.private import keep_out_of_git, make_state_dir, unlink_link
from farmer.startup.cheap import FUNCTOOLS_FOR_SQLITE3, load_sqlite3


class _Sqlite3:
    """`_sqlite3` (farmer/startup/cheap.py), loaded when first used: a first build (no
    state.db: nothing to read) starts its commands before it writes anything."""

    def __getattr__(self, name: str):
        module = load_sqlite3(_FUNCTOOLS_STAND_IN)
        globals()["sqlite3"] = module
        return getattr(module, name)


_FUNCTOOLS_STAND_IN = FUNCTOOLS_FOR_SQLITE3  # what _sqlite3 is offered of functools (a test offers less)

sqlite3 = _Sqlite3()

SCHEMA_VERSION = 2
HISTORY_KEEP = 8  # measured runs kept per computation

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS stat (
    path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, ino INTEGER, ctime_ns INTEGER,
    digest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trace (id TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS history (
    id TEXT NOT NULL, task TEXT NOT NULL, at REAL NOT NULL, wall_s REAL NOT NULL,
    cpu_s REAL, max_rss_kb INTEGER, input_bytes INTEGER);
CREATE INDEX IF NOT EXISTS history_id ON history (id, at);
CREATE INDEX IF NOT EXISTS history_task ON history (task, at);
CREATE TABLE IF NOT EXISTS sha256 (digest TEXT PRIMARY KEY, sha256 TEXT NOT NULL, size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS declared (
    farmfile TEXT NOT NULL, path TEXT NOT NULL, id TEXT NOT NULL,
    PRIMARY KEY (farmfile, path)) WITHOUT ROWID;
"""
# What _SCHEMA makes: a database that has all of them needs none of its statements run.
_SCHEMA_NAMES = {"meta", "stat", "trace", "history", "history_id", "history_task", "sha256", "declared"}
SHA256_KEEP = 200_000  # rows of the SHA-256 side table (farmer/remote/shas.py); the oldest go


class Trace:
    """The record of a computation's last successful run."""

    __slots__ = ("id", "action", "world", "inputs", "discovered", "outputs")

    def __init__(self, id: str, action: str, world: str | None, inputs: list[tuple[str, str]],
                 discovered: list[tuple[str, str]], outputs: list[tuple[str, str]]) -> None:
        self.id = id
        self.action = action  # action fingerprint (command, env, outputs)
        self.world = world  # world fingerprint, when the computation runs in a world
        self.inputs = inputs  # declared inputs (path, digest), in declared order
        self.discovered = discovered  # depfile inputs (path, digest)
        self.outputs = outputs  # declared outputs (path, digest)

    def _values(self) -> tuple:
        return (self.id, self.action, self.world, self.inputs, self.discovered, self.outputs)

    def __eq__(self, other: object) -> bool:  # compared by value (tests of state.db)
        if other.__class__ is not Trace:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        return (f"Trace({self.id!r}, action={self.action!r}, world={self.world!r}, inputs={self.inputs!r}, "
                f"discovered={self.discovered!r}, outputs={self.outputs!r})")


class Sample:
    """One measured run."""

    __slots__ = ("id", "task", "at", "wall_s", "cpu_s", "max_rss_kb", "input_bytes")

    def __init__(self, id: str, task: str, at: float, wall_s: float, cpu_s: float | None,
                 max_rss_kb: int | None, input_bytes: int | None) -> None:
        self.id, self.task, self.at, self.wall_s = id, task, at, wall_s
        self.cpu_s, self.max_rss_kb, self.input_bytes = cpu_s, max_rss_kb, input_bytes

    def _values(self) -> tuple:
        return (self.id, self.task, self.at, self.wall_s, self.cpu_s, self.max_rss_kb, self.input_bytes)

    def __eq__(self, other: object) -> bool:  # compared by value (tests of state.db)
        if other.__class__ is not Sample:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        return f"Sample{self._values()!r}"


def world_setup_id(name: str) -> str:
    """The id and task under which a world's measured set-up is kept in history (no task
    name has a colon)."""
    return "world:" + name


class StateError(Exception):
    pass


class State:
    def __init__(self, farmer_dir: str | os.PathLike, readonly: bool = False) -> None:
        self.dir = os.fspath(farmer_dir)
        self.path = os.path.join(self.dir, "state.db")
        self.warnings: list[str] = []
        self.readonly = readonly
        self.write_failed = False
        self.wal = False  # in WAL mode now (switched back to DELETE at `close`)
        self.batches = 0  # write transactions begun on this connection
        # set_declared's rows while there is no database yet: written with the first batch
        self._declared: tuple | None = None
        # save_later's traces and stat data while there is no database yet: the same
        self._held_traces: dict[str, Trace] = {}
        self._held_stats: dict[str, tuple[StatKey, str] | None] = {}
        self._fresh = False  # no state.db: the first batch makes it (`_make`)
        self._reopen = False  # made by `_make`: connected again when next read or written
        self._making: sqlite3.Connection | None = None  # `prepare`'s: the first batch's, begun
        self.db: sqlite3.Connection | None = self._open_readonly() if readonly else self._open()

    def _open_readonly(self) -> sqlite3.Connection:
        """For commands that must write nothing (`plan`): the state as it is, or none."""
        if os.path.exists(self.path):
            try:
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None)
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is not None and row[0] == str(SCHEMA_VERSION):
                    return db
                db.close()
            except sqlite3.Error as e:
                self.warnings.append(f"{self.path} could not be read ({e}); planning as if nothing was built")
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.executescript(_SCHEMA)
        return db

    def _open(self) -> sqlite3.Connection | None:
        """The database, or None when there is none yet (made by the first write)."""
        make_state_dir(self.dir)
        for suffix in ("", "-wal", "-shm"):  # SQLite follows links: a planted one is removed
            unlink_link(self.path + suffix)
        if not (os.path.lexists(self.path) or os.path.lexists(self.path + "-wal")):
            self._fresh = True
            return None
        return self._open_now()

    def _open_now(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as e:
            if not (_corrupt(e) or os.path.isdir(self.path)):
                raise  # the file system failed (full, read-only): not the database's fault
            self.warnings.append(self._set_aside(e))
            return self._connect()

    def _set_aside(self, e: Exception) -> str:
        """Move an unreadable database (and its -wal and -shm) aside; removing state only
        ever costs rebuilding."""
        name = f"state.db.corrupt-{int(time.time())}"
        aside = os.path.join(self.dir, name)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.replace(self.path + suffix, aside + suffix)
        return f"{self.path} could not be read ({e}); moved it to {name} and starting from scratch"

    def _corruption_found(self, e: sqlite3.DatabaseError) -> None:
        """Corruption found after opening (a page read or written only now): the same as at
        opening, the build goes on from scratch."""
        if self.readonly or not _corrupt(e):
            raise e
        try:
            if self.db is not None:
                self.db.close()
        except sqlite3.Error:
            pass
        print(f"farmer: warning: {self._set_aside(e)}", file=sys.stderr)
        self.db = self._connect()

    def _writable(self) -> sqlite3.Connection:
        """The database, made now if there is none yet."""
        if self.db is None:
            if self._fresh:
                self._make(None)
            self.db = self._open_now()
        return self.db

    def prepare(self) -> None:
        """Without state.db, begin the first batch's transaction now (`_begin_make`: SQLite
        imported, the new file connected, its schema written), for `_make` to finish: a
        build calls this while its first commands run, so that what it writes at its end
        waits for no more than its rows and one sync. A build that writes nothing leaves
        nothing (`close`); one that fails here tries again at its first batch."""
        if not self._fresh or self.readonly or self._making is not None:
            return
        try:
            self._making = self._begin_make()
        except (sqlite3.Error, OSError):
            pass  # said by `_make`, if it fails again

    def _begin_make(self) -> sqlite3.Connection:
        new = self.path + ".new"
        for suffix in ("", "-journal"):
            try:
                os.unlink(new + suffix)
            except FileNotFoundError:
                pass
        db = sqlite3.connect(new, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=MEMORY")  # a rollback needs no file: nobody reads it yet
            db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION}');")
        except BaseException:
            db.close()
            raise
        return db

    def _make(self, batch: tuple | None) -> None:
        """The first write of a project without state.db: the schema and `batch` (`_write`'s
        arguments) in one transaction, into a new file beside it, which becomes state.db by a
        rename once committed: one sync, no journal file, no switch to WAL and back. A farmer
        killed before the rename leaves no state.db (the file beside it is replaced next
        time): as if that batch had not been written. A build that writes once (a small
        first build, at its end) never connects again; the next read or write connects."""
        db, self._making = self._making, None
        if db is None:
            db = self._begin_make()
        try:
            if batch is not None:
                self._write(db, *batch)
            db.execute("COMMIT")  # synced (synchronous=FULL, SQLite's default) before the rename
        finally:
            db.close()
        os.replace(self.path + ".new", self.path)
        keep_out_of_git(self.dir)  # (a .farmer/ an older farmer made has none yet)
        self._committed()
        self._fresh = False
        self._reopen = True
        self.batches += 1

    def _rows(self, query: str, params: tuple = ()) -> list[tuple]:
        if self.db is None:
            if not self._reopen:
                return []  # no database yet: nothing was recorded
            self.db = self._open_now()
        try:
            return self.db.execute(query, params).fetchall()
        except sqlite3.DatabaseError as e:
            if self.readonly and _corrupt(e):
                print(f"farmer: warning: {self.path} could not be read ({e}); "
                      "as if nothing was built", file=sys.stderr)
                return []
            self._corruption_found(e)
            return []

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            names = dict(db.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'index')"))
            tables = {name for name, kind in names.items() if kind == "table"}
            if tables and "meta" not in tables:  # somebody else's database
                raise sqlite3.DatabaseError(f"not a farmer database: tables {', '.join(sorted(tables))}")
            db.execute("PRAGMA synchronous=NORMAL")
            # WAL already: left so by a farmer that died before it closed the file.
            self.wal = db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
            if not tables:  # a new database: the schema is its first batch of many, in one transaction
                self._begin_writing(db, many=True)
                db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} INSERT INTO meta VALUES ('schema', "
                                 f"'{SCHEMA_VERSION}'); COMMIT;")
            elif not _SCHEMA_NAMES <= names.keys():  # an older farmer's: what it lacks
                db.executescript(_SCHEMA)
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise sqlite3.DatabaseError(f"schema version {row[0]}, this farmer uses {SCHEMA_VERSION}")
            if tables and row is None:
                raise sqlite3.DatabaseError("not a farmer database: no schema version")
            # A foreign or older database with tables of another shape fails here.
            db.execute("SELECT id, data FROM trace LIMIT 1").fetchall()
            db.execute("SELECT path, mtime_ns, size, ino, ctime_ns, digest FROM stat LIMIT 1").fetchall()
            db.execute("SELECT id, task, at, wall_s, cpu_s, max_rss_kb, input_bytes FROM history LIMIT 1").fetchall()
            # A file (or folder, for the journal) farmer may not write fails here, as it would
            # at the first batch, but before the build changes anything. (SQLite opens such a
            # file read-only and says so only when it writes; taking its write lock works.)
            if not (os.access(self.path, os.W_OK) and os.access(self.dir, os.W_OK)):
                raise sqlite3.OperationalError("attempt to write a readonly database")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    # -- reading ----------------------------------------------------------------------

    # What save_later holds is read back as if written (there is no database yet).

    def stat_cache(self) -> dict[str, tuple[StatKey, str]]:
        out = {path: entry for path, entry in self._held_stats.items() if entry is not None}
        for path, m, s, i, c, d in self._rows("SELECT path, mtime_ns, size, ino, ctime_ns, digest FROM stat"):
            out[path] = ((m, s, i, c), d)
        return out

    def traces(self) -> dict[str, Trace]:
        out = dict(self._held_traces)
        for tid, data in self._rows("SELECT id, data FROM trace"):
            try:
                out[tid] = Trace(tid, *marshal.loads(data))
            except (EOFError, ValueError, TypeError):
                continue  # unreadable: as if never built
        return out

    def trace(self, cid: str) -> Trace | None:
        if cid in self._held_traces:
            return self._held_traces[cid]
        rows = self._rows("SELECT data FROM trace WHERE id=?", (cid,))
        try:
            return Trace(cid, *marshal.loads(rows[0][0])) if rows else None
        except (EOFError, ValueError, TypeError):
            return None  # unreadable: as if never built

    def stat_entry(self, path: str) -> tuple[StatKey, str] | None:
        if path in self._held_stats:
            return self._held_stats[path]
        rows = self._rows("SELECT mtime_ns, size, ino, ctime_ns, digest FROM stat WHERE path=?", (path,))
        return ((rows[0][0], rows[0][1], rows[0][2], rows[0][3]), rows[0][4]) if rows else None

    def history(self, tasks: set[str] | None = None) -> dict[str, list[Sample]]:
        """Measured runs, oldest first, of every computation (of `tasks` only, if given)."""
        query = "SELECT id, task, at, wall_s, cpu_s, max_rss_kb, input_bytes FROM history"
        params: tuple = ()
        if tasks is not None and len(tasks) < 500:  # SQLite caps the number of parameters
            params = tuple(tasks)
            query += f" WHERE task IN ({','.join('?' * len(params))})"
        out: dict[str, list[Sample]] = {}
        for row in self._rows(query + " ORDER BY at", params):
            out.setdefault(row[0], []).append(Sample(*row))
        return out

    def sha256(self, digest: str) -> tuple[str, int] | None:
        """The SHA-256 and size of the content whose farmer digest is `digest`, if recorded
        (the side table of files sent to a remote: farmer/remote/shas.py)."""
        rows = self._rows("SELECT sha256, size FROM sha256 WHERE digest=?", (digest,))
        return (rows[0][0], rows[0][1]) if rows else None

    def recent(self, limit: int) -> list[Sample]:
        """The newest measured run of each of the most recently measured computations (up
        to `limit` runs looked at): what a prior for never measured ones is made of."""
        newest: dict[str, Sample] = {}
        for row in self._rows("SELECT id, task, at, wall_s, cpu_s, max_rss_kb, input_bytes FROM "
                              "history ORDER BY at DESC LIMIT ?", (limit,)):
            newest.setdefault(row[0], Sample(*row))
        return list(newest.values())

    def declared_key(self, farmfile: str) -> str | None:
        """The key of the graph whose outputs `declared` holds (farmer/plan/stale.py)."""
        rows = self._rows("SELECT value FROM meta WHERE key=?", ("declared:" + farmfile,))
        return rows[0][0] if rows else None

    def declared(self, farmfile: str) -> dict[str, str]:
        """The outputs the Farmfile's graph declared when last made: path -> computation id."""
        return dict(self._rows("SELECT path, id FROM declared WHERE farmfile=?", (farmfile,)))

    # -- writing ----------------------------------------------------------------------

    def _begin_writing(self, db: sqlite3.Connection, many: bool = False) -> None:
        """Before each write transaction: from the third one on (or with `many`), WAL. Before
        the first, `.farmer/` kept out of git, if a farmer older than that left it without
        its .gitignore (one open per build that writes)."""
        if not self.batches:
            keep_out_of_git(self.dir)
        self.batches += 1
        if not self.wal and (many or self.batches > 2):
            db.execute("PRAGMA journal_mode=WAL")
            self.wal = True

    def save_sha256(self, rows: dict[str, tuple[str, int]]) -> None:
        """Record SHA-256 digests (farmer digest -> (sha256, size)). Only a cache: a failure to
        write costs hashing again, so it is not reported."""
        if not rows or self.readonly:
            return
        try:
            self._begin_writing(self._writable())
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany("INSERT OR REPLACE INTO sha256 VALUES (?,?,?)",
                                [(d, sha, size) for d, (sha, size) in rows.items()])
            self.db.execute("DELETE FROM sha256 WHERE rowid <= (SELECT max(rowid) FROM sha256) - ?", (SHA256_KEEP,))
            self.db.execute("COMMIT")
        except sqlite3.Error:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")

    def set_declared(self, farmfile: str, before: dict[str, str], now: dict[str, str], key: str,
                     forget: list[str]) -> None:
        """Record what the Farmfile's graph declares `now` (the rows hold `before`), and
        forget the traces of computations that are gone. Without a database yet, nothing
        was declared, traced or written by an earlier build: the rows go into the first
        batch `save` writes (or are written by `close`), so no trace is ever recorded
        without them."""
        if self._fresh:
            self._declared = (farmfile, before, now, key, forget)
            return
        try:
            db = self._writable()
            self._begin_writing(db)
            db.execute("BEGIN IMMEDIATE")
            try:
                self._write_declared(db, farmfile, before, now, key, forget)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as e:
            if not _corrupt(e):
                self.write_failed = True
                raise
            self._corruption_found(e)  # a fresh database: the next build records it

    def _write_declared(self, db: sqlite3.Connection, farmfile: str, before: dict[str, str],
                        now: dict[str, str], key: str, forget: list[str]) -> None:
        db.executemany("DELETE FROM declared WHERE farmfile=? AND path=?",
                       [(farmfile, p) for p in before if p not in now])
        db.executemany("INSERT OR REPLACE INTO declared VALUES (?,?,?)",
                       [(farmfile, p, cid) for p, cid in now.items() if before.get(p) != cid])
        db.executemany("DELETE FROM trace WHERE id=?", [(i,) for i in forget])
        db.execute("INSERT OR REPLACE INTO meta VALUES (?,?)", ("declared:" + farmfile, key))

    def save_later(self, traces: list[Trace], stats: dict[str, tuple[StatKey, str] | None]) -> None:
        """Traces and stat data that may wait for the next batch (or `close`) while there is
        no database yet, and are read back meanwhile as if written: the generator a first
        build of a build.ninja takes as run (farmer/ninja/) need not make state.db before the
        first command. A farmer killed before that batch loses them with it. With a
        database, written now."""
        if not self._fresh:
            self.save(traces, [], [], stats)
            return
        self._held_traces.update((t.id, t) for t in traces)
        self._held_stats.update(stats)

    def save(self, traces: list[Trace], forget: list[str], samples: list[Sample],
             stats: dict[str, tuple[StatKey, str] | None]) -> None:
        """Write one batch in one transaction (with the declared outputs and what
        save_later holds, if they wait)."""
        if not (traces or forget or samples or stats or self._declared or self._held_traces
                or self._held_stats):
            return
        try:
            self._save(traces, forget, samples, stats)
        except sqlite3.DatabaseError as e:
            if self.readonly or not _corrupt(e):
                self.write_failed = True  # (full, read-only, I/O): the caller says so, once
                raise
            self._corruption_found(e)
            self._save(traces, forget, samples, stats)

    def _save(self, traces: list[Trace], forget: list[str], samples: list[Sample],
              stats: dict[str, tuple[StatKey, str] | None]) -> None:
        if self.db is None and self._fresh:
            self._make((traces, forget, samples, stats))
            return
        db = self._writable()
        self._begin_writing(db)
        db.execute("BEGIN IMMEDIATE")
        try:
            self._write(db, traces, forget, samples, stats)
            db.execute("COMMIT")
            self._committed()
        except BaseException:
            if db.in_transaction:  # a failed COMMIT may have rolled back already
                db.execute("ROLLBACK")
            raise

    def _write(self, db: sqlite3.Connection, traces: list[Trace], forget: list[str],
               samples: list[Sample], stats: dict[str, tuple[StatKey, str] | None]) -> None:
        """One batch's statements, in the caller's transaction, with what waits for it
        (forgotten once the caller's COMMIT has succeeded: `_committed`)."""
        if self._declared is not None:
            self._write_declared(db, *self._declared)
        if self._held_traces:
            traces = [*self._held_traces.values(), *traces]
        if self._held_stats:
            stats = {**self._held_stats, **stats}
        if forget:
            db.executemany("DELETE FROM trace WHERE id=?", [(i,) for i in forget])
        if traces:
            db.executemany(
                "INSERT OR REPLACE INTO trace VALUES (?,?)",
                [(t.id, marshal.dumps((t.action, t.world, t.inputs, t.discovered, t.outputs)))
                 for t in traces])
        if samples:
            db.executemany(
                "INSERT INTO history VALUES (?,?,?,?,?,?,?)",
                [(s.id, s.task, s.at, s.wall_s, s.cpu_s, s.max_rss_kb, s.input_bytes) for s in samples])
            db.executemany(
                "DELETE FROM history WHERE id=? AND at < (SELECT at FROM history WHERE id=? "
                "ORDER BY at DESC LIMIT 1 OFFSET ?)",
                [(i, i, HISTORY_KEEP - 1) for i in {s.id for s in samples}])
        if stats:
            gone = [(p,) for p, e in stats.items() if e is None]
            keep = [(p, *e[0], e[1]) for p, e in stats.items() if e is not None]
            if gone:
                db.executemany("DELETE FROM stat WHERE path=?", gone)
            if keep:
                db.executemany("INSERT OR REPLACE INTO stat VALUES (?,?,?,?,?,?)", keep)

    def _committed(self) -> None:
        """What waited for a batch is in the database now."""
        self._declared = None
        self._held_traces, self._held_stats = {}, {}

    def close(self) -> None:
        """Write what waits (the declared outputs) and close; closing twice does nothing."""
        try:
            if (self._declared is not None or self._held_traces or self._held_stats) and not self.write_failed:
                self.save([], [], [], {})
            if self._making is not None:  # begun by `prepare`, and nothing to write: undone
                self._making.close()
                self._making = None
                os.unlink(self.path + ".new")
            if self.db is None:
                return
            if self.wal and not self.readonly:
                # Leave a self-contained file behind (no -wal/-shm), so that read-only
                # commands (`plan`, `query`) can open it without creating anything.
                self.db.execute("PRAGMA journal_mode=DELETE")
            self.db.close()
        except (sqlite3.Error, OSError) as e:  # closing never decides a build's outcome
            if not self.write_failed:
                print(f"farmer: warning: closing {self.path}: {e}", file=sys.stderr)
        finally:
            self._committed()  # (or lost with the batch that failed)
            self.db = None
            self._reopen = False


def _corrupt(e: sqlite3.DatabaseError) -> bool:
    """Whether SQLite says the file is damaged or not a database (not: full, locked, I/O)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is None:  # raised by farmer itself: a foreign or older database
        return type(e) is sqlite3.DatabaseError
    return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
