"""Duration estimates for computations (SPEC §2 "Scheduling").

In order of preference: measured history of the same computation; the task's `cost`; a
fit of duration against total input size over the task's measured computations, when the
fit explains their durations; the mean of the task's measured computations; the median of
the project's measured computations that run the same program (`gcc`, `tools/make.py`);
the median of all the project's measured computations. With none of these a computation has
*no history yet*: it is scheduled as if it took 1 s, and a prediction that counts it says so
instead of printing a made-up number.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Computation
    from farmer.store.state import Sample

DEFAULT_S = 1.0
# Weight of a sample relative to the next newer one: with three samples the two older
# ones together outweigh the newest, so one outlier cannot decide the median.
_DECAY = 0.8
_MIN_FIT_POINTS = 3
_MIN_R2 = 0.8


def program(comp: Computation) -> str | None:
    """What a computation runs, to compare computations of different tasks: a command's
    first word past `VAR=value` assignments (its basename), a python line's script or
    module."""
    action = comp.action
    if not action:
        return None
    words = action.split()
    if comp.kind == "python":
        if words[0] == "-m" and len(words) > 1:
            return "python -m " + words[1]
        return None if words[0].startswith("-") else "python " + words[0]
    for word in words:
        if "=" not in word or word.startswith("="):
            return word.rsplit("/", 1)[-1].strip("'\"")
    return None


def _median(values: list[float]) -> float:
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


class Prior:
    """What the project's measured computations say about one never measured: the median
    duration by program, and over all of them (None: nothing measured)."""

    __slots__ = ("by_program", "overall")

    def __init__(self, by_program: dict[str, float], overall: float | None) -> None:
        self.by_program, self.overall = by_program, overall

    @classmethod
    def of(cls, samples: list[Sample], program_of: Callable[[str], str | None]) -> Prior:
        """From measured runs (one per computation, the newest) and the program of a
        computation id (None: not in the graph any more, or no program)."""
        durations: dict[str, list[float]] = {}
        for s in samples:
            name = program_of(s.id)
            if name is not None:
                durations.setdefault(name, []).append(s.wall_s)
        overall = _median([s.wall_s for s in samples]) if samples else None
        return cls({name: _median(d) for name, d in durations.items()}, overall)

    def guess(self, comp: Computation) -> float | None:
        if not self.by_program:  # nothing measured (a first build): no need to name programs
            return self.overall
        name = program(comp)
        if name is not None and name in self.by_program:
            return self.by_program[name]
        return self.overall


def remaining_s(estimate_s: float, elapsed_s: float) -> float:
    """What is left of a running computation: its estimate less the time it has run, but
    never nothing while it runs. Past four fifths of its estimate it is expected to run a
    quarter of its elapsed time more (the longer it has run over, the longer it may still
    take), so an ETA never reads 0 while work runs."""
    return max(estimate_s - elapsed_s, 0.25 * elapsed_s)


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


class Estimates(dict):
    """Estimated seconds by computation index; `unknown`: those with no history yet, at
    DEFAULT_S for scheduling only."""

    __slots__ = ("unknown",)

    def __init__(self) -> None:
        super().__init__()
        self.unknown: set[int] = set()


def estimate(comps: list[Computation], indices: list[int], history: dict[str, list[Sample]],
             input_bytes: dict[int, int] | None = None,
             prior: Callable[[], Prior] | None = None) -> Estimates:
    """Estimated seconds for each computation in `indices`. `prior` makes the project's
    Prior, called only if some computation needs it."""
    models: dict[str, _TaskModel] = {}
    by_task: dict[str, list[tuple[int, float]]] = {}
    if any(comps[i].id not in history and comps[i].cost is None for i in indices):
        # Some computation has neither history nor cost: learn from its task's others.
        for samples in history.values():
            last = samples[-1]
            by_task.setdefault(last.task, []).append((last.input_bytes or 0, from_history(samples)))
    out = Estimates()
    guesses: Prior | None = None
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
            if guesses is None and prior is not None:
                guesses = prior()
            guess = guesses.guess(comp) if guesses is not None else None
            if guess is None:
                out.unknown.add(i)
            out[i] = DEFAULT_S if guess is None else guess
    return out


def fill_unknown(estimates: dict[int, float], unknown: set[int], comps: list[Computation],
                 measured: dict[int, float]) -> dict[int, float]:
    """`estimates` with those of `unknown` computations taken from what this build has
    measured so far (`measured`: seconds by index): the median of the same task's, else of
    the same program's, else of all; unchanged while nothing is measured."""
    if not unknown or not measured:
        return estimates
    by_task: dict[str, list[float]] = {}
    by_program: dict[str | None, list[float]] = {}
    for i, seconds in measured.items():
        by_task.setdefault(comps[i].task, []).append(seconds)
        by_program.setdefault(program(comps[i]), []).append(seconds)
    overall = _median(list(measured.values()))
    task_median = {task: _median(v) for task, v in by_task.items()}
    program_median = {name: _median(v) for name, v in by_program.items() if name is not None}
    filled = dict(estimates)
    for i in unknown:
        if i in filled:
            comp = comps[i]
            filled[i] = task_median.get(comp.task) or program_median.get(program(comp)) or overall
    return filled
