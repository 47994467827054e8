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

from farmer.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# Token kinds.
NEWLINE, INDENT, IDENT, EOF = "newline", "indent", "identifier", "eof"
BUILD, RULE, POOL, DEFAULT, INCLUDE, SUBNINJA = "build", "rule", "pool", "default", "include", "subninja"
COLON, EQUALS, PIPE, PIPE2, PIPEAT = ":", "=", "|", "||", "|@"
KEYWORDS = {BUILD, RULE, POOL, DEFAULT, INCLUDE, SUBNINJA}

# Scanned by string methods, not `re`, whose import (with `enum`) and patterns a small
# project's build would pay for (see docs/performance.md#start-up-rules): `str.lstrip`
# finds where a run of identifier characters ends, `bytes.find` in the text's marks (below)
# where a run of text does. As fast as the patterns were on CMake's and generated
# manifests.
_VAR_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"  # $name
_IDENT_CHARS = _VAR_CHARS + "."  # identifiers and ${name}
_IDENT_SET = frozenset(_IDENT_CHARS)
_VAR_SET = frozenset(_VAR_CHARS)
# A text's marks: one byte a character (each non-ASCII one a `?`), every character that
# ends a path made a space and every one that ends a value (or needs a closer look in it) a
# newline, so that one `bytes.find` finds the next of either kind.
_MARKS = bytes.maketrans(b" :|$\r\0", b"   \n\n\n")
_PATH_ENDS = frozenset(" :|\n")


def _run_end(text: str, pos: int, chars: str) -> int:
    """Where the run of `chars` that starts at `pos` ends."""
    end = pos
    while True:
        window = text[end:end + 64]
        rest = window.lstrip(chars)
        end += len(window) - len(rest)
        if rest or not window:
            return end


def _marked_end(marks: bytes, pos: int) -> int:
    """Where the run of text at `pos` ends: the first `$`, space, `:`, `|`, CR, LF or NUL."""
    end = marks.find(b" ", pos)
    if end < 0:
        end = len(marks)
    nl = marks.find(b"\n", pos, end)
    return end if nl < 0 else nl


def _value_end(marks: bytes, pos: int) -> int:
    """Where the run of a value's text at `pos` ends: the first `$`, CR, LF or NUL."""
    end = marks.find(b"\n", pos)
    return len(marks) if end < 0 else end


def _space_end(text: str, pos: int) -> int:
    """Past the spaces and `$`-continuations at `pos` (what follows a token)."""
    while True:
        c = text[pos:pos + 1]
        if c == " ":
            pos += 1
        elif c == "$" and text.startswith("\n", pos + 1):
            pos += 2
        elif c == "$" and text.startswith("\r\n", pos + 1):
            pos += 3
        else:
            return pos


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
        self.marks = text.encode("ascii", "replace").translate(_MARKS)
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
            self.last = start
            pos = start
            while text.startswith(" ", pos):
                pos += 1
            c = text[pos:pos + 1]
            if c != "#":
                break
            nl = text.find("\n", pos)  # a comment, through its newline
            self.pos = len(text) if nl < 0 else nl + 1
        if c == "\n" or (c == "\r" and text.startswith("\n", pos + 1)):
            self.pos = pos + (1 if c == "\n" else 2)
            return NEWLINE, text[start:self.pos]
        if pos > start:
            self.pos = pos
            return INDENT, text[start:pos]
        if c in _IDENT_SET:
            end = _run_end(text, pos, _IDENT_CHARS)
            value = text[pos:end]
            kind = value if value in KEYWORDS else IDENT
        elif c == "|":
            value = text[pos:pos + 2]
            if value != "||" and value != "|@":
                value = "|"
            kind, end = value, pos + len(value)
        elif c == ":" or c == "=":
            kind = value = c
            end = pos + 1
        elif not c:
            return EOF, ""
        else:
            raise self._lexing_error()
        self.pos = _space_end(text, end)
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
        text = self.text
        pos = self.last = self.pos
        end = _run_end(text, pos, _IDENT_CHARS)
        if end == pos:
            return None
        self.pos = _space_end(text, end)
        return text[pos:end]

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
        marks = self.marks
        if path:
            end = _marked_end(marks, pos)
            c = text[end:end + 1]
            if (c and c in _PATH_ENDS) or (c == "\r" and text.startswith("\n", end + 1)):
                self.pos = _space_end(text, end)
                return [text[pos:end]]
        else:
            end = marks.find(b"\n", pos)
            if end >= 0:
                c = text[end]
                if c == "\n" or (c == "\r" and text.startswith("\n", end + 1)):
                    self.pos = end + (1 if c == "\n" else 2)
                    return [text[pos:end]]
        parts: list[str] = []
        literal: list[str] = []
        n = len(text)
        while True:
            c = text[pos:pos + 1]
            if c == "$":
                d = text[pos + 1:pos + 2]
                if d == "$" or d == " " or d == ":":
                    literal.append(d)
                    pos += 2
                elif d == "\n" or (d == "\r" and text.startswith("\n", pos + 2)):
                    pos = _run_end(text, pos + (2 if d == "\n" else 3), " ")  # a continuation
                elif d == "{" and (end := _run_end(text, pos + 2, _IDENT_CHARS)) > pos + 2 \
                        and text.startswith("}", end):
                    parts.append("".join(literal))
                    parts.append(text[pos + 2:end])
                    literal = []
                    pos = end + 1
                elif d in _VAR_SET:
                    end = _run_end(text, pos + 1, _VAR_CHARS)
                    parts.append("".join(literal))
                    parts.append(text[pos + 1:end])
                    literal = []
                    pos = end
                else:
                    self.last = pos
                    raise self.error("bad $-escape (literal $ must be written as $$)")
            elif path and (c == " " or c == ":" or c == "|"):
                break
            elif c == "\n" or (c == "\r" and text.startswith("\n", pos + 1)):
                if not path:
                    pos += 1 if c == "\n" else 2
                break
            elif c == "\r" or c == "\0" or pos >= n:
                self.last = pos
                if pos >= n:
                    raise self.error("unexpected EOF")
                raise self._lexing_error()
            else:  # plain text: in a value, spaces, `:` and `|` too (Meson's `$ `-escaped ARGS)
                end = _marked_end(marks, pos) if path else _value_end(marks, pos)
                literal.append(text[pos:end])
                pos = end
        parts.append("".join(literal))
        self.pos = pos
        if path:
            self.pos = _space_end(text, pos)
        return parts
