"""Outputs from the remote CAS into the project: every blob verified, all files or none.

An ActionResult is used only when it is complete for the computation: exit code 0 and every
declared output present as a regular file. Each blob is downloaded (batched, or by ByteStream
above the batch limit) into a temporary file beside its destination while its SHA-256 is
checked, given its executable bit, and only when every file is staged are they renamed into
place: a build never sees half a result, and a missing or corrupt blob is a miss.
"""

from __future__ import annotations

import os

import xxhash

from farmer.atomic import Staged
from farmer.grains import THIN_PREFIX
from farmer.remote.client import BATCH_LIMIT, Client, Digest
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re

_SMALL_BATCH = 256  # files per BatchReadBlobs while restoring
_UMASK = os.umask(0o022)  # read once, as it is set: a constant of the process (umask is not thread-safe)
os.umask(_UMASK)


class Incomplete(Exception):
    """An ActionResult that is not a whole result for this computation."""


def files_of(result: re.ActionResult, outputs: list[str], optional: list[str]) -> list[tuple[str, Digest, bool]]:
    """(path, digest, executable) of every file to restore: each of `outputs` (required) and of
    `optional` (a depfile: restored when present). Incomplete otherwise."""
    if result.exit_code != 0:
        raise Incomplete(f"the cached result has exit code {result.exit_code}")
    by_path = {f.path: f for f in result.output_files}
    files = []
    for path in outputs:
        f = by_path.get(path)
        if f is None:
            raise Incomplete(f"the cached result lacks {path}")
        files.append((path, f.digest, f.is_executable))
    for path in optional:
        f = by_path.get(path)
        if f is not None and path not in outputs:
            files.append((path, f.digest, f.is_executable))
    for path, d, _ in files:
        if len(d.hash) != 64 or d.size_bytes < 0:
            raise Incomplete(f"the cached result names {path} by a malformed digest")
    return files


def restore(client: Client, files: list[tuple[str, Digest, bool]], log: tuple[str, Digest] | None = None) -> dict[str, str]:
    """Write `files` (and the log, stdout of the result) into place; farmer's digest of each file
    by path (of its bytes, as grains.hash_file gives it). BlobMissing/BlobCorrupt/RemoteError or
    OSError leave the project as it was."""
    contents: dict[str, str] = {}
    todo = list(files) + ([(log[0], log[1], False)] if log else [])
    with Staged() as staged:
        small = [(p, d, x) for p, d, x in todo if d.size_bytes <= BATCH_LIMIT // 4]
        large = [(p, d, x) for p, d, x in todo if d.size_bytes > BATCH_LIMIT // 4]
        for i in range(0, len(small), _SMALL_BATCH):
            part = small[i:i + _SMALL_BATCH]
            data = client.read(d for _, d, _ in part)
            for path, d, executable in part:
                tmp, contents[path] = _stage(path, [data[d.hash]], executable)
                staged.add(tmp, path)
        for path, d, executable in large:
            tmp, contents[path] = _stage(path, client.read_stream(d), executable)
            staged.add(tmp, path)
        staged.commit()
    return {path: contents[path] for path, _, _ in files}


def _stage(path: str, chunks, executable: bool) -> tuple[str, str]:
    """The chunks written to a temporary file beside `path` (removed if they fail to arrive:
    read_stream verifies the digest at its end); the file and farmer's digest of its bytes."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.remote-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        h = xxhash.xxh3_128()
        thin = None
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                if thin is None and chunk:
                    thin = chunk.startswith(b"!<thin>\n")  # as hash_file marks it
                h.update(chunk)
                f.write(chunk)
            os.fchmod(f.fileno(), _mode(executable))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return tmp, (THIN_PREFIX if thin else "") + h.hexdigest()


def _mode(executable: bool) -> int:
    return (0o777 if executable else 0o666) & ~_UMASK
