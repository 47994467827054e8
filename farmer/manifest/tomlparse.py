"""The Farmfile's TOML parser: toml_rs where it is installed, tomllib for every error.

SPEC §1 defines a Farmfile as TOML as Python 3.11's `tomllib` reads it (TOML 1.0).
`tomllib` is pure Python, many times slower than toml_rs (Rust) on a generated Farmfile
(see docs/performance.md#caches); toml_rs reads the same files into equal dicts, and held
to TOML 1.0 it accepts and rejects what tomllib does. When it
rejects a text, tomllib reads it again: its message, with line and column, is the one users
see, whatever parser said no first.

A big Farmfile of one `[task.NAME]` table per step (what a generator writes) is read a
batch of task tables at a time (`stream`): the whole document as dicts, and toml_rs's own
copy of it, would be held at once, many times what its `TaskSpec`s take (see
bench/results/performance-notes.md#figures-from-code-comments).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

# toml_rs parses nested arrays and inline tables by recursion on the C stack: 10 000 levels
# crash the process. tomllib gives up (RecursionError) past about 300, so deeper texts go
# to tomllib, which says so.
_MAX_DEPTH = 256
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_PARENS = bytes.maketrans(b"[{]}", b"(())")
_STEP = (0,) * 40 + (1, -1)  # by byte: "(" opens, ")" closes
_QUICK = 8  # passes of `too_deep` (a Farmfile's tables and arrays nest two or three deep)
STREAM_FROM = 1 << 20  # characters: smaller Farmfiles are read whole (tests lower it)
_BATCH = 1000  # task tables per toml_rs call when streaming


def too_deep(text: str) -> bool:
    """Whether the brackets and braces of `text` may nest deeper than toml_rs is given
    (`_MAX_DEPTH`), strings and comments counted as if they were TOML (so a string that
    holds more closing brackets than opening ones may hide some nesting).

    Each pass takes every innermost pair away, at C speed, faster than prefix sums over every
    bracket: a point inside k nested pairs takes k passes to clear, so the passes, and the
    openers left unclosed, bound the nesting from above. Nested deeper than a few passes clear,
    the prefix sums say (both timed: see
    bench/results/performance-notes.md#figures-from-code-comments)."""
    parens = rest = text.encode("utf-8", "surrogatepass").translate(_PARENS, _NOT_BRACKETS)
    for passes in range(_QUICK):
        if b"()" not in rest:
            return passes + rest.count(b"(") > _MAX_DEPTH
        rest = rest.replace(b"()", b"")
    from itertools import accumulate

    return max(accumulate(map(_STEP.__getitem__, parens)), default=0) > _MAX_DEPTH


def _toml_rs():
    """toml_rs's parser, `(text) -> dict` held to TOML 1.0, or None where it is not installed.

    Start-up rule (docs/performance.md): its Rust extension module is loaded without the
    package's `__init__` (farmer/startup/extension.py); the package's `loads` only checks that it
    gets a str and calls the extension's `_loads`, as this does."""
    if sys.modules.get("toml_rs", False) is None:  # `import toml_rs` would fail (tests say so)
        return None
    from farmer.startup.extension import load

    extension = load("toml_rs", "_toml_rs")
    loads = getattr(extension, "_loads", None)
    if loads is None:  # not where this toml_rs keeps it: through the package, as documented
        try:
            import toml_rs
        except ImportError:
            return None
        loads = toml_rs.loads
    return lambda text: loads(text, parse_float=float, toml_version="1.0.0")


def loads(text: str) -> dict:
    """The TOML document `text` as a dict. Invalid TOML raises tomllib.TOMLDecodeError (a
    ValueError), or RecursionError for nesting too deep for tomllib."""
    toml_rs = _toml_rs()
    if toml_rs is not None and not too_deep(text):
        try:
            return toml_rs(text)
        except Exception:  # noqa: BLE001 - tomllib says what is wrong, below
            pass
    import tomllib

    return tomllib.loads(text)


class NotStreamable(Exception):
    """The text cannot be read a batch at a time after all: read it whole (`loads`)."""


class Streamed:
    """A document read in parts: `rest`, everything but the task tables, parsed; `tasks()`
    yields each `[task.NAME]` table's (name, body) in the document's order, parsing a batch
    of tables at a time. `tasks()` raises NotStreamable where the parts turn out not to be
    the whole document's (the caller then reads it whole, with `loads`, whose verdict on
    an invalid text is the one to give)."""

    __slots__ = ("rest", "_text", "_batches")

    def __init__(self, rest: dict, text: str, batches: list[tuple[int, int, set[str]]]) -> None:
        self.rest, self._text, self._batches = rest, text, batches

    def tasks(self) -> Iterator[tuple[str, object]]:
        toml_rs = _toml_rs()
        seen: set[str] = set()
        for start, end, names in self._batches:
            try:
                table = toml_rs(self._text[start:end])
            except Exception:  # noqa: BLE001 - not TOML: `loads` of the whole text says why
                raise NotStreamable from None
            tasks = table.get("task")
            if table.keys() != {"task"} or not isinstance(tasks, dict) or tasks.keys() != names \
                    or not seen.isdisjoint(names):
                raise NotStreamable
            seen.update(names)
            del table
            yield from tasks.items()


def stream(text: str, headers: list[tuple[tuple[str, ...], int]] | None) -> Streamed | None:
    """`text` as a `Streamed`, or None when it must be read whole: a small text, no
    toml_rs, or a layout whose parts might not add up to the document. `headers`: each
    line that starts with `[` (after blanks), as (the table path if it is a plain `[a.b]`
    header, else (); its offset), in order (farmfile._Lines finds them).

    Why the parts add up: without multi-line strings, a line `[task.NAME...]` cannot be
    inside a value (it is no valid array element), so where the text is valid TOML such a
    line is a table header. Everything from the first of them on is task tables only, whose
    paths are distinct and none inside another: each table lies wholly in one batch, and
    the batches' dicts merged are the document's. Where the text is not valid TOML, a
    batch fails to parse (a construct open at its end) or the checks fail: NotStreamable.
    """
    if len(text) < STREAM_FROM or headers is None:
        return None
    toml_rs = _toml_rs()
    if toml_rs is None:
        return None
    if '"""' in text or "'''" in text or "\\u0000" in text or "\\U00000000" in text:
        return None  # multi-line strings; NULs are looked for in the whole document
    first = next((k for k, (path, _) in enumerate(headers) if len(path) > 1 and path[0] == "task"), None)
    if first is None:
        return None
    paths = [path for path, _ in headers[first:]]
    if not all(len(p) > 1 and p[0] == "task" for p in paths):
        return None  # other tables (or lines like `[1, 2]`) among the tasks
    unique = set(paths)
    if len(unique) != len(paths) or any(p[:k] in unique for p in unique for k in range(2, len(p))):
        return None  # a table declared twice, or [task.a] with [task.a.env]
    if too_deep(text):
        return None
    start = headers[first][1]
    try:
        rest = toml_rs(text[:start])
    except Exception:  # noqa: BLE001 - `loads` says why
        return None
    if "task" in rest:
        return None  # `task.a.cmd = ...` before the tables, say
    batches = []
    for k in range(first, len(headers), _BATCH):
        group = headers[k:k + _BATCH]
        end = headers[k + _BATCH][1] if k + _BATCH < len(headers) else len(text)
        batches.append((group[0][1], end, {path[1] for path, _ in group}))
    return Streamed(rest, text, batches)
