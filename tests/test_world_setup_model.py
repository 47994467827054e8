"""World set-up in the model (issue 16 item 1): a world's set-up is work with a measured
duration, learnt from history, on the critical path, in the simulation and in the ETA."""

from __future__ import annotations

import json

import pytest
from conftest import run_farmer

from farmer.graph.graph import Computation
from farmer.plan.latency.predict import predict, remaining
from farmer.run.executors.simulated import WorldSetups


def world_tasks(n: int, world: str = "w", start: int = 0) -> list[Computation]:
    return [Computation(start + i, f"out/{world}{i}", f"t_{world}", outputs=[f"out/{world}{i}"],
                        kind="python", action="-c pass", world=world)
            for i in range(n)]


def test_the_issue_s_case_is_predicted_with_its_set_up():
    # A world whose set-up takes 3 s, 4 tasks of 0.5 s at -j 2: 3 + 2 x 0.5 s (it was 1.0 s).
    comps = world_tasks(4)
    run = {i: "never built" for i in range(4)}
    estimates = dict.fromkeys(range(4), 0.5)
    p = predict(comps, list(range(4)), run, estimates, 2, {}, worlds=WorldSetups({"w": 3.0}, {"w": None}))
    assert p.makespan_s == pytest.approx(4.0)
    assert p.critical_path_s == pytest.approx(3.5)  # the set-up, then one task
    assert p.critical_world == "w"
    assert p.simulation.world_ready == {"w": pytest.approx(3.0)}
    # Each task's own run begins once its world is ready.
    assert sorted(s.start_s for s in p.simulation.timeline) == pytest.approx([3.0, 3.0, 3.5, 3.5])
    without = predict(comps, list(range(4)), run, estimates, 2, {})
    assert without.makespan_s == pytest.approx(1.0) and without.critical_world is None


def test_a_child_world_is_set_up_after_its_parent_and_other_work_overlaps():
    comps = world_tasks(1, "child") + [
        Computation(1, "out/plain", "plain", outputs=["out/plain"], action="true")]
    setups = WorldSetups({"base": 1.0, "child": 2.0}, {"base": None, "child": "base"})
    p = predict(comps, [0, 1], {0: "never built", 1: "never built"}, {0: 0.5, 1: 2.5}, 2, {},
                worlds=setups)
    assert p.simulation.world_ready == {"base": pytest.approx(1.0), "child": pytest.approx(3.0)}
    assert p.makespan_s == pytest.approx(3.5)  # the plain task ran meanwhile, on the other slot
    assert p.critical_path_s == pytest.approx(3.5)


def test_the_eta_counts_what_is_left_of_a_set_up():
    comps = world_tasks(2)
    est = {0: 0.5, 1: 0.5}
    left = remaining(comps, [0, 1], {0: "", 1: ""}, est, {}, 2, {}, WorldSetups({"w": 1.5}, {"w": None}))
    assert left == pytest.approx(2.0)
    ready = remaining(comps, [0, 1], {0: "", 1: ""}, est, {}, 2, {}, WorldSetups({"w": 0.0}, {"w": None}))
    assert ready == pytest.approx(0.5)


WORLD_HEAVY = """\
[world.slow]
setup = ["import time", "time.sleep(1.0)"]

[task.analysis]
foreach = "src/{n}.txt"
inputs = ["src/{n}.txt"]
outputs = ["out/{n}.txt"]
world = "slow"
python = '''-c "import sys, time; time.sleep(0.2); open(sys.argv[1], 'w').write('x')" {outputs}'''
"""


def test_after_one_build_plan_simulate_counts_the_measured_set_up(tmp_path):
    (tmp_path / "Farmfile").write_text(WORLD_HEAVY)
    (tmp_path / "src").mkdir()
    for n in "abcd":
        (tmp_path / "src" / f"{n}.txt").write_text(n)
    before = json.loads(run_farmer(tmp_path, "plan", "--simulate", "--json", "-j", "2").stdout)
    assert "world_setups" not in before  # nothing measured yet: no made-up set-up
    r = run_farmer(tmp_path, "build", "-j", "2")
    assert r.returncode == 0, r.stderr
    wall = json.loads((tmp_path / ".farmer" / "last-build.json").read_text())["wall_s"]
    r = run_farmer(tmp_path, "plan", "--simulate", "--from-scratch", "--json", "-j", "2")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    [setup] = plan["world_setups"]
    assert setup["world"] == "slow" and 1.0 <= setup["setup_s"] < wall
    assert plan["critical_world"] == "slow"
    tasks = sorted(t["estimate_s"] for t in plan["to_run"])
    # The set-up, then two rounds of two tasks: no longer the tasks alone.
    assert plan["makespan_s"] == pytest.approx(setup["setup_s"] + tasks[-1] + tasks[-3], abs=0.05)
    assert plan["makespan_s"] > tasks[-1] + tasks[-3] + 0.9
    text = run_farmer(tmp_path, "plan", "--simulate", "--from-scratch", "-j", "2").stdout
    assert "world slow set-up -> " in text
    assert "world set-up" in text
