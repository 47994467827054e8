"""The input-root Merkle tree: canonical, order-independent, and strict about paths."""

from __future__ import annotations

import importlib.util
import os

import pytest

if (importlib.util.find_spec("google") is None or importlib.util.find_spec("google.protobuf") is None) and os.environ.get("CI") != "true":
    pytest.skip("protobuf is not installed (pip install -e '.[remote]')", allow_module_level=True)

from farmer.remote import merkle  # noqa: E402
from farmer.remote.client import digest_of  # noqa: E402
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re  # noqa: E402


def f(path: str, data: bytes = b"x", executable: bool = False) -> merkle.InputFile:
    return merkle.InputFile(path, digest_of(data), executable, "/nonexistent/" + path)


def directories(root: merkle.InputRoot) -> dict[str, re.Directory]:
    out = {}
    for b in root.blobs:
        if b.data is not None:
            out[b.digest.hash] = re.Directory.FromString(b.data)
    return out


def test_the_root_digest_does_not_depend_on_the_order_given():
    files = [f("src/b.c", b"b"), f("src/a.c", b"a"), f("include/x.h", b"h"), f("Z", b"z", True)]
    assert merkle.build(files).digest == merkle.build(list(reversed(files))).digest


def test_children_are_sorted_and_nested():
    root = merkle.build([f("src/b.c"), f("src/a.c"), f("B"), f("a/x")])
    dirs = directories(root)
    top = dirs[root.digest.hash]
    assert [n.name for n in top.files] == ["B"]
    assert [n.name for n in top.directories] == ["a", "src"]
    src = dirs[top.directories[1].digest.hash]
    assert [n.name for n in src.files] == ["a.c", "b.c"]
    assert root.paths == {"src/b.c", "src/a.c", "B", "a/x"}


def test_contents_and_executable_bits_change_the_digest():
    base = merkle.build([f("a", b"1")]).digest
    assert merkle.build([f("a", b"2")]).digest != base
    assert merkle.build([f("a", b"1", True)]).digest != base
    assert merkle.build([f("a", b"1")], ["empty/dir"]).digest != base


def test_empty_files_are_in_the_tree_but_not_uploaded():
    root = merkle.build([f("empty", b"")])
    assert all(b.data is not None for b in root.blobs)  # only the Directory
    assert directories(root)[root.digest.hash].files[0].name == "empty"


@pytest.mark.parametrize("bad", ["/abs", "a/../b", "./a", "a//b", "", "a/"])
def test_paths_must_be_normalised_and_relative(bad):
    with pytest.raises(ValueError):
        merkle.build([f(bad)])


def test_a_path_given_twice_differently_is_an_error():
    with pytest.raises(ValueError):
        merkle.build([f("a", b"1"), f("a", b"2")])
    with pytest.raises(ValueError):
        merkle.build([f("a"), f("a/b")])
    assert merkle.build([f("a", b"1"), f("a", b"1")]).paths == {"a"}
