"""The no-op build: the last good build's proof checked (farmer/store/proof.py), and when
nothing changed, the build ended here: last-build.json written and the summary printed,
before click or the build engine is imported.

When a file did change, the build goes on to the full path: its modules are imported while
the proof's forked checker children stat the rest of the files, on a CPU that would
otherwise wait for them (`Proof.check`'s `meanwhile`: the warm-ups below). Only then: a
no-op imports none of them. The warm-ups live here, in the build package, so that the
proof's format imports nothing of the engine.

This module is on the path of every no-op build: it imports only what that path needs.
"""

from __future__ import annotations

import os
import time

from farmer.errors import UsageError
from farmer.files.digests import RACY_NS, hash_bytes
from farmer.files.stattable import stat_of
from farmer.manifest import spec
from farmer.report.lastbuild import Counts, header, summary_line
from farmer.report.lastbuild import write as write_last_build
from farmer.store.proof import STATS, Proof, read, write_stats

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def warm_manifest_engine() -> None:
    """What a ninja manifest's build goes on with: the build engine."""
    import farmer.build.run  # noqa: F401


def warm_farmfile_engine() -> None:
    """What a Farmfile's build goes on with: the build engine, and what it reads its project
    and state with."""
    import farmer.build.run  # noqa: F401
    import farmer.graph.load  # noqa: F401
    import farmer.plan.stale  # noqa: F401


def _farmfile_bytes(path: str) -> bytes | None:
    """The Farmfile's bytes, or None for the full path to say what is wrong with it."""
    try:
        return spec.read(path)
    except UsageError:
        return None


def try_build(farmfile: str, targets: list[str], jobs: int, digest: str | None = None,
              ending: str = "summary",
              check: Callable[[Proof], set[int]] | None = None,
              reader: Callable[[str, str, str, list[str]], Proof | None] = read,
              writer: Callable[[str, dict, list], None] = write_last_build) -> int | Proof | None:
    """Finish a no-op build here (its exit status), or leave the build to the full path:
    with the proof, checked (what changed is known), or None. The working directory is the
    project root, and the caller holds the project's lock. `digest`: what the proof is keyed
    by when it is not the Farmfile's bytes (a ninja manifest's, from farmer/store/ninja_stamp.py);
    `ending`: what it prints at its end: "summary" farmer's summary line, "ninja" ninja's
    `ninja: no work to do.` (`farmer ninja`), "" nothing (`farmer ninja --quiet`).
    `check`: what tells which of the proof's files changed, instead of `Proof.check` (a
    server's, which looks only where the kernel saw changes: farmer/build/watched.py);
    `reader` and `writer`: how the proof is read and last-build.json written (a server keeps
    the proof it read and stages last-build.json's bulk ahead: farmer/build/watched.py)."""
    started_at = time.time()
    t0 = time.monotonic()
    farmer_dir = os.path.join(os.path.dirname(farmfile), ".farmer")
    if not os.path.exists(os.path.join(farmer_dir, STATS)):
        return None
    manifest = digest is not None
    if digest is None:
        text = _farmfile_bytes(farmfile)
        if text is None:
            return None
        digest = hash_bytes(text)
    proof = reader(farmer_dir, farmfile, digest, targets)
    if proof is None:
        return proof
    changed = check(proof) if check is not None else \
        proof.check(warm_manifest_engine if manifest else warm_farmfile_engine)
    if changed:
        return proof
    if proof.racy and time.time_ns() - max(max(stat_of(proof.stats, n)[::3]) for n in proof.racy) > RACY_NS:
        # Each racy file vouched for by its content, and now far enough from its last
        # change for its stat to vouch next time: spare the next builds the hashing.
        proof.racy = {}
        try:
            write_stats(farmer_dir, proof)
        except OSError:
            pass
    wall = time.monotonic() - t0
    writer(farmer_dir, header(started_at, jobs, "ok", wall, 0.0, 0.0), [proof.tasks])
    proof.reap()  # its checker child ended while last-build.json was written
    if ending == "summary":
        print(summary_line(Counts(up_to_date=proof.count), wall, 0.0, "ok"), flush=True)
    elif ending == "ninja":
        print("ninja: no work to do.", flush=True)
    return 0
