"""The Farmfile's TOML parser: toml_rs where it is installed, tomllib for every error.

SPEC §1 defines a Farmfile as TOML as Python 3.11's `tomllib` reads it (TOML 1.0).
`tomllib` is pure Python: 70 ms for a generated Farmfile of 1 000 `[task]` tables,
0.75 s for 10 000. toml_rs (Rust) reads the same files into equal dicts in 3 and 44 ms,
and held to TOML 1.0 it accepts and rejects what tomllib does (docs/performance.md). When it
rejects a text, tomllib reads it again: its message, with line and column, is the one users
see, whatever parser said no first.
"""

from __future__ import annotations

from itertools import accumulate

# toml_rs parses nested arrays and inline tables by recursion on the C stack: 10 000 levels
# crash the process. tomllib gives up (RecursionError) past about 300, so deeper texts go
# to tomllib, which says so.
_MAX_DEPTH = 256
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEP = tuple(1 if c in b"[{" else -1 if c in b"]}" else 0 for c in range(256))


def nesting_bound(text: str) -> int:
    """The deepest nesting of brackets and braces in `text`, strings and comments counted
    as if they were TOML (4 ms for 1.3 MB): an upper bound of the document's own nesting
    unless its strings hold more closing brackets than opening ones."""
    brackets = text.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(text: str) -> dict:
    """The TOML document `text` as a dict. Invalid TOML raises tomllib.TOMLDecodeError (a
    ValueError), or RecursionError for nesting too deep for tomllib."""
    try:
        import toml_rs
    except ImportError:
        toml_rs = None
    if toml_rs is not None and nesting_bound(text) <= _MAX_DEPTH:
        try:
            return toml_rs.loads(text, toml_version="1.0.0")
        except Exception:  # noqa: BLE001 - tomllib says what is wrong, below
            pass
    import tomllib

    return tomllib.loads(text)
