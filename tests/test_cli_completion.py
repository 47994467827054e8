"""Shell completion (docs/cli.md): click's scripts for bash, zsh and fish, commands and
options, and TARGETs from the project's Farmfile."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, farmer_env


def completion(where, **env) -> subprocess.CompletedProcess:
    """The installed `farmer` script (bin/farmer), as a shell's completion calls it in
    `where` (a project or a directory)."""
    cwd = getattr(where, "root", where)
    return subprocess.run([sys.executable, str(REPO / "bin" / "farmer")], cwd=cwd, env=farmer_env(env),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o nosort -F _farmer_completion farmer"),
                                           ("zsh", "#compdef farmer"),
                                           ("fish", "complete --no-files --command farmer")])
def test_completion_scripts(project, shell, marker):
    r = completion(project, _FARMER_COMPLETE=f"{shell}_source")
    assert r.returncode == 0 and marker in r.stdout, r


def test_completion_completes_commands_and_options(project):
    r = completion(project, _FARMER_COMPLETE="bash_complete", COMP_WORDS="farmer re", COMP_CWORD="1")
    assert r.stdout.split() == ["plain,report"], r
    r = completion(project, _FARMER_COMPLETE="bash_complete", COMP_WORDS="farmer report --j", COMP_CWORD="2")
    assert r.stdout.split() == ["plain,--junit"], r


def test_completion_of_targets_from_the_farmfile(project, tmp_path):
    project.farmfile('[task.objects]\nforeach = {n = ["a", "b"]}\noutputs = ["build/{n}.o"]\ncmd = "touch {outputs}"\n'
                     '[task.other]\noutputs = ["out.txt"]\ncmd = "touch out.txt"\n')
    r = completion(project, _FARMER_COMPLETE="bash_complete", COMP_WORDS="farmer build o", COMP_CWORD="2")
    assert r.stdout.split() == ["plain,objects", "plain,other", "plain,out.txt"], r
    r = completion(project, _FARMER_COMPLETE="bash_complete", COMP_WORDS="farmer query build/", COMP_CWORD="2")
    assert r.stdout.split() == ["plain,build/a.o", "plain,build/b.o"], r
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = completion(elsewhere, _FARMER_COMPLETE="bash_complete", COMP_WORDS=f"farmer build -C {project.root} ot",
                   COMP_CWORD="4")
    assert r.stdout.split() == ["plain,other"], r


def test_completion_without_a_project_completes_nothing_and_says_nothing(tmp_path):
    r = completion(tmp_path, _FARMER_COMPLETE="bash_complete", COMP_WORDS="farmer build x", COMP_CWORD="2")
    assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr == "", r
