"""The no-op proof (farmer/store/proof.py) checked where the kernel saw changes: `farmer
serve`'s no-op. Instead of one stat per file the last good build rested on, a stat of the
files the watcher (farmer/files/inotify.py) names as changed since that proof was checked,
of those below a folder it saw made, moved or removed, and of those it cannot vouch for:
outside the watched tree (an absolute path, a folder it could not watch), symlinks (their
target changes under another name), and files with more than one hard link. The racy files
are hashed, as a full check hashes them.
"""

from __future__ import annotations

import os
from bisect import bisect_left

from farmer.files.digests import hash_file
from farmer.files.stattable import stat_key_of, stat_of
from farmer.report.lastbuild import Ahead
from farmer.store.proof import NAME, STATS, listings_hold, read

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.files.inotify import Watcher
    from farmer.store.proof import Proof


class WatchedCheck:
    """`check(proof)`: the indices of its files not as recorded, as `Proof.check` returns
    them, looking only where `watcher` says something may have changed."""

    __slots__ = ("watcher", "noops", "full", "proofs", "ahead", "_key", "_sorted", "_unwatched", "_position")

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.proofs = KeptProof()  # the no-op's `reader`: the proof read once, not at each no-op
        self.ahead = Ahead()  # its `writer`: last-build.json staged while the server waits
        self.noops = 0  # builds this check ended as no-ops
        self.full = 0  # builds that checked every file instead
        self._key: tuple | None = None
        self._sorted: list[str] = []  # the proof's paths, sorted (for the folders' prefixes)
        self._unwatched: list[int] = []
        self._position: dict[str, int] = {}  # each path's index, kept while the proof's paths are

    def check(self, proof: Proof) -> set[int]:
        paths, stats = proof.paths, proof.stats
        key = (proof.serial, len(paths), self.watcher.generation)
        if key != self._key:  # (a proof's serial names its paths: proof.py)
            self._position = proof.position()
            self._sorted = sorted(paths)
            self._unwatched = unwatched(paths, self.watcher.watched)
            self._key = key
            # Their folders outside the tree watched from now on: each of their files is
            # checked this time (after its folder is watched: a change made before is seen
            # here, one made after comes as an event), and from then on when named.
            outside = {os.path.dirname(paths[n]) for n in self._unwatched if _outside(paths[n])}
            suspects = set(self._unwatched)
            if outside:
                now = self.watcher.watch_outside(sorted(outside))
                self._unwatched = unwatched(paths, self.watcher.watched | now)
        else:
            suspects = set(self._unwatched)
        position = self._position
        for path in self.watcher.dirty:
            n = position.get(path)
            if n is not None:
                suspects.add(n)
        for folder in self.watcher.dirty_dirs:
            suspects.update(position[p] for p in below(self._sorted, folder))
        changed = {n for n in suspects if stat_key_of(paths[n]) != stat_of(stats, n)}
        for n, digest in proof.racy.items():
            if n not in changed and _content(paths[n]) != digest:
                changed.add(n)
        proof.changed = changed
        return changed


def below(ordered: list[str], folder: str) -> list[str]:
    """The paths of `ordered` (sorted) under `folder` ("": all of them)."""
    if not folder:
        return list(ordered)
    prefix = folder + "/"
    start = bisect_left(ordered, prefix)
    end = start
    while end < len(ordered) and ordered[end].startswith(prefix):
        end += 1
    return ordered[start:end]


def _outside(path: str) -> bool:
    """Whether `path` (as a proof spells it) names a file outside the project's tree."""
    return os.path.isabs(path) or path.startswith("../")


def unwatched(paths: list[str], watched: set[str]) -> list[int]:
    """The indices of the paths a watcher of the folders `watched` (as the paths spell
    them) cannot vouch for."""
    found = []
    for n, path in enumerate(paths):
        if os.path.dirname(path) not in watched:
            found.append(n)
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue  # missing: an event will say when it comes (its folder is watched)
        if st.st_nlink > 1 or (st.st_mode & 0o170000) == 0o120000:  # hard-linked, a symlink
            found.append(n)
    return found


def _content(path: str) -> str | None:
    try:
        return hash_file(path)
    except OSError:
        return None


class KeptProof:
    """The no-op proof a server read, handed to its next no-ops (`read`, as
    farmer/store/proof.py's) while its two files are those it was read from: the server
    holds the project's lock, so only its own builds replace them, and a build that may
    change what the proof rests on removes its stat file first."""

    __slots__ = ("proof", "_stamp", "_asked")

    def __init__(self) -> None:
        self.proof: Proof | None = None
        self._stamp: tuple | None = None
        self._asked: tuple | None = None

    def read(self, farmer_dir: str, farmfile: str, digest: str, targets: list[str]) -> Proof | None:
        stamp = _stamp(farmer_dir)  # taken first: files replaced while read are read again next time
        asked = (farmer_dir, farmfile, digest, tuple(targets))
        proof = self.proof
        if proof is not None and stamp is not None and (stamp, asked) == (self._stamp, self._asked):
            proof.changed = None
            return proof if listings_hold(proof, farmfile) else None
        proof = read(farmer_dir, farmfile, digest, targets)
        self.proof, self._stamp, self._asked = (proof, stamp, asked) if stamp is not None else (None, None, None)
        return proof

    def forget(self) -> None:
        """The proof went on to a build (which may change what it holds): read it again."""
        self.proof = self._stamp = self._asked = None


def _stamp(farmer_dir: str) -> tuple | None:
    try:
        return tuple((st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
                     for st in (os.stat(os.path.join(farmer_dir, name)) for name in (STATS, NAME)))
    except OSError:
        return None
