"""A fake executor for whole builds run in-process (ninja's FakeCommandRunner).

`FakeRunner` is farmer's simulated clock that also does what a computation's command says,
for the few commands tests need: `cat`, `cp`, `touch`, `echo`, `mkdir -p`, `true`, `false`
and `exit N`, joined by `&&` or `;`, with `>` and `>>` redirections. Output not redirected
goes to the computation's log, as a real run's does. Anything else is an error in the test,
not a guess. The real scheduler, recorder, state and proof run around it.
"""

from __future__ import annotations

import os
import shlex

from farmer.executors.process import log_path
from farmer.executors.simulated import SimulatedExecutor


class CannotFake(AssertionError):
    pass


class FakeRunner(SimulatedExecutor):
    def __init__(self, root: str | os.PathLike, durations: dict[str, float] | None = None) -> None:
        super().__init__({})
        self.root = os.fspath(root)
        self.seconds = durations or {}  # by computation id; 0 s unless given
        self.ran: list[str] = []  # computation ids, in start order

    def start(self, comp) -> None:
        self.ran.append(comp.id)
        self.duration[comp.index] = self.seconds.get(comp.id, 0.0)
        logs = os.path.join(self.root, ".farmer", "logs")
        with open(log_path(logs, comp.id), "w") as log:
            code = _run(comp.action or "", log) if comp.kind == "cmd" else _cannot(comp.action)
        if code:
            self.exit_codes[comp.index] = code
        super().start(comp)


def _cannot(what: object) -> int:
    raise CannotFake(f"FakeRunner runs cmd tasks only, not {what!r}")


def _run(action: str, log) -> int:
    lexer = shlex.shlex(action, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    words = list(lexer)
    code, command, joiner = 0, [], None
    for word in words + [";"]:
        if word not in (";", "&&"):
            command.append(word)
            continue
        if command and (joiner != "&&" or code == 0):
            code = _one(command, log)
        command, joiner = [], word
    return code


def _one(words: list[str], log) -> int:
    out, mode = log, None
    if len(words) >= 2 and words[-2] in (">", ">>"):
        mode = "w" if words[-2] == ">" else "a"
        words, target = words[:-2], words[-1]
    name, args = words[0], words[1:]
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
        with open(args[0]) as src, open(args[1], "w") as dst:
            dst.write(src.read())
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
