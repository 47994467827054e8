"""The engines of a build, stacked in one place (as ninja's `Builder` has its collaborators
handed in): each engine that the command line, the environment or the
Farmfile turns on adds its output cache to the recorder's and its layer over the executor
(farmer/record/engine.py says what an engine is).

`ENGINES` is the one list of them, in the order they stack: the first is looked up first
and lies next to the local executor. Each entry says when its engine is on, from the
options, the environment and the Farmfile alone, and imports the engine's module only then:
a build with none on imports none of them (start-up rule, docs/performance.md). A new
engine is one more entry here, and its own modules.
"""

from __future__ import annotations

import os

from farmer.record.engine import Engine, EngineContext, RunObserver

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Computation
    from farmer.record.runcache import RunCache
    from farmer.run.executors.base import Executor


def _check_deps(ctx: EngineContext) -> Engine | None:
    """Commands run under a file-access tracer (farmer/record/checkdeps.py): --check-deps
    or `[farmer] check_deps`. First: its layer lies next to the local executor, whose runs
    it checks."""
    mode = ctx.options.check_deps or ctx.spec.check_deps
    if not mode:
        return None
    from farmer.record.checkdeps import CheckDepsEngine

    return CheckDepsEngine.of(ctx, mode)


def _local_cache(ctx: EngineContext) -> Engine | None:
    """The local output cache (farmer/record/cache/): --cache, FARMER_CACHE or `[cache]`."""
    opts, spec = ctx.options, ctx.spec
    if opts.cache is False or opts.cache is None and spec.cache is None and not os.environ.get("FARMER_CACHE"):
        return None
    from farmer.record.cache.engine import LocalCacheEngine

    return LocalCacheEngine.of(ctx)


def _remote(ctx: EngineContext) -> Engine | None:
    """The remote cache and executor (farmer/remote/): --remote, FARMER_REMOTE or `[remote]`
    naming a server."""
    spec = ctx.spec
    given = ctx.options.remote
    if not (given.get("url") or given.get("cache_url") or given.get("executor_url")
            or any(os.environ.get(v) for v in ("FARMER_REMOTE", "FARMER_REMOTE_CACHE", "FARMER_REMOTE_EXECUTOR"))
            or spec.remote and spec.remote.url):
        return None
    from farmer.remote.engine import RemoteEngine

    return RemoteEngine.of(ctx)


ENGINES: tuple[Callable[[EngineContext], Engine | None], ...] = (_check_deps, _local_cache, _remote)


class Composition:
    """The engines turned on for one build: their output caches as one (`cache`, None when
    none has one), what they observe (`observers`), what the local executor runs instead of
    a command's argv (`wrap`, None: the argv), and `stack`, their executor layers."""

    __slots__ = ("ctx", "engines", "cache", "observers", "wrap")

    def __init__(self, ctx: EngineContext, engines: list[Engine]) -> None:
        self.ctx, self.engines = ctx, engines
        caches = [c for c in (e.run_cache(ctx) for e in engines) if c is not None]
        if len(caches) > 1:
            from farmer.record.runcache import Layered

            self.cache: RunCache | None = Layered(caches)
        else:
            self.cache = caches[0] if caches else None
        self.observers: list[RunObserver] = [o for e in engines for o in e.observers(ctx)]
        self.wrap: Callable[[Computation, list[str]], list[str]] | None = None
        for w in (e.command_wrapper(ctx) for e in engines):
            if w is not None:  # an earlier engine's wrapper innermost
                self.wrap = w if self.wrap is None else (
                    lambda comp, argv, outer=w, inner=self.wrap: outer(comp, inner(comp, argv)))

    def failure(self) -> str | None:
        """Why the build fails although every computation succeeded (an engine's own
        problem it was asked to treat as an error: --remote-strict), once the run ended."""
        return next((f for f in (e.failure() for e in self.engines) if f), None)

    def stack(self, local: Executor, slots: int) -> tuple[Executor, int]:
        """The executor the scheduler hands computations to, each engine's layer over the
        one before, the first over `local` (which runs `slots` at most), and the scheduler's
        slots for the whole stack."""
        executor = local
        for engine in self.engines:
            executor, slots = engine.executor_layer(executor, slots, self.ctx)
        return executor, slots


def compose(ctx: EngineContext, cache: RunCache | None = None) -> Composition:
    """The engines `ctx`'s build turns on, stacked. `cache`: an output cache handed in (a
    test's), used alone: no engine is made."""
    if cache is not None:
        composition = Composition(ctx, [])
        composition.cache = cache
        return composition
    return Composition(ctx, [e for e in (make(ctx) for make in ENGINES) if e is not None])
