"""What an engine is: one way of running or remembering computations (the local output
cache, the remote), plugged into a build through the seams a run already has:
- an output cache at the recorder's seam (`run_cache`: farmer/record/runcache.py);
- a layer over the executor that runs computations (`executor_layer`: an executor in front
  of the one below it, farmer/run/executors/relay.py, with the scheduler's slots it adds);
- observers told of each run once it is recorded (`observers`);
- a wrapper of the argv of each command the local executor starts (`command_wrapper`: a
  tracer's, farmer/record/checkdeps.py).
An engine that spans several seams holds what its parts share itself, so they need not
know each other. farmer/build/compose.py stacks the engines a build turns on.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.build.request import BuildRequest
    from farmer.graph.graph import Computation
    from farmer.manifest.spec import Spec
    from farmer.plan.session import Session
    from farmer.record.runcache import RunCache
    from farmer.run.executors.base import Executor, Outcome


class EngineContext:
    """What the engines of one build are made from: the project's `spec`, the build's
    `session` (its digests, state, traces and world fingerprints) and `options`, the folder
    of its logs, `warn(text)`, which prints a warning line (on the build's thread), and `t0`,
    the build's start (time.monotonic()) that outcomes count from."""

    __slots__ = ("spec", "session", "options", "logs", "warn", "t0")

    def __init__(self, spec: Spec, session: Session, options: BuildRequest, logs: str,
                 warn: Callable[[str], None], t0: float) -> None:
        self.spec, self.session, self.options = spec, session, options
        self.logs, self.warn, self.t0 = logs, warn, t0


class RunObserver:
    """Told of each run (or restore) the recorder recorded, with its outcome as recorded (a
    declared output missing has made it a failure)."""

    __slots__ = ()

    def after_run(self, comp: Computation, outcome: Outcome) -> None:
        """`comp` ended with `outcome`."""


class Engine:
    """One way of running or remembering computations. Each method has a default that
    plugs nothing in: an engine overrides the seams it uses."""

    __slots__ = ()
    name = "engine"  # what it is called in messages

    def run_cache(self, ctx: EngineContext) -> RunCache | None:
        """Its output cache, looked up before a run and stored into after; None: none."""
        return None

    def executor_layer(self, inner: Executor, slots: int, ctx: EngineContext) -> tuple[Executor, int]:
        """The executor the scheduler hands computations to, in front of `inner`, which has
        `slots` of them running at most, and the slots the scheduler then has in all."""
        return inner, slots

    def failure(self) -> str | None:
        """Why the build must fail although every computation succeeded (its own problem it
        was asked to treat as an error), asked once the run ended; None: none."""
        return None

    def observers(self, ctx: EngineContext) -> list[RunObserver]:
        """What it wants told of each run recorded."""
        return []

    def command_wrapper(self, ctx: EngineContext) -> Callable[[Computation, list[str]], list[str]] | None:
        """What the local executor runs instead of a `cmd` computation's argv: `wrap(comp,
        argv)` -> the argv to start (which exits as `argv` would); None: argv as it is."""
        return None
