"""Whether the local cache is on, where it lives and how big it may grow (SPEC §5).

Precedence, highest first: the command line (`--cache`/`--no-cache`, `--cache-dir`), the
environment (`FARMER_CACHE`, `FARMER_CACHE_DIR`), the Farmfile's `[cache]` table, then the
defaults (off; `$XDG_CACHE_HOME/farmer`, else `~/.cache/farmer`; 5 GiB). Only `--cache`,
`FARMER_CACHE=1` and a `[cache]` table turn it on: naming a directory does not.
"""

from __future__ import annotations

import os

from farmer.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.manifest.spec import CacheSpec

DEFAULT_MAX_SIZE = 5 * 1024**3

def format_size(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _expand_home(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    return os.path.expanduser(path)  # ~user


class CacheSettings:
    """The local cache as this command sees it."""

    __slots__ = ("enabled", "dir", "max_size", "env")

    def __init__(self, enabled: bool, dir: str, max_size: int, env: list[str]) -> None:
        self.enabled, self.dir, self.max_size, self.env = enabled, dir, max_size, env


def cache_switch(environ: dict[str, str] | os._Environ) -> bool | None:
    """What FARMER_CACHE says: on, off, or nothing (unset)."""
    value = environ.get("FARMER_CACHE", "")
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    if value:
        raise UsageError(f"FARMER_CACHE={value!r}: write FARMER_CACHE=1 to turn the cache on "
                         "or FARMER_CACHE=0 to turn it off")
    return None


def resolve(cache_spec: CacheSpec | None, root: str, flag: bool | None = None,
            cache_dir: str | None = None, environ: dict[str, str] | None = None) -> CacheSettings:
    """`flag`: --cache (True), --no-cache (False) or neither (None); `cache_dir`:
    --cache-dir; `root`: the project root, which a relative `[cache] dir` is taken from."""
    env = os.environ if environ is None else environ
    if flag is None:
        flag = cache_switch(env)
    enabled = flag if flag is not None else cache_spec is not None
    home = env.get("HOME") or os.path.expanduser("~")
    where = cache_dir or env.get("FARMER_CACHE_DIR") or None
    if where is None and cache_spec is not None and cache_spec.dir:
        where = os.path.join(root, _expand_home(cache_spec.dir, home))
    if where is None:
        xdg = env.get("XDG_CACHE_HOME", "")
        base = xdg if os.path.isabs(xdg) else os.path.join(home, ".cache")
        where = os.path.join(base, "farmer")
    where = os.path.abspath(_expand_home(where, home))
    max_size = cache_spec.max_size if cache_spec is not None and cache_spec.max_size else DEFAULT_MAX_SIZE
    names = list(cache_spec.env) if cache_spec is not None else []
    return CacheSettings(enabled, where, max_size, names)
