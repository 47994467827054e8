"""Where a command line's reader, /bin/sh for a `cmd` or shlex.split for a `python` line,
reads each placeholder of it (docs/farmfile.md, "Write them bare").

farmer shell-quotes what it substitutes from file names (`{stem}`, `{inputs}`...: see
template.py), and such a quoted value is one word only where the reader takes it bare.
Inside the author's '...' farmer's quotes end the author's, and the rest of the name runs
as shell code; inside "..." or a here-document farmer's quotes are plain characters, and a
`$(...)` in the name runs; after a backslash or a '$' the opening quote is read otherwise.
farmfile.py asks this module where each placeholder stands, when it reads the Farmfile, so
that such a command is refused before anything runs.

The scanner follows POSIX sh: '...' has no escapes; "..." ends at an unescaped `"`, and a
`$(...)` in it is a command of its own, where quotes are quotes again; a backslash escapes
the next character outside single quotes; `#` at the start of a word starts a comment;
`<<WORD` starts a here-document at the next line; backquotes end at the first unescaped
backquote, a name's too; `$((...))` reads its text as "..." does. `$'...'` is quoted with
escapes in bash and ksh, and is a '$' before '...' in dash: both readings are taken, and
the one that finds a placeholder quoted wins, so that no /bin/sh reads a placeholder
otherwise than it is checked. Where the grammar is beyond it (a `case` pattern's `)` inside "$(...)"), the
scanner errs on the side of quoted: a refusal too many, never a name let through.
"""

from __future__ import annotations

# Where a placeholder stands: bare (or in a comment, which ends before any name's text
# could) is the only place where farmer's quoting makes it one word.
BARE = ""
SINGLE = "'...'"
DOUBLE = '"..."'
ANSI = "$'...'"
BACKTICK = "`...`"
ARITHMETIC = "$((...))"  # read as in "...": quotes are plain characters, `$(...)` runs
HEREDOC = "a here-document"
BACKSLASH = "a backslash"  # right after one: it escapes farmer's opening quote
DOLLAR = "'$'"  # right after one: `$'...'` in bash, and `${stem}` a variable's name

# What changes some context; a text without any of these has every placeholder bare.
_SHELL_SPECIALS = ("'", '"', "\\", "$", "`", "#", "<", "((")
_WORD_SPECIALS = ("'", '"', "\\")  # shlex.split(posix=True), as a python line is split
# Where a `#` starts a comment: at the start of the text or after one of these.
_WORD_BREAKS = " \t\n;&|()<>"
# Kinds of the frames of the context stack. A frame is [kind, depth, open, close]: the
# bare context inside `$(...)` and the arithmetic inside `$((...))`, `((...))` or bash's
# `$[...]` end when their open brackets are all closed.
_WORDS, _PAREN, _ARITH, _DOUBLE, _ANSI, _BACKTICK = range(6)
_PLACE = {_WORDS: BARE, _PAREN: BARE, _ARITH: ARITHMETIC, _DOUBLE: DOUBLE, _ANSI: ANSI,
          _BACKTICK: BACKTICK}


def contexts(text: str, mark: str, shell: bool = True) -> list[str]:
    """For each occurrence of the character `mark` in `text` (a placeholder), where it
    stands: BARE, or one of the constants above. `shell`: `text` is read by /bin/sh (a
    `cmd`), else by shlex.split (a `python` line: quotes and backslashes only)."""
    specials = _SHELL_SPECIALS if shell else _WORD_SPECIALS
    if not any(s in text for s in specials):
        return [BARE] * text.count(mark)
    found = _Scan(text, mark, shell, ansi=shell).run()
    if shell and "$'" in text:  # dash's reading too: the stricter result wins
        other = _Scan(text, mark, shell, ansi=False).run()
        found = [a or b for a, b in zip(found, other)]
    return found


Frame = list  # [kind, depth, open, close]
_SKIPPERS: dict[tuple[str, bool], dict] = {}


def _skippers(mark: str, shell: bool) -> dict:
    """For each kind of frame, the `search` of a pattern of the characters that may change
    something there (or are the mark)."""
    key = (mark, shell)
    if key not in _SKIPPERS:
        import re  # imported already: the template that has a placeholder was parsed by it

        m = re.escape(mark)
        words = "[" + m + r"""\\'"$`#<\n()]""" if shell else "[" + m + r"""\\'"]"""
        double = "[" + m + r'\\"$`]' if shell else "[" + m + r'\\"]'
        _SKIPPERS[key] = {
            _WORDS: re.compile(words).search, _PAREN: re.compile(words).search,
            _ARITH: re.compile("[" + m + r"\\$`()\[\]]").search,
            _DOUBLE: re.compile(double).search,
            _ANSI: re.compile("[" + m + r"\\']").search,
            _BACKTICK: re.compile("[" + m + r"\\`]").search,
        }
    return _SKIPPERS[key]


class _Scan:
    """One left-to-right pass over `text` with a stack of contexts; no recursion, so that
    no nesting depth in a Farmfile can overflow Python's stack."""

    def __init__(self, text: str, mark: str, shell: bool, ansi: bool) -> None:
        self.text, self.mark, self.shell, self.ansi = text, mark, shell, ansi
        self.at = 0
        self.found: list[str] = []
        self.escaped = -1  # the position of the last character a backslash escaped
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs), until a newline
        self.stack: list[Frame] = [[_WORDS, 0, "", ""]]

    def run(self) -> list[str]:
        text, mark, n, stack = self.text, self.mark, len(self.text), self.stack
        skip = _skippers(mark, self.shell)
        while self.at < n:
            frame = stack[-1]
            kind = frame[0]
            # Characters that mean nothing in this context are skipped at C speed.
            found = skip[kind](text, self.at)
            if found is None:
                break
            self.at = found.start() + 1
            c = text[found.start()]
            if c == mark:
                self.found.append(_PLACE[kind])
            elif kind == _DOUBLE:
                if c == '"':
                    stack.pop()
                else:
                    self._expanding(c, DOUBLE)
            elif kind == _ANSI:
                if c == "'":
                    stack.pop()
                elif c == "\\":
                    self._escape(ANSI)
            elif kind == _BACKTICK:
                # Its end is the first unescaped backquote, whatever quotes stand between,
                # so a backquote in a name ends it: every placeholder inside is refused.
                if c == "`":
                    stack.pop()
                elif c == "\\":
                    self._escape(BACKTICK)
            elif kind == _ARITH:
                if not self._bracket(c, frame):
                    self._expanding(c, ARITHMETIC)
            else:
                self._word_char(c, frame)
        return self.found

    def _word_char(self, c: str, frame: Frame) -> None:
        """One character of a bare context: the top level, or inside `$(...)`."""
        if c == "\\":
            self._escape(BACKSLASH)
        elif c == "'":
            self._single()
        elif c == '"':
            self.stack.append([_DOUBLE, 0, "", ""])
        elif not self.shell:
            return
        elif c in "$`":
            self._expanding(c, DOLLAR)
        elif c == "#" and self._word_starts(self.at - 1):
            self._comment()
        elif c == "<" and self.text.startswith("<", self.at):
            self._heredoc()
        elif c == "\n" and self.heredocs:
            self._heredoc_bodies()
        elif c == "(" and self.text.startswith("(", self.at):  # bash's ((...)) (dash: two subshells)
            self.at += 1
            self.stack.append([_ARITH, 2, "(", ")"])
        elif frame[0] == _PAREN:
            self._bracket(c, frame)

    def _expanding(self, c: str, place: str) -> None:
        """A character where the shell expands `$...` and `...`: a bare context, "...",
        arithmetic. `place`: where a placeholder right after a backslash or '$' stands."""
        if c == "\\":
            self._escape(BACKSLASH if place == DOLLAR else place)
        elif c == "`":
            self.stack.append([_BACKTICK, 0, "", ""])
        elif c == "$" and self.shell:
            self._dollar(place)

    def _bracket(self, c: str, frame: Frame) -> bool:
        """Count an open or close bracket of `frame`; pop it when all are closed."""
        if c == frame[2]:
            frame[1] += 1
        elif c == frame[3]:
            frame[1] -= 1
            if frame[1] == 0:
                self.stack.pop()
        else:
            return False
        return True

    def _escape(self, place: str) -> None:
        """A backslash: the next character is taken as it is (a newline: the line goes on)."""
        if self.at < len(self.text):
            if self.text[self.at] == self.mark:
                self.found.append(place)
            self.escaped = self.at
            self.at += 1

    def _single(self) -> None:
        """'...': no escapes; a quote that is never closed runs to the end (an error)."""
        end = self.text.find("'", self.at)
        end = len(self.text) if end < 0 else end
        self._marks(self.at, end, SINGLE)
        self.at = end + 1

    def _dollar(self, place: str) -> None:
        """What a '$' starts: `$'...'` (not inside "..."), `$(...)`, `$((...))`, `$[...]`,
        `$$`; or a placeholder right after it, which stands at `place`."""
        text, at = self.text, self.at
        nxt = text[at] if at < len(text) else ""
        if nxt == self.mark:
            self.found.append(place)
            self.at += 1
        elif nxt == "'" and place == DOLLAR and self.ansi:
            self.at += 1
            self.stack.append([_ANSI, 0, "", ""])
        elif nxt == "(" and text.startswith("(", at + 1):
            self.at += 2
            self.stack.append([_ARITH, 2, "(", ")"])
        elif nxt == "(":
            self.at += 1
            self.stack.append([_PAREN, 1, "(", ")"])
        elif nxt == "[":
            self.at += 1
            self.stack.append([_ARITH, 1, "[", "]"])
        elif nxt == "$":
            self.at += 1  # `$$`, the shell's pid: the next '$' starts nothing

    def _word_starts(self, at: int) -> bool:
        """Whether the character at `at` starts a word (where `#` starts a comment)."""
        return at == 0 or self.text[at - 1] in _WORD_BREAKS and self.escaped != at - 1

    def _comment(self) -> None:
        """To the end of the line (the newline is left for here-documents)."""
        end = self.text.find("\n", self.at)
        end = len(self.text) if end < 0 else end
        self._marks(self.at, end, BARE)
        self.at = end

    def _heredoc(self) -> None:
        """`<<WORD` or `<<-WORD` (`<<<` is bash's here-string, a word): its body starts at
        the next newline of a bare context, ends at a line that is the word unquoted."""
        text, n = self.text, len(self.text)
        self.at += 1
        if text.startswith("<", self.at):
            self.at += 1
            return
        strip = text.startswith("-", self.at)
        self.at += strip
        while self.at < n and text[self.at] in " \t":
            self.at += 1
        word: list[str] = []
        while self.at < n and text[self.at] not in _WORD_BREAKS:
            c = text[self.at]
            if c == self.mark:
                self.found.append(HEREDOC)
                word.append(c)
                self.at += 1
            elif c == "\\" and self.at + 1 < n:
                self._marks(self.at + 1, self.at + 2, HEREDOC)
                word.append(text[self.at + 1])
                self.at += 2
            elif c in "'\"":
                end = text.find(c, self.at + 1)
                end = n if end < 0 else end
                self._marks(self.at + 1, end, HEREDOC)
                word.append(text[self.at + 1 : end])
                self.at = end + 1
            else:
                word.append(c)
                self.at += 1
        if word:
            self.heredocs.append(("".join(word), strip))

    def _heredoc_bodies(self) -> None:
        """The bodies of the here-documents the line just ended opened, one after another."""
        text, n = self.text, len(self.text)
        for word, strip in self.heredocs:
            while self.at < n:
                start, end = self.at, text.find("\n", self.at)
                end = n if end < 0 else end
                self.at = min(end + 1, n)
                line = text[start:end]
                if (line.lstrip("\t") if strip else line) == word:
                    break
                self._marks(start, end, HEREDOC)
        self.heredocs = []

    def _marks(self, start: int, end: int, place: str) -> None:
        """A placeholder for each mark in text[start:end]."""
        self.found.extend([place] * self.text.count(self.mark, start, end))

