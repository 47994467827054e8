"""Stale outputs said before they go (issue 34): `farmer build -n` and `farmer plan` list the
files a build would remove first (an earlier build wrote them as declared outputs, no
computation declares them now), one line each, and `plan --json` has them as
`stale_outputs`; they remove nothing. The real build names each file it removed."""

from __future__ import annotations

import json

from helpers import STALE_CHAIN, built_stale_chain


def _project(project):
    built_stale_chain(project)


def _renamed(project):
    """all.txt renamed in the Farmfile: all.txt is stale."""
    _project(project)
    project.farmfile(STALE_CHAIN.replace('outputs = ["all.txt"]', 'outputs = ["sum.txt"]'))


LINE = "farmer: would remove stale output {} (no computation declares it now)"


def test_dry_run_lists_a_renamed_output_and_removes_nothing(project):
    _renamed(project)
    r = project.build("-n")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0] == LINE.format("all.txt"), r  # the build's first step, first
    assert lines[-1].startswith("farmer: would run 1 of "), r
    assert project.exists("all.txt")
    r = project.build()
    assert r.returncode == 0, r
    assert "farmer: removed stale output all.txt (no computation declares it now)" in r.stderr.splitlines(), r
    assert not project.exists("all.txt") and project.exists("sum.txt")
    r = project.build("-n")
    assert "stale" not in r.stdout, r


def test_plan_lists_them_after_its_heading_and_json_has_them(project):
    _renamed(project)
    r = project.farmer("plan")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0].startswith("farmer plan: 1 of "), r
    assert lines[1] == "  would remove stale output all.txt (no computation declares it now)", r
    assert lines[2].endswith("all sum.txt: never built"), r
    r = project.farmer("plan", "--json")
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["stale_outputs"] == ["all.txt"], r
    assert project.exists("all.txt")


def test_nothing_stale_lists_nothing(project):
    _project(project)
    assert json.loads(project.farmer("plan", "--json").stdout)["stale_outputs"] == []
    assert "stale" not in project.farmer("plan").stdout
    project.write("src/a.txt", "A2\n")
    r = project.build("-n")
    assert r.returncode == 0 and "stale" not in r.stdout, r


def test_an_edited_stale_output_is_not_listed_as_it_is_not_removed(project):
    _project(project)
    project.write("out/c.txt", "my own edit\n")
    project.remove("src/c.txt")
    project.remove("src/b.txt")
    r = project.build("-n")
    assert LINE.format("out/b.txt") in r.stdout.splitlines(), r
    assert "out/c.txt" not in "".join(l for l in r.stdout.splitlines() if "stale" in l), r


def test_dry_run_lists_what_goes_first_the_build_removes_what_that_made_stale(project):
    """Deleting a foreach source makes its output stale; once that is gone, what a foreach
    over outputs made of it is stale too: -n names the first, the build removes both."""
    _project(project)
    project.remove("src/b.txt")
    r = project.build("-n")
    assert [l for l in r.stdout.splitlines() if "stale" in l] == [LINE.format("out/b.txt")], r
    assert project.exists("out/b.txt") and project.exists("twice/b.txt")
    r = project.build()
    assert r.returncode == 0, r
    removed = sorted(l for l in r.stderr.splitlines() if "removed stale output" in l)
    assert [l.split()[4] for l in removed] == ["out/b.txt", "twice/b.txt"], r


def test_a_ninja_manifest_has_none_to_list(project):
    project.write("build.ninja", "rule t\n  command = touch $out\nbuild x: t\n")
    assert project.build().returncode == 0
    project.write("build.ninja", "rule t\n  command = touch $out\nbuild y: t\n")
    r = project.farmer("plan", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["stale_outputs"] == [], r
    r = project.build("-n")
    assert r.returncode == 0 and "stale" not in r.stdout, r


def test_in_process_dry_run_lists_them(project):
    _renamed(project)
    r = project.build_in_process("-n")
    assert r.returncode == 0, r
    assert LINE.format("all.txt") in r.stdout.splitlines(), r
