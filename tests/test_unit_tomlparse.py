"""farmer/manifest/tomlparse.py: toml_rs where installed, held to what tomllib (TOML 1.0, SPEC §1)
accepts, with tomllib's messages for every invalid Farmfile."""

from __future__ import annotations

import sys
import tomllib

import pytest

from farmer.errors import UsageError
from farmer.manifest import farmfile, tomlparse

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


def test_too_deep():
    """Deeper than toml_rs is given (256 levels), strings counted as if they were TOML."""
    assert not tomlparse.too_deep(EVERY_KIND)
    assert not tomlparse.too_deep("a = [" + "[1], " * 1000 + "]")
    assert not tomlparse.too_deep("a = " + "[" * 256 + "]" * 256)
    assert tomlparse.too_deep("a = " + "[" * 257 + "]" * 257)
    assert tomlparse.too_deep("a = " + "[{" * 150 + "}]" * 150)
    assert tomlparse.too_deep("a = " + "[" * 10_000)  # never closed: still too deep
    assert tomlparse.too_deep('s = "]]]"\na = ' + "[" * 300 + "]" * 300)  # closers first hide none
    assert not tomlparse.too_deep('s = "[[[["\na = [1]')


def test_every_kind_of_value_reads_as_tomllib_reads_it(parser):
    assert tomlparse.loads(EVERY_KIND) == tomllib.loads(EVERY_KIND)


def test_toml_rs_s_extension_parses_without_its_package():
    """tomlparse loads toml_rs's extension module itself (its package's wrappers import
    typing and pathlib): the parser it hands back reads every kind of value and rejects
    TOML 1.1, as toml_rs.loads held to 1.0 does, rather than failing for every text
    (each failure would be read again by tomllib, slowly but with the same result)."""
    toml_rs = pytest.importorskip("toml_rs")
    parse = tomlparse._toml_rs()
    assert parse(EVERY_KIND) == tomllib.loads(EVERY_KIND) == toml_rs.loads(EVERY_KIND, toml_version="1.0.0")
    for text in TOML_1_1_ONLY:
        with pytest.raises(toml_rs.TOMLDecodeError):
            parse(text)


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


# -- a big Farmfile read a batch of task tables at a time (tomlparse.stream) --------------

def _generated(n: int, head: str = "", tail: str = "") -> str:
    """A Farmfile as a generator writes it: one [task.NAME] table per step."""
    tasks = "".join(f'[task.s{k}]\ninputs = ["src/s{k}.txt"]\noutputs = ["out/s{k}.txt"]\n'
                    f'cmd = "cat src/s{k}.txt > out/s{k}.txt"\n\n' for k in range(n))
    return head + tasks + tail


def _as_rows(spec: farmfile.Spec) -> list:
    # (`_line`, a task's line looked up when first asked for, is read as `line`)
    return [(name, [getattr(t, f.lstrip("_")) for f in t.__slots__]) for name, t in spec.tasks.items()] + \
        [spec.default, spec.default_line, spec.vars, spec.pools, sorted(spec.worlds)]


@pytest.fixture
def streaming(monkeypatch):
    """Every Farmfile is streamed where it can be, in batches of 3 tables."""
    pytest.importorskip("toml_rs")
    monkeypatch.setattr(tomlparse, "STREAM_FROM", 0)
    monkeypatch.setattr(tomlparse, "_BATCH", 3)


def _both_ways(text: str, monkeypatch) -> tuple:
    """What parse_text makes of `text` (a Spec's rows or the error's words), streamed and read whole."""
    def read():
        try:
            return _as_rows(farmfile.parse_text("Farmfile", text.encode()))
        except UsageError as e:
            return str(e)
    streamed = read()
    monkeypatch.setattr(tomlparse, "STREAM_FROM", 1 << 60)
    return streamed, read()


HEAD = ('# generated — do not edit\n[farmer]\ndefault = ["all"]\n[vars]\ncc = "gcc"\n'
        '[pools]\nlink = 1\n\n')


@pytest.mark.parametrize("text", [
    _generated(10, HEAD, '[task.all]\ninputs = [\n  "out/s1.txt",\n  "out/s2.txt",\n]\n'),
    _generated(7, "", '[task.all]\ninputs = ["@s1"]\n[vars]\nx = "1"\n'),   # a table after the tasks
    _generated(7, "", '[task.s1.env]\nA = "1"\n'),                          # [task.s1] reopened
    _generated(5, 'task.x.cmd = "true"\n'),                                  # a dotted key before
    _generated(5, '[vars]\nx = """\n[task.q]\n"""\n'),                        # a header in a string
    _generated(4).replace("\n", "\r\n"),
    _generated(8) + '[task."quoted.name"]\ncmd = "true"\n',
    _generated(6, "[task]\n"),                                    # the task table itself
])
def test_a_streamed_farmfile_is_the_farmfile_read_whole(streaming, monkeypatch, text):
    streamed, whole = _both_ways(text, monkeypatch)
    assert streamed == whole and not isinstance(whole, str)


@pytest.mark.parametrize("text", [
    _generated(9) + '[task.s2]\ncmd = "again"\n',                 # declared twice, batches apart
    _generated(9) + '[task.s7]\ncmd = "again"\n',                 # declared twice in one batch
    _generated(9, "", "[task.t]\ncmd = [\n"),                     # TOML broken at the very end
    _generated(3) + '[task.bad]\nouputs = []\n' + _generated(9).replace("[task.s", "[task.t") + "x = [\n",
    _generated(5, '[vars]\nx = [\n', '["vars2"]\n]\n'),           # parts valid alone, not together
    _generated(6) + '[task.a]\ncmd = 3\n',                        # a Farmfile error, not TOML's
])
def test_a_streamed_farmfile_fails_as_the_farmfile_read_whole(streaming, monkeypatch, text):
    streamed, whole = _both_ways(text, monkeypatch)
    assert streamed == whole and isinstance(whole, str)


def test_a_generated_farmfile_is_streamed_and_its_lines_are_found(streaming):
    text = _generated(10, HEAD)
    lines = farmfile._Lines(text)
    streamed = tomlparse.stream(text, lines.brackets)
    assert streamed is not None and streamed.rest == tomllib.loads(HEAD)
    assert dict(streamed.tasks()) == tomllib.loads(text)["task"]
    numbered = text.splitlines()
    assert lines.table("task", "s3") == numbered.index("[task.s3]") + 1
    assert lines.key(("task", "s3"), "cmd") == numbered.index('cmd = "cat src/s3.txt > out/s3.txt"') + 1
    assert lines.key(("pools",), "link") == numbered.index("link = 1") + 1
    assert lines.key((), "vars") == numbered.index("[vars]") + 1


@pytest.mark.parametrize("breaks", ["\r\n", "\n", "\u2028"])
def test_lines_are_numbered_as_splitlines_numbers_them(breaks):
    text = _generated(3, HEAD).replace("\n", breaks)
    lines = farmfile._Lines(text)
    numbered = text.splitlines()
    assert lines.headers == {("farmer",): 2, ("vars",): 4, ("pools",): 6, ("task", "s0"): 9,
                             ("task", "s1"): 14, ("task", "s2"): 19}
    assert lines.key(("task", "s2"), "outputs") == numbered.index('outputs = ["out/s2.txt"]') + 1
    assert (lines.brackets is None) == (breaks == "\u2028")  # an odd line break: never streamed


def test_a_streamed_farmfile_s_tasks_keep_their_lines_not_the_line_index(streaming, monkeypatch):
    """Streaming makes the line index anyway: each task keeps its line, and the index (with
    the whole text) goes with the parse instead of living as long as the tasks."""
    text = _generated(7, HEAD) + '[task.e]\ncmd = "true"\nenv = { A = "1" }\n'
    numbered = text.splitlines()
    streamed = farmfile.parse_text("Farmfile", text.encode())
    assert all(not isinstance(t._line, farmfile._Lines) for t in streamed.tasks.values())
    monkeypatch.setattr(tomlparse, "STREAM_FROM", 1 << 60)
    whole = farmfile.parse_text("Farmfile", text.encode())
    for name in ("s0", "s6", "e"):
        assert streamed.tasks[name].line == whole.tasks[name].line == numbered.index(f"[task.{name}]") + 1
