"""World fingerprints: a world is identified by its parent's fingerprint, its setup lines,
its inputs' digests, its env, the Python version, and the digests of the files its set-up
read when it last ran (the modules it imported, the files it opened: run/worlds/reads.py),
which state.db keeps with the world (`setup_reads`)."""

from __future__ import annotations

import os
import sys

from farmer.files.digests import Digests, digest_or_changed, hash_text
from farmer.manifest import template
from farmer.manifest.spec import Spec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def fingerprints(spec: Spec, digests: Digests,
                 setup_reads: Callable[[str], list[tuple[str, str | None]]] | None = None) -> dict[str, str]:
    """Every world's fingerprint now; `setup_reads(name)`: the files world `name`'s set-up
    read, each with the digest it read (None: its digest now), when it last ran (none
    known: the world's declared part alone, as before any set-up was recorded)."""
    out: dict[str, str] = {}

    def fp(name: str) -> str:
        if name not in out:
            w = spec.worlds[name]
            parent = fp(w.parent) if w.parent else ""
            # Paths as traversal resolves them: `[vars]` substituted (unknown names were
            # reported there already).
            paths = [os.path.normpath(template.render(p, {}, {}, spec.vars, False)) for p in w.inputs]
            inputs = [f"{p}={digest_or_changed(digests, p)}" for p in paths]
            env = [f"{k}={v}" for k, v in sorted(w.env.items())]
            read = setup_reads(name) if setup_reads is not None else []
            if read:
                env += ["\0read", *(f"{p}={d or digest_or_changed(digests, p) or 'missing'}" for p, d in read)]
            out[name] = hash_text(parent, sys.version, "\0setup", *w.setup, "\0inputs", *inputs,
                                  "\0env", *env)
        return out[name]

    for name in spec.worlds:
        fp(name)
    return out
