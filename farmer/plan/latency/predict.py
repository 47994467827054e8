"""Predicting a build: estimates, expected latencies and a simulated run of the real policy,
with the bounds that tell how good the schedule is, and the same graph scheduled the way
make (FIFO in manifest order) and ninja >= 1.12 (critical path counting every step as 1)
would, for comparison."""

from __future__ import annotations

from itertools import islice

from farmer.graph.graph import Computation
from farmer.plan.latency import critical, estimates
from farmer.plan.latency.seconds import Seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from collections.abc import Set as AbstractSet

    from farmer.plan.latency import simulate
    from farmer.run.executors.simulated import WorldSetups

# Start-up rule (docs/performance.md): the simulation (farmer/plan/latency/simulate.py, with the
# simulated executor) is imported where a prediction is first simulated, which a build does
# once its first commands run.


class Prediction:
    __slots__ = ("jobs", "to_run", "estimates", "latency", "_simulation", "critical_path",
                 "critical_path_s", "_total_work_s", "fifo_makespan_s", "unit_makespan_s",
                 "unknown", "worlds", "critical_world", "_makespan_s", "world_latency",
                 "critical_steps")

    def __init__(
        self,
        jobs: int,
        to_run: dict[int, str],
        estimates: Mapping[int, float],  # seconds, for every selected computation (0 if up to date)
        latency: Mapping[int, float],  # expected latency: the critical path from each one to the end
        # the simulated run, or what makes it when first asked for: a build asks once its
        # first commands run (last-build.json's predicted makespan), so simulating never
        # delays its first command
        # (called with False: the makespan alone is asked for, and no timeline is made)
        simulation: simulate.Simulation | Callable[[bool], simulate.Simulation],
        critical_path: list[int],
        critical_path_s: float,
        total_work_s: float | Callable[[], float],  # or what sums it when first asked for (a plan's)
        fifo_makespan_s: float | None = None,
        unit_makespan_s: float | None = None,
        unknown: AbstractSet[int] | None = None,  # would run, with no history yet (estimates.Estimates)
    ) -> None:
        self.jobs, self.to_run, self.estimates, self.latency = jobs, to_run, estimates, latency
        self._simulation, self.critical_path = simulation, critical_path
        self.critical_path_s, self._total_work_s = critical_path_s, total_work_s
        self.fifo_makespan_s, self.unit_makespan_s = fifo_makespan_s, unit_makespan_s
        self.unknown = set() if unknown is None else unknown
        self.worlds: WorldSetups | None = None  # the worlds' set-up, as simulated
        self.critical_world: str | None = None  # the first world whose set-up is on the critical path
        self.world_latency: dict[str, float] = {}  # each world set-up's expected latency
        # The critical path with the world set-ups on it (a world by its name), as shown.
        self.critical_steps: list[int | str] = critical_path
        self._makespan_s: float | None = None  # simulated for it alone (`makespan_s`)

    @property
    def known(self) -> bool:
        """Whether every computation that would run has something measured to go by: if
        not, the figures are made of 1 s guesses, and say "no history yet" instead."""
        return not self.unknown

    @property
    def simulation(self) -> simulate.Simulation:
        if callable(self._simulation):
            self._simulation = self._simulation(True)
        return self._simulation

    @property
    def makespan_s(self) -> float:
        if not callable(self._simulation):
            return self._simulation.makespan_s
        if self._makespan_s is None:  # the same run, without its timeline (a build's end)
            self._makespan_s = self._simulation(False).makespan_s
        return self._makespan_s

    @property
    def total_work_s(self) -> float:
        """The seconds of work that would run, a computation's estimate counted once per CPU
        it takes, with the worlds' set-up: only `plan --simulate` shows it."""
        if callable(self._total_work_s):
            self._total_work_s = self._total_work_s()
        return self._total_work_s

    def keep_makespan(self) -> None:
        """Keep only the makespan (simulated now, unless it was) and whether every
        computation had history (`known`): all a build's end needs. The tables by
        computation go (at 100 000 computations, with the scheduler's, tens of MB), and
        with them the critical path and the total work (nothing a build's end reads)."""
        from farmer.plan.latency.simulate import Simulation

        makespan = self.makespan_s
        self._simulation = Simulation(makespan, [], [])
        self.to_run, self.estimates, self.latency = {}, {}, {}
        self.unknown = set(islice(self.unknown, 1))
        self.critical_path = []
        self.critical_steps = []
        self._total_work_s = 0.0

    @property
    def lower_bound_s(self) -> float:
        return max(self.critical_path_s, self.total_work_s / self.jobs)


def predict(comps: list[Computation], selected: list[int], to_run: dict[int, str],
            estimates: dict[int, float], jobs: int, pools: dict[str, int],
            compare: bool = False, worlds: WorldSetups | None = None) -> Prediction:
    """Simulate building `selected` where the computations in `to_run` take their estimates
    and the worlds they need take their set-up (`worlds`)."""
    durations = Seconds(len(comps), selected)  # by index: a build holds it to its end
    seconds, has = durations.values_by_index, durations.has
    for i in selected:
        has[i] = 1
        if i in to_run:
            seconds[i] = estimates.get(i, 0.0)
    if not to_run:  # nothing would run: no need to simulate every up-to-date computation
        nothing = Prediction(jobs=jobs, to_run=to_run, estimates=durations, latency=durations,
                             simulation=_nothing_runs, critical_path=[], critical_path_s=0.0,
                             total_work_s=0.0, fifo_makespan_s=0.0 if compare else None,
                             unit_makespan_s=0.0 if compare else None)
        nothing._makespan_s = 0.0  # all a build's end asks: the simulation is not imported
        return nothing
    # What does not run takes no time and lies on no path between things that run (every
    # consumer of something that runs runs too): leave it out of the simulation.
    running = [i for i in selected if i in to_run]
    # A world's set-up is a step of its own, before its tasks and after its parent world's
    # set-up and its inputs' producers: it heads its tasks' paths.
    steps = None
    if worlds is not None and worlds.parents:
        latency, steps = critical.latencies_with_setups(comps, running, durations, worlds)
    else:
        latency = critical.latencies(comps, running, durations)
    world_latency = steps.latency if steps is not None else {}
    # Nothing changes to_run, durations or latency once made (the scheduler and the ETA only
    # read them), so the simulation made later (once a build's first commands run) reads
    # them, not copies of them.
    def sim(timeline: bool) -> simulate.Simulation:
        from farmer.plan.latency.simulate import simulate

        return simulate(comps, running, to_run, durations, latency, jobs, pools, worlds, timeline,
                        world_latency)

    if steps is not None:
        chain = critical.critical_steps(comps, latency, steps)
        path = [i for i in chain if isinstance(i, int)]
        first = chain[0] if chain else None
        critical_s = (steps.latency[first] if isinstance(first, str) else latency[first]) if chain else 0.0
    else:  # the first index of the longest latency (a key function per item is slow)
        ahead = latency.values_by_index  # 0.0 where not running
        longest = max(ahead)
        start = min(i for i in running if ahead[i] == longest) if longest > 0 else min(running)
        chain = path = [i for i in critical.critical_path(comps, latency, start) if i in to_run]
        critical_s = latency[start]
    setups = {w: worlds.seconds.get(w, 0.0) for w in worlds.parents} if worlds is not None else {}
    prediction = Prediction(
        jobs=jobs, to_run=to_run, estimates=durations, latency=latency, simulation=sim,
        critical_path=path, critical_path_s=critical_s,
        # (a build never reads it: summed when first asked for)
        total_work_s=lambda: sum(seconds[i] * max(1, min(comps[i].cpus, jobs)) for i in to_run)
        + sum(setups.values()),
        unknown=_running_unknown(estimates, to_run),
    )
    prediction.worlds = worlds
    prediction.world_latency = world_latency
    prediction.critical_steps = chain
    worlds_on_path = [w for w in chain if isinstance(w, str) and setups.get(w)]
    if worlds_on_path:
        prediction.critical_world = worlds_on_path[0]
    if compare:
        from farmer.plan.latency import simulate

        # make: the order the Makefile lists things in. ninja >= 1.12: the longest chain
        # counted in steps, every step weighing the same.
        fifo = {i: -float(rank) for rank, i in enumerate(sorted(running))}
        unit = critical.expected_latency(comps, running, dict.fromkeys(running, 1.0))
        prediction.fifo_makespan_s = simulate.simulate(
            comps, running, to_run, durations, fifo, jobs, pools, worlds, False, world_latency).makespan_s
        prediction.unit_makespan_s = simulate.simulate(
            comps, running, to_run, durations, unit, jobs, pools, worlds, False, world_latency).makespan_s
    return prediction


def _nothing_runs(timeline: bool) -> simulate.Simulation:
    """The simulation of a plan that runs nothing: empty, at 0 s."""
    from farmer.plan.latency.simulate import Simulation

    return Simulation(0.0, [], [])


def _running_unknown(estimates: dict[int, float], to_run: dict[int, str]) -> AbstractSet[int]:
    """Those of `estimates.unknown` (estimates.Estimates) that would run: the set itself when
    all would (the session estimates only what would run), not a copy of 100 000 of them;
    `to_run`'s keys when they are all of them (a first build's): the estimates and their
    set go once the prediction is made, and a build holds this to its end."""
    unknown: set[int] = getattr(estimates, "unknown", set())
    if all(i in to_run for i in unknown):
        return to_run.keys() if len(unknown) == len(to_run) else unknown
    return {i for i in unknown if i in to_run}


def chain_setup_s(worlds: WorldSetups, world: str | None) -> float:
    """The set-up of `world` and of its ancestors: the least time before its tasks run."""
    total = 0.0
    while world is not None:
        total += worlds.seconds.get(world, 0.0)
        world = worlds.parents.get(world)
    return total


def remaining(comps: list[Computation], left: list[int], to_run: dict[int, str],
              estimate_s: dict[int, float], running_for: dict[int, float], jobs: int,
              pools: dict[str, int], worlds: WorldSetups | None = None) -> float:
    """What is left (`left`, not settled yet) simulated again, the running computations
    (`running_for`: index -> seconds they have run) first, for what remains of their
    estimates, after what is left of their worlds' set-up (`worlds`)."""
    from farmer.plan.latency import simulate

    durations = {i: estimate_s.get(i, 0.0) for i in left}
    world_latency: dict[str, float] = {}
    if worlds is not None and worlds.parents:
        by_index, steps = critical.latencies_with_setups(comps, left, durations, worlds)
        latency = dict(by_index.items())
        world_latency = steps.latency
    else:
        latency = critical.expected_latency(comps, left, durations)
    for i, ran_s in running_for.items():
        durations[i] = estimates.remaining_s(durations[i], ran_s)
        latency[i] = float("inf")
    runs = {i: "" for i in left if i in to_run or i in running_for}
    return simulate.simulate(comps, left, runs, durations, latency, jobs, pools, worlds,
                             world_latency=world_latency).makespan_s


def eta(p: Prediction, comps: list[Computation], left: list[int], measured: dict[int, float],
        running_for: dict[int, float], ready: dict[str, float | None], began: dict[str, float],
        now: float, pools: dict[str, int]) -> float | None:
    """The live view's ETA: what is left of a build predicted by `p`. `left`: not settled
    yet; `measured`: seconds of what ran this build; `running_for`: seconds each running
    computation has run; `ready`, `began`: the worlds set up, and the monotonic time those
    being set up began (Executor.worlds_set_up, worlds_setting_up). None (no ETA) while
    computations with no history yet run and nothing of this build was measured to go by."""
    est: dict[int, float] = p.estimates
    if p.unknown:
        if not measured:
            return None
        est = estimates.fill_unknown(est, p.unknown, comps, measured)
    worlds = p.worlds
    if worlds is not None:
        from farmer.run.executors.simulated import WorldSetups

        # Left of the worlds' set-up: nothing of those ready; the rest of those being set up
        # (their waiting tasks have not begun); all of those not started yet.
        seconds = {w: 0.0 if w in ready else estimates.remaining_s(s, now - began[w]) if w in began else s
                   for w, s in worlds.seconds.items()}
        worlds = WorldSetups(seconds, {w: p for w, p in worlds.parents.items() if w not in ready},
                             worlds.after)
        running_for = {i: 0.0 if comps[i].world in began else s for i, s in running_for.items()}
    return remaining(comps, left, p.to_run, est, running_for, p.jobs, pools, worlds)
