"""What every build ends with: last-build.json's header (SPEC section 4) and the summary
line. Kept free of heavy imports: the no-op build uses them before anything else loads."""

from __future__ import annotations

import os
import time

from farmer import __version__
from farmer.files.atomic import FileRange, Part, unnamed_file, write_atomically, write_parts
from farmer.startup.jsontext import dumps

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

NAME = "last-build.json"


class Counts:
    """The summary line's counts. `interrupted`: the computations a signal stopped, apart
    from those that failed on their own (last-build.json has them as `failed`, with the
    reason `interrupted`)."""

    __slots__ = ("ran", "up_to_date", "cached", "failed", "interrupted", "skipped")

    def __init__(self, ran: int = 0, up_to_date: int = 0, cached: int = 0, failed: int = 0,
                 skipped: int = 0, interrupted: int = 0) -> None:
        self.ran, self.up_to_date, self.cached = ran, up_to_date, cached
        self.failed, self.interrupted, self.skipped = failed, interrupted, skipped


INTERRUPTED = "interrupted"  # the reason of a computation a signal stopped (the executors')


def tally(selected: int, settled: Iterable[tuple[str, str]]) -> Counts:
    """The summary's counts: a (status, reason) pair per settled computation, as
    farmer/run/scheduler.py names them (not imported: the no-op path stays light); every
    one of the `selected` not settled is up to date."""
    counts = Counts()
    seen = 0
    for status, reason in settled:
        seen += 1
        if status == "ran":
            counts.ran += 1
        elif status == "up-to-date":
            counts.up_to_date += 1
        elif status == "failed":
            if reason == INTERRUPTED:
                counts.interrupted += 1
            else:
                counts.failed += 1
        elif status == "cached":
            counts.cached += 1
        elif status == "skipped":
            counts.skipped += 1
    counts.up_to_date += selected - seen
    return counts


def summary_line(counts: Counts, wall_s: float, critical_s: float, status: str) -> str:
    """`farmer: [FAILED|INTERRUPTED] ran R, up to date U, cached C, failed F, interrupted I,
    skipped S in W s; critical path P s` (docs/cli.md: scripts read it)."""
    word = {"ok": "", "failed": " FAILED", "interrupted": " INTERRUPTED"}.get(status, "")
    return (f"farmer:{word} ran {counts.ran}, up to date {counts.up_to_date}, cached {counts.cached}, "
            f"failed {counts.failed}, interrupted {counts.interrupted}, skipped {counts.skipped} "
            f"in {wall_s:.2f} s; critical path {critical_s:.2f} s")


def header(started_at: float, jobs: int, status: str, wall_s: float, critical_path_s: float,
           predicted_makespan_s: float, worlds: Iterable[dict] = ()) -> dict:
    """last-build.json but its tasks; `started_at` in seconds since the epoch; `worlds`:
    the worlds set up (`world_entries`)."""
    return {
        "farmer_version": __version__,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
        "jobs": jobs, "status": status, "wall_s": rounded(wall_s),
        "critical_path_s": rounded(critical_path_s),
        "predicted_makespan_s": rounded(predicted_makespan_s),
        "worlds": list(worlds),
    }


def world_entries(spans: Iterable) -> list[dict]:
    """last-build.json's `worlds`: each world set-up of the build (the scheduler's
    `WorldSpan`s), in the order they ended; one stopped as no longer needed is left out."""
    return [{"name": s.world, "start_s": None if s.start_s is None else rounded(s.start_s),
             "end_s": None if s.end_s is None else rounded(s.end_s), "status": s.status}
            for s in spans if s.status != "cancelled"]


def rounded(x: float) -> float:
    return round(x, 4)


def _opening(head: dict) -> bytes:
    """last-build.json's bytes up to its tasks."""
    return (dumps(head)[:-1] + ',"tasks":').encode()


def document(head: dict, tasks_json: Iterable[Part]) -> Iterator[Part]:
    """last-build.json's bytes, in parts, from its header and its tasks already as JSON, in
    parts too, as they come (the no-op proof keeps them rendered: megabytes that are written
    as they are, not joined; a build's are rendered as they are written, not held whole)."""
    yield _opening(head)
    yield from tasks_json
    yield b"}\n"


def write(farmer_dir: str, head: dict, tasks_json: Iterable[Part]) -> None:
    """Write .farmer/last-build.json atomically from its header and its tasks."""
    write_atomically(os.path.join(farmer_dir, NAME), document(head, tasks_json))


class Ahead:
    """A server's next no-op's last-build.json, its bulk written ahead: the same task entries
    after a header of the length the last one had, in a file with no name yet, made while
    the server waits for its next client (`stage`). A no-op whose header has that length
    (nearly every one: only the digits of its wall time vary) writes its header over the
    placeholder and renames the file into place (`write`), instead of copying megabytes of
    entries while its client waits; the bytes are those `write` above writes, and the file
    is replaced whole as ever. Any other header, or a failure, is written as `write` does."""

    __slots__ = ("fd", "key", "pending")

    def __init__(self) -> None:
        self.fd: int | None = None
        self.key: tuple | None = None  # (farmer_dir, the header's length, the tasks' parts)
        self.pending: tuple | None = None  # what the last no-op wrote: the next one's to stage

    def write(self, farmer_dir: str, head: dict, tasks_json: list[Part]) -> None:
        """`write` (above), from the staged file when it fits."""
        opening = _opening(head)
        key = (farmer_dir, len(opening), list(tasks_json))
        self.pending = key
        fd, staged = self.fd, self.key
        self.fd = self.key = None
        if fd is not None:
            try:
                if staged is not None and _same(staged, key) and _finish(fd, opening, os.path.join(farmer_dir, NAME)):
                    return
            finally:
                os.close(fd)
        write(farmer_dir, head, tasks_json)

    def stage(self) -> None:
        """Write the next no-op's file ahead, from what the last one wrote (nothing when the
        last command was no no-op)."""
        pending, self.pending = self.pending, None
        self.drop()
        if pending is None:
            return
        farmer_dir, length, parts = pending
        fd = unnamed_file(farmer_dir)
        if fd is None:
            return
        try:
            os.lseek(fd, length, os.SEEK_SET)
            write_parts(fd, [*parts, b"}\n"])
        except OSError:
            os.close(fd)
            return
        self.fd, self.key = fd, pending

    def drop(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        self.fd = self.key = None


def _same(staged: tuple, key: tuple) -> bool:
    """Whether a file staged for `staged` holds what `key` would write after its header."""
    if staged[:2] != key[:2] or len(staged[2]) != len(key[2]):
        return False
    for a, b in zip(staged[2], key[2]):
        if isinstance(a, FileRange) or isinstance(b, FileRange):
            if not (isinstance(a, FileRange) and isinstance(b, FileRange) and a.file is b.file
                    and (a.offset, a.length) == (b.offset, b.length)):
                return False
        elif bytes(a) != bytes(b):
            return False
    return True


def _finish(fd: int, opening: bytes, path: str) -> bool:
    """The staged file given its header, its mode (as `write_atomically` makes it under the
    umask) and `path`'s name, replacing the old file whole; False if that failed (nothing
    replaced)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        if os.pwrite(fd, opening, 0) != len(opening):
            return False
        umask = os.umask(0o022)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        # A file with no name gets one: linkat through /proc's link to it, followed (a plain
        # link(2) of that path would not follow it).
        fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                os.link(str(fd), tmp, src_dir_fd=fds, follow_symlinks=True)
            except FileExistsError:  # a killed farmer's of the same pid
                os.unlink(tmp)
                os.link(str(fd), tmp, src_dir_fd=fds, follow_symlinks=True)
        finally:
            os.close(fds)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
