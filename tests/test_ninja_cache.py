"""The parsed-graph cache of ninja manifests (farmer/graph/ninja_cache.py): used while every
manifest file keeps its stat data, never for a read too close to a change, and what depends
on other files existing is worked out again on every load."""

from __future__ import annotations

import textwrap
import time

import pytest

from farmer.build import ninja
from farmer.graph import ninja_cache as cache
from farmer.manifest import ninja_parser as parser

RACY_S = 0.15  # longer than the cache's racy window


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root, name, text):
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(textwrap.dedent(text))


MANIFEST = """\
    include rules.ninja
    build FORCE: phony
    build out.txt: cp in.txt | FORCE
    build all: phony out.txt need.txt
    build self: phony self out.txt
    default all in.txt
    """
RULES = "rule cp\n  command = cp $in $out\n"


def setup(root):
    write(root, "build.ninja", MANIFEST)
    write(root, "rules.ninja", RULES)
    write(root, "in.txt", "x\n")
    time.sleep(RACY_S)


def no_parsing(monkeypatch):
    def fail(path):
        raise AssertionError("parsed although the cache should hold")
    monkeypatch.setattr(parser, "parse_manifest", fail)


def by_id(graph, cid):
    return graph.computations[graph.by_id[cid]]


def test_second_load_comes_from_the_cache(root, monkeypatch, capsys):
    setup(root)
    spec, graph = ninja.load(root / "build.ninja", write_cache=True)
    assert (root / ".farmer" / cache.NAME).exists()
    assert "names itself" in capsys.readouterr().err
    no_parsing(monkeypatch)
    spec2, graph2 = ninja.load(root / "build.ninja")
    assert [c.action for c in graph2.computations] == [c.action for c in graph.computations]
    assert [c.fingerprint for c in graph2.computations] == [c.fingerprint for c in graph.computations]
    assert graph2.order == graph.order and graph2.producer == graph.producer and graph2.paths_first
    assert (spec2.digest, spec2.pools, spec2.default) == (spec.digest, spec.pools, spec.default)
    assert "names itself" in capsys.readouterr().err  # warnings again, as ninja prints them


def test_only_commands_that_may_write_it_write_it(root):
    setup(root)
    ninja.load(root / "build.ninja")
    assert not (root / ".farmer" / cache.NAME).exists()


def test_an_edited_include_is_read_again(root):
    setup(root)
    ninja.load(root / "build.ninja", write_cache=True)
    write(root, "rules.ninja", RULES.replace("cp $in", "cp -p $in"))
    time.sleep(RACY_S)
    _, graph = ninja.load(root / "build.ninja", write_cache=True)
    assert by_id(graph, "out.txt").action == "cp -p in.txt out.txt"


def test_a_read_too_close_to_a_change_is_not_cached(root):
    write(root, "build.ninja", MANIFEST)
    write(root, "rules.ninja", RULES)
    ninja.load(root / "build.ninja", write_cache=True)
    assert not (root / ".farmer" / cache.NAME).exists()


def test_existence_is_checked_again(root, monkeypatch):
    setup(root)
    _, graph = ninja.load(root / "build.ninja", write_cache=True)
    assert by_id(graph, "all").missing == ["need.txt"] and by_id(graph, "out.txt").always
    no_parsing(monkeypatch)
    write(root, "need.txt", "")
    write(root, "FORCE", "")
    write(root, "in.txt", "")
    _, graph = ninja.load(root / "build.ninja")
    assert by_id(graph, "all").missing == [] and not by_id(graph, "out.txt").always
    (root / "in.txt").unlink()
    spec, graph = ninja.load(root / "build.ninja")
    assert by_id(graph, "out.txt").missing == ["in.txt"]
    assert spec.default == ["all", "in.txt"]  # a default naming a missing source stays (an error)


def test_an_unreadable_cache_is_ignored(root):
    setup(root)
    ninja.load(root / "build.ninja", write_cache=True)
    (root / ".farmer" / cache.NAME).write_bytes(b"garbage")
    _, graph = ninja.load(root / "build.ninja", write_cache=True)
    assert "out.txt" in graph.by_id


@pytest.mark.parametrize("given", ["build.ninja", "./build.ninja", "sub//./b.ninja", "sub/../build.ninja",
                                   "/abs/./x//y.ninja", "//net/b.ninja", "///root.ninja", "/"])
def test_the_manifest_path_is_named_as_pathlib_names_it(root, given):
    """The cache's key and the build's spec name the manifest as `Path(p).absolute()` did
    before pathlib left the build.ninja path: a cache written by one farmer is read by the next."""
    from pathlib import Path

    assert ninja.absolute(given) == str(Path(given).absolute())


def test_reading_a_manifest_leaves_the_collector_as_it_was(root):
    """The cyclic collector waits while a manifest is read (or its cache), and runs again
    after, whether the read worked or failed."""
    import gc

    from farmer.errors import UsageError

    setup(root)
    assert gc.isenabled()
    ninja.load(root / "build.ninja", write_cache=True)
    assert gc.isenabled()
    ninja.load(root / "build.ninja")  # from the cache
    assert gc.isenabled()
    write(root, "build.ninja", "build x: nosuchrule\n")
    with pytest.raises(UsageError, match="unknown build rule"):
        ninja.load(root / "build.ninja")
    assert gc.isenabled()
