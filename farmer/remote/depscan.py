"""A compile's headers before it ever ran, for remote execution: the preprocessor's dependency
scan (what recc does).

A computation with a depfile reads files no manifest lists (its headers); a worker has only what
it is sent. Once the computation ran here, its depfile says what to send. Before, for a plain
C/C++ compile (one `cc ... -c SRC` command, no shell expansion nor redirection), the same
command with its output options (`-o`, `-MD`, `-MF`...) replaced by `-M` prints the same list
the compile's depfile will hold: the same preprocessor, the same flags, the same working
directory. Those files are sent; the result's own depfile is still checked against what was
sent (farmer/remote/executor.py), so a scan that missed a file costs a local run, never a wrong
output.
"""

from __future__ import annotations

import os
import subprocess

from farmer.record import depfile as depfiles

SCAN_TIMEOUT_S = 60.0
_DROPPED = {"-MD", "-MMD", "-MP", "-M", "-MM", "-MG"}  # options that write a depfile or change what -M lists
_DROPPED_WITH_VALUE = ("-MF", "-MT", "-MQ", "-o")  # ... and those taking the next word, or glued
_NOT_LITERAL = set("$`*?[~{\\")  # the shell would expand these: the words are not the argv


def scan_argv(command: str) -> list[str] | None:
    """The argv of the dependency scan of a compile command; None for a command that is not
    one plain compile."""
    from farmer.files import shellwords
    from farmer.graph.basedir import compiler_name

    if any(c in _NOT_LITERAL for c in command):
        return None
    tokens = list(shellwords.tokens(command))
    if not tokens or any(is_operator for _, is_operator in tokens):
        return None
    words = [t for t, _ in tokens]
    if not compiler_name(words[0].rsplit("/", 1)[-1]) or "-c" not in words or "-E" in words:
        return None
    argv = [words[0]]
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
        elif word in _DROPPED_WITH_VALUE:
            skip = True
        elif word in _DROPPED or word.startswith(_DROPPED_WITH_VALUE):
            continue
        else:
            argv.append(word)
    return [*argv, "-M"]


def scan(command: str, env: dict[str, str], declared: list[str], outputs: list[str]) -> list[str] | None:
    """The files the compile will read beyond `declared` (normalised as the recorder normalises a
    depfile's), from a scan run here in the working directory; None when it cannot be scanned
    (not a plain compile, the scan failed or timed out)."""
    argv = scan_argv(command)
    if argv is None:
        return None
    try:
        cp = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, stdin=subprocess.DEVNULL,
                            timeout=SCAN_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if cp.returncode != 0:
        return None  # a compile error: the local run says it
    try:
        listed = depfiles.parse(cp.stdout.decode("utf-8", "surrogateescape"))
    except depfiles.DepfileError:
        return None
    known = set(declared) | set(outputs)
    found: list[str] = []
    for p in listed:
        p = os.path.normpath(p)
        if p not in known:
            known.add(p)
            found.append(p)
    return found
