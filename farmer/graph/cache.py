"""The expanded graph, cached in `.farmer/graph.cache` so that a build with an unchanged
Farmfile does not parse TOML or traverse again.

The cache is keyed by the Farmfile's bytes, farmer's and Python's versions and the root;
it also holds a digest of every directory listing that foreach patterns and globs matched
against, and is used only while each listing is the same. Inputs that may have appeared or
vanished since are re-checked on load. A cache that cannot be read is ignored.
"""

from __future__ import annotations

import marshal
import os
import sys

from farmer import __version__
from farmer.files.atomic import OpenFile, load_marshalled, write_atomically
from farmer.files.digests import code_stamp, hash_bytes, hash_text
from farmer.graph.graph import Computation, Graph
from farmer.manifest.spec import CacheSpec, RemoteSpec, Spec, WorldSpec

_FORMAT = 10
_MAPS = ("producer", "by_task", "order", "by_id")  # read only when first used (CachedGraph)
_CHUNK = 64  # computations per separately marshalled chunk
# The row format: a computation is stored as the tuple of these fields, in this order, and
# made again with Computation(*row), so they are its constructor's parameters in its order
# (tests/test_unit_graphcache.py checks it). The cache's key includes them. A Farmfile's
# computations have no `ninja` (None), so every field is marshallable as it is.
_ROW = ("index", "id", "task", "wildcards", "inputs", "outputs", "depfile", "kind", "action",
        "env", "world", "cost", "cpus", "pool", "timeout", "always", "cache", "world_setup",
        "missing", "fingerprint", "producers", "consumers", "validates", "remote", "ninja")
_WORLD_FIELDS = WorldSpec.__slots__
NAME = "graph.cache"


def key(farmfile: str | os.PathLike, text: bytes) -> str:
    return hash_text(os.fspath(farmfile), __version__, sys.version, ",".join(_ROW),
                     ",".join(_WORLD_FIELDS), ",".join(CacheSpec.__slots__), ",".join(RemoteSpec.__slots__), code_stamp()) + hash_bytes(text)


def load(farmer_dir: str | os.PathLike, farmfile: str | os.PathLike,
         text: bytes) -> tuple[Spec, Graph] | None:
    pieces = _Pieces.open(os.path.join(farmer_dir, NAME))
    if pieces is None:
        return None
    try:
        fmt, stored_key, count, listings, world_inputs, spec_data, identity = pieces.header
    except (TypeError, ValueError):
        return None
    if fmt != _FORMAT or stored_key != key(farmfile, text):
        return None
    farmfile = os.fspath(farmfile)
    root = os.path.dirname(farmfile) or "."
    if listings:
        from farmer.graph.matching import list_files, listing_digest
    for prefix, digest in listings.items():
        if listing_digest(list_files(root, prefix)) != digest:
            return None
    default, variables, pools, worlds, cache, remote, check_deps = spec_data
    spec = Spec(path=farmfile, root=root, default=default, vars=variables, pools=pools,
                worlds={w[0]: WorldSpec(*w) for w in worlds}, tasks={},
                cache=None if cache is None else CacheSpec(*cache),
                remote=None if remote is None else RemoteSpec(*remote), check_deps=check_deps)
    graph = CachedGraph(pieces, root, Computations(pieces, count), listings, world_inputs)
    graph.identity = identity
    return spec, graph


def save(farmer_dir: str | os.PathLike, farmfile: str | os.PathLike, text: bytes, spec: Spec,
         graph: Graph) -> None:
    """Write the cache atomically; failing to write it only costs the next build time."""
    comps = graph.computations
    worlds = [tuple(getattr(w, f) for f in _WORLD_FIELDS) for w in spec.worlds.values()]
    pieces = [marshal.dumps(tuple(getattr(graph, name) for name in _MAPS))]
    # A chunk's rows at a time: a large graph's rows all at once would be one more copy of
    # the graph in memory (see bench/results/performance-notes.md#figures-from-code-comments).
    pieces += [marshal.dumps([tuple(getattr(c, f) for f in _ROW) for c in comps[k:k + _CHUNK]])
               for k in range(0, len(comps), _CHUNK)]
    header = (_FORMAT, key(farmfile, text), len(comps), graph.listings, graph.world_inputs,
              (spec.default, spec.vars, spec.pools, worlds,
               None if spec.cache is None else tuple(getattr(spec.cache, f) for f in CacheSpec.__slots__),
               None if spec.remote is None else tuple(getattr(spec.remote, f) for f in RemoteSpec.__slots__),
               spec.check_deps),
              graph.identify())
    try:
        write_atomically(os.path.join(farmer_dir, NAME), _Pieces.layout(header, pieces), 0o600)
    except (OSError, ValueError):
        pass


class _Pieces:
    """The cache file: an 8-byte length, a marshalled header (the cache's key and what every
    build needs, with where each piece ends), then the pieces, each marshalled alone and read
    from the file when first used (the maps, then each chunk of computations): an
    incremental build reads the few pieces its change reaches, a small part of the file
    (see bench/results/performance-notes.md#figures-from-code-comments)."""

    __slots__ = ("_file", "header", "_offsets")

    def __init__(self, file: OpenFile, header: tuple, offsets: list[int]) -> None:
        self._file, self.header, self._offsets = file, header, offsets

    @staticmethod
    def layout(header: tuple, pieces: list[bytes]) -> list[bytes]:
        ends, at = [], 0
        for piece in pieces:
            at += len(piece)
            ends.append(at)
        head = marshal.dumps((header, ends))
        return [len(head).to_bytes(8, "little"), head, *pieces]

    @staticmethod
    def open(path: str) -> _Pieces | None:
        """The file's header and pieces, or None if it cannot be read or is cut short."""
        file = OpenFile.open(path)
        if file is None:
            return None
        try:
            length = int.from_bytes(file.read(0, 8), "little")
            header, ends = load_marshalled(file.read(8, length))
            start = 8 + length
            if not ends or start + ends[-1] != file.size:
                return None
        except (OSError, EOFError, ValueError, TypeError):
            return None
        return _Pieces(file, header, [start] + [start + end for end in ends])

    def read(self, k: int) -> object:
        start, end = self._offsets[k], self._offsets[k + 1]
        return load_marshalled(self._file.read(start, end - start))


class CachedGraph(Graph):
    """A graph read from the cache. Its maps (the producer of each output, each task's
    computations, the ids, the order) are unmarshalled when first used: a build that has
    the no-op proof uses none of them (a tenth of a second at 100 000 computations)."""

    __slots__ = ("_pieces",)

    def __init__(self, pieces: _Pieces | None, root: str, computations: Computations,
                 listings: dict[str, str], world_inputs: dict[str, list[str]]) -> None:
        # Graph's own __init__ would need the maps: the fields are set here, the maps left
        # unset until `__getattr__` is asked for one.
        self._pieces = pieces
        self.root, self.computations = root, computations
        self.listings, self.world_inputs = listings, world_inputs
        self.missing_known = False  # learnt at selection (graph.check_inputs)
        self.paths_first = False
        self.identity = ""
        self.inside_checked = False  # checked on the day it was made: the symlinks may differ now

    def __getattr__(self, name: str):  # only called for an attribute not set
        if name not in _MAPS or self._pieces is None:
            raise AttributeError(name)
        for field_name, value in zip(_MAPS, self._pieces.read(0)):
            setattr(self, field_name, value)
        self._pieces = None
        return getattr(self, name)


class Computations:
    """A cached graph's computations, each made when first asked for (`comps[i]`), a chunk
    at a time: a build that checks and runs a few of 10 000 computations makes a few
    hundred, not 10 000."""

    __slots__ = ("_pieces", "_made", "_count")

    def __init__(self, pieces: _Pieces, count: int) -> None:
        self._pieces = pieces
        self._made: list[Computation | None] = [None] * count
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> Computation:
        comp = self._made[i]
        if comp is None:
            self._make(i // _CHUNK)
            comp = self._made[i]
        return comp  # type: ignore[return-value]

    def __iter__(self):
        for i in range(self._count):
            yield self[i]

    def _make(self, chunk: int) -> None:
        start = chunk * _CHUNK
        made = self._made
        for k, row in enumerate(self._pieces.read(1 + chunk)):
            made[start + k] = Computation(*row)
