"""The last build as the reports see it: last-build.json's entries, with what the file
does not hold worked out from it, the graph and the state: the slot each computation ran in,
the critical path along what ran, the prediction made before the build, log tails."""

from __future__ import annotations

import json
import os

from farmer.errors import UsageError

TAIL_LINES = 40  # of a failed computation's log, in every report
TAIL_BYTES = 16 * 1024


class Entry:
    """One computation of last-build.json (SPEC section 4); `lane` is the slot it ran in,
    `predicted_s` the estimate the build started with, `critical` whether it lies on the
    critical path."""

    __slots__ = ("id", "task", "outputs", "status", "reason", "world", "start_s", "end_s",
                 "duration_s", "cpu_s", "max_rss_kb", "exit_code", "cache", "executor",
                 "lane", "predicted_s", "critical")

    def __init__(self, data: dict) -> None:
        self.id = str(data.get("id", ""))
        self.task = str(data.get("task", ""))
        self.outputs = list(data.get("outputs") or ())
        self.status = str(data.get("status", ""))
        self.reason = str(data.get("reason", ""))
        self.world = data.get("world")
        self.start_s = _number(data.get("start_s"))
        self.end_s = _number(data.get("end_s"))
        self.duration_s = _number(data.get("duration_s"))
        if self.duration_s is None and self.start_s is not None and self.end_s is not None:
            self.duration_s = self.end_s - self.start_s
        self.cpu_s = _number(data.get("cpu_s"))
        self.max_rss_kb = data.get("max_rss_kb")
        self.exit_code = data.get("exit_code")
        self.cache = data.get("cache")  # "local" | "remote" | None (SPEC section 5)
        self.executor = data.get("executor")  # "local" | "remote" | None
        self.lane: int | None = None
        self.predicted_s: float | None = None
        self.critical = False

    @property
    def timed(self) -> bool:
        return self.start_s is not None and self.end_s is not None


class WorldEntry:
    """One world of last-build.json's `worlds` (its set-up), shaped as an `Entry` where the
    reports draw both: `id` "world NAME set-up", `task` "world set-up", `lane` the slot it
    held, `critical` whether its set-up lies on the critical path."""

    __slots__ = ("name", "id", "task", "status", "start_s", "end_s", "duration_s", "lane",
                 "predicted_s", "critical", "reason")

    def __init__(self, data: dict) -> None:
        self.name = str(data.get("name", ""))
        self.id = f"world {self.name} set-up"
        self.task = "world set-up"
        self.status = str(data.get("status", ""))  # ok | failed | warm
        self.start_s = _number(data.get("start_s"))
        self.end_s = _number(data.get("end_s"))
        self.duration_s = self.end_s - self.start_s if self.timed else None
        self.lane: int | None = None
        self.predicted_s: float | None = None
        self.critical = False
        self.reason = {"ok": "set up", "failed": "set-up failed",
                       "warm": "kept warm from an earlier build"}.get(self.status, self.status)

    @property
    def timed(self) -> bool:
        return self.start_s is not None and self.end_s is not None

    @property
    def log(self) -> str:
        return os.path.join("logs", "worlds", f"{self.name}.log")


class LastBuild:
    __slots__ = ("farmer_dir", "head", "entries", "worlds", "critical_path", "notes")

    def __init__(self, farmer_dir: str, head: dict, entries: list[Entry],
                 worlds: list[WorldEntry] | None = None) -> None:
        self.farmer_dir = farmer_dir
        self.head = head
        self.entries = entries
        self.worlds = worlds or []  # the worlds set up, or found warm
        self.critical_path: list[Entry | WorldEntry] = []  # world set-ups on it included
        self.notes: list[str] = []  # what the report could not work out, and why

    def failed_setups(self) -> list[WorldEntry]:
        return [w for w in self.worlds if w.status == "failed"]

    def world_log_tail(self, world: WorldEntry) -> str:
        """The last lines of the world's own log (its setup's output and traceback)."""
        return log_tail(os.path.join(self.farmer_dir, world.log))

    @property
    def status(self) -> str:
        return str(self.head.get("status", "unknown"))

    @property
    def remote_error(self) -> str | None:
        """The remote error that failed a build whose computations all succeeded
        (--remote-strict); None: none."""
        said = self.head.get("remote_error")
        return str(said) if said else None

    @property
    def wall_s(self) -> float:
        return _number(self.head.get("wall_s")) or 0.0

    def count(self, status: str) -> int:
        return sum(1 for e in self.entries if e.status == status)

    def failures(self) -> list[Entry]:
        return [e for e in self.entries if e.status == "failed"]

    def timed(self) -> list[Entry]:
        return [e for e in self.entries if e.timed]

    def slowest(self, n: int) -> list[Entry]:
        return sorted(self.timed(), key=lambda e: (-(e.duration_s or 0.0), e.id))[:n]

    def log_path(self, entry: Entry) -> str:
        from farmer.run.executors.process import log_path

        return log_path(os.path.join(self.farmer_dir, "logs"), entry.id)

    def log_tail(self, entry: Entry) -> str:
        """The last lines of a computation's log ("" when it has none)."""
        return log_tail(self.log_path(entry))


def load(farmer_dir: str) -> LastBuild:
    """last-build.json of the project whose .farmer/ is `farmer_dir`, lanes assigned."""
    path = os.path.join(farmer_dir, "last-build.json")
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        raise UsageError(f"{path}: no last build to report on; run farmer build first") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot be read ({e}); run farmer build again") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise UsageError(f"{path}: not a farmer last-build.json (no tasks list); run farmer build again")
    head = {k: v for k, v in data.items() if k not in ("tasks", "worlds")}
    worlds = [WorldEntry(w) for w in data.get("worlds") or () if isinstance(w, dict)]
    build = LastBuild(farmer_dir, head, [Entry(t) for t in data["tasks"] if isinstance(t, dict)], worlds)
    assign_lanes([*build.entries, *(w for w in worlds if w.timed)])  # a set-up held a slot too
    return build


def assign_lanes(entries: list[Entry | WorldEntry]) -> int:
    """Give each timed entry the lowest lane free when it started, as the scheduler hands out
    its lowest free slot; the number of lanes used."""
    import heapq

    free: list[int] = []
    busy: list[tuple[float, int]] = []  # (end, lane)
    lanes = 0
    for e in sorted((e for e in entries if e.timed), key=lambda e: (e.start_s, e.end_s)):
        while busy and busy[0][0] <= e.start_s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            e.lane = heapq.heappop(free)
        else:
            e.lane, lanes = lanes, lanes + 1
        heapq.heappush(busy, (e.end_s, e.lane))
    return lanes


def add_graph(build: LastBuild, graph, history: dict | None,
              parents: dict[str, str | None] | None = None) -> None:
    """The critical path along what ran, world set-ups included, and each computation's
    prediction, from the project's graph, its worlds' parents (`parents`, the Farmfile's)
    and (when given) the measured history from before the build."""
    from farmer.plan.latency import critical, estimates

    comps = graph.computations
    by_id = graph.by_id
    index = {}
    for e in build.entries:
        i = by_id.get(e.id)
        if i is not None:
            index[i] = e
    # what ran (SPEC: critical_path_s is measured along what ran); a restore from the cache
    # is timed too, but is no step of the build's chain
    measured = {i: e.duration_s for i, e in index.items()
                if e.status in ("ran", "failed") and e.timed and e.duration_s is not None}
    order = [i for i in graph.order if i in measured]
    setups = {w.name: w for w in build.worlds if w.timed and w.status in ("ok", "failed")}
    if setups:
        from farmer.run.executors.simulated import WorldSetups

        parents = parents or {}
        producer, inputs = graph.producer, graph.world_inputs
        worlds = WorldSetups({n: w.duration_s for n, w in setups.items()},
                             {n: parents.get(n) for n in setups},
                             {n: sorted({producer[p] for p in inputs.get(n, ()) if p in producer})
                              for n in setups})
        latency, steps = critical.latencies_with_setups(comps, order, measured, worlds)
        build.critical_path = [setups[s] if isinstance(s, str) else index[s]
                               for s in critical.critical_steps(comps, latency, steps)]
    else:
        latency = critical.expected_latency(comps, order, measured)
        build.critical_path = [index[i] for i in critical.critical_path(comps, latency)]
    for e in build.critical_path:
        e.critical = True
    if history is not None:
        ran = [i for i in index if i in measured]
        for i, s in estimates.estimate(comps, ran, history).items():
            index[i].predicted_s = s
        for name, w in setups.items():
            samples = history.get(f"world:{name}")
            if samples:
                w.predicted_s = estimates.from_history(samples)
    missing = len(build.entries) - len(index)
    if missing:
        build.notes.append(f"{missing} computations of the last build are not in the Farmfile any more: "
                           "they are not on the critical path and have no prediction")


def add_history_and_graph(build: LastBuild, graph, parents: dict[str, str | None] | None = None) -> None:
    """add_graph with the state's history from before the build (read only)."""
    from farmer.store.state import State

    state = State(build.farmer_dir, readonly=True)
    try:
        history = history_before(state, build.head.get("started_at"))
    finally:
        state.close()
    add_graph(build, graph, history, parents)


def history_before(state, started_at: str) -> dict:
    """The state's measured runs recorded before the build started (its own are newer)."""
    import calendar
    import time

    try:
        t0 = calendar.timegm(time.strptime(started_at, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return {}
    out = {}
    for cid, samples in state.history().items():
        kept = [s for s in samples if s.at < t0]
        if kept:
            out[cid] = kept
    return out


def log_tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines()
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first may be cut
    return "\n".join(lines[-TAIL_LINES:])


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def seconds(x: object) -> str:
    """A time as the reports print it; a dash for none."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "–"
    return f"{x:.3f} s" if abs(x) < 1 else f"{x:.2f} s" if abs(x) < 100 else f"{x:.0f} s"
