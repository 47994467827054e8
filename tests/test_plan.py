"""`farmer plan`, `plan --simulate` and the prediction in a real build (SPEC §3, §4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_farmer as farmer


def plan_json(project: Path, *args: str) -> dict:
    r = farmer(project, "plan", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """a -> b -> c with costs 1, 2, 3, and d (cost 5) on its own: the chain is critical."""
    (tmp_path / "src.txt").write_text("x\n")
    (tmp_path / "Farmfile").write_text("""
[task.a]
inputs = ["src.txt"]
outputs = ["out/a"]
cost = 1
cmd = "cat {inputs} > {outputs}"

[task.b]
inputs = ["@a"]
outputs = ["out/b"]
cost = 2
cmd = "cat {inputs} > {outputs}"

[task.c]
inputs = ["@b"]
outputs = ["out/c"]
cost = 3
cmd = "cat {inputs} > {outputs}"

[task.d]
inputs = ["src.txt"]
outputs = ["out/d"]
cost = 5
cmd = "cat {inputs} > {outputs}"
""")
    return tmp_path


def test_plan_lists_what_would_run_with_reasons_and_nothing_after_a_build(chain: Path) -> None:
    plan = plan_json(chain)
    assert {t["id"]: t["reason"] for t in plan["to_run"]} == {
        "out/a": "never built", "out/b": "never built", "out/c": "never built", "out/d": "never built"}
    assert set(plan) == {"jobs", "to_run", "critical_path", "stale_outputs"}  # no time figures without --simulate
    assert farmer(chain, "build").returncode == 0
    assert plan_json(chain)["to_run"] == []
    (chain / "src.txt").write_text("y\n")
    reasons = {t["id"]: t["reason"] for t in plan_json(chain)["to_run"]}
    assert reasons["out/a"] == "input src.txt changed"
    assert reasons["out/b"] == "input out/a will be rebuilt"
    assert reasons["out/c"] == "input out/b will be rebuilt"


def test_simulate_json_figures_and_critical_path(chain: Path) -> None:
    plan = plan_json(chain, "--simulate", "-j", "2")
    assert set(plan) == {"jobs", "to_run", "makespan_s", "critical_path_s", "total_work_s",
                         "lower_bound_s", "critical_path", "schedule", "stale_outputs"}
    assert plan["jobs"] == 2
    assert plan["critical_path"] == ["out/a", "out/b", "out/c"]
    assert plan["critical_path_s"] == pytest.approx(6.0)
    assert plan["total_work_s"] == pytest.approx(11.0)
    assert plan["lower_bound_s"] == pytest.approx(max(6.0, 11.0 / 2))
    assert plan["makespan_s"] == pytest.approx(6.0)  # d fits beside the chain
    # The chain starts first (highest expected latency: 6 > 5).
    assert plan["to_run"][0]["id"] == "out/a"
    slots = {s["id"]: s for s in plan["schedule"]}
    assert slots["out/b"]["start_s"] == pytest.approx(slots["out/a"]["end_s"])
    assert {s["slot"] for s in plan["schedule"]} == {0, 1}


def test_simulate_at_one_slot_adds_up_all_work(chain: Path) -> None:
    plan = plan_json(chain, "--simulate", "-j", "1")
    assert plan["makespan_s"] == pytest.approx(11.0)
    assert plan["lower_bound_s"] == pytest.approx(11.0)


def test_simulation_and_real_build_share_the_policy(tmp_path: Path) -> None:
    """On equal estimates, the start order of a real -j 1 build equals the simulated one."""
    (tmp_path / "s").write_text("s\n")
    lines = []
    # A fan of tasks with distinct costs and two short chains, listed against priority order.
    costs = {"p": 0.2, "q": 0.9, "r": 0.5, "t": 0.7}
    for name, cost in costs.items():
        lines.append(f'[task.{name}]\ninputs = ["s"]\noutputs = ["out/{name}"]\ncost = {cost}\n'
                     'cmd = "cat {inputs} > {outputs}"\n')
    lines.append('[task.p2]\ninputs = ["@p"]\noutputs = ["out/p2"]\ncost = 2.0\ncmd = "cat {inputs} > {outputs}"\n')
    lines.append('[task.r2]\ninputs = ["@r"]\noutputs = ["out/r2"]\ncost = 0.1\ncmd = "cat {inputs} > {outputs}"\n')
    (tmp_path / "Farmfile").write_text("\n".join(lines))
    simulated = [t["id"] for t in plan_json(tmp_path, "--simulate", "-j", "1")["to_run"]]
    assert simulated[0] == "out/p"  # p -> p2 is the longest path (2.2 s)
    r = farmer(tmp_path, "build", "-j", "1")
    assert r.returncode == 0, r.stderr
    started = [line.split()[-1] for line in r.stdout.splitlines() if line.startswith("[")]
    assert started == simulated
    last = json.loads((tmp_path / ".farmer" / "last-build.json").read_text())
    by_start = sorted(last["tasks"], key=lambda t: t["start_s"])
    assert [t["id"] for t in by_start] == simulated
    assert last["predicted_makespan_s"] == pytest.approx(sum(costs.values()) + 2.1)


def test_plan_writes_nothing(chain: Path) -> None:
    assert farmer(chain, "plan", "--simulate").returncode == 0
    assert not (chain / ".farmer").exists()
    assert farmer(chain, "build").returncode == 0
    db = chain / ".farmer" / "state.db"
    before = {p.name: p.stat().st_mtime_ns for p in (chain / ".farmer").iterdir()}
    (chain / "src.txt").write_text("changed\n")
    assert farmer(chain, "plan", "--simulate", "--from-scratch").returncode == 0
    after = {p.name: p.stat().st_mtime_ns for p in (chain / ".farmer").iterdir()}
    assert after == before
    assert db.exists()


def test_from_scratch_plans_a_clean_build(chain: Path) -> None:
    assert farmer(chain, "build").returncode == 0
    plan = plan_json(chain, "--from-scratch")
    assert sorted(t["id"] for t in plan["to_run"]) == ["out/a", "out/b", "out/c", "out/d"]


def test_estimates_follow_measured_history(tmp_path: Path) -> None:
    (tmp_path / "Farmfile").write_text("""
[task.slow]
outputs = ["out/slow"]
cost = 9
cmd = "sleep 0.4; echo done > {outputs}"
""")
    assert plan_json(tmp_path, "--from-scratch")["to_run"][0]["estimate_s"] == pytest.approx(9.0)
    assert farmer(tmp_path, "build").returncode == 0
    estimate = plan_json(tmp_path, "--from-scratch")["to_run"][0]["estimate_s"]
    assert 0.35 <= estimate < 3.0  # measured history replaces the a-priori cost


def test_simulate_text_shows_figures_and_timeline(chain: Path) -> None:
    r = farmer(chain, "plan", "--simulate", "-j", "2")
    assert r.returncode == 0, r.stderr
    for word in ("predicted makespan", "critical path", "total work", "lower bound",
                 "FIFO order as make", "unit-weight critical path as ninja", "slot 0", "slot 1"):
        assert word in r.stdout


def test_trace_files_open_in_perfetto_format(chain: Path) -> None:
    trace = chain / "plan-trace.json"
    assert farmer(chain, "plan", "--simulate", "-j", "2", "--trace", str(trace)).returncode == 0
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in spans} == {"out/a", "out/b", "out/c", "out/d"}
    assert {e["name"] for e in spans if e["cat"] == "critical_path"} == {"out/a", "out/b", "out/c"}
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in events)

    build_trace = chain / "build-trace.json"
    r = farmer(chain, "build", "--trace", "build-trace.json")
    assert r.returncode == 0, r.stderr
    spans = [e for e in json.loads(build_trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 4 and all(e["dur"] > 0 for e in spans)


def test_bad_jobs_is_a_usage_error(chain: Path) -> None:
    r = farmer(chain, "plan", "-j", "0")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "-j 0" in r.stderr


def test_a_computation_with_several_cpus_fills_every_slot_it_holds(tmp_path: Path) -> None:
    (tmp_path / "Farmfile").write_text("""
[task.wide]
outputs = ["out/wide"]
cost = 2
cpus = 2
cmd = "echo > {outputs}"
""")
    r = farmer(tmp_path, "plan", "--simulate", "-j", "2")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("slot ")]
    assert len(rows) == 2
    assert all("█" in row and " " not in row.split("|")[1] for row in rows)  # busy all along
