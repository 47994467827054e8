"""Reliability: crashes (issue 5). `kill -9` of farmer at random points of a build, and
state.db corrupt or foreign.

The kill test runs a graph of 26 quick computations whose commands write their outputs in
two steps (a partial first write, a short sleep, then the real content), over sources that a
seeded random *edit sequence* changes between builds. At each kill point farmer is started,
killed with SIGKILL after a delay picked across the build's duration (stratified, so early,
middle and late points all occur), and the commands it left behind are either killed too (as
in a power cut) or left to finish (as after a crash of farmer alone). Then:

* state.db passes `PRAGMA integrity_check`, and last-build.json is absent or whole JSON;
* sometimes the recovery build is killed as well;
* the next complete build exits 0 and every output equals what a clean build makes, computed
  independently here in Python (so nothing half-written or stale was taken as up to date);
* at the end a further build runs nothing.

After each recovery build a further build must run nothing: a killed build must leave no
trace or proof entry that makes the one after the recovery work again. The orphans of a
farmer killed alone race the recovery build, which kills what is left of them first.

Default: one seed with 3 kill points. `-m slow`: 4 seeds with 50 kill points each (200;
FARMER_KILL_POINTS sets the number per seed).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import HarnessCounts, processes_in, start_farmer, wait_no_process_under
from helpers import CRASH_FARMFILE, crash_expected_outputs, read_outputs, state_integrity

N_SOURCES = 8
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
KILL_POINTS_SLOW = int(os.environ.get("FARMER_KILL_POINTS", "50"))  # per seed: 4 x 50 = 200


def kill_at(root: Path, delay: float, leave_orphans: bool) -> None:
    """Start a build and SIGKILL farmer after `delay` seconds; then kill what it started
    (a power cut) or let it finish (farmer alone crashed)."""
    p = start_farmer(root, "build", "-j", "3", stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
    finally:
        p.wait(timeout=30)
        p.stderr.close()
    if leave_orphans:
        pass  # they race the recovery build, which kills what is left of them before it plans
    else:
        for pid in processes_in(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert wait_no_process_under(root, 5) == []


def edit_sources(rng: random.Random, root: Path, sources: dict[str, str], history: list[dict]) -> int:
    """One step of the edit sequence: change a line, add one, revert a file, or touch one;
    returns how many sources it edited."""
    edits = 0
    for _ in range(rng.randint(0, 3)):
        name = rng.choice(sorted(sources))
        lines = sources[name].splitlines(keepends=True)
        op = rng.choice(["change", "change", "append", "revert", "touch", "delete-output"])
        if op == "change":
            lines[rng.randrange(len(lines))] = rng.choice(WORDS) + "\n"
            sources[name] = "".join(lines)
        elif op == "append":
            sources[name] = "".join(lines) + rng.choice(WORDS) + "\n"
        elif op == "revert" and history:
            sources[name] = rng.choice(history)[name]
        elif op == "touch":
            p = root / "src" / name
            st = p.stat()
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
            continue
        elif op == "delete-output":
            victims = sorted(read_outputs(root))
            if victims:
                os.unlink(root / rng.choice(victims))
            continue
        (root / "src" / name).write_text(sources[name])
        edits += 1
    history.append(dict(sources))
    return edits


def run_kill_points(project, seed: int, points: int, counts: HarnessCounts) -> None:
    rng = random.Random(seed)
    root = project.root
    sources = {f"s{i}.txt": "".join(rng.choice(WORDS) + "\n" for _ in range(rng.randint(1, 4)))
               for i in range(N_SOURCES)}
    for name, text in sources.items():
        project.write(f"src/{name}", text, dedent=False)
    project.farmfile(CRASH_FARMFILE)
    # The duration of a clean build, to spread the kill points across a build.
    r = project.build("-j", "3")
    assert r.returncode == 0, r
    assert read_outputs(root) == crash_expected_outputs(sources)
    span = r.elapsed
    history = [dict(sources)]
    # A fresh start half of the time: kill points fall into clean builds too.
    for k in range(points):
        if rng.random() < 0.3:
            project.farmer("clean")
        counts.add("crash", "edits", edit_sources(rng, root, sources, history))
        delay = span * (k + rng.random()) / points * 1.2
        kill_at(root, delay, leave_orphans=bool(k % 2))
        counts.add("crash", "kill points")
        if (root / ".farmer" / "state.db").exists():
            assert state_integrity(root) == "ok", f"state.db corrupt after kill point {k} ({delay:.2f} s)"
        lb = root / ".farmer" / "last-build.json"
        if lb.exists():
            json.loads(lb.read_text())  # never half-written
        if rng.random() < 0.3:  # the recovery build is killed too
            kill_at(root, rng.uniform(0.05, span), leave_orphans=False)
            counts.add("crash", "killed recoveries")
        r = project.build("-j", "3")
        assert r.returncode == 0, (k, delay, r)
        assert wait_no_process_under(root, 5) == [], "an orphan outlived the recovery build"
        again = project.build("-j", "3")  # the recovery left nothing to do (issue 11)
        assert again.returncode == 0 and again.summary()["ran"] == 0, (k, delay, r, again)
        got, want = read_outputs(root), crash_expected_outputs(sources)
        assert got == want, (
            f"after kill point {k} ({delay:.2f} s into a build): outputs differ from a clean build "
            f"{ {p: (got.get(p), want.get(p)) for p in set(got) | set(want) if got.get(p) != want.get(p)} }")
        assert state_integrity(root) == "ok"
    r = project.build("-j", "3")
    assert r.returncode == 0 and r.summary()["ran"] == 0, r


def test_kill_9_at_random_points(project, harness_counts):
    run_kill_points(project, seed=5, points=3, counts=harness_counts)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 23, 42, 77])
def test_kill_9_at_random_points_many(project, seed, harness_counts):
    run_kill_points(project, seed=seed, points=KILL_POINTS_SLOW, counts=harness_counts)


def test_kill_9_leaves_no_stale_lock(project):
    """The lock is an flock: the kernel drops it with its holder."""
    sleep = project.unique_sleep(30)
    project.farmfile(
        f"""
        [task.s]
        outputs = ["out/s.txt"]
        cmd = "touch started; {sleep}; echo s > {{outputs}}"

        [task.q]
        outputs = ["out/q.txt"]
        cmd = "echo q > {{outputs}}"
        """
    )
    p = project.popen("build", "-j", "2")
    assert project.wait_for("started")
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=10)
    assert project.read(".farmer/lock").strip() == str(p.pid)  # the stale holder's pid remains
    t0 = time.monotonic()
    r = project.build("q")
    assert r.returncode == 0, r
    assert time.monotonic() - t0 < 10
    project.cleanup()


# ------------------------------------------------------------- corrupt state --

def _built_project(project, n: int = 12):
    """`n` computations with big traces (each reads 20 inputs with long names), so that the
    trace table spans many pages with few commands to run."""
    for i in range(20):
        project.write(f"in/{'long-name-' * 8}{i}.txt", f"{i}\n")
    project.write("in.txt", "x\n")
    values = ", ".join(f'"{i}"' for i in range(n))
    project.farmfile(
        f"""
        [task.many]
        foreach = {{n = [{values}]}}
        inputs = ["in.txt", "in/*.txt"]
        outputs = ["out/{{n}}.txt"]
        cmd = "cp in.txt {{outputs}}"
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    assert r.summary()["ran"] == n
    return n


def _garbage(db: Path) -> None:
    db.write_bytes(os.urandom(8192))


def _foreign(db: Path) -> None:
    db.unlink()
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE users (name TEXT, age INTEGER); INSERT INTO users VALUES ('ann', 3);")
    con.close()


def _old_schema(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value='1' WHERE key='schema'")
    con.commit()
    con.close()


def _pages_smashed(db: Path) -> None:
    """Garbage over every page but the first: the header reads fine, the tables do not."""
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    rng = random.Random(7)
    for start in range(page, len(data), page):
        data[start:start + page] = bytes(rng.randrange(256) for _ in range(min(page, len(data) - start)))
    db.write_bytes(bytes(data))


def _pages_of(db: Path, name: str) -> list[int]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute(
            "SELECT pageno FROM dbstat WHERE name=? AND pagetype='leaf' ORDER BY pageno", (name,))]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table to find the pages to damage")
    finally:
        con.close()


def _smash(db: Path, pages: list[int]) -> None:
    data = bytearray(db.read_bytes())
    size = int.from_bytes(data[16:18], "big") or 65536
    for n in pages:
        data[(n - 1) * size:n * size] = b"\xa5" * size
    db.write_bytes(bytes(data))


def _trace_pages_smashed(db: Path) -> None:
    """Damage found only when all traces are read, after the database opened fine."""
    leaves = _pages_of(db, "trace")
    assert len(leaves) >= 3, leaves
    _smash(db, leaves[1:])


def _trace_index_smashed(db: Path) -> None:
    """Damage found only when traces are written (the primary key's index)."""
    leaves = _pages_of(db, "sqlite_autoindex_trace_1")
    assert leaves
    _smash(db, leaves)


def _truncated(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2 + 100])


def _a_directory(db: Path) -> None:
    db.unlink()
    db.mkdir()
    (db / "x").write_text("x")


@pytest.mark.parametrize("damage", [_garbage, _foreign, _old_schema, _pages_smashed, _trace_pages_smashed,
                                    _trace_index_smashed, _truncated, _a_directory],
                         ids=["garbage", "foreign-sqlite", "old-schema", "pages-smashed", "trace-pages-smashed",
                              "trace-index-smashed", "truncated", "directory"])
def test_corrupt_or_foreign_state_db_is_moved_aside(project, damage):
    n = _built_project(project)
    db = project.path(".farmer/state.db")
    damage(db)
    project.write("in.txt", "y\n")  # everything runs: traces are written, not only read
    r = project.build()
    assert r.returncode == 0, r
    assert "Traceback" not in r.output
    warnings = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("farmer: warning: ") and \
        "moved it to state.db.corrupt-" in warnings[0], r
    assert [p for p in os.listdir(project.path(".farmer")) if p.startswith("state.db.corrupt-")]
    # from scratch: everything runs again, and comes out right
    assert r.summary()["ran"] == n, r
    assert all(project.read(f"out/{i}.txt") == "y\n" for i in range(n))
    assert state_integrity(project.root) == "ok"
    r = project.build()
    assert r.returncode == 0 and r.summary()["ran"] == 0 and r.stderr == "", r


def test_garbage_wal_file_is_harmless(project):
    """A -wal file of garbage (a torn write of the log itself) is ignored by SQLite."""
    n = _built_project(project, 10)
    project.path(".farmer/state.db-wal").write_bytes(os.urandom(10000))
    r = project.build()
    assert r.returncode == 0, r
    assert "Traceback" not in r.output
    assert r.summary()["ran"] == 0, r
    assert state_integrity(project.root) == "ok"


def test_garbage_graph_cache_is_ignored(project):
    n = _built_project(project, 10)
    for name in os.listdir(project.path(".farmer")):
        if name.startswith("graph"):
            project.path(f".farmer/{name}").write_bytes(os.urandom(3000))
    project.path(".farmer/last-build.json").write_bytes(b"{\"half")
    r = project.build()
    assert r.returncode == 0 and r.summary()["ran"] == 0, r
    assert r.stderr == "", r
    project.remove("out/3.txt")
    r = project.build()
    assert r.returncode == 0 and r.summary()["ran"] == 1, r


def test_plan_after_a_crash_reads_the_state(project):
    """A farmer killed mid-build leaves state.db in WAL mode, with -wal and -shm files:
    read-only commands still read it (and write nothing)."""
    sleep = project.unique_sleep(30)
    project.write("in.txt", "x\n")
    project.farmfile(
        f"""
        [task.a]
        inputs = ["in.txt"]
        outputs = ["out/a.txt"]
        cmd = "cp {{inputs}} {{outputs}}"

        [task.b]
        inputs = ["out/a.txt"]
        outputs = ["out/b.txt"]
        cmd = "touch started; {sleep}"
        """
    )
    p = project.popen("build", "-j", "1")
    assert project.wait_for("started")
    time.sleep(1.2)  # past the first batch of traces
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=10)
    project.cleanup()
    r = project.farmer("plan")
    assert r.returncode == 0, r
    assert "Traceback" not in r.output
    assert "out/b.txt" in r.stdout
    r = project.build("-n")
    assert r.returncode == 0 and "Traceback" not in r.output, r
