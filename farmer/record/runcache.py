"""Where an output cache plugs into a build: the recorder looks a computation up before it
runs and stores its outputs after (farmer/record/recorder.py). `RunCache` is the seam,
`Layered` several caches as one. The caches themselves come from engines
(farmer/record/engine.py): the local one (farmer/record/cache/), the remote
(farmer/remote/runcache.py).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation
    from farmer.run.executors.base import Outcome, Restored
    from farmer.store.state import Trace


class RunCache:
    """An output cache at the recorder's seam (issue 13). This one keeps nothing: every run
    runs."""

    __slots__ = ()

    def lookup(self, comp: Computation, inputs: list[tuple[str, str]], world: str | None) -> Restored | None:
        """Before `comp` runs, with the digests of the inputs it would read and its world's
        fingerprint (its action's is `comp.fingerprint`): where from, when its outputs were
        restored in place, so it need not run (None: it runs). The recorder then records it
        as a run (output digests, trace), without a duration sample."""
        return None

    def refreshing(self) -> bool:
        """Whether every computation is to run and be stored anew, replacing what this cache
        holds (--remote-refresh): then no cache layered with it is looked up either."""
        return False

    def store(self, comp: Computation, trace: Trace, outcome: Outcome) -> None:
        """After `comp` ran and succeeded, once its trace is recorded: keep its outputs
        (their digests are `trace.outputs`; its log, `executors.process.log_path`). Also
        after a restore that is to be kept locally too (`Restored.keep_locally`: a remote
        hit, for the local cache)."""

    def close(self, interrupted: bool) -> None:
        """The build is over (`interrupted`: by a signal): finish or drop what is pending."""


class Layered(RunCache):
    """Several caches as one, in the order of the engines that made them (the local cache,
    then the remote: farmer/build/compose.py): a computation is restored from the first
    that has it, and not run; one that ran is stored into each, and so is a restore to be
    kept locally (`Restored.keep_locally`: a remote hit goes into the local cache, as with
    Bazel's disk + remote cache, so the next checkout on this machine needs no network).
    Each cache decides what it keeps: a local hit is not uploaded (finding out whether the
    remote lacks it would cost a lookup per local hit, which is what the local cache saves).
    When one cache is being refreshed (--remote-refresh), nothing is restored from any: a
    local hit would leave the remote's entry as it was, and the point is to replace it."""

    __slots__ = ("caches", "refreshed")

    def __init__(self, caches: list[RunCache]) -> None:
        self.caches = caches
        self.refreshed = [c for c in caches if c.refreshing()]

    def refreshing(self) -> bool:
        return bool(self.refreshed)

    def lookup(self, comp: Computation, inputs: list[tuple[str, str]], world: str | None) -> Restored | None:
        if self.refreshed:  # each still notes the computation's key (`query --remote` shows it)
            for cache in self.refreshed:
                cache.lookup(comp, inputs, world)
            return None
        for cache in self.caches:
            hit = cache.lookup(comp, inputs, world)
            if hit is not None:
                return hit
        return None

    def store(self, comp: Computation, trace: Trace, outcome: Outcome) -> None:
        for cache in self.caches:
            cache.store(comp, trace, outcome)

    def close(self, interrupted: bool = False) -> None:
        """Each closes, whatever an earlier one raised (the first error is raised after)."""
        error: BaseException | None = None
        for cache in self.caches:
            try:
                cache.close(interrupted)
            except BaseException as e:  # noqa: BLE001 - raised once every cache is closed
                error = error or e
        if error is not None:
            raise error
