"""A simulated clock: every computation lasts exactly its estimate and nothing runs.

`plan --simulate`, the prediction at the start of a build and the live ETA run the real
scheduler with it (farmer/latency/simulate.py); the scheduler's unit tests use it as their
fake executor, with `fail` for the computations that exit 1, and tests/fakes.py's
`FakeRunner` does what a few commands say, so that whole builds run in-process.
"""

from __future__ import annotations

import heapq

from farmer.executors.base import Executor, Outcome

TYPE_CHECKING = False  # start-up rule (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from farmer.graph import Computation


class SimulatedExecutor(Executor):
    def __init__(self, duration: dict[int, float], fail: Iterable[int] = (),
                 default_s: float = 0.0) -> None:
        self.duration = duration
        self.default_s = default_s  # the duration of a computation `duration` does not name
        self.exit_codes = dict.fromkeys(fail, 1)  # index -> its exit status, when not 0
        self.clock = 0.0
        self._events: list[tuple[float, int, int]] = []  # (end, sequence, index)
        self._seq = 0
        self._stopped: list[Outcome] = []
        self.started: dict[int, float] = {}  # index -> simulated start
        self.ended: dict[int, float] = {}

    def running(self) -> int:
        return len(self._events) + len(self._stopped)

    def start(self, comp: Computation) -> None:
        i = comp.index
        self.started[i] = self.clock
        heapq.heappush(self._events, (self.clock + self.duration.get(i, self.default_s), self._seq, i))
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
            i = heapq.heappop(self._events)[2]
            self.ended[i] = end
            code = self.exit_codes.get(i, 0)
            out.append(Outcome(i, code == 0, f"exit {code}" if code else None, code, self.started[i], end))
        return out

    def stop(self) -> None:
        for _, _, i in self._events:
            self._stopped.append(Outcome(i, False, "interrupted", None, self.started[i], self.clock))
        self._events.clear()
