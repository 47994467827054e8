"""`.farmer/` keeps itself out of git (issue 34): farmer writes `.farmer/.gitignore` holding
`*` when it makes the folder, as pytest does for its cache, and a build that writes state
adds it to a `.farmer/` an older farmer made without one. A no-op build does not look."""

from __future__ import annotations

import shutil
import subprocess

import pytest

FARMFILE = """\
    [task.up]
    inputs = ["in.txt"]
    outputs = ["out.txt"]
    cmd = "tr a-z A-Z < {inputs} > {outputs}"
    """


def _project(project):
    project.farmfile(FARMFILE)
    project.write("in.txt", "a\n")


def test_the_first_build_writes_a_gitignore_that_ignores_everything(project):
    _project(project)
    assert project.build().returncode == 0
    lines = [l for l in project.read(".farmer/.gitignore").splitlines() if not l.startswith("#")]
    assert lines == ["*"]


def test_a_build_that_fails_before_it_writes_state_still_keeps_its_folder_out_of_git(project):
    project.farmfile(FARMFILE.replace("in.txt", "missing.txt"))
    r = project.build()
    assert r.returncode == 2, r
    assert project.exists(".farmer/lock")  # taken before the graph was read
    assert project.exists(".farmer/.gitignore")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_status_does_not_show_the_farmer_folder(project):
    _project(project)
    git = lambda *a: subprocess.run(["git", *a], cwd=project.root, capture_output=True, text=True,  # noqa: E731
                                    check=True).stdout
    git("init", "-q")
    assert project.build().returncode == 0
    listed = git("status", "--porcelain", "--untracked-files=all").split("\n")
    assert not [l for l in listed if ".farmer" in l], listed
    assert " out.txt" in "\n".join(listed)  # the build's output is the user's to decide on


def test_an_older_farmer_folder_gets_it_at_the_next_build_that_writes_state(project):
    _project(project)
    assert project.build().returncode == 0
    project.remove(".farmer/.gitignore")  # as a farmer before it left the folder
    assert project.build().summary()["up to date"] == 1  # the no-op build does not look
    assert not project.exists(".farmer/.gitignore")
    project.write("in.txt", "b\n")
    assert project.build().summary()["ran"] == 1
    assert "*" in project.read(".farmer/.gitignore").splitlines()


def test_a_gitignore_of_the_users_is_left_as_it_is(project):
    _project(project)
    project.write(".farmer/.gitignore", "lock\n")
    assert project.build().returncode == 0
    assert project.read(".farmer/.gitignore") == "lock\n"


def test_in_process_builds_write_it_too(project):
    _project(project)
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.exists(".farmer/.gitignore")
