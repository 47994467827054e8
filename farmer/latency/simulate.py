"""A simulated clock for the scheduler: `plan --simulate` and the prediction at the start
of a build run the real scheduling policy with each computation lasting its estimate."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from farmer.scheduler import Outcome, Scheduler
from farmer.traversal import Computation


@dataclass(slots=True)
class Slot:
    index: int
    slot: int
    start_s: float
    end_s: float


class SimulatedExecutor:
    """Every computation takes exactly its estimated duration; nothing runs."""

    def __init__(self, duration: dict[int, float], jobs: int) -> None:
        self.duration = duration
        self.clock = 0.0
        self._events: list[tuple[float, int, int]] = []  # (end, sequence, index)
        self._seq = 0
        self._free_slots = list(range(jobs))
        self._slot_of: dict[int, list[int]] = {}
        self._started: dict[int, float] = {}
        self.timeline: list[Slot] = []

    def running(self) -> int:
        return len(self._events)

    def start(self, comp: Computation) -> None:
        i = comp.index
        cpus = min(max(1, comp.cpus), max(1, len(self._free_slots)))
        self._free_slots.sort()
        taken, self._free_slots = self._free_slots[:cpus], self._free_slots[cpus:]
        self._slot_of[i] = taken
        self._started[i] = self.clock
        heapq.heappush(self._events, (self.clock + self.duration.get(i, 0.0), self._seq, i))
        self._seq += 1

    def wait(self, timeout: float | None) -> list[Outcome]:
        if not self._events:
            return []
        end, _, i = heapq.heappop(self._events)
        self.clock = end
        finished = [i]
        while self._events and self._events[0][0] == end:
            finished.append(heapq.heappop(self._events)[2])
        out = []
        for j in finished:
            slots = self._slot_of.pop(j)
            self._free_slots.extend(slots)
            self.timeline.append(Slot(j, slots[0], self._started[j], end))
            out.append(Outcome(j, True, None, 0, self._started[j], end))
        return out

    def stop(self) -> None:
        self._events.clear()


@dataclass(slots=True)
class _SimHooks:
    to_run: dict[int, str]
    started: list[int] = field(default_factory=list)

    def check(self, index: int, producers_ran: bool) -> str | None:
        return self.to_run.get(index)

    def starting(self, index: int, reason: str) -> None:
        self.started.append(index)

    def finished(self, outcome: Outcome) -> Outcome:
        return outcome

    def interrupted(self) -> int | None:
        return None

    def may_start(self, running: int) -> bool:
        return True


@dataclass(slots=True)
class Simulation:
    makespan_s: float
    start_order: list[int]
    timeline: list[Slot]


def simulate(comps: list[Computation], selected: list[int], to_run: dict[int, str],
             duration: dict[int, float], latency: dict[int, float], jobs: int,
             pools: dict[str, int]) -> Simulation:
    executor = SimulatedExecutor(duration, jobs)
    hooks = _SimHooks(to_run)
    scheduler = Scheduler(comps, selected, latency, jobs, pools, keep_going=True,
                          executor=executor, hooks=hooks)
    scheduler.run()
    return Simulation(executor.clock, scheduler.start_order, executor.timeline)
