"""Unit tests for farmer/plan/latency/: duration estimates, expected latency / critical path,
and the simulated schedule (SPEC §2 "Scheduling", §3 `plan --simulate`)."""

from __future__ import annotations

import pytest
from helpers import computation_graph

from farmer.plan.latency import critical, estimates, simulate
from farmer.store.state import Sample


def samples(cid: str, walls, task: str = "t", input_bytes=None) -> list[Sample]:
    """Oldest first, as State.history() returns them."""
    return [Sample(cid, task, float(k), w, None, None, input_bytes) for k, w in enumerate(walls)]


# -- from_history ------------------------------------------------------------------------------


def test_from_history_single_sample():
    assert estimates.from_history(samples("a", [2.5])) == 2.5


def test_from_history_all_equal():
    assert estimates.from_history(samples("a", [3.0] * 6)) == 3.0


def test_from_history_two_samples_newest_decides():
    assert estimates.from_history(samples("a", [1.0, 10.0])) == 10.0
    assert estimates.from_history(samples("a", [10.0, 1.0])) == 1.0


def test_from_history_follows_a_lasting_change():
    # The task got slower and stayed slower: the estimate follows the recent runs.
    assert estimates.from_history(samples("a", [1.0, 1.0, 1.0, 1.0, 4.0, 4.0, 4.0])) == 4.0


@pytest.mark.parametrize(
    "walls",
    [
        [10.0, 1.0, 1.0],  # oldest is the outlier
        [1.0, 10.0, 1.0],
        [1.0, 1.0, 1.0, 10.0],  # newest outlier among 4
        [1.0, 10.0, 1.0, 1.0],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 10.0],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.01],
        [1.0, 1.0, 10.0],  # newest outlier among 3
        [1.0, 1.0, 0.01],
    ],
)
def test_from_history_one_outlier_among_three_or_more_does_not_swing(walls):
    assert estimates.from_history(samples("a", walls)) == 1.0


# -- estimate(): fallback order ----------------------------------------------------------------


def test_estimate_history_beats_cost():
    comps = computation_graph(1, cost={0: 9.0})
    assert estimates.estimate(comps, [0], {"c0.out": samples("c0.out", [2.0], task="t0")}) == {0: 2.0}


def test_estimate_cost_without_history():
    comps = computation_graph(1, cost={0: 9.0})
    assert estimates.estimate(comps, [0], {}) == {0: 9.0}


def test_estimate_cost_beats_task_model():
    comps = computation_graph(2, task={0: "cc", 1: "cc"}, cost={1: 0.25})
    history = {"c0.out": samples("c0.out", [5.0], task="cc")}
    assert estimates.estimate(comps, [1], history) == {1: 0.25}


def test_estimate_task_fit_by_input_size():
    # Four measured computations of task `cc` whose time is 0.1 s + 1 s per 1000 bytes.
    comps = computation_graph(6, task={i: "cc" for i in range(6)})
    history = {
        f"c{i}.out": samples(f"c{i}.out", [0.1 + size / 1000], task="cc", input_bytes=size)
        for i, size in enumerate([1000, 2000, 3000, 4000])
    }
    got = estimates.estimate(comps, [4, 5], history, input_bytes={4: 6000, 5: 500})
    assert got[4] == pytest.approx(6.1)
    assert got[5] == pytest.approx(0.6)


def test_estimate_task_mean_when_size_does_not_explain():
    comps = computation_graph(5, task={i: "cc" for i in range(5)})
    walls = [4.0, 1.0, 3.0, 2.0]
    sizes = [1000, 2000, 3000, 4000]  # no relation to durations
    history = {
        f"c{i}.out": samples(f"c{i}.out", [w], task="cc", input_bytes=s)
        for i, (w, s) in enumerate(zip(walls, sizes))
    }
    got = estimates.estimate(comps, [4], history, input_bytes={4: 10_000})
    assert got[4] == pytest.approx(2.5)


def test_estimate_task_mean_with_few_points():
    comps = computation_graph(3, task={0: "cc", 1: "cc", 2: "cc"})
    history = {
        "c0.out": samples("c0.out", [1.0], task="cc", input_bytes=100),
        "c1.out": samples("c1.out", [3.0], task="cc", input_bytes=300),
    }
    assert estimates.estimate(comps, [2], history, input_bytes={2: 1000}) == {2: pytest.approx(2.0)}


def test_estimate_task_mean_without_input_sizes():
    comps = computation_graph(4, task={i: "cc" for i in range(4)})
    history = {f"c{i}.out": samples(f"c{i}.out", [float(i + 1)], task="cc", input_bytes=(i + 1) * 10)
               for i in range(3)}
    assert estimates.estimate(comps, [3], history) == {3: pytest.approx(2.0)}


def test_estimate_other_tasks_history_not_used():
    comps = computation_graph(2, task={0: "link", 1: "cc"})
    history = {"c0.out": samples("c0.out", [7.0], task="link")}
    assert estimates.estimate(comps, [1], history) == {1: 1.0}


def test_estimate_default_one_second():
    comps = computation_graph(2)
    assert estimates.estimate(comps, [0, 1], {}) == {0: 1.0, 1: 1.0}


def test_estimate_alias_is_free():
    comps = computation_graph(1, kinds={0: None})
    assert estimates.estimate(comps, [0], {}) == {0: 0.0}


# -- expected latency and critical path ----------------------------------------------------------


def diamond():
    # c0 -> c1 -> c3, c0 -> c2 -> c3
    return computation_graph(4, edges=[(0, 1), (0, 2), (1, 3), (2, 3)])


def test_expected_latency_diamond():
    comps = diamond()
    lat = critical.expected_latency(comps, [0, 1, 2, 3], {0: 1.0, 1: 5.0, 2: 2.0, 3: 1.0})
    assert lat == {0: 7.0, 1: 6.0, 2: 3.0, 3: 1.0}
    assert critical.critical_path(comps, lat) == [0, 1, 3]


def test_expected_latency_ignores_consumers_outside_order():
    comps = diamond()
    lat = critical.expected_latency(comps, [0, 2], {0: 1.0, 1: 5.0, 2: 2.0, 3: 1.0})
    assert lat == {0: 3.0, 2: 2.0}
    assert critical.critical_path(comps, lat) == [0, 2]


def test_expected_latency_missing_duration_is_zero():
    comps = computation_graph(2, edges=[(0, 1)])
    assert critical.expected_latency(comps, [0, 1], {1: 2.0}) == {0: 2.0, 1: 2.0}


def test_critical_path_of_independent_and_chain():
    # a chain c0->c1->c2 of 1 s each and a lone c3 of 2.5 s
    comps = computation_graph(4, edges=[(0, 1), (1, 2)])
    lat = critical.expected_latency(comps, [0, 1, 2, 3], {0: 1.0, 1: 1.0, 2: 1.0, 3: 2.5})
    assert lat == {0: 3.0, 1: 2.0, 2: 1.0, 3: 2.5}
    assert critical.critical_path(comps, lat) == [0, 1, 2]


def test_critical_path_empty():
    assert critical.critical_path([], {}) == []


# -- simulate ----------------------------------------------------------------------------------


def sim(comps, duration, jobs, to_run=None, pools=None, selected=None):
    selected = list(range(len(comps))) if selected is None else selected
    to_run = {i: "never built" for i in selected} if to_run is None else to_run
    latency = critical.expected_latency(comps, selected, {i: duration.get(i, 0.0) for i in to_run})
    return simulate.simulate(comps, selected, to_run, duration, latency, jobs, pools or {})


def check_timeline(s, comps, jobs, duration):
    by_slot = {}
    for slot in s.timeline:
        assert 0 <= slot.slot < jobs
        assert slot.end_s - slot.start_s == pytest.approx(duration.get(slot.index, 0.0))
        by_slot.setdefault(slot.slot, []).append((slot.start_s, slot.end_s))
    for spans in by_slot.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-9, f"overlap on one slot: {spans}"


def test_simulate_independent_tasks():
    comps = computation_graph(4)
    duration = {i: 1.0 for i in range(4)}
    s = sim(comps, duration, jobs=2)
    assert s.makespan_s == pytest.approx(2.0)
    assert sorted(s.start_order) == [0, 1, 2, 3]
    assert len(s.timeline) == 4
    check_timeline(s, comps, 2, duration)


def test_simulate_chain_is_sum():
    comps = computation_graph(3, edges=[(0, 1), (1, 2)])
    duration = {0: 1.0, 1: 2.0, 2: 3.0}
    s = sim(comps, duration, jobs=8)
    assert s.makespan_s == pytest.approx(6.0)
    assert s.start_order == [0, 1, 2]


def test_simulate_starts_by_latency():
    comps = computation_graph(4)
    duration = {0: 1.0, 1: 4.0, 2: 2.0, 3: 3.0}
    s = sim(comps, duration, jobs=1)
    assert s.start_order == [1, 3, 2, 0]
    assert s.makespan_s == pytest.approx(10.0)


def test_simulate_critical_path_first_reaches_lower_bound():
    # c0 (1 s) -> c1 (3 s); c2, c3 2 s each; -j 2. Latency-first starts c0 and then c1
    # before c3, finishing at max(critical path 4, work 8 / 2) = 4 s.
    comps = computation_graph(4, edges=[(0, 1)])
    duration = {0: 1.0, 1: 3.0, 2: 2.0, 3: 2.0}
    s = sim(comps, duration, jobs=2)
    assert s.start_order[:2] == [0, 2]
    assert s.start_order.index(1) < s.start_order.index(3)
    assert s.makespan_s == pytest.approx(4.0)
    check_timeline(s, comps, 2, duration)


def test_simulate_only_what_runs_takes_time():
    comps = computation_graph(3, edges=[(0, 1), (1, 2)])
    duration = {0: 5.0, 1: 2.0, 2: 1.0}
    s = sim(comps, duration, jobs=2, to_run={1: "command changed", 2: "input c1.out will be rebuilt"})
    assert s.makespan_s == pytest.approx(3.0)
    assert s.start_order == [1, 2]


def test_simulate_nothing_to_run():
    comps = computation_graph(2, edges=[(0, 1)])
    s = sim(comps, {0: 1.0, 1: 1.0}, jobs=2, to_run={})
    assert s.makespan_s == 0.0 and s.start_order == [] and s.timeline == []


def test_simulate_respects_cpus_and_pools():
    comps = computation_graph(4, cpus={0: 2}, pools={2: "one", 3: "one"})
    duration = {0: 2.0, 1: 1.0, 2: 1.0, 3: 1.0}
    s = sim(comps, duration, jobs=2, pools={"one": 1})
    # c0 takes both slots for 2 s; then c1 with c2; then c3.
    assert s.makespan_s == pytest.approx(4.0)
    check_timeline(s, comps, 2, duration)


def test_simulate_makespan_at_least_lower_bound():
    comps = computation_graph(8, edges=[(0, 1), (1, 2), (3, 4)])
    duration = {i: float(1 + i % 3) for i in range(8)}
    for jobs in (1, 2, 3, 8):
        s = sim(comps, duration, jobs=jobs)
        latency = critical.expected_latency(comps, list(range(8)), duration)
        bound = max(max(latency.values()), sum(duration.values()) / jobs)
        assert s.makespan_s >= bound - 1e-9
        assert s.makespan_s <= sum(duration.values()) + 1e-9
        check_timeline(s, comps, jobs, duration)


def test_a_makespan_asked_for_alone_is_that_of_the_whole_simulation():
    """A build's end asks only for the predicted makespan: simulated without a timeline,
    it is the full simulation's, which is still made when asked for."""
    from farmer.plan.latency.predict import predict

    comps = computation_graph(5, edges=[(0, 2), (1, 2), (2, 3)])
    to_run = {i: "never built" for i in range(5)}
    durations = {0: 1.0, 1: 2.5, 2: 0.5, 3: 3.0, 4: 4.0}
    alone = predict(comps, list(range(5)), to_run, durations, 2, {})
    whole = predict(comps, list(range(5)), to_run, durations, 2, {}).simulation
    assert alone.makespan_s == whole.makespan_s == pytest.approx(6.0)
    assert len(alone.simulation.timeline) == 5 and alone.makespan_s == whole.makespan_s


@pytest.mark.parametrize("order, durations", [
    ([0, 1, 2, 3], {0: 1.0, 1: 5.0, 2: 2.0, 3: 1.0}),
    ([0, 2], {0: 1.0, 1: 5.0, 2: 2.0, 3: 1.0}),  # consumers outside the order add nothing
    ([0, 1, 2, 3], {3: 0.5}),  # what did not run lasts nothing
    ([], {}),
])
def test_the_longest_latency_at_a_builds_end_is_the_largest_expected_latency(order, durations):
    """A build's end takes its critical path's length from `latencies` over what ran, held
    by index (build.py): the same as `expected_latency`'s dict."""
    from farmer.plan.latency.seconds import Seconds

    comps = diamond()
    measured = Seconds(len(comps), order)
    for i in order:
        if i in durations:
            measured[i] = durations[i]
    by_index = critical.latencies(comps, order, measured)
    by_dict = critical.expected_latency(comps, order, durations)
    assert dict(by_index.items()) == by_dict
    assert max(by_index.values(), default=0.0) == max(by_dict.values(), default=0.0)


def test_a_makespan_simulated_without_a_timeline_keeps_no_table_and_is_the_same():
    """Without a timeline, the simulated clock keeps no start or end per computation, and
    the run is the same: world set-ups, CPU slots and pools included."""
    from farmer.plan.latency.simulate import _SimHooks
    from farmer.run.executors.simulated import SimulatedExecutor, WorldSetups
    from farmer.run.scheduler import Scheduler

    comps = computation_graph(6, edges=[(0, 2), (1, 2), (2, 3)], cpus={4: 2}, pools={5: "p"})
    comps[3].world = "w"
    duration = {0: 1.0, 1: 2.5, 2: 0.5, 3: 3.0, 4: 4.0, 5: 1.5}
    to_run = {i: "never built" for i in range(6)}
    latency = critical.expected_latency(comps, list(range(6)), duration)
    worlds = WorldSetups({"w": 2.0}, {"w": None})
    world_latency = {"w": 2.0 + latency[3]}  # its set-up, then its task
    runs = []
    for record in (True, False):
        executor = SimulatedExecutor(duration, worlds=worlds, record=record)
        scheduler = Scheduler(comps, list(range(6)), latency, 2, {"p": 1}, True, executor, _SimHooks(to_run),
                              worlds=worlds, world_latency=world_latency)
        settled = scheduler.run()
        runs.append((executor.clock, scheduler.start_order, {i: s.status for i, s in settled.items()}))
        assert bool(executor.began) == bool(executor.started) == bool(executor.ended) == record
    assert runs[0] == runs[1]
    full = simulate.simulate(comps, list(range(6)), to_run, duration, latency, 2, {"p": 1}, worlds,
                             world_latency=world_latency)
    alone = simulate.simulate(comps, list(range(6)), to_run, duration, latency, 2, {"p": 1}, worlds, False,
                              world_latency)
    assert alone.makespan_s == full.makespan_s == runs[0][0] and alone.timeline == []


def test_a_prediction_that_keeps_its_makespan_drops_its_tables():
    """A build's end needs only the predicted makespan and whether it had history."""
    from farmer.plan.latency.predict import predict

    comps = computation_graph(3, edges=[(0, 1)])
    to_run = {i: "never built" for i in range(3)}
    guessed = estimates.estimate(comps, [0, 1, 2], {})  # no history: all unknown
    p = predict(comps, [0, 1, 2], to_run, guessed, 2, {})
    makespan = predict(comps, [0, 1, 2], to_run, guessed, 2, {}).makespan_s
    p.keep_makespan()
    assert p.makespan_s == makespan and not p.known
    assert p.to_run == p.estimates == p.latency == {} and len(p.unknown) == 1


def test_latencies_by_index_are_the_expected_latencies():
    """What a build's prediction holds (by index, not dicts) reads as the dicts would."""
    from farmer.plan.latency.seconds import Seconds

    comps = computation_graph(6, edges=[(0, 1), (0, 2), (1, 3), (2, 3), (4, 5)])
    order = [0, 1, 2, 3, 5]  # 4 left out: its consumer 5 counts it as absent
    durations = {0: 1.0, 1: 5.0, 2: 2.0, 3: 1.0, 5: 0.5}
    by_index = Seconds(len(comps), order)
    for i in order[:-1]:
        by_index[i] = durations[i]  # 5 not set: its duration reads as absent, 0
    expected = critical.expected_latency(comps, order, {i: durations[i] for i in order[:-1]})
    got = critical.latencies(comps, order, by_index)
    assert got == expected and dict(got.items()) == expected
    assert list(got) == order and len(got) == 5 and 4 not in got and -1 not in got
    assert got.get(4) is None and got.get(4, 0.0) == 0.0 and got[5] == 0.0
    with pytest.raises(KeyError):
        got[4]
    assert critical.critical_path(comps, got) == critical.critical_path(comps, expected) == [0, 1, 3]
    assert 5 not in by_index and by_index.get(5, 7.0) == 7.0 and sorted(by_index.values()) == [1.0, 1.0, 2.0, 5.0]


def test_a_prediction_knows_which_computations_that_run_have_no_history():
    from farmer.plan.latency.predict import predict

    comps = computation_graph(3, edges=[(0, 1)])
    to_run = {i: "never built" for i in range(3)}
    first = predict(comps, [0, 1, 2], to_run, estimates.estimate(comps, [0, 1, 2], {}), 2, {})
    assert set(first.unknown) == {0, 1, 2} and 1 in first.unknown and not first.known
    some = estimates.estimate(comps, [0, 1, 2], {"c1.out": samples("c1.out", [2.0], task="t1")})
    assert set(predict(comps, [0, 1, 2], to_run, some, 2, {}).unknown) == {0, 2}
    fewer = predict(comps, [0, 1, 2], {0: "never built"}, estimates.estimate(comps, [0, 1, 2], {}), 2, {})
    assert set(fewer.unknown) == {0}
