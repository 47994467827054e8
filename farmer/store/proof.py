"""The no-op proof: what the last successful build rested on, so that the next build of the
same targets can tell what changed by looking at stat data alone.

At the end of a successful build farmer writes the proof: the Farmfile's digest, the
targets, the listings foreach and globs matched, the graph it indexes, and for every
computation the files its verdict rests on (inputs, discovered inputs, outputs, world
inputs) with their stat data (mtime_ns, size, inode, ctime_ns) as it was when their content
was hashed. A file hashed within the racy window of its last change (it could change again
within the same time-stamp tick and keep its stat) is recorded with its digest, and only
its content can vouch for it: it is hashed again when its stat says it is unchanged
("racily clean", as git calls such index entries).

The next build with the same Farmfile and targets stats those files. When every one is as
recorded, every computation is up to date by the rule a full check applies (the stat
cache's: equal stat data, equal content) and the build ends at once (farmer/build/noop.py).
Otherwise only the computations with a changed file (`Proof.dirty`) and what is downstream
of them need a look; the rest are up to date. A build removes the stat data before it runs
anything and writes it anew only if it ends well.

This module holds the proof's format; the no-op build that checks it is farmer/build/noop.py.
It is on the path of every no-op build, before anything else is imported: it imports only
what that path needs.
"""

from __future__ import annotations

import marshal
import os
import sys

from farmer import __version__
from farmer.files.atomic import FileRange, OpenFile, Part, load_marshalled, unnamed_file, write_all, write_atomically
from farmer.files.digests import code_stamp, hash_file, hash_text
from farmer.files.stattable import STAT_BYTES, StatKey, stat_of
from farmer.startup.cheap import int64s, int64s_of
from farmer.store import proof_check

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from farmer.files.digests import Digests

# Two files. The snapshot holds what changes only with the graph: the files, the tasks of
# last-build.json, and per computation the files it rests on. It is three lengths (8 bytes
# each), then a marshalled part with what a no-op reads, the tasks as they go into
# last-build.json (copied from file to file by the kernel), and a marshalled part that
# only an incremental build reads: tables laid flat in native int64s (the files never leave
# the machine), read through memoryviews of their bytes, not made into tens of thousands of
# Python lists. STATS holds the stat data (files/stattable.py's flat table),
# rewritten by every good build; both name the same serial, so a pair never mixes two
# builds' files.
NAME = "noop.snapshot"
STATS = "noop.stats"
_FORMAT = 10
_HEAD = 24


def _key(farmfile: str, digest: str, targets: list[str]) -> str:
    return hash_text(farmfile, __version__, sys.version, code_stamp(), digest, "\0targets", *targets)


class Proof:
    __slots__ = ("paths", "stats", "racy", "tasks", "count", "files_of", "ends", "selected",
                 "graph", "changed", "key", "listings", "serial", "_rest", "_position",
                 "_rests", "_resting", "_exiting")

    def __init__(self, paths: list[str], stats: bytearray, racy: dict[int, str],
                 tasks: bytes | FileRange, count: int, files_of: list[list[int]] | None = None,
                 ends: list[int] | memoryview | None = None, selected: list[int] | None = None,
                 rest: FileRange | None = None) -> None:
        self._exiting: list[int] = []  # checker children that answered and are ending (`check`)
        self.paths = paths
        self.stats = stats  # stat data in the order of `paths` (stattable.table)
        self.racy = racy  # index into paths -> digest: files only their content vouches for
        # last-build.json's tasks when every computation is up to date (a JSON array, ASCII
        # bytes, or where they lie in the snapshot read), and how many there are; `ends`:
        # where each one's entry ends in `tasks`.
        self.tasks, self.count, self.ends = tasks, count, ends
        # Per computation, in the build's order (the order of `tasks`): its index in the
        # graph, and the indices into `paths` of the files it rests on. As read, these are
        # `_rests` (a flat table, `Flat`) and `files_of` is None until a row is replaced;
        # `_resting` is the same relation by file: the computations resting on each.
        self.selected, self.files_of = selected, files_of
        self._rests: Flat | None = None
        self._resting: Flat | None = None
        self.graph = ""  # the identity of the graph `selected` indexes (Graph.identify)
        self.changed: set[int] | None = None  # indices of files not as recorded (`check`)
        self._rest = rest  # the second part, unread until `files_of` or `selected` is needed
        self._position: dict[str, int] | None = None
        self.key, self.listings, self.serial = "", {}, ""  # as read (`read`)

    @staticmethod
    def of(entries: Iterable[list[str]], selected: list[int],
           spill: str | os.PathLike | None = None) -> Proof:
        """A proof of no file yet, for computations with these last-build.json
        entries, given a list at a time (all at once, then as one str, then bytes, would be three
        copies: see bench/results/performance-notes.md#figures-from-code-comments). With `spill` (a
        directory), the entries go to a file with no name there as they come and `tasks` is
        its range, which the snapshot copies, not held."""
        ends, k, at = int64s(len(selected)), 0, 0
        fd = None if spill is None else unnamed_file(spill)
        tasks, spilled, more = bytearray(b"["), 0, False
        for some in entries:
            if not some:
                continue
            for entry in some:
                at += 1 + len(entry)  # "[" or ","
                if k == len(ends):
                    ends = _grown(ends, k)
                ends[k] = at
                k += 1
            tasks += (b"," if more else b"") + ",".join(some).encode()
            more = True
            if fd is not None:
                fd, tasks, spilled = _spilled(fd, tasks, spilled)
        tasks += b"]"
        ends = ends[:k]
        if fd is not None:
            fd, tasks, spilled = _spilled(fd, tasks, spilled)
            if fd is not None:
                return Proof([], bytearray(), {}, FileRange(OpenFile(fd), 0, spilled), len(selected),
                             None, ends, selected)
        return Proof([], bytearray(), {}, tasks, len(selected), None, ends, selected)

    def check(self, meanwhile: Callable[[], object] | None = None) -> set[int]:
        """Stat every file (and hash the racy ones that kept their stat): the indices of
        those not as recorded. `meanwhile`: called while forked children stat the rest, once
        a changed file is seen (proof_check.changed_in_parallel)."""
        paths, stats = self.paths, self.stats
        changed = proof_check.changed_in_parallel(paths, stats, meanwhile, self._exiting)
        if changed is None:
            changed = set(proof_check.changed(paths, stats, 0, len(paths)))
        for n, digest in self.racy.items():
            if n not in changed and _content(paths[n]) != digest:
                changed.add(n)
        self.changed = changed
        return changed

    def reap(self) -> None:
        """Wait for the checker children `check` left ending: done once the build has other
        work to do meanwhile (or when the proof goes)."""
        proof_check.reap(self._exiting)

    def __del__(self) -> None:
        self.reap()

    def load_rest(self) -> None:
        """Read the snapshot's second part; one that cannot be read leaves `selected` None
        (the proof then fits no graph: session.proven_selection)."""
        if self.selected is None and self._rest is not None:
            rest, self._rest = self._rest, None
            try:
                rests, resting, ends, selected, graph = load_marshalled(rest.bytes())
                self._rests, self._resting = Flat.of(*rests), Flat.of(*resting)
                self.ends = int64s_of(ends)
                if (len(self._rests.starts), len(self._resting.starts), len(self.ends)) != \
                        (self.count + 1, len(self.paths) + 1, self.count):
                    raise ValueError("the tables do not fit the snapshot")
            except (OSError, EOFError, ValueError, TypeError):
                self._rests = self._resting = None
                return
            self.selected, self.graph = selected, graph

    def dirty(self) -> set[int]:
        """The positions (in the build's order) of the computations a file of which
        changed (checking the files first, unless `check` did)."""
        changed = self.check() if self.changed is None else self.changed
        self.load_rest()
        self.reap()
        if not changed:
            return set()
        if self.files_of is None and self._resting is not None:
            row = self._resting.row
            return {k for n in changed for k in row(n)}
        return {k for k, files in enumerate(self.rows()) if not changed.isdisjoint(files)}

    def rests(self, k: int) -> list[int]:
        """The indices of the files the computation at position `k` rests on."""
        if self.files_of is None and self._rests is not None:
            return self._rests.row(k)
        return self.rows()[k]

    def rows(self) -> list[list[int]]:
        """`rests` of every position, made into lists (to replace some: `files_of`)."""
        if self.files_of is None:
            self.load_rest()
            rests = self._rests
            self.files_of = [rests.row(k) for k in range(self.count)] if rests is not None else []
        return self.files_of

    def position(self) -> dict[str, int]:
        """Each file's index in `paths`."""
        if self._position is None:
            self._position = dict(zip(self.paths, range(len(self.paths))))
        return self._position

    def kept(self, path: str) -> StatKey | None:
        """The stat data of `path` if the proof has it and it kept it (after `check`)."""
        n = self.position().get(path)
        if n is None or self.changed is None or n in self.changed:
            return None
        return stat_of(self.stats, n)

    def kept_files(self, positions: set[int]) -> set[str]:
        """The files the computations at `positions` rest on that kept their stat data (so
        exist), after `check`."""
        changed, paths = self.changed or set(), self.paths
        return {paths[n] for k in positions for n in self.rests(k) if n not in changed}

    def tasks_with(self, entries: dict[int, str]) -> list[Part]:
        """`tasks` with the entries at these positions replaced, in parts (slices of
        `tasks`, not copies)."""
        if not entries:
            return [self.tasks]
        self.load_rest()
        tasks = self.tasks if isinstance(self.tasks, FileRange) else memoryview(self.tasks)
        parts: list[Part] = []
        at = 0
        for k in sorted(entries):
            start = self.ends[k - 1] + 1 if k else 1
            parts += [tasks[at:start], entries[k].encode()]
            at = self.ends[k]
        parts.append(tasks[at:])
        return parts

    def rest_part(self) -> tuple:
        """The snapshot's second part, as `load_rest` reads it."""
        self.load_rest()
        if self.files_of is None and self._rests is not None:  # as read or made: no row was replaced
            rests, resting = self._rests, self._resting
        else:
            rests, resting = Flat.laid(self.rows()), None
        if resting is None:
            resting = self._resting = rests.by_row_item(len(self.paths))
        return (rests.raw(), resting.raw(), _raw(self.ends or []), self.selected, self.graph)


class Flat:
    """A table of rows of ints laid flat in two sequences of int64: where each row starts in
    `items` (one more than there are rows: the last is where the last row ends), and the
    rows' items one after the other (a CSR matrix's indptr and indices). As read from a
    snapshot, memoryviews of its bytes."""

    __slots__ = ("starts", "items")

    def __init__(self, starts: memoryview | list[int], items: memoryview | list[int]) -> None:
        self.starts, self.items = starts, items

    @staticmethod
    def laid(rows: list[list[int]]) -> Flat:
        starts, items = [0], []
        for row in rows:
            items += row
            starts.append(len(items))
        return Flat(starts, items)

    @staticmethod
    def of(starts: bytes, items: bytes) -> Flat:
        """As `raw` gave them; ValueError or TypeError if they do not make a table."""
        flat = Flat(int64s_of(starts), int64s_of(items))
        if not len(flat.starts) or flat.starts[0] != 0 or flat.starts[-1] != len(flat.items):
            raise ValueError("not a flat table")
        return flat

    def raw(self) -> tuple[bytes, bytes]:
        return _raw(self.starts), _raw(self.items)

    def row(self, k: int) -> list[int]:
        starts = self.starts
        row = self.items[starts[k]:starts[k + 1]]
        return row if isinstance(row, list) else row.tolist()

    def by_row_item(self, size: int) -> Flat:
        """The transposed table: for each item value in range(size), the rows holding it,
        in order (counted first, then placed: no list per value)."""
        starts, items = self.starts, self.items
        counts = int64s(size + 1)
        for n in items:
            counts[n + 1] += 1
        for n in range(size):
            counts[n + 1] += counts[n]
        placed = int64s(len(items))
        free = int64s(size)
        free[:] = counts[:-1]
        for k in range(len(starts) - 1):
            for n in items[starts[k]:starts[k + 1]]:
                placed[free[n]] = k
                free[n] += 1
        return Flat(counts, placed)


def _grown(ints: memoryview, used: int) -> memoryview:
    """`ints`, whose first `used` are taken, with twice the room."""
    grown = int64s(2 * used + 16)
    grown[:used] = ints[:used]
    return grown


def _raw(ints: memoryview | list[int]) -> bytes:
    """The bytes `int64s_of` reads back as `ints`."""
    if not isinstance(ints, list):  # a memoryview of them
        return ints.tobytes()
    if not ints:
        return b""
    from array import array  # only to write a snapshot (it imports collections)

    return array("q", ints).tobytes()


def matches(proof: Proof, farmfile: str | os.PathLike, digest: str | None, targets: list[str]) -> bool:
    """Whether `proof` was read for this Farmfile's bytes and these targets."""
    return digest is not None and proof.key == _key(os.fspath(farmfile), digest, targets)


def _content(path: str) -> str | None:
    try:
        return hash_file(path)
    except OSError:
        return None


def update(old: Proof | None, rests_on: Iterable[tuple[int, list[str]]], taken: Digests,
           written: Callable[[str], bool], selected: list[int], rank: dict[int, int],
           entries: Iterable[list[str]] | None, graph: str,
           spill: str | os.PathLike | None = None) -> tuple[Proof, bool] | None:
    """The proof after a good build, and whether its snapshot changed (else only its stat
    data is written anew); None when no proof holds. Nobody else touches a proof's arrays.

    `rests_on`: per computation checked this build (every selected one, in order, without
    `old`), the files its verdict rests on, taken one at a time; `taken`: every file
    digested this build, with its stat, digest and whether it was racy, as when digested
    (grains.Digests); `written`: whether a path is an output of what ran; `rank`: each
    selected computation's position in `old`; `entries`: without `old`, the last-build.json
    entries of `selected` when all are up to date, a list at a time; `graph`: its identity;
    `spill`: where a first proof keeps those entries until written (Proof.of)."""
    if old is None:
        first = _first(rests_on, taken, selected, entries or (), graph, spill)
        return None if first is None else (first, True)
    rests_on = dict(rests_on)
    known = _known(old, rests_on, taken, rank)
    changed = old.changed

    def kept(path: str) -> bytes | None:  # as Proof.kept, through `known`: packed stat data
        n = known.get(path)
        return None if n is None or changed is None or n in changed else \
            bytes(old.stats[STAT_BYTES * n:STAT_BYTES * n + STAT_BYTES])

    for p in taken.taken_paths():
        was = kept(p)
        if was is not None and taken.taken(p)[0] != was and not written(p):  # type: ignore[index]
            return None  # seen unchanged at the start, yet changed since: clean ones may rest on it
    # its second part read by open_session (Proof.dirty)
    proof = Proof(list(old.paths), bytearray(old.stats), dict(old.racy), old.tasks, old.count,
                  None if old.files_of is None else list(old.files_of), old.ends, old.selected)
    proof._rests, proof._resting = old._rests, old._resting
    proof.serial, proof.graph = old.serial, old.graph
    position = dict(known)
    snapshot = False  # whether the files the proof rests on changed
    for i, paths in rests_on.items():
        indices = []
        for p in paths:
            n = position.get(p)
            if n is None or kept(p) is None:
                now = taken.taken(p)
                if now is None:
                    return None  # neither digested in this build nor known unchanged: no proof
                if n is None:
                    n = position[p] = len(proof.paths)
                    proof.paths.append(p)
                    proof.stats += now[0]
            indices.append(n)
        k = rank[i]
        if proof.rests(k) != indices:
            proof.rows()[k], snapshot = indices, True
    for p in taken.taken_paths():  # as it was when digested
        n = position.get(p)
        if n is not None:
            stat, digest, racy = taken.taken(p)  # type: ignore[misc]
            proof.stats[STAT_BYTES * n:STAT_BYTES * n + STAT_BYTES] = stat
            if racy:
                proof.racy[n] = digest
            else:
                proof.racy.pop(n, None)
    if any(taken.taken(old.paths[n]) is None for n in changed or ()):
        proof, snapshot = _compacted(proof), True  # a changed file nothing rests on any more
    return proof, snapshot


def _spilled(fd: int, tasks: bytearray, spilled: int) -> tuple[int | None, bytearray, int]:
    """`tasks` written after the `spilled` bytes of file `fd`; if it cannot be (a full disk),
    the file closed and all of it held instead."""
    try:
        write_all(fd, tasks)
        return fd, bytearray(), spilled + len(tasks)
    except OSError:
        try:
            return None, bytearray(os.pread(fd, spilled, 0)) + tasks, 0
        finally:
            os.close(fd)


def _first(rests_on: Iterable[tuple[int, list[str]]], taken: Digests, selected: list[int],
           entries: Iterable[list[str]], graph: str, spill: str | os.PathLike | None) -> Proof | None:
    """The proof of a build without one: every selected computation's files, in order, laid
    flat as they come (no list per computation)."""
    proof = Proof.of(entries, selected, spill)
    proof.graph = graph
    paths, stats, racy = proof.paths, proof.stats, proof.racy
    at = int64s(taken.slots(), -1)  # each file's index in `paths`, by its slot in `taken`
    starts, items = int64s(proof.count + 1), int64s(4 * proof.count + 16)
    rows = used = 0
    known: dict[str, int] = {}  # (many computations rest on one file: a world's set-up's)
    for _, files in rests_on:
        for p in files:
            n = known.get(p, -1)
            if n < 0:
                slot = taken.taken_slot(p)
                if slot is None:
                    return None  # not digested in this build: nothing vouches for it
                n = at[slot]
                if n < 0:
                    n = at[slot] = len(paths)
                    paths.append(p)
                    stat, digest, was_racy = taken.taken_at(slot)
                    stats += stat
                    if was_racy:
                        racy[n] = digest
                known[p] = n
            if used == len(items):
                items = _grown(items, used)
            items[used] = n
            used += 1
        rows += 1
        if rows == len(starts):
            return None  # more rows than computations
        starts[rows] = used
    if rows != proof.count:
        return None
    proof._rests = Flat(starts, items[:used])
    return proof


def _known(old: Proof, rests_on: dict[int, list[str]], taken: Digests, rank: dict[int, int]) -> dict[str, int]:
    """The index in `old.paths` of every path `update` looks up that `old` has. Those are
    nearly always among the files the computations checked again rested on before, so
    only those are indexed; when one is not, all of `old.paths` are."""
    paths = old.paths
    local = {paths[n]: n for i in rests_on for n in old.rests(rank[i])}
    if all(p in local for p in taken.taken_paths()) and \
            all(p in local for files in rests_on.values() for p in files):
        return local
    return old.position()


def _compacted(proof: Proof) -> Proof:
    """The proof without the files no computation rests on."""
    position: dict[int, int] = {}
    paths, stats, racy, files_of = [], bytearray(), {}, []
    for files in proof.rows():
        indices = []
        for n in files:
            m = position.get(n)
            if m is None:
                m = position[n] = len(paths)
                paths.append(proof.paths[n])
                stats += proof.stats[STAT_BYTES * n:STAT_BYTES * n + STAT_BYTES]
                if n in proof.racy:
                    racy[m] = proof.racy[n]
            indices.append(m)
        files_of.append(indices)
    compact = Proof(paths, stats, racy, proof.tasks, proof.count, files_of, proof.ends,
                    proof.selected)
    compact.graph = proof.graph
    return compact


def forget(farmer_dir: str | os.PathLike) -> None:
    """A build is about to change things: the old proof no longer holds. (Its snapshot
    stays: without its stat data it proves nothing, and the build may reuse it.)"""
    try:
        os.unlink(os.path.join(farmer_dir, STATS))
    except FileNotFoundError:
        pass


def write(farmer_dir: str | os.PathLike, farmfile: str | os.PathLike, digest: str,
          targets: list[str], listings: dict[str, str], proof: Proof, snapshot: bool) -> None:
    """Write the proof: its stat data, and with `snapshot` (the files it rests on are not
    those of the snapshot it was read from) its snapshot first."""
    try:  # failing to write it only costs the next build time
        if snapshot or not proof.serial:
            proof.load_rest()
            proof.serial = os.urandom(8).hex()
            first = marshal.dumps((_FORMAT, _key(os.fspath(farmfile), digest, targets), listings,
                                   proof.serial, proof.paths, proof.count))
            rest = marshal.dumps(proof.rest_part())
            head = b"".join(len(part).to_bytes(8, "little") for part in (first, proof.tasks, rest))
            write_atomically(os.path.join(farmer_dir, NAME), [head, first, proof.tasks, rest], 0o600)
        write_stats(farmer_dir, proof)
    except OSError:
        pass


def write_stats(farmer_dir: str | os.PathLike, proof: Proof) -> None:
    """Write the proof's stat data alone (its snapshot is unchanged)."""
    head = marshal.dumps((proof.serial, proof.racy))
    write_atomically(os.path.join(farmer_dir, STATS),
                     [len(head).to_bytes(8, "little"), head, memoryview(proof.stats)], 0o600)


def read(farmer_dir: str | os.PathLike, farmfile: str | os.PathLike, digest: str,
         targets: list[str]) -> Proof | None:
    """The proof left by the last good build of these targets from this very Farmfile,
    while the listings its foreach patterns and globs matched are the same."""
    try:
        with open(os.path.join(farmer_dir, STATS), "rb") as f:
            data = memoryview(f.read())
        length = int.from_bytes(data[:8], "little")
        serial, racy = marshal.loads(data[8:8 + length])
        stats = bytearray(data[8 + length:])
        snapshot = OpenFile.open(os.path.join(farmer_dir, NAME))
        if snapshot is None:
            return None
        head = snapshot.read(0, _HEAD)
        first, size, last = (int.from_bytes(head[k:k + 8], "little") for k in (0, 8, 16))
        if _HEAD + first + size + last != snapshot.size:
            return None
        fmt, key, listings, written_as, paths, count = load_marshalled(snapshot.read(_HEAD, first))
        tasks = FileRange(snapshot, _HEAD + first, size)
        rest = FileRange(snapshot, _HEAD + first + size, last)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if fmt != _FORMAT or key != _key(os.fspath(farmfile), digest, targets) or serial != written_as \
            or len(stats) != STAT_BYTES * len(paths):
        return None
    proof = Proof(paths, stats, racy, tasks, count, rest=rest)
    proof.key, proof.listings, proof.serial = key, listings, serial
    return proof if listings_hold(proof, farmfile) else None


def listings_hold(proof: Proof, farmfile: str | os.PathLike) -> bool:
    """Whether the folders the proof's foreach patterns and globs listed list the same now."""
    if proof.listings:
        from farmer.graph.matching import list_files, listing_digest

        root = os.path.dirname(os.fspath(farmfile))
        for prefix, listed in proof.listings.items():
            if listing_digest(list_files(root, prefix)) != listed:
                return False
    return True

