"""What every build ends with: last-build.json's header (SPEC section 4) and the summary
line. Kept free of heavy imports: the no-op build uses them before anything else loads."""

from __future__ import annotations

import os
import time

from farmer import __version__
from farmer.files.atomic import Part, write_atomically
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


def document(head: dict, tasks_json: Iterable[Part]) -> Iterator[Part]:
    """last-build.json's bytes, in parts, from its header and its tasks already as JSON, in
    parts too, as they come (the no-op proof keeps them rendered: megabytes that are written
    as they are, not joined; a build's are rendered as they are written, not held whole)."""
    yield (dumps(head)[:-1] + ',"tasks":').encode()
    yield from tasks_json
    yield b"}\n"


def write(farmer_dir: str, head: dict, tasks_json: Iterable[Part]) -> None:
    """Write .farmer/last-build.json atomically from its header and its tasks."""
    write_atomically(os.path.join(farmer_dir, NAME), document(head, tasks_json))
