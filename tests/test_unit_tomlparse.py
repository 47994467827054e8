"""farmer/tomlparse.py: toml_rs where installed, held to what tomllib (TOML 1.0, SPEC §1)
accepts, with tomllib's messages for every invalid Farmfile."""

from __future__ import annotations

import sys
import tomllib

import pytest

from farmer import farmfile, tomlparse
from farmer.errors import UsageError

EVERY_KIND = '''
title = "farmer"
n = 0xDEADBEEF
big = 99999999999999999999
octal = 0o755
x = 1e1000
ninf = -inf
when = 1979-05-27T07:32:00-08:00
utc = 1979-05-27T07:32:00.999999Z
local = 1979-05-27T00:32:00.5
day = 1979-05-27
literal = 'C:\\dir'
multi = """
a \\
  b"""
mixed = [1, "a", 2.5, [true]]
dotted.key.here = 1
inline = { a = 1, b = { c = "d" } }
[[arr]]
x = 1
[[arr]]
x = 2
[task."quoted name"]
cmd = "echo \\u00e9"
'''

# Valid TOML 1.1, not TOML 1.0: a Farmfile is what tomllib reads, whichever parser runs.
TOML_1_1_ONLY = [
    'a = {x = 1,\n y = 2}\n',   # newlines in an inline table
    'a = {x = 1,}\n',           # a trailing comma in an inline table
    'a = "\\e"\n',              # the \e escape
    'a = "\\x41"\n',            # the \x escape
    'a = 07:32\n',              # a time without seconds
]


@pytest.fixture(params=["toml_rs", "tomllib only"])
def parser(request, monkeypatch):
    if request.param == "toml_rs":
        pytest.importorskip("toml_rs")
    else:
        monkeypatch.setitem(sys.modules, "toml_rs", None)  # import toml_rs: ImportError
    return request.param


def test_nesting_bound():
    assert tomlparse.nesting_bound(EVERY_KIND) == 2
    assert tomlparse.nesting_bound("a = [" + "[1], " * 1000 + "]") == 2
    assert tomlparse.nesting_bound("a = " + "[" * 300 + "]" * 300) == 300


def test_every_kind_of_value_reads_as_tomllib_reads_it(parser):
    assert tomlparse.loads(EVERY_KIND) == tomllib.loads(EVERY_KIND)


@pytest.mark.parametrize("text", TOML_1_1_ONLY)
def test_toml_1_1_is_rejected_with_tomllib_s_message(parser, text):
    with pytest.raises(tomllib.TOMLDecodeError) as info:
        tomlparse.loads(text)
    with pytest.raises(tomllib.TOMLDecodeError) as expected:
        tomllib.loads(text)
    assert str(info.value) == str(expected.value)


def test_an_invalid_farmfile_names_its_line(parser, tmp_path):
    path = tmp_path / "Farmfile"
    path.write_text('[task.a]\ncmd = "true"\n\n[task.a]\ncmd = "false"\n')
    with pytest.raises(UsageError) as info:
        farmfile.load(path)
    assert str(info.value) == "Farmfile:4: invalid TOML: Cannot declare ('task', 'a') twice"


@pytest.mark.parametrize("depth", [5000, 100_000])  # toml_rs alone crashes at 10 000
def test_nesting_too_deep_is_one_line(parser, tmp_path, depth):
    path = tmp_path / "Farmfile"
    path.write_text("a = " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(UsageError) as info:
        farmfile.load(path)
    assert str(info.value) == "Farmfile: invalid TOML: arrays or tables nested too deeply"
