"""Timelines of a build, simulated or measured: a Gantt chart for the terminal (one row
per CPU slot), parallelism over time, and Chrome trace-event JSON that Perfetto opens."""

from __future__ import annotations

from pathlib import Path

from farmer.graph.graph import Computation
from farmer.plan.latency.predict import Prediction
from farmer.report.console import write_json_atomically
from farmer.run.scheduler import Span

_BARS = " ▁▂▃▄▅▆▇█"
_FILL = "▓▒"  # alternating, so neighbouring computations in a row stay apart
_CRITICAL = "█"


def gantt(spans: list[Span], comps: list[Computation], jobs: int, critical: set[int],
          width: int = 64) -> str:
    """One row per slot; the critical path drawn solid. Short runs may share a cell."""
    end = max((s.end_s for s in spans), default=0.0)
    if end <= 0:
        return "(nothing runs)"
    scale = width / end
    rows = []
    for slot in range(jobs):
        cells = [" "] * width
        mine = sorted((s for s in spans if slot in s.slots), key=lambda s: s.start_s)
        for n, s in enumerate(mine):
            a = int(s.start_s * scale)
            b = max(a + 1, int(round(s.end_s * scale)))
            ch = _CRITICAL if s.index in critical else _FILL[n % 2]
            for x in range(a, min(b, width)):
                cells[x] = ch
        rows.append(f"slot {slot:<2}|{''.join(cells)}|")
    rows.append(f"{'':7}0{'':{width - 1 - len(f'{end:.2f} s')}}{end:.2f} s")
    return "\n".join(rows)


def parallelism(spans: list[Span], comps: list[Computation], width: int = 64) -> str:
    """How many CPU slots are busy over time, as a sparkline, with its mean."""
    end = max((s.end_s for s in spans), default=0.0)
    if end <= 0:
        return ""
    step = end / width
    busy = [0.0] * width
    for s in spans:
        cpus = max(1, comps[s.index].cpus)
        for x in range(width):
            lo, hi = x * step, (x + 1) * step
            overlap = min(hi, s.end_s) - max(lo, s.start_s)
            if overlap > 0:
                busy[x] += cpus * overlap / step
    top = max(busy) or 1.0
    line = "".join(_BARS[min(8, round(8 * b / top))] for b in busy)
    mean = sum((s.end_s - s.start_s) * max(1, comps[s.index].cpus) for s in spans) / end
    return f"       {line}  (mean {mean:.2f}, peak {top:.1f})"


def write_chrome_trace(path: Path, spans: list[Span], comps: list[Computation],
                       critical: set[int], title: str) -> None:
    """Trace-event JSON: one track per slot, the critical path in its own category."""
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": title}}]
    for slot in sorted({s.slot for s in spans}):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": slot,
                       "args": {"name": f"slot {slot}"}})
    for s in sorted(spans, key=lambda s: s.start_s):
        comp = comps[s.index]
        on_path = s.index in critical
        events.append({
            "name": comp.id, "cat": "critical_path" if on_path else comp.task, "ph": "X",
            "ts": round(s.start_s * 1e6), "dur": max(1, round((s.end_s - s.start_s) * 1e6)),
            "pid": 1, "tid": s.slot,
            "args": {"task": comp.task, "critical_path": on_path},
            **({"cname": "terrible"} if on_path else {}),
        })
    write_json_atomically(path, {"traceEvents": events, "displayTimeUnit": "ms"})


def _measured_setups(p: Prediction) -> dict[str, float]:
    """The set-up seconds of the worlds the simulation set up, those with a history."""
    if p.worlds is None:
        return {}
    return {w: p.worlds.seconds[w] for w in p.simulation.world_ready if w in p.worlds.seconds}


def prediction_json(p: Prediction, comps: list[Computation], simulated: bool) -> dict:
    """SPEC §4's `plan --json`; the schedule and time figures only with --simulate."""
    order = p.simulation.start_order
    out: dict = {
        "jobs": p.jobs,
        "to_run": [{"id": comps[i].id, "reason": p.to_run[i], "estimate_s": round(p.estimates[i], 4)}
                   for i in order],
    }
    if simulated:
        out.update({
            "makespan_s": round(p.makespan_s, 4), "critical_path_s": round(p.critical_path_s, 4),
            "total_work_s": round(p.total_work_s, 4), "lower_bound_s": round(p.lower_bound_s, 4),
        })
    out["critical_path"] = [comps[i].id for i in p.critical_path]
    setups = _measured_setups(p)
    if simulated and setups:
        # Beyond SPEC §4: the worlds' set-up, which heads their tasks' paths.
        out["world_setups"] = [{"world": w, "setup_s": round(s, 4),
                                "ready_s": round(p.simulation.world_ready[w], 4)} for w, s in setups.items()]
        out["critical_world"] = p.critical_world
    if simulated:
        out["schedule"] = [{"id": comps[s.index].id, "start_s": round(s.start_s, 4),
                            "end_s": round(s.end_s, 4), "slot": s.slot}
                           for s in sorted(p.simulation.timeline, key=lambda s: (s.start_s, s.slot))]
    return out


def prediction_text(p: Prediction, comps: list[Computation], total: int, simulated: bool) -> str:
    order = p.simulation.start_order
    lines = [f"farmer plan: {len(p.to_run)} of {total} computations would run (-j {p.jobs})"]
    for i in order:
        estimate = "       ? s" if i in p.unknown else f"{p.estimates[i]:8.2f} s"
        lines.append(f"  {estimate}  {comps[i].task} {comps[i].id}: {p.to_run[i]}")
    if not simulated:
        return "\n".join(lines)
    if not p.known:
        return "\n".join(lines + ["", f"predicted makespan  no history yet: {len(p.unknown)} of "
                                  f"{len(p.to_run)} computations were never measured and have "
                                  "no cost; build once (or give tasks a cost) to predict"])
    spans = [s for s in p.simulation.timeline if s.end_s > s.start_s]
    setups = _measured_setups(p)
    on_path = set(p.critical_path)
    lines += [
        "",
        f"predicted makespan  {p.makespan_s:8.2f} s",
        (f"critical path       {p.critical_path_s:8.2f} s  "
         + " -> ".join(([f"world {p.critical_world} set-up"] if p.critical_world else [])
                       + [comps[i].id for i in p.critical_path[:12]])
         + (" -> ..." if len(p.critical_path) > 12 else "")).rstrip(),
        f"total work          {p.total_work_s:8.2f} s",
        *([f"world set-up        {sum(setups.values()):8.2f} s  "
           + ", ".join(f"{w} {s:.2f} s" for w, s in setups.items())] if setups else []),
        f"lower bound         {p.lower_bound_s:8.2f} s  = max(critical path, work / {p.jobs})",
    ]
    if p.fifo_makespan_s is not None and p.unit_makespan_s is not None:
        lines += [
            f"same graph, FIFO order as make:                  {p.fifo_makespan_s:8.2f} s",
            f"same graph, unit-weight critical path as ninja:  {p.unit_makespan_s:8.2f} s",
        ]
    if spans:
        lines += ["", "parallelism", parallelism(spans, comps), "",
                  f"timeline ({_CRITICAL} critical path)", gantt(spans, comps, p.jobs, on_path)]
    return "\n".join(lines)
