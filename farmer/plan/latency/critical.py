"""Expected latency: a computation's estimated duration plus the largest expected latency
among the computations that consume its outputs (the critical path from it to the end)."""

from __future__ import annotations

from farmer.graph.graph import Computation
from farmer.plan.latency.seconds import Seconds


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
