"""`{name}` substitution in Farmfile strings (SPEC §1 "Substitution").

A template is parsed once into literal text and references; rendering looks each reference
up in the computation's wildcards, then its files (`inputs`, `outputs`, `depfile`, which
may be indexed), then `[vars]`. File lists are shell-quoted when rendering a command line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

FILE_KEYS = ("inputs", "outputs", "depfile")

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?\}|[{}]")


class TemplateError(Exception):
    """A template that cannot be parsed or names something unknown."""


@dataclass(slots=True, frozen=True)
class Ref:
    name: str
    index: int | None


Part = str | Ref


@lru_cache(maxsize=None)  # a Farmfile has few distinct templates; 100k expansions reuse them
def parse(text: str) -> tuple[Part, ...]:
    """Split `text` into literal strings and references; `{{`/`}}` are literal braces."""
    parts: list[Part] = []
    literal: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        literal.append(text[pos : m.start()])
        token = m.group(0)
        if token == "{{":
            literal.append("{")
        elif token == "}}":
            literal.append("}")
        elif m.group(1) is None:
            raise TemplateError(
                f"unbalanced {token!r} at column {m.start() + 1} of {text!r}; "
                "write {{ or }} for a literal brace"
            )
        else:
            if literal:
                parts.append("".join(literal))
                literal = []
            index = m.group(2)
            parts.append(Ref(m.group(1), int(index) if index is not None else None))
        pos = m.end()
    literal.append(text[pos:])
    tail = "".join(literal)
    if tail:
        parts.append(tail)
    return tuple(parts)


def names(text: str) -> set[str]:
    """The names a template refers to."""
    return {p.name for p in parse(text) if isinstance(p, Ref)}


@lru_cache(maxsize=None)
def _format_string(text: str) -> tuple[str, frozenset[str]] | None:
    """`text` as a str.format string, when it names no files (which may need quoting)."""
    parts = parse(text)
    if any(isinstance(p, Ref) and (p.index is not None or p.name in FILE_KEYS) for p in parts):
        return None
    fmt = "".join(p.replace("{", "{{").replace("}", "}}") if isinstance(p, str) else "{" + p.name + "}"
                  for p in parts)
    return fmt, frozenset(p.name for p in parts if isinstance(p, Ref))


def render(
    text: str,
    wildcards: dict[str, str],
    files: dict[str, list[str]],
    variables: dict[str, str],
    quote: bool,
) -> str:
    """Expand `text`. `files` holds only the file keys available where `text` is used."""
    fast = _format_string(text)
    if fast is not None and fast[1] <= wildcards.keys():
        return fast[0].format_map(wildcards)  # every name is a wildcard: C does the work
    parts = parse(text)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        name, index = part.name, part.index
        if index is None and name in wildcards:
            out.append(wildcards[name])
        elif name in files:
            values = files[name]
            if index is not None:
                if index >= len(values):
                    raise TemplateError(
                        f"{{{name}[{index}]}} is out of range: there are {len(values)} {name}"
                    )
                values = values[index : index + 1]
            out.append(" ".join(shlex.quote(v) for v in values) if quote else " ".join(values))
        elif index is None and name in variables:
            out.append(variables[name])
        elif name in FILE_KEYS:
            raise TemplateError(f"{{{name}}} cannot be used here")
        else:
            raise TemplateError(f"unknown name {{{name}}}")
    return "".join(out)
