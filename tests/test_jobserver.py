"""GNU make's jobserver (farmer/run/jobserver.py): farmer as a client under `make -jN` (make's
pipe, and a FIFO as make 4.4 names it), and as a pool for the commands it runs, so that a
recursive make inside a step shares farmer's -j. Concurrency is measured from the start and
end times each job writes."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import farmer_env, run_farmer
from test_ninja_cli import needs

from farmer.run.jobserver import Jobserved, Jobserver, auth_of

SLEEP_S = 0.4


def max_concurrency(folder: Path) -> int:
    """The most jobs running at once, from the `X.start` and `X.end` times they wrote."""
    events = []
    for start in glob.glob(str(folder / "*.start")):
        events.append((float(Path(start).read_text()), 1))
        events.append((float(Path(start[:-len(".start")] + ".end").read_text()), -1))
    assert events, f"no job ran in {folder}"
    running = most = 0
    for _, d in sorted(events):
        running += d
        most = max(most, running)
    return most


JOB = "date +%s.%N > out/{k}.start; sleep " + str(SLEEP_S) + "; date +%s.%N > out/{k}.end"


def sleeps(tmp_path: Path, count: int) -> Path:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    for k in range(count):
        (tmp_path / "in" / f"s{k}.txt").write_text(f"{k}\n")
    (tmp_path / "Farmfile").write_text(textwrap.dedent(f"""\
        [task.s]
        foreach = "in/{{k}}.txt"
        inputs = ["in/{{k}}.txt"]
        outputs = ["out/{{k}}.txt"]
        cmd = "{JOB}; cp {{inputs}} {{outputs}}"
        """))
    return tmp_path


def test_auth_is_the_last_one_in_makeflags():
    assert auth_of(" -j2 --jobserver-auth=3,4") == "3,4"
    assert auth_of("kr -j8 --jobserver-auth=fifo:/tmp/GMfifo1 --jobserver-auth=fifo:/tmp/GMfifo2") == "fifo:/tmp/GMfifo2"
    assert auth_of("--jobserver-fds=5,6 -j") == "5,6"
    assert auth_of("-k") is None


class _Inner:
    """An executor stand-in: what runs is what was started and not reported ended."""

    load = None
    selector = None

    def __init__(self) -> None:
        self.runs: list[int] = []

    def can_start(self) -> bool:
        return True

    def start(self, comp) -> None:
        self.runs.append(comp)

    def running(self) -> int:
        return len(self.runs)

    def wait(self, timeout):
        return [self.runs.pop()] if self.runs else []

    def close(self) -> None:
        pass


def test_the_first_job_is_free_each_other_takes_a_token_and_gives_it_back():
    r, w = os.pipe()
    os.set_blocking(r, False)
    check = os.dup(r)  # what is in the pipe, after the jobserver closed its ends
    os.write(w, b"ab")  # two tokens: three jobs at most
    served = Jobserved(_Inner(), Jobserver(r, w))
    started = 0
    while served.can_start():
        served.start(started)
        started += 1
    assert started == 3 and served.starved
    served.wait(None)  # one ended: a token goes back
    assert os.read(check, 8) == b"b"
    served.close()  # and every other one at the end
    assert os.read(check, 8) == b"a"
    os.close(check)


def test_make_j2_runs_farmer_on_its_tokens(tmp_path):
    make = needs("make")
    sleeps(tmp_path, 6)
    (tmp_path / "Makefile").write_text(f"all:\n\t+{sys.executable} -m farmer build\n")
    r = subprocess.run([make, "-j2"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False, env=farmer_env(
        unset=("MAKEFLAGS", "MFLAGS", "MAKELEVEL")))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ran 6" in r.stdout
    assert max_concurrency(tmp_path / "out") == 2  # farmer's own default here is 3 or more


def test_a_fifo_jobserver_is_used_and_its_tokens_come_back(tmp_path):
    sleeps(tmp_path, 4)
    fifo = tmp_path / "jobserver"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # make's end: holds the tokens
    try:
        os.write(keep, b"+")  # make -j2: one token besides farmer's own
        r = run_farmer(tmp_path, "build", env={"MAKEFLAGS": f" -j2 --jobserver-auth=fifo:{fifo}"})
        assert r.returncode == 0, r.stderr
        assert max_concurrency(tmp_path / "out") == 2
        assert os.read(keep, 8) == b"+"  # given back
    finally:
        os.close(keep)


def test_a_recursive_make_in_a_step_shares_farmers_j(tmp_path):
    make = needs("make")
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    for k in ("a", "b"):
        (tmp_path / "in" / f"{k}.txt").write_text(k)
    (tmp_path / "sub.mk").write_text("all: j1 j2 j3\nj%:\n\t@" + JOB.replace("{k}", "$(K)$@") + "\n")
    (tmp_path / "Farmfile").write_text(textwrap.dedent(f"""\
        [task.m]
        foreach = "in/{{k}}.txt"
        inputs = ["in/{{k}}.txt"]
        outputs = ["out/{{k}}.done"]
        cmd = "{make} -s -f sub.mk K={{k}} && touch {{outputs}}"
        """))
    r = run_farmer(tmp_path, "build", "-j3", unset=("MAKEFLAGS", "MFLAGS", "MAKELEVEL"))
    assert r.returncode == 0, r.stdout + r.stderr
    # two makes of three jobs each: without the pool each make runs one at a time (2 at once),
    # each with its own -j3 they would run 6; sharing farmer's, 3
    assert max_concurrency(tmp_path / "out") == 3
    for stamp in (tmp_path / "out").iterdir():
        stamp.unlink()
    r = run_farmer(tmp_path, "build", "-j3", env={"FARMER_JOBSERVER": "0"}, unset=("MAKEFLAGS", "MFLAGS", "MAKELEVEL"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert max_concurrency(tmp_path / "out") == 2  # turned off: each make on its own, serial


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))

