"""`farmer build` ends through os._exit, without the interpreter's teardown (cli/exit.py's leave):
nothing it printed or wrote is lost. Its output written to a file or a pipe (buffered, not
a terminal) is all there, state.db is closed (no -wal or -shm left) and the next build is a
no-op that says so."""

import subprocess
import sys

import pytest
from conftest import farmer_env

FARMFILE = """
[task.t]
foreach = {n = ["1", "2", "3"]}
outputs = ["out/{n}.txt"]
cmd = "echo {n} > {outputs}"

[task.last]
inputs = ["@t"]
outputs = ["out/all.txt"]
cmd = "cat {inputs} > {outputs}"
"""


def _build(project, to_file: bool) -> tuple[int, str]:
    env = farmer_env()
    env.pop("PYTHONUNBUFFERED", None)  # stdout buffered, as for any user's pipe or file
    cmd = [sys.executable, "-m", "farmer", "build"]
    if to_file:
        out = project.path("build-output.txt")
        with open(out, "wb") as f:
            code = subprocess.run(cmd, cwd=project.root, stdout=f, stderr=subprocess.STDOUT, env=env,
                                  timeout=60).returncode
        return code, out.read_text()
    cp = subprocess.run(cmd, cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                        timeout=60)
    return cp.returncode, cp.stdout.decode()


@pytest.mark.parametrize("to_file", [False, True])
def test_build_output_and_state_survive_the_quick_exit(project, to_file):
    project.farmfile(FARMFILE)
    code, out = _build(project, to_file)
    assert code == 0, out
    lines = out.splitlines()
    assert len(lines) == 5 and lines[-1].startswith("farmer: ran 4, up to date 0"), out
    assert sorted(line.split()[0] for line in lines[:4]) == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"], out
    assert project.read("out/all.txt") == "1\n2\n3\n"
    assert project.exists(".farmer/state.db")
    assert not project.exists(".farmer/state.db-wal") and not project.exists(".farmer/state.db-shm")
    assert set(project.statuses().values()) == {"ran"}

    code, out = _build(project, to_file)  # the no-op: its proof and its line
    assert code == 0, out
    assert out.startswith("farmer: ran 0, up to date 4"), out
    assert set(project.statuses().values()) == {"up-to-date"}

    project.write("out/1.txt", "changed\n")  # the state recorded by the first build decides
    code, out = _build(project, to_file)
    assert code == 0, out
    assert out.splitlines()[-1].startswith("farmer: ran 1, up to date 3"), out


def test_a_profiled_build_still_writes_its_profile(project, tmp_path):
    """`python -m cProfile -o FILE -m farmer build` (bench/profile_noop.py): the profiler
    writes FILE at exit, so the build takes the ordinary exit under it."""
    project.farmfile(FARMFILE)
    prof = tmp_path / "build.prof"
    cp = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "farmer", "build"],
                        cwd=project.root, capture_output=True, env=farmer_env(), timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert b"farmer: ran 4" in cp.stdout, cp.stdout
    assert prof.stat().st_size > 0
