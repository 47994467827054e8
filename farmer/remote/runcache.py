"""The remote cache at the recorder's seam (farmer/record/runcache.py's RunCache).

Plain Python until a computation is about to consult the remote: only then is
farmer/remote/cache.py (grpc, protobuf, the generated messages) imported, so a build that runs
nothing (every computation up to date) costs nothing more with a remote configured.
"""

from __future__ import annotations

from farmer.record.runcache import RunCache
from farmer.run.executors.base import Ran, Restored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.run.executors.base import Executor, Outcome
    from farmer.graph.graph import Computation
    from farmer.remote.config import RemoteSettings
    from farmer.plan.session import Session
    from farmer.store.state import Trace


class RemoteRunCache(RunCache):
    """Looks computations up in the remote's action cache, restores hits from its CAS, and
    uploads what ran here. `env_names` is `[cache] env`; `logs` the build's log folder."""

    __slots__ = ("settings", "session", "env_names", "logs", "warn", "remote", "programs", "found", "broken",
                 "pending")
    # What an outcome of the remote says it came from: a run on its workers, whose duration is
    # kept apart from the local ones in history (no task name has a colon), or a hit, which
    # the local cache keeps too.
    ran = Ran("remote", history_prefix="remote:")
    restored = Restored("remote", keep_locally=True)

    def __init__(self, settings: RemoteSettings, session: Session, env_names: list[str], logs: str,
                 warn: Callable[[str], None]) -> None:
        self.settings, self.session, self.env_names, self.logs, self.warn = settings, session, env_names, logs, warn
        self.remote = None  # farmer.remote.cache.RemoteCache, made on the first lookup
        self.programs = None
        self.found: dict[int, object] = {}  # misses, by index, till they are uploaded
        self.broken = False
        # keyed, for the LookupExecutor to look up alongside the build (None: looked up in `lookup`)
        self.pending: dict[int, object] | None = None

    def _remote(self):
        if self.remote is None and not self.broken:
            from farmer.remote import config

            try:
                config.require()
            except config.RemoteConfigError as e:
                self.broken = True
                self.warn(f"farmer: warning: {e}; building without the remote")
                return None
            from farmer.record.cache.key import Programs
            from farmer.remote.cache import RemoteCache

            digests = self.session.digests
            self.programs = Programs(digests.digest)
            self.remote = RemoteCache(self.settings, digests, self.session.state.sha256, self.warn)
        return self.remote

    def remote_for_exec(self):
        """The connected RemoteCache for remote execution; None when the remote is unusable."""
        remote = self._remote()
        client = remote.client() if remote is not None else None
        if client is None:
            return None
        try:
            if client.can_execute():
                return remote
        except Exception:  # noqa: BLE001 - capabilities were read already; never a failed build
            return None
        self.warn(f"farmer: warning: remote {self.settings.endpoint.url} does not execute "
                  f"(instance {self.settings.endpoint.instance!r}); running everything here")
        return None

    def lookups_alongside(self, executor: Executor, jobs: int, t0: float) -> tuple[Executor, int]:
        """The executor that looks computations up many at once while `executor` (with `jobs`
        slots) runs the misses, and the scheduler's slots for both (farmer/remote/lookups.py)."""
        from farmer.remote.lookups import LOOKUPS, LookupExecutor

        self.pending = {}
        return LookupExecutor(executor, jobs, self, t0), jobs + LOOKUPS

    def describe(self, comp: Computation, inputs: list[tuple[str, str]]):
        from farmer.record.cache.key import describe

        return describe(comp, self.session.world_fingerprint(comp.world), inputs, self.env_names, self.programs)

    def lookup(self, comp: Computation, inputs: list[tuple[str, str]], world: str | None) -> Restored | None:
        from farmer.record.cache.key import describe, uncacheable

        if uncacheable(comp) is not None:
            return None
        remote = self._remote()
        if remote is None:
            return None
        description = describe(comp, world, inputs, self.env_names, self.programs)
        if self.pending is not None:
            remote.drain()
            found = remote.key_of(comp, description)
            if found is not None:
                self.pending[comp.index] = found
            return None
        found = remote.lookup(comp, description)
        if found is None:
            return None
        if found.result is not None and remote.restore(comp, found, self.log_of(comp)) is not None:
            return self.restored
        self.found[comp.index] = found
        return None

    def store(self, comp: Computation, trace: Trace, outcome: Outcome) -> None:
        found = self.found.pop(comp.index, None)
        if outcome.origin is self.ran and not comp.depfile:
            return  # it ran there: the server cached its result under the same Action
        # (with a depfile, the store names its discovered inputs in the variants list, without
        # which no lookup finds that Action; its blobs are on the server already)
        if found is not None and self.remote is not None:
            self.remote.store(comp, found, trace.discovered, trace.outputs, self.log_of(comp),
                              outcome.end_s - outcome.start_s)

    def close(self, interrupted: bool = False) -> None:
        if self.remote is not None:
            self.remote.close(abandon=interrupted)
            self.session.state.save_sha256(self.remote.shas.taken())

    def log_of(self, comp: Computation) -> str:
        from farmer.run.executors.process import log_path

        return log_path(self.logs, comp.id)

