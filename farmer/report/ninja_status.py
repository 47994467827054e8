"""Plain progress lines as ninja prints them, for `farmer build -v / --quiet` and `farmer
ninja`: the status line's format (NINJA_STATUS's placeholders), each command line with -v,
none with --quiet, a failure as `FAILED: OUTPUTS` and its command, and the line a build ends
with (`ninja: no work to do.`, `ninja: build stopped: ...`)."""

from __future__ import annotations

import os
import sys
import time

from farmer.report.console import PlainReporter, failure_text, label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    from farmer.graph.graph import Computation
    from farmer.report.lastbuild import Counts

FARMER_STATUS = "[%f/%t] "  # farmer's own lines: SPEC's `[done/total] TASK ID`
NINJA_STATUS = "[%f/%t] "  # ninja's default, when NINJA_STATUS is not set


def _clock(seconds: float) -> str:
    """[h:]mm:ss, as ninja's %w and %W print a time."""
    s = int(seconds)
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m:02d}:{s % 60:02d}"


def format_status(fmt: str, started: int, total: int, finished: int, running: int,
                  elapsed_s: float) -> str:
    """NINJA_STATUS's placeholders filled in: %s started, %t total, %f finished, %r running,
    %u not started yet, %p percentage finished, %e elapsed seconds, %w elapsed [h:]mm:ss,
    %o finished per second, %E and %W the time left as ninja estimates it (elapsed times
    the share left), %P the share of that time gone, %% a percent sign. An unknown
    placeholder is kept as written (ninja stops with an error)."""
    out: list[str] = []
    i, n = 0, len(fmt)
    while i < n:
        c = fmt[i]
        if c != "%" or i + 1 == n:
            out.append(c)
            i += 1
            continue
        k = fmt[i + 1]
        i += 2
        rate = finished / elapsed_s if elapsed_s > 0 else 0.0
        left_s = elapsed_s * (total - finished) / finished if finished else 0.0
        if k == "%":
            out.append("%")
        elif k == "s":
            out.append(str(started))
        elif k == "t":
            out.append(str(total))
        elif k == "f":
            out.append(str(finished))
        elif k == "r":
            out.append(str(running))
        elif k == "u":
            out.append(str(max(total - started, 0)))
        elif k == "p":
            out.append(f"{100 * finished // total if total else 100:3d}%")
        elif k == "e":
            out.append(f"{elapsed_s:.3f}")
        elif k == "w":
            out.append(_clock(elapsed_s))
        elif k in ("o", "c"):
            out.append(f"{rate:.1f}")
        elif k == "E":
            out.append(f"{left_s:.3f}" if finished else "?")
        elif k == "W":
            out.append(_clock(left_s) if finished else "?")
        elif k == "P":
            share = elapsed_s / (elapsed_s + left_s) if finished and elapsed_s + left_s > 0 else 0.0
            out.append(f"{100 * share:3.0f}%")
        else:
            out.append("%" + k)
    return "".join(out)


def ninja_failure_text(comp: Computation, output: str) -> str:
    """ninja's report of a failed edge: `FAILED: ` and its outputs, its command, what it
    printed."""
    outputs = " ".join(comp.outputs) or comp.id
    text = f"FAILED: {outputs}\n"
    if comp.action is not None:
        text += f"{comp.action}\n"
    if output:
        text += output if output.endswith("\n") else output + "\n"
    return text


def ninja_label(comp: Computation, verbose: bool) -> str:
    """What ninja prints after an edge's status: its description, else (or with -v) its
    command."""
    edge = comp.ninja
    if not verbose and edge is not None and edge.description:
        return edge.description
    return comp.action if comp.action is not None else label(comp)


def dry_run_lines(comps: list[Computation], order: list[int], jobs: int, fmt: str, verbose: bool,
                  quiet: bool) -> str:
    """`ninja -n`'s output: the edges that would run, as ninja's dry run goes through them:
    as many started as `jobs` allows (those ready first in the manifest), each finished at once in
    the order started, its status printed then (`%s` and `%r` counting what is started and
    not yet finished, itself included); `ninja: no work to do.` when none would run."""
    if not order:
        return "ninja: no work to do.\n"
    if quiet:
        return ""
    rank = set(order)
    waits_on: dict[int, int] = {}
    released: dict[int, list[int]] = {i: [] for i in order}
    for i in order:
        needs = _run_producers(comps, i, rank)
        waits_on[i] = len(needs)
        for p in needs:
            released[p].append(i)
    import heapq

    ready = [i for i in order if waits_on[i] == 0]  # first the first in the manifest, as ninja 1.11
    heapq.heapify(ready)
    total, started, finished = len(order), 0, 0
    running: list[int] = []  # started, not finished: ninja's dry run finishes them first in, first out
    out: list[str] = []
    while finished < total:
        while ready and len(running) < max(jobs, 1):
            running.append(heapq.heappop(ready))
            started += 1
        if not running:
            break  # (a cycle: the graph was checked before, so never)
        i = running.pop(0)
        finished += 1
        out.append(f"{format_status(fmt, started, total, finished, len(running) + 1, 0.0)}"
                   f"{ninja_label(comps[i], verbose)}\n")
        for j in released[i]:
            waits_on[j] -= 1
            if waits_on[j] == 0:
                heapq.heappush(ready, j)
    return "".join(out)


def _run_producers(comps: list[Computation], i: int, rank: set[int]) -> set[int]:
    """The edges of the dry run that `i` waits for: its producers that would run, and those
    a phony producer stands for."""
    found: set[int] = set()
    todo, seen = list(comps[i].producers), set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        if p in rank:
            found.add(p)
        elif comps[p].kind is None:
            todo.extend(comps[p].producers)
    return found


class StatusReporter(PlainReporter):
    """Plain lines with ninja's choices: `fmt` the status prefix (NINJA_STATUS's format),
    `verbose` a command's line in place of its description, `quiet` no status line at all,
    `ninja` failures as ninja reports them (else farmer's, with the log's path)."""

    __slots__ = ("fmt", "verbose", "quiet", "ninja", "started_at", "running")
    counts_running = True

    def __init__(self, out: TextIO = sys.stdout, fmt: str = FARMER_STATUS, verbose: bool = False,
                 quiet: bool = False, ninja: bool = False) -> None:
        super().__init__(out)
        self.fmt = fmt
        self.verbose = verbose
        self.quiet = quiet
        self.ninja = ninja
        self.started_at = time.monotonic()
        self.running = 0

    def progress(self, done: int, total: int, running: list[Computation], eta_s: float | None) -> None:
        self.running = len(running)

    def finished(self, comp: Computation, done: int, total: int, output: str) -> None:
        text = ""
        if not self.quiet:
            what = ninja_label(comp, self.verbose) if self.ninja else \
                comp.action if self.verbose and comp.action is not None else label(comp)
            running = max(self.running - 1, 0)
            status = format_status(self.fmt, done + running, total, done, running,
                                   time.monotonic() - self.started_at)
            text = f"{status}{what}\n"
        if output:
            text += output if output.endswith("\n") else output + "\n"
        if text:
            self.out.write(text)
            self.out.flush()

    def failed(self, comp: Computation, reason: str, log: str | os.PathLike, output: str,
               kept: list[str]) -> None:
        self.message(ninja_failure_text(comp, output) if self.ninja else
                     failure_text(comp, reason, log, output, kept))


def reporter_for(verbose: bool, quiet: bool, ninja: bool) -> StatusReporter:
    """The reporter of a build with -v, --quiet or `farmer ninja`'s lines."""
    fmt = os.environ.get("NINJA_STATUS", NINJA_STATUS) if ninja else FARMER_STATUS
    return StatusReporter(sys.stdout, fmt, verbose, quiet, ninja)


def end_line(counts: Counts, status: str) -> str | None:
    """What ninja prints at a build's end: a no-op's `ninja: no work to do.`, why it stopped,
    else nothing."""
    if status == "interrupted":
        return "ninja: build stopped: interrupted by user."
    if status == "failed":
        return "ninja: build stopped: subcommand failed."
    if counts.ran == 0 and counts.cached == 0:
        return "ninja: no work to do."
    return None
