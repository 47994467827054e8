"""A simulated clock for the scheduler: `plan --simulate` and the prediction at the start
of a build run the real scheduling policy with each computation lasting its estimate."""

from __future__ import annotations

from farmer.graph.graph import Computation
from farmer.run.executors.simulated import SimulatedExecutor, WorldSetups
from farmer.run.scheduler import Hooks, Scheduler, Span, WorldSpan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


class _SimHooks(Hooks):
    """The plan's verdicts stand: nothing is re-checked after its producers ran."""

    __slots__ = ("to_run",)

    def __init__(self, to_run: dict[int, str]) -> None:
        self.to_run = to_run

    def check(self, index: int, producers_ran: bool) -> str | None:
        return self.to_run.get(index)


class Simulation:
    __slots__ = ("makespan_s", "start_order", "timeline", "world_ready", "world_spans")

    def __init__(self, makespan_s: float, start_order: list[int], timeline: list[Span]) -> None:
        self.makespan_s = makespan_s
        self.start_order = start_order
        self.timeline = timeline  # each computation's own run (after its world was ready)
        self.world_ready: dict[str, float] = {}  # when each world was set up
        self.world_spans: list[WorldSpan] = []  # each world's set-up, in the slot it held


def simulate(comps: list[Computation], selected: list[int], to_run: dict[int, str],
             duration: dict[int, float], latency: dict[int, float], jobs: int,
             pools: dict[str, int], worlds: WorldSetups | None = None,
             timeline: bool = True, world_latency: Mapping[str, float] | None = None) -> Simulation:
    """Run the scheduler over `selected` with each computation in `to_run` lasting its estimate
    and every other one up to date; world tasks wait for their world's set-up (`worlds`; none:
    every world is ready), each set-up a step of the schedule of expected latency
    `world_latency`. Without `timeline`, no spans are made: a build's end asks only for
    the makespan, and a span for each of a large graph's computations is memory it would hold
    for nothing (see bench/results/performance-notes.md#figures-from-code-comments)."""
    executor = SimulatedExecutor(duration, worlds=worlds, record=timeline)
    scheduler = Scheduler(comps, selected, latency, jobs, pools, keep_going=True,
                          executor=executor, hooks=_SimHooks(to_run), worlds=worlds,
                          world_latency=world_latency)
    scheduler.run()
    spans = [Span(i, scheduler.slots_of[i], start, start + duration.get(i, 0.0))
             for i, start in executor.began.items()] if timeline else []
    simulation = Simulation(executor.clock, scheduler.start_order, spans)
    simulation.world_ready = executor.ready_at
    simulation.world_spans = scheduler.world_spans
    return simulation
