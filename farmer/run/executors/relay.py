"""An executor in front of another: it takes some computations to threads of its own (remote
lookups, remote runs) and hands the rest to the executor behind it, `inner`, at most
`inner_jobs` at a time, so local processes never exceed `-j`.

Its threads end on the build's one event loop: each finished piece of work writes a byte to a
wake-up pipe registered in the inner executor's selector, so `inner.wait` returns and `wait`
collects what the threads finished. Subclasses say what they take (`start`) and how a thread's
results become outcomes (`_collect`).
"""

from __future__ import annotations

import collections
import os
import selectors

from farmer.run.executors.base import Executor, InFront, Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation


class RelayExecutor(InFront):
    def __init__(self, inner: Executor, inner_jobs: int, t0: float) -> None:
        super().__init__(inner)
        self.inner_jobs, self.t0 = inner_jobs, t0
        self.waiting: collections.deque[Computation] = collections.deque()  # for an inner slot
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.selector: selectors.BaseSelector = inner.selector
        self.selector.register(self._wake_r, selectors.EVENT_READ, self._woken)

    def _collect(self) -> list[Outcome]:
        """What the threads finished since the last call, as outcomes (on the build's thread)."""
        raise NotImplementedError

    # -- Executor ---------------------------------------------------------------------------------

    def wait(self, timeout: float | None) -> list[Outcome]:
        done = self._collect()
        if not done:
            done = self.inner.wait(timeout) + self._collect()
        self._start_waiting()
        return done

    def close(self) -> None:
        try:
            self.selector.unregister(self._wake_r)
        except (KeyError, ValueError):
            pass
        os.close(self._wake_r)
        os.close(self._wake_w)
        self.inner.close()

    # -- on the build's thread ----------------------------------------------------------------------

    def _start_inner(self, comp: Computation) -> None:
        if self.inner.running() < self.inner_jobs and not self.waiting:
            self.inner.start(comp)
        else:
            self.waiting.append(comp)

    def _start_waiting(self) -> None:
        while self.waiting and self.inner.running() < self.inner_jobs and not self._stopping:
            self.inner.start(self.waiting.popleft())

    def _woken(self, fd: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass

    # -- on any thread ------------------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
