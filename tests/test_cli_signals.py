"""End-to-end: the project lock (exit 3) and interrupts (SIGINT 130, SIGTERM 143, SIGHUP 129)."""

import fcntl
import os
import re
import signal
import subprocess
import time

import pytest
from conftest import pids_matching, processes_in, wait_no_process, wait_no_process_in


def slow_farmfile(project, sleep, extra=""):
    project.farmfile(
        f"""
        [task.quick]
        outputs = ["out/quick.txt"]
        cmd = "echo quick > {{outputs}}"

        [task.slow]
        inputs = ["out/quick.txt"]
        outputs = ["out/slow.txt"]
        cmd = "echo partial > {{outputs}} && touch started && if [ -e block ]; then {sleep}; fi && echo slow > {{outputs}}"
        {extra}
        """
    )


def start_and_wait(project, *args):
    project.write("block", "")
    p = project.popen("build", *args)
    if not project.wait_for("started", timeout=20, proc=p):
        p.kill()
        out, err = p.communicate(timeout=10)
        pytest.fail(f"build never started the slow task; rc={p.returncode}\n{out}\n{err}")
    return p


# ------------------------------------------------------------------- lock --

def test_lock_held_by_another_process(project):
    project.farmfile(
        """
        [task.a]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}"
        """
    )
    (project.root / ".farmer").mkdir()
    fd = os.open(project.root / ".farmer" / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        r = project.build()
        assert r.returncode == 3, r
        assert str(os.getpid()) in r.stderr, r
        assert "Traceback" not in r.stderr
        assert not project.exists("out/a.txt")
        # written only by a build that got the lock
        assert not project.exists(".farmer/last-build.json")
    finally:
        os.close(fd)
    r = project.build()
    assert r.returncode == 0, r


def test_lock_held_by_running_build(project):
    sleep = project.unique_sleep(30)
    slow_farmfile(project, sleep)
    first = start_and_wait(project)
    try:
        r = project.build()
        assert r.returncode == 3, r
        assert str(first.pid) in r.stderr, r
        assert "Traceback" not in r.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=10)
    assert wait_no_process(sleep) == []


# ------------------------------------------------------------- interrupts --

@pytest.mark.parametrize(
    "sig,code,group",
    [(signal.SIGINT, 130, False), (signal.SIGINT, 130, True), (signal.SIGTERM, 143, False),
     (signal.SIGHUP, 129, False)],
    ids=["SIGINT", "SIGINT-to-group", "SIGTERM", "SIGHUP"],
)
def test_interrupt_stops_build(project, sig, code, group):
    sleep = project.unique_sleep(30)
    slow_farmfile(project, sleep)
    p = start_and_wait(project, "-j", "2")
    assert pids_matching(sleep), "the sleep should be running"
    t0 = time.monotonic()
    if group:  # like ^C on a terminal: the whole foreground process group
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("farmer did not stop within 10 s of the signal")
    elapsed = time.monotonic() - t0
    assert p.returncode == code, (p.returncode, out, err)
    assert elapsed < 3, elapsed
    assert "Traceback" not in err, err
    assert wait_no_process(sleep, timeout=2) == [], "a child of the build survived the interrupt"
    assert wait_no_process_in(project) == [], "a process started by the build survived the interrupt"
    lb = project.last_build()
    assert lb["status"] == "interrupted"
    t = project.tasks()
    assert t["out/slow.txt"]["status"] == "failed"
    assert t["out/slow.txt"]["reason"] == "interrupted"
    assert t["out/quick.txt"]["status"] == "ran"
    assert not project.exists("out/slow.txt")  # outputs of the killed computation are deleted
    last = [l for l in out.splitlines() if l.strip()][-1]
    assert last.startswith("farmer: INTERRUPTED ") and re.search(r"\binterrupted\D{0,3}1\b", last), out
    assert re.search(r"\bfailed\D{0,3}0\b", last), out  # killed, not failed on its own


def test_interrupt_keeps_traces_of_finished_work(project):
    sleep = project.unique_sleep(30)
    slow_farmfile(project, sleep)
    p = start_and_wait(project)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=10)
    assert p.returncode == 130
    project.remove("block")
    r = project.build()
    assert r.returncode == 0, r
    # what finished is up to date; the interrupted computation has no trace and runs again
    assert project.statuses() == {"out/quick.txt": "up-to-date", "out/slow.txt": "ran"}
    assert project.read("out/slow.txt") == "slow\n"


def test_interrupt_skips_not_started_work(project):
    sleep = project.unique_sleep(30)
    slow_farmfile(
        project,
        sleep,
        extra="""
        [task.later]
        inputs = ["out/slow.txt"]
        outputs = ["out/later.txt"]
        cmd = "cp {inputs} {outputs}"
        """,
    )
    p = start_and_wait(project)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 130, (out, err)
    t = project.tasks()
    assert t["out/later.txt"]["status"] == "skipped"
    assert t["out/later.txt"]["start_s"] is None
    assert wait_no_process(sleep) == []


def test_interrupt_during_world_task(project):
    sleep_s = project.unique_sleep(30).split()[1]
    project.farmfile(
        f"""
        [world.w]
        setup = ["import os, time", "open('world.pid', 'w').write(str(os.getpid()))"]

        [task.wt]
        world = "w"
        outputs = ["out/wt.txt"]
        python = '''-c "open('started', 'w').close(); time.sleep({sleep_s})"'''
        """
    )
    p = project.popen("build")
    try:
        assert project.wait_for("started", timeout=20, proc=p), "world task never started"
        world_pid = int(project.read("world.pid"))
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        assert p.returncode == 130, (out, err)
        assert "Traceback" not in err, err
        assert wait_no_process_in(project) == [], "a world process outlived the interrupted build"
        assert world_pid not in processes_in(project.root)
        assert project.tasks()["out/wt.txt"]["reason"] == "interrupted"
    finally:
        p.kill() if p.poll() is None else None



def test_killed_farmer_leaves_no_stale_lock(project):
    sleep = project.unique_sleep(30)
    slow_farmfile(project, sleep)
    p = start_and_wait(project)
    p.kill()  # SIGKILL: farmer cannot clean up; its `sleep` lives on as an orphan
    p.communicate(timeout=10)
    project.remove("block")
    project.remove("started")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/slow.txt") == "slow\n"


def test_killed_farmer_with_a_world_leaves_no_stale_lock(project):
    project.farmfile(
        """
        [world.w]
        setup = ["import os, time"]

        [task.wt]
        world = "w"
        outputs = ["out/wt.txt"]
        python = "wait_block.py"
        """
    )
    project.write(
        "wait_block.py",
        """\
        if not os.path.exists("started"):  # the first run blocks, later ones do not
            open("started", "w").close()
            while os.path.exists("block"):
                time.sleep(0.05)
        open("out/wt.txt", "w").write("done")
        """,
    )
    project.write("block", "")
    p = project.popen("build")
    assert project.wait_for("started", timeout=20, proc=p), "world task never started"
    p.kill()
    p.communicate(timeout=10)
    try:
        r = project.build(timeout=30)  # the orphaned world may still run: it must not hold the lock
        assert r.returncode == 0, r
        assert project.read("out/wt.txt") == "done"
    finally:
        project.remove("block")


def test_the_summary_counts_interrupted_computations_apart_from_failed_ones(project):
    """Issue 34: one failed on its own, one killed by the interrupt, one never started."""
    sleep = project.unique_sleep(30)
    slow_farmfile(project, sleep, extra="""
        [task.bad]
        outputs = ["out/bad.txt"]
        cmd = "echo broken >&2; exit 3"

        [task.after]
        inputs = ["out/slow.txt"]
        outputs = ["out/after.txt"]
        cmd = "cp {inputs} {outputs}"
        """)
    p = start_and_wait(project, "-k", "-j", "3")
    assert project.wait_for(".farmer/logs/out%2Fbad.txt.log", proc=p), "bad never failed"
    time.sleep(0.3)  # its failure settled
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 130, (out, err)
    last = [l for l in out.splitlines() if l.strip()][-1]
    assert re.fullmatch(r"farmer: INTERRUPTED ran 1, up to date 0, cached 0, failed 1, interrupted 1, "
                        r"skipped 1 in \d+\.\d\d s; critical path \d+\.\d\d s", last), out
    t = project.tasks()  # last-build.json as before: a killed computation is failed, interrupted
    assert (t["out/slow.txt"]["status"], t["out/slow.txt"]["reason"]) == ("failed", "interrupted")
    assert (t["out/bad.txt"]["status"], t["out/bad.txt"]["reason"]) == ("failed", "exit 3")
    assert project.last_build()["status"] == "interrupted"
