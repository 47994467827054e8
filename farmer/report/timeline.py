"""Timelines of a build, simulated or measured: a Gantt chart for the terminal (one row
per CPU slot), parallelism over time, and Chrome trace-event JSON that Perfetto opens."""

from __future__ import annotations

from pathlib import Path

from farmer.graph.graph import Computation
from farmer.plan.latency.predict import Prediction
from farmer.report.console import write_json_atomically
from farmer.run.scheduler import Span, WorldSpan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

_BARS = " ▁▂▃▄▅▆▇█"
_FILL = "▓▒"  # alternating, so neighbouring computations in a row stay apart
_CRITICAL = "█"
_SETUP = "░"  # a world's set-up


def gantt(spans: list[Span], comps: list[Computation], jobs: int, critical: set[int | str],
          width: int = 64, worlds: Iterable[WorldSpan] = ()) -> str:
    """One row per slot; the critical path drawn solid, a world's set-up as `_SETUP` on the
    slot it held. Short runs may share a cell."""
    setups = [w for w in worlds if w.slots and w.start_s is not None and w.end_s is not None
              and w.end_s > w.start_s]
    end = max([s.end_s for s in spans] + [w.end_s for w in setups], default=0.0)
    if end <= 0:
        return "(nothing runs)"
    scale = width / end
    rows = []
    for slot in range(jobs):
        cells = [" "] * width
        for w in setups:
            if slot in w.slots:
                a = int(w.start_s * scale)
                ch = _CRITICAL if w.world in critical else _SETUP
                for x in range(a, min(max(a + 1, int(round(w.end_s * scale))), width)):
                    cells[x] = ch
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
                       critical: set[int | str], title: str, worlds: Iterable[WorldSpan] = ()) -> None:
    """Trace-event JSON: one track per slot, the critical path in its own category; each
    world's set-up a span of its own (`world NAME set-up`, category `world_setup`), on the
    slot it held, or on a track of its own when a task's start began it."""
    setups = [w for w in worlds if w.start_s is not None and w.end_s is not None]
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": title}}]
    tracks = {s.slot for s in spans} | {w.slots[0] for w in setups if w.slots}
    for slot in sorted(tracks):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": slot,
                       "args": {"name": f"slot {slot}"}})
    own_track = max(tracks, default=-1) + 1  # for set-ups that held no slot
    if any(not w.slots for w in setups):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": own_track,
                       "args": {"name": "world set-ups"}})
    timed: list[tuple[float, dict]] = []
    for s in spans:
        comp = comps[s.index]
        on_path = s.index in critical
        timed.append((s.start_s, {
            "name": comp.id, "cat": "critical_path" if on_path else comp.task, "ph": "X",
            "ts": round(s.start_s * 1e6), "dur": max(1, round((s.end_s - s.start_s) * 1e6)),
            "pid": 1, "tid": s.slot,
            "args": {"task": comp.task, "critical_path": on_path},
            **({"cname": "terrible"} if on_path else {}),
        }))
    for w in setups:
        on_path = w.world in critical
        timed.append((w.start_s, {
            "name": f"world {w.world} set-up", "cat": "critical_path" if on_path else "world_setup",
            "ph": "X", "ts": round(w.start_s * 1e6), "dur": max(1, round((w.end_s - w.start_s) * 1e6)),
            "pid": 1, "tid": w.slots[0] if w.slots else own_track,
            "args": {"world": w.world, "status": w.status, "critical_path": on_path},
            **({"cname": "terrible"} if on_path else {}),
        }))
    timed.sort(key=lambda t: t[0])
    events += [e for _, e in timed]
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
    if simulated and any(isinstance(step, str) for step in p.critical_steps):
        # Beyond SPEC §4: the path with the world set-ups on it, each as `world NAME set-up`.
        out["critical_steps"] = [_step_name(step, comps) for step in p.critical_steps]
    setups = _measured_setups(p)
    if simulated and setups:
        # Beyond SPEC §4: the worlds' set-up, which heads their tasks' paths.
        began = {w.world: w.start_s for w in p.simulation.world_spans if w.start_s is not None}
        out["world_setups"] = [{"world": w, "setup_s": round(s, 4),
                                **({"start_s": round(began[w], 4)} if w in began else {}),
                                "ready_s": round(p.simulation.world_ready[w], 4)} for w, s in setups.items()]
        out["critical_world"] = p.critical_world
    if simulated:
        out["schedule"] = [{"id": comps[s.index].id, "start_s": round(s.start_s, 4),
                            "end_s": round(s.end_s, 4), "slot": s.slot}
                           for s in sorted(p.simulation.timeline, key=lambda s: (s.start_s, s.slot))]
    return out


def _step_name(step: int | str, comps: list[Computation]) -> str:
    return f"world {step} set-up" if isinstance(step, str) else comps[step].id


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
    lines += [
        "",
        f"predicted makespan  {p.makespan_s:8.2f} s",
        (f"critical path       {p.critical_path_s:8.2f} s  "
         + " -> ".join(_step_name(step, comps) for step in p.critical_steps[:12])
         + (" -> ..." if len(p.critical_steps) > 12 else "")).rstrip(),
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
                  f"timeline ({_CRITICAL} critical path, {_SETUP} world set-up)",
                  gantt(spans, comps, p.jobs, set(p.critical_steps), worlds=p.simulation.world_spans)]
    return "\n".join(lines)
