"""Files that exist, and the patterns matched against them: foreach patterns with
`{wildcards}` and globs. Listings are made once per directory prefix and digested, so that a
cached graph can tell when what a pattern matches may have changed."""

from __future__ import annotations

import os
import re
from pathlib import Path

from farmer import template
from farmer.grains import hash_text

GLOB_CHARS = re.compile(r"[*?\[]")
_SKIP_DIRS = {".farmer", ".git"}


def list_files(root: Path | str, prefix: str) -> list[str]:
    """Files under `root/prefix`, as sorted root-relative paths; `.farmer` and `.git` skipped."""
    found: list[str] = []
    top = os.path.join(root, prefix) if prefix else str(root)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        rel = os.path.relpath(dirpath, root)
        base = "" if rel == "." else rel + "/"
        found.extend(base + f for f in filenames)
    found.sort()
    return found


def listing_digest(files: list[str]) -> str:
    return hash_text(*files)


class Files:
    """Existing files under the root, listed once per directory prefix (for foreach and
    globs). The listings' digests let a cached graph tell when a match set may differ."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._under: dict[str, list[str]] = {}

    def under(self, prefix: str) -> list[str]:
        if prefix not in self._under:
            self._under[prefix] = list_files(self.root, prefix)
        return self._under[prefix]

    def digests(self) -> dict[str, str]:
        return {prefix: listing_digest(files) for prefix, files in self._under.items()}


def pattern_regex(pattern: str) -> tuple[re.Pattern[str], str]:
    """A foreach pattern as a regex (a wildcard matches one or more characters, `/` too)
    and the fixed directory prefix before its first wildcard."""
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
