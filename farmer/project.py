"""A project: its Farmfile read and traversed into a graph, through the graph cache."""

from __future__ import annotations

import gc
import os

from farmer import graphcache
from farmer.grains import hash_bytes
from farmer.graph import Graph
from farmer.spec import Spec, read


def load(path: str | os.PathLike, write_cache: bool) -> tuple[Spec, Graph]:
    """Read the Farmfile at `path` and expand it; the project root becomes the working
    directory. Only commands that hold the lock write the cache (`write_cache`)."""
    path = os.fspath(path)
    root = os.path.dirname(path) or "."
    text = read(path)
    farmer_dir = os.path.join(root, ".farmer")
    cached = graphcache.load(farmer_dir, path, text)
    if cached is not None:
        os.chdir(root)
        cached[0].digest = hash_bytes(text)
        return cached
    # Here: a build from the graph cache never parses (farmfile.py, tomllib) nor traverses.
    from farmer import farmfile
    from farmer.traversal import traverse

    # Parsing and traversing allocate a few objects per computation and free almost
    # nothing: the cyclic collector would scan the growing heap again and again for no
    # garbage (a quarter of a cold load of 100k computations), so it waits till the end.
    collecting = gc.isenabled()
    gc.disable()
    try:
        spec = farmfile.parse_text(path, text)
        spec.digest = hash_bytes(text)
        os.chdir(spec.root)
        graph = traverse(spec)
    finally:
        if collecting:
            gc.enable()
    if write_cache:
        graphcache.save(farmer_dir, path, text, spec, graph)
    return spec, graph
