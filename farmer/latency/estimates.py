"""Duration estimates for computations (SPEC §2 "Scheduling").

In order of preference: measured history of the same computation; the task's `cost`; a
fit of duration against total input size over the task's measured computations, when the
fit explains their durations; the mean of the task's measured computations; 1 s.
"""

from __future__ import annotations

from farmer.state import Sample
from farmer.graph import Computation

DEFAULT_S = 1.0
# Weight of a sample relative to the next newer one: with three samples the two older
# ones together outweigh the newest, so one outlier cannot decide the median.
_DECAY = 0.8
_MIN_FIT_POINTS = 3
_MIN_R2 = 0.8


def from_history(samples: list[Sample]) -> float:
    """An exponentially weighted median of the measured wall times, newest weighing most.

    A weighted median, unlike a weighted mean, is not dragged by one outlier once there
    are three or more samples; with two, the newer one decides.
    """
    weighted = []
    w = 1.0
    for s in reversed(samples):  # newest first
        weighted.append((s.wall_s, w))
        w *= _DECAY
    weighted.sort()
    half = sum(w for _, w in weighted) / 2
    acc = 0.0
    for value, w in weighted:
        acc += w
        if acc >= half:
            return value
    return weighted[-1][0]


class _TaskModel:
    __slots__ = ("mean", "slope", "intercept")

    def __init__(self, mean: float, slope: float | None = None, intercept: float | None = None) -> None:
        self.mean, self.slope, self.intercept = mean, slope, intercept

    def predict(self, size: int | None) -> float:
        if self.slope is not None and size is not None:
            return max(0.0, self.intercept + self.slope * size)
        return self.mean


def _fit(points: list[tuple[int, float]]) -> _TaskModel:
    """Least squares of duration on input bytes, kept only when it explains the data."""
    durations = [d for _, d in points]
    mean = sum(durations) / len(durations)
    model = _TaskModel(mean)
    if len(points) < _MIN_FIT_POINTS:
        return model
    xs = [x for x, _ in points]
    mx = sum(xs) / len(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return model
    sxy = sum((x - mx) * (d - mean) for x, d in points)
    slope = sxy / sxx
    intercept = mean - slope * mx
    ss_tot = sum((d - mean) ** 2 for d in durations)
    ss_res = sum((d - intercept - slope * x) ** 2 for x, d in points)
    if ss_tot > 0 and 1 - ss_res / ss_tot >= _MIN_R2 and slope > 0:
        model.slope, model.intercept = slope, intercept
    return model


def estimate(comps: list[Computation], indices: list[int], history: dict[str, list[Sample]],
             input_bytes: dict[int, int] | None = None) -> dict[int, float]:
    """Estimated seconds for each computation in `indices`."""
    models: dict[str, _TaskModel] = {}
    by_task: dict[str, list[tuple[int, float]]] = {}
    if any(comps[i].id not in history and comps[i].cost is None for i in indices):
        # Some computation has neither history nor cost: learn from its task's others.
        for samples in history.values():
            last = samples[-1]
            by_task.setdefault(last.task, []).append((last.input_bytes or 0, from_history(samples)))
    out = {}
    for i in indices:
        comp = comps[i]
        if comp.kind is None:
            out[i] = 0.0  # an alias runs nothing
            continue
        samples = history.get(comp.id)
        if samples:
            out[i] = from_history(samples)
        elif comp.cost is not None:
            out[i] = comp.cost
        elif comp.task in by_task:
            model = models.get(comp.task)
            if model is None:
                model = models[comp.task] = _fit(by_task[comp.task])
            out[i] = model.predict(input_bytes.get(i) if input_bytes else None)
        else:
            out[i] = DEFAULT_S
    return out
