"""End-to-end: worlds that fail (SPEC §1 "Worlds", issue 4 "Faults"): a world that dies is
restarted once for its running and waiting tasks, then they fail naming it; a setup that
raises fails the world's tasks and its descendants' with the traceback; garbage on a FIFO
is an error, never a hang; an interrupt leaves no process and no FIFO behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

import pytest
from conftest import pids_matching, wait_no_process, wait_no_process_in

# Kills the world from a fork-job (its parent), or from the execute-job (itself).
KILL_WORLD = "os.kill(os.getppid() if os.getpid() != WORLD else os.getpid(), 9)"


def test_task_that_kills_its_world_is_retried_once_then_fails(project):
    project.farmfile(
        f"""
        [world.doomed]
        setup = ["import os", "WORLD = os.getpid()", "open('setups.txt', 'a').write('s\\\\n')"]

        [world.other]
        setup = ["X = 1"]

        [task.killer]
        world = "doomed"
        outputs = ["out/killer.txt"]
        python = '''-c "open('attempts.txt', 'a').write('a\\\\n'); {KILL_WORLD}"'''

        [task.bystander]
        world = "doomed"
        outputs = ["out/bystander.txt"]
        python = '''-c "import time; time.sleep(1); open('out/bystander.txt', 'w').write('ok')"'''

        [task.fine]
        world = "other"
        outputs = ["out/fine.txt"]
        python = '''-c "open('out/fine.txt', 'w').write('ok')"'''
        """
    )
    r = project.build("-k")
    assert r.returncode == 1, r
    assert project.read("attempts.txt") == "a\na\n"  # the first run and one retry
    assert project.read("setups.txt") == "s\ns\n"  # on a restarted world
    t = project.tasks()["out/killer.txt"]
    assert (t["status"], t["reason"]) == ("failed", "world doomed died (signal 9)")
    assert "FAILED: killer out/killer.txt (world doomed died (signal 9))" in r.stdout
    log = project.read(".farmer/logs/out%2Fkiller.txt.log")
    assert "world doomed died" in log and "restarted world" in log
    # Running and waiting tasks of the dead world share its fate: retried once, then failed.
    assert project.tasks()["out/bystander.txt"]["reason"] == "world doomed died (signal 9)"
    assert project.tasks()["out/fine.txt"]["status"] == "ran"  # -k: the rest finishes


def test_execute_job_that_ends_its_process_ends_like_a_process(project):
    """The last future runs in the world process itself: a signal or os._exit there ends
    the task as it would end a fresh python3 (and as it ends a fork-job), not as a crash
    of the world."""
    project.farmfile(
        """
        [world.w]
        setup = ["import os", "open('setups.txt', 'a').write('s\\\\n')"]

        [task.only]
        world = "w"
        outputs = ["out/only.txt"]
        python = '''-c "os.kill(os.getpid(), 9)"'''
        """
    )
    r = project.build()
    assert r.returncode == 1, r
    assert project.tasks()["out/only.txt"]["reason"] == "signal 9"
    assert project.read("setups.txt") == "s\n"


def test_world_killed_once_recovers_on_the_retry(project):
    project.farmfile(
        f"""
        [world.w]
        setup = ["import os", "WORLD = os.getpid()"]

        [task.t]
        foreach = {{i = ["1", "2", "3"]}}
        world = "w"
        outputs = ["out/{{i}}.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write('ok')" {{outputs}}'''

        [task.once]
        world = "w"
        cost = 30  # started first, so it runs as a fork-job while the others wait (as the
                   # world's last task, the execute-job, its death would be its own: no retry)
        outputs = ["out/once.txt"]
        python = '''-c "import os; first = not os.path.exists('killed'); open('killed', 'a').close(); first and {KILL_WORLD}; open('out/once.txt', 'w').write('ok')"'''
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    assert set(project.statuses().values()) == {"ran"}
    assert project.read("out/once.txt") == "ok"


def test_setup_that_dies_is_retried_once_then_its_tasks_fail(project):
    project.farmfile(
        """
        [world.dies]
        setup = ["import os", "open('setups.txt', 'a').write('s\\\\n')", "os._exit(3)"]

        [world.child]
        parent = "dies"
        setup = ["Y = 1"]

        [task.t]
        foreach = {i = ["1", "2", "3"]}
        world = "dies"
        outputs = ["out/{i}.txt"]
        python = '''-c "pass"'''

        [task.c]
        world = "child"
        outputs = ["out/c.txt"]
        python = '''-c "pass"'''

        [task.plain]
        outputs = ["out/plain.txt"]
        cmd = "echo plain > {outputs}"
        """
    )
    r = project.build("-k", "-j", "2")
    assert r.returncode == 1, r
    assert project.read("setups.txt") == "s\ns\n"  # started, restarted, then given up
    t = project.tasks()
    for i in "123":
        assert t[f"out/{i}.txt"]["reason"] == "world dies died (exit 3)"
    assert t["out/c.txt"]["reason"] == "world dies died (exit 3)"
    assert t["out/plain.txt"]["status"] == "ran"
    assert "world dies" in project.read(".farmer/logs/out%2F1.txt.log")


def test_setup_that_raises_fails_the_world_and_its_descendants(project):
    project.farmfile(
        """
        [world.bad]
        setup = ["import json", "def load():\\n    return json.loads('{not json')", "TABLE = load()"]

        [world.below]
        parent = "bad"
        setup = ["Y = 1"]

        [world.good]
        setup = ["Z = 1"]

        [task.t]
        foreach = {i = ["1", "2"]}
        world = "bad"
        outputs = ["out/{i}.txt"]
        python = '''-c "pass"'''

        [task.b]
        world = "below"
        outputs = ["out/b.txt"]
        python = '''-c "pass"'''

        [task.g]
        world = "good"
        outputs = ["out/g.txt"]
        python = '''-c "open('out/g.txt', 'w').write(str(Z))"'''
        """
    )
    r = project.build("-k")
    assert r.returncode == 1, r
    t = project.tasks()
    for cid in ("out/1.txt", "out/2.txt", "out/b.txt"):
        assert (t[cid]["status"], t[cid]["reason"]) == ("failed", "world bad setup failed")
        log = project.read(".farmer/logs/" + cid.replace("/", "%2F") + ".log")
        assert "json.decoder.JSONDecodeError" in log, log
        assert "<world bad setup line 3>" in log and "TABLE = load()" in log  # the failing line
    assert t["out/g.txt"]["status"] == "ran"
    assert "JSONDecodeError" in r.stdout  # shown with the failure, like a command's output
    # without -k the build stops, but with the same verdict for what ran
    r = project.build()
    assert r.returncode == 1, r


def test_garbage_on_a_fifo_is_an_error_not_a_hang(project):
    project.farmfile(
        """
        [world.noisy]
        setup = [
            "import os",
            "fds = [int(n) for n in os.listdir('/proc/self/fd') if os.path.realpath(f'/proc/self/fd/{n}').endswith('.out')]",
            "[os.write(fd, b'hello, I am not a frame') for fd in fds]",
        ]

        [task.t]
        world = "noisy"
        outputs = ["out/t.txt"]
        python = '''-c "pass"'''
        """
    )
    r = project.build(timeout=30)
    assert r.returncode == 1, r
    reason = project.tasks()["out/t.txt"]["reason"]
    assert reason.startswith("world noisy died (protocol error: not a farmer world frame"), reason


def _start_interruptible(project, setup_sleep: bool):
    """A build whose world tasks (or world setup) are busy when the test signals farmer."""
    marker = f"farmer-world-{uuid.uuid4().hex}"
    project.markers.append(marker)
    sleep = project.unique_sleep(30)
    setup = ["import os, subprocess, time", f"MARK = '{marker}'"]
    if setup_sleep:
        setup += ["open('started', 'w').close()", "time.sleep(30)"]
    project.farmfile(
        f"""
        [world.base]
        setup = {setup!r}

        [world.child]
        parent = "base"
        setup = ["CHILD = 1"]

        [task.busy]
        foreach = {{i = ["1", "2", "3"]}}
        world = "child"
        outputs = ["out/{{i}}.txt"]
        python = '''-c "import sys; open('started', 'w').close(); subprocess.run('{sleep}', shell=True)" {{outputs}}'''
        """
    )
    p = project.popen("build", "-j", "3")
    if not project.wait_for("started", timeout=20):
        p.kill()
        out, err = p.communicate(timeout=10)
        pytest.fail(f"the world tasks never started: {out}\n{err}")
    time.sleep(0.3)  # let the other forks get going too
    return p, marker, sleep


@pytest.mark.parametrize("in_setup", [False, True], ids=["tasks", "setup"])
def test_ctrl_c_during_world_tasks_leaves_nothing_behind(project, in_setup):
    p, marker, sleep = _start_interruptible(project, in_setup)
    assert pids_matching(marker), "the world should be running"
    fifo_dirs = {os.path.dirname(os.readlink(f"/proc/{pid}/fd/{n}"))
                 for pid in pids_matching(marker) for n in _fds(pid)
                 if "farmer-worlds-" in _link(pid, n)}
    assert fifo_dirs, "the world holds its FIFOs"
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("farmer did not stop within 10 s of SIGINT")
    assert p.returncode == 130, (out, err)
    assert "Traceback" not in err, err
    assert wait_no_process(marker, timeout=2) == [], "a world process survived the interrupt"
    assert wait_no_process(sleep, timeout=2) == [], "a process started by a world task survived"
    assert wait_no_process_in(project) == []
    assert not any(os.path.exists(d) for d in fifo_dirs), "the FIFO directory survived"
    lb = project.last_build()
    assert lb["status"] == "interrupted"
    if in_setup:  # the tasks waited for their world off the slots: never started
        assert {(t["status"], t["reason"]) for t in lb["tasks"]} == {("skipped", "build stopped")}
        assert [(w["name"], w["status"]) for w in lb["worlds"]] == [("base", "failed")]
    else:
        assert {t["reason"] for t in lb["tasks"]} == {"interrupted"}


def test_timeout_of_the_last_future_kills_its_world(project):
    marker = f"farmer-world-{uuid.uuid4().hex}"
    project.markers.append(marker)
    project.farmfile(
        f"""
        [world.w]
        setup = ["import time", "MARK = '{marker}'"]

        [task.only]
        world = "w"
        timeout = 0.5
        outputs = ["out/only.txt"]
        python = '''-c "time.sleep(30)"'''
        """
    )
    r = project.build(timeout=20)
    assert r.returncode == 1, r
    assert project.tasks()["out/only.txt"]["reason"] == "timeout after 0.5 s"
    assert r.elapsed < 10
    assert wait_no_process(marker) == []


def _fds(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []


def _link(pid: int, n: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/fd/{n}")
    except OSError:
        return ""


# -- slow: many tasks, interrupts at random moments ------------------------------------

TREE = """
[world.base]
setup = ["import os, subprocess, sys, time", "MARK = '{marker}'"]

[world.mid]
parent = "base"
setup = ["MID = 'mid'"]

[world.leaf]
parent = "mid"
setup = ["LEAF = 'leaf'"]

[task.b]
foreach = {{i = {ids}}}
world = "base"
outputs = ["out/b{{i}}.txt"]
python = '''-c "import sys; time.sleep({pause}); open(sys.argv[1], 'w').write('b' + sys.argv[2])" {{outputs}} {{i}}'''

[task.l]
foreach = {{i = {ids}}}
world = "leaf"
inputs = ["out/b{{i}}.txt"]
outputs = ["out/l{{i}}.txt"]
python = '''-c "import sys; time.sleep({pause}); open(sys.argv[1], 'w').write(MID + LEAF + open(sys.argv[2]).read())" {{outputs}} {{inputs}}'''
"""


@pytest.mark.slow
def test_many_tasks_over_a_world_tree_match_no_worlds(project):
    marker = f"farmer-world-{uuid.uuid4().hex}"
    ids = [str(i) for i in range(150)]
    project.farmfile(TREE.format(marker=marker, ids=ids, pause=0))
    r = project.build("-j", "6", "--no-worlds", timeout=600)
    assert r.returncode == 0, r
    fresh = {p.name: p.read_text() for p in (project.root / "out").iterdir()}
    project.farmer("clean")
    r = project.build("-j", "6", timeout=120)
    assert r.returncode == 0, r
    assert {p.name: p.read_text() for p in (project.root / "out").iterdir()} == fresh
    assert len(fresh) == 300
    assert wait_no_process(marker) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_interrupt_at_a_random_moment_leaves_nothing_behind(project, seed):
    import random

    rng = random.Random(seed)
    marker = f"farmer-world-{uuid.uuid4().hex}"
    project.markers.append(marker)
    project.farmfile(TREE.format(marker=marker, ids=[str(i) for i in range(40)], pause=0.05))
    p = project.popen("build", "-j", "4")
    time.sleep(rng.uniform(0.0, 1.5))
    p.send_signal(rng.choice([signal.SIGINT, signal.SIGTERM]))
    out, err = p.communicate(timeout=20)
    assert p.returncode in (0, 130, 143), (p.returncode, out, err)
    assert "Traceback" not in err, err
    assert wait_no_process(marker) == [], "a world process or task survived"
    assert wait_no_process_in(project) == []
    assert not [d for d in os.listdir(_fifo_parent()) if d.startswith(f"farmer-worlds-{p.pid}-")]
    r = project.build("-j", "4", timeout=120)  # and the next build finishes the job
    assert r.returncode == 0, r
    assert len(list((project.root / "out").iterdir())) == 80


def _fifo_parent() -> str:
    import tempfile

    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return runtime
    return tempfile.gettempdir()
