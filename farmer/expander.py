"""A task's templates compiled once for all its computations, and checks that prove a whole
batch of rendered paths needs no per-path work.

A foreach task renders the same few templates for each of its computations (100k of them in
a big project). `TaskExpander` holds them compiled (template.compile_list); the traversal
falls back to template.render, path by path, wherever a compiled form is missing or a check
here fails, so errors keep their words and their order.
"""

from __future__ import annotations

import re

from farmer import template
from farmer.farmfile import Spec, TaskSpec

# Anything that makes traversal.normalize do more than return its argument, in paths joined
# and framed by "\n": `//`, `./` (so `../` too), a trailing `/` or `.`, an empty or absolute
# path. Substring tests run at C speed, where a regex alternation would not.
_NOT_NORMAL = ("//", "./", "/\n", ".\n", "\n\n", "\n/")
# Inputs also: an `@` reference or a glob character (also one that came from a wildcard).
_NOT_PLAIN = _NOT_NORMAL + ("\n@", "*", "?", "[")


def _clean(paths: list[str], substrings: tuple[str, ...]) -> bool:
    if not paths:
        return True
    joined = "\n" + "\n".join(paths) + "\n"
    # Not ASCII: a name's length in bytes is not its length in characters, so go the slow
    # way. In ASCII, what is not printable is a control character (a "\n" in a path too).
    return (joined.isascii() and "".join(paths).isprintable()
            and not any(s in joined for s in substrings)
            and max(map(len, paths)) < 256)  # no name of 256 bytes or more


def all_normal(paths: list[str]) -> bool:
    """True when traversal.normalize(p, ...) would return every p unchanged, without error.
    False when some p needs a look (which may still find it fine)."""
    return _clean(paths, _NOT_NORMAL)


def all_plain_inputs(paths: list[str]) -> bool:
    """True when every raw input is a plain path that is already normal: resolving it is
    the path itself (no `@` reference, no glob, nothing to normalize or refuse)."""
    return _clean(paths, _NOT_PLAIN)


_SHELL_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII).search  # as shlex.quote's test


def all_shell_safe(paths: list[str]) -> bool:
    """True when shlex.quote(p) is p for every p: a command line can take them as they are."""
    return "" not in paths and _SHELL_UNSAFE("/".join(paths)) is None


def wildcard_names(task: TaskSpec) -> frozenset[str]:
    """The wildcards every computation of `task` has."""
    foreach = task.foreach
    if foreach is None:
        return frozenset()
    if isinstance(foreach, dict):
        return frozenset(foreach)
    return frozenset(template.names(foreach))


class TaskExpander:
    """The templates of one task, each list compiled into one function
    `(wildcards, inputs, outputs, depfile) -> [text, ...]`, or None where template.render
    must be used (it then raises the error)."""

    __slots__ = ("inputs", "outputs", "depfile", "action", "action_unquoted", "env")

    def __init__(self, task: TaskSpec, spec: Spec) -> None:
        names = wildcard_names(task)
        variables = spec.vars
        files = ("inputs", "outputs")  # where {inputs} and {outputs} are known
        self.inputs = template.compile_list(task.inputs, names, (), variables, False)
        self.outputs = template.compile_list(task.outputs, names, (), variables, False)
        self.depfile = None
        if task.depfile is not None:
            self.depfile = template.compile_list([task.depfile], names, files, variables, False)
            files = ("inputs", "outputs", "depfile")
        text = task.cmd if task.cmd is not None else task.python
        self.action = self.action_unquoted = None
        if text is not None:
            self.action = template.compile_list([text], names, files, variables, True)
            # Only file lists are quoted: for computations whose paths all need no quotes,
            # this is the same text, without a quoting test per path.
            self.action_unquoted = template.compile_list([text], names, files, variables, False)
        self.env = template.compile_list(list(task.env.values()), names, files, variables, False)
