"""What a build.ninja no-op rests on besides the no-op proof: the manifest files and the
inputs of the edge that regenerates the manifest, with their stat data.

The proof (farmer/store/proof.py) is keyed by a digest of the manifest files' bytes, which only a
parse of the manifest finds (its includes and subninjas). Once a build's first commands
have started, this module writes `.farmer/ninja.stamp`: that digest, and the stat data of
every manifest file (as the ninja graph cache recorded it before reading them) and of the
regeneration edge's inputs (CMakeLists.txt, meson.build and the like, taken before the
build checked that edge: a no-op's proof covers the targets built, and the regeneration
edge is rarely one of them). While every one of these files keeps its stat data, the
manifest is the one the proof was made from and needs no regenerating, so the proof can be
checked without importing the engine or parsing the manifest (`digest`). The stamp vouches
only for that digest: a build that fails or is stopped leaves no proof beside it (the
proof's stat data is removed before a build runs anything and written only after a good
one), and the next build then takes the full way. A file changed within the racy window of
its stat is not recorded (the next build writes the stamp).

Like noop.py, this is on the path of every no-op build: only os, marshal and farmer's
light modules.
"""

from __future__ import annotations

import marshal
import os
import time

from farmer.files.atomic import load_marshalled, write_atomically
from farmer.files.digests import RACY_NS, StatKey

NAME = "ninja.stamp"
_FORMAT = 1


def observe(paths: list[str]) -> list[tuple[str, StatKey]] | None:
    """The stat data of these files now; None if one is missing or changed too recently
    for its stat data to vouch for it."""
    now = time.time_ns()
    out = []
    for path in paths:
        try:
            s = os.stat(path)
        except OSError:
            return None
        if now - s.st_mtime_ns < RACY_NS or now - s.st_ctime_ns < RACY_NS:
            return None
        out.append((path, (s.st_mtime_ns, s.st_size, s.st_ino, s.st_ctime_ns)))
    return out


def write(farmer_dir: str, manifest: str, digest: str,
          files: list[tuple[str, StatKey]]) -> None:
    try:  # without it the next no-op only takes the longer way
        write_atomically(os.path.join(farmer_dir, NAME),
                         [marshal.dumps((_FORMAT, manifest, digest, files))], 0o600)
    except OSError:
        pass


def forget(farmer_dir: str) -> None:
    try:
        os.unlink(os.path.join(farmer_dir, NAME))
    except FileNotFoundError:
        pass


def digest(farmer_dir: str, manifest: str) -> str | None:
    """The digest of the manifest the last good build read, while none of the files the
    stamp names changed; None otherwise."""
    try:
        with open(os.path.join(farmer_dir, NAME), "rb") as f:
            fmt, path, found, files = load_marshalled(f.read())
        if fmt != _FORMAT or path != manifest:
            return None
        for name, recorded in files:
            s = os.stat(name)
            if (s.st_mtime_ns, s.st_size, s.st_ino, s.st_ctime_ns) != tuple(recorded):
                return None
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return found
