"""The input root of a remote action: a Merkle tree of REAPI Directory messages.

Canonical form (remote_execution.proto): one path segment per node, children sorted by name (UTF-8
bytes), every Directory serialized deterministically and stored in the CAS as its own blob.
"""

from __future__ import annotations

from collections.abc import Iterable

from farmer.remote.client import Blob, Digest, digest_of
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re


class InputFile:
    """A file of the input root: its path relative to the root, digest, executable bit, and where
    its bytes are on this machine."""

    __slots__ = ("path", "digest", "executable", "source")

    def __init__(self, path: str, digest: Digest, executable: bool, source: str) -> None:
        self.path, self.digest, self.executable, self.source = path, digest, executable, source


class InputRoot:
    """A built tree: the root's digest and every blob it needs (Directories and files)."""

    __slots__ = ("digest", "blobs", "paths")

    def __init__(self, digest: Digest, blobs: list[Blob], paths: frozenset[str]) -> None:
        self.digest, self.blobs, self.paths = digest, blobs, paths


def segments(path: str) -> list[str]:
    """A relative, normalised `/`-separated path's segments; ValueError for anything else."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"input path {path!r} is not a normalised relative path")
    return parts


class _Node:
    __slots__ = ("files", "dirs")

    def __init__(self) -> None:
        self.files: dict[str, InputFile] = {}
        self.dirs: dict[str, _Node] = {}


def build(files: Iterable[InputFile], directories: Iterable[str] = ()) -> InputRoot:
    """The input root holding `files` and the (possibly empty) `directories`."""
    root = _Node()
    blobs: list[Blob] = []
    paths = set()
    for f in files:
        *dirs, name = segments(f.path)
        node = _walk(root, dirs, f.path)
        if name in node.dirs or (name in node.files and node.files[name].digest != f.digest):
            raise ValueError(f"input path {f.path!r} is given twice, differently")
        node.files[name] = f
        paths.add(f.path)
        if f.digest.size_bytes:
            blobs.append(Blob(f.digest, path=f.source))
    for d in directories:
        if d:
            _walk(root, segments(d), d)
    digest = _serialize(root, blobs)
    return InputRoot(digest, blobs, frozenset(paths))


def _walk(node: _Node, dirs: list[str], path: str) -> _Node:
    for d in dirs:
        if d in node.files:
            raise ValueError(f"input path {path!r} runs through the file {d!r}")
        node = node.dirs.setdefault(d, _Node())
    return node


def _serialize(node: _Node, blobs: list[Blob]) -> Digest:
    msg = re.Directory()
    for name in sorted(node.files, key=lambda n: n.encode()):
        f = node.files[name]
        msg.files.add(name=name, digest=f.digest, is_executable=f.executable)
    for name in sorted(node.dirs, key=lambda n: n.encode()):
        msg.directories.add(name=name, digest=_serialize(node.dirs[name], blobs))
    data = msg.SerializeToString(deterministic=True)
    blob = Blob.of(data)
    blobs.append(blob)
    return blob.digest


def flatten(root: Digest, directories: dict[str, re.Directory], prefix: str = "") -> Iterable[tuple[str, re.FileNode]]:
    """(path, FileNode) of every file under `root`, given its Directory messages by hash (a Tree
    output's children, or an input root read back)."""
    d = directories[root.hash]
    for f in d.files:
        yield prefix + f.name, f
    for sub in d.directories:
        yield from flatten(sub.digest, directories, f"{prefix}{sub.name}/")


def tree_directories(tree: re.Tree) -> dict[str, re.Directory]:
    """A Tree message's Directories by the hash of their serialized form."""
    out = {}
    for d in (tree.root, *tree.children):
        out[digest_of(d.SerializeToString(deterministic=True)).hash] = d
    return out
