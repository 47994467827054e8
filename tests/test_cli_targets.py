"""Targets, [farmer] default, -C, -f, -n, --explain, plan. What a build of targets, -n and
--explain decide runs in-process with the fake executor (tests/fakes.py); -C, -f, plan, the
errors and where explain lines are printed go through the command line."""

import json
import re

import pytest
from conftest import assert_error

FF = """
[task.a]
inputs = ["src/a.txt"]
outputs = ["out/a.txt"]
cmd = "cp {inputs} {outputs}"

[task.b]
inputs = ["out/a.txt"]
outputs = ["out/b.txt"]
cmd = "cat {inputs} {inputs} > {outputs}"

[task.many]
foreach = "src/{n}.num"
inputs = ["src/{n}.num"]
outputs = ["out/{n}.sq"]
cmd = "cp {inputs} {outputs}"

[task.other]
outputs = ["out/other.txt"]
cmd = "echo other > {outputs}"
"""


@pytest.fixture
def proj(project):
    project.farmfile(FF)
    project.write("src/a.txt", "a\n")
    project.write("src/1.num", "1\n")
    project.write("src/2.num", "2\n")
    return project


ALL = {"out/a.txt", "out/b.txt", "out/1.sq", "out/2.sq", "out/other.txt"}


def built(project):
    return {p for p in ALL if project.exists(p)}


# ---------------------------------------------------------------- targets --

def test_task_target_builds_it_and_its_dependencies_only(proj):
    r = proj.build_in_process("b")
    assert r.returncode == 0, r
    assert built(proj) == {"out/a.txt", "out/b.txt"}
    st = proj.statuses()
    assert st["out/a.txt"] == "ran" and st["out/b.txt"] == "ran"
    for i in ["out/1.sq", "out/2.sq", "out/other.txt"]:
        assert st.get(i) != "ran", (i, st)
    assert sorted(r.finished_ids()) == ["out/a.txt", "out/b.txt"], r
    assert {s[1] for s in r.finished()} == {2}, r  # total: the requested targets' computations


def test_foreach_task_target_builds_all_its_computations(proj):
    r = proj.build_in_process("many")
    assert r.returncode == 0, r
    assert built(proj) == {"out/1.sq", "out/2.sq"}


def test_output_path_target(proj):
    r = proj.build_in_process("out/2.sq")
    assert r.returncode == 0, r
    assert built(proj) == {"out/2.sq"}
    assert r.finished_ids() == ["out/2.sq"], r


def test_several_targets(proj):
    r = proj.build_in_process("out/1.sq", "other")
    assert r.returncode == 0, r
    assert built(proj) == {"out/1.sq", "out/other.txt"}


def test_bare_build_builds_everything_without_default(proj):
    assert proj.build_in_process().returncode == 0
    assert built(proj) == ALL


def test_unknown_target(proj):
    r = proj.build("nosuchtarget")
    assert_error(r, "nosuchtarget")
    assert built(proj) == set()


def test_default_targets(project):
    project.farmfile(
        """
        [farmer]
        default = ["a"]

        [task.a]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}"

        [task.b]
        outputs = ["out/b.txt"]
        cmd = "echo b > {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.exists("out/a.txt") and not project.exists("out/b.txt")
    r = project.build_in_process("b")
    assert r.returncode == 0, r
    assert project.exists("out/b.txt")


def test_default_unknown_target_is_an_error(project):
    project.farmfile(
        """
        [farmer]
        default = ["nope"]

        [task.a]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}"
        """
    )
    assert_error(project.build(), "nope")


# ------------------------------------------------------------------ -C, -f --

def test_dash_C_changes_directory(proj, tmp_path):
    r = proj.build("-C", "proj", cwd=tmp_path)
    assert r.returncode == 0, r
    assert built(proj) == ALL
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / ".farmer").exists()
    assert proj.exists(".farmer/last-build.json")


def test_dash_f_other_farmfile(project):
    project.farmfile(
        """
        [task.alt]
        outputs = ["out/alt.txt"]
        cmd = "echo alt > {outputs}"
        """,
        name="build.farm",
    )
    r = project.build("-f", "build.farm")
    assert r.returncode == 0, r
    assert project.read("out/alt.txt") == "alt\n"


def test_dash_f_relative_to_dash_C(project, tmp_path):
    project.farmfile(
        """
        [task.alt]
        inputs = ["in.txt"]
        outputs = ["out/alt.txt"]
        cmd = "cp {inputs} {outputs}"
        """,
        name="sub/alt.farm",
    )
    project.write("sub/in.txt", "sub input\n")
    r = project.build("-C", "proj", "-f", "sub/alt.farm", cwd=tmp_path)
    assert r.returncode == 0, r
    # paths are relative to the Farmfile's directory, the project root
    assert project.read("sub/out/alt.txt") == "sub input\n"


def test_dash_f_in_subdirectory_sets_the_root(project):
    project.farmfile(
        """
        [task.alt]
        inputs = ["in.txt"]
        outputs = ["out/alt.txt"]
        cmd = "cp {inputs} {outputs}"
        """,
        name="sub/alt.farm",
    )
    project.write("sub/in.txt", "sub input\n")
    r = project.build("-f", "sub/alt.farm")
    assert r.returncode == 0, r
    assert project.read("sub/out/alt.txt") == "sub input\n"
    assert project.exists("sub/.farmer/last-build.json")


def test_dash_C_missing_directory(project, tmp_path):
    r = project.build("-C", "does-not-exist", cwd=tmp_path)
    assert_error(r, "does-not-exist")


def test_dash_f_missing_file(proj):
    r = proj.build("-f", "missing.farm")
    assert_error(r, "missing.farm")


def test_no_farmfile(project):
    r = project.build()
    assert_error(r, "Farmfile")


# --------------------------------------------------------------------- -n --

def test_dry_run_runs_nothing(proj):
    r = proj.build_in_process("-n")
    assert r.returncode == 0, r
    assert built(proj) == set()
    for i in ALL:
        lines = [l for l in r.stdout.splitlines() if i in l]
        assert lines, (i, r)
        assert any("never built" in l for l in lines), (i, r)
    # nothing was recorded: the real build still runs everything as never built
    r = proj.build_in_process()
    assert r.returncode == 0, r
    assert set(proj.reasons().values()) == {"never built"}


def test_dry_run_after_edit_lists_chain(proj):
    assert proj.build_in_process().returncode == 0
    proj.write("src/a.txt", "a, edited\n")
    r = proj.build_in_process("-n")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    a_lines = [l for l in lines if "out/a.txt" in l and "input src/a.txt changed" in l]
    assert a_lines, r
    assert any("out/b.txt" in l for l in lines), r  # consumes an output of one that would run
    for i in ["out/1.sq", "out/2.sq", "out/other.txt"]:
        assert not any(i in l for l in lines), (i, r)
    assert proj.read("out/a.txt") == "a\n"  # not rebuilt
    assert proj.read("out/b.txt") == "a\na\n"
    r = proj.build_in_process()
    assert proj.statuses()["out/a.txt"] == "ran"
    assert proj.reasons()["out/a.txt"] == "input src/a.txt changed"


def test_dry_run_does_not_run_commands(project):
    project.farmfile(
        """
        [task.side]
        outputs = ["out/x.txt"]
        cmd = "echo ran > side-effect.txt; echo x > {outputs}"
        """
    )
    r = project.build_in_process("-n")
    assert r.returncode == 0, r
    assert not project.exists("side-effect.txt")
    assert not project.exists("out/x.txt")
    assert not project.exists("out")


# -------------------------------------------------------------- --explain --

def test_explain(proj):
    r = proj.build_in_process("--explain")
    assert r.returncode == 0, r
    explain = [l for l in r.output.splitlines() if "explain" in l]
    for i in ALL:
        assert any(i in l and "never built" in l for l in explain), (i, r)
    proj.write("src/a.txt", "a2\n")
    proj.remove("out/1.sq")
    proj.write("out/2.sq", "edited by hand\n")
    proj.farmfile(FF.replace("echo other", "echo OTHER"))
    r = proj.build_in_process("--explain")
    assert r.returncode == 0, r
    explain = [l for l in r.output.splitlines() if "explain" in l]
    expect = {
        "out/a.txt": "input src/a.txt changed",
        "out/b.txt": "input out/a.txt changed",
        "out/1.sq": "output out/1.sq missing",
        "out/2.sq": "output out/2.sq edited",
        "out/other.txt": "command changed",
    }
    for i, why in expect.items():
        assert any(i in l and why in l for l in explain), (i, why, r)
    assert expect == proj.reasons()


def test_explain_comes_before_the_progress_line(proj):
    """--explain's lines are on stdout, each before the `[n/N]` line of what it explains."""
    r = proj.build("--explain", "-j", "1", "a")
    assert r.returncode == 0, r
    assert "explain" not in r.stderr, r
    lines = r.stdout.splitlines()
    explained = [i for i, l in enumerate(lines) if l == "farmer: explain: out/a.txt: never built"]
    started = [i for i, l in enumerate(lines) if re.match(r"^\[\d+/\d+\] a out/a.txt$", l)]
    assert len(explained) == 1 and len(started) == 1 and explained[0] < started[0], r


# ------------------------------------------------------------------- plan --

def test_plan_lists_what_would_run(proj):
    r = proj.farmer("plan")
    assert r.returncode == 0, r
    for i in ALL:
        assert any(i in l and "never built" in l for l in r.stdout.splitlines()), (i, r)
    assert built(proj) == set()
    assert proj.build().returncode == 0
    proj.write("src/2.num", "22\n")
    r = proj.farmer("plan", "--json")
    assert r.returncode == 0, r
    plan = json.loads(r.stdout)
    assert [t["id"] for t in plan["to_run"]] == ["out/2.sq"]
    assert plan["to_run"][0]["reason"] == "input src/2.num changed"
    assert "estimate_s" in plan["to_run"][0]
    assert "jobs" in plan


def test_plan_simulate_json(project):
    project.farmfile(
        """
        [task.a]
        outputs = ["out/a.txt"]
        cost = 2
        cmd = "echo a > {outputs}"

        [task.b]
        inputs = ["out/a.txt"]
        outputs = ["out/b.txt"]
        cost = 3
        cmd = "cp {inputs} {outputs}"

        [task.c]
        outputs = ["out/c.txt"]
        cost = 1
        cmd = "echo c > {outputs}"
        """
    )
    r = project.farmer("plan", "--simulate", "--json", "-j", "2")
    assert r.returncode == 0, r
    plan = json.loads(r.stdout)
    assert plan["jobs"] == 2
    est = {t["id"]: t["estimate_s"] for t in plan["to_run"]}
    assert est == pytest.approx({"out/a.txt": 2, "out/b.txt": 3, "out/c.txt": 1})
    assert plan["critical_path"] == ["out/a.txt", "out/b.txt"]
    assert plan["critical_path_s"] == pytest.approx(5)
    assert plan["total_work_s"] == pytest.approx(6)
    assert plan["lower_bound_s"] == pytest.approx(max(5, 6 / 2))
    assert plan["makespan_s"] == pytest.approx(5)
    sched = {s["id"]: s for s in plan["schedule"]}
    assert set(sched) == {"out/a.txt", "out/b.txt", "out/c.txt"}
    assert sched["out/b.txt"]["start_s"] >= sched["out/a.txt"]["end_s"] - 1e-9
    assert sched["out/a.txt"]["start_s"] == pytest.approx(0)
    assert not project.exists("out")
    # the scheduler considers the highest expected latency first
    assert plan["to_run"][0]["id"] == "out/a.txt"


def test_plan_simulate_text(project):
    project.farmfile(
        """
        [task.a]
        outputs = ["out/a.txt"]
        cost = 2
        cmd = "echo a > {outputs}"
        """
    )
    r = project.farmer("plan", "--simulate")
    assert r.returncode == 0, r
    assert "out/a.txt" in r.stdout
    assert re.search(r"makespan", r.stdout, re.I), r
    assert re.search(r"critical path", r.stdout, re.I), r
    assert not project.exists("out")


def test_output_target_with_leading_dot_slash(proj):
    r = proj.build_in_process("./out/2.sq")
    assert r.returncode == 0, r
    assert built(proj) == {"out/2.sq"}


def test_dry_run_when_up_to_date_lists_nothing(proj):
    assert proj.build_in_process().returncode == 0
    r = proj.build_in_process("-n")
    assert r.returncode == 0, r
    for i in ALL:
        assert i not in r.stdout, r


def test_plan_from_scratch_after_build(proj):
    assert proj.build().returncode == 0
    r = proj.farmer("plan", "--json")
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["to_run"] == []
    r = proj.farmer("plan", "--from-scratch", "--json")
    assert r.returncode == 0, r
    assert {t["id"] for t in json.loads(r.stdout)["to_run"]} == ALL
