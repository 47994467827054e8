"""The local output cache as an engine (farmer/record/engine.py): an output cache at the
recorder's seam, and nothing more (it runs nothing). farmer/build/compose.py makes it when
--cache, FARMER_CACHE or a `[cache]` table turns the cache on.
"""

from __future__ import annotations

from farmer.record.cache.settings import CacheSettings, resolve
from farmer.record.cache.use import LocalRunCache
from farmer.record.engine import Engine, EngineContext
from farmer.run.executors.base import Restored


class LocalCacheEngine(Engine):
    __slots__ = ("settings",)
    name = "cache"
    restored = Restored("local")  # a hit's origin; last-build.json's "cache": "local"

    def __init__(self, settings: CacheSettings) -> None:
        self.settings = settings

    @classmethod
    def of(cls, ctx: EngineContext) -> LocalCacheEngine | None:
        """The engine, with the cache's settings as the Farmfile, the environment and the
        command line give them; None when they turn it off after all."""
        settings = resolve(ctx.spec.cache, ctx.spec.root, ctx.options.cache, ctx.options.cache_dir)
        return cls(settings) if settings.enabled else None

    def run_cache(self, ctx: EngineContext) -> LocalRunCache:
        return LocalRunCache(self.settings, ctx.session.digests, ctx.logs, ctx.warn, ctx.spec.root,
                             self.restored)
