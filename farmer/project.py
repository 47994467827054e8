"""A project: its Farmfile read and traversed into a graph, through the graph cache."""

from __future__ import annotations

import os

from farmer import graphcache
from farmer.atomic import collector_paused
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

    with collector_paused():  # parsing and traversing make objects and free almost none
        spec = farmfile.parse_text(path, text)
        spec.digest = hash_bytes(text)
        os.chdir(spec.root)
        graph = traverse(spec)
    # What the tasks declared is in the graph now; a spec from the cache has no tasks either
    # (100 000 TaskSpecs are about 40 MB a build would hold to its end).
    spec.tasks = {}
    if write_cache:
        graphcache.save(farmer_dir, path, text, spec, graph)
    return spec, graph
