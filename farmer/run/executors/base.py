"""The executor seam: what the scheduler needs from whatever runs computations.

An executor knows nothing of the graph, traces, digests or the plan: it starts a
computation, says when runs end, and answers whether it has room for one more. Everything
around a run (folders, depfiles, traces, a cache) is the recorder's (farmer/record/recorder.py).
Implementations: `ProcessExecutor` (fresh processes), `WorldExecutor` (world processes),
`CompositeExecutor` (both, one event loop), `SimulatedExecutor` (a simulated clock, for
`plan --simulate`, the live ETA and tests). A build can be handed any of them
(`build.run_build(..., executor=)`), as ninja's tests hand a `Builder` a fake
`CommandRunner`.

This module imports only `os`: every build imports it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # start-up rule (docs/performance.md): no typing on the build path
if TYPE_CHECKING:
    from farmer.graph.graph import Computation


class Outcome:
    """How one run of a computation ended, as the executor measured it."""

    __slots__ = ("index", "ok", "reason", "exit_code", "start_s", "end_s", "cpu_s", "max_rss_kb",
                 "cached", "where", "printed")

    def __init__(self, index: int, ok: bool, reason: str | None, exit_code: int | None,
                 start_s: float, end_s: float, cpu_s: float | None = None,
                 max_rss_kb: int | None = None) -> None:
        self.index = index
        self.ok = ok
        self.reason = reason  # why it failed, in SPEC §4 words
        self.exit_code = exit_code
        self.start_s = start_s  # seconds from the build's start
        self.end_s = end_s
        self.cpu_s = cpu_s
        self.max_rss_kb = max_rss_kb
        self.cached = False  # its outputs were restored from a cache: it did not run
        self.where: str | None = None  # "local" or "remote": the cache it came from, or where it ran
        self.printed: bool | None = None  # whether it printed anything (None: its log tells)

    def __repr__(self) -> str:
        return (f"Outcome({self.index}, ok={self.ok}, reason={self.reason!r}, exit_code={self.exit_code}, "
                f"start_s={self.start_s}, end_s={self.end_s})")


class Executor:
    """Runs computations for the scheduler. `-j`, pools and priorities are the scheduler's;
    the executor's own limits (the load average, `-l`) are asked through `can_start`."""

    # `-l`: with something running, start nothing while the 1-minute load average is above
    # this. None: no limit.
    load: float | None = None

    def start(self, comp: Computation) -> None:
        """Begin running `comp`; its end is reported by a later `wait`."""
        raise NotImplementedError

    def wait(self, timeout: float | None) -> list[Outcome]:
        """Block until something finishes (or `timeout`, or a wake-up); return what finished."""
        raise NotImplementedError

    def stop(self) -> None:
        """Kill everything running; `wait` then reports each as failed, `interrupted`."""
        raise NotImplementedError

    def running(self) -> int:
        """Computations started and not yet reported by `wait`."""
        raise NotImplementedError

    def can_start(self) -> bool:
        """Whether one more computation may start now (ninja's `CanRunMore`)."""
        if self.load is None or self.running() == 0:
            return True
        return os.getloadavg()[0] <= self.load

    def discard(self, index: int) -> None:
        """Computation `index` will not start in this build after all (up to date after its
        producers ran, or skipped after a failure): an executor that keeps resources for
        computations to come (a world kept alive for its tasks) may release them. Called at
        most once per computation, never for one started."""

    def worlds_setting_up(self) -> dict[str, float]:
        """World name -> the monotonic time its set-up began, for each world being set up
        now: the live view shows them, the ETA counts what is left of them. May be asked
        from the live view's thread."""
        return {}

    def worlds_set_up(self) -> dict[str, float | None]:
        """The worlds ready in this build: name -> the seconds their set-up took (history
        for the next prediction), None for one kept warm from an earlier build."""
        return {}

    def close(self) -> None:
        """The build is over: release what is left (`stop` first if anything runs)."""
