"""Process groups (issue 11): what a computation leaves running in its group ends with it,
and after `kill -9` of farmer, the next build kills what is left of the groups the dead one
recorded in `.farmer/groups` before it plans, so orphans never race the recovery build."""

from __future__ import annotations

import os
import signal
import time

from conftest import pids_matching, wait_no_process


def test_background_process_of_a_command_ends_with_it(project):
    marker = project.unique_sleep(30)
    project.farmfile(f'[task.t]\noutputs = ["t.txt"]\ncmd = "({marker} &) ; echo t > {{outputs}}"\n')
    r = project.build()
    assert r.returncode == 0, r
    assert wait_no_process(marker, timeout=2) == []


def test_background_process_of_a_world_task_ends_with_it(project):
    marker = project.unique_sleep(30)
    project.farmfile(f"""\
        [world.w]
        setup = ["import subprocess"]
        [task.t]
        foreach = {{n = ["1", "2"]}}
        world = "w"
        outputs = ["t{{n}}.txt"]
        python = "-c 'subprocess.Popen(\\"{marker}\\", shell=True); open(\\"t{{n}}.txt\\", \\"w\\").write(\\"t\\")'"
        """)
    r = project.build()
    assert r.returncode == 0, r
    assert wait_no_process(marker, timeout=2) == []


def test_orphans_of_a_killed_farmer_are_killed_before_the_next_build_plans(project):
    marker = project.unique_sleep(30)
    project.farmfile(f"""\
        [task.slow]
        outputs = ["out/app.bin"]
        cmd = "touch started; echo old > {{outputs}}.part; {marker}; mv {{outputs}}.part {{outputs}}"
        """)
    proc = project.popen("build")
    assert project.wait_for("started", proc=proc)
    assert project.wait_for(".farmer/groups", timeout=5, proc=proc)  # written once the spawn returned
    os.killpg(proc.pid, signal.SIGKILL)  # farmer alone: its command has its own group
    proc.wait()
    assert pids_matching(marker), "the command should outlive its killed farmer"
    project.farmfile('[task.slow]\noutputs = ["out/app.bin"]\ncmd = "echo new > {outputs}"\n')
    r = project.build()
    assert r.returncode == 0, r
    assert wait_no_process(marker, timeout=2) == []
    assert not project.exists(".farmer/groups")
    time.sleep(0.2)
    assert project.read("out/app.bin") == "new\n"


def test_a_reused_pid_is_not_killed(project):
    """A recorded group that was there before the farmer that recorded it is somebody else's."""
    project.farmfile('[task.t]\noutputs = ["t.txt"]\ncmd = "echo t > {outputs}"\n')
    marker = project.unique_sleep(30)
    import subprocess

    other = subprocess.Popen(marker.split(), start_new_session=True)
    try:
        os.makedirs(project.path(".farmer"), exist_ok=True)
        project.write(".farmer/groups", f"{other.pid} {10**15}\n")
        assert project.build().returncode == 0
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
