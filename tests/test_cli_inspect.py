"""--version, query, graph, clean by the command line; the builds around them, in-process with
the fake executor (tests/fakes.py)."""

import json
import subprocess
import sys

import pytest
from conftest import assert_error, farmer_env

FF = """
[task.objects]
foreach = "src/{stem}.c"
inputs = ["src/{stem}.c"]
outputs = ["build/{stem}.o"]
cmd = "cp {inputs} {outputs}"

[task.app]
inputs = ["@objects"]
outputs = ["build/app"]
cmd = "cat {inputs} > {outputs}"

[task.docs]
inputs = ["README"]
outputs = ["out/readme.html"]
cmd = "cp {inputs} {outputs}"
"""


@pytest.fixture
def proj(project):
    project.farmfile(FF)
    project.write("src/a.c", "a\n")
    project.write("src/b.c", "b\n")
    project.write("README", "read me\n")
    return project


# ---------------------------------------------------------------- version --

def test_python_m_farmer_version(project):
    r = project.farmer("--version")
    assert r.returncode == 0, r
    assert "0.1.0" in r.stdout


def test_console_entry_point_version(tmp_path):
    # what the `farmer` console script (farmer.cli.app:main) does
    code = "import sys; sys.argv[0] = 'farmer'; from farmer.cli.app import main; main()"
    cp = subprocess.run([sys.executable, "-c", code, "--version"], cwd=tmp_path, capture_output=True,
                        text=True, timeout=60, stdin=subprocess.DEVNULL, env=farmer_env())
    assert cp.returncode == 0, cp
    assert "0.1.0" in cp.stdout


def test_installed_console_script_version(tmp_path):
    import shutil
    exe = shutil.which("farmer")
    if exe is None:
        pytest.skip("the farmer console script is not installed")
    cp = subprocess.run([exe, "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                        stdin=subprocess.DEVNULL, env=farmer_env())
    assert cp.returncode == 0, cp
    assert "0.1.0" in cp.stdout


# ------------------------------------------------------------------ query --

def test_query_output_path(proj):
    assert proj.build_in_process().returncode == 0
    r = proj.farmer("query", "build/a.o")
    assert r.returncode == 0, r
    out = r.stdout
    assert "objects" in out
    assert "cp src/a.c build/a.o" in out  # the command
    assert "src/a.c" in out and "build/a.o" in out
    assert "build/app" in out  # its consumer
    assert "src/b.c" not in out


def test_query_before_build(proj):
    r = proj.farmer("query", "build/app")
    assert r.returncode == 0, r
    out = r.stdout
    assert "app" in out
    assert "cat build/a.o build/b.o > build/app" in out
    assert "build/a.o" in out and "build/b.o" in out
    assert not proj.exists("build")


def test_query_task_name(proj):
    r = proj.farmer("query", "docs")
    assert r.returncode == 0, r
    assert "docs" in r.stdout and "README" in r.stdout and "out/readme.html" in r.stdout
    assert "cp README out/readme.html" in r.stdout


def test_query_unknown_target(proj):
    assert_error(proj.farmer("query", "nope/nothing"), "nope/nothing")


# ------------------------------------------------------------------ graph --

def test_graph_json(proj):
    r = proj.farmer("graph", "--format", "json")
    assert r.returncode == 0, r
    g = json.loads(r.stdout)
    comps = {c["id"]: c for c in g["computations"]}
    assert set(comps) == {"build/a.o", "build/b.o", "build/app", "out/readme.html"}
    assert comps["build/a.o"]["task"] == "objects"
    assert comps["build/a.o"]["inputs"] == ["src/a.c"]
    assert comps["build/a.o"]["outputs"] == ["build/a.o"]
    assert comps["build/app"]["inputs"] == ["build/a.o", "build/b.o"]
    edges = {tuple(e) for e in g["edges"]}
    assert edges == {("build/a.o", "build/app"), ("build/b.o", "build/app")}
    assert not proj.exists("build")


def test_graph_targets_restrict(proj):
    r = proj.farmer("graph", "--format", "json", "app")
    assert r.returncode == 0, r
    g = json.loads(r.stdout)
    ids = {c["id"] for c in g["computations"]}
    assert ids == {"build/a.o", "build/b.o", "build/app"}


def test_graph_dot(proj):
    r = proj.farmer("graph", "--format", "dot")
    assert r.returncode == 0, r
    assert r.stdout.lstrip().startswith("digraph")
    assert "build/app" in r.stdout and "build/a.o" in r.stdout
    assert r.stdout.rstrip().endswith("}")


def test_graph_default_format(proj):
    r = proj.farmer("graph")
    assert r.returncode == 0, r
    assert "build/app" in r.stdout


# ------------------------------------------------------------------ clean --

def test_clean_all(proj):
    assert proj.build_in_process().returncode == 0
    r = proj.farmer("clean")
    assert r.returncode == 0, r
    for p in ["build/a.o", "build/b.o", "build/app", "out/readme.html"]:
        assert not proj.exists(p), p
    assert proj.exists("src/a.c") and proj.exists("README") and proj.exists("Farmfile")
    r = proj.build_in_process()
    assert r.returncode == 0, r
    assert set(proj.statuses().values()) == {"ran"}
    for reason in proj.reasons().values():
        assert reason == "never built" or (reason.startswith("output ") and reason.endswith(" missing")), reason


def test_clean_target(proj):
    assert proj.build_in_process().returncode == 0
    r = proj.farmer("clean", "docs")
    assert r.returncode == 0, r
    assert not proj.exists("out/readme.html")
    assert proj.exists("build/app") and proj.exists("build/a.o")
    r = proj.build_in_process()
    assert r.returncode == 0, r
    st = proj.statuses()
    assert st["out/readme.html"] == "ran"
    assert st["build/app"] == "up-to-date" and st["build/a.o"] == "up-to-date"
    assert proj.reasons()["out/readme.html"] in ("never built", "output out/readme.html missing")


def test_clean_output_path_target(proj):
    assert proj.build_in_process().returncode == 0
    r = proj.farmer("clean", "build/b.o")
    assert r.returncode == 0, r
    assert not proj.exists("build/b.o")
    assert proj.exists("build/a.o")
    r = proj.build_in_process()
    assert r.returncode == 0, r
    st = proj.statuses()
    assert st["build/b.o"] == "ran"
    # b.o came out as before: its consumer is not rerun
    assert st["build/a.o"] == "up-to-date" and st["build/app"] == "up-to-date"


def test_clean_leaves_undeclared_files(proj):
    assert proj.build_in_process().returncode == 0
    proj.write("build/notes.txt", "mine\n")
    assert proj.farmer("clean").returncode == 0
    assert proj.read("build/notes.txt") == "mine\n"


def test_clean_unknown_target(proj):
    assert_error(proj.farmer("clean", "nope"), "nope")
