"""Reliability: concurrency (issue 5). One farmer per project at a time.

The lock is an `flock` on `.farmer/lock` holding the holder's pid: a second farmer that
would write (build, clean) exits 3 at once naming the holder; read-only commands (plan,
query, graph, build -n) go on; the kernel drops the lock with its holder, so a farmer killed
with -9 never blocks the next (see also test_reliability_crash.py::
test_kill_9_leaves_no_stale_lock); the lock is never inherited by commands, so a daemon a
command leaves behind blocks nothing; farmers started together leave a correct build.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

import pytest
from conftest import pids_matching, wait_no_process, wait_no_process_in
from helpers import state_integrity


def blocked_build(project, sleep: str) -> subprocess.Popen:
    project.write("in.txt", "x\n")
    project.write("block", "")
    project.farmfile(
        f"""
        [task.slow]
        inputs = ["in.txt"]
        outputs = ["out/slow.txt"]
        cmd = "touch started; if [ -e block ]; then {sleep}; fi; cp {{inputs}} {{outputs}}"

        [task.quick]
        inputs = ["in.txt"]
        outputs = ["out/quick.txt"]
        cmd = "cp {{inputs}} {{outputs}}"
        """
    )
    p = project.popen("build", "slow")
    assert project.wait_for("started", timeout=30), "the first build never started"
    return p


def test_second_farmer_exits_3_at_once_naming_the_holder(project):
    sleep = project.unique_sleep(30)
    first = blocked_build(project, sleep)
    try:
        for args in (["build"], ["build", "quick"], ["clean"]):
            r = project.farmer(*args)
            assert r.returncode == 3, r
            assert "Traceback" not in r.output
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            assert len(lines) == 1 and lines[0].startswith("farmer: error: "), r
            assert f"pid {first.pid}" in lines[0], r
            assert r.elapsed < 5, r  # no waiting for the lock: python's start-up only
        assert not project.exists("out/quick.txt")
        # what only reads goes on while the build runs
        for args in (["plan"], ["build", "-n"], ["query", "out/slow.txt"], ["graph"]):
            r = project.farmer(*args)
            assert r.returncode == 0, r
            assert "Traceback" not in r.output
        assert first.poll() is None, "the first build was disturbed"
    finally:
        project.remove("block")
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=10)
    assert wait_no_process(sleep) == []
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/slow.txt") == project.read("out/quick.txt") == "x\n"


def test_stale_lock_file_never_blocks(project):
    project.write("in.txt", "x\n")
    project.farmfile(
        """
        [task.a]
        inputs = ["in.txt"]
        outputs = ["out/a.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.path(".farmer").mkdir()
    for content in (b"999999\n", b"garbage \xff\x00", b""):
        project.path(".farmer/lock").write_bytes(content)
        r = project.build()
        assert r.returncode == 0, r
    assert project.read(".farmer/lock").strip().isdigit()


def test_a_lock_taken_a_moment_ago_is_named_by_its_holder(tmp_path):
    """A farmer that took a new project's lock has not written its pid yet (the file is
    empty for a moment): a second farmer waits for the pid instead of saying "pid unknown"."""
    import fcntl
    import threading

    from farmer.errors import LockHeld
    from farmer.files.lock import ProjectLock

    farmer_dir = tmp_path / ".farmer"
    farmer_dir.mkdir()
    fd = os.open(farmer_dir / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    later = threading.Timer(0.02, os.pwrite, (fd, b"4242\n", 0))
    later.start()
    try:
        with pytest.raises(LockHeld, match=r"pid 4242\)"):
            ProjectLock(farmer_dir).acquire()
    finally:
        later.join()
        os.close(fd)
    # Once the holder is gone, the lock is free and the new holder's pid replaces the old one.
    with ProjectLock(farmer_dir):
        assert (farmer_dir / "lock").read_text() == f"{os.getpid()}\n"


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid(1) to start a daemon")
def test_lock_is_not_inherited_by_commands(project):
    """A command that leaves a daemon behind (its own session, still running) does not keep
    the project locked: the lock's descriptor is close-on-exec. The command waits until the
    daemon has left its process group (the marker is written after setsid): what is still in
    the group when a computation ends is killed (docs/reliability.md)."""
    sleep = project.unique_sleep(30)
    marker = project.root / "daemon-started"
    project.farmfile(
        f"""
        [task.daemon]
        outputs = ["out/d.txt"]
        cmd = "setsid sh -c 'touch {marker}; exec {sleep}' > /dev/null 2>&1 < /dev/null & while [ ! -e {marker} ]; do sleep 0.01; done; rm {marker}; echo d > {{outputs}}"
        always = true
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    try:
        deadline = time.monotonic() + 5
        while not [pid for pid in pids_matching(sleep) if _comm(pid) == "sleep"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pids_matching(sleep), "the daemon should still run"
        r = project.build()
        assert r.returncode == 0, r
    finally:
        for pid in pids_matching(sleep):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass




def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


@pytest.mark.parametrize("n", [6])
def test_farmers_started_together(project, n):
    """Several farmers at once on one project: each builds or exits 3; the result is one
    correct build and an intact state."""
    project.write("in.txt", "x\n")
    project.farmfile(
        """
        [task.step]
        foreach = {k = ["1", "2", "3", "4"]}
        inputs = ["in.txt"]
        outputs = ["out/{k}.txt"]
        cmd = "sleep 0.2; cp {inputs} {outputs}"

        [task.all]
        inputs = ["@step"]
        outputs = ["out/all.txt"]
        cmd = "cat {inputs} > {outputs}"
        """
    )
    procs = [project.popen("build", "-j", "4") for _ in range(n)]
    results = [(p.pid, p.returncode, *p.communicate(timeout=60)) for p in procs]
    results = [(pid, p.returncode, out, err) for (pid, _, out, err), p in zip(results, procs)]
    codes = [code for _, code, _, _ in results]
    assert set(codes) <= {0, 3}, results
    assert 0 in codes, results
    pids = {pid for pid, _, _, _ in results}
    for pid, code, out, err in results:
        assert "Traceback" not in out + err, err
        if code == 3:
            m = re.search(r"pid (\d+)", err)
            assert m and int(m.group(1)) in pids, err
    assert wait_no_process_in(project) == []
    assert state_integrity(project.root) == "ok"
    assert project.read("out/all.txt") == "x\n" * 4
    r = project.build()
    assert r.returncode == 0 and r.summary()["ran"] == 0, r
