"""The engines of a build stacked by farmer/build/compose.py: each adds its output cache to
the recorder's (looked up in the engines' order) and its executor layer over the one before,
and nothing is made when a test hands the build its own cache."""

from __future__ import annotations

from farmer.build import compose
from farmer.record.engine import Engine, EngineContext, RunObserver
from farmer.record.runcache import Layered, RunCache
from farmer.run.executors.base import Executor, Restored


class Named(RunCache):
    def __init__(self, name: str, hits: set[str], asked: list[str]) -> None:
        self.name, self.hits, self.asked = name, hits, asked

    def lookup(self, comp, inputs, world):
        self.asked.append(self.name)
        return Restored(self.name) if comp in self.hits else None


class Layer(Executor):
    def __init__(self, name: str, inner: Executor | None) -> None:
        self.name, self.inner = name, inner


class Fake(Engine):
    __slots__ = ("label", "cache", "extra", "seen")

    def __init__(self, label: str, cache: RunCache | None, extra: int) -> None:
        self.label, self.cache, self.extra = label, cache, extra

    def run_cache(self, ctx):
        return self.cache

    def executor_layer(self, inner, slots, ctx):
        return Layer(self.label, inner), slots + self.extra

    def observers(self, ctx):
        return [RunObserver()]


def context() -> EngineContext:
    return EngineContext(None, None, None, "logs", print, 0.0)  # type: ignore[arg-type]


def test_engines_stack_in_order_over_the_local_executor():
    asked: list[str] = []
    first, second = Named("local", {"a"}, asked), Named("remote", {"a", "b"}, asked)
    composition = compose.Composition(context(), [Fake("cache", first, 0), Fake("remote", second, 16),
                                                  Fake("sandbox", None, 0)])
    assert isinstance(composition.cache, Layered) and composition.cache.caches == [first, second]
    assert composition.cache.lookup("a", [], None).name == "local" and asked == ["local"]
    assert composition.cache.lookup("b", [], None).name == "remote"
    assert composition.cache.lookup("c", [], None) is None
    assert len(composition.observers) == 3
    local = Layer("processes", None)
    executor, slots = composition.stack(local, 4)
    assert slots == 20
    names = []
    while executor is not None:
        names.append(executor.name)
        executor = executor.inner
    assert names == ["sandbox", "remote", "cache", "processes"]


def test_one_cache_is_used_alone_and_none_is_none():
    only = RunCache()
    assert compose.Composition(context(), [Fake("cache", only, 0)]).cache is only
    assert compose.Composition(context(), [Fake("layer", None, 1)]).cache is None


def test_a_cache_handed_in_is_used_alone(monkeypatch):
    def never(ctx):
        raise AssertionError("no engine is made when a cache is handed in")

    monkeypatch.setattr(compose, "ENGINES", (never,))
    given = RunCache()
    composition = compose.compose(context(), given)
    assert composition.cache is given and composition.engines == [] and composition.observers == []
    local = Layer("processes", None)
    assert composition.stack(local, 2) == (local, 2)


def test_an_engine_in_the_list_is_plugged_into_a_build(project, monkeypatch):
    """One entry in ENGINES, and a build (in-process) hands its observer every outcome and
    looks up in its cache: nothing else knows of it."""
    from test_cli_incremental import CHAIN

    seen: list[tuple[str, bool]] = []
    looked: list[str] = []

    class Observer(RunObserver):
        def after_run(self, comp, outcome):
            seen.append((comp.id, outcome.ok))

    class Remembering(RunCache):
        def lookup(self, comp, inputs, world):
            looked.append(comp.id)
            return None

    class Watching(Engine):
        def run_cache(self, ctx):
            return Remembering()

        def observers(self, ctx):
            return [Observer()]

    monkeypatch.setattr(compose, "ENGINES", (lambda ctx: Watching(),))
    project.farmfile(CHAIN)
    project.write("src/a.txt", "alpha\n")
    project.write("src/c.txt", "gamma\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert sorted(looked) == ["out/a.txt", "out/b.txt", "out/c.txt"]
    assert sorted(seen) == [("out/a.txt", True), ("out/b.txt", True), ("out/c.txt", True)]
