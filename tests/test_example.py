"""Farmfile.example, the first thing the README runs, builds and shows what farmer does: header
tracking through depfiles, early cutoff, and Python steps forked from one world."""

import json
import shutil

import pytest
from conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="the example compiles C with gcc")


@pytest.fixture
def example(project):
    shutil.copy(REPO / "Farmfile.example", project.root / "Farmfile.example")
    shutil.copytree(REPO / "example", project.root / "example")
    return project


def test_the_example_builds_with_a_world(example):
    r = example.build("-f", "Farmfile.example")
    assert r.returncode == 0, r
    assert r.summary()["ran"] == 7, r
    tasks = example.tasks()
    assert tasks["build/example/report.md"]["world"] == "stats"
    assert tasks["build/example/summary.json"]["world"] == "stats"
    assert example.read("build/example/report.md").startswith("# stats report\n")
    assert json.loads(example.read("build/example/summary.json")) == {"max": 9.0, "mean": 3.875, "n": 8.0}
    r = example.build("-f", "Farmfile.example", "--no-worlds")
    assert r.returncode == 0 and r.summary()["up to date"] == 7, r


def test_the_example_shows_header_tracking_early_cutoff_and_script_inputs(example):
    assert example.build("-f", "Farmfile.example").returncode == 0
    with open(example.path("example/src/stats.h"), "a") as f:
        f.write("/* a comment */\n")
    r = example.build("-f", "Farmfile.example")
    assert r.returncode == 0, r
    ran = {cid for cid, s in example.statuses().items() if s == "ran"}
    assert ran == {"build/example/main.o", "build/example/maximum.o", "build/example/mean.o"}, r
    script = example.path("example/scripts/summary.py")
    script.write_text(script.read_text().replace("indent=1", "indent=2"))
    r = example.build("-f", "Farmfile.example")
    assert r.returncode == 0, r
    assert {cid for cid, s in example.statuses().items() if s == "ran"} == {"build/example/summary.json"}, r
