"""farmer/manifest/shellscan.py: where /bin/sh (or shlex.split, for a python line) reads each
placeholder of a command. `@` marks a placeholder in these tests."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from farmer.manifest.shellscan import (
    ANSI,
    ARITHMETIC,
    BACKSLASH,
    BACKTICK,
    BARE,
    DOLLAR,
    DOUBLE,
    HEREDOC,
    SINGLE,
    contexts,
)
from farmer.manifest.template import shell_quote

SHELL_CASES = [
    # bare, next to quoted text of the author's own
    ("cat @ > @", [BARE, BARE]),
    ("echo 'lit' @ 'lit'", [BARE]),
    ("echo 'a'@'b' \"c\"@\"d\"", [BARE, BARE]),
    ("printf '%s\\n' @ > out/@.txt", [BARE, BARE]),
    ("gcc -DNAME='\"x\"' -c @", [BARE]),
    # inside quotes
    ("cat 'src/@.c' > 'out/@.o'", [SINGLE, SINGLE]),
    ('cat "src/@.c"', [DOUBLE]),
    ("echo 'it'\"'\"'s @'", [SINGLE]),
    ("echo '@\" @'\" @\" @", [SINGLE, SINGLE, DOUBLE, BARE]),
    ("echo 'never closed @", [SINGLE]),
    ('echo "never closed @', [DOUBLE]),
    # escapes: a backslash outside quotes, in "...", none in '...'
    ("echo it\\'s @", [BARE]),
    ("echo \\\"@\\\"", [BARE]),
    ('echo "a\\"b" @', [BARE]),
    ('echo "a\\\\" @', [BARE]),
    ('echo "a\\"@"', [DOUBLE]),
    ("echo 'a\\' @", [BARE]),
    ("echo 'a\\\\' @", [BARE]),
    ("echo \\@", [BACKSLASH]),
    ("echo \\\\@", [BARE]),
    ("echo a\\\n@", [BARE]),
    # '$': a placeholder after one; what it starts
    ("echo $@", [DOLLAR]),
    ("echo $$@", [BARE]),
    ('echo "$@"', [DOUBLE]),
    ("echo $'@'", [ANSI]),
    ("echo $'a\\'@'", [ANSI]),
    ("echo $'a\\'b' @", [SINGLE]),  # dash: $ 'a\' b' @' ...: quoted there
    ("echo $'a\\\\' @", [BARE]),  # both shells: closed before @
    ('echo "$\'" @', [BARE]),  # no $'...' inside "..."
    ("echo $(cat @)", [BARE]),
    ('echo "$(cat @)"', [BARE]),
    ('echo "$(cat "@")"', [DOUBLE]),
    ('echo "$(echo \')\' @)" @', [BARE, BARE]),
    ('x="$(cat @ | (sort))" && echo "$x" @', [BARE, BARE]),
    ('echo "$(echo $(cat @))"', [BARE]),
    ('echo "$(case a in a) echo @;; esac)"', [DOUBLE]),  # an early ')': refused, never missed
    ("echo $((1 + @)) @", [ARITHMETIC, BARE]),
    ("echo $(( $(cat @) + 1 ))", [BARE]),
    ("((n = @)); echo @", [ARITHMETIC, BARE]),
    ("echo $[@ + 1] @", [ARITHMETIC, BARE]),
    ('echo "$((@))"', [ARITHMETIC]),
    # backquotes end at the first unescaped backquote: a name with one would end them
    ("echo `cat @`", [BACKTICK]),
    ('echo "`cat @`" @', [BACKTICK, BARE]),
    ("echo \\`@", [BARE]),
    # comments: quotes in them are no quotes; `#` inside a word is no comment
    ("echo a # it's @\necho @", [BARE, BARE]),
    ("# don't\n'@' @", [SINGLE, BARE]),
    ("echo a#'@'", [SINGLE]),
    ("echo a\\ #'@'", [SINGLE]),
    ("echo $#'@'", [SINGLE]),
    ("echo @#'x' @", [BARE, BARE]),
    ("echo $(# )\necho '@')", [SINGLE]),
    # here-documents: the body is read as in "..." (or as it is, with a quoted word)
    ("cat <<EOF\n@\nEOF\necho @", [HEREDOC, BARE]),
    ("cat <<'EOF'\n@\nEOF\necho @", [HEREDOC, BARE]),
    ("cat <<\"E\"OF > @\nx @\nEOF\necho @", [BARE, HEREDOC, BARE]),
    ("cat <<-EOF\n\t@\n\tEOF\necho @", [HEREDOC, BARE]),
    ("cat <<A <<B\n@\nA\n@\nB\n@", [HEREDOC, HEREDOC, BARE]),
    ("cat <<EOF\n@\nEOF2\n@", [HEREDOC, HEREDOC]),  # never ended: to the end
    ("cat <<@\nx\n", [HEREDOC]),
    ("cat <<<@", [BARE]),
    ("echo $((1 << 2)) @\n@", [BARE, BARE]),
    ("echo '<<EOF' @\n@", [BARE, BARE]),
]


@pytest.mark.parametrize("text, expected", SHELL_CASES)
def test_shell_contexts(text, expected):
    assert contexts(text, "@") == expected


PYTHON_CASES = [
    ("tool.py @ @", [BARE, BARE]),
    ("-c 'print(1)' @", [BARE]),
    ("-c 'print(@)' @", [SINGLE, BARE]),
    ("-c \"print('@')\" @", [DOUBLE, BARE]),
    ("a\\@", [BACKSLASH]),
    ("'a\\' @", [BARE]),  # no escapes in '...'
    ('"a\\"@"', [DOUBLE]),
    # no shell: '$', backquotes, comments, here-documents are plain characters
    ("$@ `@` #'x' @ <<EOF\n@", [BARE, BARE, BARE, BARE]),
]


@pytest.mark.parametrize("text, expected", PYTHON_CASES)
def test_python_line_contexts(text, expected):
    assert contexts(text, "@", shell=False) == expected


def test_every_placeholder_gets_one_answer():
    """However the scan ends (unclosed quotes, contexts nested deep), one answer each."""
    for text in ["'@" * 50, '"$(' * 3000 + "@", "$((" * 2000 + "@)", "`@" * 7, "<<E\n@" * 9]:
        assert len(contexts(text, "@")) == text.count("@")
        assert len(contexts(text, "@", shell=False)) == text.count("@")


# -- the answers hold in real shells -----------------------------------------------------------

HOSTILE = ["$(touch PWNED)", "`touch PWNED`", "';touch PWNED;'", "a'b\"c\\d$(touch PWNED)",
           "\"$(touch PWNED)\"", "$'\\'$(touch PWNED)", ")$(touch PWNED)", "x`;touch PWNED;`y",
           " ;touch PWNED;#", "x\\", "EOF", "a b"]
SHELLS = [s for s in ("/bin/sh", "/bin/dash", "/bin/bash") if os.path.exists(s)]
BARE_CASES = [t for t, found in SHELL_CASES if not any(found)]
REFUSED_CASES = ["cat 'src/@.c'", 'cat "src/@.c"', "echo `echo @`", "cat <<EOF\n@\nEOF", "echo $((@))",
                 "echo \\@"]

# Each command is read as `SHELL -c COMMAND` reads it (eval reads a string as a script does), in
# a subshell and a folder (1, 2...) of its own, all in one process a shell: a process each
# made hundreds of runs take seconds.
EACH = 'i=0; for c in "$@"; do i=$((i+1)); (cd "$i" && set -- && eval "$c") </dev/null >/dev/null 2>&1; done'


def run_each(shell: str, commands: list[str], where) -> list[bool]:
    """Whether each command, run by `shell` as above, made a file PWNED."""
    for i in range(1, len(commands) + 1):
        (where / str(i)).mkdir()
    subprocess.run([shell, "-c", EACH, "each", *commands], cwd=where, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    return [(where / str(i) / "PWNED").exists() for i in range(1, len(commands) + 1)]


@pytest.fixture(scope="module")
def runs_code(tmp_path_factory) -> dict[tuple[str, str], bool]:
    """(shell, command) -> whether the command, run by that shell, made a file PWNED: for every
    case below with every hostile name quoted into it as farmer renders it."""
    commands = [t.replace("@", shell_quote(name)) for t in BARE_CASES + REFUSED_CASES for name in HOSTILE]
    found = {}
    for shell in SHELLS:
        pwned = run_each(shell, commands, tmp_path_factory.mktemp("shell"))
        found.update(((shell, c), p) for c, p in zip(commands, pwned))
    return found


@pytest.mark.parametrize("text", BARE_CASES)
def test_bare_placeholders_run_no_name_as_code(runs_code, text):
    """Each command found all bare, each hostile name quoted into it as farmer renders it:
    dash and bash run none of the names."""
    for name in HOSTILE:
        command = text.replace("@", shell_quote(name))
        for shell in SHELLS:
            assert not runs_code[shell, command], (shell, command)


@pytest.mark.parametrize("text", REFUSED_CASES)
def test_what_is_refused_does_run_names(runs_code, text):
    """The refusals are real: in each of these places some name runs in some shell."""
    commands = [text.replace("@", shell_quote(name)) for name in HOSTILE]
    assert any(runs_code[shell, c] for c in commands for shell in SHELLS), text


def test_the_batch_reads_a_command_as_sh_c_does(tmp_path):
    """The batched runs above against `sh -c`, a process a command, for a few commands."""
    samples = {"touch PWNED": True, "echo $(touch PWNED)": True, "echo '$(touch PWNED)'": False,
               "cat <<EOF\n$(touch PWNED)\nEOF": True, "cat <<'EOF'\n$(touch PWNED)\nEOF": False,
               "exit 3; touch PWNED": False, "echo 'never closed; touch PWNED": False}
    for shell in SHELLS:
        where = tmp_path / shell.replace("/", "-")
        where.mkdir()
        batched = run_each(shell, list(samples), where)
        for (command, pwns), in_batch in zip(samples.items(), batched):
            alone = tmp_path / "alone"
            alone.mkdir()
            subprocess.run([shell, "-c", command], cwd=alone, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
            assert in_batch == (alone / "PWNED").exists() == pwns, (shell, command)
            shutil.rmtree(alone)


def test_bare_in_a_python_line_stays_one_argument():
    for name in HOSTILE:
        line = f"-c 'import sys' {shell_quote(name)} '{{x}}' \"y\"{shell_quote(name)}"
        assert shlex.split(line) == ["-c", "import sys", name, "{x}", "y" + name]
