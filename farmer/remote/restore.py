"""Outputs from the remote CAS into the project: every blob verified, all files or none.

An ActionResult is used only when it is complete for the computation: exit code 0 and every
declared output present as a regular file or a symbolic link (`output_symlinks`, or v2.0's
`output_file_symlinks`). A link is made again as that link, never as a copy of what it leads
to, and only when its target is relative and stays inside the project: a link from another
machine leading to /usr/lib or out of the project would be an output the run would not have
made here. Each blob is downloaded (batched, or by ByteStream
above the batch limit) into a temporary file beside its destination while its SHA-256 is
checked, given its executable bit, and only when every file is staged are they renamed into
place: a build never sees half a result, and a missing or corrupt blob is a miss.
"""

from __future__ import annotations

import os

import xxhash

from farmer.files.atomic import Staged
from farmer.files.digests import THIN_PREFIX
from farmer.remote.client import BATCH_LIMIT, BlobCorrupt, BlobMissing, Client, Digest, RemoteError
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re

_READ_AHEAD = 64 * 1024 * 1024  # bytes of small blobs read for several restores at once, at most
_UMASK = os.umask(0o022)  # read once, as it is set: a constant of the process (umask is not thread-safe)
os.umask(_UMASK)


class Incomplete(Exception):
    """An ActionResult that is not a whole result for this computation."""


class Link:
    """An output that is a symbolic link: in a job's (path, what, executable) in the digest's
    place; `target` as the link holds it."""

    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        self.target = target

    def __repr__(self) -> str:
        return f"Link({self.target!r})"


def link_stays_inside(path: str, target: str) -> bool:
    """Whether the link `path` (relative to the project root) with `target` leads to a place
    inside the project, by its words: a relative target that does not climb out."""
    if not target or target.startswith("/") or "\0" in target:
        return False
    there = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return not (there.startswith("/") or there == ".." or there.startswith("../") or there == ".")


def files_of(result: re.ActionResult, outputs: list[str], optional: list[str],
             what: str = "the cached result") -> list[tuple[str, Digest | Link, bool]]:
    """(path, digest, executable) of every file to restore, a Link for a symbolic link: each of
    `outputs` (required) and of `optional` (a depfile: restored when present). Incomplete
    otherwise (`what` names the result in its message)."""
    if result.exit_code != 0:
        raise Incomplete(f"{what} has exit code {result.exit_code}")
    by_path: dict[str, object] = {f.path: f for f in result.output_files}
    for s in (*result.output_file_symlinks, *result.output_symlinks):
        by_path.setdefault(s.path, Link(s.target))
    files: list[tuple[str, Digest | Link, bool]] = []
    for path in outputs:
        f = by_path.get(path)
        if f is None:
            raise Incomplete(f"{what} lacks {path}")
        if isinstance(f, Link):
            if not link_stays_inside(path, f.target):
                raise Incomplete(f"{what} has {path} as a link to {f.target}, outside the project")
            files.append((path, f, False))
            continue
        files.append((path, f.digest, f.is_executable))
    for path in optional:
        f = by_path.get(path)
        if f is not None and not isinstance(f, Link) and path not in outputs:
            files.append((path, f.digest, f.is_executable))
    for path, d, _ in files:
        if not isinstance(d, Link) and (len(d.hash) != 64 or d.size_bytes < 0):
            raise Incomplete(f"{what} names {path} by a malformed digest")
    return files


def restore(client: Client, files: list[tuple[str, Digest, bool]], log: tuple[str, Digest] | None = None) -> dict[str, str]:
    """Write `files` (and the log, stdout of the result) into place; farmer's digest of each
    regular file by path (of its bytes, as grains.hash_file gives it). BlobMissing/BlobCorrupt/
    RemoteError or OSError leave the project as it was."""
    todo = list(files) + ([(log[0], log[1], False)] if log else [])
    contents = restore_all(client, [todo])[0]
    if isinstance(contents, Exception):
        raise contents
    return {path: contents[path] for path, _, _ in files if path in contents}


def restore_all(client: Client, jobs: list[list[tuple[str, Digest, bool]]]) -> list[dict[str, str] | Exception]:
    """Each job's files into place, all of a job's or none of them (fetch_all, then each written):
    farmer's digest of each file by path, or what stopped it."""
    out: list[dict[str, str] | Exception] = []
    for fetched in fetch_all(client, jobs):
        if isinstance(fetched, Fetched):
            try:
                out.append(fetched.write())
            except OSError as e:
                out.append(e)
        else:
            out.append(fetched)
    return out


class Fetched:
    """A job's files, fetched and verified, not yet in place: the small ones' bytes in memory,
    the large ones already in temporary files beside their destinations (with farmer's digests,
    `large`). `write` puts them all in place (or none: OSError); `discard` removes what was
    staged. Fetched on one thread, written on another: the build's, which would otherwise wait
    for the GIL at each of the many small writes' system calls."""

    __slots__ = ("files", "data", "staged", "large")

    def __init__(self, files: list[tuple[str, Digest, bool]], data: dict[str, bytes], staged: Staged,
                 large: dict[str, str]) -> None:
        self.files, self.data, self.staged, self.large = files, data, staged, large

    def write(self) -> dict[str, str]:
        """Farmer's digest of each regular file written, by path (a link has none of its own:
        the build's digests read what it leads to)."""
        contents = dict(self.large)
        with self.staged as staged:
            for path, d, executable in self.files:
                if isinstance(d, Link):
                    staged.add(_stage_link(path, d.target), path)
                elif path not in self.large:
                    tmp, contents[path] = _stage(path, [self.data[d.hash]], executable)
                    staged.add(tmp, path)
            staged.commit()
        return contents

    def discard(self) -> None:
        for tmp, _ in self.staged.pairs:
            _unlink(tmp)


def fetch_all(client: Client, jobs: list[list[tuple[str, Digest, bool]]]) -> list[Fetched | Exception]:
    """Each job's blobs, verified, for `Fetched.write`; or what stopped it (BlobMissing,
    BlobCorrupt, OSError, RemoteError). The small blobs of many jobs come in shared batches, all
    in flight at once (a tiny output costs a fraction of a call, not a call); those above a
    quarter of the batch limit come by ByteStream into temporary files as they arrive. After a
    RemoteError (the server went away) the jobs not yet fetched get it too, without a call."""
    out: list[Fetched | Exception] = []
    gone: RemoteError | None = None
    for group in _groups(jobs):
        data: dict[str, bytes] = {}
        bad: dict[str, RemoteError] = {}
        if gone is None:
            try:
                data, bad = client.read_many(d for job in group for _, d, _ in job
                                             if not isinstance(d, Link) and _small(d))
            except RemoteError as e:
                gone = e
        for job in group:
            if gone is not None:
                out.append(gone)
                continue
            try:
                out.append(_fetch(client, job, data, bad))
            except (BlobMissing, BlobCorrupt, OSError) as e:
                out.append(e)
            except RemoteError as e:
                gone = e
                out.append(e)
    return out


def _small(d: Digest | Link) -> bool:
    """A blob read in a shared batch (a link has no blob: it is small)."""
    return isinstance(d, Link) or d.size_bytes <= BATCH_LIMIT // 4


def _groups(jobs: list[list[tuple[str, Digest, bool]]]) -> list[list[list[tuple[str, Digest, bool]]]]:
    """The jobs in runs whose small blobs add up to at most _READ_AHEAD bytes (read together)."""
    groups: list[list] = []
    size = _READ_AHEAD
    for job in jobs:
        n = sum(d.size_bytes for _, d, _ in job if not isinstance(d, Link) and _small(d))
        if not groups or size + n > _READ_AHEAD:
            groups.append([])
            size = 0
        groups[-1].append(job)
        size += n
    return groups


def _fetch(client: Client, job: list[tuple[str, Digest, bool]], data: dict[str, bytes],
           bad: dict[str, Exception]) -> Fetched:
    mine: dict[str, bytes] = {}
    staged = Staged()
    large: dict[str, str] = {}
    try:
        for path, d, executable in job:
            if isinstance(d, Link):
                continue  # made by write, from the result itself
            if _small(d):
                if d.hash in bad:
                    raise bad[d.hash]
                mine[d.hash] = data[d.hash]
            else:
                tmp, large[path] = _stage(path, client.read_stream(d), executable)
                staged.add(tmp, path)
    except BaseException:
        for tmp, _ in staged.pairs:
            _unlink(tmp)
        raise
    return Fetched(job, mine, staged, large)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _stage(path: str, chunks, executable: bool) -> tuple[str, str]:
    """The chunks written to a temporary file beside `path` (removed if they fail to arrive:
    read_stream verifies the digest at its end); the file and farmer's digest of its bytes."""
    tmp = f"{path}.{os.getpid()}.remote-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:  # its folder first (mostly made already: the recorder makes outputs' folders)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(tmp, flags, 0o600)
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


def _stage_link(path: str, target: str) -> str:
    """A symbolic link to `target` made beside `path`, to be renamed over it."""
    tmp = f"{path}.{os.getpid()}.remote-tmp"
    _unlink(tmp)  # what a restore killed with this pid left
    try:
        os.symlink(target, tmp)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        os.symlink(target, tmp)
    return tmp


def _mode(executable: bool) -> int:
    return (0o777 if executable else 0o666) & ~_UMASK
