"""Failures (SPEC §2 Failure), -k, timeouts. What a failure makes the build do (skip, stop,
delete, keep) is checked in-process with the fake executor (tests/fakes.py); the exit status,
what is printed, signals, timeouts and real concurrency by the command line."""

import re
import time
from pathlib import Path

import pytest
from conftest import wait_no_process

FAILING = """
[task.bad]
outputs = ["out/bad.txt"]
cost = 100
cmd = "echo partial > {outputs}; echo OOPS-SOMETHING-BROKE; echo ON-STDERR >&2; exit 3"

[task.after_bad]
inputs = ["out/bad.txt"]
outputs = ["out/after.txt"]
cmd = "cp {inputs} {outputs}"

[task.independent]
outputs = ["out/indep.txt"]
cost = 0.01
cmd = "echo indep > {outputs}"
"""


def test_failure_exit_code_status_and_reason(project):
    project.farmfile(FAILING)
    r = project.build("-j", "1")
    assert r.returncode == 1, r
    lb = project.last_build()
    assert lb["status"] == "failed"
    t = project.tasks()["out/bad.txt"]
    assert t["status"] == "failed"
    assert t["reason"] == "exit 3"
    assert t["exit_code"] == 3
    assert t["start_s"] is not None and t["end_s"] is not None
    s = r.summary()
    assert s["failed"] == 1, r
    assert "Traceback" not in r.output


def test_failed_outputs_are_deleted(project):
    project.farmfile(FAILING)
    assert project.build_in_process("-j", "1").returncode == 1
    assert not project.exists("out/bad.txt")


def test_previous_good_output_deleted_on_failure(project):
    ff = """
    [task.t]
    outputs = ["out/t.txt"]
    cmd = "echo good > {outputs}"
    """
    project.farmfile(ff)
    assert project.build_in_process().returncode == 0
    assert project.exists("out/t.txt")
    project.farmfile(ff.replace("echo good > {outputs}", "echo worse > {outputs}; false"))
    assert project.build_in_process().returncode == 1
    assert not project.exists("out/t.txt")
    assert project.reasons()["out/t.txt"] == "exit 1"


def test_consumers_of_failure_are_skipped(project):
    project.farmfile(FAILING)
    r = project.build_in_process("-k")
    assert r.returncode == 1, r
    t = project.tasks()["out/after.txt"]
    assert t["status"] == "skipped"
    assert t["reason"] == "input out/bad.txt failed"
    assert t["start_s"] is None and t["end_s"] is None and t["duration_s"] is None
    assert not project.exists("out/after.txt")
    assert "out/after.txt" not in r.finished_ids(), r
    assert r.summary()["skipped"] >= 1, r


# lazy fails as its run is recorded: farmer starts what is ready before it records a run
# that ended, but not after one whose recording will fail
FORGETFUL = """
[task.lazy]
outputs = ["out/made.txt", "out/forgotten.txt"]
cost = 100
cmd = "echo made > out/made.txt"

""" + FAILING[FAILING.index("[task.independent]"):]


@pytest.mark.parametrize("farmfile, failed, reason", [
    (FAILING, "out/bad.txt", "exit 3"),
    (FORGETFUL, "out/made.txt", "declared output out/forgotten.txt missing"),
], ids=["exit", "output-missing"])
def test_without_k_nothing_new_starts_after_failure(project, farmfile, failed, reason):
    project.farmfile(farmfile)
    # -j 1 and cost: the failing task (expected latency 100) starts first, independent
    # (0.01) would be last
    r = project.build_in_process("-j", "1")
    assert r.returncode == 1, r
    assert r.finished_ids() == [failed], r
    assert reason in r.output, r
    t = project.tasks()
    assert t[failed]["reason"] == reason
    assert t["out/indep.txt"]["status"] == "skipped"
    assert t["out/indep.txt"]["reason"] == "build stopped"
    assert t["out/indep.txt"]["start_s"] is None
    assert not project.exists("out/indep.txt")
    s = r.summary()
    assert s["failed"] == 1 and s["skipped"] == len(t) - 1 and s["ran"] == 0, r
    r = project.build_in_process("-j", "1", "-k")  # with -k the independent task runs
    assert r.returncode == 1, r
    assert project.read("out/indep.txt") == "indep\n"


def test_with_k_independent_work_completes(project):
    project.farmfile(FAILING)
    r = project.build_in_process("-j", "1", "-k")
    assert r.returncode == 1, r
    st = project.statuses()
    assert st == {"out/bad.txt": "failed", "out/after.txt": "skipped", "out/indep.txt": "ran"}
    assert project.read("out/indep.txt") == "indep\n"
    assert project.last_build()["status"] == "failed"
    # the trace of what succeeded is kept
    r = project.build_in_process("-k")
    assert project.statuses()["out/indep.txt"] == "up-to-date", r


def test_failure_prints_command_log_path_and_output(project):
    project.farmfile(FAILING)
    r = project.build("-j", "1")
    assert r.returncode == 1, r
    out = r.output
    assert "echo OOPS-SOMETHING-BROKE" in out, r  # the failing command
    assert "OOPS-SOMETHING-BROKE" in out.replace("echo OOPS-SOMETHING-BROKE", ""), r  # its output
    assert "ON-STDERR" in out.replace("echo ON-STDERR", ""), r
    m = re.search(r"(\S*\.farmer/logs/[^\s:'\"]+)", out)
    assert m, r
    logpath = m.group(1).rstrip(".,;)")
    full = Path(logpath) if logpath.startswith("/") else project.root / logpath
    assert full.exists(), logpath
    log = full.read_text()
    assert "OOPS-SOMETHING-BROKE" in log and "ON-STDERR" in log


def test_declared_output_missing_is_a_failure(project):
    project.farmfile(
        """
        [task.lazy]
        outputs = ["out/made.txt", "out/forgotten.txt"]
        cmd = "echo made > out/made.txt"

        [task.user]
        inputs = ["out/made.txt"]
        outputs = ["out/user.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 1, r
    t = project.tasks()
    assert t["out/made.txt"]["status"] == "failed"
    assert t["out/made.txt"]["reason"] == "declared output out/forgotten.txt missing"
    assert not project.exists("out/made.txt")  # declared outputs of a failure are deleted
    assert t["out/user.txt"]["status"] == "skipped"


def test_killed_by_signal_is_a_failure(project):
    project.farmfile(
        """
        [task.suicide]
        outputs = ["out/x.txt"]
        cmd = "kill -9 $$"
        """
    )
    r = project.build()
    assert r.returncode == 1, r
    t = project.tasks()["out/x.txt"]
    assert t["status"] == "failed"
    assert t["reason"] == "signal 9"


def test_task_timeout(project):
    sleep = project.unique_sleep(30)
    project.farmfile(
        f"""
        [task.slow]
        outputs = ["out/slow.txt"]
        timeout = 1
        cmd = "echo partial > {{outputs}} && {sleep} && echo late > {{outputs}}"

        [task.fast]
        outputs = ["out/fast.txt"]
        cmd = "echo fast > {{outputs}}"
        """
    )
    t0 = time.monotonic()
    r = project.build("-k")
    elapsed = time.monotonic() - t0
    assert r.returncode == 1, r
    assert elapsed < 8, elapsed
    t = project.tasks()["out/slow.txt"]
    assert t["status"] == "failed"
    assert t["reason"].startswith("timeout after"), t
    assert re.fullmatch(r"timeout after 1(\.0+)? s", t["reason"]), t
    assert 0.9 <= t["duration_s"] < 5, t
    assert project.statuses()["out/fast.txt"] == "ran"
    assert not project.exists("out/slow.txt")  # a failure's outputs are deleted
    assert wait_no_process(sleep) == []


def test_cli_timeout_applies_to_all(project):
    sleep = project.unique_sleep(30)
    project.farmfile(
        f"""
        [task.slow]
        outputs = ["out/slow.txt"]
        cmd = "{sleep} && echo late > {{outputs}}"
        """
    )
    t0 = time.monotonic()
    r = project.build("--timeout", "1")
    assert time.monotonic() - t0 < 8
    assert r.returncode == 1, r
    t = project.tasks()["out/slow.txt"]
    assert t["status"] == "failed"
    assert t["reason"].startswith("timeout after"), t
    assert wait_no_process(sleep) == []


def test_timeout_kills_grandchildren(project):
    sleep = project.unique_sleep(30)
    project.farmfile(
        f"""
        [task.slow]
        outputs = ["out/slow.txt"]
        timeout = 1
        cmd = "sh -c '{sleep}' & sh -c '{sleep}'; wait"
        """
    )
    r = project.build()
    assert r.returncode == 1, r
    assert project.reasons()["out/slow.txt"].startswith("timeout after")
    assert wait_no_process(sleep) == []


def test_failure_in_middle_of_chain_keeps_upstream(project):
    project.farmfile(
        """
        [task.a]
        inputs = ["src/a.txt"]
        outputs = ["out/a.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.b]
        inputs = ["out/a.txt"]
        outputs = ["out/b.txt"]
        cmd = "grep -q good {inputs} && cp {inputs} {outputs}"

        [task.c]
        inputs = ["out/b.txt"]
        outputs = ["out/c.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.write("src/a.txt", "bad\n")
    r = project.build_in_process()
    assert r.returncode == 1, r
    assert project.statuses() == {"out/a.txt": "ran", "out/b.txt": "failed", "out/c.txt": "skipped"}
    assert project.reasons()["out/c.txt"] == "input out/b.txt failed"
    project.write("src/a.txt", "good\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/a.txt": "ran", "out/b.txt": "ran", "out/c.txt": "ran"}


def test_without_k_running_work_is_waited_for(project):
    project.farmfile(
        """
        [task.fails_fast]
        outputs = ["out/f.txt"]
        cmd = "sleep 0.1; exit 1"

        [task.runs_on]
        outputs = ["out/r.txt"]
        cmd = "sleep 0.6 && echo r > {outputs}"
        """
    )
    r = project.build("-j", "2")
    assert r.returncode == 1, r
    st = project.statuses()
    assert st == {"out/f.txt": "failed", "out/r.txt": "ran"}, r
    assert project.read("out/r.txt") == "r\n"


def test_resource_figures_are_measured(project):
    project.farmfile(
        """
        [task.burn]
        outputs = ["out/burn.txt"]
        cmd = "python3 -c 'import time; t = time.process_time(); x = bytearray(20000000)\\nwhile time.process_time() - t < 0.3: pass' && echo > {outputs}"
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    t = project.tasks()["out/burn.txt"]
    assert t["cpu_s"] >= 0.2, t
    assert t["max_rss_kb"] >= 20000, t
    assert t["duration_s"] >= 0.25, t
