"""farmer/startup/jsontext.py: compact JSON without importing json, byte for byte what
`json.dumps(value, separators=(",", ":"))` writes (last-build.json and the no-op proof keep
entries rendered either way side by side)."""

from __future__ import annotations

import json
import random

import pytest

from farmer.startup import jsontext


def reference(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


STRINGS = [
    "", "plain", "out/a.o", "with space", "~!@#$%^&*()_+-={}[]|:;'<>,.?/`", 'a "quoted" word',
    "back\\slash", "\\", '"', "tab\there", "new\nline", "\r", "\x00", "\x1f", "\x7f", "\x80",
    "é", "naïve.c", "日本語", "\u2028\u2029", "\U0001f600", "\ud800", "\udcff",
    b"odd-\xff\xfe-name.c".decode("utf-8", "surrogateescape"), "</script>", "a" * 10000,
]
FLOATS = [0.0, -0.0, 0.1, 1e-05, 1e-07, 1e16, 1e22, 123456789.123, 0.30000000000000004, 2.5, -3.75,
          1.0, 5e-324, 1.7976931348623157e308, float("nan"), float("inf"), float("-inf")]
INTS = [0, 1, -1, 42, 2**31, 2**63, -2**64, 10**30]


@pytest.mark.parametrize("value", STRINGS + FLOATS + INTS + [None, True, False], ids=repr)
def test_scalars_are_written_as_json_writes_them(value):
    assert jsontext.dumps(value) == reference(value)


@pytest.mark.parametrize("value", [
    [], {}, (), [[]], {"a": {}}, [None, True, False, 0, 0.1, "x"], (1, (2, (3,))),
    {"id": "out/a.o", "task": "cc", "outputs": ["out/a.o"], "status": "ran", "reason": "input changed",
     "world": None, "start_s": 0.0123, "end_s": 1e-05, "duration_s": 123456789.123, "cpu_s": None,
     "max_rss_kb": 1024, "exit_code": 0},
    {"quote\"d": ["back\\slash", "é"], "": [{"nested": [1e16, -0.0, [{}]]}]},
    {"k": float("nan"), "l": [float("inf")]},
    {1: "int key", None: "none key", 2.5: "float key", True: "bool key"},  # json turns keys into strings
    {"a": 1, 2: "mixed keys"},
    list(range(2000)), {str(i): i for i in range(2000)}, [{"id": str(i)} for i in range(1200)],
    ["x" * 3] * 600,
], ids=lambda v: repr(v)[:40])
def test_containers_are_written_as_json_writes_them(value):
    assert jsontext.dumps(value) == reference(value)


def test_subclasses_are_written_as_json_writes_them():
    class Name(str):
        pass

    class Count(int):
        def __repr__(self) -> str:
            return "Count(...)"

    class Ratio(float):
        def __repr__(self) -> str:
            return "Ratio(...)"

    for value in (Name("a"), Count(3), Ratio(0.5), [Name("b"), Count(4)], {Name("k"): Ratio(1.5)}):
        assert jsontext.dumps(value) == reference(value)


def test_what_json_refuses_it_refuses():
    for value in ({"a": object()}, [b"bytes"], {frozenset(): 1}):
        with pytest.raises(TypeError):
            reference(value)
        with pytest.raises(TypeError):
            jsontext.dumps(value)


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randrange(-10**12, 10**12)
    if kind == 3:
        return rng.choice([rng.random(), rng.uniform(-1e20, 1e20), rng.random() * 10 ** rng.randrange(-30, 30)])
    if kind in (4, 5):
        alphabet = "ab/._- \"\\\n\x01\x7fé日\udcff\U0001f600"
        return "".join(rng.choice(alphabet) if rng.random() < 0.2 else rng.choice("abcxyz/.")
                       for _ in range(rng.randrange(12)))
    if kind in (6, 7):
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {str(_random_value(rng, 4)): _random_value(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_random_values_are_written_as_json_writes_them():
    rng = random.Random(1234)
    for _ in range(3000):
        value = _random_value(rng)
        assert jsontext.dumps(value) == reference(value), value


@pytest.mark.parametrize("count", [0, 3, 500, 501, 2000])
def test_each_of_many_is_written_as_json_writes_it(count):
    values = [{"id": f"out/{i}.o", "reason": "é" if i % 7 == 0 else "up to date", "end_s": i / 3}
              for i in range(count)]
    assert jsontext.dumps_each(values) == [reference(v) for v in values]
