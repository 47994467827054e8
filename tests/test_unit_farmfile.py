"""Unit tests for farmer/manifest/farmfile.py: a Farmfile parses to the right Spec, and every
problem is a one-line UsageError naming the file and the line (SPEC §1)."""

from __future__ import annotations

import os
import re

import pytest

from farmer.errors import UsageError
from farmer.graph.traversal import traverse
from farmer.manifest import farmfile


def write(tmp_path, *lines: str):
    """A Farmfile whose N-th argument is line N (so line numbers are plain to see)."""
    path = tmp_path / "Farmfile"
    path.write_text("\n".join(lines) + "\n")
    return path


def load(tmp_path, *lines: str) -> farmfile.Spec:
    return farmfile.load(write(tmp_path, *lines))


def error(tmp_path, *lines: str) -> str:
    with pytest.raises(UsageError) as info:
        load(tmp_path, *lines)
    msg = str(info.value)
    assert "\n" not in msg, f"error is not one line: {msg!r}"
    assert msg.startswith("Farmfile"), msg
    assert info.value.exit_code == 2
    return msg


def at_line(msg: str, n: int) -> bool:
    return re.match(rf"^Farmfile:{n}:", msg) is not None


# -- valid Farmfiles ---------------------------------------------------------------------


def test_full_example_parses_to_spec(tmp_path):
    spec = load(
        tmp_path,
        '[farmer]',
        'default = ["app", "reports"]',
        '',
        '[vars]',
        'cc = "gcc"',
        'cflags = "-O2 -Wall"',
        'level = 3',
        '',
        '[pools]',
        'link = 1',
        '',
        '[world.sci]',
        'setup = ["import json"]',
        '',
        '[world.data]',
        'parent = "sci"',
        'inputs = ["data/table.json"]',
        'setup = ["TABLE = 1"]',
        'env = {MODE = "fast"}',
        '',
        '[task.objects]',
        'foreach = "src/{stem}.c"',
        'inputs = ["src/{stem}.c"]',
        'outputs = ["build/{stem}.o"]',
        'depfile = "build/{stem}.d"',
        'cmd = "{cc} {cflags} -MD -MF {depfile} -c {inputs} -o {outputs}"',
        '',
        '[task.app]',
        'inputs = ["@objects"]',
        'outputs = ["build/app"]',
        'pool = "link"',
        'cpus = 2',
        'cost = 1.5',
        'timeout = 30',
        'env = {LANG = "C"}',
        'cache = false',
        'always = true',
        'cmd = "{cc} {inputs} -o {outputs}"',
        '',
        '[task.reports]',
        'foreach = "queries/{q}.py"',
        'world = "data"',
        'inputs = ["queries/{q}.py"]',
        'outputs = ["out/{q}.txt"]',
        'python = "queries/{q}.py {outputs}"',
        '',
        '[task.all]',
        'inputs = ["@app", "@reports"]',
    )
    assert spec.root == os.fspath(tmp_path)  # paths are plain strings (no pathlib on a build)
    assert spec.path == os.path.join(tmp_path, "Farmfile")
    assert spec.default == ["app", "reports"]
    assert spec.vars == {"cc": "gcc", "cflags": "-O2 -Wall", "level": "3"}
    assert spec.pools == {"link": 1}
    assert set(spec.worlds) == {"sci", "data"}
    data = spec.worlds["data"]
    assert (data.parent, data.inputs, data.setup, data.env) == (
        "sci", ["data/table.json"], ["TABLE = 1"], {"MODE": "fast"})
    assert spec.worlds["sci"].parent is None
    assert spec.worlds["sci"].line == 12
    assert list(spec.tasks) == ["objects", "app", "reports", "all"]

    objects = spec.tasks["objects"]
    assert objects.foreach == "src/{stem}.c"
    assert objects.depfile == "build/{stem}.d"
    assert objects.outputs == ["build/{stem}.o"]
    assert objects.line == 21
    # defaults
    assert (objects.cpus, objects.pool, objects.timeout, objects.always, objects.cache,
            objects.cost, objects.env) == (1, None, None, False, True, None, {})

    app = spec.tasks["app"]
    assert (app.inputs, app.outputs, app.pool, app.cpus, app.cost, app.timeout) == (
        ["@objects"], ["build/app"], "link", 2, 1.5, 30.0)
    assert (app.env, app.cache, app.always) == ({"LANG": "C"}, False, True)
    assert app.cmd == "{cc} {inputs} -o {outputs}" and app.python is None

    reports = spec.tasks["reports"]
    assert (reports.world, reports.python, reports.cmd) == ("data", "queries/{q}.py {outputs}", None)

    alias = spec.tasks["all"]
    assert alias.cmd is None and alias.python is None and alias.outputs == []


def test_empty_farmfile_is_valid(tmp_path):
    spec = load(tmp_path, "")
    assert spec.tasks == {} and spec.worlds == {} and spec.vars == {} and spec.default is None


def test_foreach_table_of_lists(tmp_path):
    spec = load(
        tmp_path,
        '[task.grid]',
        'foreach = {n = ["1", "2"], mode = ["a", "b"]}',
        'cmd = "run {n} {mode}"',
    )
    assert spec.tasks["grid"].foreach == {"n": ["1", "2"], "mode": ["a", "b"]}


def test_literal_braces_are_fine(tmp_path):
    spec = load(tmp_path, '[task.a]', 'cmd = "awk \'{{print $1}}\'"')
    assert spec.tasks["a"].cmd == "awk '{{print $1}}'"


def test_tables_written_out_in_full_are_plain_task_specs(tmp_path):
    """Only inputs, outputs and a cmd (or neither: an alias), no brace: what a generator
    writes, read by farmfile._tasks's few tests; every other field at its default."""
    spec = load(tmp_path, '[task.s0]', 'inputs = ["src/a.txt", "src/b.txt"]', 'outputs = ["out/a.txt"]',
                'cmd = "cat src/a.txt > out/a.txt"', '', '[task.all]', 'inputs = ["out/a.txt"]', '',
                '[task.t]', 'outputs = ["out/t"]', 'cmd = "echo {outputs}"', '',
                '[task.e]', 'cmd = "true"', 'env = {A = "1"}', '', '[task.empty]')
    assert {n: t.plain for n, t in spec.tasks.items()} == {
        "s0": True, "all": True, "t": False, "e": False, "empty": True}
    s0, alias = spec.tasks["s0"], spec.tasks["all"]
    assert (s0.inputs, s0.outputs, s0.cmd, s0.line) == (
        ["src/a.txt", "src/b.txt"], ["out/a.txt"], "cat src/a.txt > out/a.txt", 1)
    assert (alias.inputs, alias.outputs, alias.cmd, alias.line) == (["out/a.txt"], [], None, 6)
    assert (s0.python, s0.world, s0.foreach, s0.depfile, s0.env, s0.cost, s0.cpus, s0.pool, s0.timeout,
            s0.always, s0.cache, s0.remote) == (None, None, None, None, {}, None, 1, None, None, False, True, True)


@pytest.mark.parametrize("lines, line, words", [
    (['[task."a b"]', 'inputs = ["x"]', 'outputs = ["y"]', 'cmd = "cp x y"'], 1, "task name 'a b' may only use"),
    (['[task.a]', 'inputs = ["x", 1]', 'outputs = ["y"]', 'cmd = "cp x y"'], 2, "task.a.inputs must be a list of strings"),
    (['[task.a]', 'inputs = ["x"]', 'outputs = ["y"]'], 1, "declares outputs but has no cmd or python"),
    (['[task.a]', 'outputs = "y"', 'cmd = "touch y"'], 2, "task.a.outputs must be a list of strings"),
])
def test_tables_of_the_plain_keys_with_something_wrong_say_what(tmp_path, lines, line, words):
    msg = error(tmp_path, *lines)
    assert at_line(msg, line) and words in msg, msg


@pytest.mark.parametrize("names", [
    [], ["a"], ["s0", "s1.x", "A_b-9"], [""], ["a", ""], ["", "a"], [".a"], ["a", "-b"], ["a b"],
    ["a\nb"], ["a\n"], ["\na"], ["\n"], ["a", "b\n"], ["é"], ["a", "b."], ["a", "."], ["a\n.b"]])
def test_task_names_checked_all_at_once_as_one_by_one(names):
    """`are_names` (a Farmfile's task names at once) says what `is_name` says of each."""
    assert farmfile.are_names(names) == all(farmfile.is_name(n) for n in names)


@pytest.mark.parametrize("name", ["a\\nb", "-a", ".a", ""])
def test_a_bad_name_among_plain_tables_is_refused(tmp_path, name):
    msg = error(tmp_path, '[task.s0]', 'inputs = ["x"]', 'outputs = ["y"]', 'cmd = "cp x y"', '',
                f'[task."{name}"]', 'inputs = ["y"]', 'outputs = ["z"]', 'cmd = "cp y z"')
    assert "task name" in msg and "may only use" in msg, msg
    assert at_line(msg, 6) or "\\" in name, msg  # (a header with an escape is not indexed)


def test_missing_farmfile(tmp_path):
    with pytest.raises(UsageError) as info:
        farmfile.load(tmp_path / "Farmfile")
    assert "Farmfile" in str(info.value) and "\n" not in str(info.value)


# -- TOML syntax -----------------------------------------------------------------------------


def test_toml_syntax_error_has_line(tmp_path):
    msg = error(
        tmp_path,
        '[task.a]',
        'outputs = ["a"]',
        'cmd = "echo unterminated',
        '',
    )
    assert at_line(msg, 3), msg
    assert "TOML" in msg


def test_toml_duplicate_key_has_line(tmp_path):
    msg = error(tmp_path, '[vars]', 'x = "1"', 'y = "2"', 'x = "3"')
    assert at_line(msg, 4), msg


def test_not_utf8(tmp_path):
    path = tmp_path / "Farmfile"
    path.write_bytes(b'[vars]\nx = "\xff"\n')
    with pytest.raises(UsageError) as info:
        farmfile.load(path)
    assert "Farmfile" in str(info.value) and "UTF-8" in str(info.value)


# -- unknown keys --------------------------------------------------------------------------


def test_unknown_key_in_task_names_line_and_key(tmp_path):
    msg = error(
        tmp_path,
        '[task.a]',
        'outputs = ["a"]',
        'cmd = "touch a"',
        '',
        '[task.b]',
        'outputs = ["b"]',
        'inptus = ["a"]',
        'cmd = "touch b"',
    )
    assert at_line(msg, 7), msg
    assert "inptus" in msg


def test_unknown_key_same_name_in_two_tasks_gets_the_right_line(tmp_path):
    # The key line must be searched inside the right table, not the first occurrence.
    msg = error(
        tmp_path,
        '[task.a]',
        'cmd = "true"',
        '',
        '[task.b]',
        'cmd = "true"',
        'pool = 3',
    )
    assert at_line(msg, 6), msg
    assert "pool" in msg


def test_unknown_key_in_world(tmp_path):
    msg = error(tmp_path, '[world.w]', 'setup = []', 'parnet = "x"')
    assert at_line(msg, 3), msg
    assert "parnet" in msg


def test_unknown_key_in_farmer_table(tmp_path):
    msg = error(tmp_path, '[farmer]', 'defaults = ["a"]')
    assert at_line(msg, 2), msg
    assert "defaults" in msg


def test_unknown_top_level_key(tmp_path):
    msg = error(tmp_path, 'verbose = true', '[task.a]', 'cmd = "true"')
    assert at_line(msg, 1), msg
    assert "verbose" in msg


def test_unknown_top_level_table_has_line(tmp_path):
    msg = error(tmp_path, '[task.ok]', 'cmd = "true"', '', '[tasks.oops]', 'cmd = "true"')
    assert "tasks" in msg
    assert at_line(msg, 4), msg


# -- wrong types and values ------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, key",
    [
        ('inputs = "src/a.c"', "inputs"),
        ('outputs = ["a", 3]', "outputs"),
        ('cmd = ["echo"]', "cmd"),
        ('cpus = 0', "cpus"),
        ('cpus = 1.5', "cpus"),
        ('cpus = true', "cpus"),
        ('timeout = -1', "timeout"),
        ('timeout = 0', "timeout"),
        ('cost = -2', "cost"),
        ('cost = "fast"', "cost"),
        ('always = "yes"', "always"),
        ('cache = 0', "cache"),
        ('env = "A=1"', "env"),
        ('env = {A = [1]}', "env"),
        ('depfile = 1', "depfile"),
        ('foreach = 3', "foreach"),
        ('foreach = {}', "foreach"),
    ],
)
def test_wrong_type_names_line_and_key(tmp_path, line, key):
    # Types are checked before the cross-checks, so a task of only this key will do.
    msg = error(tmp_path, '[vars]', 'cc = "gcc"', '', '[task.t]', '# the key:', line)
    assert at_line(msg, 6), msg
    assert key in msg


def test_pool_size_must_be_positive_integer(tmp_path):
    msg = error(tmp_path, '[pools]', 'link = 1', 'big = 0')
    assert at_line(msg, 3), msg
    assert "big" in msg


def test_default_must_be_list_of_strings(tmp_path):
    msg = error(tmp_path, '[farmer]', 'default = "app"', '[task.app]', 'cmd = "true"')
    assert at_line(msg, 2), msg
    assert "default" in msg


def test_default_naming_no_task(tmp_path):
    # Output paths are known only after the traversal, so that is where default is checked.
    spec = load(tmp_path, '[farmer]', 'default = ["ap"]', '[task.app]', 'outputs = ["app"]', 'cmd = "true"')
    with pytest.raises(UsageError) as info:
        traverse(spec)
    msg = str(info.value)
    assert at_line(msg, 2), msg
    assert "'ap'" in msg


def test_default_may_name_an_output_path(tmp_path):
    spec = load(tmp_path, '[farmer]', 'default = ["app"]', '[task.link]', 'outputs = ["app"]', 'cmd = "true"')
    assert traverse(spec).producer == {"app": 0}


def test_world_setup_must_be_list(tmp_path):
    msg = error(tmp_path, '[world.w]', 'setup = "import os"')
    assert at_line(msg, 2), msg
    assert "setup" in msg


def test_vars_value_of_wrong_type_names_file_and_key(tmp_path):
    msg = error(tmp_path, '[vars]', 'cc = "gcc"', 'flags = ["-O2"]')
    assert "flags" in msg


def test_vars_value_of_wrong_type_has_line(tmp_path):
    msg = error(tmp_path, '[vars]', 'cc = "gcc"', 'flags = ["-O2"]')
    assert at_line(msg, 3), msg


def test_error_in_env_subtable_has_its_line(tmp_path):
    msg = error(tmp_path, '[task.a]', 'cmd = "true"', '[task.a.env]', 'X = [1]')
    assert "X" in msg
    assert at_line(msg, 4), msg


@pytest.mark.parametrize("lines, line", [
    (('[task.a]', 'cmd = "true"', 'env = {"" = "x"}'), 3),
    (('[task.a]', 'cmd = "true"', '[task.a.env]', '"A=B" = "x"'), 4),
    (('[world.w]', 'setup = []', 'env = {"" = "x"}'), 3),
])
def test_env_names_the_system_refuses_are_errors(tmp_path, lines, line):
    msg = error(tmp_path, *lines)
    assert "is not an environment variable name" in msg, msg
    assert at_line(msg, line), msg


def test_error_in_task_with_dotted_name_has_line(tmp_path):
    msg = error(tmp_path, '[task.first]', 'cmd = "true"', '', '[task."v1.2"]', 'cmd = "true"',
                'pool = "nope"')
    assert "nope" in msg
    assert at_line(msg, 6), msg


def test_bad_task_name(tmp_path):
    msg = error(tmp_path, '[task.ok]', 'cmd = "true"', '[task."a b"]', 'cmd = "true"')
    assert at_line(msg, 3), msg
    assert "a b" in msg


# -- cross-checks ----------------------------------------------------------------------------


def test_cmd_and_python_together(tmp_path):
    msg = error(
        tmp_path,
        '[task.first]',
        'cmd = "true"',
        '',
        '[task.both]',
        'outputs = ["x"]',
        'cmd = "touch x"',
        'python = "-c pass"',
    )
    assert at_line(msg, 4), msg
    assert "both" in msg and "cmd" in msg and "python" in msg


def test_outputs_without_action(tmp_path):
    msg = error(tmp_path, '[task.alias]', 'inputs = ["a"]', 'outputs = ["b"]')
    assert at_line(msg, 1), msg
    assert "alias" in msg


def test_unknown_pool(tmp_path):
    msg = error(
        tmp_path,
        '[pools]',
        'link = 1',
        '',
        '[task.app]',
        'cmd = "true"',
        'pool = "lnk"',
    )
    assert at_line(msg, 6), msg
    assert "lnk" in msg


def test_unknown_world(tmp_path):
    msg = error(
        tmp_path,
        '[world.sci]',
        'setup = []',
        '',
        '[task.r]',
        'python = "-c pass"',
        'world = "scy"',
    )
    assert at_line(msg, 6), msg
    assert "scy" in msg


def test_world_without_python(tmp_path):
    msg = error(tmp_path, '[world.sci]', '[task.r]', 'cmd = "true"', 'world = "sci"')
    assert at_line(msg, 4), msg
    assert "python" in msg


def test_unknown_world_parent(tmp_path):
    msg = error(tmp_path, '[world.a]', 'setup = []', 'parent = "nope"')
    assert at_line(msg, 3), msg
    assert "nope" in msg


def test_world_parent_cycle(tmp_path):
    msg = error(
        tmp_path,
        '[world.a]',
        'parent = "b"',
        '',
        '[world.b]',
        'parent = "c"',
        '',
        '[world.c]',
        'parent = "a"',
    )
    assert re.match(r"^Farmfile:(1|4|7):", msg), msg
    assert "cycle" in msg
    for name in ("a", "b", "c"):
        assert re.search(rf"\b{name}\b", msg.split(":", 2)[2]), msg


def test_world_parent_self(tmp_path):
    msg = error(tmp_path, '[world.me]', 'parent = "me"')
    assert at_line(msg, 1), msg
    assert "cycle" in msg and "me" in msg


def test_foreach_without_wildcard(tmp_path):
    msg = error(
        tmp_path,
        '[task.t]',
        'foreach = "src/main.c"',
        'cmd = "true"',
    )
    assert at_line(msg, 2), msg
    assert "foreach" in msg and "wildcard" in msg


def test_foreach_table_value_not_a_list(tmp_path):
    msg = error(tmp_path, '[task.t]', 'cmd = "true"', 'foreach = {n = "1"}')
    assert at_line(msg, 3), msg
    assert "foreach" in msg


def test_foreach_reserved_wildcard_name(tmp_path):
    msg = error(tmp_path, '[task.t]', 'cmd = "true"', 'foreach = "src/{inputs}.c"')
    assert at_line(msg, 3), msg
    assert "inputs" in msg


@pytest.mark.parametrize(
    "key, value",
    [
        ("cmd", '"echo {oops"'),
        ("cmd", '"echo oops}"'),
        ("outputs", '["out/{x"]'),
        ("inputs", '["a}"]'),
        ("depfile", '"{d"'),
        ("foreach", '"src/{stem.c"'),
    ],
)
def test_unbalanced_braces(tmp_path, key, value):
    lines = ['[task.t]', 'cmd = "true"', f'{key} = {value}']
    if key == "cmd":
        lines = ['[task.t]', '# comment', f'{key} = {value}']
    msg = error(tmp_path, *lines)
    assert at_line(msg, 3), msg
    assert key in msg and ("{" in msg or "}" in msg)


def test_cache_table(tmp_path):
    spec = load(tmp_path, "[cache]", 'dir = "~/c"', 'max_size = "2GiB"', 'env = ["LANG", "CC"]')
    assert spec.cache.dir == "~/c" and spec.cache.max_size == 2 * 1024**3
    assert spec.cache.env == ["LANG", "CC"]
    assert load(tmp_path, "[cache]").cache.max_size is None  # present: the cache is on
    assert load(tmp_path, "[vars]").cache is None
    assert at_line(error(tmp_path, "[cache]", 'max_size = "lots"'), 2)
    assert "max_size" in error(tmp_path, "[cache]", 'max_size = "lots"')
    msg = error(tmp_path, "[cache]", "", 'salt = "x"')
    assert at_line(msg, 3) and "unknown key 'salt' in [cache]" in msg
    assert at_line(error(tmp_path, "[cache]", 'env = ["A=B"]'), 2)
    assert "must be a list of strings" in error(tmp_path, "[cache]", "env = 3")


# -- lines found by string methods, as the patterns they stand for find them ---------------
# The patterns farmfile.py used to match every line with (it now takes them only where a
# line is not of the plain forms): each text's headers, bracket lines and key lines must
# come out as these say.
_REF_BRACKET = re.compile(r"\n([^\S\n]*\[[^\n]*)")
_REF_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(?:#.*)?$")
_REF_DOTTED = re.compile(r""""[^"]*"|'[^']*'|[^.\s"']+""")
_REF_KEY = re.compile(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_\-]+))\s*=""")


def _reference_brackets(text: str) -> list[tuple[tuple[str, ...], int]]:
    found = []
    for m in _REF_BRACKET.finditer("\n" + text):
        line = m.group(1)
        h = _REF_HEADER.match(line[:-1] if line.endswith("\r") else line)
        parts = tuple(q.strip("\"'") for q in _REF_DOTTED.findall(h.group(1))) if h else ()
        found.append((parts if "\\" not in line else (), m.start(1) - 1))
    return found


def _pieces_texts(count: int) -> list[str]:
    import random

    pieces = ["[", "]", "task", ".", "a", "b-c", '"q.x"', "'s'", " ", "\t", "\n", "\r\n", "#", "=",
              "x = 1", "\u3000", "\xa0", "\x1f", "é", "[[", "]]", "\\", "  [task.b]", "[task.a]",
              "[ ]", "[]", '""', "env", "cmd"]
    rnd = random.Random(17)
    return ["".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 25))) for _ in range(count)]


def test_header_and_key_lines_are_found_as_the_patterns_find_them():
    for text in _pieces_texts(3000):
        lines = farmfile._Lines(text)
        if lines.brackets is None:
            continue  # an odd line break: numbered by splitlines, never streamed
        assert lines.brackets == _reference_brackets(text), repr(text)
        for number, line in enumerate(text.split("\n"), 1):
            line = line[:-1] if line.endswith("\r") else line
            assert (farmfile._header_path(line) is not None) == bool(_REF_HEADER.match(line)), repr(line)
            m = _REF_KEY.match(line)
            assert farmfile._key_name(line) == (next(g for g in m.groups() if g is not None) if m else None), repr(line)


def test_a_header_without_a_key_is_invalid_toml_not_a_crash(tmp_path):
    assert error(tmp_path, "[ ]") == "Farmfile:1: invalid TOML: Invalid initial character for a key part"


def test_a_task_name_may_not_end_in_a_line_break(tmp_path):
    msg = error(tmp_path, '[task."a\\n"]', 'cmd = "true"')
    assert msg == "Farmfile:1: task name 'a\\n' may only use letters, digits, '_', '.' and '-'"
    msg = error(tmp_path, '[task.ok]', 'cmd = "true"', '[task."b\\u0041 c"]', 'cmd = "true"')
    assert msg == "Farmfile:3: task name 'bA c' may only use letters, digits, '_', '.' and '-'"
    assert farmfile.is_name("a.b-c_1") and not farmfile.is_name(".a") and not farmfile.is_name("-a")
    assert not farmfile.is_name("") and not farmfile.is_name("é") and not farmfile.is_name("a b")


# -- names farmer quotes stand bare in commands (N9) -----------------------------------------


def _quoting(tmp_path, key: str, value: str, foreach: str = '"src/{stem}.c"', *more: str):
    """A Farmfile whose line 6 is `key = value` in task 'c' (a foreach over files)."""
    return ('[vars]', 'title = "two words"', '[task.c]', f'foreach = {foreach}',
            'outputs = ["out/{stem}.o"]' if "stem" in foreach else 'outputs = ["out/x"]',
            f'{key} = {value}', *more)


@pytest.mark.parametrize("value, name, where", [
    ('''"cat 'src/{stem}.c' > 'out/{stem}.o'"''', "{stem}", "quotes ('...')"),
    ('''"cat \\"src/{stem}.c\\" > {outputs}"''', "{stem}", 'quotes ("...")'),
    ('''"cat {inputs} > {outputs} && echo 'made {outputs}'"''', "{outputs}", "quotes ('...')"),
    ('''"cat src/{stem}.c > '{outputs[0]}'"''', "{outputs[0]}", "quotes ('...')"),
    ('''"echo 'a'\\"{inputs[1:]}\\" > {outputs}"''', "{inputs[1:]}", 'quotes ("...")'),
    ('''"echo 'mixed \\"{stem}\\"' > {outputs}"''', "{stem}", "quotes ('...')"),
    ('''"echo \\"it's {stem}\\" > {outputs}"''', "{stem}", 'quotes ("...")'),
    ('''"echo $'{stem}' > {outputs}"''', "{stem}", "quotes ($'...')"),
    ('''"echo {depfile} '{depfile}' > {outputs}"''', "{depfile}", "quotes ('...')"),
    ('''"echo \\\\{stem} > {outputs}"''', "{stem}", "right after a backslash"),
    ('''"echo ${stem} > {outputs}"''', "{stem}", "right after '$'"),
    ('''"echo `basename {stem}` > {outputs}"''', "{stem}", "inside `...`"),
    ('''"echo $(( {stem} + 1 )) > {outputs}"''', "{stem}", "inside $((...))"),
    ('''"""cat > {outputs} <<EOF\nfrom {stem}\nEOF"""''', "{stem}", "inside a here-document"),
])
def test_a_quoted_name_inside_quotes_in_cmd_is_refused(tmp_path, value, name, where):
    msg = error(tmp_path, *_quoting(tmp_path, "cmd", value))
    assert at_line(msg, 6), msg
    assert msg.startswith(f"Farmfile:6: task 'c': {name} ") and f" {where} in cmd; " in msg, msg
    assert "farmer quotes it" in msg


def test_the_quoting_error_words_the_fix(tmp_path):
    msg = error(tmp_path, *_quoting(tmp_path, "cmd", '''"cat 'src/{stem}.c' > {outputs}"'''))
    assert msg == "Farmfile:6: task 'c': {stem} inside quotes ('...') in cmd; write it bare, farmer quotes it"
    msg = error(tmp_path, *_quoting(tmp_path, "cmd", '"echo ${stem} > {outputs}"'))
    assert msg.endswith("write it bare, farmer quotes it (for the shell's variable write ${{stem}})")


@pytest.mark.parametrize("value", [
    '"cat src/{stem}.c > {outputs}"',
    '''"printf '%s\\\\n' {stem} > {outputs}"''',  # 'literal' text next to a bare name
    '''"echo 'a'{stem}'b' \\"c\\"{stem}\\"d\\" > {outputs}"''',
    '''"echo it\\\\'s {stem} \\\\\\"{stem}\\\\\\" > {outputs}"''',  # escaped quotes are no quotes
    '''"echo 'it'\\"'\\"'s' {stem} > {outputs}"''',
    '''"echo '{title}' \\"{title}\\" {stem} > {outputs}"''',  # vars are the author's own: not quoted
    '''"awk '{{print}}' src/{stem}.c > {outputs}"''',  # literal braces
    '''"echo \\"$(cat {inputs})\\" {stem} > {outputs}"''',  # $(...) is a command of its own
    '''"echo $$ {stem} > {outputs} # it's {stem}"''',  # a comment
    '''"echo '{nosuch}' > {outputs}"''',  # no name farmer quotes (unknown: an error when rendered)
])
def test_bare_names_and_quoted_text_are_fine(tmp_path, value):
    assert load(tmp_path, *_quoting(tmp_path, "cmd", value)).tasks["c"].cmd is not None


def test_a_var_that_opens_a_quote_counts(tmp_path):
    lines = _quoting(tmp_path, "cmd", '"echo {q}{stem}{q} > {outputs}"', '"src/{stem}.c"')
    msg = error(tmp_path, *lines[:2], "q = \"'\"", *lines[2:])
    assert "{stem} inside quotes ('...') in cmd" in msg, msg


def test_a_foreach_table_value_farmer_leaves_as_it_is_may_stand_in_quotes(tmp_path):
    """The author wrote the values: one that needs no quotes goes in as written, so it may
    stand inside quotes (python -c code that names it, for one); one that farmer quotes may not."""
    cmd = '''"echo '{n}' \\"{n}\\" > out/x"'''
    assert load(tmp_path, *_quoting(tmp_path, "cmd", cmd, '{n = ["1", "a-b.c"]}')).tasks["c"]
    python = '''"-c 'open(\\"w{n}.txt\\", \\"w\\").write(\\"{n}\\")'"'''
    assert load(tmp_path, *_quoting(tmp_path, "python", python, '{n = ["1", "2"]}')).tasks["c"]
    for values in ('["1", "a b"]', '["1", ""]', '["$(touch x)"]'):
        msg = error(tmp_path, *_quoting(tmp_path, "cmd", cmd, f'{{n = {values}}}'))
        assert msg.startswith("Farmfile:6: task 'c': {n} inside quotes ('...') in cmd"), msg


@pytest.mark.parametrize("value, where", [
    ('''"-c 'print(\\"{stem}\\")' {outputs}"''', "quotes ('...')"),
    ('''"tool.py \\"{stem}\\" {outputs}"''', 'quotes ("...")'),
    ('''"tool.py \\\\{stem} {outputs}"''', "right after a backslash"),
])
def test_a_quoted_name_inside_quotes_in_a_python_line_is_refused(tmp_path, value, where):
    """A python line is split as the shell splits (shlex): the same quotes, no shell."""
    msg = error(tmp_path, *_quoting(tmp_path, "python", value))
    assert msg.startswith(f"Farmfile:6: task 'c': {{stem}} {'inside ' if 'quotes' in where else ''}{where}"), msg
    assert " in python; " in msg


@pytest.mark.parametrize("value", [
    '"tool.py {stem} {outputs}"',
    '''"-c 'import sys; print(sys.argv[1])' {stem} {outputs}"''',
    '"tool.py ${stem} `{stem}` {outputs} # {stem}"',  # no shell: '$', backquotes, '#' are characters
])
def test_bare_names_in_a_python_line_are_fine(tmp_path, value):
    assert load(tmp_path, *_quoting(tmp_path, "python", value)).tasks["c"].python is not None


def test_the_quoting_check_is_on_the_streamed_path_too(tmp_path):
    """A Farmfile large enough to be streamed (tomlparse.STREAM_FROM) is checked the same."""
    from farmer.manifest import tomlparse

    filler = [f'[task.f{i}]\noutputs = ["f/{i}"]\ncmd = "touch f/{i}"' for i in range(
        tomlparse.STREAM_FROM // 40 + 1)]
    msg = error(tmp_path, *filler, '[task.c]', 'foreach = "src/{stem}.c"', 'outputs = ["out/{stem}"]',
                '''cmd = "cat 'src/{stem}.c' > {outputs}"''')
    assert "task 'c': {stem} inside quotes ('...') in cmd" in msg and at_line(msg, 3 * len(filler) + 4), msg
