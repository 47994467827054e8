"""End-to-end: a build with many commands to run starts them from a forked child
(farmer/executors/forked.py); what it says of each command, and what an interrupt or a
killed farmer leaves, are as when farmer starts them itself."""

import os
import re
import signal
import time
from pathlib import Path

import pytest
from conftest import pids_matching, wait_no_process, wait_no_process_in

FILLERS = 40  # more computations to run than build.py's _FORK_FROM


def fillers(after: str | None = None) -> str:
    """Quick tasks, independent or each reading `after`."""
    reads = f'inputs = ["{after}"]\n' if after else ""
    return "".join(f'\n[task.f{n}]\n{reads}outputs = ["out/f{n}.txt"]\ncmd = "cat {after or "/dev/null"} > out/f{n}.txt"\n'
                   for n in range(FILLERS))


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_outputs_failures_timeouts_and_figures_of_many_commands(project):
    sleep = project.unique_sleep(30)
    project.farmfile(f"""
        [task.bad]
        outputs = ["out/bad.txt"]
        cmd = "echo partial > {{outputs}}; echo OOPS-SOMETHING-BROKE; echo ON-STDERR >&2; exit 3"

        [task.chatty]
        outputs = ["out/chatty.txt"]
        cmd = "echo SAID-SOMETHING; echo ok > {{outputs}}"

        [task.slow]
        outputs = ["out/slow.txt"]
        timeout = 1
        cmd = "echo partial > {{outputs}} && {sleep} && echo late > {{outputs}}"

        [task.burn]
        outputs = ["out/burn.txt"]
        cmd = "python3 -c 'import time; t = time.process_time(); x = bytearray(20000000)\\nwhile time.process_time() - t < 0.3: pass' && echo > {{outputs}}"

        [task.missing]
        outputs = ["never/there.txt"]
        cmd = "no-such-program-anywhere-x9"
        """ + fillers())
    t0 = time.monotonic()
    r = project.build("-k", "-j", "2")
    assert time.monotonic() - t0 < 20
    assert r.returncode == 1, r
    t = project.tasks()
    assert t["out/bad.txt"]["reason"] == "exit 3", t["out/bad.txt"]
    assert "OOPS-SOMETHING-BROKE" in r.output.replace("echo OOPS-SOMETHING-BROKE", ""), r
    log = re.search(r"(\S*\.farmer/logs/[^\s:'\"]*bad[^\s:'\"]*)", r.output).group(1).rstrip(".,;)")
    text = (Path(log) if log.startswith("/") else project.root / log).read_text()
    assert "OOPS-SOMETHING-BROKE" in text and "ON-STDERR" in text
    assert not project.exists("out/bad.txt")  # a failure's outputs are deleted
    assert "SAID-SOMETHING" in r.output.replace("echo SAID-SOMETHING", ""), r  # shown after its line
    assert re.fullmatch(r"timeout after 1(\.0+)? s", t["out/slow.txt"]["reason"]), t["out/slow.txt"]
    assert 0.9 <= t["out/slow.txt"]["duration_s"] < 5
    assert wait_no_process(sleep) == []
    assert t["out/burn.txt"]["cpu_s"] >= 0.2 and t["out/burn.txt"]["max_rss_kb"] >= 20000, t["out/burn.txt"]
    assert t["never/there.txt"]["reason"] == "exit 127", t["never/there.txt"]
    assert all(t[f"out/f{n}.txt"]["status"] == "ran" for n in range(FILLERS))
    assert project.build("-k").returncode == 1  # the failures run again, the rest is up to date
    assert project.statuses()["out/f0.txt"] == "up-to-date"


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_interrupting_a_build_of_many_commands(project, sig, code):
    sleep = project.unique_sleep(30)
    project.farmfile(f"""
        [task.slow]
        outputs = ["out/slow.txt"]
        cmd = "echo partial > {{outputs}} && touch started && {sleep} && echo slow > {{outputs}}"
        """ + fillers(after="out/slow.txt"))
    p = project.popen("build", "-j", "2")
    assert project.wait_for("started", timeout=20, proc=p), p.communicate(timeout=10)
    # the command's shell was started by farmer's forked starter, not by farmer
    assert any(parent_of(pid) != p.pid and parent_of(parent_of(pid)) == p.pid for pid in pids_matching(sleep))
    os.killpg(p.pid, sig)  # like ^C on a terminal: farmer and its starter alike
    out, err = p.communicate(timeout=10)
    assert p.returncode == code, (out, err)
    assert "Traceback" not in err, err
    assert wait_no_process(sleep, timeout=2) == []
    assert wait_no_process_in(project) == []
    t = project.tasks()
    assert t["out/slow.txt"]["status"] == "failed" and t["out/slow.txt"]["reason"] == "interrupted"
    assert t["out/f0.txt"]["status"] == "skipped"
    assert not project.exists("out/slow.txt")
    assert not project.exists(".farmer/groups")  # every group it started ended with it


def test_a_killed_farmer_takes_its_commands_with_it(project):
    sleep = project.unique_sleep(30)
    project.write("block", "")  # the command sleeps while it is there: not in the build after
    project.farmfile(f"""
        [task.slow]
        outputs = ["out/slow.txt"]
        cmd = "touch started && if [ -e block ]; then {sleep}; fi && echo slow > {{outputs}}"
        """ + fillers(after="out/slow.txt"))
    p = project.popen("build", "-j", "2")
    assert project.wait_for("started", timeout=20, proc=p), p.communicate(timeout=10)
    p.kill()  # SIGKILL: farmer cannot clean up, but its starter sees its requests end
    p.communicate(timeout=10)
    assert wait_no_process(sleep, timeout=5) == []
    assert wait_no_process_in(project, timeout=5) == []
    project.remove("started")
    project.remove("block")
    r = project.build()
    assert r.returncode == 0, r
    assert project.statuses()["out/slow.txt"] == "ran"


def test_a_command_that_cannot_start_among_many(project):
    project.farmfile("""
        [task.noexec]
        outputs = ["out/x.txt"]
        cmd = "./not-executable > out/x.txt"
        """ + fillers())
    project.write("not-executable", "#!/bin/sh\necho hi\n")
    r = project.build("-k")
    assert r.returncode == 1, r
    assert project.tasks()["out/x.txt"]["reason"] == "exit 126", project.tasks()["out/x.txt"]


def test_a_process_starter_that_cannot_fork_leaves_farmer_to_start_the_commands(project, monkeypatch):
    """The child is forked at the first start (executors/forked.py); where the fork fails
    then (no process to spare), farmer starts every command itself, as without the child."""
    import errno
    import io

    from farmer.build.request import BuildRequest
    from farmer.build.workspace import Workspace

    project.farmfile(fillers())
    tried = []

    def no_fork():
        tried.append(len(os.listdir(project.root / "out")) if (project.root / "out").exists() else 0)
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.chdir(project.root)
    monkeypatch.setattr("sys.stdout", io.StringIO())
    try:
        assert Workspace().build(BuildRequest([], jobs=2)) == 0
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert tried == [0]  # once, at the first start: nothing had started yet
    assert all(project.read(f"out/f{n}.txt") == "" for n in range(FILLERS))
    monkeypatch.undo()
    assert project.build().summary()["up to date"] == FILLERS


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_commands_running_at_once_from_starters_of_their_own(project, how):
    """With -j 2, a second command started while the first runs gets a starter of its own
    (one a CPU): the two are farmer's children, and an interrupt or a killed farmer ends
    what each runs (no starter keeps another's requests open)."""
    sleeps = [project.unique_sleep(30), project.unique_sleep(30)]
    project.farmfile("".join(f"""
        [task.slow{n}]
        outputs = ["out/slow{n}.txt"]
        cmd = "touch started{n} && {sleep} && echo slow > {{{{outputs}}}}"
        """ for n, sleep in enumerate(sleeps)) + fillers(after="out/slow0.txt"))
    p = project.popen("build", "-j", "2")
    for n in range(2):
        assert project.wait_for(f"started{n}", timeout=20, proc=p), p.communicate(timeout=10)
    shells = [pid for sleep in sleeps for pid in pids_matching(sleep)]
    starters = {parent_of(pid) for pid in shells} - set(shells)  # the shells' parents, not the sleeps'
    assert len(starters) == min(2, os.cpu_count() or 1), starters
    assert all(parent_of(s) == p.pid for s in starters)
    if how == "SIGKILL":
        p.kill()  # each starter sees its own requests end
    else:
        os.killpg(p.pid, signal.SIGINT)
    p.communicate(timeout=10)
    assert p.returncode == (-9 if how == "SIGKILL" else 130)
    assert [wait_no_process(sleep, timeout=5) for sleep in sleeps] == [[], []]
    assert wait_no_process_in(project, timeout=5) == []
    if how == "SIGINT":
        t = project.tasks()
        assert [t[f"out/slow{n}.txt"]["reason"] for n in range(2)] == ["interrupted"] * 2
