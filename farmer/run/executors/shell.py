"""Commands that need no shell: run them without `/bin/sh`.

Most build commands are a program with arguments, perhaps with quoted paths and one output
redirection (`cat a b > out`). Starting `/bin/sh -c` for those costs a second exec per
computation for nothing. `direct()` recognises exactly such commands and returns the argv
and the redirection; anything the shell could treat differently (expansions, globs,
pipes, lists, assignments, builtins whose behaviour differs from the program of the same
name, ...) returns None, and the command runs through `/bin/sh -c` as the SPEC says.
"""

from __future__ import annotations

# Characters that mean something to the shell outside quotes (`>` is handled on its own).
_SPECIAL = set("$`\\|&;()<*?[]~#{}!\n\t\r")
# Neither quotes nor those: a command split at its spaces.
_UNQUOTED = _SPECIAL | {"'", '"'}
# Inside double quotes the shell still expands these.
_SPECIAL_IN_DOUBLE = set("$`\\!")
# Words that dash runs itself (or parses as syntax): never replaced by a program.
_SHELL_WORDS = {
    "echo", "printf", "test", "[", "true", "false", "pwd", "kill", "cd", "export", "exec",
    "exit", "eval", "set", "unset", "shift", "source", ".", ":", "alias", "unalias", "ulimit",
    "umask", "read", "trap", "wait", "times", "type", "command", "getopts", "hash", "local",
    "return", "break", "continue", "readonly", "if", "then", "else", "elif", "fi", "for",
    "while", "until", "do", "done", "case", "esac", "in", "function", "time", "fg", "bg",
    "jobs",
}


class Direct:
    __slots__ = ("argv", "stdout", "append")

    def __init__(self, argv: list[str], stdout: str | None, append: bool) -> None:
        self.argv = argv
        self.stdout = stdout  # `> PATH`: the file the command's standard output goes to
        self.append = append  # `>> PATH`

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Direct:
            return NotImplemented
        return (self.argv, self.stdout, self.append) == (other.argv, other.stdout, other.append)

    def __repr__(self) -> str:
        return f"Direct({self.argv!r}, {self.stdout!r}, {self.append!r})"


def _words(cmd: str) -> list[tuple[str, bool]] | None:
    """Split like the shell would, or None when the shell would do more than split.
    Each word comes with whether it was a bare `>` or `>>` operator."""
    if _UNQUOTED.isdisjoint(cmd):  # most commands: words between spaces, split in C
        words = []
        for w in cmd.split(" "):
            if ">" in w:
                if w != ">" and w != ">>":
                    return _scanned(cmd)  # `a>b`, `>out`: the scan below knows them
                words.append((w, True))
            elif w:
                words.append((w, False))
        return words
    return _scanned(cmd)


def _scanned(cmd: str) -> list[tuple[str, bool]] | None:
    """`_words`, character by character: quotes, and `>` glued to a word."""
    words: list[tuple[str, bool]] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(cmd)
    while i < n:
        c = cmd[i]
        if c == " ":
            if in_word:
                words.append(("".join(word), False))
                word, in_word = [], False
            i += 1
        elif c == "'":
            end = cmd.find("'", i + 1)
            if end < 0:
                return None
            word.append(cmd[i + 1:end])
            in_word = True
            i = end + 1
        elif c == '"':
            end = cmd.find('"', i + 1)
            if end < 0:
                return None
            inner = cmd[i + 1:end]
            if any(ch in _SPECIAL_IN_DOUBLE for ch in inner):
                return None
            word.append(inner)
            in_word = True
            i = end + 1
        elif c == ">":
            if in_word:  # `a>b` or `2>x`: a file descriptor number or glued operator
                return None
            op = ">>" if cmd.startswith(">>", i) else ">"
            if cmd.startswith(op + "&", i) or cmd.startswith(op + "|", i):
                return None
            words.append((op, True))
            i += len(op)
        elif c in _SPECIAL:
            return None
        else:
            word.append(c)
            in_word = True
            i += 1
    if in_word:
        words.append(("".join(word), False))
    return words


def direct(cmd: str) -> Direct | None:
    words = _words(cmd)
    if not words:
        return None
    stdout, append = None, False
    if len(words) >= 2 and words[-2][1] and not words[-1][1]:
        stdout, append = words[-1][0], words[-2][0] == ">>"
        words = words[:-2]
    if not words or any(is_op for _, is_op in words):
        return None  # a redirection anywhere but at the end
    argv = [w for w, _ in words]
    if argv[0] in _SHELL_WORDS or not argv[0] or "=" in argv[0]:  # `X=1 cmd` assigns
        return None
    return Direct(argv, stdout, append)
