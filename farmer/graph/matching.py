"""Files that exist, and the patterns matched against them: foreach patterns with
`{wildcards}` and globs. Listings are made once per directory prefix and digested, so that a
cached graph can tell when what a pattern matches may have changed.

A build from the graph cache (and the no-op check) only lists and digests: the patterns'
`re` and template.py are imported when a pattern is made, on a cold cache."""

from __future__ import annotations

import os

from farmer.errors import UsageError
from farmer.files.digests import hash_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

_SKIP_DIRS = {".farmer", ".git"}


def list_files(root: str | os.PathLike, prefix: str) -> list[str]:
    """Files under `root/prefix`, as sorted root-relative paths; `.farmer` and `.git` skipped."""
    return _scan(root, prefix)[0]


def _scan(root: str | os.PathLike, prefix: str) -> tuple[list[str], set[str]]:
    """`list_files`, and which of the files are symbolic links. What os.walk(top) would
    list, from one os.scandir per directory: a symlink to a directory counts as a directory
    and is not entered, an unreadable directory is left out."""
    found: list[str] = []
    links: set[str] = set()
    top = os.path.join(root, prefix) if prefix else str(root)
    rel = os.path.relpath(top, root)
    stack = [(top, "" if rel == "." else rel + "/")]
    while stack:
        path, base = stack.pop()
        files: list[str] = []
        dirs: list[tuple[str, str]] = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if not is_dir:
                        files.append(base + entry.name)
                        if _is_link(entry, True):  # in doubt a link: Files.exists looks
                            links.add(base + entry.name)
                    elif entry.name not in _SKIP_DIRS and not _is_link(entry, False):
                        dirs.append((entry.path, base + entry.name + "/"))
        except OSError:
            continue  # as os.walk: a directory that cannot be listed is skipped
        found.extend(files)
        stack.extend(dirs)
    found.sort()
    return found, links


def _is_link(entry: os.DirEntry, doubt: bool) -> bool:
    try:
        return entry.is_symlink()
    except OSError:  # it had to lstat, and failed (os.walk's islink says False then)
        return doubt


def has_control(path: str) -> bool:
    """Whether `path` has a control character (C0 or DEL)."""
    return any(c < " " or c == "\x7f" for c in path)


def listing_digest(files: list[str]) -> str:
    return hash_text(*files)


class Files:
    """Existing files under the root, listed once per directory prefix (for foreach and
    globs). The listings' digests let a cached graph tell when a match set may differ."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = root
        self._under: dict[str, list[str]] = {}
        self._links: set[str] = set()
        self._plain: set[str] | None = None  # files listed, symlinks left out
        self._control: dict[str, list[str]] = {}  # prefix -> listed names with a control character

    def under(self, prefix: str) -> list[str]:
        if prefix not in self._under:
            self._under[prefix], links = _scan(self.root, prefix)
            self._links |= links
            self._plain = None
        return self._under[prefix]

    def plain_files(self) -> set[str]:
        """The files the listings saw that are no symlinks (a symlink may dangle): each
        exists (as much as a listing made a moment ago can tell)."""
        if self._plain is None:
            self._plain = set()
            for prefix, files in self._under.items():
                # Only plain prefixes: `a/../b` lists root/a/../b, which a symlink `a` moves.
                if prefix == "" or (os.path.normpath(prefix) == prefix and prefix[0] not in "./"
                                    and ".." not in prefix.split("/")):
                    self._plain.update(files)
            self._plain -= self._links
        return self._plain

    def exists(self, path: str) -> bool:
        """os.path.exists(root/path), from the listings where they can tell."""
        return path in self.plain_files() or os.path.exists(os.path.join(self.root, path))

    def refuse_control(self, prefix: str, pattern: re.Pattern[str], what: str) -> None:
        """One rule for file names with a control character (a TAB, a newline...), which
        no command line or log can show faithfully: a pattern (foreach or glob) that would
        match one is an error naming the file. `what` says who matched it."""
        bad = self._control.get(prefix)
        if bad is None:
            listed = self.under(prefix)
            joined = "".join(listed)
            bad = self._control[prefix] = [] if joined.isprintable() else [
                p for p in listed if not p.isprintable() and has_control(p)]
        for path in bad:
            if pattern.match(path.replace("\n", "\x01")):  # `.` takes no newline
                raise UsageError(f"{what} matches the file {path!r}, whose name has a control "
                                 "character; rename the file")

    def digests(self) -> dict[str, str]:
        return {prefix: listing_digest(files) for prefix, files in self._under.items()}


def pattern_regex(pattern: str) -> tuple[re.Pattern[str], str]:
    """A foreach pattern as a regex (a wildcard matches one or more characters, `/` too)
    and the fixed directory prefix before its first wildcard."""
    import re

    from farmer.manifest import template

    if pattern.startswith("./"):
        pattern = pattern[2:]
    out = []
    seen: set[str] = set()
    prefix_done = False
    prefix = ""
    for part in template.parse(pattern):
        if isinstance(part, str):
            out.append(re.escape(part))
            if not prefix_done:
                prefix += part
        else:
            prefix_done = True
            if part.name in seen:
                out.append(f"(?P={part.name})")
            else:
                seen.add(part.name)
                out.append(f"(?P<{part.name}>.+)")
    directory = prefix.rpartition("/")[0]
    return re.compile("".join(out) + r"\Z"), directory


def glob_regex(pattern: str) -> re.Pattern[str]:
    """`*`, `?`, `[...]` stay inside one path component; `**` spans components."""
    import re

    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/.][^/]*/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append("(?:[^/.][^/]*(?:/[^/.][^/]*)*)?")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")
