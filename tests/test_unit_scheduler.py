"""Unit tests for farmer/run/scheduler.py with a fake executor on a fake clock and fake hooks
(SPEC §2 "Scheduling" and "Failure")."""

from __future__ import annotations

import pytest
from helpers import computation_graph

from farmer.run.executors.simulated import SimulatedExecutor
from farmer.run.scheduler import FAILED, RAN, SKIPPED, UP_TO_DATE, Hooks, Scheduler


class FakeExecutor(SimulatedExecutor):
    """farmer's simulated clock (each computation lasts `durations[i]`, 1 s unless given;
    those in `fail` exit 1), watched: what ran together after every start, and a bound on
    idle waits, since a scheduler that waits for ever with nothing running hangs."""

    def __init__(self, comps, durations, fail=(), can_start=None):
        super().__init__(durations, fail, default_s=1.0)
        self.samples: list[set[int]] = []  # what ran together, after every start
        self.stop_calls = 0
        self._can_start = can_start
        self._idle_waits = 0

    def start(self, comp):
        assert comp.index not in self.started, f"c{comp.index} started twice"
        super().start(comp)
        self.samples.append({e[2] for e in self._events})

    def wait(self, timeout):
        if not self._events and not self._stopped:
            self._idle_waits += 1
            assert self._idle_waits < 1000, "scheduler waits for ever with nothing running"
        return super().wait(timeout)

    def stop(self):
        self.stop_calls += 1
        super().stop()

    def can_start(self):
        return True if self._can_start is None else self._can_start(self.running())


class FakeHooks(Hooks):
    def __init__(self, executor, up_to_date=(), interrupt_at=None):
        self.ex = executor
        self.up_to_date = set(up_to_date)
        self.interrupt_at = interrupt_at
        self.checks: list[tuple[int, bool, float]] = []
        self.started: list[tuple[int, str]] = []
        self.finished_: list[int] = []

    def check(self, index, producers_ran):
        self.checks.append((index, producers_ran, self.ex.clock))
        return None if index in self.up_to_date else "never built"

    def starting(self, index, reason):
        self.started.append((index, reason))

    def finished(self, outcome):
        self.finished_.append(outcome.index)
        return outcome

    def interrupted(self):
        if self.interrupt_at is not None and self.ex.clock >= self.interrupt_at:
            return 2
        return None


def run(comps, latency=None, jobs=1, pools=None, keep_going=False, durations=None, fail=(),
        up_to_date=(), selected=None, interrupt_at=None, can_start=None):
    durations = durations or {}
    ex = FakeExecutor(comps, durations, fail, can_start)
    hooks = FakeHooks(ex, up_to_date, interrupt_at)
    if latency is None:
        latency = {c.index: durations.get(c.index, 1.0) for c in comps}
    sched = Scheduler(comps, list(range(len(comps))) if selected is None else selected, latency,
                      jobs, pools or {}, keep_going, ex, hooks)
    settled = sched.run()
    return sched, settled, ex, hooks


def statuses(settled):
    return {i: (s.status, s.reason) for i, s in settled.items()}


# -- priority ----------------------------------------------------------------------------------


def test_highest_expected_latency_first_ties_by_index():
    comps = computation_graph(5)
    sched, settled, ex, _ = run(comps, latency={0: 1.0, 1: 5.0, 2: 3.0, 3: 5.0, 4: 0.5}, jobs=1)
    assert sched.start_order == [1, 3, 2, 0, 4]
    assert all(s.status == RAN for s in settled.values())


def test_priority_uses_latency_not_duration():
    # c0 is short but heads a long chain: it goes first.
    comps = computation_graph(4, edges=[(0, 1)])
    durations = {0: 0.1, 1: 10.0, 2: 2.0, 3: 3.0}
    latency = {0: 10.1, 1: 10.0, 2: 2.0, 3: 3.0}
    sched, _, ex, _ = run(comps, latency, jobs=1, durations=durations)
    assert sched.start_order == [0, 1, 3, 2]


def test_jobs_limit_concurrency():
    comps = computation_graph(6)
    _, settled, ex, _ = run(comps, jobs=2)
    assert max(len(s) for s in ex.samples) == 2
    assert ex.clock == pytest.approx(3.0)
    assert len(settled) == 6


def test_newly_ready_consumer_competes_by_latency():
    # When c0 finishes its consumer c1 (latency 4) beats the waiting c2 (latency 2).
    comps = computation_graph(3, edges=[(0, 1)])
    latency = {0: 5.0, 1: 4.0, 2: 2.0}
    sched, _, _, _ = run(comps, latency, jobs=1)
    assert sched.start_order == [0, 1, 2]


# -- CPU budget and pools ----------------------------------------------------------------------


def test_cpus_highest_latency_that_fits():
    # jobs 4: c0 (2 cpus) starts; c1 (3 cpus) does not fit in the 2 left, c2 (1 cpu) does.
    comps = computation_graph(3, cpus={0: 2, 1: 3, 2: 1})
    durations = {0: 5.0, 1: 1.0, 2: 1.0}
    latency = {0: 10.0, 1: 8.0, 2: 1.0}
    sched, settled, ex, _ = run(comps, latency, jobs=4, durations=durations)
    assert ex.started == {0: 0.0, 2: 0.0, 1: 5.0}
    assert sched.start_order == [0, 2, 1]
    for together in ex.samples:
        assert sum(comps[i].cpus for i in together) <= 4
    assert all(s.status == RAN for s in settled.values())


def test_cpus_above_jobs_is_clamped_and_takes_everything():
    comps = computation_graph(2, cpus={0: 8})
    durations = {0: 2.0, 1: 1.0}
    latency = {0: 3.0, 1: 1.0}
    _, settled, ex, _ = run(comps, latency, jobs=2, durations=durations)
    assert settled[0].status == RAN and settled[1].status == RAN
    assert ex.started == {0: 0.0, 1: 2.0}  # c0 held both slots


def test_pool_limits_concurrency():
    comps = computation_graph(4, pools={0: "link", 1: "link", 2: "link"})
    durations = {0: 1.0, 1: 1.0, 2: 1.0, 3: 3.0}
    latency = {0: 5.0, 1: 4.0, 2: 3.0, 3: 1.0}
    _, settled, ex, _ = run(comps, latency, jobs=4, pools={"link": 1}, durations=durations)
    for together in ex.samples:
        assert len([i for i in together if comps[i].pool == "link"]) <= 1
    assert ex.started == {0: 0.0, 3: 0.0, 1: 1.0, 2: 2.0}
    assert all(s.status == RAN for s in settled.values())


def test_pool_of_two():
    comps = computation_graph(5, pools={i: "p" for i in range(5)})
    _, _, ex, _ = run(comps, jobs=8, pools={"p": 2})
    assert max(len(s) for s in ex.samples) == 2
    assert ex.clock == pytest.approx(3.0)


def test_load_limit_holds_back_new_starts():
    comps = computation_graph(3)
    _, settled, ex, _ = run(comps, jobs=3, can_start=lambda running: running == 0)
    assert max(len(s) for s in ex.samples) == 1
    assert all(s.status == RAN for s in settled.values())


# -- readiness -------------------------------------------------------------------------------


def test_fan_in_waits_for_all_producers():
    comps = computation_graph(3, edges=[(0, 2), (1, 2)])
    durations = {0: 1.0, 1: 3.0, 2: 1.0}
    _, settled, ex, hooks = run(comps, jobs=4, durations=durations)
    assert ex.started[2] == pytest.approx(3.0)
    checks_of_2 = [c for c in hooks.checks if c[0] == 2]
    assert checks_of_2 == [(2, True, 3.0)]  # checked once, when the last producer finished
    assert settled[2].status == RAN


def test_up_to_date_settles_without_starting_and_releases_consumers():
    comps = computation_graph(4, edges=[(0, 1), (1, 2), (0, 3)])
    _, settled, ex, hooks = run(comps, jobs=2, up_to_date={0, 1})
    assert statuses(settled)[0] == (UP_TO_DATE, "up to date")
    assert statuses(settled)[1] == (UP_TO_DATE, "up to date")
    assert settled[2].status == RAN and settled[3].status == RAN
    assert set(ex.started) == {2, 3}
    assert {(i, ran) for i, ran, _ in hooks.checks} == {(0, False), (1, False), (2, False), (3, False)}
    assert sorted(hooks.started) == [(2, "never built"), (3, "never built")]


def test_producers_ran_flag():
    # c2 reads c0 (ran) and c1 (up to date): its check learns a producer ran.
    comps = computation_graph(3, edges=[(0, 2), (1, 2)])
    _, _, _, hooks = run(comps, jobs=2, up_to_date={1})
    assert [(i, ran) for i, ran, _ in hooks.checks if i == 2] == [(2, True)]


def test_everything_up_to_date_runs_nothing():
    comps = computation_graph(3, edges=[(0, 1), (1, 2)])
    sched, settled, ex, _ = run(comps, jobs=2, up_to_date={0, 1, 2})
    assert ex.started == {}
    assert sched.done == 3
    assert all(s.status == UP_TO_DATE for s in settled.values())


def test_producer_outside_selection_counts_as_finished():
    comps = computation_graph(2, edges=[(0, 1)])
    _, settled, ex, _ = run(comps, jobs=1, selected=[1])
    assert set(settled) == {1}
    assert settled[1].status == RAN and set(ex.started) == {1}


def test_consumer_released_exactly_once_with_many_producers():
    comps = computation_graph(6, edges=[(i, 5) for i in range(5)])
    _, settled, ex, hooks = run(comps, jobs=3, up_to_date={0, 2})
    assert [i for i, _, _ in hooks.checks].count(5) == 1
    assert ex.started[5] == max(ex.ended[i] for i in (1, 3, 4))


# -- failure ---------------------------------------------------------------------------------


def failure_graph():
    # c0 fails at t=1; c1 runs alongside until t=3; c2 waits for a slot; c3 reads c0;
    # c4 reads c3.
    comps = computation_graph(5, edges=[(0, 3), (3, 4)])
    durations = {0: 1.0, 1: 3.0, 2: 1.0, 3: 1.0, 4: 1.0}
    latency = {0: 10.0, 1: 9.0, 2: 1.0, 3: 2.0, 4: 1.0}
    return comps, durations, latency


def test_failure_stops_new_work_without_keep_going():
    comps, durations, latency = failure_graph()
    _, settled, ex, _ = run(comps, latency, jobs=2, durations=durations, fail={0})
    st = statuses(settled)
    assert st[0] == (FAILED, "exit 1")
    assert st[1] == (RAN, "never built")  # what runs is waited for
    assert st[2] == (SKIPPED, "build stopped")
    assert st[3] == (SKIPPED, "input c0.out failed")
    assert st[4][0] == SKIPPED
    assert set(ex.started) == {0, 1}


def test_keep_going_completes_independent_work():
    comps, durations, latency = failure_graph()
    _, settled, ex, _ = run(comps, latency, jobs=2, durations=durations, fail={0}, keep_going=True)
    st = statuses(settled)
    assert st[0] == (FAILED, "exit 1")
    assert st[1] == (RAN, "never built")
    assert st[2] == (RAN, "never built")
    assert st[3] == (SKIPPED, "input c0.out failed")
    assert st[4] == (SKIPPED, "input c3.out failed")
    assert set(ex.started) == {0, 1, 2}


def test_keep_going_consumer_with_one_failed_producer_of_several():
    comps = computation_graph(3, edges=[(0, 2), (1, 2)])
    _, settled, ex, _ = run(comps, jobs=2, fail={1}, keep_going=True)
    assert statuses(settled)[2] == (SKIPPED, "input c1.out failed")
    assert 2 not in ex.started


def test_ok_outcome_after_failure_does_not_release_consumers():
    # c1 finishes fine after c0 failed: its consumer c2 must not start (build stopping).
    comps = computation_graph(3, edges=[(1, 2)])
    durations = {0: 1.0, 1: 2.0, 2: 1.0}
    latency = {0: 5.0, 1: 4.0, 2: 1.0}
    _, settled, ex, _ = run(comps, latency, jobs=2, durations=durations, fail={0})
    assert statuses(settled)[1] == (RAN, "never built")
    assert statuses(settled)[2] == (SKIPPED, "build stopped")
    assert 2 not in ex.started


def test_hooks_finished_can_turn_success_into_failure():
    comps = computation_graph(2, edges=[(0, 1)])
    ex = FakeExecutor(comps, {})
    hooks = FakeHooks(ex)

    def finished(outcome):
        outcome.ok, outcome.reason = False, "declared output c0.out missing"
        return outcome

    hooks.finished = finished
    settled = Scheduler(comps, [0, 1], {0: 2.0, 1: 1.0}, 2, {}, True, ex, hooks).run()
    assert statuses(settled) == {0: (FAILED, "declared output c0.out missing"),
                                 1: (SKIPPED, "input c0.out failed")}


# -- interrupt -------------------------------------------------------------------------------


def test_interrupt_stops_everything():
    comps = computation_graph(4, edges=[(1, 3)])
    durations = {0: 10.0, 1: 2.0, 2: 5.0, 3: 1.0}
    latency = {0: 10.0, 1: 9.0, 2: 5.0, 3: 1.0}
    sched, settled, ex, _ = run(comps, latency, jobs=2, durations=durations, interrupt_at=1.0)
    assert sched.signal == 2
    assert ex.stop_calls == 1
    st = statuses(settled)
    assert st[0] == (FAILED, "interrupted")  # killed while running
    assert st[1] == (RAN, "never built")  # finished before the signal was seen
    assert st[2] == (SKIPPED, "build stopped")
    assert st[3] == (SKIPPED, "build stopped")
    assert set(ex.started) == {0, 1}


def test_interrupt_with_keep_going_still_stops():
    comps = computation_graph(3)
    durations = {0: 3.0, 1: 1.0, 2: 1.0}
    sched, settled, ex, _ = run(comps, {0: 3.0, 1: 2.0, 2: 1.0}, jobs=2, durations=durations,
                                keep_going=True, interrupt_at=0.5)
    assert sched.signal == 2
    assert statuses(settled)[0] == (FAILED, "interrupted")
    assert statuses(settled)[2] == (SKIPPED, "build stopped")
    assert 2 not in ex.started


def test_interrupt_before_anything_starts():
    comps = computation_graph(2)
    sched, settled, ex, _ = run(comps, jobs=2, interrupt_at=0.0)
    assert ex.started == {}
    assert all(s == (SKIPPED, "build stopped") for s in statuses(settled).values())


# -- starting before recording ------------------------------------------------------------------


class OrderedHooks(FakeHooks):
    """FakeHooks that log starts and recordings in one list, and fail the recording of the
    runs in `unrecordable` (a declared output missing), saying so in `will_succeed` as the
    recorder does (or not, with `warns=False`)."""

    def __init__(self, executor, unrecordable=(), warns=True):
        super().__init__(executor)
        self.events: list[tuple[str, int]] = []
        self.unrecordable, self.warns = set(unrecordable), warns

    def starting(self, index, reason):
        self.events.append(("start", index))

    def will_succeed(self, outcome):
        return outcome.ok and not (self.warns and outcome.index in self.unrecordable)

    def finished(self, outcome):
        self.events.append(("record", outcome.index))
        if outcome.index in self.unrecordable:
            outcome.ok, outcome.reason = False, f"declared output c{outcome.index}.out missing"
        return outcome


def ordered_run(comps, latency, jobs=1, keep_going=False, unrecordable=(), warns=True):
    ex = FakeExecutor(comps, {})
    hooks = OrderedHooks(ex, unrecordable, warns)
    sched = Scheduler(comps, list(range(len(comps))), latency, jobs, {}, keep_going, ex, hooks)
    return sched, sched.run(), ex, hooks


def test_what_is_ready_starts_before_the_run_that_ended_is_recorded():
    comps = computation_graph(3)
    sched, settled, _, hooks = ordered_run(comps, {0: 3.0, 1: 2.0, 2: 1.0})
    assert hooks.events == [("start", 0), ("start", 1), ("record", 0), ("start", 2),
                            ("record", 1), ("record", 2)]
    assert sched.start_order == [0, 1, 2]
    assert all(s.status == RAN for s in settled.values())


def test_a_consumer_ahead_of_what_is_ready_waits_for_its_producers_recording():
    # c1, c0's consumer, comes before the ready c2: c0 is recorded first, then c1 starts.
    comps = computation_graph(3, edges=[(0, 1)])
    sched, _, _, hooks = ordered_run(comps, {0: 5.0, 1: 4.0, 2: 2.0})
    assert hooks.events[:3] == [("start", 0), ("record", 0), ("start", 1)]
    assert sched.start_order == [0, 1, 2]
    # behind what is ready, it starts after it, as it would have had c0 been recorded at once
    sched, _, _, hooks = ordered_run(comps, {0: 5.0, 1: 1.0, 2: 2.0})
    assert hooks.events[:3] == [("start", 0), ("start", 2), ("record", 0)]
    assert sched.start_order == [0, 2, 1]


def test_a_run_its_recording_fails_starts_nothing_more_without_keep_going():
    comps = computation_graph(3)
    _, settled, ex, hooks = ordered_run(comps, {0: 3.0, 1: 2.0, 2: 1.0}, unrecordable={0})
    assert hooks.events == [("start", 0), ("record", 0)]
    assert statuses(settled) == {0: (FAILED, "declared output c0.out missing"),
                                 1: (SKIPPED, "build stopped"), 2: (SKIPPED, "build stopped")}
    assert set(ex.started) == {0}


def test_a_run_its_recording_fails_with_keep_going_the_rest_goes_on():
    comps = computation_graph(3, edges=[(0, 2)])
    _, settled, ex, hooks = ordered_run(comps, {0: 3.0, 1: 2.0, 2: 1.0}, keep_going=True,
                                        unrecordable={0})
    assert hooks.events[:3] == [("start", 0), ("start", 1), ("record", 0)]
    assert statuses(settled) == {0: (FAILED, "declared output c0.out missing"),
                                 1: (RAN, "never built"), 2: (SKIPPED, "input c0.out failed")}
    assert set(ex.started) == {0, 1}


def test_a_hook_that_does_not_say_its_recording_fails_lets_one_more_start():
    # what `will_succeed` is for: without it, the next ready run starts before the failure is known
    comps = computation_graph(3)
    _, settled, ex, _ = ordered_run(comps, {0: 3.0, 1: 2.0, 2: 1.0}, unrecordable={0}, warns=False)
    assert set(ex.started) == {0, 1}
    assert statuses(settled)[2] == (SKIPPED, "build stopped")


def test_runs_ending_together_free_their_slots_before_either_is_recorded():
    # -j 2: c0 and c1 end at once; c2 and c3 take both slots before either is recorded
    comps = computation_graph(4)
    _, _, _, hooks = ordered_run(comps, {0: 4.0, 1: 3.0, 2: 2.0, 3: 1.0}, jobs=2)
    assert hooks.events == [("start", 0), ("start", 1), ("start", 2), ("start", 3),
                            ("record", 0), ("record", 1), ("record", 2), ("record", 3)]


class _NeverSure(FakeHooks):
    def will_succeed(self, outcome):
        return False  # every run is recorded before anything more starts: the order of old


def test_starting_before_recording_changes_no_schedule():
    # Random graphs (up-to-date ones among them, failures, -k, CPUs, a pool): the starts,
    # their times and the verdicts are those of a scheduler that records every run first.
    import random

    for trial in range(300):
        rng = random.Random(trial)
        n = rng.randint(1, 25)
        edges = [(p, c) for c in range(n) for p in range(c) if rng.random() < 0.15]
        cpus = {i: rng.choice([1, 1, 2, 3]) for i in range(n)}
        pools = {i: "p" for i in range(n) if rng.random() < 0.3}
        durations = {i: rng.choice([0.5, 1.0, 2.0]) for i in range(n)}
        latency = {i: rng.choice([1.0, 2.0, 3.0]) for i in range(n)}
        up_to_date = {i for i in range(n) if rng.random() < 0.2}
        fail = {i for i in range(n) if rng.random() < 0.05}
        jobs, keep_going = rng.randint(1, 4), rng.random() < 0.5
        seen = []
        for hooks_class in (FakeHooks, _NeverSure):
            comps = computation_graph(n, edges, cpus, pools)
            ex = FakeExecutor(comps, durations, fail)
            sched = Scheduler(comps, list(range(n)), latency, jobs, {"p": 1}, keep_going, ex,
                              hooks_class(ex, up_to_date))
            seen.append((sched.start_order, ex.started, statuses(sched.run()), ex.clock))
        assert seen[0] == seen[1], trial
