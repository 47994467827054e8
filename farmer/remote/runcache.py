"""The remote cache at the recorder's seam (farmer/record/runcache.py's RunCache), one part of
the remote engine (farmer/remote/engine.py).

Plain Python until a computation is about to consult the remote: only then is
farmer/remote/cache.py (grpc, protobuf, the generated messages) imported, so a build that runs
nothing (every computation up to date) costs nothing more with a remote configured.
"""

from __future__ import annotations

from farmer.record.runcache import RunCache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation
    from farmer.remote.shared import SharedRemote
    from farmer.run.executors.base import Outcome, Restored
    from farmer.store.state import Trace


class RemoteRunCache(RunCache):
    """Looks computations up in the remote's action cache, restores hits from its CAS, and
    uploads what ran here. With lookups alongside the build (`shared.keyed`), a lookup only
    keys the computation: farmer/remote/lookups.py looks it up when it starts."""

    __slots__ = ("shared",)

    def __init__(self, shared: SharedRemote) -> None:
        self.shared = shared

    def refreshing(self) -> bool:
        return self.shared.settings.refresh

    def lookup(self, comp: Computation, inputs: list[tuple[str, str]], world: str | None) -> Restored | None:
        from farmer.record.cache.key import describe, uncacheable

        if uncacheable(comp) is not None:
            return None
        shared = self.shared
        remote = shared.connect()
        if remote is None:
            return None
        description = describe(comp, world, inputs, shared.env_names, shared.programs)
        if shared.settings.refresh:  # --remote-refresh: no lookup; it runs, and is uploaded
            remote.drain()
            found = remote.key_of(comp, description)
            if found is not None:
                shared.miss(comp.index, found)
                shared.looked_up(comp.index, found, "not looked up (--remote-refresh)")
            return None
        if shared.keyed is not None:
            remote.drain()
            found = remote.key_of(comp, description)
            if found is not None:
                shared.key(comp.index, found)
            return None
        found = remote.lookup(comp, description)
        if found is None:
            return None
        if found.result is not None and remote.restore(comp, found, shared.log_of(comp)) is not None:
            return shared.restored
        shared.miss(comp.index, found)
        return None

    def store(self, comp: Computation, trace: Trace, outcome: Outcome) -> None:
        shared = self.shared
        found = shared.take_miss(comp.index)
        if outcome.origin is shared.ran and not comp.depfile:
            return  # it ran there: the server cached its result under the same Action
        # (with a depfile, the store names its discovered inputs in the variants list, without
        # which no lookup finds that Action; its blobs are on the server already)
        if found is not None and shared.connection is not None:
            shared.connection.store(comp, found, trace.discovered, trace.outputs, shared.log_of(comp),
                                    outcome.end_s - outcome.start_s)

    def close(self, interrupted: bool = False) -> None:
        remote = self.shared.connection
        if remote is not None:
            remote.close(abandon=interrupted)
            self.shared.state.save_sha256(remote.shas.taken())
