"""Stand-ins for standard modules whose Python code would cost a build more than the little it
uses of them. Each is the trade below; what each saves is measured in docs/performance.md
(see docs/performance.md#start-up-rules), and tests/test_import_diet.py fails when a module
it keeps out comes back. This module imports only what it wraps: `gc`, and `_signal`, which
every interpreter has loaded already.

- `signal`: `_signal`, the C module under `signal`, whose Python wrapper imports `enum` to
  make enums of the constants. The same functions and constants; signals and handlers are
  plain ints.
- `heapq`: `_heapq`, the C module under `heapq`: the same `heappush` and `heappop`. It is an
  extension file, so it is loaded when a module first imports the name (the scheduler's
  ready queue, the simulated clock), not by a build that has nothing to queue.
- `int64s`, `float64s`, `int64s_of`: tables of native int64s or doubles in a memoryview of
  a bytearray, as `array("q")` and `array("d")` would hold them, without `array` (it
  imports `collections`). A view cannot grow: its owner makes a larger one and copies.
- `collector_paused`: the cyclic collector waits while a block makes many containers and
  frees almost none (unmarshalling a cache, parsing and traversing a manifest); it would
  scan the growing heap again and again for no garbage. A plain class, not contextlib's,
  which imports `collections` and `functools`.
- `load_sqlite3`: `_sqlite3`, the C module under `sqlite3`, whose package only adds datetime
  adapters (and imports `datetime` for them). Its initialisation takes
  `functools.lru_cache` for each connection's statement cache, and `functools` imports
  `collections`, `types`, `reprlib`, `keyword` and `operator`, none of which a build uses.
  So a module holding only `lru_cache` (functools's own C cache) stands in for functools
  while `_sqlite3` initialises and leaves `sys.modules` at once: a later `import functools`
  gets the real one.
"""

from __future__ import annotations

import gc
import sys

import _signal as signal  # noqa: F401 - the stand-in for `signal`

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _heapq as heapq  # noqa: F401 - what `__getattr__` gives


def __getattr__(name: str) -> object:
    """`heapq`, loaded when first imported from here."""
    if name == "heapq":
        import _heapq

        return _heapq
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def int64s(count: int, fill: int = 0) -> memoryview:
    """`count` native int64s, all 0 (or all -1: `fill` -1)."""
    return memoryview(bytearray(b"\xff" if fill else b"\0") * (8 * count)).cast("q")


def float64s(count: int) -> memoryview:
    """`count` native doubles, all 0.0."""
    return memoryview(bytearray(8 * count)).cast("d")


def int64s_of(data: bytes | bytearray | memoryview) -> memoryview:
    """`data` read as native int64s (TypeError unless it is whole ones). The view holds
    `data`'s buffer until it is released: a bytearray cannot be resized meanwhile."""
    return memoryview(data).cast("q")


class collector_paused:
    """`with collector_paused():` no cyclic collection within the block (unless the
    collector was off already, it is on again after)."""

    __slots__ = ("_was",)

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            gc.enable()


def load_sqlite3(functools_stand_in: dict[str, object] | None = None):
    """`_sqlite3`, initialised with a stand-in for `functools` holding `functools_stand_in`
    (by default `lru_cache` alone) unless something imported functools already, or another
    thread runs (it could import functools meanwhile). If the module asks the stand-in for
    anything else, it is imported the ordinary way."""
    loaded = sys.modules.get("_sqlite3")
    if loaded is not None:
        return loaded
    threading = sys.modules.get("threading")
    if "functools" in sys.modules or threading is not None and threading.active_count() > 1:
        import _sqlite3

        return _sqlite3
    stand_in = type(sys)("functools")
    stand_in.__dict__.update(FUNCTOOLS_FOR_SQLITE3 if functools_stand_in is None else functools_stand_in)
    sys.modules["functools"] = stand_in
    try:
        import _sqlite3
    except Exception:
        _sqlite3 = None
    finally:
        if sys.modules.get("functools") is stand_in:
            del sys.modules["functools"]
    if _sqlite3 is None:
        import _sqlite3
    return _sqlite3


def _lru_cache(maxsize: int = 128, typed: bool = False):
    """`functools.lru_cache(maxsize)` as `_sqlite3` calls it (an int: the cache's size)."""
    from _functools import _lru_cache_wrapper

    def decorating(user_function):
        return _lru_cache_wrapper(user_function, max(maxsize, 0), typed, _cache_info)

    return decorating


def _cache_info(hits: int, misses: int, maxsize: int, currsize: int) -> tuple[int, int, int, int]:
    return hits, misses, maxsize, currsize  # (functools's is a named tuple: none asks here)


FUNCTOOLS_FOR_SQLITE3 = {"lru_cache": _lru_cache}  # what _sqlite3 takes of functools
