"""`farmer cache stats | gc [--max-size SIZE] | clear` (SPEC §5)."""

from __future__ import annotations

import os

from farmer.errors import UsageError
from farmer.manifest.spec import parse_size
from farmer.record.cache.errors import CacheError
from farmer.record.cache.settings import CacheSettings, format_size, resolve
from farmer.record.cache.store import LocalCache


def settings_for(directory: str | None, farmfile: str, cache_dir: str | None) -> CacheSettings:
    """The cache as a build in this directory would see it: the Farmfile's `[cache]`, if
    there is a Farmfile, under the environment and the command line."""
    from farmer.build.command import enter

    enter(directory)
    path = os.path.abspath(farmfile)
    cache_spec = None
    if os.path.isfile(path) and not farmfile.endswith(".ninja"):
        from farmer.manifest import farmfile as parser

        cache_spec = parser.load(path).cache
    return resolve(cache_spec, os.path.dirname(path), None, cache_dir)


def stats(settings: CacheSettings) -> str:
    if os.path.isdir(settings.dir):
        store = _open(settings)
        try:
            entries, size = store.stats()
        finally:
            store.close()
    else:
        entries, size = 0, 0
    state = "on" if settings.enabled else "off (turn it on with --cache, FARMER_CACHE=1 or [cache])"
    return (f"cache: {settings.dir}\n"
            f"enabled here: {state}\n"
            f"entries: {entries}\n"
            f"bytes: {size} ({format_size(size)})\n"
            f"limit: {settings.max_size} ({format_size(settings.max_size)})\n")


def gc(settings: CacheSettings, max_size: str | None) -> str:
    limit = settings.max_size
    if max_size is not None:
        parsed = parse_size(max_size)
        if parsed is None and max_size.strip() == "0":
            parsed = 0
        if parsed is None:
            raise UsageError(f"--max-size {max_size!r}: not a size; write e.g. 5GiB, 500MB or a number of bytes")
        limit = parsed
    if not os.path.isdir(settings.dir):
        return f"farmer: cache {settings.dir}: empty; nothing to evict\n"
    store = _open(settings)
    try:
        result = store.gc(limit)
    except CacheError as e:
        raise UsageError(f"cache: {e}") from None
    finally:
        store.close()
    return (f"farmer: cache {settings.dir}: evicted {result.removed} entries, freed "
            f"{format_size(result.freed)}; {result.entries} entries, {format_size(result.bytes)} "
            f"of {format_size(limit)}\n")


def clear(settings: CacheSettings) -> str:
    if not os.path.isdir(settings.dir):
        return f"farmer: cache {settings.dir}: empty\n"
    store = _open(settings)
    try:
        removed = store.clear()
    except CacheError as e:
        raise UsageError(f"cache: {e}") from None
    finally:
        store.close()
    return f"farmer: cache {settings.dir}: cleared ({removed} entries removed)\n"


def _open(settings: CacheSettings) -> LocalCache:
    try:
        return LocalCache(settings.dir).open()
    except CacheError as e:
        raise UsageError(f"cache: {e}") from None
