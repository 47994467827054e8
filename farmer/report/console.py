"""What the user sees: plain `[done/total] TASK ID` lines (CI, pipes), a live view on a
terminal, the failures with their output, the summary line, and last-build.json."""

from __future__ import annotations

import os
import sys
import time

from farmer.files.atomic import write_text_atomically
from farmer.report.lastbuild import rounded
from farmer.startup import jsontext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import TextIO

    from farmer.graph.graph import Computation
    from farmer.run.scheduler import Outcome, Settled

_SHOW_BYTES = 64 * 1024  # more output than this is cut to its tail; the log has it all


def read_output(log: str | os.PathLike) -> str:
    """A log's text for the terminal: its tail when it is long."""
    try:
        with open(os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return ""
            if size > _SHOW_BYTES:
                f.seek(size - _SHOW_BYTES)
                data = f.read()
                return f"[... {size - _SHOW_BYTES} bytes cut; see {log}]\n" + data.decode("utf-8", "replace")
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def failure_text(comp: Computation, reason: str, log: str | os.PathLike, output: str,
                 kept: list[str] = ()) -> str:
    """`kept`: where the failed run's outputs were moved (.farmer/failed/PATH)."""
    lines = [f"FAILED: {comp.task} {comp.id} ({reason})"]
    if comp.action is not None:
        lines.append(f"  {comp.kind}: {comp.action}")
    lines.append(f"  log: {log}")
    lines.extend(f"  output kept: {path}" for path in kept)
    text = "\n".join(lines) + "\n"
    if output:
        text += output if output.endswith("\n") else output + "\n"
    return text


def label(comp: Computation) -> str:
    edge = comp.ninja  # a ninja rule's description
    return (edge is not None and edge.description) or f"{comp.task} {comp.id}"


class Progress:
    """What the user sees of a build while it runs, as n2's `Progress`: the build calls
    `started` once its scheduler starts, `finished` and `progress` as computations end and
    start, `message` for anything else it says (failures, warnings, --explain), and `close`
    at its end. Plain lines (`PlainReporter`) and a live view (`LiveReporter`) are two;
    whatever reports to another place (a client of a server) is a third."""

    __slots__ = ()
    threaded = False  # it runs a thread of its own once started
    counts_running = False  # told of what runs (`progress`) without a live view too

    def started(self, setting_up: Callable[[], dict[str, float]]) -> None:
        """The scheduler starts. `setting_up`: the worlds being set up now (name -> since
        when), as the build's executor answers."""

    def finished(self, comp: Computation, done: int, total: int, output: str) -> None:
        """`comp` ended (`done` of `total` now; `output`: what it printed, to show)."""

    def message(self, text: str) -> None:
        """A line (or lines) to show as it is."""

    def failed(self, comp: Computation, reason: str, log: str | os.PathLike, output: str,
               kept: list[str]) -> None:
        """`comp` failed: what it printed (`output`), its log, where its outputs were kept."""
        self.message(failure_text(comp, reason, log, output, kept))

    def progress(self, done: int, total: int, running: list[Computation], eta_s: float | None) -> None:
        """What runs now, and the time left as estimated (None: unknown)."""

    def close(self) -> None:
        """The build's runs are over."""


class PlainReporter(Progress):
    """One line per finished computation, as ninja prints on a dumb terminal, then the
    output it printed."""

    __slots__ = ("out",)

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out

    def finished(self, comp: Computation, done: int, total: int, output: str) -> None:
        text = f"[{done}/{total}] {label(comp)}\n"
        if output:
            text += output if output.endswith("\n") else output + "\n"
        self.out.write(text)
        self.out.flush()

    def message(self, text: str) -> None:
        self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()

    def close(self) -> None:
        self.out.flush()


class LiveReporter(Progress):
    """A live view for terminals: progress bar, done/total, ETA and what runs now."""

    __slots__ = ("console", "total", "done", "running", "eta_s", "eta_at", "setting_up", "live")
    threaded = True  # rich's, which refreshes the view

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.total = total
        self.done = 0
        self.running: list[Computation] = []
        self.eta_s: float | None = None
        self.eta_at = time.monotonic()
        # The worlds being set up now (name -> since when): the build's executor answers.
        self.setting_up: Callable[[], dict[str, float]] = dict
        # Live renders `self` anew at each refresh, so the ETA counts down between events.
        self.live = Live(self, console=self.console, refresh_per_second=8, transient=True)

    def started(self, setting_up: Callable[[], dict[str, float]]) -> None:
        self.setting_up = setting_up
        self.start()

    def start(self) -> None:
        """Show it: from here rich's thread refreshes it (the build forks its process
        starter before, executors/forked.py)."""
        self.live.start()

    def __rich__(self):  # noqa: ANN204 - a rich renderable
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        eta = ""
        if self.eta_s is not None:
            # Counted down between estimates, but never to 0 while work runs: what overruns
            # its estimate still takes a while (latency.estimates.remaining_s).
            left = self.eta_s - (time.monotonic() - self.eta_at)
            eta = f"  ETA {max(left, 0.25 * self.eta_s, 0.1):.1f} s"
        head = Table.grid(padding=(0, 1))
        head.add_row(ProgressBar(total=max(self.total, 1), completed=self.done, width=40),
                     Text(f"{self.done}/{self.total}{eta}"))
        rows = [head]
        worlds = self.setting_up()
        now = time.monotonic()
        for name, began in worlds.items():  # a step of its own, ahead of its tasks
            waiting = sum(1 for comp in self.running if comp.world == name)  # (a restarted world's)
            rows.append(Text(f"  setting up world {name} ({now - began:.1f} s"
                             + (f"; {waiting} task{'s' if waiting != 1 else ''} waiting)" if waiting else ")")))
        running = [comp for comp in self.running if comp.world not in worlds]
        for comp in running[:8]:
            rows.append(Text(f"  {label(comp)}", overflow="ellipsis", no_wrap=True))
        if len(running) > 8:
            rows.append(Text(f"  ... and {len(running) - 8} more"))
        return Group(*rows)

    def finished(self, comp: Computation, done: int, total: int, output: str) -> None:
        self.done = done
        if output:
            self.message(output)

    def message(self, text: str) -> None:
        self.live.console.print(text.rstrip("\n"), markup=False, highlight=False)

    def progress(self, done: int, total: int, running: list[Computation], eta_s: float | None) -> None:
        if eta_s != self.eta_s:
            self.eta_s, self.eta_at = eta_s, time.monotonic()
        self.done, self.total, self.running = done, total, running
        self.live.refresh()

    def close(self) -> None:
        self.live.stop()


def last_build_tasks(comps: list[Computation], selected: list[int], settled: dict[int, Settled],
                     outcomes: dict[int, Outcome]) -> list[dict]:
    """last-build.json's tasks; a computation that did not run has null times, one that
    did not settle in `settled` is up to date."""
    tasks = []
    for i in selected:
        comp = comps[i]
        s = settled.get(i)
        o = outcomes.get(i)
        tasks.append({
            "id": comp.id, "task": comp.task, "outputs": comp.outputs,
            "status": s.status if s else "up-to-date", "reason": s.reason if s else "up to date",
            "world": comp.world,
            "start_s": rounded(o.start_s) if o else None, "end_s": rounded(o.end_s) if o else None,
            "duration_s": rounded(o.end_s - o.start_s) if o else None,
            "cpu_s": rounded(o.cpu_s) if o and o.cpu_s is not None else None,
            "max_rss_kb": o.max_rss_kb if o else None,
            "exit_code": o.exit_code if o else None,
            # SPEC §5: where a cached one came from, where one that ran ran
            "cache": o.origin.name if o is not None and o.origin.restored else None,
            "executor": o.origin.name if o is not None and not o.origin.restored else None,
        })
        if o is not None and o.local_because:  # with remote execution on: why it ran here
            tasks[-1]["local_because"] = o.local_because
        if o is not None and o.remote_lookup:  # with a remote: what it looked up, and what came of it
            tasks[-1]["remote_lookup"] = {"action": o.remote_lookup[0], "result": o.remote_lookup[1]}
    return tasks


# json.dumps(data, separators=(",", ":")), byte for byte; json is imported only for big data
# or strings to escape (farmer/startup/jsontext.py).
compact_json = jsontext.dumps
compact_json_each = jsontext.dumps_each

# tasks made into dicts at a time, not all at once (see bench/results/issue17-passes.md#memory-of-a-100k-clean-build)
_AT_ONCE = 1000


def last_build_json_each(comps: list[Computation], selected: list[int], settled: dict[int, Settled],
                         outcomes: dict[int, Outcome]) -> list[str]:
    """`compact_json_each(last_build_tasks(...))`, a thousand tasks' dicts at a time."""
    entries: list[str] = []
    for k in range(0, len(selected), _AT_ONCE):
        entries += compact_json_each(last_build_tasks(comps, selected[k:k + _AT_ONCE], settled, outcomes))
    return entries


def last_build_json(comps: list[Computation], selected: list[int], settled: dict[int, Settled],
                    outcomes: dict[int, Outcome]) -> Iterator[bytes]:
    """`compact_json(last_build_tasks(...)).encode()` in parts, a thousand tasks at a time,
    each made when asked for (written as it comes, never held whole)."""
    yield b"["
    for k in range(0, len(selected), _AT_ONCE):
        text = compact_json(last_build_tasks(comps, selected[k:k + _AT_ONCE], settled, outcomes))
        yield b"," if k else b""
        yield text[1:-1].encode()
    yield b"]"


def write_json_atomically(path: str | os.PathLike, data: dict) -> None:
    write_text_atomically(path, compact_json(data) + "\n")
