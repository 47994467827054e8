"""A folder of outputs replaced by a symlink out of the root after a build: the next build,
`clean` and `clean --dead` refuse it with one line, whether the graph comes from the graph
cache or not, and nothing outside the root is written or deleted (issue 11)."""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import assert_error

FARMFILE = """\
    [task.gen]
    inputs = ["in.txt"]
    outputs = ["gen/victim.txt"]
    cmd = "cp {inputs} {outputs}"
    """


@pytest.fixture
def planted(project, tmp_path):
    """A project built (in-process) whose gen/ now leads to a folder outside the root holding a
    victim."""
    project.farmfile(FARMFILE)
    project.write("in.txt", "mine\n")
    assert project.build_in_process().returncode == 0
    assert (project.root / ".farmer" / "graph.cache").exists()  # the next load is from it
    away = tmp_path / "elsewhere"
    away.mkdir()
    (away / "victim.txt").write_text("precious\n")
    shutil.rmtree(project.path("gen"))
    os.symlink(away, project.path("gen"))
    project.write("in.txt", "changed\n")
    return away


@pytest.mark.parametrize("cache", ["graph-cache", "no-graph-cache"])
def test_build_refuses_a_symlinked_output_folder(project, planted, cache):
    if cache == "no-graph-cache":
        os.unlink(project.root / ".farmer" / "graph.cache")
    r = project.build()
    assert_error(r, "gen/victim.txt", "outside the project root through a symlink")
    assert (planted / "victim.txt").read_text() == "precious\n"


@pytest.mark.parametrize("args", [(), ("gen",)])
def test_clean_refuses_a_symlinked_output_folder(project, planted, args):
    r = project.farmer("clean", *args)
    assert_error(r, "gen/victim.txt", "outside the project root through a symlink")
    assert (planted / "victim.txt").read_text() == "precious\n"
