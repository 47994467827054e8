"""Where an output cache plugs into a build: the recorder looks a computation up before it
runs and stores its outputs after (farmer/record/recorder.py). `RunCache` is the seam,
`Layered` two caches as one. The caches themselves: the local one (farmer/record/cache/),
the remote (farmer/remote/runcache.py).
"""

from __future__ import annotations

TYPE_CHECKING = False  # start-up rule (docs/performance.md)
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

    def store(self, comp: Computation, trace: Trace, outcome: Outcome) -> None:
        """After `comp` ran and succeeded, once its trace is recorded: keep its outputs
        (their digests are `trace.outputs`; its log, `executors.process.log_path`). Also
        after a restore that is to be kept locally too (`Restored.keep_locally`: a remote
        hit, for the local cache)."""

    def close(self, interrupted: bool) -> None:
        """The build is over (`interrupted`: by a signal): finish or drop what is pending."""


class Layered(RunCache):
    """The local cache, then the remote: a computation restored from either is not run; one that
    ran is stored into both, and a remote hit into the local cache (as Bazel's disk + remote
    cache does), so the next checkout on this machine needs no network. A local hit is not
    uploaded: finding out whether the remote lacks it would cost a lookup per local hit, which
    is what the local cache saves."""

    __slots__ = ("local", "remote")

    def __init__(self, local: RunCache | None, remote: RunCache) -> None:
        self.local, self.remote = local, remote

    def lookup(self, comp: Computation, inputs: list[tuple[str, str]], world: str | None) -> Restored | None:
        if self.local is not None:
            hit = self.local.lookup(comp, inputs, world)
            if hit is not None:
                return hit
        return self.remote.lookup(comp, inputs, world)

    def store(self, comp: Computation, trace: Trace, outcome: Outcome) -> None:
        if self.local is not None:
            self.local.store(comp, trace, outcome)
        self.remote.store(comp, trace, outcome)

    def __getattr__(self, name: str):  # remote_for_exec, describe, settings...: the remote's
        return getattr(self.remote, name)

    def close(self, interrupted: bool = False) -> None:
        try:
            if self.local is not None:
                self.local.close(interrupted)
        finally:
            self.remote.close(interrupted)
