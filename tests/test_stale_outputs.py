"""Stale outputs (SPEC §2, issue 11): a file an earlier build of the same Farmfile wrote as
a declared output, which no computation declares now, is removed at the start of the next
build, named on stderr, before globs and foreach patterns are matched; `farmer clean
--dead` removes only those. What farmer did not write, or what was edited since, is kept."""

from __future__ import annotations

import os
import shutil

from conftest import assert_error
from helpers import STALE_CHAIN, built_stale_chain


def _project(project):
    built_stale_chain(project)
    assert project.read("all.txt") == "A\nB\nC\n"


def test_deleting_a_foreach_source_removes_its_outputs_before_globs_match(project):
    _project(project)
    project.remove("src/b.txt")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert "removed stale output out/b.txt" in r.stderr, r
    assert "removed stale output twice/b.txt" in r.stderr, r  # a foreach over outputs, too
    assert not project.exists("out/b.txt") and not project.exists("twice/b.txt")
    assert project.read("all.txt") == "A\nC\n"  # what a clean build makes
    r = project.build_in_process()
    assert r.returncode == 0 and r.summary()["ran"] == 0 and "stale" not in r.stderr, r


def test_an_output_no_longer_declared_by_an_edited_farmfile(project):
    _project(project)
    project.farmfile(STALE_CHAIN.replace('outputs = ["all.txt"]', 'outputs = ["sum.txt"]')
                     .replace("> {outputs}\"\n    \"\"\"", ""))
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert "removed stale output all.txt" in r.stderr
    assert not project.exists("all.txt") and project.exists("sum.txt")


def test_what_farmer_did_not_write_or_was_edited_is_kept(project):
    _project(project)
    project.write("out/c.txt", "my own edit\n")  # edited after farmer wrote it
    project.remove("src/c.txt")
    project.remove("src/b.txt")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/c.txt") == "my own edit\n"
    assert not project.exists("out/b.txt")


def test_clean_dead_removes_only_stale_outputs(project):
    _project(project)
    project.remove("src/a.txt")
    # Another Farmfile in the same root: what it wrote is not this one's to remove.
    project.write("Other", '[task.o]\noutputs = ["other.txt"]\ncmd = "echo o > {outputs}"\n')
    assert project.build("-f", "Other").returncode == 0
    r = project.farmer("clean", "--dead")
    assert r.returncode == 0, r
    assert "removed stale output out/a.txt" in r.stderr and "removed 2 stale outputs" in r.stdout, r
    assert not project.exists("out/a.txt") and not project.exists("twice/a.txt")
    for kept in ("out/b.txt", "twice/c.txt", "all.txt", "other.txt"):
        assert project.exists(kept), kept
    assert project.read("all.txt") == "A\nB\nC\n"  # clean --dead builds nothing
    r = project.build()
    assert r.returncode == 0 and project.read("all.txt") == "B\nC\n", r
    assert project.exists("other.txt")


def test_clean_dead_refuses_a_symlink_out_of_the_root(project, tmp_path):
    _project(project)
    away = tmp_path / "elsewhere"
    shutil.copytree(project.path("out"), away)
    shutil.rmtree(project.path("out"))
    os.symlink(away, project.path("out"))
    project.remove("src/a.txt")
    r = project.farmer("clean", "--dead")
    assert_error(r, "outside the project root through a symlink")
    assert (away / "a.txt").exists()


def test_clean_dead_on_a_ninja_manifest_is_ninjas_cleandead(project):
    """What .ninja_log names (farmer writes it for what it ran) and the manifest no longer
    makes is removed; the rest stays."""
    project.write("build.ninja", "rule t\n  command = touch $out\nbuild x: t\nbuild y: t\n")
    assert project.farmer("build", "-f", "build.ninja").returncode == 0
    project.write("build.ninja", "rule t\n  command = touch $out\nbuild y: t\n")
    r = project.farmer("clean", "--dead", "-f", "build.ninja")
    assert (r.returncode, r.stdout) == (0, "Cleaning... 1 files.\n"), r
    assert not project.exists("x") and project.exists("y")
