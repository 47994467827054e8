"""Makefile-style dependency files, as `gcc -MD` writes them (and the headers cl.exe names
on its output, ninja's `deps = msvc`: `filter_msvc_output`).

Handles `\\` line continuations, escaped spaces (`\\ `), `$$`, several targets before the
colon, and several rules in one file (`-MP` adds empty rules for headers). The result is
every prerequisite of every rule, in order of first appearance. `write` makes one, for a
run restored from a cache whose depfile the cache did not keep.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation


class DepfileError(Exception):
    pass


def _words(text: str) -> list[tuple[str, bool]]:
    """Split into (word, ends_with_colon) pairs; newlines are kept as ("\\n", False)."""
    plain = _plain_words(text)
    if plain is not None:
        return plain
    words: list[tuple[str, bool]] = []
    word: list[str] = []
    i, n = 0, len(text)

    def flush() -> None:
        if word:
            w = "".join(word)
            word.clear()
            if w.endswith(":") and not w.endswith("\\:"):
                words.append((w[:-1], True))
            else:
                words.append((w, False))

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "\n":
                flush()
                i += 2
                continue
            if nxt == "\r" and text.startswith("\n", i + 2):
                flush()
                i += 3
                continue
            if nxt in " #:\\":
                # `\\` before a space is a literal backslash followed by a separator, as in make.
                if nxt == "\\" and i + 2 < n and text[i + 2] == " ":
                    word.append("\\")
                    i += 2
                    continue
                word.append(nxt)
                i += 2
                continue
            word.append(c)
            i += 1
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "$":
            word.append("$")
            i += 2
            continue
        if c in " \t\r":
            flush()
        elif c == "\n":
            flush()
            words.append(("\n", False))
        elif c == ":" and (i + 1 >= n or text[i + 1] in " \t\r\n"):
            word.append(":")
            flush()
        else:
            word.append(c)
        i += 1
    flush()
    return words


def _plain_words(text: str) -> list[tuple[str, bool]] | None:
    """`_words` by string methods for a text whose only escapes are line continuations and
    escaped spaces, as gcc writes them (a character loop was slow on a compiler's depfile, see
    bench/results/performance-notes.md#figures-from-code-comments;
    Meson's test projects live under `test cases/`, so every one of their depfiles names a
    source with `\\ ` in it); None for any other text."""
    spaced = False
    if "\\" in text:
        if "\\\\" in text or "\0" in text:  # `\\ ` is a backslash and a separator
            return None
        text = text.replace("\\\r\n", " ").replace("\\\n", " ")
        if "\\" in text:
            spaced = text.count("\\") == text.count("\\ ")
            if not spaced:
                return None
            text = text.replace("\\ ", "\0")  # a space inside a word, put back below
    if "$" in text:
        return None
    words: list[tuple[str, bool]] = []
    for line in text.replace("\t", " ").replace("\r", " ").split("\n"):
        for w in line.split(" "):
            if w:
                if spaced:
                    w = w.replace("\0", " ")
                words.append((w[:-1], True) if w[-1] == ":" else (w, False))
        words.append(("\n", False))
    words.pop()  # the split's last piece ends without a newline
    return words


def parse(text: str) -> list[str]:
    """The prerequisites listed in a depfile's text."""
    deps: list[str] = []
    seen: set[str] = set()
    in_prereqs = False
    have_target = False
    for word, colon in _words(text):
        if word == "\n":
            in_prereqs = False
            have_target = False
            continue
        if not in_prereqs:
            if word:
                have_target = True
            if colon:
                if not have_target:
                    raise DepfileError("a rule without a target")
                in_prereqs = True
            continue
        if word and word not in seen:
            seen.add(word)
            deps.append(word)
    return deps


def write(comp: Computation, discovered: list[tuple[str, str]]) -> None:
    """A depfile for `comp` listing `discovered`, for the recorder to read (and remove) as
    after a run."""
    def escaped(path: str) -> str:
        return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")

    text = f"{escaped(comp.outputs[0])}: " + " ".join(escaped(p) for p, _ in discovered) + "\n"
    os.makedirs(os.path.dirname(comp.depfile) or ".", exist_ok=True)
    with open(comp.depfile, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)


_SOURCE_SUFFIXES = (".c", ".cc", ".cxx", ".cpp", ".c++")  # cl.exe echoes the source's name
_SYSTEM = ("program files", "microsoft visual studio")


def filter_msvc_output(text: str, prefix: str) -> tuple[str, list[str]]:
    """`deps = msvc` in a build.ninja: cl.exe's `/showIncludes` names each header it opens on
    a line of its output after `prefix` (`msvc_deps_prefix`). As ninja does: the output
    without those lines nor the line echoing the source's name, and the headers named, each
    once, in the order first named, those of the compiler's own installation (under
    "Program Files" or "Microsoft Visual Studio") left out."""
    kept: list[str] = []
    found: dict[str, None] = {}
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if bare.startswith(prefix):
            path = bare[len(prefix):].lstrip(" ")
            if path and not any(s in path.lower() for s in _SYSTEM):
                found[os.path.normpath(path)] = None
        elif not bare.lower().endswith(_SOURCE_SUFFIXES):
            kept.append(line)
    return "".join(kept), list(found)
