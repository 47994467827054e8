"""What the remote's parts share in one build, held by its engine (farmer/remote/engine.py)
rather than by any one of them: the connection, made when a computation first consults
the remote, and what the cache (farmer/remote/runcache.py) and the lookups alongside the
build (farmer/remote/lookups.py) hand each other:
- `keyed`: computations keyed as they were prepared, looked up once they start;
- `missed`: misses that run here, uploaded once they ran.

Plain Python: grpc comes with the connection.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.files.digests import Digests
    from farmer.graph.graph import Computation
    from farmer.record.cache.key import ActionDescription, Programs
    from farmer.remote.cache import RemoteCache, RemoteLookup
    from farmer.remote.config import RemoteSettings
    from farmer.run.executors.base import Ran, Restored
    from farmer.store.state import State


class SharedRemote:
    """`digests` and `state` are the build's; `env_names` is `[cache] env`; `world_fingerprint`
    the session's; `logs` the build's log folder; `warn(text)` prints a line (on the build's
    thread); `ran` and `restored`: what the remote's outcomes say they came from."""

    __slots__ = ("settings", "digests", "state", "env_names", "world_fingerprint", "logs", "warn", "ran",
                 "restored", "connection", "programs", "broken", "keyed", "missed", "problems",
                 "lookups")

    def __init__(self, settings: RemoteSettings, digests: Digests, state: State, env_names: list[str],
                 world_fingerprint: Callable[[str | None], str | None], logs: str,
                 warn: Callable[[str], None], ran: Ran, restored: Restored) -> None:
        self.settings, self.digests, self.state, self.env_names = settings, digests, state, env_names
        self.world_fingerprint, self.logs = world_fingerprint, logs
        self.problems: list[str] = []  # every warning about the remote (--remote-strict fails on one)

        def said(text: str) -> None:
            self.problems.append(text)
            warn(text)

        self.warn = said
        self.ran, self.restored = ran, restored
        self.connection: RemoteCache | None = None  # made by `connect`
        self.programs: Programs | None = None
        self.broken = False  # the remote's modules cannot be loaded: building without it
        # None: no lookups alongside the build, the cache looks each computation up itself
        self.keyed: dict[int, RemoteLookup] | None = None
        self.missed: dict[int, RemoteLookup] = {}
        # what each computation's lookup found, (Action digest, result), until its outcome says it
        self.lookups: dict[int, tuple[str, str]] = {}

    def connect(self) -> RemoteCache | None:
        """The remote cache, made on the first call; None (said once) when grpc or protobuf
        are missing."""
        if self.connection is None and not self.broken:
            from farmer.remote import config

            try:
                config.require()
            except config.RemoteConfigError as e:
                self.broken = True
                self.warn(f"farmer: warning: {e}; building without the remote")
                return None
            from farmer.record.cache.key import Programs
            from farmer.remote.cache import RemoteCache

            self.programs = Programs(self.digests.digest)
            self.connection = RemoteCache(self.settings, self.digests, self.state.sha256, self.warn)
        return self.connection

    def for_exec(self) -> RemoteCache | None:
        """The connected remote cache for remote execution; None when the remote is unusable
        or does not execute (said once)."""
        remote = self.connect()
        client = remote.client() if remote is not None else None
        if client is None:
            return None
        try:
            if client.can_execute():
                return remote
        except Exception:  # noqa: BLE001 - capabilities were read already; never a failed build
            return None
        endpoint = self.settings.endpoint
        self.warn(f"farmer: warning: remote {endpoint.executor or endpoint.url} does not execute "
                  f"(instance {self.settings.endpoint.instance!r}); running everything here")
        return None

    def look_up_alongside(self) -> None:
        """From now on the cache only keys computations (`key`), and the lookups alongside
        the build look them up when they start (`take_key`)."""
        self.keyed = {}

    def key(self, index: int, found: RemoteLookup) -> None:
        assert self.keyed is not None
        self.keyed[index] = found

    def take_key(self, index: int) -> RemoteLookup | None:
        return self.keyed.pop(index, None) if self.keyed is not None else None

    def looked_up(self, index: int, found: RemoteLookup, result: str) -> None:
        """What came of computation `index`'s lookup (last-build.json's remote_lookup)."""
        self.lookups[index] = (found.shown_digest(self.settings.salt), result)

    def miss(self, index: int, found: RemoteLookup) -> None:
        """Computation `index` was not found, and runs here: uploaded once it ran."""
        self.missed[index] = found

    def take_miss(self, index: int) -> RemoteLookup | None:
        return self.missed.pop(index, None)

    def describe(self, comp: Computation, inputs: list[tuple[str, str]]) -> ActionDescription:
        """`comp`'s action description (farmer/record/cache/key.py), its declared inputs'
        digests `inputs`: its key, once connected."""
        from farmer.record.cache.key import describe

        return describe(comp, self.world_fingerprint(comp.world), inputs, self.env_names, self.programs)

    def log_of(self, comp: Computation) -> str:
        from farmer.run.executors.process import log_path

        return log_path(self.logs, comp.id)
