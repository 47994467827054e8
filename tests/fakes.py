"""A fake executor for whole builds run in-process (ninja's FakeCommandRunner).

`FakeRunner` is farmer's simulated clock that also does what a computation's command says,
in this process for the few commands most tests need: `cat`, `cp`, `touch`, `echo`,
`mkdir -p`, `true`, `false` and `exit N`, with no other option, joined by `&&` or `;`, with
`>` and `>>` redirections of their stdout. Any other command line (pipes, `$VAR`, `echo -n`,
`2>`, `tr`, `grep`...) runs to its end in
`/bin/sh` at its start, one at a time, so its effects are those of a real run; `strict=True`
makes such a line an error instead. Output not redirected goes to the computation's log, as
a real run's does. The real scheduler, recorder, state and proof run around it; time is the
simulated clock's, so tests of concurrency, signals and timeouts stay on the real CLI.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

from farmer.run.executors.process import log_path, reads_path
from farmer.run.executors.simulated import SimulatedExecutor


class CannotFake(AssertionError):
    pass


class FakeRunner(SimulatedExecutor):
    def __init__(self, root: str | os.PathLike, durations: dict[str, float] | None = None,
                 strict: bool = False) -> None:
        super().__init__({})
        self.root = os.fspath(root)
        self.strict = strict
        self.seconds = durations or {}  # simulated seconds by computation id; 1 s unless given
        self.ran: list[str] = []  # computation ids, in start order

    def start(self, comp) -> None:
        self.ran.append(comp.id)
        self.duration[comp.index] = self.seconds.get(comp.id, 1.0)
        logs = os.path.join(self.root, ".farmer", "logs")
        with open(log_path(logs, comp.id), "w") as log:
            try:
                if comp.kind != "cmd":
                    raise CannotFake(f"FakeRunner fakes cmd tasks only, not {comp.action!r}")
                code = _run(comp.action or "", log)
            except CannotFake:
                if self.strict:
                    raise
                reads = reads_path(logs, comp.id) if comp.kind == "python" else None
                code = subprocess.run(comp.argv(reads), stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, env={**os.environ, **comp.env}).returncode
                code = code if code >= 0 else 128 - code
        if code:
            self.exit_codes[comp.index] = code
        super().start(comp)


_FAKED = {"cat", "echo", "cp", "touch", "mkdir", "true", "false", "exit"}


def _run(action: str, log) -> int:
    """Run a command line made only of what this module fakes (CannotFake, before doing
    anything, for one with anything else)."""
    if any(c in action for c in "$`|<*?~(){}\\"):
        raise CannotFake(f"FakeRunner does not expand {action!r}")
    if re.search(r"\d>|>&|&>", action):  # 2>, >&2, &>: redirections of another descriptor
        raise CannotFake(f"FakeRunner redirects stdout only, not in {action!r}")
    lexer = shlex.shlex(action, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    commands, command = [], []
    for word in list(lexer) + [";"]:
        if word in (";", "&&"):
            if command:
                if not _fakes(command):
                    raise CannotFake(f"FakeRunner cannot run {' '.join(command)!r}")
                commands.append((command, word))
            command = []
        else:
            command.append(word)
    code, joiner = 0, ";"
    for command, after in commands:
        if joiner != "&&" or code == 0:
            code = _one(command, log)
        joiner = after
    return code


def _fakes(words: list[str]) -> bool:
    """Whether `_one` does what the shell would with this command: a name it knows, with no
    option but `mkdir -p` and a `--` before the paths, and a redirection only at its end."""
    name, args = words[0], words[1:]
    if len(args) >= 2 and args[-2] in (">", ">>"):
        args = args[:-2]
    if name not in _FAKED or any(w and set(w) <= set(";&|<>") for w in args):  # `&`, `||`, a 2nd `>`
        return False
    if name == "mkdir":
        if args[:1] != ["-p"]:
            return False
        args = args[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    return name in ("exit", "true", "false") or not any(w.startswith("-") and w != "-" for w in args)


def _one(words: list[str], log) -> int:
    out, mode = log, None
    if len(words) >= 2 and words[-2] in (">", ">>"):
        mode = "w" if words[-2] == ">" else "a"
        words, target = words[:-2], words[-1]
    name, args = words[0], words[1:]
    if args[:1] == ["--"]:  # the end of options, before paths
        args = args[1:]
    text = None
    if name == "cat":
        parts = []
        for path in args:
            try:
                with open(path) as f:
                    parts.append(f.read())
            except FileNotFoundError:
                log.write(f"cat: {path}: No such file or directory\n")
                return 1
        text = "".join(parts)
    elif name == "echo":
        text = " ".join(args) + "\n"
    elif name == "cp":
        try:
            with open(args[0]) as src:
                text_copied = src.read()
        except FileNotFoundError:
            log.write(f"cp: cannot stat '{args[0]}': No such file or directory\n")
            return 1
        with open(args[1], "w") as dst:
            dst.write(text_copied)
    elif name == "touch":
        for path in args:
            with open(path, "a"):
                os.utime(path)
    elif name == "mkdir" and args[:1] == ["-p"]:
        for path in args[1:]:
            os.makedirs(path, exist_ok=True)
    elif name in ("true", "false", "exit"):
        return {"true": 0, "false": 1}.get(name) if name != "exit" else int(args[0] if args else 0)
    else:
        raise CannotFake(f"FakeRunner cannot run {' '.join(words)!r}")
    if text is not None:
        if mode is None:
            out.write(text)
        else:
            with open(target, mode) as f:
                f.write(text)
    elif mode is not None:
        open(target, mode).close()
    return 0
