"""Compact JSON text without `import json` for small data: a build that writes a few entries
of last-build.json need not import json, its decoder and its scanner (see
docs/performance.md#start-up-rules).

`dumps(value)` is byte for byte `json.dumps(value, separators=(",", ":"))` (ensure_ascii):
a string of printable ASCII without `"` or `\\` is written as it is, None, bools, ints and
finite floats as json writes them (their repr), dicts with str keys, lists and tuples item by
item. Anything else (a string to escape, non-ASCII, NaN, other types or keys, or many items,
where json's C encoder is faster) goes to json itself, imported then.
"""

from __future__ import annotations

_INF = float("inf")
_MANY = 500  # items: more go to json's C encoder, which is faster once imported


def dumps(value: object) -> str:
    """`json.dumps(value, separators=(",", ":"))`."""
    kind = type(value)
    if kind is str:
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return f'"{value}"'
    elif value is None:
        return "null"
    elif value is True:
        return "true"
    elif value is False:
        return "false"
    elif kind is int:
        return int.__repr__(value)
    elif kind is float:
        if -_INF < value < _INF:  # not nan, inf or -inf (json writes NaN, Infinity)
            return float.__repr__(value)
    elif kind is dict:
        if len(value) <= _MANY and all(type(k) is str for k in value):
            return "{" + ",".join([f"{dumps(k)}:{dumps(v)}" for k, v in value.items()]) + "}"
    elif kind is list or kind is tuple:
        if len(value) <= _MANY:
            return "[" + ",".join([dumps(v) for v in value]) + "]"
    import json

    return json.dumps(value, separators=(",", ":"))


def dumps_each(values: list) -> list[str]:
    """`[dumps(v) for v in values]`; many go through one json encoder."""
    if len(values) <= _MANY:
        return [dumps(v) for v in values]
    import json

    encode = json.JSONEncoder(separators=(",", ":")).encode
    return [encode(v) for v in values]
