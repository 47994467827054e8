"""The ninja manifest lexer: tokens, `$`-escapes and evaluated strings.

Follows the token rules of ninja's manual: identifiers are `[A-Za-z0-9_.-]+`, keywords are
whole identifiers, leading spaces make an indent, `#` starts a comment only where a
token may start (the beginning of a line), `$` escapes `$`, space, `:` and the newline (a
continuation, which also swallows the next line's leading spaces), and `$name` / `${name}`
refer to variables. A tab is never whitespace.

An evaluated string (`EvalString`) is kept as a list alternating literal text and variable
names, `[text, name, text, name, ..., text]`, so evaluating it is one join.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from farmer.errors import UsageError

# Token kinds.
NEWLINE, INDENT, IDENT, EOF = "newline", "indent", "identifier", "eof"
BUILD, RULE, POOL, DEFAULT, INCLUDE, SUBNINJA = "build", "rule", "pool", "default", "include", "subninja"
COLON, EQUALS, PIPE, PIPE2, PIPEAT = ":", "=", "|", "||", "|@"
KEYWORDS = {BUILD, RULE, POOL, DEFAULT, INCLUDE, SUBNINJA}
_OPS = {":": COLON, "=": EQUALS, "|": PIPE, "||": PIPE2, "|@": PIPEAT}

_TOKEN = re.compile(r"""
    (?P<comment>[ ]*\#[^\n]*(?:\n|\Z))
  | (?P<newline>[ ]*\r?\n)
  | (?P<indent>[ ]+)
  | (?P<op>\|\||\|@|[|:=])
  | (?P<ident>[A-Za-z0-9_.\-]+)
  | (?P<eof>\Z)
""", re.X)
_WHITESPACE = re.compile(r"(?:[ ]+|\$\r?\n)*")
_IDENT = re.compile(r"[A-Za-z0-9_.\-]+")
# One piece of an evaluated string; the group that matched says which.
_PIECE = re.compile(r"""
    ([^$ :\r\n|\0]+)              # 1 plain text
  | \$([$ :])                     # 2 an escaped character
  | (\$\r?\n[ ]*)                 # 3 a continuation
  | \$\{([A-Za-z0-9_.\-]+)\}      # 4 ${name}
  | \$([A-Za-z0-9_\-]+)           # 5 $name
  | ([ :|])                       # 6 ends a path; text in a value
  | (\r?\n)                       # 7 the end of the line
""", re.X)

# Fast paths: a value or a path without any `$` in it.
_PLAIN_VALUE = re.compile(r"([^$\r\n\0]*)\r?\n")
_PLAIN_PATH = re.compile(r"([^$ :\r\n|\0]*)(?=[ :|\n]|\r\n)")

EvalString = list  # [text, name, text, ..., text]; see the module docstring


def evaluate(parts: EvalString, lookup: Callable[[str], str]) -> str:
    if len(parts) == 1:
        return parts[0]
    out = [parts[0]]
    for k in range(1, len(parts), 2):
        out.append(lookup(parts[k]))
        out.append(parts[k + 1])
    return "".join(out)


def is_empty(parts: EvalString) -> bool:
    return len(parts) == 1 and not parts[0]


def describe(kind: str) -> str:
    """A token kind as ninja names it in messages."""
    if kind in (NEWLINE, INDENT, IDENT, EOF):
        return kind
    return f"'{kind}'"


class Lexer:
    def __init__(self, filename: str, text: str) -> None:
        self.filename = filename
        self.text = text
        self.pos = 0
        self.last = 0  # where the last token started: errors point there

    # -- errors ---------------------------------------------------------------------------

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def error(self, message: str, pos: int | None = None) -> UsageError:
        """`FILE:LINE: message`, as ninja words its manifest errors."""
        return UsageError(f"{self.filename}:{self.line_of(self.last if pos is None else pos)}: {message}")

    def _lexing_error(self) -> UsageError:
        c = self.text[self.last:self.last + 1]
        if c == "\t":
            return self.error("tabs are not allowed, use spaces")
        return self.error("lexing error" + (f" near {c!r}" if c else ""))

    # -- tokens ---------------------------------------------------------------------------

    def read_token(self) -> tuple[str, str]:
        """The next token as (kind, text); whitespace after it is eaten."""
        text = self.text
        while True:
            start = self.pos
            m = _TOKEN.match(text, start)
            self.last = start
            if m is None:
                raise self._lexing_error()
            group = m.lastgroup
            self.pos = m.end()
            if group == "comment":
                continue
            break
        if group == "newline":
            return NEWLINE, m.group()
        if group == "eof":
            return EOF, ""
        if group == "indent":
            return INDENT, m.group()
        value = m.group()
        if group == "op":
            kind = _OPS[value]
        else:
            kind = value if value in KEYWORDS else IDENT
        self.pos = _WHITESPACE.match(text, self.pos).end()
        return kind, value

    def peek(self, kind: str) -> bool:
        """Consume the next token when it is of `kind`."""
        start = self.pos
        try:
            got, _ = self.read_token()
        except UsageError:  # as ninja: a bad token is not the one wanted; what follows reports
            got = None
        if got == kind:
            return True
        self.pos = start
        return False

    def unread(self) -> None:
        self.pos = self.last

    def expect(self, kind: str) -> None:
        got, _ = self.read_token()
        if got != kind:
            hint = " ($ also escapes ':')" if kind == COLON else ""
            raise self.error(f"expected {describe(kind)}, got {describe(got)}{hint}")

    def read_ident(self) -> str | None:
        m = _IDENT.match(self.text, self.pos)
        self.last = self.pos
        if m is None:
            return None
        self.pos = _WHITESPACE.match(self.text, m.end()).end()
        return m.group()

    # -- evaluated strings ----------------------------------------------------------------

    def read_path(self) -> EvalString:
        """One path of a build, default, include or subninja line: ends at a space, `:`, `|`
        or the newline (none of which it consumes); `[""]` when there is none."""
        return self._read_eval(True)

    def read_value(self) -> EvalString:
        """The right-hand side of `name = value`, through the end of the line."""
        return self._read_eval(False)

    def _read_eval(self, path: bool) -> EvalString:
        text = self.text
        pos = self.pos
        self.last = pos
        # The common case first: plain text up to the end of the value or the path.
        m = (_PLAIN_PATH if path else _PLAIN_VALUE).match(text, pos)
        if m is not None:
            self.pos = _WHITESPACE.match(text, m.end(1)).end() if path else m.end()
            return [m.group(1)]
        parts: list[str] = []
        literal: list[str] = []
        match = _PIECE.match
        while True:
            m = match(text, pos)
            if m is None:
                self.last = pos
                if pos >= len(text):
                    raise self.error("unexpected EOF")
                if text[pos] == "$":
                    raise self.error("bad $-escape (literal $ must be written as $$)")
                raise self._lexing_error()
            k = m.lastindex
            if k == 1:
                literal.append(m.group(1))
            elif k == 2:
                literal.append(m.group(2))
            elif k == 3:
                pass
            elif k == 4 or k == 5:
                parts.append("".join(literal))
                parts.append(m.group(k))
                literal = []
            elif k == 6:
                if path:
                    break
                literal.append(m.group(6))
            else:  # the newline
                if not path:
                    pos = m.end()
                break
            pos = m.end()
        parts.append("".join(literal))
        self.pos = pos
        if path:
            self.pos = _WHITESPACE.match(text, pos).end()
        return parts
