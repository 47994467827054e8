"""The remote (REAPI, SPEC §5) as one engine of a build (farmer/record/engine.py): its cache at
the recorder's seam (farmer/remote/runcache.py), and over the executor its lookups alongside
the build (farmer/remote/lookups.py) and, with --remote-exec, its remote runs
(farmer/remote/executor.py). What those parts hand each other is one `SharedRemote`
(farmer/remote/shared.py), which this engine makes and holds.

farmer/build/compose.py makes it when --remote, FARMER_REMOTE or `[remote]` names a server.
Plain Python: grpc comes with the first computation that consults the remote.
"""

from __future__ import annotations

from farmer.errors import UsageError
from farmer.record.engine import Engine, EngineContext
from farmer.remote import config
from farmer.remote.runcache import RemoteRunCache
from farmer.remote.shared import SharedRemote
from farmer.run.executors.base import Ran, Restored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.remote.config import RemoteSettings
    from farmer.run.executors.base import Executor


class RemoteEngine(Engine):
    __slots__ = ("settings", "shared")
    name = "remote"
    # What its outcomes say they came from: a run on its workers, whose duration is kept in
    # history apart from the local ones (no task name has a colon), or a hit, which the
    # local cache keeps too.
    ran = Ran("remote", history_prefix="remote:")
    restored = Restored("remote", keep_locally=True)

    def __init__(self, settings: RemoteSettings, shared: SharedRemote) -> None:
        self.settings, self.shared = settings, shared

    @classmethod
    def of(cls, ctx: EngineContext) -> RemoteEngine | None:
        """The engine, with the remote's settings as the Farmfile, the environment and the
        command line give them (UsageError when they are wrong); None when they name no
        server after all."""
        spec, session = ctx.spec, ctx.session
        try:
            settings = config.resolve(**ctx.options.remote, table=spec.remote.table() if spec.remote else None)
        except config.RemoteConfigError as e:
            raise UsageError(str(e)) from None
        if settings is None:
            return None
        if session.graph.paths_first:  # a build.ninja: its --base-dir roots the input roots
            from farmer.graph import basedir

            given, source = basedir.setting(ctx.options.base_dir)
            settings.base = basedir.resolve(given, spec.root, source)
        env = spec.cache.env if spec.cache is not None else []
        shared = SharedRemote(settings, session.digests, session.state, env, session.world_fingerprint,
                              ctx.logs, ctx.warn, cls.ran, cls.restored)
        return cls(settings, shared)

    def failure(self) -> str | None:
        """With --remote-strict, the first remote problem (each was a warning, and the build
        went on without the remote): a CI job that must use the remote fails."""
        if not self.settings.strict:
            return None
        problems = self.shared.problems
        if not problems:
            return None
        return f"{problems[0].removeprefix('farmer: warning: ')} (--remote-strict)"

    def run_cache(self, ctx: EngineContext) -> RemoteRunCache:
        return RemoteRunCache(self.shared)

    def executor_layer(self, inner: Executor, slots: int, ctx: EngineContext) -> tuple[Executor, int]:
        """With --remote-exec (and a server that executes), eligible computations run remotely:
        `[remote] jobs` slots more. Then, in front, the lookups alongside the build: LOOKUPS
        more computations looked up while those run."""
        shared = self.shared
        if self.settings.execute:
            remote = shared.for_exec()
            if remote is not None:
                from farmer.remote.executor import RemoteExecutor

                inner = RemoteExecutor(inner, remote, slots, ctx.t0, shared.describe, ctx.session.trace,
                                       shared.log_of, shared.warn, self.ran)
                slots += self.settings.jobs
        from farmer.remote.lookups import LOOKUPS, LookupExecutor

        shared.look_up_alongside()
        return LookupExecutor(inner, slots, shared, ctx.t0), slots + LOOKUPS
