"""World set-ups as steps of the schedule, measured: when each began (its process spawned,
or its fork asked for), how long it took to `ready` (what `plan --simulate` learns from),
and how each ended, said once to the scheduler."""

from __future__ import annotations

import time

from farmer.run.executors.base import SetupEnd
from farmer.run.worlds.link import Proc


class SetupSteps:
    """The set-ups of one world executor, from the build's start `t0`."""

    __slots__ = ("_began", "_ended", "_under_way", "seconds", "t0")

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self._began: dict[str, float] = {}  # world -> when its set-up began, until ready
        self.seconds: dict[str, float] = {}  # world -> how long its set-up took to ready
        # Each set-up under way, by process (id): its world and when it began; its end, said
        # once, waits in `_ended` for the scheduler.
        self._under_way: dict[int, tuple[str, float]] = {}
        self._ended: list[SetupEnd] = []

    def begin(self, proc: Proc) -> None:
        """`proc` is made for its world: its set-up ends once, however it ends (`over`)."""
        self._under_way[id(proc)] = (proc.name, time.monotonic())

    def began(self, name: str) -> None:
        """World `name`'s process is spawned, or its fork asked for, now."""
        self._began[name] = time.monotonic()

    def ready(self, name: str) -> None:
        began = self._began.pop(name, None)
        if began is not None:
            self.seconds[name] = time.monotonic() - began

    def over(self, proc: Proc, status: str) -> None:
        """`proc`'s set-up ended (ready, failed, or the process ended before it was ready)."""
        began = self._under_way.pop(id(proc), None)
        if began is not None:
            self._ended.append(SetupEnd(proc.name, status, began[1] - self.t0,
                                        time.monotonic() - self.t0))

    def failed(self, world: str, now: float) -> None:
        """World `world`'s set-up failed as it was asked for (`now`): it never began."""
        self._ended.append(SetupEnd(world, "failed", now - self.t0, now - self.t0))

    def said(self) -> int:
        """How many ends wait for the scheduler (a mark for `said_of`)."""
        return len(self._ended)

    def said_of(self, world: str, since: int) -> bool:
        """Whether an end of `world` was said since the mark `since`."""
        return any(e.world == world for e in self._ended[since:])

    def take(self) -> list[SetupEnd]:
        ended, self._ended = self._ended, []
        return ended

    def setting_up(self, current: dict[str, Proc]) -> dict[str, float]:
        """When each set-up under way in `current` (world -> its process) began."""
        began = self._began
        return {name: began[name] for name, p in list(current.items())
                if p.state == "starting" and name in began}

    def set_up(self, current: dict[str, Proc]) -> dict[str, float | None]:
        """How long each ready world's set-up took; None for one kept warm from an earlier
        build."""
        ready = dict(self.seconds)
        for name, p in list(current.items()):
            if p.state == "ready" and name not in ready:
                ready[name] = None
        return ready
