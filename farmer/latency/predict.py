"""Predicting a build: estimates, expected latencies and a simulated run of the real policy,
with the bounds that tell how good the schedule is, and the same graph scheduled the way
make (FIFO in manifest order) and ninja >= 1.12 (critical path counting every step as 1)
would, for comparison."""

from __future__ import annotations

from farmer.latency import critical, estimates, simulate
from farmer.graph import Computation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class Prediction:
    __slots__ = ("jobs", "to_run", "estimates", "latency", "_simulation", "critical_path",
                 "critical_path_s", "total_work_s", "fifo_makespan_s", "unit_makespan_s",
                 "unknown")

    def __init__(
        self,
        jobs: int,
        to_run: dict[int, str],
        estimates: dict[int, float],  # seconds, for every selected computation (0 if up to date)
        latency: dict[int, float],  # expected latency: the critical path from each one to the end
        # the simulated run, or what makes it when first asked for: a build asks at its end
        # (last-build.json's predicted makespan), so simulating never delays its first command
        simulation: simulate.Simulation | Callable[[], simulate.Simulation],
        critical_path: list[int],
        critical_path_s: float,
        total_work_s: float,
        fifo_makespan_s: float | None = None,
        unit_makespan_s: float | None = None,
        unknown: set[int] | None = None,  # would run, with no history yet (estimates.Estimates)
    ) -> None:
        self.jobs, self.to_run, self.estimates, self.latency = jobs, to_run, estimates, latency
        self._simulation, self.critical_path = simulation, critical_path
        self.critical_path_s, self.total_work_s = critical_path_s, total_work_s
        self.fifo_makespan_s, self.unit_makespan_s = fifo_makespan_s, unit_makespan_s
        self.unknown = set() if unknown is None else unknown

    @property
    def known(self) -> bool:
        """Whether every computation that would run has something measured to go by: if
        not, the figures are made of 1 s guesses, and say "no history yet" instead."""
        return not self.unknown

    @property
    def simulation(self) -> simulate.Simulation:
        if callable(self._simulation):
            self._simulation = self._simulation()
        return self._simulation

    @property
    def makespan_s(self) -> float:
        return self.simulation.makespan_s

    @property
    def lower_bound_s(self) -> float:
        return max(self.critical_path_s, self.total_work_s / self.jobs)


def predict(comps: list[Computation], selected: list[int], to_run: dict[int, str],
            estimates: dict[int, float], jobs: int, pools: dict[str, int],
            compare: bool = False) -> Prediction:
    """Simulate building `selected` where the computations in `to_run` take their estimates."""
    durations = {i: (estimates.get(i, 0.0) if i in to_run else 0.0) for i in selected}
    if not to_run:  # nothing would run: no need to simulate every up-to-date computation
        return Prediction(jobs=jobs, to_run=to_run, estimates=durations, latency=durations,
                          simulation=simulate.Simulation(0.0, [], []), critical_path=[],
                          critical_path_s=0.0, total_work_s=0.0, fifo_makespan_s=0.0 if compare else None,
                          unit_makespan_s=0.0 if compare else None)
    # What does not run takes no time and lies on no path between things that run (every
    # consumer of something that runs runs too): leave it out of the simulation.
    running = [i for i in selected if i in to_run]
    latency = critical.expected_latency(comps, running, durations)
    frozen = dict(to_run), dict(durations), dict(latency)  # as now: the build goes on with them
    sim = lambda: simulate.simulate(comps, running, *frozen, jobs, pools)  # noqa: E731
    path = [i for i in critical.critical_path(comps, latency) if i in to_run]
    prediction = Prediction(
        jobs=jobs, to_run=to_run, estimates=durations, latency=latency, simulation=sim,
        critical_path=path, critical_path_s=max(latency.values(), default=0.0),
        total_work_s=sum(durations[i] * max(1, min(comps[i].cpus, jobs)) for i in to_run),
        unknown={i for i in getattr(estimates, "unknown", ()) if i in to_run},
    )
    if compare:
        # make: the order the Makefile lists things in. ninja >= 1.12: the longest chain
        # counted in steps, every step weighing the same.
        fifo = {i: -float(rank) for rank, i in enumerate(sorted(running))}
        unit = critical.expected_latency(comps, running, dict.fromkeys(running, 1.0))
        prediction.fifo_makespan_s = simulate.simulate(
            comps, running, to_run, durations, fifo, jobs, pools).makespan_s
        prediction.unit_makespan_s = simulate.simulate(
            comps, running, to_run, durations, unit, jobs, pools).makespan_s
    return prediction


def remaining(comps: list[Computation], left: list[int], to_run: dict[int, str],
              estimates: dict[int, float], running_for: dict[int, float], jobs: int,
              pools: dict[str, int]) -> float:
    """The live ETA: what is left (`left`, not settled yet) simulated again, the running
    computations (`running_for`: index -> seconds they have run) first, for what remains of
    their estimates."""
    durations = {i: estimates.get(i, 0.0) for i in left}
    latency = critical.expected_latency(comps, left, durations)
    for i, ran_s in running_for.items():
        durations[i] = estimates.remaining_s(durations[i], ran_s)
        latency[i] = float("inf")
    runs = {i: "" for i in left if i in to_run or i in running_for}
    return simulate.simulate(comps, left, runs, durations, latency, jobs, pools).makespan_s
