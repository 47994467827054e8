"""`farmer watch` driven as a user would: a subprocess, files edited under it, its output
and its outputs read with bounded waits; every watch is killed at the end of its test."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import farmer_env, pids_matching, start_farmer, wait_no_process_in

COPY = """
[task.copy]
foreach = "src/{n}.txt"
inputs = ["src/{n}.txt"]
outputs = ["out/{n}.txt"]
cmd = "cp {inputs} {outputs}"
"""


class Watching:
    """A running `farmer watch`, its stdout and stderr in files outside the project."""

    def __init__(self, project, tmp: Path, *args: str, env: dict | None = None) -> None:
        self.project = project
        self.out_path, self.err_path = tmp / "watch.out", tmp / "watch.err"
        self.runtime = tmp / "run"
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = start_farmer(project.root, "watch", *args, stdout=out, stderr=err, start_new_session=True,
                                     env={"XDG_RUNTIME_DIR": str(self.runtime), **(env or {})})
        project.procs.append(self.proc)

    @property
    def stdout(self) -> str:
        return self.out_path.read_text()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def summaries(self) -> list[str]:
        return [line for line in self.stdout.splitlines()
                if line.startswith(("farmer: ran ", "farmer: FAILED ran "))]

    def wait_until(self, what, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not what():
            assert self.proc.poll() is None, f"the watch ended ({self.proc.returncode}):\n{self!r}"
            assert time.monotonic() < deadline, f"timed out waiting:\n{self!r}"
            time.sleep(0.02)

    def builds(self, n: int, timeout: float = 20.0) -> None:
        """Wait until `n` builds have finished and the watch waits again."""
        self.wait_until(lambda: len(self.summaries()) >= n
                        and self.stderr.count("waiting for changes") >= n, timeout)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10.0) -> float:
        """Signal the watch; how long it took to exit."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        self.proc.wait(timeout)
        return time.monotonic() - t0

    def __repr__(self) -> str:
        return f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}"


@pytest.fixture
def watching(project, tmp_path):
    started: list[Watching] = []

    def start(*args: str, **kw) -> Watching:
        w = Watching(project, tmp_path, *args, **kw)
        started.append(w)
        return w

    yield start
    for w in started:  # project.cleanup kills what is left
        if w.proc.poll() is None:
            w.stop(signal.SIGKILL)


def _edit(project, rel: str, text: str) -> None:
    """Write through a new file renamed over the old, as editors save."""
    path = project.path(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".swp~")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_an_edit_rebuilds_what_reads_it_and_farmers_own_writes_start_nothing(project, watching):
    project.farmfile(COPY)
    project.write("src/a.txt", "a1\n")
    project.write("src/b.txt", "b1\n")
    w = watching()
    w.builds(1)
    assert project.read("out/a.txt") == "a1\n"
    _edit(project, "src/a.txt", "a2\n")
    w.wait_until(lambda: project.read("out/a.txt") == "a2\n")
    w.builds(2)
    assert "src/a.txt changed" in w.stderr, w
    assert w.summaries()[1].startswith("farmer: ran 1, up to date 1"), w
    assert "copy out/a.txt" in w.stdout.split(w.summaries()[0])[1], w
    # Its own outputs, logs and state were written while it watched: none starts a build,
    # and neither does a file touched but unchanged.
    project.touch_later("src/b.txt")
    time.sleep(1.0)
    assert len(w.summaries()) == 2, w
    assert w.stop() < 2.0
    assert w.proc.returncode == 130, w


def test_a_new_file_matched_by_a_foreach_is_built(project, watching):
    project.farmfile(COPY)
    project.write("src/a.txt", "a\n")
    w = watching()
    w.builds(1)
    _edit(project, "src/c.txt", "c\n")
    w.wait_until(lambda: project.exists("out/c.txt") and project.read("out/c.txt") == "c\n")
    w.builds(2)
    assert "+src/c.txt changed" in w.stderr, w
    project.remove("src/c.txt")  # and a file gone is a change too: a graph without it
    w.builds(3)
    assert "-src/c.txt changed" in w.stderr, w
    assert w.summaries()[2].startswith("farmer: ran 0, up to date 1,"), w


def test_a_farmfile_edit_reads_the_graph_again_and_a_bad_one_waits_for_the_next(project, watching):
    project.farmfile(COPY)
    project.write("src/a.txt", "a\n")
    w = watching()
    w.builds(1)
    _edit(project, "Farmfile", COPY.replace("cp {inputs} {outputs}", "tr a-z A-Z < {inputs} > {outputs}"))
    w.wait_until(lambda: project.read("out/a.txt") == "A\n")
    w.builds(2)
    assert "Farmfile changed" in w.stderr, w
    _edit(project, "Farmfile", COPY + "[task.copy]\n")  # a TOML error: said, and the watch goes on
    w.wait_until(lambda: "farmer: error: " in w.stderr)
    assert "Traceback" not in w.stderr, w
    _edit(project, "Farmfile", COPY)
    w.wait_until(lambda: project.read("out/a.txt") == "a\n")
    w.builds(3)


def test_an_input_edited_while_a_build_runs_is_built_after_it(project, watching):
    project.farmfile("""
        [task.slow]
        inputs = ["in.txt"]
        outputs = ["out.txt"]
        cmd = "sleep 0.8; cp {inputs} {outputs}"
    """)
    project.write("in.txt", "1\n")
    w = watching()
    w.wait_until(lambda: "slow out.txt" in w.stdout)  # the first build runs
    _edit(project, "in.txt", "2\n")
    w.wait_until(lambda: project.exists("out.txt") and project.read("out.txt") == "2\n")
    w.builds(2)


def test_failures_are_printed_in_full_and_the_watch_goes_on(project, watching):
    project.farmfile("""
        [task.check]
        inputs = ["in.txt"]
        outputs = ["out.txt"]
        cmd = "grep -q good {inputs} || {{ echo 'in.txt is not good' >&2; exit 4; }}; cp {inputs} {outputs}"
    """)
    project.write("in.txt", "good\n")
    w = watching()
    w.builds(1)
    _edit(project, "in.txt", "bad\n")
    w.wait_until(lambda: "in.txt is not good" in w.stdout + w.stderr)
    w.builds(2)
    assert "ran 0, up to date 0, cached 0, failed 1" in w.stdout.splitlines()[-1], w
    time.sleep(0.5)  # farmer moved its output away: no news
    assert w.stderr.count("changed") == 1, w
    _edit(project, "in.txt", "good again\n")
    w.wait_until(lambda: project.exists("out.txt") and project.read("out.txt") == "good again\n")
    assert w.proc.poll() is None


def test_the_lock_is_held_while_watching(project, watching):
    project.farmfile(COPY)
    project.write("src/a.txt", "a\n")
    w = watching()
    w.builds(1)
    r = project.build()  # answered by the watch, between its builds (docs/serve.md)
    assert r.returncode == 0 and r.summary()["up to date"] == 1, r
    r = project.build("-vj1")  # a form its client does not read: run here, beside the watch
    assert r.returncode == 3, r
    assert "farmer watch" in r.stderr and str(w.proc.pid) in r.stderr, r
    assert "Traceback" not in r.stderr
    w.stop(signal.SIGTERM)
    assert w.proc.returncode == 143, w
    assert project.build().returncode == 0  # released with the watch


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_watch_and_everything_it_started(project, watching, sig):
    sleep = project.unique_sleep(30)
    project.farmfile(f"""
        [world.w]
        setup = ["import time"]

        [task.fast]
        world = "w"
        inputs = ["fast.py"]
        outputs = ["out/fast.txt"]
        python = "fast.py {{outputs}}"

        [task.slow]
        world = "w"
        inputs = ["slow.py"]
        outputs = ["out/slow.txt"]
        python = "slow.py {{outputs}}"

        [task.sleepy]
        inputs = ["in.txt"]
        outputs = ["out/sleepy.txt"]
        cmd = "{sleep}; cp {{inputs}} {{outputs}}"
    """)
    project.write("fast.py", "import sys\nopen(sys.argv[1], 'w').write('x')\n")
    project.write("slow.py", "import sys, time\ntime.sleep(30)\n")
    project.write("in.txt", "x\n")
    w = watching("-j", "4")
    w.wait_until(lambda: project.exists("out/fast.txt") and pids_matching(sleep))
    assert w.stop(sig) < 2.0
    assert w.proc.returncode == 128 + sig, w
    assert "Traceback" not in w.stderr, w
    assert wait_no_process_in(project) == [], "a world or command outlived the watch"
    assert os.listdir(w.runtime) == [], "the FIFO directory outlived the watch"


def test_without_watchfiles_it_polls_with_a_warning(project, watching, tmp_path):
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "watchfiles").mkdir()
    (hide / "watchfiles" / "__init__.py").write_text(  # as if it were not installed
        "raise ModuleNotFoundError(\"No module named 'watchfiles'\", name='watchfiles')\n")
    project.farmfile(COPY)
    project.write("src/a.txt", "a1\n")
    env = farmer_env()
    w = watching(env={"PYTHONPATH": f"{hide}{os.pathsep}{env['PYTHONPATH']}"})
    w.builds(1)
    assert "watchfiles is not installed" in w.stderr and "polls" in w.stderr, w
    _edit(project, "src/a.txt", "a2\n")
    w.wait_until(lambda: project.read("out/a.txt") == "a2\n")
    _edit(project, "src/d.txt", "d\n")
    w.wait_until(lambda: project.exists("out/d.txt"))


WORLDS = """
[world.base]
setup = ["open('setups.log', 'a').write('base\\\\n')", "import os", "SEEN = []"]

[world.data]
parent = "base"
inputs = ["data.txt"]
setup = ["open('setups.log', 'a').write('data\\\\n')", "DATA = open('data.txt').read().strip()"]

[task.report]
foreach = "q/{q}.py"
world = "data"
inputs = ["q/{q}.py"]
outputs = ["out/{q}.txt"]
python = "q/{q}.py {outputs}"
"""

# A task that mutates the world's globals: a fork's change must never reach the world.
REPORT = """import os, sys
SEEN.append(sys.argv[1])
open(sys.argv[1], 'w').write(f"{DATA} {len(SEEN)} {os.getppid()} #VERSION\\n")
"""


def _worlds_project(project) -> None:
    project.farmfile(WORLDS)
    project.write("data.txt", "d1\n")
    for q in ("r1", "r2"):
        project.write(f"q/{q}.py", REPORT.replace("VERSION", "0"))


def _setups(project) -> list[str]:
    return project.read("setups.log").split()


def test_worlds_stay_warm_across_builds_and_tasks_never_change_them(project, watching):
    _worlds_project(project)
    w = watching()
    w.builds(1)
    assert _setups(project) == ["base", "data"]
    parents = set()
    for n in range(1, 4):
        _edit(project, "q/r1.py", REPORT.replace("VERSION", str(n)))
        w.wait_until(lambda: project.read("out/r1.txt").endswith(f"#{n}\n"))
        w.builds(n + 1)
        data, seen, parent, _ = project.read("out/r1.txt").split()
        assert (data, seen) == ("d1", "1"), "a task saw what an earlier task did to the world"
        parents.add(parent)
    assert _setups(project) == ["base", "data"], "a world was set up again"
    assert len(parents) == 1, "the tasks ran in more than one world process"
    assert os.path.exists(f"/proc/{parents.pop()}"), "the world did not outlive its builds"
    assert w.stop() < 2.0
    assert w.proc.returncode == 130, w
    assert wait_no_process_in(project) == []
    assert os.listdir(w.runtime) == [], "the FIFO directory outlived the watch"


def test_a_changed_world_input_restarts_that_world_only(project, watching):
    _worlds_project(project)
    w = watching()
    w.builds(1)
    _edit(project, "data.txt", "d2\n")
    w.wait_until(lambda: project.read("out/r1.txt").startswith("d2 ")
                 and project.read("out/r2.txt").startswith("d2 "))
    w.builds(2)
    assert _setups(project) == ["base", "data", "data"], "the parent world was set up again"
    _edit(project, "q/r2.py", REPORT.replace("VERSION", "5"))  # and the new one stays warm
    w.wait_until(lambda: project.read("out/r2.txt").endswith("#5\n"))
    w.builds(3)
    assert _setups(project) == ["base", "data", "data"]


def test_a_module_a_world_setup_imports_restarts_the_world_once(project, watching):
    project.farmfile("""
        [world.w]
        setup = ["open('setups.log', 'a').write('w\\\\n')", "import setupmod"]
        [task.t]
        inputs = ["t.py"]
        outputs = ["out/t.txt"]
        world = "w"
        python = "t.py {outputs}"
    """)
    project.write("setupmod.py", "FACTOR = 1\n")
    task = "import sys\nopen(sys.argv[1], 'w').write(f'{setupmod.FACTOR} #VERSION\\n')\n"
    project.write("t.py", task.replace("VERSION", "0"))
    w = watching()
    w.builds(1)
    assert project.read("out/t.txt") == "1 #0\n"
    _edit(project, "setupmod.py", "FACTOR = 2\n")  # not declared: the setup's recorded read
    w.wait_until(lambda: project.read("out/t.txt").startswith("2 "))
    w.builds(2)
    assert _setups(project) == ["w", "w"]
    _edit(project, "t.py", task.replace("VERSION", "1"))
    w.wait_until(lambda: project.read("out/t.txt") == "2 #1\n")
    w.builds(3)
    assert _setups(project) == ["w", "w"], "the restarted world was not kept warm"


def test_a_world_that_died_between_builds_is_restarted(project, watching):
    _worlds_project(project)
    w = watching()
    w.builds(1)
    world = int(project.read("out/r1.txt").split()[2])  # the data world forked the task
    os.kill(world, signal.SIGKILL)
    time.sleep(0.2)
    _edit(project, "q/r1.py", REPORT.replace("VERSION", "7"))
    w.wait_until(lambda: project.read("out/r1.txt").endswith("#7\n"))
    w.builds(2)
    assert w.summaries()[1].startswith("farmer: ran 1, up to date 1, cached 0, failed 0"), w
    assert _setups(project) == ["base", "data", "data"]
    assert int(project.read("out/r1.txt").split()[2]) != world


def test_a_header_a_depfile_names_is_watched(project, watching):
    project.farmfile("""
        [task.compile]
        inputs = ["main.c"]
        outputs = ["main.o"]
        depfile = "main.d"
        cmd = "printf 'main.o: main.c inc/config.h\\\\n' > {depfile}; cat main.c inc/config.h > {outputs}"
    """)
    project.write("main.c", "int main;\n")
    project.write("inc/config.h", "#define A 1\n")
    w = watching()
    w.builds(1)
    _edit(project, "inc/config.h", "#define A 2\n")  # known only from the depfile
    w.wait_until(lambda: project.read("main.o").endswith("#define A 2\n"))
    w.builds(2)
    assert "inc/config.h changed" in w.stderr, w


@pytest.mark.parametrize("sig, delay_ms", [(signal.SIGINT, d) for d in (0, 1, 3, 6, 10, 20)]
                         + [(signal.SIGTERM, d) for d in (0, 3)])
def test_a_signal_as_a_rebuild_ends_stops_the_watch(project, watching, sig, delay_ms):
    """Ctrl-C (or SIGTERM) just as a rebuild ends (while the build finishes its records, or
    the watch takes over again) is never lost: the watch exits at once, 128 + the signal,
    its worlds stopped and their FIFO directory removed."""
    _worlds_project(project)
    w = watching()
    w.builds(1)
    before = project.read("out/r1.txt")
    _edit(project, "q/r1.py", REPORT.replace("VERSION", "1"))
    deadline = time.monotonic() + 20
    while project.read("out/r1.txt") == before:  # the rebuild's task is done, the build ends
        assert w.proc.poll() is None and time.monotonic() < deadline, w
        time.sleep(0.001)
    time.sleep(delay_ms / 1000)
    t0 = time.monotonic()
    w.proc.send_signal(sig)
    try:
        w.proc.wait(3)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the watch lost the signal sent {delay_ms} ms after the rebuild's task:\n{w!r}")
    assert time.monotonic() - t0 < 2.0
    assert w.proc.returncode == 128 + sig, w
    assert "Traceback" not in w.stderr, w
    assert wait_no_process_in(project) == [], "a world outlived the watch"
    assert os.listdir(w.runtime) == [], "the FIFO directory outlived the watch"


def test_a_header_saved_while_its_reader_runs_is_built_again(project, watching):
    """The header a depfile names, saved after the command read it, before it ended: the
    build records it as changed (farmer/record/recorder.py) and the watch builds again, as for a
    declared input."""
    project.farmfile("""
        [task.compile]
        inputs = ["main.c"]
        outputs = ["main.o"]
        depfile = "main.d"
        cmd = "cat main.c inc/config.h > {outputs}; printf 'main.o: main.c inc/config.h\\\\n' > {depfile}; touch started; while [ ! -e go ]; do sleep 0.02; done"
    """)
    project.write("main.c", "int main;\n")
    project.write("inc/config.h", "#define A 1\n")
    w = watching()
    w.wait_until(lambda: project.exists("started"))
    _edit(project, "inc/config.h", "#define A 2\n")
    project.write("go", "")
    w.wait_until(lambda: project.read("main.o").endswith("#define A 2\n"))
    w.builds(2)
    assert "inc/config.h changed" in w.stderr, w
    assert "input inc/config.h changed while main.o ran" in w.stdout, w
    r = project.build()  # answered by the watch: up to date, as it left it
    assert r.returncode == 0 and r.summary()["up to date"] == 1, r
    assert w.stop() < 2.0 and w.proc.returncode == 130, w
    r = project.build()
    assert r.returncode == 0 and r.summary()["up to date"] == 1, r


def test_a_world_the_farmfile_no_longer_declares_is_stopped(project, watching):
    _worlds_project(project)
    w = watching()
    w.builds(1)
    world = int(project.read("out/r1.txt").split()[2])
    _edit(project, "Farmfile", COPY)
    project.write("src/a.txt", "a\n")
    w.wait_until(lambda: project.exists("out/a.txt"))
    w.builds(2)
    deadline = time.monotonic() + 3
    while os.path.exists(f"/proc/{world}") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(f"/proc/{world}"), "a world of the old Farmfile is still alive"


def test_the_worlds_are_set_up_after_the_first_build_so_the_first_save_is_warm(project, watching):
    _worlds_project(project)
    assert project.build().returncode == 0  # the watch's first build then runs nothing
    project.write("setups.log", "")
    w = watching()
    w.builds(1)
    assert w.summaries()[0].startswith("farmer: ran 0, up to date 2"), w
    w.wait_until(lambda: "set up in" in w.stderr)
    assert "worlds base, data set up in" in w.stderr and "the next build starts warm" in w.stderr, w
    assert _setups(project) == ["base", "data"], "the watch did not set up the worlds up front"
    _edit(project, "q/r1.py", REPORT.replace("VERSION", "1"))
    w.wait_until(lambda: project.read("out/r1.txt").endswith("#1\n"))
    w.builds(2)
    assert _setups(project) == ["base", "data"], "the first save set a world up again"
    worlds = project.last_build()["worlds"]
    assert [(e["name"], e["status"], e["start_s"]) for e in worlds] == [("base", "warm", None),
                                                                       ("data", "warm", None)]
    assert w.stderr.count("set up in") == 1, "a warm world was set up again after a build"
