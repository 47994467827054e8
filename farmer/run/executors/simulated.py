"""A simulated clock: every computation lasts exactly its estimate and nothing runs.

`plan --simulate`, the prediction at the start of a build and the live ETA run the real
scheduler with it (farmer/plan/latency/simulate.py); the scheduler's unit tests use it as their
fake executor, with `fail` for the computations that exit 1, and tests/fakes.py's
`FakeRunner` does what a few commands say, so that whole builds run in-process.
"""

from __future__ import annotations

from farmer.run.executors.base import (
    SETUP_NONE,
    SETUP_STARTED,
    Executor,
    Outcome,
    SetupEnd,
)
from farmer.startup.cheap import heapq

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from farmer.graph.graph import Computation


class WorldSetups:
    """The worlds a build sets up: each one's set-up in seconds, its parent, and the
    computations whose outputs its set-up reads (`after`: its inputs' producers). The
    scheduler makes each a step of the schedule (farmer/run/scheduler.py); a world whose
    set-up no step began is set up from the first start of a task that needs it (a child
    world once its parent is ready, as a real build forks it), its tasks holding their CPU
    slots while they wait for it, as they do in a real build."""

    __slots__ = ("seconds", "parents", "after")

    def __init__(self, seconds: dict[str, float], parents: dict[str, str | None],
                 after: dict[str, list[int]] | None = None) -> None:
        self.seconds = seconds  # a world missing here is ready already (or costs nothing)
        self.parents = parents  # the worlds to set up, each with its parent
        self.after = after if after is not None else {}


class SimulatedExecutor(Executor):
    def __init__(self, duration: dict[int, float], fail: Iterable[int] = (),
                 default_s: float = 0.0, worlds: WorldSetups | None = None,
                 record: bool = True) -> None:
        self.duration = duration
        # Without `record`, when and where each computation ran is not kept (`began`,
        # `started`, `ended` stay empty): a build's end asks only for the makespan, and on
        # a large graph those three dicts of floats are memory held for nothing (see
        # bench/results/performance-notes.md#figures-from-code-comments).
        self.record = record
        self.worlds = worlds
        self.ready_at: dict[str, float] = {}  # world -> when it is set up
        self.began: dict[int, float] = {}  # index -> when it began to run, its world ready
        self.default_s = default_s  # the duration of a computation `duration` does not name
        self.exit_codes = dict.fromkeys(fail, 1)  # index -> its exit status, when not 0
        self.clock = 0.0
        self._events: list[tuple[float, int, int, float]] = []  # (end, sequence, index, start)
        self._seq = 0
        self._stopped: list[Outcome] = []
        self._setup_names: list[str] = []  # on `_events` as index -1-k
        self._setups_running = 0
        self._setups_ended: list[SetupEnd] = []
        self.started: dict[int, float] = {}  # index -> simulated start
        self.ended: dict[int, float] = {}

    def running(self) -> int:
        return len(self._events) - self._setups_running + len(self._stopped)

    def start_setup(self, world: str) -> str:
        if self.worlds is None:
            return SETUP_NONE
        self.ready_at[world] = end = self.clock + self.worlds.seconds.get(world, 0.0)
        self._setup_names.append(world)
        heapq.heappush(self._events, (end, self._seq, -len(self._setup_names), self.clock))
        self._seq += 1
        self._setups_running += 1
        return SETUP_STARTED

    def setups_ended(self) -> list[SetupEnd]:
        ended, self._setups_ended = self._setups_ended, []
        return ended

    def start(self, comp: Computation) -> None:
        i = comp.index
        begin = self.clock
        if comp.world is not None and self.worlds is not None:
            begin = max(begin, self._ready(comp.world))
        if self.record:
            self.started[i] = self.clock
            self.began[i] = begin
        heapq.heappush(self._events, (begin + self.duration.get(i, self.default_s), self._seq, i, self.clock))
        self._seq += 1

    def wait(self, timeout: float | None) -> list[Outcome]:
        if self._stopped:
            out, self._stopped = self._stopped, []
            return out
        if not self._events:  # held back with nothing running: time passes all the same
            self.clock += timeout or 0.0
            return []
        end = self._events[0][0]
        self.clock = end
        out = []
        while self._events and self._events[0][0] == end:
            _, _, i, started = heapq.heappop(self._events)
            if i < 0:
                self._setups_running -= 1
                self._setups_ended.append(SetupEnd(self._setup_names[-1 - i], "ok", started, end))
                continue
            if self.record:
                self.ended[i] = end
            code = self.exit_codes.get(i, 0)
            out.append(Outcome(i, code == 0, f"exit {code}" if code else None, code, started, end))
        return out

    def worlds_setting_up(self) -> dict[str, float]:
        return {w: at for w, at in self.ready_at.items() if at > self.clock}

    def _ready(self, world: str) -> float:
        """When `world` is set up, its set-up begun now if nothing needed it before."""
        at = self.ready_at.get(world)
        if at is None:
            assert self.worlds is not None
            parent = self.worlds.parents.get(world)
            start = self.clock if parent is None else max(self.clock, self._ready(parent))
            at = self.ready_at[world] = start + self.worlds.seconds.get(world, 0.0)
        return at

    def stop(self) -> None:
        for _, _, i, started in self._events:
            if i < 0:
                self._setups_ended.append(SetupEnd(self._setup_names[-1 - i], "failed", started, self.clock))
            else:
                self._stopped.append(Outcome(i, False, "interrupted", None, started, self.clock))
        self._events.clear()
        self._setups_running = 0
