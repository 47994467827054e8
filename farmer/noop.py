"""The no-op proof: a build that finds nothing changed since the last successful build of
the same targets says so without reading the graph or the traces.

At the end of a successful build, farmer writes `.farmer/noop.snapshot`: the Farmfile's
digest, the targets, the listings foreach and globs matched, and the stat data (mtime_ns,
size, inode, ctime_ns) of every file the build's verdicts rest on (inputs, discovered
inputs, outputs, world inputs), each as it was when its content was hashed. The next build
with the same Farmfile and targets stats those files; when every one is as recorded, every
computation is up to date by the same rule a full check applies (the stat cache's rule:
equal stat data, equal content), and the build ends there. Anything else - a stat that
differs, a racy entry, a listing that changed - means the full build, which removes the
snapshot before it runs anything and writes a new one only if it ends well.
"""

from __future__ import annotations

import json
import marshal
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from farmer import __version__
from farmer.grains import StatKey, hash_text, stat_key
from farmer.lock import ProjectLock

NAME = "noop.snapshot"
_FORMAT = 1


def _key(farmfile: Path, digest: str, targets: list[str]) -> str:
    return hash_text(str(farmfile), __version__, sys.version, digest, "\0targets", *targets)


def forget(farmer_dir: Path) -> None:
    """A build is about to change things: the old proof no longer holds."""
    try:
        os.unlink(farmer_dir / NAME)
    except FileNotFoundError:
        pass


def write(farmer_dir: Path, farmfile: Path, digest: str, targets: list[str],
          listings: dict[str, str], files: dict[str, StatKey], tasks: list[dict]) -> None:
    """Record the proof; racy entries (hashed too soon after a change) make none."""
    if any(key[0] < 0 for key in files.values()):
        return
    paths = sorted(files)
    data = (_FORMAT, _key(farmfile, digest, targets), listings, paths, [files[p] for p in paths],
            len(tasks), json.dumps(tasks, separators=(",", ":")))
    tmp = farmer_dir / (NAME + ".tmp")
    try:
        tmp.write_bytes(marshal.dumps(data))
        os.replace(tmp, farmer_dir / NAME)
    except OSError:  # without the proof the next build only takes longer
        pass


def holds(farmer_dir: Path, farmfile: Path, digest: str, targets: list[str]) -> tuple[int, str] | None:
    """(number of computations, their last-build.json entries) when nothing changed."""
    try:
        fmt, key, listings, paths, stats, total, tasks = marshal.loads((farmer_dir / NAME).read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if fmt != _FORMAT or key != _key(farmfile, digest, targets):
        return None
    if listings:
        from farmer.traversal import list_files, listing_digest

        root = farmfile.parent
        for prefix, digest in listings.items():
            if listing_digest(list_files(root, prefix)) != digest:
                return None
    st = os.stat
    try:
        for path, recorded in zip(paths, stats):
            if stat_key(st(path)) != tuple(recorded):
                return None
    except OSError:
        return None
    return total, tasks


def try_build(farmfile: Path, targets: list[str], jobs: int) -> int | None:
    """Finish a no-op build here, or return None for the full build. The working directory
    is the project root."""
    started_at = datetime.now(timezone.utc)
    t0 = time.monotonic()
    try:
        text = farmfile.read_bytes()
    except OSError:
        return None  # the full path says what is wrong
    farmer_dir = farmfile.parent / ".farmer"
    if not (farmer_dir / NAME).exists():
        return None
    with ProjectLock(farmer_dir):
        proof = holds(farmer_dir, farmfile, hash_text(text.decode("utf-8", "surrogateescape")), targets)
        if proof is None:
            return None
        total, tasks = proof
        wall = time.monotonic() - t0
        from farmer.report import Counts, summary_line, write_text_atomically

        head = json.dumps({
            "farmer_version": __version__, "started_at": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "jobs": jobs, "status": "ok", "wall_s": round(wall, 4), "critical_path_s": 0.0,
            "predicted_makespan_s": 0.0}, separators=(",", ":"))
        write_text_atomically(farmer_dir / "last-build.json", head[:-1] + ',"tasks":' + tasks + "}\n")
        print(summary_line(Counts(up_to_date=total), wall, 0.0, "ok"), flush=True)
    return 0
