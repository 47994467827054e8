"""One executor for a build with worlds: commands as fresh processes, world tasks in world
processes, and a single event loop for both.

The process executor's selector is the loop; the world executor registers its FIFOs and
pidfds on it with callbacks (see `ProcessExecutor`). `wait` folds the worlds' deadlines
(task timeouts) into the time it blocks, so one `select` serves every computation, and the
scheduler sees one executor: `-j`, priorities and pools apply to world tasks as to any.
"""

from __future__ import annotations

import os
import time

from farmer.graph.graph import Computation
from farmer.manifest.spec import Spec
from farmer.run.executors.base import Executor, Outcome, SetupEnd
from farmer.run.executors.process import ProcessExecutor
from farmer.run.executors.world import WorldExecutor


class CompositeExecutor(Executor):
    def __init__(self, process: ProcessExecutor, worlds: WorldExecutor) -> None:
        self.process = process
        self.selector = process.selector  # the process executor's loop waits for the worlds too
        self.worlds = worlds
        self.load = process.load  # counted against everything running, worlds' tasks too

    def start(self, comp: Computation) -> None:
        if comp.world is not None:
            self.worlds.start(comp)
        else:
            self.process.start(comp)

    def wait(self, timeout: float | None) -> list[Outcome]:
        done = self.worlds.take()
        if done:
            return done
        deadline = self.worlds.next_deadline()
        if deadline is not None:
            until = max(0.0, deadline - time.monotonic())
            timeout = until if timeout is None else min(timeout, until)
        done = self.process.wait(timeout)  # dispatches the worlds' descriptors too
        self.worlds.tick()
        return done + self.worlds.take()

    def stop(self) -> None:
        self.process.stop()
        self.worlds.stop()

    def running(self) -> int:
        return self.process.running() + self.worlds.running()

    def start_setup(self, world: str) -> str:
        return self.worlds.start_setup(world)

    def setups_ended(self) -> list[SetupEnd]:
        return self.worlds.setups_ended()

    def worlds_setting_up(self) -> dict[str, float]:
        return self.worlds.worlds_setting_up()

    def worlds_set_up(self) -> dict[str, float | None]:
        return self.worlds.worlds_set_up()

    def discard(self, index: int) -> None:
        self.worlds.discard(index)

    def close(self) -> None:
        try:
            self.worlds.close()
        finally:
            self.process.close()


def with_worlds(process: ProcessExecutor, spec: Spec, comps: list[Computation], to_run: dict[int, str],
                logs: str | os.PathLike, t0: float, timeout: float | None, warn, warm=None,
                fingerprint=None) -> CompositeExecutor:
    """The build's executor when world tasks run in worlds (not `--no-worlds`). `to_run` is
    the plan: the world tasks in it are the worlds' first futures. `warm`, `fingerprint`:
    see `WorldExecutor`."""
    expected = [i for i in to_run if comps[i].world is not None]
    worlds = WorldExecutor(spec.worlds, spec.root, logs, t0, timeout, process.selector, comps,
                           expected, warn, warm, fingerprint)
    return CompositeExecutor(process, worlds)
