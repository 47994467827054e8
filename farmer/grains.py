"""File grains: content digests (xxh3_128) behind a stat cache.

A file is re-read only when its stat data (mtime_ns, size, inode, ctime_ns) differs from
what was seen when it was last hashed. Time stamps never decide a rebuild by themselves:
they only let farmer skip re-reading a file whose content cannot have changed.
"""

from __future__ import annotations

import os
import stat as statmod
import time
import xxhash

TYPE_CHECKING = False  # start-up rule (docs/performance.md): no typing on the build path
if TYPE_CHECKING:
    from collections.abc import Callable

_CHUNK = 1 << 20
# A file modified within this window before it was hashed may be modified again within
# the same time-stamp tick without its stat changing ("racy" entries, as git calls them);
# such entries are hashed again next time instead of being trusted.
RACY_NS = 100_000_000

StatKey = tuple[int, int, int, int]  # mtime_ns, size, inode, ctime_ns


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


# farmer's own sources that decide what a Farmfile expands to and what is up to date.
_SOURCES = ("spec.py", "farmfile.py", "traversal.py", "expander.py", "template.py", "matching.py",
            "graph.py", "uptodate.py", "graphcache.py", "grains.py", "noop.py", "build.py")


def code_stamp() -> str:
    """The stat data of those sources as installed, for the keys of farmer's caches: a
    farmer that expands or decides differently (a newer commit under the same version)
    ignores what another one left."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return repr([stat_key(os.stat(os.path.join(here, name))) for name in _SOURCES])
    except OSError:
        return ""


_THIN = b"!<thin>\n"
THIN_PREFIX = "thin:"  # a content digest so marked is a thin archive's (see `Digests`)


def hash_file(path: str) -> str:
    """The digest of the file's bytes; a thin archive's is marked with THIN_PREFIX. Read
    through os.read: `open()` adds an fstat, an ioctl, an lseek and a third read to each
    small file (8 system calls against 4), and every run's outputs are hashed."""
    h = xxhash.xxh3_128()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        first = chunk = os.read(fd, _CHUNK)
        while chunk:
            h.update(chunk)
            chunk = os.read(fd, _CHUNK)
    finally:
        os.close(fd)
    return THIN_PREFIX + h.hexdigest() if first.startswith(_THIN) else h.hexdigest()


def thin_members(path: str) -> list[str] | None:
    """The member paths of a GNU thin archive (`ar T`: it holds its members' names, not their
    bytes), relative to the working directory, as `ar` resolves them (relative to the
    archive's folder); None when the file is not a readable thin archive."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if not data.startswith(_THIN):
        return None
    folder = os.path.dirname(path)
    names: list[str] = []
    long_names = b""
    at = len(_THIN)
    while at + 60 <= len(data):
        header = data[at:at + 60]
        if header[58:60] != b"`\n":
            return None
        name = header[:16].rstrip(b" ")
        try:
            size = int(header[48:58])
        except ValueError:
            return None
        at += 60
        if name in (b"/", b"/SYM64/", b"//"):  # symbol table, long names: stored in the file
            if name == b"//":
                long_names = data[at:at + size]
            at += size + (size & 1)
            continue
        if name.startswith(b"/") and name[1:].isdigit():  # an offset into the long names
            start = int(name[1:])
            end = long_names.find(b"/\n", start)
            name = long_names[start:end if end >= 0 else len(long_names)]
        else:
            name = name[:-1] if name.endswith(b"/") else name
        member = name.decode("utf-8", "surrogateescape")
        names.append(os.path.normpath(os.path.join(folder, member)))
    return names


def hash_text(*parts: str) -> str:
    h = xxhash.xxh3_128()
    for part in parts:
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def hash_bytes(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


class NotAFile(Exception):
    """A path that exists but is not a regular file (a directory, a socket...)."""


class Digests:
    """Digests of files under the project root, remembered across builds by their stat.

    `cache` maps path -> (stat key, digest) as loaded from state.db; `changed` collects the
    entries to write back.
    """

    def __init__(self, cache: dict[str, tuple[StatKey, str]],
                 lookup: Callable[[str], tuple[StatKey, str] | None] | None = None) -> None:
        self.cache = cache
        self.lookup = lookup  # where entries missing from `cache` may be found (state.db)
        self.changed: dict[str, tuple[StatKey, str] | None] = {}
        self.hashed = 0  # files actually read, for reporting and tests
        self._now: dict[str, str | None] = {}  # digests already taken in this build
        # The stat each path had when its digest was taken (None: missing), and whether it
        # was then fresh enough ("racy") that a same-tick rewrite could keep that stat.
        self._seen: dict[str, tuple[StatKey | None, bool]] = {}
        self.unstable: set[str] = set()  # files seen to change during this build
        # Paths whose digest also covers their mtime: the outputs of build.ninja edges
        # without `restat = 1`, whose consumers run whenever they ran, as in ninja.
        self.timed: Callable[[str], bool] | None = None

    def digest(self, path: str) -> str | None:
        """The content digest of `path`, or None when it does not exist (a dangling symlink
        counts as missing). Raises NotAFile for a directory or other non-file. A thin
        archive's digest covers its members' digests: its own bytes are only their names."""
        known = self._now.get(path, "")
        if known != "":
            return known
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return self._missing(path)
        except PermissionError:
            return self._unreadable(path)
        if not statmod.S_ISREG(st.st_mode):
            raise NotAFile(path)
        key = real = stat_key(st)
        cached = self.cache.get(path)
        if cached is None and self.lookup is not None:
            cached = self.lookup(path)
        if cached is not None and cached[0] == key:
            digest = cached[1]
        else:
            started = time.time_ns()
            try:
                digest = hash_file(path)
            except (FileNotFoundError, NotADirectoryError):  # removed since the stat
                return self._missing(path)
            except PermissionError:
                return self._unreadable(path)
            self.hashed += 1
            if started - st.st_mtime_ns < RACY_NS or started - st.st_ctime_ns < RACY_NS:
                key = (-1, st.st_size, st.st_ino, st.st_ctime_ns)  # never matches: hash again
            entry = (key, digest)
            self.cache[path] = entry
            self.changed[path] = entry
        if digest.startswith(THIN_PREFIX):
            members = thin_members(path) or []
            parts = [digest, *members]
            self._now[path] = digest  # an archive that lists itself
            for member in members:
                try:
                    parts.append(self.digest(member) or "missing")
                except NotAFile:
                    parts.append("not-a-file")
            digest = hash_text(*parts)
        if self.timed is not None and self.timed(path):
            digest = hash_text(digest, str(st.st_mtime_ns))
        self._now[path] = digest
        self._seen[path] = (real, key != real)
        return digest

    def _unreadable(self, path: str) -> str:
        """A file farmer may not read (chmod 000): nothing vouches for its content, so its
        digest matches no other and what reads it is never up to date (the command that
        reads it fails on its own, with its own message)."""
        digest = self._now[path] = f"unreadable-{time.time_ns()}"
        return digest

    def _missing(self, path: str) -> None:
        self._now[path] = None
        self._seen[path] = (None, False)
        if path in self.cache:
            self.changed[path] = None
        return None

    def moved(self, path: str, strict: bool = False) -> bool:
        """Whether `path` may differ from when its digest was taken in this build: its stat
        changed (or, with `strict`, it was racy then, so only its content can tell)."""
        since = self.since(path)
        return since is True or (strict and since is None)

    def since(self, path: str) -> bool | None:
        """`moved` in one stat: True when the stat of `path` changed since its digest was
        taken in this build, None when it did not but was racy then (only its content can
        tell), False otherwise (or when it was not taken)."""
        seen = self._seen.get(path)
        if seen is None:
            return False
        try:
            now: StatKey | None = stat_key(os.stat(path))
        except (FileNotFoundError, NotADirectoryError):
            now = None
        except OSError:
            return True
        if now != seen[0]:
            return True
        return None if seen[1] else False

    def total_size(self, paths: list[str]) -> int:
        """Bytes in the files of `paths` as last seen (for fitting durations to input size)."""
        total = 0
        for p in paths:
            entry = self.cache.get(p)
            if entry is not None:
                total += entry[0][1]
        return total

    def taken(self) -> dict[str, tuple[StatKey, str, bool]]:
        """What the no-op proof records of each file digested in this build (and not
        forgotten since): its stat then, its digest, and whether it was racy (so that only
        its content can vouch for it)."""
        now = self._now
        return {path: (st, now[path], racy) for path, (st, racy) in self._seen.items()
                if st is not None and now.get(path) is not None}

    def learn(self, path: str, content: str) -> None:
        """`path` was just written with bytes of digest `content` (as `hash_file` gives it;
        restored from a cache, verified while copied): remembered as if hashed now."""
        st = os.stat(path)
        key = stat_key(st)
        if time.time_ns() - min(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS:
            key = (-1, st.st_size, st.st_ino, st.st_ctime_ns)  # as `digest` does: hash again
        self.cache[path] = self.changed[path] = (key, content)
        self._now.pop(path, None)
        self._seen.pop(path, None)
        if not content.startswith(THIN_PREFIX) and (self.timed is None or not self.timed(path)):
            self._now[path] = content  # what `digest` would compute from these bytes
            self._seen[path] = (stat_key(st), key != stat_key(st))

    def content(self, path: str) -> str | None:
        """The digest of `path`'s bytes as last hashed (`hash_file`'s), which `digest` may
        have combined with more (a thin archive's members, a time stamp)."""
        entry = self.cache.get(path)
        if entry is None and self.lookup is not None and path in self._seen:  # vouched for by state.db's entry
            entry = self.lookup(path)
        return None if entry is None else entry[1]

    def seen(self, path: str) -> StatKey | None:
        """The stat `path` had when its digest was taken in this build (None: not taken, or
        missing then): whoever copies the file can tell it is still that content."""
        seen = self._seen.get(path)
        return None if seen is None else seen[0]

    def forget(self, path: str) -> None:
        """`path` may have changed (a computation just wrote it): look again next time."""
        self._now.pop(path, None)
        self._seen.pop(path, None)
