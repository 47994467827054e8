"""`{name}` substitution in Farmfile strings (SPEC §1 "Substitution").

A template is parsed once into literal text and references; rendering looks each reference
up in the computation's wildcards, then its files (`inputs`, `outputs`, `depfile`, which
may be indexed or sliced as in Python), then `[vars]`. File lists and wildcard values (which
come from file names, which anyone who can add a file controls) are shell-quoted when
rendering a command line; vars are the Farmfile author's own and go in as they are.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable

FILE_KEYS = ("inputs", "outputs", "depfile")

# Start-up rule (docs/performance.md): `re` is imported only to parse a template that has
# braces; a Farmfile written out in full (as generators write them) has none.
_TOKEN = r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(?:\[(-?\d+)\]|\[(-?\d*):(-?\d*)\])?\}|[{}]"
# What a `{...}` that is not a reference looks like when it meant to be an indexed one.
_BAD_INDEX = r"\{[A-Za-z_][A-Za-z0-9_]*\[[^\]]*\]\}"


def _memoized(parse: Callable[[str], object]) -> Callable[[str], object]:
    """`functools.lru_cache(maxsize=None)` of a function of one string, without functools,
    which imports collections (see docs/performance.md#start-up-rules). As there, a call
    that raises caches nothing."""
    memo: dict[str, object] = {}

    def cached(text: str) -> object:
        try:
            return memo[text]
        except KeyError:
            value = memo[text] = parse(text)
            return value
    return cached


class TemplateError(Exception):
    """A template that cannot be parsed or names something unknown."""


Index = int | tuple[int | None, int | None]  # `[i]`, or `[start:stop]` as a pair


class Ref:
    """`{name}`, `{name[i]}` or `{name[start:stop]}`. A value: equal and hashed by its
    fields; never changed."""

    __slots__ = ("name", "index")

    def __init__(self, name: str, index: Index | None) -> None:
        self.name, self.index = name, index

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Ref:
            return NotImplemented
        return self.name == other.name and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.name, self.index))

    def __repr__(self) -> str:
        return f"Ref({self.name!r}, {self.index!r})"


Part = str | Ref


def parse(text: str) -> tuple[Part, ...]:
    """Split `text` into literal strings and references; `{{`/`}}` are literal braces."""
    if "{" not in text and "}" not in text:
        return (text,) if text else ()  # a path or command written out: no need to cache it
    return _parse(text)


@_memoized  # a Farmfile has few distinct templates; 100k expansions reuse them
def _parse(text: str) -> tuple[Part, ...]:
    import re

    parts: list[Part] = []
    literal: list[str] = []
    pos = 0
    for m in re.finditer(_TOKEN, text):
        literal.append(text[pos : m.start()])
        token = m.group(0)
        if token == "{{":
            literal.append("{")
        elif token == "}}":
            literal.append("}")
        elif m.group(1) is None:
            raise TemplateError(_brace_error(text, m.start()))
        else:
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(Ref(m.group(1), _index(m)))
        pos = m.end()
    literal.append(text[pos:])
    tail = "".join(literal)
    if tail:
        parts.append(tail)
    return tuple(parts)


def _index(m: re.Match) -> Index | None:
    if m.group(2) is not None:
        return int(m.group(2))
    if m.group(3) is None:
        return None
    return (int(m.group(3)) if m.group(3) else None, int(m.group(4)) if m.group(4) else None)


def _brace_error(text: str, at: int) -> str:
    """What is wrong with the lone brace at `at`, and the fix."""
    where = f"at column {at + 1} of {text!r}"
    if text[at] == "}":
        return f"unbalanced '}}' {where}; write }}}} for a literal brace"
    end = text.find("}", at)
    if end < 0:
        return f"unbalanced '{{' {where}; write {{{{ for a literal brace"
    block = text[at : end + 1]
    import re

    if re.fullmatch(_BAD_INDEX, block):
        return (f"{block} {where} has an index farmer does not take; write a number or a "
                "slice, like [0], [-1] or [1:]")
    return (f"{block!r} {where} is not a {{name}} to substitute; for literal braces (awk, a "
            f"shell block) double them: {'{' + block + '}'!r}")


def names(text: str) -> set[str]:
    """The names a template refers to."""
    return {p.name for p in parse(text) if isinstance(p, Ref)}


@_memoized
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
    parts = parse(text)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]  # no reference (a path written out): nothing to do, nothing to cache
    fast = _format_string(text)
    if fast is not None and fast[1] <= wildcards.keys():
        # Every name is a wildcard: C does the work.
        return fast[0].format_map({k: shell_quote(wildcards[k]) for k in fast[1]} if quote else wildcards)
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        name, index = part.name, part.index
        if index is None and name in wildcards:
            out.append(shell_quote(wildcards[name]) if quote else wildcards[name])
        elif name in files:
            values = files[name]
            if isinstance(index, tuple):
                values = values[index[0] : index[1]]
            elif index is not None:
                if not -len(values) <= index < len(values):
                    raise TemplateError(
                        f"{{{name}[{index}]}} is out of range: there are {len(values)} {name}"
                    )
                values = [values[index]]
            out.append(" ".join(shell_quote(v) for v in values) if quote else " ".join(values))
        elif index is None and name in variables:
            out.append(variables[name])
        elif name in FILE_KEYS:
            raise TemplateError(f"{{{name}}} cannot be used here")
        else:
            raise TemplateError(_unknown(text, name, index))
    return "".join(out)


def _unknown(text: str, name: str, index: Index | None) -> str:
    if index is not None:
        return f"{{{name}[...]}}: only inputs, outputs and depfile can be indexed"
    if "${" + name + "}" in text:
        return (f"unknown name {{{name}}}; for the shell's ${{{name}}} write ${{{{{name}}}}} "
                "(doubled braces are literal)")
    return (f"unknown name {{{name}}}: not a wildcard of this task, nor inputs, outputs or "
            f"depfile, nor in [vars]; define it under [vars] or write {{{{{name}}}}} for literal braces")


# -- compiled templates ---------------------------------------------------------------------
# A foreach task renders the same few templates once per computation, 100k times for a big
# project. `compile` turns a template into one generated Python function per task, with the
# lookup order of `render` decided once: wildcards become dict lookups, [vars] are inlined as
# text, file lists become joins. Anything `render` would reject (an unknown name, {outputs}
# where it is not available) is not compiled, and an index past the end raises IndexError:
# in both cases the caller renders with `render`, which gives the error its words.

# What shlex.quote leaves as it is: a string of only these characters. (Its test is a
# pattern; this one is str.translate's, and imports neither shlex nor re.)
_SAFE = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-"


def shell_safe(text: str, also: bytes = b"") -> bool:
    """Whether shlex.quote would leave every character of `text` as it is (`also`: more
    characters taken as safe)."""
    return text.isascii() and not text.encode("ascii").translate(None, _SAFE + also)


def shell_quote(text: str) -> str:
    """shlex.quote(text): the text as one shell word."""
    if not text:
        return "''"
    if shell_safe(text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def quote_join(paths: list[str]) -> str:
    """`" ".join(shlex.quote(p) for p in paths)`, checking the whole list at once (the space
    is the separator of the joined list, checked apart)."""
    joined = " ".join(paths)
    if shell_safe(joined, b" ") and joined.count(" ") == len(paths) - 1 and "" not in paths:
        return joined
    return " ".join(shell_quote(p) for p in paths)


def compile_list(texts: list[str], wildcards: frozenset[str], files: tuple[str, ...],
                 variables: dict[str, str], quote: bool):
    """One function `(wildcards, inputs, outputs, depfile) -> [rendered text, ...]` for
    `texts`, equal to `[render(t, ...) for t in texts]` with `files` holding the keys in
    `files`, or None when some text needs `render` (see above). `wildcards` is the set of
    names every computation of the task has."""
    items = []
    for text in texts:
        expr = _expression(text, wildcards, files, variables, quote)
        if expr is None:
            return None
        items.append(expr)
    namespace = {"_quote": shell_quote, "_quote_join": quote_join, "_join": " ".join}
    # eval of code made only from repr()s of literals and of names checked above
    return eval(f"lambda w, inputs, outputs, depfile: [{', '.join(items)}]", namespace)  # noqa: S307


_ARGS = {"inputs": "inputs", "outputs": "outputs", "depfile": "depfile"}


def _expression(text: str, wildcards: frozenset[str], files: tuple[str, ...],
                variables: dict[str, str], quote: bool) -> str | None:
    pieces: list[str] = []
    literal: list[str] = []
    for part in parse(text):
        if isinstance(part, str):
            literal.append(part)
            continue
        name, index = part.name, part.index
        if index is None and name in wildcards:
            code = f"_quote(w[{name!r}])" if quote else f"w[{name!r}]"
        elif name in files:
            if isinstance(index, tuple):
                bounds = ":".join("" if i is None else str(i) for i in index)
                code = f"{'_quote_join' if quote else '_join'}({_ARGS[name]}[{bounds}])"
            elif index is not None:
                code = f"{'_quote' if quote else ''}({_ARGS[name]}[{index}])"
            else:
                code = f"{'_quote_join' if quote else '_join'}({_ARGS[name]})"
        elif index is None and name in variables:
            literal.append(variables[name])
            continue
        else:
            return None
        if literal:
            pieces.append(repr("".join(literal)))
            literal = []
        pieces.append(code)
    if literal or not pieces:
        pieces.append(repr("".join(literal)))
    return " + ".join(pieces)
