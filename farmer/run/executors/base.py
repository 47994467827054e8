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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation


class Origin:
    """Where an outcome came from, as the engine that made it says (Shake's `RunChanged`,
    n2's task results): a run (`Ran`) or a restore from a cache (`Restored`). `name`: the
    engine's or the cache's, as last-build.json and `--explain` show it."""

    __slots__ = ("name",)
    restored = False  # its outputs were restored: it did not run

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Ran(Origin):
    """It ran, on engine `name` ("local": this machine's processes and worlds). Its duration
    is kept in history under its id and task prefixed with `history_prefix`: a run elsewhere
    (queueing, transfers, another machine) is kept apart from the local estimates."""

    __slots__ = ("history_prefix",)

    def __init__(self, name: str, history_prefix: str = "") -> None:
        super().__init__(name)
        self.history_prefix = history_prefix


class Restored(Origin):
    """Its outputs were restored from cache `name` instead of running. `keep_locally`: the
    recorder stores it into the output caches too, as after a run (a remote hit is kept in
    the local cache, so the next checkout on this machine needs no network)."""

    __slots__ = ("keep_locally",)
    restored = True

    def __init__(self, name: str, keep_locally: bool = False) -> None:
        super().__init__(name)
        self.keep_locally = keep_locally


RAN_HERE = Ran("local")  # what an executor on this machine ran

# What `Executor.start_setup` answers: the set-up began (its end comes through
# `setups_ended`), the world was set up already (kept warm), or this executor has no worlds.
SETUP_STARTED, SETUP_WARM, SETUP_NONE = "started", "warm", "none"


class SetupEnd:
    """How one world's set-up ended: `status` "ok" (ready), "failed" (its setup raised, or
    the process died or was interrupted before it was ready) or "cancelled" (stopped as no
    longer needed); times in seconds from the build's start."""

    __slots__ = ("world", "status", "start_s", "end_s")

    def __init__(self, world: str, status: str, start_s: float, end_s: float) -> None:
        self.world, self.status, self.start_s, self.end_s = world, status, start_s, end_s

    def __repr__(self) -> str:
        return f"SetupEnd({self.world!r}, {self.status!r}, {self.start_s}, {self.end_s})"


class Outcome:
    """How one run of a computation ended, as the executor measured it."""

    __slots__ = ("index", "ok", "reason", "exit_code", "start_s", "end_s", "cpu_s", "max_rss_kb",
                 "origin", "printed", "local_because", "remote_lookup", "uncacheable")

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
        self.origin: Origin = RAN_HERE  # set by the engine that ran or restored it otherwise
        self.printed: bool | None = None  # whether it printed anything (None: its log tells)
        self.local_because: str | None = None  # why it ran here although remote execution was on
        self.remote_lookup: tuple[str, str] | None = None  # the remote's (Action digest, what came of it)
        # Why no output cache may store it, as an engine that watched it run says (it read a
        # file it does not declare: farmer/record/checkdeps.py); None: nothing against it.
        self.uncacheable: str | None = None

    def __repr__(self) -> str:
        return (f"Outcome({self.index}, ok={self.ok}, reason={self.reason!r}, exit_code={self.exit_code}, "
                f"start_s={self.start_s}, end_s={self.end_s})")


class Executor:
    """Runs computations for the scheduler. `-j`, pools and priorities are the scheduler's;
    the executor's own limits (the load average, `-l`) are asked through `can_start`."""

    # `-l`: with something running, start nothing while the 1-minute load average is above
    # this. None: no limit.
    load: float | None = None
    # The event loop `wait` blocks in (run/executors/events.py), which an executor in front
    # of this one joins with descriptors of its own (run/executors/relay.py). None: it has
    # none to share.
    selector = None
    # Whether a computation it starts may still be restored from a cache instead of running
    # (remote lookups alongside the build): `--explain` then says why it was due once it ended,
    # in one line with where it came from.
    looks_up = False

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

    def start_setup(self, world: str) -> str:
        """Begin setting up `world` (its parent is set up already) as a step of the
        schedule: SETUP_STARTED, and its end comes through `setups_ended`; SETUP_WARM when
        it is set up already (kept from an earlier build); SETUP_NONE when this executor
        runs no worlds."""
        return SETUP_NONE

    def setups_ended(self) -> list[SetupEnd]:
        """The world set-ups that ended since the last call, those `start_setup` began and
        those a task's start began (a world restarted after it died)."""
        return []

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


class InFront(Executor):
    """An executor in front of another, `inner`: every call goes on to it unless a subclass
    says otherwise, so a layer (a jobserver's tokens, a tracer's checks, remote threads)
    changes only what it is for and never hides what the executor behind it does (world
    set-ups included)."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.load = inner.load
        self.selector = inner.selector

    def start(self, comp: Computation) -> None:
        self.inner.start(comp)

    def wait(self, timeout: float | None) -> list[Outcome]:
        return self.inner.wait(timeout)

    def stop(self) -> None:
        self.inner.stop()

    def running(self) -> int:
        return self.inner.running()

    def can_start(self) -> bool:
        return self.inner.can_start()

    def discard(self, index: int) -> None:
        self.inner.discard(index)

    def start_setup(self, world: str) -> str:
        return self.inner.start_setup(world)

    def setups_ended(self) -> list[SetupEnd]:
        return self.inner.setups_ended()

    def worlds_setting_up(self) -> dict[str, float]:
        return self.inner.worlds_setting_up()

    def worlds_set_up(self) -> dict[str, float | None]:
        return self.inner.worlds_set_up()

    def close(self) -> None:
        self.inner.close()
