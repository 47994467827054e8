"""A simulated clock for the scheduler: `plan --simulate` and the prediction at the start
of a build run the real scheduling policy with each computation lasting its estimate."""

from __future__ import annotations

import heapq

from farmer.scheduler import Outcome, Scheduler, Span
from farmer.graph import Computation


class SimulatedExecutor:
    """Every computation takes exactly its estimated duration; nothing runs."""

    def __init__(self, duration: dict[int, float]) -> None:
        self.duration = duration
        self.clock = 0.0
        self._events: list[tuple[float, int, int]] = []  # (end, sequence, index)
        self._seq = 0
        self.started: dict[int, float] = {}

    def running(self) -> int:
        return len(self._events)

    def start(self, comp: Computation) -> None:
        self.started[comp.index] = self.clock
        heapq.heappush(self._events, (self.clock + self.duration.get(comp.index, 0.0), self._seq, comp.index))
        self._seq += 1

    def wait(self, timeout: float | None) -> list[Outcome]:
        if not self._events:
            return []
        end = self._events[0][0]
        self.clock = end
        out = []
        while self._events and self._events[0][0] == end:
            i = heapq.heappop(self._events)[2]
            out.append(Outcome(i, True, None, 0, self.started[i], end))
        return out

    def stop(self) -> None:
        self._events.clear()


class _SimHooks:
    __slots__ = ("to_run",)

    def __init__(self, to_run: dict[int, str]) -> None:
        self.to_run = to_run

    def check(self, index: int, producers_ran: bool) -> str | None:
        return self.to_run.get(index)

    def starting(self, index: int, reason: str) -> None:
        pass

    def finished(self, outcome: Outcome) -> Outcome:
        return outcome

    def interrupted(self) -> int | None:
        return None

    def may_start(self, running: int) -> bool:
        return True


class Simulation:
    __slots__ = ("makespan_s", "start_order", "timeline")

    def __init__(self, makespan_s: float, start_order: list[int], timeline: list[Span]) -> None:
        self.makespan_s, self.start_order, self.timeline = makespan_s, start_order, timeline


def simulate(comps: list[Computation], selected: list[int], to_run: dict[int, str],
             duration: dict[int, float], latency: dict[int, float], jobs: int,
             pools: dict[str, int]) -> Simulation:
    """Run the scheduler over `selected` with each computation in `to_run` lasting its
    estimate and every other one up to date."""
    executor = SimulatedExecutor(duration)
    scheduler = Scheduler(comps, selected, latency, jobs, pools, keep_going=True,
                          executor=executor, hooks=_SimHooks(to_run))
    scheduler.run()
    timeline = [Span(i, scheduler.slots_of[i], start, start + duration.get(i, 0.0))
                for i, start in executor.started.items()]
    return Simulation(executor.clock, scheduler.start_order, timeline)
