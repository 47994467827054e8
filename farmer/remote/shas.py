"""SHA-256 digests of files, once per change: REAPI servers take no xxhash.

farmer knows every file by its xxh3 content digest (farmer/files/digests.py, behind the stat cache).
The side table in state.db maps such a digest to the file's SHA-256 and size, so a file is
SHA-hashed once per content, and only when it goes to a remote. Both digests are taken in one
read of the file; a file whose xxh3 then differs from the one farmer had changed meanwhile and
gets no SHA-256 (the computation does without the remote), so the table never pairs two contents.
"""

from __future__ import annotations

import hashlib
import os
import stat

import xxhash

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

from farmer.files.digests import THIN_PREFIX
from farmer.remote.client import Digest

_CHUNK = 1 << 20


class Changed(Exception):
    """A file's content is not the one farmer digested (it changed, or went)."""


class Shas:
    """SHA-256 digests by farmer digest: `recorded(digest)` reads state.db's side table, and
    `taken()` hands back the new rows for it. Thread-safe enough: dict operations only."""

    __slots__ = ("recorded", "table", "new")

    def __init__(self, recorded: Callable[[str], tuple[str, int] | None]) -> None:
        self.recorded = recorded
        self.table: dict[str, tuple[str, int]] = {}
        self.new: dict[str, tuple[str, int]] = {}

    def of(self, path: str, farmer_digest: str) -> tuple[Digest, bool]:
        """The SHA-256 digest of `path`, whose farmer digest is `farmer_digest`, and its
        executable bit. Changed if the file no longer has that content."""
        try:
            st = os.stat(path)
        except OSError:
            raise Changed(path) from None
        if not stat.S_ISREG(st.st_mode):
            raise Changed(path)
        executable = bool(st.st_mode & 0o111)
        known = self.table.get(farmer_digest) or self.recorded(farmer_digest)
        if known is not None and known[1] == st.st_size:
            return Digest(hash=known[0], size_bytes=known[1]), executable
        sha, size, xxh = hash_both(path)
        if xxh != farmer_digest.removeprefix(THIN_PREFIX):
            raise Changed(path)
        self.table[farmer_digest] = self.new[farmer_digest] = (sha, size)
        return Digest(hash=sha, size_bytes=size), executable

    def taken(self) -> dict[str, tuple[str, int]]:
        """The rows found since the last call, for state.db."""
        new, self.new = self.new, {}
        return new


def hash_both(path: str) -> tuple[str, int, str]:
    """(SHA-256 hex, size, xxh3-128 hex) of a file, in one read."""
    sha, xxh, size = hashlib.sha256(), xxhash.xxh3_128(), 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
            xxh.update(chunk)
            size += len(chunk)
    return sha.hexdigest(), size, xxh.hexdigest()
