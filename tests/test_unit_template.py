"""Unit tests for farmer/manifest/template.py: `{name}` substitution (SPEC §1 "Substitution")."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from farmer.manifest import template
from farmer.manifest.template import Ref, TemplateError


def render(text, wildcards=None, files=None, variables=None, quote=False):
    return template.render(text, wildcards or {}, files or {}, variables or {}, quote)


def test_plain_text_unchanged():
    assert render("gcc -c a.c") == "gcc -c a.c"


def test_wildcard_and_var():
    assert render("{cc} -c src/{stem}.c", {"stem": "main"}, variables={"cc": "gcc"}) == "gcc -c src/main.c"


def test_files_joined_with_spaces():
    files = {"inputs": ["a.c", "b.c"], "outputs": ["app"], "depfile": ["app.d"]}
    assert render("cc {inputs} -o {outputs} -MF {depfile}", files=files) == "cc a.c b.c -o app -MF app.d"


def test_indexed_files():
    files = {"inputs": ["a.c", "b.h", "c.h"], "outputs": ["x", "y"]}
    assert render("{inputs[0]} {inputs[2]} {outputs[1]}", files=files) == "a.c c.h y"


def test_double_braces_are_literal():
    assert render("awk '{{print $1}}' {x}", {"x": "f"}) == "awk '{print $1}' f"
    assert render("{{x}}", {"x": "no"}) == "{x}"
    assert render("{{{x}}}", {"x": "v"}) == "{v}"


def test_only_braces():
    assert render("{{") == "{"
    assert render("}}") == "}"


def test_lookup_order_wildcard_before_vars():
    assert render("{cc}", {"cc": "wild"}, variables={"cc": "var"}) == "wild"


def test_lookup_order_files_before_vars():
    assert render("{inputs}", files={"inputs": ["f.c"]}, variables={"inputs": "var"}) == "f.c"


def test_lookup_order_wildcard_before_files():
    # A wildcard with a file key's name cannot be declared, but render's order is still
    # wildcards first for an unindexed name.
    assert render("{outputs}", {"outputs": "w"}, files={"outputs": ["o"]}) == "w"


def test_var_used_when_no_wildcard_or_file():
    assert render("{opt}", {"stem": "a"}, {"inputs": ["x"]}, {"opt": "-O2"}) == "-O2"


def test_quote_file_lists_and_wildcards_not_vars():
    files = {"inputs": ["my file.c", "it's.c", "$HOME.c", "plain.c"], "outputs": ["out dir/a b"]}
    got = render("cc {cflags} {inputs} -o {outputs} # {stem}", {"stem": "a b $X"}, files,
                 {"cflags": "-O2 -Wall"}, quote=True)
    quoted_inputs = " ".join(shlex.quote(p) for p in files["inputs"])
    assert got == f"cc -O2 -Wall {quoted_inputs} -o 'out dir/a b' # 'a b $X'"
    # Plain, safe paths stay unquoted.
    assert "plain.c" in got and "'plain.c'" not in got


def test_quoted_paths_survive_the_shell():
    files = {"inputs": ["a b.txt", "it's", "$HOME", "back`tick`", 'dq"x']}
    cmd = render("printf '%s\\n' {inputs}", files=files, quote=True)
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == files["inputs"]


def test_indexed_file_is_quoted_too():
    files = {"inputs": ["a b.c", "c.c"]}
    assert render("{inputs[0]}", files=files, quote=True) == "'a b.c'"


def test_no_quoting_without_quote():
    files = {"inputs": ["a b.c", "$x"]}
    assert render("{inputs}", files=files, quote=False) == "a b.c $x"


def test_unknown_name_is_an_error():
    with pytest.raises(TemplateError, match=r"\{nope\}"):
        render("echo {nope}", {"stem": "a"}, {"inputs": []}, {"cc": "gcc"})


def test_index_out_of_range():
    with pytest.raises(TemplateError) as info:
        render("{inputs[2]}", files={"inputs": ["a", "b"]})
    assert "inputs[2]" in str(info.value) and "2" in str(info.value)


def test_file_key_not_available_here():
    with pytest.raises(TemplateError, match="outputs"):
        render("{outputs}", files={"inputs": ["a"]})


def test_indexed_var_is_not_a_var():
    with pytest.raises(TemplateError):
        render("{cc[0]}", variables={"cc": "gcc"})


@pytest.mark.parametrize("text", ["{", "}", "a {b", "a } b", "{ x }", "{1x}"])
def test_unbalanced_or_malformed_braces(text):
    with pytest.raises(TemplateError):
        template.parse(text)


def test_parse_structure():
    assert template.parse("a{x}b{inputs[1]}{{") == ("a", Ref("x", None), "b", Ref("inputs", 1), "{")


def test_names():
    assert template.names("{cc} {inputs[0]} {{lit}} {stem}/{stem}") == {"cc", "inputs", "stem"}


HOSTILE = ["a;touch PWNED;b", "$(touch PWNED)", "`touch PWNED`", "x&touch PWNED", "x|touch PWNED",
           "it's", "a b", "-rf"]


@pytest.mark.parametrize("name", HOSTILE)
def test_wildcard_values_stay_names_in_the_shell(tmp_path, name):
    """SPEC §1: wildcard values come from file names; in a cmd they are quoted, so the shell
    sees one word, never a command."""
    cmd = render("printf '%s\\n' src/{stem}.c {stem}", {"stem": name}, quote=True)
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout
    assert out.splitlines() == [f"src/{name}.c", name]
    assert not (tmp_path / "PWNED").exists()


def test_wildcard_values_are_not_quoted_outside_commands():
    assert render("src/{stem}.c", {"stem": "a b"}) == "src/a b.c"


def test_negative_index_and_slices():
    files = {"inputs": ["a.c", "b c.h", "c.h"]}
    assert render("{inputs[-1]}", files=files) == "c.h"
    assert render("{inputs[1:]}", files=files, quote=True) == "'b c.h' c.h"
    assert render("{inputs[:-1]}", files=files) == "a.c b c.h"
    assert render("{inputs[5:]}", files=files) == ""
    with pytest.raises(TemplateError, match=r"\{inputs\[-4\]\} is out of range"):
        render("{inputs[-4]}", files=files)


@pytest.mark.parametrize("text, words", [
    ("awk '{print $1}' x", ["'{print $1}'", "not a {name}", "'{{print $1}}'"]),
    ("echo {inputs[x]}", ["{inputs[x]}", "[0], [-1] or [1:]"]),
    ("echo {", ["unbalanced '{'", "write {{"]),
    ("echo }", ["unbalanced '}'", "write }}"]),
])
def test_brace_errors_say_what_and_the_fix(text, words):
    with pytest.raises(TemplateError) as e:
        template.parse(text)
    for w in words:
        assert w in str(e.value)


def test_shell_variable_gets_the_doubled_braces_hint():
    with pytest.raises(TemplateError) as e:
        render("for f in *; do echo ${f}; done")
    assert "${{f}}" in str(e.value)


def test_shell_quote_is_shlex_quote():
    words = ["", "a", "src/a.c", "a b", "it's", "$HOME", "é", "a\nb", "-x", "@%+=:,./-_", "a*", "~", "'"]
    for word in words:
        assert template.shell_quote(word) == shlex.quote(word), repr(word)
    for pair in ([w, v] for w in words for v in words):
        assert template.quote_join(pair) == " ".join(map(shlex.quote, pair)), pair
