"""The graph cache (farmer/graph/cache.py): a build with an unchanged Farmfile reads the
expanded graph back instead of traversing, reading each piece (the maps, each chunk of
computations) from the file only when it is used; a cache cut short or of another format
is ignored, and a graph already read keeps reading its own file after a new cache
replaces it."""

from __future__ import annotations

import os

import pytest

from farmer.graph import cache as graphcache
from farmer.graph import load as project
from farmer.graph.cache import CachedGraph

FARMFILE = """
[task.step]
foreach = "src/{name}.txt"
inputs = ["src/{name}.txt"]
outputs = ["out/{name}.txt"]
cmd = "cp {inputs} {outputs}"

[task.all]
inputs = ["@step"]
outputs = ["out/all.txt"]
cmd = "cat {inputs} > {outputs}"
"""


@pytest.fixture
def farmfile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # project.load enters the project root
    (tmp_path / "src").mkdir()
    for n in range(200):  # several chunks of computations
        (tmp_path / "src" / f"s{n:03}.txt").write_text(f"{n}\n")
    path = tmp_path / "Farmfile"
    path.write_text(FARMFILE)
    return str(path)


def cache_path(farmfile: str) -> str:
    return os.path.join(os.path.dirname(farmfile), ".farmer", graphcache.NAME)


def described(graph) -> list[tuple]:
    return [(c.id, c.task, c.inputs, c.outputs, c.action, sorted(c.consumers))
            for c in graph.computations]


def test_the_cached_graph_is_the_traversed_one(farmfile):
    assert not os.path.exists(cache_path(farmfile))  # a first load: nothing to read
    assert project.GRAPH_CACHE == graphcache.NAME  # what project.py looks for before importing this
    spec, fresh = project.load(farmfile, write_cache=True)
    assert not isinstance(fresh, CachedGraph)
    _, cached = project.load(farmfile, write_cache=True)
    assert isinstance(cached, CachedGraph)
    assert len(cached.computations) == 201
    assert described(cached) == described(fresh)
    assert cached.by_id == fresh.by_id and cached.order == fresh.order
    assert cached.producer == fresh.producer and cached.by_task == fresh.by_task
    assert cached.identify() == fresh.identify()


def test_a_cache_cut_short_or_of_garbage_is_ignored(farmfile):
    project.load(farmfile, write_cache=True)
    path = cache_path(farmfile)
    with open(path, "rb") as f:
        whole = f.read()
    for damaged in (whole[:-1], whole[:20], whole[:4], b"", whole + b"x",
                    (1 << 60).to_bytes(8, "little") + whole[8:], os.urandom(3000)):
        with open(path, "wb") as f:
            f.write(damaged)
        _, graph = project.load(farmfile, write_cache=False)
        assert not isinstance(graph, CachedGraph), damaged[:16]
        assert len(graph.computations) == 201


def test_a_graph_read_before_the_cache_was_replaced_reads_its_own_file(farmfile, tmp_path):
    project.load(farmfile, write_cache=True)
    _, old = project.load(farmfile, write_cache=False)
    assert isinstance(old, CachedGraph)
    # Another expansion is cached in its place (a new file renamed over it, as always).
    (tmp_path / "Farmfile").write_text(FARMFILE.replace("cp {inputs}", "cp -p {inputs}"))
    project.load(farmfile, write_cache=True)
    _, new = project.load(farmfile, write_cache=False)
    assert isinstance(new, CachedGraph)
    assert new.computations[150].action.startswith("cp -p ")
    assert old.computations[150].action.startswith("cp src/")  # not from the new file
    assert old.by_id["out/s150.txt"] == 150


def test_the_row_format_is_the_computation_s_parameters_in_order():
    """A row is made again with Computation(*row): reordering or adding a field of the class
    without the row (or the other way round) would read every cached graph wrong."""
    from farmer.graph.graph import Computation

    params = Computation.__init__.__code__.co_varnames[1:Computation.__init__.__code__.co_argcount]
    assert params == graphcache._ROW
    assert set(graphcache._ROW) == set(Computation.FIELDS)


def test_a_cached_graph_answers_every_field_of_a_graph_and_its_computations(farmfile):
    from farmer.graph.graph import Graph

    traversed = project.load(farmfile, write_cache=True)[1]
    cached = project.load(farmfile, write_cache=False)[1]
    assert isinstance(cached, CachedGraph)
    for name in Graph.__slots__:
        if name not in ("computations", "missing_known", "paths_first", "identity",
                        "inside_checked"):  # learnt, not stored; computations below
            assert getattr(cached, name) == getattr(traversed, name), name
    # the traversal checked its outputs against the symlinks of now; a build checks the
    # cached graph's again (tests/test_symlinks_outside.py)
    assert traversed.inside_checked and not cached.inside_checked
    for a, b in zip(traversed.computations, cached.computations, strict=True):
        assert {f: getattr(a, f) for f in graphcache._ROW if f != "missing"} == \
            {f: getattr(b, f) for f in graphcache._ROW if f != "missing"}
