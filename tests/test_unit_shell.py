"""Commands run without /bin/sh only when the shell would do nothing but split them."""

from __future__ import annotations

import subprocess

import pytest

from farmer.run.executors.shell import Direct, direct


@pytest.mark.parametrize("cmd, argv, stdout, append", [
    ("cat a b > out", ["cat", "a", "b"], "out", False),
    ("cat a >> log", ["cat", "a"], "log", True),
    ("cat a >out", ["cat", "a"], "out", False),
    ("gcc -DX=1 -c 'a b.c' -o x.o", ["gcc", "-DX=1", "-c", "a b.c", "-o", "x.o"], None, False),
    ('cp "a b" c', ["cp", "a b", "c"], None, False),
    ("cp '' x", ["cp", "", "x"], None, False),
    ("tool 'it''s' done", ["tool", "its", "done"], None, False),
    ("cat  a   b  >  out ", ["cat", "a", "b"], "out", False),
])
def test_plain_commands_are_split_as_the_shell_would(cmd, argv, stdout, append, tmp_path):
    assert direct(cmd) == Direct(argv, stdout, append)
    # The shell agrees on the words (printf is run by the shell here, on purpose).
    words = [w for w in argv]
    shown = subprocess.run(["/bin/sh", "-c", "printf '%s\\n' " + cmd.split(" ", 1)[1].split(">")[0]],
                           capture_output=True, text=True, cwd=tmp_path).stdout.splitlines()
    assert shown == words[1:]


@pytest.mark.parametrize("cmd", [
    "echo hi > x",          # a builtin that differs from /bin/echo
    "cat a | wc -l",        # a pipe
    "cat $x",               # an expansion
    'cat "$x"',             # an expansion inside double quotes
    "cat *.c",              # a glob
    "a=1 cmd",              # an assignment
    "cmd 2>err",            # a descriptor redirection
    "cmd > a > b",          # two redirections
    "cmd < in",             # input redirection
    "cd sub && make",       # a list
    "cmd 'unclosed",        # a syntax error: the shell reports it
    "sort a > b c",         # a redirection in the middle
    "cmd >&2",
    "~/bin/tool",
    "cat a>b",              # `>` glued to a word
    "cmd >>> x",
    "> x",                  # no program
    "cat a >",              # nowhere to go
    "",
    "true",
])
def test_anything_else_goes_through_the_shell(cmd):
    assert direct(cmd) is None
