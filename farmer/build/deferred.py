"""Work a build defers until its first commands have started (or, when it starts none,
until its end), still under the lock: none of it is needed before the first command, and a
build's first command should wait for nothing it need not."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class Deferred:
    """One slot per kind of deferred work, run in the order the slots are declared:

    - `sweep`: the FIFO folders of killed farmers' worlds removed (run/worlds/sweep.py);
    - `graph_cache`: the graph cache written (only the next build reads it);
    - `ninja_stamp`: a build.ninja's no-op stamp, which names the graph cache's files, so
      after it (store/ninja_stamp.py);
    - `collector`: the cyclic collector resumed, once the graph and the plan are made;
    - `prediction`: the plan's simulated makespan for last-build.json, last: at the end of
      a build its tables would add to the build's peak.

    An empty slot is None; each work is taken from its slot before it runs, so it runs
    once, whoever asks first (the scheduler's idle time, or the build's end)."""

    __slots__ = ("sweep", "graph_cache", "ninja_stamp", "collector", "prediction")

    def __init__(self) -> None:
        self.sweep: Callable[[], object] | None = None
        self.graph_cache: Callable[[], object] | None = None
        self.ninja_stamp: Callable[[], object] | None = None
        self.collector: Callable[[], object] | None = None
        self.prediction: Callable[[], object] | None = None

    def run(self) -> None:
        """Each slot's work, in the declared order."""
        for name in self.__slots__:
            work = getattr(self, name)
            if work is not None:
                setattr(self, name, None)
                work()
