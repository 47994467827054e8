"""End-to-end: world tasks through the real command line (SPEC §1 "Worlds"): the same
outputs as `--no-worlds`, setup once per build, the world tree, fork-jobs and the
execute-job, the FIFO directory, -j and pools, timeouts, the threads warning."""

from __future__ import annotations

import os
import uuid

import pytest
from conftest import pids_matching, wait_no_process

# A task that finds the FIFOs of its world: in /proc of the world (its parent, for a
# fork-job) or of itself (an execute-job runs in the world process).
PROBE = """\
import os, stat, sys
found = set()
for pid in ("self", str(os.getppid())):
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for n in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{n}")
        except OSError:
            continue
        if "farmer-worlds-" in target:
            found.add(target)
dirs = {os.path.dirname(t) for t in found}
assert len(dirs) == 1, found
d = dirs.pop()
fifo = sorted(found)[0]
with open(sys.argv[1], "w") as f:
    f.write(f"{d}\\n{stat.S_IMODE(os.stat(d).st_mode):o}\\n{stat.S_IMODE(os.stat(fifo).st_mode):o}\\n"
            f"{stat.S_ISFIFO(os.stat(fifo).st_mode)}\\n")
"""

SAME = """
[world.base]
env = {GREETING = "hello"}
setup = ["import json, os", "BASE = 'base-' + os.environ['GREETING']"]

[world.data]
parent = "base"
inputs = ["data/table.json"]
setup = ["TABLE = json.load(open('data/table.json'))"]

[task.query]
foreach = "queries/q_{q}.py"
world = "data"
inputs = ["queries/q_{q}.py"]
outputs = ["out/q{q}.txt"]
env = {SUFFIX = "!"}
python = "queries/q_{q}.py {outputs} --flag"

[task.module]
world = "data"
outputs = ["out/module.txt"]
python = "-m tools.summarize {outputs}"

[task.code]
world = "base"
outputs = ["out/code.txt"]
python = '''-c "import sys; open(sys.argv[1], 'w').write(BASE + repr(sys.argv[1:]) + __name__)" {outputs}'''

[task.exits]
world = "base"
outputs = ["out/exits.txt"]
python = '''-c "import sys; open(sys.argv[1], 'w').write('x'); print('bye'); sys.exit(0)" {outputs}'''
"""

QUERY = """\
import os, sys
from helper import fmt
print("to stdout", TABLE["{key}"])
print("to stderr", file=sys.stderr)
with open(sys.argv[1], "w") as f:
    f.write(fmt(BASE, TABLE["{key}"], sys.argv, os.getcwd(), os.environ["SUFFIX"], __name__))
"""


def same_project(project):
    project.farmfile(SAME)
    project.write("data/table.json", '{"x": 1, "y": [2, 3]}')
    project.write("queries/helper.py", "def fmt(*a):\n    return repr(a)\n")
    project.write("queries/q_x.py", QUERY.replace("{key}", "x"))
    project.write("queries/q_y.py", QUERY.replace("{key}", "y"))
    project.write("tools/summarize.py",
                  "import sys\nopen(sys.argv[1], 'w').write(repr((sorted(TABLE), BASE, sys.argv[1:], __name__)))\n")
    return project


OUTPUTS = ["out/qx.txt", "out/qy.txt", "out/module.txt", "out/code.txt", "out/exits.txt"]


def logged(project, output: str) -> str | None:
    """The computation's log, or None when it has none (it succeeded and printed nothing)."""
    log = project.path(".farmer/logs/" + output.replace("/", "%2F") + ".log")
    return log.read_text() if log.exists() else None


@pytest.mark.parametrize("jobs", ["1", "4"])
def test_world_outputs_equal_no_worlds_outputs(project, jobs):
    same_project(project)
    r = project.build("--no-worlds", "-j", jobs)
    assert r.returncode == 0, r
    fresh = {p: project.read(p) for p in OUTPUTS}
    logs = {p: logged(project, p) for p in OUTPUTS}
    assert "to stdout 1" in logs["out/qx.txt"] and "to stderr" in logs["out/qx.txt"]
    assert logs["out/module.txt"] is None  # it printed nothing: no log, in either way
    project.farmer("clean")
    r = project.build("-j", jobs)
    assert r.returncode == 0, r
    assert {p: project.read(p) for p in OUTPUTS} == fresh
    assert {p: logged(project, p) for p in OUTPUTS} == logs
    assert str(project.root.resolve()) in fresh["out/qx.txt"]  # cwd: the project root
    assert "'out/qx.txt', '--flag'" in fresh["out/qx.txt"]  # sys.argv from the python line
    assert project.tasks()["out/qx.txt"]["world"] == "data"


def test_setup_runs_once_per_build(project):
    project.farmfile(
        """
        [world.base]
        setup = ["open('base-setups.txt', 'a').write('once\\\\n')"]

        [world.child]
        parent = "base"
        inputs = ["data.txt"]
        setup = ["open('child-setups.txt', 'a').write('once\\\\n')", "DATA = open('data.txt').read()"]

        [task.t]
        foreach = {i = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]}
        world = "child"
        outputs = ["out/{i}.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write(DATA + sys.argv[2])" {outputs} {i}'''
        """
    )
    project.write("data.txt", "d")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("base-setups.txt") == "once\n"
    assert project.read("child-setups.txt") == "once\n"
    assert [project.read(f"out/{i}.txt") for i in range(10)] == [f"d{i}" for i in range(10)]
    t = project.tasks()["out/3.txt"]
    assert t["duration_s"] is not None and t["cpu_s"] is not None and t["max_rss_kb"] > 0
    # A world input change reruns its tasks (SPEC §2), with the reason naming the world.
    project.write("data.txt", "e")
    r = project.build()
    assert r.returncode == 0, r
    assert set(project.reasons().values()) == {"world child changed"}
    assert project.read("out/9.txt") == "e9"
    assert project.read("child-setups.txt") == "once\nonce\n"
    assert project.build().finished() == []  # and then nothing: no world starts at all
    assert project.read("base-setups.txt") == "once\nonce\n"


def test_child_world_of_a_child_world(project):
    project.farmfile(
        """
        [world.base]
        setup = ["import os", "BASE_PID = os.getpid()", "SEEN = ['base']"]

        [world.mid]
        parent = "base"
        setup = ["MID_PID = os.getpid()", "MID_PARENT = os.getppid()", "SEEN.append('mid')"]

        [world.leaf]
        parent = "mid"
        setup = ["LEAF_PID = os.getpid()", "LEAF_PARENT = os.getppid()", "SEEN.append('leaf')"]

        [task.leaf]
        foreach = {i = ["1", "2", "3"]}
        world = "leaf"
        outputs = ["out/leaf{i}.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write(repr((SEEN, MID_PARENT == BASE_PID, LEAF_PARENT == MID_PID, len(set([BASE_PID, MID_PID, LEAF_PID])))))" {outputs}'''

        [task.mid]
        world = "mid"
        outputs = ["out/mid.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write(repr(SEEN))" {outputs}'''
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    for i in "123":
        assert project.read(f"out/leaf{i}.txt") == "(['base', 'mid', 'leaf'], True, True, 3)"
    assert project.read("out/mid.txt") == "['base', 'mid']"  # a child's setup stays in the child


def test_last_future_runs_in_the_world_itself(project):
    project.farmfile(
        """
        [world.w]
        setup = ["import os", "WORLD = os.getpid()"]

        [task.t]
        foreach = {i = ["1", "2", "3"]}
        world = "w"
        outputs = ["out/{i}.txt"]
        python = '''-c "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid() == WORLD))" {outputs}'''
        """
    )
    r = project.build("-j", "1")
    assert r.returncode == 0, r
    order = r.finished_ids()
    assert [project.read(p) for p in order] == ["False", "False", "True"]  # fork, fork, execute


def test_exit_statuses_and_tracebacks(project):
    project.farmfile(
        """
        [world.w]
        setup = ["import os"]

        [task.exit4]
        world = "w"
        outputs = ["out/exit4.txt"]
        python = '''-c "raise SystemExit(4)"'''

        [task.raises]
        world = "w"
        outputs = ["out/raises.txt"]
        python = "boom.py"

        [task.osexit]
        foreach = {i = ["1", "2"]}
        world = "w"
        outputs = ["out/osexit{i}.txt"]
        python = '''-c "import os; os._exit(5)"'''

        [task.selfkill]
        world = "w"
        outputs = ["out/selfkill.txt"]
        python = '''-c "import os; os.kill(os.getpid(), 9)"'''
        """
    )
    project.write("boom.py", "def f():\n    raise KeyError('kaput')\nf()\n")
    r = project.build("-k", "-j", "1")
    assert r.returncode == 1, r
    t = project.tasks()
    assert t["out/exit4.txt"]["reason"] == "exit 4"
    assert t["out/raises.txt"]["reason"] == "exit 1"
    # os._exit and signals end a task as they end a process, fork-job or execute-job alike
    assert t["out/osexit1.txt"]["reason"] == t["out/osexit2.txt"]["reason"] == "exit 5"
    assert t["out/selfkill.txt"]["reason"] == "signal 9"
    log = project.read(".farmer/logs/out%2Fraises.txt.log")
    assert "KeyError: 'kaput'" in log and 'boom.py", line 2, in f' in log
    assert "driver.py" not in log and "runpy" not in log  # only the user's frames
    assert "world" not in " ".join(x["reason"] for x in t.values())  # the world never died


def test_fifo_directory_is_private_and_removed(project):
    project.farmfile(
        """
        [world.w]
        setup = ["X = 1"]

        [task.probe]
        foreach = {i = ["1", "2"]}
        world = "w"
        outputs = ["out/{i}.txt"]
        python = "probe.py {outputs}"
        """
    )
    project.write("probe.py", PROBE)
    r = project.build("-j", "1")
    assert r.returncode == 0, r
    for i in "12":  # the first a fork-job, the second the execute-job
        d, mode, fifo_mode, is_fifo = project.read(f"out/{i}.txt").split()
        assert mode == "700" and fifo_mode == "600" and is_fifo == "True"
        assert not os.path.exists(d), "the FIFO directory outlived the build"


def test_world_tasks_obey_pools_and_jobs(project):
    project.farmfile(
        """
        [pools]
        one = 1

        [world.w]
        setup = ["import time"]

        [task.pooled]
        foreach = {i = ["1", "2", "3"]}
        world = "w"
        pool = "one"
        outputs = ["out/p{i}.txt"]
        python = '''-c "import sys; time.sleep(0.2); open(sys.argv[1], 'w').write('')" {outputs}'''

        [task.free]
        foreach = {i = ["1", "2", "3", "4"]}
        world = "w"
        outputs = ["out/f{i}.txt"]
        python = '''-c "import sys; time.sleep(0.2); open(sys.argv[1], 'w').write('')" {outputs}'''
        """
    )
    r = project.build("-j", "2")
    assert r.returncode == 0, r
    tasks = project.last_build()["tasks"]

    def overlap(spans):
        events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
        most = now = 0
        for _, d in events:
            now += d
            most = max(most, now)
        return most

    pooled = [(t["start_s"], t["end_s"]) for t in tasks if t["task"] == "pooled"]
    assert overlap(pooled) == 1
    assert overlap([(t["start_s"], t["end_s"]) for t in tasks]) <= 2


def test_timeout_kills_a_world_task_and_what_it_started(project):
    sleep = project.unique_sleep(30)
    project.farmfile(
        f"""
        [world.w]
        setup = ["import subprocess, time"]

        [task.hangs]
        world = "w"
        timeout = 1
        outputs = ["out/hangs.txt"]
        python = '''-c "subprocess.run('{sleep}', shell=True)"'''

        [task.fine]
        foreach = {{i = ["1", "2"]}}
        world = "w"
        outputs = ["out/fine{{i}}.txt"]
        python = '''-c "import sys; time.sleep(0.3); open(sys.argv[1], 'w').write('ok')" {{outputs}}'''
        """
    )
    r = project.build("-k", "-j", "3")
    assert r.returncode == 1, r
    t = project.tasks()
    assert t["out/hangs.txt"]["reason"] == "timeout after 1 s"
    assert t["out/fine1.txt"]["status"] == t["out/fine2.txt"]["status"] == "ran"
    assert r.elapsed < 10
    assert wait_no_process(sleep) == []


def test_threads_left_by_setup_are_warned_about(project):
    project.farmfile(
        """
        [world.threaded]
        setup = ["import threading, time", "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()"]

        [task.t]
        foreach = {i = ["1", "2"]}
        world = "threaded"
        outputs = ["out/{i}.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write('ok')" {outputs}'''
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    warnings = [line for line in r.output.splitlines() if "warning" in line and "thread" in line]
    assert len(warnings) == 1 and "world threaded" in warnings[0], r


def test_world_stops_when_nothing_pending_needs_it(project):
    marker = f"farmer-world-{uuid.uuid4().hex}"
    project.farmfile(
        f"""
        [world.w]
        setup = ["MARK = '{marker}'"]

        [task.early]
        foreach = {{i = ["1", "2"]}}
        world = "w"
        outputs = ["out/early{{i}}.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write(MARK)" {{outputs}}'''

        [task.late]
        inputs = ["out/early1.txt", "out/early2.txt"]
        outputs = ["out/late.txt"]
        cmd = "python3 look.py {marker[::-1]} {{outputs}}"
        """
    )
    # Looks for the world process while the build goes on (the marker is reversed on our
    # own command line, so we do not find ourselves).
    project.write("look.py", """\
import os, sys, time
marker = sys.argv[1][::-1]
time.sleep(0.3)
alive = []
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != os.getpid():
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    alive.append(entry)
        except OSError:
            pass
open(sys.argv[2], "w").write(repr(alive))
""")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/late.txt") == "[]"
    assert pids_matching(marker) == []


def test_what_will_not_run_does_not_keep_a_world_forking(project):
    """Tasks that turn out up to date (early cutoff) or are skipped after a failure (-k)
    are no longer futures of their world: the task left is its last, run in the world."""
    project.farmfile(
        """
        [world.w]
        setup = ["import os", "WORLD = os.getpid()"]

        [task.slow]
        inputs = ["slow.in"]
        outputs = ["out/slow.txt"]
        cmd = "sleep 0.5; cat {inputs} > {outputs}"

        [task.same]
        inputs = ["same.in"]
        outputs = ["out/same.txt"]
        cmd = "cut -c1 {inputs} > {outputs}"

        [task.fails]
        inputs = ["fails.in"]
        outputs = ["out/fails.txt"]
        cmd = "grep -q ok {inputs} && cp {inputs} {outputs}"

        [task.last]
        world = "w"
        inputs = ["out/slow.txt"]
        outputs = ["out/last.txt"]
        python = '''-c "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid() == WORLD))" {outputs}'''

        [task.cutoff]
        world = "w"
        inputs = ["out/same.txt"]
        outputs = ["out/cutoff.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write('c')" {outputs}'''

        [task.skipped]
        world = "w"
        inputs = ["out/fails.txt"]
        outputs = ["out/skipped.txt"]
        python = '''-c "import sys; open(sys.argv[1], 'w').write('s')" {outputs}'''
        """
    )
    project.write("slow.in", "1")
    project.write("same.in", "ab")
    project.write("fails.in", "ok")
    assert project.build().returncode == 0
    project.write("slow.in", "2")
    project.write("same.in", "ac")  # out/same.txt comes out the same: cutoff is up to date
    project.write("fails.in", "no")
    r = project.build("-k")
    assert r.returncode == 1, r
    st = project.statuses()
    assert (st["out/cutoff.txt"], st["out/skipped.txt"], st["out/last.txt"]) == ("up-to-date", "skipped", "ran")
    assert project.read("out/last.txt") == "True"


def test_world_inputs_with_vars_feed_the_fingerprint(project):
    project.farmfile(
        """
        [vars]
        table = "data/table.json"

        [world.w]
        inputs = ["{table}"]
        setup = ["TABLE = open('data/table.json').read()"]

        [task.t]
        world = "w"
        outputs = ["out/t.txt"]
        python = '''-c "open('out/t.txt', 'w').write(TABLE)"'''
        """
    )
    project.write("data/table.json", "1")
    assert project.build().returncode == 0
    project.write("data/table.json", "2")
    r = project.build()
    assert r.returncode == 0, r
    assert project.reasons()["out/t.txt"] == "world w changed"
    assert project.read("out/t.txt") == "2"


def test_python_line_that_cannot_be_split_is_a_farmfile_error(project):
    project.farmfile(
        """
        [world.w]
        setup = ["X = 1"]

        [task.bad]
        world = "w"
        outputs = ["out/bad.txt"]
        python = '''-c "unbalanced'''

        [task.good]
        world = "w"
        outputs = ["out/good.txt"]
        python = '''-c "open('out/good.txt', 'w').write(str(X))"'''
        """
    )
    r = project.build("-k")
    assert r.returncode == 2, r
    assert "Traceback" not in r.output
    assert "'bad'" in r.stderr and "No closing quotation" in r.stderr
    assert not project.exists("out/good.txt")  # a Farmfile error: nothing runs
