"""The graph of a ninja manifest, cached in `.farmer/ninja-graph.cache`, so that a build whose
manifests are unchanged does not parse them again: a large manifest takes many times longer to
read than its cache (see
docs/performance.md#buildninja-farmer-and-ninja-on-the-same-cmake-builds).

The cache holds the stat data (mtime_ns, size, inode, ctime_ns) of every manifest file read
(the top one, its includes and subninjas), taken before each was read, and is used only
while every one of them is the same. A file changed within 100 ms of being read could change
again within the same time stamp tick, so such a read is never cached (the next build
caches it). What depends on which other files exist (missing inputs, FORCE-style phonies,
defaults naming source files) is worked out again on every load (`FileChecks`). A cache that
cannot be read is ignored; removing it only costs one parse.
"""

from __future__ import annotations

import marshal
import os
import sys

from farmer import __version__
from farmer.files.atomic import save_marshalled
from farmer.files.digests import RACY_NS, hash_text, stat_key
from farmer.graph.graph import Computation, Graph, NinjaEdge
from farmer.graph.ninja_edges import FileChecks, apply_file_checks
from farmer.manifest.spec import Spec

NAME = "ninja-graph.cache"
_FORMAT = 2
# A computation is stored as the tuple of these, in order, its `ninja` as NinjaEdge.row().
_FIELDS = tuple(f for f in Computation.FIELDS if f != "ninja")  # the constructor's order; ninja last
_EDGE_FIELDS = NinjaEdge.__slots__


_READER = ("manifest/ninja_lexer.py", "manifest/ninja_parser.py", "graph/ninja_edges.py",
           "graph/ninja_cache.py", "build/ninja.py")


def _code_stamp() -> list:
    """The reader's own sources: a farmer that reads manifests differently ignores the cache."""
    package = os.path.dirname(os.path.dirname(__file__))
    return [tuple(stat_key(os.stat(os.path.join(package, name)))) for name in _READER]


def _key(manifest: str) -> str:
    return hash_text(manifest, __version__, sys.version, ",".join(_FIELDS), ",".join(_EDGE_FIELDS), str(_FORMAT),
                     repr(_code_stamp()))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def load(farmer_dir: str, manifest: str) -> tuple[Spec, Graph, list[str]] | None:
    """The cached spec, graph and warnings, or None when any manifest file changed."""
    try:
        data = marshal.loads(_read(os.path.join(farmer_dir, NAME)))
        (fmt, key, files, warnings, (pools, digest), rows, producer, by_task, order, by_id,
         (needed, force, defaults)) = data
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if fmt != _FORMAT or key != _key(manifest):
        return None
    try:
        for path, recorded in files:
            if stat_key(os.stat(path)) != tuple(recorded):
                return None
    except OSError:
        return None
    comps = [Computation(*row[:-1], ninja=None if row[-1] is None else NinjaEdge(*row[-1]))
             for row in rows]
    root = os.path.dirname(manifest)
    spec = Spec(path=manifest, root=root, default=None, vars={}, pools=pools, worlds={},
                tasks={}, digest=digest)
    graph = Graph(root=root, computations=comps, producer=producer, by_task=by_task,
                  order=order, by_id=by_id, paths_first=True)
    apply_file_checks(spec, graph, FileChecks(needed, force, defaults))
    return spec, graph, warnings


def manifest_files(farmer_dir: str, manifest: str) -> list[tuple[str, tuple]] | None:
    """The manifest files the cache was made from, with the stat data each had before it
    was read; None without a cache this farmer can use."""
    try:
        data = marshal.loads(_read(os.path.join(farmer_dir, NAME)))
        fmt, key, files = data[:3]
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if fmt != _FORMAT or key != _key(manifest):
        return None
    return [(path, tuple(recorded)) for path, recorded in files]


def save(farmer_dir: str, manifest: str, files: list[tuple[str, tuple, int]],
         warnings: list[str], spec: Spec, graph: Graph, checks: FileChecks) -> None:
    """Write the cache atomically, unless a manifest file was read too soon after it changed.
    `files`: (absolute path, stat key, ns time the stat was taken) of every manifest file."""
    for _, key, taken in files:
        if taken - key[0] < RACY_NS or taken - key[3] < RACY_NS:
            return
    rows = [(*(getattr(c, f) for f in _FIELDS), None if c.ninja is None else c.ninja.row())
            for c in graph.computations]
    data = (_FORMAT, _key(manifest), [(p, k) for p, k, _ in files], warnings,
            (spec.pools, spec.digest), rows, graph.producer, graph.by_task, graph.order,
            graph.by_id, (checks.needed, checks.force, checks.defaults))
    save_marshalled(os.path.join(farmer_dir, NAME), data)  # without it the next build only parses again
