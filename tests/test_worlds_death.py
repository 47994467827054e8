"""Worlds never outlive their farmer (issue 11): a world killed with its farmer mid-setup,
its forked tasks, a world whose farmer died before it opened its FIFOs, and the FIFO
directories dead farmers leave, which any later build sweeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import wait_no_process_in

DRIVER = os.path.join(os.path.dirname(__file__), "..", "farmer", "worlds", "driver.py")


def _kill_farmer_when(project, proc, marker_file):
    assert project.wait_for(marker_file, timeout=30, proc=proc), proc.communicate()
    os.killpg(proc.pid, signal.SIGKILL)  # farmer alone is in that group; worlds have their own
    proc.wait()
    left = wait_no_process_in(project, timeout=2.5)
    return left


def test_world_killed_with_its_farmer_mid_setup(project):
    project.farmfile("""\
        [world.slow]
        setup = ["open('setup-started', 'w').close()", "import time", "time.sleep(60)"]
        [task.t]
        world = "slow"
        outputs = ["t.txt"]
        python = "-c 'open(\\"t.txt\\", \\"w\\").write(\\"t\\")'"
        """)
    proc = project.popen("build")
    assert _kill_farmer_when(project, proc, "setup-started") == []


def test_forked_tasks_die_with_their_farmer(project):
    project.farmfile("""\
        [world.w]
        setup = ["import time"]
        [task.t]
        foreach = {n = ["1", "2", "3"]}
        world = "w"
        outputs = ["t{n}.txt"]
        python = "-c 'open(\\"started{n}\\", \\"w\\").close(); time.sleep(60)'"
        """)
    proc = project.popen("build", "-j", "3")
    assert _kill_farmer_when(project, proc, "started1") == []


def test_world_whose_farmer_is_gone_before_it_opens_its_fifos(tmp_path):
    """Nobody reads BASE.out (its farmer died just after making it): the world ends at once
    instead of blocking in open() for ever."""
    base = str(tmp_path / "w.1")
    os.mkfifo(base + ".in", 0o600)
    os.mkfifo(base + ".out", 0o600)
    p = subprocess.Popen([sys.executable, DRIVER, "--serve", base, "--world", "w", "--root",
                          str(tmp_path), "--setup", "[]", "--parent", str(os.getpid())],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert p.wait(timeout=10) != 0
        assert b"usage" not in p.stderr.read()
    finally:
        p.stderr.close()
        if p.poll() is None:
            p.kill()
            p.wait()


def test_world_whose_farmer_died_before_it_started(tmp_path):
    """Started by a process that is already gone: it ends before its setup."""
    base = str(tmp_path / "w.1")
    os.mkfifo(base + ".in", 0o600)
    os.mkfifo(base + ".out", 0o600)
    marker = tmp_path / "setup-ran"
    setup = f'["open({str(marker)!r}, \\"w\\").close()"]'
    reader = os.open(base + ".out", os.O_RDONLY | os.O_NONBLOCK)
    try:
        p = subprocess.run([sys.executable, DRIVER, "--serve", base, "--world", "w", "--root",
                            str(tmp_path), "--setup", setup, "--parent", "1"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    finally:
        os.close(reader)
    assert p.returncode != 0 and b"usage" not in p.stderr and not marker.exists()


def test_any_build_sweeps_fifo_dirs_of_dead_farmers(project, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp / f"farmer-worlds-{dead.pid}-abc123"
    left.mkdir(mode=0o700)
    os.mkfifo(left / "w.1.in")
    alive = tmp / f"farmer-worlds-{os.getpid()}-def456"
    alive.mkdir(mode=0o700)
    project.farmfile('[task.t]\noutputs = ["t.txt"]\ncmd = "echo t > {outputs}"\n')  # no world
    r = project.build(env={"TMPDIR": str(tmp), "XDG_RUNTIME_DIR": ""})
    assert r.returncode == 0, r
    assert not left.exists()
    assert alive.exists()


def test_a_no_op_build_sweeps_the_fifo_dir_of_a_watch_killed_with_9(project, tmp_path):
    """N7: `farmer watch` killed with -9 while idle, its worlds warm, leaves its FIFO
    directory (and the mark it keeps in .farmer/ while it has one); the next build that takes
    the lock removes it, even a no-op that ends on the fast path."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    project.farmfile("""\
        [world.w]
        setup = ["import os"]
        [task.t]
        world = "w"
        inputs = ["t.py"]
        outputs = ["t.txt"]
        python = "t.py"
        """)
    project.write("t.py", "open('t.txt', 'w').write('t')\n")
    watch = project.popen("watch", env=env)
    deadline = time.monotonic() + 30
    while not (project.exists(".farmer/noop.stats") and os.listdir(runtime)):  # built, worlds warm
        assert watch.poll() is None and time.monotonic() < deadline, watch.communicate()
        time.sleep(0.02)
    os.killpg(watch.pid, signal.SIGKILL)
    watch.wait()
    assert wait_no_process_in(project) == []
    assert [n for n in os.listdir(runtime) if n.startswith("farmer-worlds-")], "nothing was left"

    r = project.build(env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert r.returncode == 0 and r.summary()["ran"] == 0, r
    assert "farmer.build.run" not in r.stderr, "not the no-op fast path"
    assert os.listdir(runtime) == [], "the FIFO directory outlived a build that took the lock"
    assert not project.exists(".farmer/fifos")
    r = project.build(env={**env, "PYTHONPROFILEIMPORTTIME": "1"})  # and then costs one stat
    assert r.returncode == 0 and "farmer.run.worlds" not in r.stderr, r
