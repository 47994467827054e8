"""File grains: content digests (xxh3_128) behind a stat cache.

A file is re-read only when its stat data (mtime_ns, size, inode, ctime_ns) differs from
what was seen when it was last hashed. Time stamps never decide a rebuild by themselves:
they only let farmer skip re-reading a file whose content cannot have changed.
"""

from __future__ import annotations

import os
import stat as statmod
import time

from farmer.files.stattable import FIELDS, StatKey, stat_key  # `Digests._stat`'s bytes are a proof's
from farmer.startup.cheap import int64s
from farmer.startup.extension import xxhash as _xxhash

xxhash = _xxhash()  # start-up rule (docs/performance.md): its extension module, not the package

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

_CHUNK = 1 << 20
# A file modified within this window before it was hashed may be modified again within
# the same time-stamp tick without its stat changing ("racy" entries, as git calls them);
# such entries are hashed again next time instead of being trusted.
RACY_NS = 100_000_000

# farmer's own sources that decide what a Farmfile expands to and what is up to date.
_SOURCES = ("manifest/spec.py", "manifest/farmfile.py", "manifest/shellscan.py", "graph/traversal.py",
            "graph/expander.py", "manifest/template.py", "graph/matching.py", "graph/graph.py", "plan/uptodate.py",
            "graph/cache.py", "files/digests.py", "store/proof.py", "build/run.py")


def code_stamp() -> str:
    """The stat data of those sources as installed, for the keys of farmer's caches: a
    farmer that expands or decides differently (a newer commit under the same version)
    ignores what another one left."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        return repr([stat_key(os.stat(os.path.join(package, name))) for name in _SOURCES])
    except OSError:
        return ""


_THIN = b"!<thin>\n"
THIN_PREFIX = "thin:"  # a content digest so marked is a thin archive's (see `Digests`)


def hash_file(path: str, size: int = -1) -> str:
    """The digest of the file's bytes; a thin archive's is marked with THIN_PREFIX. Read
    through os.read: `open()` adds an fstat, an ioctl, an lseek and a third read to each
    small file (8 system calls against 4), and every run's outputs are hashed. `size`: as
    `hash_fd`'s."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return hash_fd(fd, size)
    finally:
        os.close(fd)


def hash_fd(fd: int, size: int = -1) -> str:
    """`hash_file`'s digest of the file open as `fd`, read from its position. `size`: the
    file's as a stat just before said it: a first read that returns that many bytes, fewer
    than it asked for, stopped at the end of the file, so the read that would return
    nothing is not made (3 system calls; a file that grew since the stat returns more, or a
    full chunk, and is read on to its end)."""
    # Asked for no more than `size` needs (a page at least): a read of 1 MB is a buffer
    # of 1 MB, which the allocator maps, shrinks and unmaps (three system calls a file).
    first = chunk = os.read(fd, min(max(size + 1, 4096), _CHUNK) if size >= 0 else _CHUNK)
    if len(first) == size < _CHUNK:
        digest = xxhash.xxh3_128_hexdigest(first)
    else:
        h = xxhash.xxh3_128()
        while chunk:
            h.update(chunk)
            chunk = os.read(fd, _CHUNK)
        digest = h.hexdigest()
    return THIN_PREFIX + digest if first.startswith(_THIN) else digest


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
    entries to write back. What this build learns is kept flat, one slot per file (at
    100 000 steps, dicts of tuples of big ints were 600 bytes a file): the slot's stat in
    `_stat` (FIELDS int64s), its entry's digest in `_content` (None: its entry, if any, is
    `cache`'s), the digest taken in this build in `_now` ("" not taken, None missing), and
    in `_flags` whether that entry was racy and whether `_stat` is the stat the file had
    when `_now` was taken (`moved`). Where both are set they are the same stat: an entry's
    key is that stat, its mtime -1 when it was racy (so it never matches: hashed again).
    `_stat` is a memoryview of native int64s over a bytearray with room to spare, made
    anew (and copied) when full (`startup.cheap.int64s`, not `array`: docs/performance.md#start-up-rules).
    """

    def __init__(self, cache: dict[str, tuple[StatKey, str]],
                 lookup: Callable[[str], tuple[StatKey, str] | None] | None = None) -> None:
        self.cache = cache
        self.lookup = lookup  # where entries missing from `cache` may be found (state.db)
        self.changed: dict[str, tuple[StatKey, str] | None] = {}
        self.hashed = 0  # files actually read, for reporting and tests
        self._slot: dict[str, int] = {}
        self._stat = int64s(FIELDS * _FIRST_SLOTS)
        # When each slot's stat was put, counted in stats put (`puts`): whether a digest was
        # taken before a run started (`taken_before`), so that its stat since can vouch for
        # what the run read.
        self.puts = 0
        self._put_at = int64s(_FIRST_SLOTS)
        self._content: list[str | None] = []
        self._now: list[str | None] = []
        self._flags = bytearray()
        self.unstable: set[str] = set()  # files seen to change during this build
        self.since_stat: os.stat_result | None = None  # the stat `since` took last
        # Whether a path (of a size) has a digest that also covers its mtime: a build.ninja's
        # stamps, whose consumers run whenever they were touched, as in ninja
        # (farmer/graph/ninja_cutoff.py).
        self.timed: Callable[[str, int], bool] | None = None

    def _slot_of(self, path: str) -> int:
        slot = self._slot.get(path)
        if slot is None:
            slot = self._slot[path] = len(self._now)
            self._now.append("")
            self._content.append(None)
            self._flags.append(0)
            if FIELDS * slot == len(self._stat):
                self._grow()
        return slot

    def _grow(self) -> None:
        """Room for a quarter more slots, and then some (their stat zeros until `_put`)."""
        old = self._stat
        slots = len(old) // FIELDS
        grown = int64s(FIELDS * (slots + slots // 4 + _FIRST_SLOTS))
        grown[:len(old)] = old
        self._stat = grown
        put_at = int64s(len(grown) // FIELDS)
        put_at[:slots] = self._put_at[:slots]
        self._put_at = put_at

    def _put(self, slot: int, key: StatKey) -> None:
        stat, j = self._stat, FIELDS * slot
        stat[j], stat[j + 1], stat[j + 2], stat[j + 3] = key
        self._put_at[slot] = self.puts
        self.puts += 1

    def _stat_at(self, slot: int) -> StatKey:
        j = FIELDS * slot
        return tuple(self._stat[j:j + FIELDS])  # type: ignore[return-value]

    def _key(self, slot: int) -> StatKey:
        """The stat key of the slot's entry, as state.db keeps it."""
        mtime, size, ino, ctime = self._stat_at(slot)
        return (-1 if self._flags[slot] & _RACY else mtime, size, ino, ctime)

    def _entry(self, slot: int | None, path: str) -> tuple[StatKey, str] | None:
        """The slot's entry if it has one, else `cache`'s."""
        if slot is not None:
            content = self._content[slot]
            if content is not None:
                return self._key(slot), content
        return self.cache.get(path)

    def digest(self, path: str, st: os.stat_result | None = None) -> str | None:
        """The content digest of `path`, or None when it does not exist (a dangling symlink
        counts as missing). Raises NotAFile for a directory or other non-file. A thin
        archive's digest covers its members' digests: its own bytes are only their names.
        `st`: its stat, taken just before by the caller (one stat less)."""
        slot = self._slot.get(path)
        if slot is not None:
            known = self._now[slot]
            if known != "":
                return known
        try:
            if st is None:
                st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return self._missing(path)
        except PermissionError:
            return self._unreadable(path)
        if not statmod.S_ISREG(st.st_mode):
            raise NotAFile(path)
        key = stat_key(st)
        cached = self._entry(slot, path)
        if cached is None and self.lookup is not None:
            cached = self.lookup(path)
        if slot is None:
            slot = self._slot_of(path)
        if cached is not None and cached[0] == key:
            digest = cached[1]
            if self._content[slot] is None:  # `cache`'s entry: the slot keeps only the stat
                self._put(slot, key)
            self._flags[slot] = _SEEN
        else:
            started = time.time_ns()
            try:
                digest = hash_file(path, st.st_size)
            except (FileNotFoundError, NotADirectoryError):  # removed since the stat
                return self._missing(path)
            except PermissionError:
                return self._unreadable(path)
            self.hashed += 1
            racy = started - st.st_mtime_ns < RACY_NS or started - st.st_ctime_ns < RACY_NS
            same = self._content[slot]
            if same is not None and same == digest:  # hashed again (it was racy): one str, not two
                digest = same
            self._put(slot, key)
            self._content[slot] = digest
            self._flags[slot] = _SEEN | _RACY if racy else _SEEN
            # a racy entry's key never matches: hashed again next time
            self.changed[path] = ((-1, key[1], key[2], key[3]) if racy else key, digest)
        if digest.startswith(THIN_PREFIX):
            members = thin_members(path) or []
            parts = [digest, *members]
            self._now[slot] = digest  # an archive that lists itself
            for member in members:
                try:
                    parts.append(self.digest(member) or "missing")
                except NotAFile:
                    parts.append("not-a-file")
            digest = hash_text(*parts)
        if self.timed is not None and self.timed(path, st.st_size):
            digest = hash_text(digest, str(st.st_mtime_ns))
        self._now[slot] = digest
        return digest

    def _unreadable(self, path: str) -> str:
        """A file farmer may not read (chmod 000): nothing vouches for its content, so its
        digest matches no other and what reads it is never up to date (the command that
        reads it fails on its own, with its own message)."""
        slot = self._slot_of(path)
        digest = self._now[slot] = f"unreadable-{time.time_ns()}"
        self._flags[slot] &= ~_SEEN
        return digest

    def _missing(self, path: str) -> None:
        slot = self._slot_of(path)
        self._now[slot] = None
        self._flags[slot] &= ~_SEEN
        if self._content[slot] is not None or path in self.cache:
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
        tell: `since_stat` is that stat, for `digest`), False otherwise (or when it was
        not taken)."""
        slot = self._slot.get(path)
        if slot is None:
            return False
        flags, taken = self._flags[slot], self._now[slot]
        if not flags & _SEEN and taken is not None:  # not taken, or unreadable
            return False
        try:
            st = self.since_stat = os.stat(path)
            now: StatKey | None = stat_key(st)
        except (FileNotFoundError, NotADirectoryError):
            now = None
        except OSError:
            return True
        if taken is None:  # missing then
            return now is not None
        if now != self._stat_at(slot):
            return True
        return None if flags & _RACY else False

    def total_size(self, paths: list[str]) -> int:
        """Bytes in the files of `paths` as last seen (for fitting durations to input size)."""
        total = 0
        slots, content, stat = self._slot, self._content, self._stat
        for p in paths:
            slot = slots.get(p)
            if slot is not None and content[slot] is not None:
                total += stat[FIELDS * slot + 1]
            else:
                entry = self.cache.get(p)
                if entry is not None:
                    total += entry[0][1]
        return total

    def entries(self) -> dict[str, tuple[StatKey, str]]:
        """The stat cache as it stands: `cache` with the entries this build made."""
        entries = dict(self.cache)
        for path, slot in self._slot.items():
            if self._content[slot] is not None:
                entries[path] = (self._key(slot), self._content[slot])  # type: ignore[assignment]
        return entries

    def taken(self, path: str) -> tuple[bytes, str, bool] | None:
        """What the no-op proof records of `path` if it was digested in this build (and not
        forgotten since): its stat then (`stattable.packed`'s bytes), its digest, and
        whether it was racy (so that only its content can vouch for it)."""
        slot = self.taken_slot(path)
        return None if slot is None else self.taken_at(slot)

    def taken_slot(self, path: str) -> int | None:
        """Where `taken` keeps `path` (numbered from 0, fewer than `slots`), if it has it."""
        slot = self._slot.get(path)
        return None if slot is None or not self._flags[slot] & _SEEN else slot

    def taken_at(self, slot: int) -> tuple[bytes, str, bool]:
        """`taken` of the path at `slot`. A racy file's digest is its bytes' (`hash_file`'s),
        which the proof hashes again to vouch for it: a timed digest (`timed`) covers the
        mtime as well, which the proof's stat check compares first; a thin archive's keeps
        its members' digests, which no hash of its own bytes matches (it is looked at anew)."""
        j = FIELDS * slot
        digest, racy = self._now[slot], bool(self._flags[slot] & _RACY)
        if racy:
            content = self._content[slot]
            if content is not None and not content.startswith(THIN_PREFIX):
                digest = content
        return self._stat[j:j + FIELDS].tobytes(), digest, racy  # type: ignore[return-value]

    def slots(self) -> int:
        return len(self._now)

    def taken_digest(self, path: str) -> str | None:
        """`taken`'s digest alone."""
        slot = self.taken_slot(path)
        return None if slot is None else self._now[slot]

    def taken_paths(self) -> Iterator[str]:
        """Every path `taken` knows."""
        flags = self._flags
        return (path for path, slot in self._slot.items() if flags[slot] & _SEEN)

    def learn(self, path: str, content: str) -> None:
        """`path` was just written with bytes of digest `content` (as `hash_file` gives it;
        restored from a cache, verified while copied): remembered as if hashed now."""
        st = os.stat(path)
        slot = self._slot_of(path)
        racy = time.time_ns() - min(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS  # as `digest`: hash again
        self._put(slot, stat_key(st))
        self._content[slot] = content
        self._flags[slot] = _RACY if racy else 0
        self.changed[path] = (self._key(slot), content)
        self._now[slot] = ""
        if not content.startswith(THIN_PREFIX) and (self.timed is None or not self.timed(path, st.st_size)):
            self._now[slot] = content  # what `digest` would compute from these bytes
            self._flags[slot] |= _SEEN

    def content(self, path: str) -> str | None:
        """The digest of `path`'s bytes as last hashed (`hash_file`'s), which `digest` may
        have combined with more (a thin archive's members, a time stamp)."""
        slot = self._slot.get(path)
        entry = self._entry(slot, path)
        if entry is None and self.lookup is not None and slot is not None and \
                (self._flags[slot] & _SEEN or self._now[slot] is None):  # seen (or missing) in this build
            entry = self.lookup(path)  # vouched for by state.db's entry
        return None if entry is None else entry[1]

    def seen(self, path: str) -> StatKey | None:
        """The stat `path` had when its digest was taken in this build (None: not taken, or
        missing then): whoever copies the file can tell it is still that content."""
        slot = self.taken_slot(path)
        return None if slot is None else self._stat_at(slot)

    def taken_before(self, path: str, mark: int) -> str | None:
        """`taken_digest` of `path` if it was taken with a stat put before `puts` was
        `mark` (and not forgotten since), else None."""
        slot = self._slot.get(path)
        if slot is None or not self._flags[slot] & _SEEN or self._put_at[slot] >= mark:
            return None
        return self._now[slot]

    def forget(self, path: str) -> None:
        """`path` may have changed (a computation just wrote it): look again next time."""
        slot = self._slot.get(path)
        if slot is not None:
            self._now[slot] = ""
            self._flags[slot] &= ~_SEEN


_FIRST_SLOTS = 256  # `Digests._stat`'s room at first, in slots
_RACY, _SEEN = 1, 2  # `Digests._flags`


def digest_or_changed(digests: Digests, path: str) -> str | None:
    """`digests.digest(path)`, or "not-a-file" for a path that is not a regular file."""
    try:
        return digests.digest(path)
    except NotAFile:
        return "not-a-file"
