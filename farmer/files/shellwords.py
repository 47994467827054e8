"""A shell command line cut into words and operators, as /bin/sh reads it before it expands
anything: what the cache key looks up on PATH (farmer/record/cache/key.py), what a base
directory rewrites (farmer/graph/basedir.py) and what a dependency scan runs
(farmer/remote/depscan.py) read commands with.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")", "\n")
REDIRECTS = (">>", "<<", ">&", "<&", ">|", "<>", ">", "<")


def tokens(command: str) -> Iterator[tuple[str, bool]]:
    """(token, is_operator) pairs of a shell command line, quotes removed from words."""
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if c in " \t":
            i += 1
            continue
        if c == "#":  # a comment runs to the end of the line
            while i < n and command[i] != "\n":
                i += 1
            continue
        op = next((o for o in OPERATORS + REDIRECTS if command.startswith(o, i)), None)
        if op is not None:
            yield op, True
            i += len(op)
            continue
        word: list[str] = []
        while i < n and command[i] not in " \t\n;&|()<>":
            c = command[i]
            if c == "\\" and i + 1 < n:
                word.append(command[i + 1])
                i += 2
            elif c in "'\"":
                end = command.find(c, i + 1)
                end = n if end < 0 else end
                word.append(command[i + 1:end])
                i = end + 1
            else:
                word.append(c)
                i += 1
        if word and word[-1].isdigit() and len(word) == 1 and i < n and command[i] in "<>":
            continue  # `2>file`: the fd number of a redirection
        yield "".join(word), False
