"""World fingerprints (SPEC §2): a world is identified by its parent's fingerprint, its
setup lines, its inputs' digests and the Python version."""

from __future__ import annotations

import os
import sys

from farmer.files.digests import Digests, digest_or_changed, hash_text
from farmer.manifest import template
from farmer.manifest.spec import Spec


def fingerprints(spec: Spec, digests: Digests) -> dict[str, str]:
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
            out[name] = hash_text(parent, sys.version, "\0setup", *w.setup, "\0inputs", *inputs,
                                  "\0env", *env)
        return out[name]

    for name in spec.worlds:
        fp(name)
    return out
