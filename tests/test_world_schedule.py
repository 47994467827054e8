"""A world's set-up as a step of the schedule (SPEC §2 "Scheduling", §4's `worlds`): it starts
as early as a slot is free, after its parent world and its inputs' producers, holds a slot while
it runs, lies on the critical path, and every report shows it."""

from __future__ import annotations

import json

import pytest
from helpers import computation_graph

from farmer.plan.latency.predict import predict
from farmer.plan.latency.simulate import _SimHooks
from farmer.run.executors.simulated import SimulatedExecutor, WorldSetups
from farmer.run.scheduler import UP_TO_DATE, Scheduler


def _plan(comps, durations, jobs, worlds):
    run = {i: "never built" for i in range(len(comps))}
    return predict(comps, list(range(len(comps))), run, durations, jobs, {}, worlds=worlds)


def _setup_spans(p):
    return {w.world: (w.start_s, w.end_s, w.slots) for w in p.simulation.world_spans}


def _starts(p):
    return {s.index: s.start_s for s in p.simulation.timeline}


def test_a_set_up_starts_in_an_idle_slot_before_its_first_task_is_ready():
    # c0 (a command, 2 s) makes what c1 (a task of world w) reads; w's set-up takes 1.5 s.
    comps = computation_graph(2, edges=[(0, 1)])
    comps[1].world = "w"
    p = _plan(comps, {0: 2.0, 1: 0.5}, 2, WorldSetups({"w": 1.5}, {"w": None}))
    assert _setup_spans(p) == {"w": (0.0, 1.5, (1,))}  # at once, in the other slot
    assert _starts(p)[1] == pytest.approx(2.0)  # c1 waited for c0 only
    assert p.makespan_s == pytest.approx(2.5)  # not 2 + 1.5 + 0.5


def test_a_set_up_that_reads_a_produced_input_waits_for_its_producer():
    comps = computation_graph(2, edges=[(0, 1)])
    comps[1].world = "w"
    worlds = WorldSetups({"w": 1.5}, {"w": None}, {"w": [0]})  # w's inputs include c0's output
    p = _plan(comps, {0: 2.0, 1: 0.5}, 2, worlds)
    assert _setup_spans(p)["w"][:2] == (pytest.approx(2.0), pytest.approx(3.5))
    assert _starts(p)[1] == pytest.approx(3.5)
    assert p.makespan_s == pytest.approx(4.0)
    assert p.critical_steps == [0, "w", 1]
    assert p.critical_path_s == pytest.approx(4.0)  # the set-up is on the critical path


def test_a_set_up_holds_its_slot_at_j1():
    # c0 (1 s) needs no world; c1 (0.5 s) is a task of w (set-up 2 s). At -j 1 the set-up,
    # the longest chain, goes first, and nothing runs beside it.
    comps = computation_graph(2)
    comps[1].world = "w"
    p = _plan(comps, {0: 1.0, 1: 0.5}, 1, WorldSetups({"w": 2.0}, {"w": None}))
    assert _setup_spans(p) == {"w": (0.0, 2.0, (0,))}
    starts = _starts(p)
    assert starts[0] >= 2.0 and starts[1] >= 2.0
    assert p.makespan_s == pytest.approx(3.5)


def test_a_child_world_is_set_up_after_its_parent_and_both_head_the_critical_path():
    comps = computation_graph(2)
    comps[0].world = "child"
    worlds = WorldSetups({"base": 1.0, "child": 2.0}, {"base": None, "child": "base"})
    p = _plan(comps, {0: 0.5, 1: 2.5}, 2, worlds)
    spans = _setup_spans(p)
    assert spans["base"][:2] == (0.0, 1.0) and spans["child"][:2] == (1.0, 3.0)
    assert p.critical_steps == ["base", "child", 0]
    assert p.critical_path_s == pytest.approx(3.5)
    assert p.critical_world == "base"


class _UpToDateAfterItsProducer(_SimHooks):
    """c1 is found up to date once c0 ran (its output came out the same)."""

    def check(self, index, producers_ran):
        return None if index == 1 and producers_ran else super().check(index, producers_ran)


def test_a_set_up_whose_tasks_were_all_found_up_to_date_is_never_started():
    comps = computation_graph(2, edges=[(0, 1)])
    comps[1].world = "w"
    worlds = WorldSetups({"w": 1.5}, {"w": None}, {"w": [0]})
    executor = SimulatedExecutor({0: 1.0, 1: 1.0}, worlds=worlds)
    scheduler = Scheduler(comps, [0, 1], {0: 4.0, 1: 1.0}, 2, {}, False, executor,
                          _UpToDateAfterItsProducer({0: "never built", 1: "never built"}),
                          worlds, {"w": 2.5})
    settled = scheduler.run()
    assert settled[1].status == UP_TO_DATE
    assert scheduler.world_spans == [] and "w" not in executor.ready_at
    assert executor.clock == pytest.approx(1.0)


# -- a real build ----------------------------------------------------------------------------

PIPELINE = """\
[world.ml]
setup = ["import time", "time.sleep(1.2)"]

[world.viz]
setup = ["import time", "time.sleep(0.6)"]

[task.prep]
outputs = ["out/raw.txt"]
cmd = "sleep 0.8 && echo raw > {outputs}"

[task.fit]
foreach = {g = ["1", "2"]}
inputs = ["out/raw.txt"]
outputs = ["out/fit{g}.txt"]
world = "ml"
python = '''-c "import sys; open(sys.argv[1], 'w').write('x')" {outputs}'''

[task.plot]
inputs = ["@fit"]
outputs = ["out/plot.txt"]
world = "viz"
python = '''-c "import sys; open(sys.argv[1], 'w').write('x')" {outputs}'''
"""


def test_a_real_build_sets_worlds_up_early_and_every_report_shows_them(project):
    project.farmfile(PIPELINE)
    r = project.build("-j", "2", "--trace", "trace.json")
    assert r.returncode == 0, r
    lb = project.last_build()
    worlds = {w["name"]: w for w in lb["worlds"]}
    assert {n: w["status"] for n, w in worlds.items()} == {"ml": "ok", "viz": "ok"}
    tasks = project.tasks()
    prep = tasks["out/raw.txt"]
    # Both set-ups began before the first task of either world was ready: ml beside prep,
    # viz while prep or the fits ran, not after them.
    assert worlds["ml"]["start_s"] < prep["end_s"]
    assert worlds["viz"]["start_s"] < max(tasks[f"out/fit{g}.txt"]["end_s"] for g in "12")
    assert tasks["out/plot.txt"]["start_s"] >= worlds["viz"]["end_s"]
    # The summary line's critical path (and last-build.json's) counts a set-up on its chain.
    ml_chain = (worlds["ml"]["end_s"] - worlds["ml"]["start_s"]
                + max(tasks[f"out/fit{g}.txt"]["duration_s"] for g in "12") + tasks["out/plot.txt"]["duration_s"])
    assert lb["critical_path_s"] >= ml_chain - 1e-3
    assert f"critical path {lb['critical_path_s']:.2f} s" in r.stdout
    events = json.loads(project.read("trace.json"))["traceEvents"]
    setups = {e["name"]: e for e in events if e["ph"] == "X" and e["name"].startswith("world ")}
    assert set(setups) == {"world ml set-up", "world viz set-up"}
    assert setups["world ml set-up"]["ts"] == pytest.approx(worlds["ml"]["start_s"] * 1e6, abs=200)
    r = project.farmer("report", "--html", "report.html")
    assert r.returncode == 0, r
    page = project.read("report.html")
    assert "World set-ups: ml " in page and '"world viz set-up"' in page
    assert "world ml set-up" in page.split("Critical path (")[1].split("</table>")[0]


def test_a_failed_set_up_is_in_last_build_json_junit_and_markdown(project):
    project.farmfile("""\
[world.bad]
setup = ["raise RuntimeError('no such model')"]

[task.t]
world = "bad"
outputs = ["out/t.txt"]
python = '''-c "pass"'''
""")
    r = project.build()
    assert r.returncode == 1, r
    assert [(w["name"], w["status"]) for w in project.last_build()["worlds"]] == [("bad", "failed")]
    assert project.tasks()["out/t.txt"]["reason"] == "world bad setup failed"
    assert project.farmer("report", "--junit", "junit.xml").returncode == 0
    junit = project.read("junit.xml")
    assert 'name="world bad set-up"' in junit and "world bad setup failed" in junit
    assert "no such model" in junit  # the world's log tail: its traceback
    md = project.farmer("report", "--markdown").stdout
    assert "world bad set-up" in md and "setup failed" in md and "no such model" in md


class _SetUpFailsAtOnce(SimulatedExecutor):
    """A world that cannot even start (no FIFO, say): its set-up ends, failed, as it starts."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.idle_waits = 0

    def start_setup(self, world):
        from farmer.run.executors.base import SETUP_STARTED, SetupEnd

        self._setups_ended.append(SetupEnd(world, "failed", self.clock, self.clock))
        return SETUP_STARTED

    def wait(self, timeout):
        if not self._events:
            self.idle_waits += 1
            assert self.idle_waits < 100, "the scheduler waits for a set-up that already ended"
        return super().wait(timeout)


def test_a_set_up_that_fails_as_it_starts_frees_its_slot_and_releases_its_tasks():
    comps = computation_graph(2)
    comps[1].world = "w"
    worlds = WorldSetups({"w": 1.0}, {"w": None})
    executor = _SetUpFailsAtOnce({0: 1.0, 1: 1.0}, worlds=worlds)
    scheduler = Scheduler(comps, [0, 1], {0: 1.0, 1: 1.0}, 1, {}, True, executor,
                          _SimHooks({0: "never built", 1: "never built"}), worlds, {"w": 2.0})
    settled = scheduler.run()
    # (the executor fails a task of a world whose set-up failed; the scheduler starts it)
    assert set(settled) == {0, 1} and 1 in executor.started
    assert [(w.world, w.status) for w in scheduler.world_spans] == [("w", "failed")]
