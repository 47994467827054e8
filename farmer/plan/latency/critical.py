"""Expected latency: a computation's estimated duration plus the largest expected latency
among the computations that consume its outputs (the critical path from it to the end)."""

from __future__ import annotations

from farmer.graph.graph import Computation
from farmer.plan.latency.seconds import Seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from farmer.run.executors.simulated import WorldSetups


def expected_latency(comps: list[Computation], order: list[int],
                     duration: dict[int, float]) -> dict[int, float]:
    """`order` is topological (producers first) and holds every computation considered."""
    latency: dict[int, float] = {}
    for i in reversed(order):
        tail = 0.0
        for c in comps[i].consumers:
            lc = latency.get(c)
            if lc is not None and lc > tail:
                tail = lc
        latency[i] = duration.get(i, 0.0) + tail
    return latency


def latencies(comps: list[Computation], order: list[int], duration: Seconds) -> Seconds:
    """`expected_latency` by index: what a build's prediction holds to its end."""
    latency = Seconds(len(comps), order)
    values, has = latency.values_by_index, latency.has
    seconds, known = duration.values_by_index, duration.has
    for i in reversed(order):
        tail = 0.0
        for c in comps[i].consumers:
            if has[c] and values[c] > tail:
                tail = values[c]
        values[i] = (seconds[i] if known[i] else 0.0) + tail
        has[i] = 1
    return latency


def critical_path(comps: list[Computation], latency: dict[int, float],
                  start: int | None = None) -> list[int]:
    """The chain of computations whose durations add up to the largest expected latency
    (from `start`, if given)."""
    if not latency:
        return []
    node = max(latency, key=lambda i: (latency[i], -i)) if start is None else start
    path = [node]
    while True:
        nxt = [c for c in comps[node].consumers if c in latency]
        if not nxt:
            return path
        node = max(nxt, key=lambda i: (latency[i], -i))
        path.append(node)


class WorldSteps:
    """World set-ups as steps of the graph (their expected latency in `latency`): each after
    its parent world's set-up and the computations that make its inputs, before its tasks."""

    __slots__ = ("latency", "tasks", "children", "readers", "roots")

    def __init__(self) -> None:
        self.latency: dict[str, float] = {}
        self.tasks: dict[str, list[int]] = {}  # world -> its own tasks considered
        self.children: dict[str, list[str]] = {}
        self.readers: dict[int, list[str]] = {}  # computation -> the set-ups reading its outputs
        self.roots: list[str] = []


def latencies_with_setups(comps: list[Computation], order: list[int],
                          duration: Mapping[int, float],
                          worlds: WorldSetups) -> tuple[Seconds, WorldSteps]:
    """`latencies` with the set-up of each world of `worlds` as a step of its own: a world
    task's latency is its own chain's (it starts once its world is ready), a set-up's is its
    estimate plus the largest latency among its tasks and its child worlds' set-ups, and a
    computation whose output a set-up reads has that set-up among its consumers."""
    latency = Seconds(len(comps), order)
    values, has = latency.values_by_index, latency.has
    steps = WorldSteps()
    for i in order:
        world = comps[i].world
        if world in worlds.parents:
            steps.tasks.setdefault(world, []).append(i)
    for world, parent in worlds.parents.items():
        if parent in worlds.parents:
            steps.children.setdefault(parent, []).append(world)
        else:
            steps.roots.append(world)
        for p in worlds.after.get(world, ()):
            steps.readers.setdefault(p, []).append(world)
    setup = steps.latency

    def world_latency(world: str) -> float:
        # Asked first from a producer of its inputs: every task of it and of the worlds
        # below it is downstream of that producer, so their latencies are known by then.
        got = setup.get(world)
        if got is None:
            tail = 0.0
            for i in steps.tasks.get(world, ()):
                if has[i] and values[i] > tail:
                    tail = values[i]
            for child in steps.children.get(world, ()):
                tail = max(tail, world_latency(child))
            got = setup[world] = worlds.seconds.get(world, 0.0) + tail
        return got

    readers = steps.readers
    for i in reversed(order):
        tail = 0.0
        for c in comps[i].consumers:
            if has[c] and values[c] > tail:
                tail = values[c]
        for world in readers.get(i, ()):
            tail = max(tail, world_latency(world))
        values[i] = duration.get(i, 0.0) + tail
        has[i] = 1
    for world in worlds.parents:
        world_latency(world)
    return latency, steps


def critical_steps(comps: list[Computation], latency: Mapping[int, float],
                   steps: WorldSteps) -> list[int | str]:
    """The longest chain through computations and world set-ups (a world named by its
    name): from the step with the largest expected latency, each time to the successor
    with the largest."""
    best: int | str | None = None
    top = -1.0
    for i, value in latency.items():
        if value > top:
            best, top = i, value
    for world, value in steps.latency.items():
        if value > top or (value == top and isinstance(best, int)):
            best, top = world, value
    path: list[int | str] = []
    while best is not None:
        path.append(best)
        options: list[tuple[float, int | str]] = []
        if isinstance(best, str):
            options += [(latency[i], i) for i in steps.tasks.get(best, ()) if i in latency]
            options += [(steps.latency[w], w) for w in steps.children.get(best, ())]
        else:
            options += [(latency[c], c) for c in comps[best].consumers if c in latency]
            options += [(steps.latency[w], w) for w in steps.readers.get(best, ())]
        if not options:
            break
        top = max(v for v, _ in options)
        best = min((step for v, step in options if v == top),
                   key=lambda s: (isinstance(s, int), s if isinstance(s, int) else 0))
    return path
