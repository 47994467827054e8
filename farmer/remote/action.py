"""A computation as a REAPI Action: the remote form of the output cache's key (SPEC §5).

The local cache keys a computation by its action description (farmer/record/cache/key.py): the
action fingerprint's parts, world, `[cache] env` values, programs, platform, and the inputs'
paths and digests. The remote key is the digest of one REAPI Action built from the same
description, in SHA-256:

| description part | where it goes in the Action |
| --- | --- |
| the command (`cmd`) | Command.arguments `["/bin/sh", "-c", cmd]` (what SPEC says a cmd is) |
| a python line | Command.arguments `["farmer:python", line]` (never executed remotely) |
| task `env`, `[cache] env` values | Command.environment_variables, sorted by name, with PATH = `[remote] path` |
| declared outputs, the depfile | Command.output_paths, sorted |
| inputs under the project root (declared and discovered) | the input root: a Merkle tree of their SHA-256 digests |
| everything else (format, world, programs, platform, rspfile, inputs outside the root) | `FARMER_KEY`, the SHA-256 of those parts, as one more variable |
| `[remote] salt`, `[remote] platform`, the task's `timeout` | Action.salt, Action.platform, Action.timeout |

So the digest that a local run uploads under is the one `--remote-exec` executes, and the server
caches an executed result where a later lookup finds it. Paths outside the root (system headers,
`../x`) are never uploaded: their digests are in the key, and a worker has its own.

Depfile-discovered inputs take ccache's two levels here as in the local cache: the *variants*
Action (declared inputs only, a `farmer:variants` Command) has a result whose one output file is
the list of discovered-input variants seen so far; each names the SHA-256 of every discovered file.
"""

from __future__ import annotations

import hashlib
import json
import os

from farmer.remote.client import Blob, Digest
from farmer.remote.config import DEFAULT_PATH
from farmer.remote.merkle import InputFile, InputRoot, build
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.basedir import BaseDir

KEY_ENV = "FARMER_KEY"
VARIANTS_FILE = "variants.json"
VARIANTS_KEPT = 8


class FileDigest:
    """A file as the remote sees it: its path (as the computation names it), SHA-256 digest and
    executable bit."""

    __slots__ = ("path", "digest", "executable")

    def __init__(self, path: str, digest: Digest, executable: bool) -> None:
        self.path, self.digest, self.executable = path, digest, executable

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FileDigest) and self.path == other.path and self.executable == other.executable
                and self.digest.hash == other.digest.hash and self.digest.size_bytes == other.digest.size_bytes)

    def __repr__(self) -> str:
        return f"FileDigest({self.path!r}, {self.digest.hash[:12]}/{self.digest.size_bytes}, x={self.executable})"


class RemoteAction:
    """A computation's Action, with the blobs it needs for execution (Command, Action, input root)."""

    __slots__ = ("action", "command", "root", "digest", "blobs")

    def __init__(self, action: re.Action, command: re.Command, root: InputRoot) -> None:
        self.action, self.command, self.root = action, command, root
        action_blob = Blob.of(action.SerializeToString(deterministic=True))
        command_blob = Blob.of(command.SerializeToString(deterministic=True))
        self.digest = action_blob.digest
        self.blobs = [action_blob, command_blob, *root.blobs]


def in_root(path: str) -> bool:
    """Whether a (normalised) path is under the project root: relative and not climbing out."""
    return not (path.startswith("/") or path == ".." or path.startswith("../"))


def root_path(path: str, base: BaseDir | None) -> str | None:
    """Where a computation's file (a path from its working directory, or absolute) is in the
    input root: under the project root without a base directory, else under the base
    (farmer/graph/basedir.py); None for a file outside it (the platform's: keyed, not sent)."""
    if base is not None:
        return base.root_path(path)
    path = os.path.normpath(path)
    return path if in_root(path) else None


def key_extra(parts: list[tuple[str, list[str]]], outside: list[FileDigest]) -> str:
    """FARMER_KEY: the SHA-256 of the description's parts that are not in the Command or input
    root, and of the files outside the root."""
    h = hashlib.sha256()
    for label, values in [*parts, ("outside", [f"{f.path}={f.digest.hash}/{f.digest.size_bytes}/{int(f.executable)}"
                                               for f in outside])]:
        h.update(f"{label}:{len(values)}\0".encode())
        for v in values:
            h.update(v.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def build_action(kind: str, line: str, env: dict[str, str], inherited: list[tuple[str, str | None]],
                 outputs: list[str], depfile: str | None, other_parts: list[tuple[str, list[str]]],
                 inputs: list[FileDigest], sources: dict[str, str], *, path: str = DEFAULT_PATH,
                 salt: str = "", platform: dict[str, str] | None = None, timeout_s: float | None = None,
                 base: BaseDir | None = None) -> RemoteAction:
    """The Action of one computation. `inputs` are declared and discovered inputs with their
    SHA-256 digests; `sources[path]` is where each file's bytes are on this machine;
    `other_parts` are the description's parts not given otherwise (see the module's table).
    With a `base` directory the input root is the base, and the Command runs in the build
    directory's place under it (its `working_directory`; output paths are relative to it)."""
    variables = dict(env)
    for name, value in inherited:
        if value is not None:
            variables[name] = value
    variables.setdefault("PATH", path)
    files, outside = [], []
    for f in inputs:
        where = root_path(f.path, base)
        if where is not None:
            files.append(InputFile(where, f.digest, f.executable, sources.get(f.path, f.path)))
        else:
            outside.append(f)
    # inherited values are in the environment; an unset variable is not, so name it in the key
    unset = [name for name, value in inherited if value is None]
    variables[KEY_ENV] = key_extra([*other_parts, ("unset", unset)], outside)
    arguments = ["/bin/sh", "-c", line] if kind == "cmd" else [f"farmer:{kind}", line]
    output_paths = sorted(set(outputs) | ({depfile} if depfile else set()))
    workdir = base.workdir if base is not None else ""
    command = re.Command(arguments=arguments, output_paths=output_paths, working_directory=workdir)
    for name in sorted(variables):
        command.environment_variables.add(name=name, value=variables[name])
    props = sorted((platform or {}).items())
    for name, value in props:
        command.platform.properties.add(name=name, value=value)
    root = build(files, [workdir])
    action = re.Action(input_root_digest=root.digest, salt=salt.encode())
    action.command_digest.CopyFrom(Blob.of(command.SerializeToString(deterministic=True)).digest)
    for name, value in props:
        action.platform.properties.add(name=name, value=value)
    if timeout_s:
        action.timeout.FromMilliseconds(int(timeout_s * 1000))
    return RemoteAction(action, command, root)


def variants_action(key1: str, salt: str = "") -> RemoteAction:
    """The Action under which a first-level key's variants are kept (never executed)."""
    command = re.Command(arguments=["farmer:variants"], output_paths=[VARIANTS_FILE])
    command.environment_variables.add(name=KEY_ENV, value=key1)
    root = build([])
    action = re.Action(input_root_digest=root.digest, salt=salt.encode(), do_not_cache=False)
    action.command_digest.CopyFrom(Blob.of(command.SerializeToString(deterministic=True)).digest)
    return RemoteAction(action, command, root)


def key1_of(canonical: bytes) -> str:
    """The first-level key in SHA-256 (of the description's canonical bytes, declared inputs only)."""
    return hashlib.sha256(canonical).hexdigest()


def encode_variants(variants: list[list[FileDigest]]) -> bytes:
    """The variants blob: newest first, each the discovered files with their digests."""
    return json.dumps([[[f.path, f.digest.hash, f.digest.size_bytes, f.executable] for f in v]
                       for v in variants[:VARIANTS_KEPT]], separators=(",", ":")).encode()


def decode_variants(data: bytes) -> list[list[FileDigest]]:
    """The variants in a blob; [] for one that is not farmer's (never an exception)."""
    try:
        raw = json.loads(data)
        return [[FileDigest(str(p), Digest(hash=str(h), size_bytes=int(n)), bool(x)) for p, h, n, x in v]
                for v in raw]
    except (ValueError, TypeError):
        return []


def merged_variants(old: list[list[FileDigest]], new: list[FileDigest]) -> list[list[FileDigest]]:
    """`new` first, then the older variants that differ from it, at most VARIANTS_KEPT."""
    return [new, *[v for v in old if v != new]][:VARIANTS_KEPT]
