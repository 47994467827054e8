"""Unit tests for farmer/graph/graph.py's Computation layout: the fields nearly always at their
defaults live in one shared settings object, which a computation copies before it changes
one, so a setting of one computation never shows up on another."""

from __future__ import annotations

import textwrap

from farmer.graph import cache as graphcache
from farmer.graph.graph import Computation
from farmer.graph.traversal import traverse
from farmer.manifest import farmfile

FARMFILE = """
[task.plain]
outputs = ["plain.txt"]
cmd = "echo > plain.txt"

[task.heavy]
outputs = ["heavy.txt"]
cmd = "echo > heavy.txt"
cpus = 2
timeout = 30
remote = false
cache = false
env = { MODE = "fast" }
"""


def test_declared_settings_stay_with_their_computation(tmp_path):
    (tmp_path / "Farmfile").write_text(textwrap.dedent(FARMFILE))
    graph = traverse(farmfile.load(tmp_path / "Farmfile"))
    plain = graph.computations[graph.by_id["plain.txt"]]
    heavy = graph.computations[graph.by_id["heavy.txt"]]
    assert (heavy.cpus, heavy.timeout, heavy.remote, heavy.cache, heavy.env) == (2, 30, False, False, {"MODE": "fast"})
    assert (plain.cpus, plain.timeout, plain.remote, plain.cache, plain.env) == (1, None, True, True, {})
    assert graph.computations[0].world is None and not graph.computations[0].always


def test_setting_a_field_changes_that_computation_alone():
    one, two = Computation(0, "a", "t"), Computation(1, "b", "t")
    one.remote = False
    one.pool = "link"
    assert (one.remote, one.pool) == (False, "link")
    assert (two.remote, two.pool) == (True, None)
    assert Computation(2, "c", "t").remote is True  # a new one starts from the defaults


def test_a_computation_survives_the_graph_cache_s_row_unchanged():
    comp = Computation(3, "x.o", "cc", inputs=["x.c"], outputs=["x.o"], env={"CC": "gcc"}, cpus=4,
                       pool="big", validates=[1], remote=False)
    again = Computation(*(getattr(comp, f) for f in graphcache._ROW))
    assert [getattr(again, f) for f in Computation.FIELDS] == [getattr(comp, f) for f in Computation.FIELDS]
