"""A project: its Farmfile read and traversed into a graph, through the graph cache."""

from __future__ import annotations

import os
from pathlib import Path

from farmer import farmfile, graphcache
from farmer.farmfile import Spec
from farmer.grains import hash_bytes
from farmer.graph import Graph
from farmer.traversal import traverse


def load(path: Path, write_cache: bool) -> tuple[Spec, Graph]:
    """Read the Farmfile at `path` and expand it; the project root becomes the working
    directory. Only commands that hold the lock write the cache (`write_cache`)."""
    text = farmfile.read(path)
    farmer_dir = path.parent / ".farmer"
    cached = graphcache.load(farmer_dir, path, text)
    if cached is not None:
        os.chdir(path.parent)
        cached[0].digest = hash_bytes(text)
        return cached
    spec = farmfile.parse_text(path, text)
    spec.digest = hash_bytes(text)
    os.chdir(spec.root)
    graph = traverse(spec)
    if write_cache:
        graphcache.save(farmer_dir, path, text, spec, graph)
    return spec, graph

