"""A project: its Farmfile read and traversed into a graph, through the graph cache."""

from __future__ import annotations

import os

from farmer.files.digests import hash_bytes
from farmer.graph.graph import Graph
from farmer.manifest.spec import Spec, read
from farmer.startup.cheap import collector_paused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

GRAPH_CACHE = "graph.cache"  # graph/cache.py's NAME, which a first build has no file of


def load(path: str | os.PathLike, write_cache: bool) -> tuple[Spec, Graph]:
    """Read the Farmfile at `path` and expand it; the project root becomes the working
    directory. Only commands that hold the lock write the cache (`write_cache`)."""
    spec, graph, save = load_later(path)
    if write_cache and save is not None:
        save()
    return spec, graph


def load_later(path: str | os.PathLike) -> tuple[Spec, Graph, Callable[[], None] | None]:
    """As `load`, with the graph cache's write handed back (None: the graph came from the
    cache): a build makes it once its first commands have started, since only the next
    build reads it."""
    path = os.fspath(path)
    root = os.path.dirname(path) or "."
    text = read(path)
    farmer_dir = os.path.join(root, ".farmer")
    # Without the file, nothing to read: a first build imports graph/cache.py once its first
    # commands have started, to write it (the build's `Deferred`: build/deferred.py).
    cached = None
    if os.path.exists(os.path.join(farmer_dir, GRAPH_CACHE)):
        from farmer.graph import cache as graphcache

        cached = graphcache.load(farmer_dir, path, text)
    if cached is not None:
        os.chdir(root)
        cached[0].digest = hash_bytes(text)
        return cached[0], cached[1], None
    # Here: a build from the graph cache never parses (farmfile.py, tomllib) nor traverses.
    from farmer.graph.traversal import traverse
    from farmer.manifest import farmfile

    with collector_paused():  # parsing and traversing make objects and free almost none
        spec = farmfile.parse_text(path, text)
        spec.digest = hash_bytes(text)
        os.chdir(spec.root)
        graph = traverse(spec)
    # What the tasks declared is in the graph now; a spec from the cache has no tasks either
    # (a large Farmfile's TaskSpecs would be held to the build's end: see
    # bench/results/issue17-passes.md#memory-of-a-100k-clean-build).
    spec.tasks = {}
    return spec, graph, lambda: _save(farmer_dir, path, text, spec, graph)


def _save(farmer_dir: str, path: str, text: bytes, spec: Spec, graph: Graph) -> None:
    from farmer.graph import cache as graphcache

    graphcache.save(farmer_dir, path, text, spec, graph)
