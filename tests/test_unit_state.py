"""Unit tests for farmer/store/state.py: `.farmer/state.db` (SPEC §4: traces, stat cache,
measured durations; removing or breaking it only ever costs rebuilding)."""

from __future__ import annotations

import sqlite3

import pytest

from farmer.store.state import HISTORY_KEEP, SCHEMA_VERSION, Sample, State, Trace


@pytest.fixture
def farmer_dir(tmp_path):
    return tmp_path / ".farmer"


def reopen(state: State) -> State:
    state.close()
    return State(state.dir)


def trace(tid: str, action: str = "act", **kw) -> Trace:
    return Trace(
        id=tid,
        action=action,
        world=kw.get("world"),
        inputs=kw.get("inputs", [("src/a.c", "d1"), ("src/b c.h", "d2")]),
        discovered=kw.get("discovered", [("inc/x.h", "d3")]),
        outputs=kw.get("outputs", [(tid, "d4")]),
    )


def sample(tid: str, at: float, wall: float = 1.0, task: str = "t") -> Sample:
    return Sample(tid, task, at, wall, 0.5, 1024, 100)


def test_fresh_state_is_empty_and_made_by_the_first_write(farmer_dir):
    """A first build reads nothing and starts its commands before SQLite makes a file."""
    s = State(farmer_dir)
    assert s.traces() == {} and s.history() == {} and s.stat_cache() == {}
    assert s.declared("Farmfile") == {} and s.trace("x") is None
    assert s.warnings == []
    assert not (farmer_dir / "state.db").exists()
    s.save([trace("x")], [], [], {})
    assert (farmer_dir / "state.db").is_file()
    s = reopen(s)
    assert set(s.traces()) == {"x"}
    s.close()
    s.close()  # closing twice does nothing
    assert not (farmer_dir / "state.db-wal").exists()


def test_declared_outputs_wait_for_the_first_batch_without_a_database(farmer_dir):
    """Without state.db, what the graph declares is written in the same transaction as the
    first traces (no trace is ever recorded without them), or when the state is closed."""
    s = State(farmer_dir)
    s.set_declared("/p/Farmfile", {}, {"out/a": "out/a"}, "k1", [])
    assert not (farmer_dir / "state.db").exists()
    s.save([trace("out/a")], [], [], {})
    db = sqlite3.connect(farmer_dir / "state.db")
    assert db.execute("SELECT path, id FROM declared").fetchall() == [("out/a", "out/a")]
    assert db.execute("SELECT count(*) FROM trace").fetchone() == (1,)
    db.close()
    s.close()
    other = farmer_dir.parent / "other" / ".farmer"
    s = State(other)
    s.set_declared("/p/Farmfile", {}, {"out/b": "out/b"}, "k2", [])
    s.close()
    s = State(other)
    assert s.declared("/p/Farmfile") == {"out/b": "out/b"} and s.declared_key("/p/Farmfile") == "k2"
    s.close()


def test_what_may_wait_is_read_back_and_written_with_the_first_batch(farmer_dir):
    """save_later without state.db (a first build's adopted generator, farmer/ninja/): read
    back as if written, made into state.db with the first batch, in its transaction, or by
    close; lost with it when the farmer dies first. With a database, written at once."""
    s = State(farmer_dir)
    s.save_later([trace("build.ninja")], {"meson.build": ((1, 2, 3, 4), "dm")})
    assert not (farmer_dir / "state.db").exists()
    assert set(s.traces()) == {"build.ninja"} and s.trace("build.ninja") == trace("build.ninja")
    assert s.stat_cache() == {"meson.build": ((1, 2, 3, 4), "dm")}
    assert s.stat_entry("meson.build") == ((1, 2, 3, 4), "dm")
    s.save([trace("out/a")], [], [], {})
    db = sqlite3.connect(farmer_dir / "state.db")
    assert sorted(db.execute("SELECT id FROM trace")) == [("build.ninja",), ("out/a",)]
    assert db.execute("SELECT path FROM stat").fetchall() == [("meson.build",)]
    db.close()
    assert set(s.traces()) == {"build.ninja", "out/a"}  # connected again to read
    s.save_later([trace("later")], {})  # a database now: written at once
    s.close()
    s = State(farmer_dir)
    assert set(s.traces()) == {"build.ninja", "out/a", "later"}
    s.close()
    other = farmer_dir.parent / "other" / ".farmer"
    s = State(other)
    s.save_later([trace("build.ninja")], {})
    s.close()
    assert set(State(other).traces()) == {"build.ninja"}
    dead = farmer_dir.parent / "dead" / ".farmer"
    s = State(dead)
    s.save_later([trace("build.ninja")], {})
    s.db = None  # as a farmer killed now leaves it: nothing written
    assert not (dead / "state.db").exists() and State(dead).traces() == {}


def state_files(farmer_dir) -> list[str]:
    """What the folder holds but its .gitignore (tests/test_farmer_dir_gitignore.py)."""
    return sorted(p.name for p in farmer_dir.iterdir() if p.name != ".gitignore")


def test_a_first_batch_prepared_while_commands_run_is_finished_by_the_first_save(farmer_dir):
    """`prepare` (a build's first idle moment) begins the first batch: the database appears
    only once that batch is committed; a build that writes nothing leaves nothing, and one
    killed in between leaves only the file the next one replaces."""
    s = State(farmer_dir)
    s.prepare()
    assert not (farmer_dir / "state.db").exists() and s.traces() == {}
    s.save([trace("out/a")], [], [sample("out/a", 1.0)], {"src/a": ((1, 2, 3, 4), "d")})
    assert state_files(farmer_dir) == ["state.db"]
    s.prepare()  # there is a database now: nothing to begin
    s.save([trace("out/b")], [], [], {})
    s.close()
    s = State(farmer_dir)
    assert sorted(s.traces()) == ["out/a", "out/b"] and set(s.stat_cache()) == {"src/a"}
    s.close()

    idle = farmer_dir.parent / "idle" / ".farmer"
    s = State(idle)
    s.prepare()
    s.close()
    assert state_files(idle) == []

    killed = farmer_dir.parent / "killed" / ".farmer"
    s = State(killed)
    s.prepare()
    s._making.close()  # as a farmer killed now leaves it
    assert state_files(killed) == ["state.db.new"]
    s = State(killed)
    assert s.traces() == {}
    s.prepare()
    s.save([trace("out/c")], [], [], {})
    s.close()
    assert state_files(killed) == ["state.db"] and set(State(killed).traces()) == {"out/c"}


def test_the_first_batch_makes_state_db_whole_or_not_at_all(farmer_dir):
    """state.db is made under another name and renamed once its first batch is committed:
    a farmer killed while writing it leaves no state.db, only a file the next one replaces."""
    farmer_dir.mkdir()
    (farmer_dir / "state.db.new").write_bytes(b"half a database" * 100)
    s = State(farmer_dir)
    s.set_declared("/p/Farmfile", {}, {"out/a": "out/a"}, "k1", [])
    s.save([trace("out/a")], [], [sample("out/a", 1.0)], {"src/a": ((1, 2, 3, 4), "d")})
    assert state_files(farmer_dir) == ["state.db"]
    assert journal_mode(farmer_dir) == "delete"
    s.save([trace("out/b")], [], [], {})  # the next batch connects again
    s.close()
    assert state_files(farmer_dir) == ["state.db"]
    s = State(farmer_dir)
    assert sorted(s.traces()) == ["out/a", "out/b"] and s.declared("/p/Farmfile") == {"out/a": "out/a"}
    assert set(s.history()) == {"out/a"} and set(s.stat_cache()) == {"src/a"}
    s.close()


def test_an_existing_database_records_declared_outputs_at_once(farmer_dir):
    s = State(farmer_dir)
    s.save([trace("x")], [], [], {})
    s.set_declared("/p/Farmfile", {}, {"out/a": "out/a"}, "k1", ["x"])
    db = sqlite3.connect(farmer_dir / "state.db")
    assert db.execute("SELECT path FROM declared").fetchall() == [("out/a",)]
    assert db.execute("SELECT count(*) FROM trace").fetchone() == (0,)
    db.close()
    s.close()


def test_traces_round_trip(farmer_dir):
    s = State(farmer_dir)
    t1 = trace("build/a.o", world=None)
    t2 = trace("out/r.txt", action="other", world="wfp", discovered=[])
    s.save([t1, t2], [], [], {})
    s = reopen(s)
    got = s.traces()
    assert got == {"build/a.o": t1, "out/r.txt": t2}
    assert got["build/a.o"].inputs == [("src/a.c", "d1"), ("src/b c.h", "d2")]
    s.close()


def test_trace_replaced_by_newer(farmer_dir):
    s = State(farmer_dir)
    s.save([trace("x", action="old")], [], [], {})
    s.save([trace("x", action="new")], [], [], {})
    s = reopen(s)
    assert s.traces()["x"].action == "new"
    s.close()


def test_forget(farmer_dir):
    s = State(farmer_dir)
    s.save([trace("a"), trace("b")], [], [], {})
    s.save([], ["a", "never-there"], [], {})
    s = reopen(s)
    assert set(s.traces()) == {"b"}
    s.close()


def test_history_round_trip_oldest_first(farmer_dir):
    s = State(farmer_dir)
    samples = [sample("a", 3.0, 3.5), sample("a", 1.0, 1.5), sample("b", 2.0, 2.5, task="u")]
    s.save([], [], samples, {})
    s = reopen(s)
    h = s.history()
    assert [x.at for x in h["a"]] == [1.0, 3.0]
    assert [x.wall_s for x in h["a"]] == [1.5, 3.5]
    assert h["b"] == [sample("b", 2.0, 2.5, task="u")]
    s.close()


def test_history_keeps_newest_in_one_batch(farmer_dir):
    s = State(farmer_dir)
    n = HISTORY_KEEP + 4
    s.save([], [], [sample("a", float(t)) for t in range(1, n + 1)], {})
    s = reopen(s)
    assert [x.at for x in s.history()["a"]] == [float(t) for t in range(5, n + 1)]
    s.close()


def test_history_keeps_newest_over_many_builds(farmer_dir):
    s = State(farmer_dir)
    for t in range(1, 2 * HISTORY_KEEP + 1):
        s.save([], [], [sample("a", float(t)), sample("b", float(t) + 0.5)], {})
    s.save([], [], [sample("c", 1.0)], {})
    s = reopen(s)
    h = s.history()
    assert [x.at for x in h["a"]] == [float(t) for t in range(HISTORY_KEEP + 1, 2 * HISTORY_KEEP + 1)]
    assert len(h["b"]) == HISTORY_KEEP
    assert h["b"][-1].at == 2 * HISTORY_KEEP + 0.5
    assert len(h["c"]) == 1
    s.close()


def test_history_of_some_tasks_is_found_by_index(farmer_dir):
    """A build that runs a few computations reads the history of their tasks only, through
    an index, not by scanning every measured run of the project (10 000 rows at 10k steps,
    also in a state.db made before the index existed)."""
    s = State(farmer_dir)
    s.save([], [], [sample("first", 0.0)], {})
    s = reopen(s)
    s.db.execute("DROP INDEX history_task")  # as an older farmer left it
    s.save([], [], [sample(f"x{n}", float(n), task=f"t{n % 50}") for n in range(500)], {})
    s = reopen(s)
    h = s.history({"t7", "t8"})
    assert sorted(h) == sorted(f"x{n}" for n in range(500) if n % 50 in (7, 8))
    plan = " ".join(str(row) for row in s.db.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM history WHERE task IN (?, ?) ORDER BY at", ("t7", "t8")))
    assert "history_task" in plan, plan
    s.close()


def test_history_of_other_ids_untouched_by_trimming(farmer_dir):
    s = State(farmer_dir)
    s.save([], [], [sample("old", float(t)) for t in range(1, 4)], {})
    s.save([], [], [sample("new", float(t)) for t in range(100, 100 + HISTORY_KEEP + 3)], {})
    s = reopen(s)
    assert len(s.history()["old"]) == 3
    assert len(s.history()["new"]) == HISTORY_KEEP
    s.close()


def test_stat_cache_round_trip_and_delete(farmer_dir):
    s = State(farmer_dir)
    s.save([], [], [], {"a.c": ((111, 5, 42, 222), "da"), "b.c": ((1, 2, 3, 4), "db")})
    s.save([], [], [], {"b.c": None, "c.c": ((9, 9, 9, 9), "dc"), "a.c": ((112, 6, 42, 223), "da2")})
    s = reopen(s)
    assert s.stat_cache() == {"a.c": ((112, 6, 42, 223), "da2"), "c.c": ((9, 9, 9, 9), "dc")}
    s.close()


def test_racy_stat_key_round_trips(farmer_dir):
    s = State(farmer_dir)
    s.save([], [], [], {"r": ((-1, -1, -1, -1), "d")})
    s = reopen(s)
    assert s.stat_cache() == {"r": ((-1, -1, -1, -1), "d")}
    s.close()


def test_saving_nothing_writes_nothing(farmer_dir):
    """An empty batch makes no database where there is none, and leaves one as it was."""
    s = State(farmer_dir)
    s.save([], [], [], {})
    s.close()
    assert not (farmer_dir / "state.db").exists()
    s = State(farmer_dir)
    s.save([trace("x")], [], [sample("x", 1.0)], {})
    s = reopen(s)
    s.save([], [], [], {})
    s = reopen(s)
    assert set(s.traces()) == {"x"} and [h.wall_s for h in s.history()["x"]] == [1.0]
    s.close()


def test_failed_batch_is_rolled_back(farmer_dir):
    s = State(farmer_dir)
    s.save([trace("keep")], [], [], {})
    bad = Sample("x", "t", 1.0, None, None, None, None)  # wall_s NOT NULL
    with pytest.raises(sqlite3.IntegrityError):
        s.save([trace("lost")], [], [bad], {})
    assert set(s.traces()) == {"keep"}
    s.save([trace("later")], [], [], {})  # the connection is usable again
    assert set(s.traces()) == {"keep", "later"}
    s.close()


def test_corrupt_db_is_moved_aside_with_warning(farmer_dir):
    farmer_dir.mkdir()
    garbage = b"this is not sqlite at all \x00\xff" * 200
    (farmer_dir / "state.db").write_bytes(garbage)
    s = State(farmer_dir)
    assert len(s.warnings) == 1
    assert "state.db" in s.warnings[0]
    aside = [p for p in farmer_dir.iterdir() if p.name.startswith("state.db.corrupt")]
    assert len(aside) == 1 and aside[0].read_bytes() == garbage
    # the fresh db works
    s.save([trace("a")], [], [sample("a", 1.0)], {"a": ((1, 2, 3, 4), "d")})
    s = reopen(s)
    assert set(s.traces()) == {"a"}
    assert s.warnings == []
    s.close()


def test_other_schema_version_is_moved_aside(farmer_dir):
    s = State(farmer_dir)
    s.save([trace("a")], [], [], {})
    s = reopen(s)
    s.db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION + 1),))
    s = reopen(s)
    assert len(s.warnings) == 1 and "schema" in s.warnings[0]
    assert any(p.name.startswith("state.db.corrupt") for p in farmer_dir.iterdir())
    assert s.traces() == {}
    row = s.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    assert row == (str(SCHEMA_VERSION),)
    s.close()


def test_db_with_unexpected_tables_is_moved_aside(farmer_dir):
    farmer_dir.mkdir()
    db = sqlite3.connect(farmer_dir / "state.db")
    db.execute("CREATE TABLE trace (something_else TEXT)")
    db.commit()
    db.close()
    s = State(farmer_dir)
    # Either it is usable or it was moved aside; it must never crash a build.
    s.save([trace("a")], [], [sample("a", 1.0)], {"a": ((1, 2, 3, 4), "d")})
    s = reopen(s)
    assert set(s.traces()) == {"a"}
    s.close()


def test_removing_farmer_dir_is_safe(farmer_dir):
    import shutil

    s = State(farmer_dir)
    s.save([trace("a")], [], [], {})
    s.close()
    shutil.rmtree(farmer_dir)
    s = State(farmer_dir)
    assert s.traces() == {} and s.warnings == []
    s.close()


# -- read-only state (plan, -n, query) ----------------------------------------------------------


def test_readonly_without_db_creates_nothing(farmer_dir):
    s = State(farmer_dir, readonly=True)
    assert s.traces() == {} and s.history() == {} and s.stat_cache() == {}
    s.close()
    assert not farmer_dir.exists()


def test_readonly_reads_existing_state_and_leaves_file_alone(farmer_dir):
    s = State(farmer_dir)
    s.save([trace("a")], [], [sample("a", 1.0)], {"a": ((1, 2, 3, 4), "d")})
    s.close()
    before = {p.name: p.read_bytes() for p in farmer_dir.iterdir()}
    r = State(farmer_dir, readonly=True)
    assert set(r.traces()) == {"a"}
    assert r.stat_cache() == {"a": ((1, 2, 3, 4), "d")}
    assert [x.at for x in r.history()["a"]] == [1.0]
    r.close()
    assert {p.name: p.read_bytes() for p in farmer_dir.iterdir()} == before


def test_readonly_corrupt_db_warns_and_is_not_moved(farmer_dir):
    farmer_dir.mkdir()
    (farmer_dir / "state.db").write_bytes(b"garbage" * 100)
    r = State(farmer_dir, readonly=True)
    assert len(r.warnings) == 1
    assert r.traces() == {}
    r.close()
    assert state_files(farmer_dir) == ["state.db"]
    assert (farmer_dir / "state.db").read_bytes() == b"garbage" * 100


def test_readonly_other_schema_plans_from_scratch(farmer_dir):
    s = State(farmer_dir)
    s.save([trace("a")], [], [], {})
    s = reopen(s)
    s.db.execute("UPDATE meta SET value='99' WHERE key='schema'")
    s.close()
    r = State(farmer_dir, readonly=True)
    assert r.traces() == {}
    r.close()
    assert not any(p.name.startswith("state.db.corrupt") for p in farmer_dir.iterdir())


def journal_mode(farmer_dir) -> str:
    db = sqlite3.connect(farmer_dir / "state.db")
    try:
        return db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()


def leftovers(farmer_dir) -> list[str]:
    return [name for name in state_files(farmer_dir) if name != "state.db"]


@pytest.mark.parametrize("batches", [0, 1, 2, 3, 5])
def test_every_batch_is_kept_and_the_file_is_left_self_contained(farmer_dir, batches):
    """However many batches a build writes (none: the stale check of a cached graph; one or
    two: a small build, in the rollback journal; more: in WAL, switched back at the end),
    they are all there afterwards and the file needs no -wal or -shm."""
    s = State(farmer_dir)
    s.save([], [], [sample("made", 0.0)], {})  # the file exists (a first write makes it)
    s.close()
    s = State(farmer_dir)
    for k in range(batches):
        s.save([trace(f"out/{k}")], [], [sample(f"out/{k}", 1.0)], {f"src/{k}": ((1, 2, 3, 4), "d")})
    assert s.wal == (batches > 2)
    s.close()
    assert journal_mode(farmer_dir) == "delete"
    assert leftovers(farmer_dir) == []
    s = State(farmer_dir)
    assert sorted(s.traces()) == [f"out/{k}" for k in range(batches)]
    assert sorted(s.stat_cache()) == [f"src/{k}" for k in range(batches)]
    s.close()


def test_a_file_left_in_wal_by_a_dead_farmer_is_closed_in_delete_mode(tmp_path, farmer_dir):
    """A farmer killed mid-build leaves the file in WAL mode, with its -wal; the next one to
    open it for writing reads what it holds and leaves it self-contained, even if it writes
    nothing."""
    s = State(farmer_dir)
    for name in ("out/a", "out/b", "out/c"):  # WAL from the third batch
        s.save([trace(name)], [], [], {})
    dead = tmp_path / "dead" / ".farmer"  # the files as a SIGKILL leaves them
    dead.mkdir(parents=True)
    for name in ("state.db", "state.db-wal"):
        (dead / name).write_bytes((farmer_dir / name).read_bytes())
    s.close()
    assert (dead / "state.db").read_bytes()[18:20] == b"\x02\x02"  # the header's "WAL"
    assert (dead / "state.db-wal").stat().st_size > 0
    again = State(dead)
    assert sorted(again.traces()) == ["out/a", "out/b", "out/c"]
    again.close()
    assert journal_mode(dead) == "delete"
    assert leftovers(dead) == []


def test_a_state_db_error_is_one_line_without_the_sqlite3_package():
    """state.py opens state.db through _sqlite3 (the C module; start-up rule): a build that
    never imported the `sqlite3` package still turns SQLite's errors into one line and exit 2."""
    import os
    import subprocess
    import sys

    import xxhash
    from conftest import REPO, farmer_env

    code = ("import sys\n"
            "from farmer.cli import exit as ending\n""from farmer.store import state\n"
            "def failing():\n"
            "    raise state.sqlite3.OperationalError('disk I/O error')\n"
            "print(ending.guarded(failing), 'sqlite3' in sys.modules)\n")
    path = os.pathsep.join([str(REPO), os.path.dirname(os.path.dirname(xxhash.__file__))])
    cp = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                        env=farmer_env({"PYTHONPATH": path}), timeout=60)
    assert cp.stdout == "2 False\n", cp
    assert cp.stderr == ("farmer: error: .farmer/state.db: disk I/O error; check the disk's free "
                         "space and permissions\n")


_SQLITE_WITHOUT_FUNCTOOLS = """\
import sys
from farmer.store import state
{setup}
s = state.State(sys.argv[1])
s.save([state.Trace("out/a", "act", None, [("a.c", "d1")], [], [("out/a", "d2")])], [], [], {{}})
s.close()
had = "functools" in sys.modules, "collections" in sys.modules
again = state.State(sys.argv[1])
for _ in range(300):  # the statement cache: the same queries again and again
    assert list(again.traces()) == ["out/a"]
again.close()
import functools
print(had, functools.partial.__name__, functools.lru_cache(maxsize=4)(len)("a"))
"""


@pytest.mark.parametrize("setup, had", [
    ("", "(False, False)"),  # the stand-in: neither is imported for SQLite
    ("import functools", "(True, True)"),  # imported already: nothing stands in
    ("state._FUNCTOOLS_STAND_IN = {}", "(True, True)"),  # _sqlite3 asks for more: the ordinary import
])
def test_state_db_works_without_importing_functools(tmp_path, setup, had):
    """state.py initialises _sqlite3 with a stand-in for functools (its lru_cache only), then
    takes it out of sys.modules: state.db is written and read (its statement cache used),
    and a later `import functools` is the real one."""
    import os
    import subprocess
    import sys

    import xxhash
    from conftest import REPO, farmer_env

    path = os.pathsep.join([str(REPO), os.path.dirname(os.path.dirname(xxhash.__file__))])
    cp = subprocess.run([sys.executable, "-S", "-c", _SQLITE_WITHOUT_FUNCTOOLS.format(setup=setup),
                         str(tmp_path / ".farmer")], capture_output=True, text=True,
                        env=farmer_env({"PYTHONPATH": path}), timeout=60)  # -S: no site module's imports
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == f"{had} partial 1\n"
