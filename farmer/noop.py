"""The no-op proof: what the last successful build rested on, so that the next build of the
same targets can tell what changed by looking at stat data alone.

At the end of a successful build farmer writes `.farmer/noop.snapshot`: the Farmfile's
digest, the targets, the listings foreach and globs matched, and for every computation the
files its verdict rests on (inputs, discovered inputs, outputs, world inputs) with their
stat data (mtime_ns, size, inode, ctime_ns) as it was when their content was hashed; an
entry hashed too soon after a change (racy) is recorded as never matching.

The next build with the same Farmfile and targets stats those files. When every one is as
recorded, every computation is up to date by the rule a full check applies (the stat
cache's: equal stat data, equal content) and the build ends at once (`try_build`).
Otherwise the computations whose files all kept their stat are still up to date, and only
the others need their traces checked (`Proof.clean`). The full build removes the proof
before it runs anything and writes a new one only if it ends well.
"""

from __future__ import annotations

import json
import marshal
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from farmer import __version__
from farmer.grains import StatKey, hash_bytes, hash_text, save_marshalled, stat_key
from farmer.lock import ProjectLock

NAME = "noop.snapshot"
_FORMAT = 2


def _key(farmfile: Path, digest: str, targets: list[str]) -> str:
    return hash_text(str(farmfile), __version__, sys.version, digest, "\0targets", *targets)


@dataclass(slots=True)
class Proof:
    paths: list[str]
    stats: list[StatKey]
    files_of: dict[str, list[int]]  # computation id -> indices into paths
    total: int
    tasks: str  # the last-build.json entries of a build where everything is up to date

    def unchanged(self) -> bool:
        """Every file as recorded (stops at the first that is not)."""
        st = os.stat
        try:
            for path, recorded in zip(self.paths, self.stats):
                if stat_key(st(path)) != recorded:
                    return False
        except OSError:
            return False
        return True

    def clean(self) -> tuple[set[str], dict[str, StatKey]]:
        """The ids of computations none of whose files changed, and the stat data of the
        files that kept theirs."""
        kept: dict[str, StatKey] = {}
        same = []
        for path, recorded in zip(self.paths, self.stats):
            try:
                ok = stat_key(os.stat(path)) == recorded
            except OSError:
                ok = False
            same.append(ok)
            if ok:
                kept[path] = recorded
        ids = {cid for cid, files in self.files_of.items() if all(same[f] for f in files)}
        return ids, kept


def forget(farmer_dir: Path) -> None:
    """A build is about to change things: the old proof no longer holds."""
    try:
        os.unlink(farmer_dir / NAME)
    except FileNotFoundError:
        pass


def write(farmer_dir: Path, farmfile: Path, digest: str, targets: list[str],
          listings: dict[str, str], proof: Proof) -> None:
    data = (_FORMAT, _key(farmfile, digest, targets), listings, proof.paths, proof.stats,
            proof.files_of, proof.total, proof.tasks)
    save_marshalled(farmer_dir / NAME, data)


def read(farmer_dir: Path, farmfile: Path, digest: str, targets: list[str]) -> Proof | None:
    """The proof left by the last good build of these targets from this very Farmfile,
    while the listings its foreach patterns and globs matched are the same."""
    try:
        fmt, key, listings, paths, stats, files_of, total, tasks = marshal.loads(
            (farmer_dir / NAME).read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if fmt != _FORMAT or key != _key(farmfile, digest, targets):
        return None
    if listings:
        from farmer.matching import list_files, listing_digest

        root = farmfile.parent
        for prefix, listed in listings.items():
            if listing_digest(list_files(root, prefix)) != listed:
                return None
    return Proof(paths, [tuple(s) for s in stats], files_of, total, tasks)


def try_build(farmfile: Path, targets: list[str], jobs: int) -> int | None:
    """Finish a no-op build here, or return None for the full build. The working directory
    is the project root."""
    started_at = datetime.now(timezone.utc)
    t0 = time.monotonic()
    farmer_dir = farmfile.parent / ".farmer"
    if not (farmer_dir / NAME).exists():
        return None
    from farmer.errors import UsageError
    from farmer.farmfile import read as read_farmfile

    try:
        text = read_farmfile(farmfile)  # not read_bytes: a FIFO in its place would block for ever
    except UsageError:
        return None  # the full path says what is wrong
    with ProjectLock(farmer_dir):
        proof = read(farmer_dir, farmfile, hash_bytes(text), targets)
        if proof is None or not proof.unchanged():
            return None
        wall = time.monotonic() - t0
        from farmer.report import Counts, last_build_header, summary_line, write_text_atomically

        head = json.dumps(last_build_header(started_at, jobs, "ok", wall, 0.0, 0.0), separators=(",", ":"))
        write_text_atomically(farmer_dir / "last-build.json", head[:-1] + ',"tasks":' + proof.tasks + "}\n")
        print(summary_line(Counts(up_to_date=proof.total), wall, 0.0, "ok"), flush=True)
    return 0

