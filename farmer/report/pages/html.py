"""`farmer report --html FILE`: one self-contained page of the last build. Lists that grow
with the build are cut to their top entries or aggregated per task and per reason; the
timeline and the parallelism are drawn on canvases and the table of every computation is
paged by the page's script (farmer/report/pages/page.py): docs/reports.md says how."""

from __future__ import annotations

from html import escape

from farmer.report.pages import page
from farmer.report.pages.model import Entry, LastBuild
from farmer.report.pages.model import seconds as _s

SLOWEST = 20
FAILURES_SHOWN = 50
MISSES = 20  # computations whose prediction missed most
REASONS = 15
CRITICAL_SHOWN = 40
TASKS_SHOWN = 30
# The timeline's colours of the tasks with the most time; the others are grey.
SETUP_COLOR = "#8c6d46"  # a world's set-up, on the slot it held
PALETTE = ("#3b7dd8", "#7a5cc7", "#2aa198", "#c05a9c", "#5b8c2a", "#b8732e", "#4a6fa5", "#8e6c8a",
           "#3f9fbf", "#9b8a2e", "#6d7fcc", "#a0522d")


def render(build: LastBuild) -> str:
    head = build.head
    by_task = _tasks(build.entries)
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>farmer build {escape(build.status)} · {escape(str(head.get('started_at', '')))}</title>",
        f"<style>{page.CSS}</style></head><body>",
        _header(build),
        _failures(build),
        _timeline(build, by_task),
        _critical(build),
        "<div class=\"two\">", _slowest(build), _predictions(build), "</div>",
        "<div class=\"two\">", _why(build), _per_task(by_task), "</div>",
        _all(build),
        "<div id=\"tip\"></div>",
        f"<script type=\"application/json\" id=\"farmer-data\">{_data(build, by_task)}</script>",
        f"<script>{page.JS}</script></body></html>\n",
    ]
    return "\n".join(p for p in parts if p)


def _header(build: LastBuild) -> str:
    head = build.head
    status = build.status
    cards = [("ran", build.count("ran")), ("up to date", build.count("up-to-date")),
             ("cached", build.count("cached")), ("failed", build.count("failed")),
             ("skipped", build.count("skipped")), ("wall", _s(head.get("wall_s"))),
             ("critical path", _s(head.get("critical_path_s"))),
             ("predicted", _s(head.get("predicted_makespan_s")))]
    where = _cache_split(build.entries)
    if where:
        cards.append(("cached from", where))
    out = [f"<h1>farmer build <span class=\"status {escape(status)}\">{escape(status)}</span></h1>",
           f"<div class=\"meta\">started {escape(str(head.get('started_at', '?')))} · -j {escape(str(head.get('jobs', '?')))}"
           f" · {len(build.entries)} computations · farmer {escape(str(head.get('farmer_version', '?')))}</div>",
           "<div class=\"cards\">"]
    for label, value in cards:
        cls = label.split()[0] if label in ("failed", "cached") else ""
        out.append(f"<div class=\"card {cls}\"><b>{escape(str(value))}</b><span>{escape(label)}</span></div>")
    out.append("</div>")
    if build.remote_error:
        out.append(f"<p class=\"note\">The build failed on a remote error: {escape(build.remote_error)}</p>")
    for note in build.notes:
        out.append(f"<p class=\"note\">{escape(note)}</p>")
    return "\n".join(out)


def _failures(build: LastBuild) -> str:
    failures = build.failures()
    setups = build.failed_setups()
    if not failures and not setups:
        return ""
    out = [f"<h2 id=\"failures\">Failures ({len(failures) + len(setups)})</h2>"]
    for w in setups:
        tail = build.world_log_tail(w)
        out.append(f"<div class=\"failure\"><h3>{escape(w.id)} <span class=\"why\">the world's setup "
                   f"failed, so its tasks could not run (.farmer/{escape(w.log)})</span></h3>"
                   f"<pre>{escape(tail) if tail else '(no output)'}</pre></div>")
    for e in failures[:FAILURES_SHOWN]:
        tail = build.log_tail(e)
        out.append(f"<div class=\"failure\"><h3>{escape(e.task)} {escape(e.id)} "
                   f"<span class=\"why\">{escape(e.reason)}</span></h3>"
                   f"<pre>{escape(tail) if tail else '(no output)'}</pre></div>")
    if len(failures) > FAILURES_SHOWN:
        out.append(f"<p class=\"note\">and {len(failures) - FAILURES_SHOWN} more: see the table of every computation.</p>")
    return "\n".join(out)


def _timeline(build: LastBuild, by_task: dict[str, _Task]) -> str:
    if not build.timed() and not any(w.timed for w in build.worlds):
        return "<h2>Timeline</h2><p class=\"note\">Nothing ran in this build: everything was up to date.</p>"
    legend = "".join(f"<span><i style=\"background:{c}\"></i>{escape(t)}</span>"
                     for t, c in zip(by_task, PALETTE) if by_task[t].timed)
    if any(w.timed for w in build.worlds):
        legend += f"<span><i style=\"background:{SETUP_COLOR}\"></i>world set-up</span>"
    legend += ("<span><i style=\"background:#2e9e6b\"></i>cached</span>"
               "<span><i style=\"background:#d64545\"></i>failed</span>"
               "<span><i style=\"background:#fff;border:2px solid #f0a020\"></i>critical path</span>")
    return ("<h2>Timeline</h2>"
            "<p class=\"note\">Each row is a slot (a computation is drawn in the lowest slot free when it"
            " started, a world's set-up in the slot it held); hover a bar for its details.</p>"
            f"{_setups_line(build)}"
            f"<div class=\"legend\">{legend}</div>"
            "<div class=\"chart\"><canvas id=\"timeline\"></canvas></div>"
            "<h2>Parallelism</h2><p class=\"note\">Computations running over time; the dashed line is -j.</p>"
            "<div class=\"chart\"><canvas id=\"parallelism\"></canvas></div>")


def _setups_line(build: LastBuild) -> str:
    """The worlds of the build, named: what the timeline's set-up bars are."""
    if not build.worlds:
        return ""
    said = [f"{escape(w.name)} {_s(w.duration_s)}" if w.timed else f"{escape(w.name)} ({escape(w.reason)})"
            for w in build.worlds]
    failed = [escape(w.name) for w in build.failed_setups()]
    return (f"<p class=\"note\">World set-ups: {', '.join(said)}"
            + (f"; failed: {', '.join(failed)}" if failed else "") + ".</p>")


def _critical(build: LastBuild) -> str:
    path = build.critical_path
    if not path:
        return ""
    total = sum(e.duration_s or 0.0 for e in path)
    rows = [f"<tr><td class=\"n\">{k + 1}</td><td class=\"id\">{escape(e.id)}</td><td>{escape(e.task)}</td>"
            f"<td class=\"n\">{_s(e.start_s)}</td><td class=\"n\">{_s(e.duration_s)}</td>"
            f"<td class=\"n\">{_s(e.predicted_s)}</td></tr>" for k, e in enumerate(path[:CRITICAL_SHOWN])]
    more = (f"<p class=\"note\">and {len(path) - CRITICAL_SHOWN} more steps.</p>"
            if len(path) > CRITICAL_SHOWN else "")
    return (f"<h2>Critical path ({len(path)} steps, {_s(total)})</h2>"
            "<p class=\"note\">The chain of computations that ran (and world set-ups), each needing the"
            " one before, whose durations add up most: the build cannot be faster than it.</p>"
            "<table><tr><th class=\"n\">#</th><th>computation</th><th>task</th><th class=\"n\">start</th>"
            f"<th class=\"n\">time</th><th class=\"n\">predicted</th></tr>{''.join(rows)}</table>{more}")


def _slowest(build: LastBuild) -> str:
    rows = []
    for e in build.slowest(SLOWEST):
        cpu = _s(e.cpu_s)
        rss = f"{e.max_rss_kb / 1024:.0f} MB" if isinstance(e.max_rss_kb, (int, float)) else "–"
        rows.append(f"<tr><td class=\"id{' crit' if e.critical else ''}\">{escape(e.id)}</td><td>{escape(e.task)}</td>"
                    f"<td>{_badge(e.status)}</td><td class=\"n\">{_s(e.duration_s)}</td>"
                    f"<td class=\"n\">{cpu}</td><td class=\"n\">{rss}</td></tr>")
    if not rows:
        return "<div><h2>Slowest computations</h2><p class=\"note\">None ran.</p></div>"
    return ("<div><h2>Slowest computations</h2><table><tr><th>computation</th><th>task</th><th>status</th>"
            "<th class=\"n\">time</th><th class=\"n\">CPU</th><th class=\"n\">max RSS</th></tr>"
            f"{''.join(rows)}</table></div>")


def _predictions(build: LastBuild) -> str:
    head = build.head
    both = [e for e in build.timed() if e.predicted_s is not None and e.duration_s is not None]
    out = ["<div><h2>Prediction and real times</h2>",
           f"<p>Predicted makespan {_s(head.get('predicted_makespan_s'))}, real wall time {_s(head.get('wall_s'))}"]
    if both:
        predicted = sum(e.predicted_s for e in both)
        real = sum(e.duration_s for e in both)
        out[-1] += (f"; the {len(both)} computations that ran were predicted to take {_s(predicted)}"
                    f" of work and took {_s(real)}.")
    out[-1] += "</p>"
    if not both:
        out.append("<p class=\"note\">No computation has both a prediction and a measured time.</p></div>")
        return "\n".join(out)
    misses = sorted(both, key=lambda e: (-abs(e.duration_s - e.predicted_s), e.id))[:MISSES]
    top = max(max(e.duration_s, e.predicted_s) for e in misses) or 1.0
    rows = []
    for e in misses:
        rows.append(f"<tr><td class=\"id\">{escape(e.id)}</td><td class=\"n\">{_s(e.predicted_s)}</td>"
                    f"<td class=\"n\">{_s(e.duration_s)}</td><td class=\"n\">{_diff(e)}</td><td>"
                    f"<span class=\"bar pred\" style=\"width:{100 * e.predicted_s / top:.0f}px\"></span><br>"
                    f"<span class=\"bar\" style=\"width:{100 * e.duration_s / top:.0f}px\"></span></td></tr>")
    out.append(f"<p class=\"note\">The {len(misses)} computations whose prediction missed most"
               " (outlined bar: predicted; filled: real).</p>")
    out.append("<table><tr><th>computation</th><th class=\"n\">predicted</th><th class=\"n\">real</th>"
               f"<th class=\"n\">off by</th><th></th></tr>{''.join(rows)}</table></div>")
    return "\n".join(out)


def _why(build: LastBuild) -> str:
    """Why computations ran, or were cached, failed or skipped: the reasons by count, a
    path-specific reason kept as it is (one changed header names one path)."""
    counts: dict[tuple[str, str], int] = {}
    for e in build.entries:
        if e.status != "up-to-date":
            key = (e.status, e.reason)
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return "<div><h2>Why things ran</h2><p class=\"note\">Everything was up to date.</p></div>"
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    rows = "".join(f"<tr><td>{_badge(s)}</td><td>{escape(r)}</td><td class=\"n\">{n}</td></tr>"
                   for (s, r), n in top[:REASONS])
    more = f"<p class=\"note\">and {len(top) - REASONS} other reasons.</p>" if len(top) > REASONS else ""
    return ("<div><h2>Why things ran</h2><table><tr><th>status</th><th>reason</th><th class=\"n\">computations</th></tr>"
            f"{rows}</table>{more}</div>")


class _Task:
    __slots__ = ("name", "count", "by_status", "time", "predicted", "timed")

    def __init__(self, name: str) -> None:
        self.name, self.count, self.by_status = name, 0, {}
        self.time, self.predicted, self.timed = 0.0, 0.0, 0


def _tasks(entries: list[Entry]) -> dict[str, _Task]:
    """Per task, the most time first."""
    tasks: dict[str, _Task] = {}
    for e in entries:
        t = tasks.get(e.task)
        if t is None:
            t = tasks[e.task] = _Task(e.task)
        t.count += 1
        t.by_status[e.status] = t.by_status.get(e.status, 0) + 1
        if e.timed:
            t.timed += 1
            t.time += e.duration_s or 0.0
            t.predicted += e.predicted_s or 0.0
    return dict(sorted(tasks.items(), key=lambda kv: (-kv[1].time, kv[0])))


def _per_task(by_task: dict[str, _Task]) -> str:
    """The tasks with the most time; the others on one row (a generated build can have a
    task per computation)."""
    rows = []
    shown = list(by_task.values())[:TASKS_SHOWN]
    if len(by_task) > TASKS_SHOWN:
        rest = _Task(f"{len(by_task) - TASKS_SHOWN} other tasks")
        for t in list(by_task.values())[TASKS_SHOWN:]:
            rest.count += t.count
            rest.time += t.time
            rest.predicted += t.predicted
            for status, n in t.by_status.items():
                rest.by_status[status] = rest.by_status.get(status, 0) + n
        shown.append(rest)
    for t in shown:
        st = t.by_status
        rows.append(f"<tr><td>{escape(t.name)}</td><td class=\"n\">{t.count}</td><td class=\"n\">{st.get('ran', 0)}</td>"
                    f"<td class=\"n\">{st.get('cached', 0)}</td><td class=\"n\">{st.get('up-to-date', 0)}</td>"
                    f"<td class=\"n\">{st.get('failed', 0)}</td><td class=\"n\">{st.get('skipped', 0)}</td>"
                    f"<td class=\"n\">{_s(t.time)}</td><td class=\"n\">{_s(t.predicted) if t.predicted else '–'}</td></tr>")
    return ("<div><h2>Per task</h2><table><tr><th>task</th><th class=\"n\">all</th><th class=\"n\">ran</th>"
            "<th class=\"n\">cached</th><th class=\"n\">up to date</th><th class=\"n\">failed</th>"
            "<th class=\"n\">skipped</th><th class=\"n\">time</th><th class=\"n\">predicted</th></tr>"
            f"{''.join(rows)}</table></div>")


def _all(build: LastBuild) -> str:
    options = "".join(f"<option value=\"{s}\">{s}</option>" for s in ("ran", "cached", "failed", "skipped", "up-to-date"))
    return ("<h2>Every computation</h2>"
            "<div class=\"controls\"><input id=\"all-filter\" placeholder=\"filter by id, task or reason\">"
            f"<select id=\"all-status\"><option value=\"\">any status</option>{options}</select>"
            "<button id=\"all-prev\">&larr;</button><button id=\"all-next\">&rarr;</button></div>"
            "<div id=\"all-count\" class=\"note\"></div>"
            "<table><thead><tr><th>computation</th><th>task</th><th>status</th><th>reason</th>"
            "<th class=\"n\">start</th><th class=\"n\">time</th><th class=\"n\">predicted</th></tr></thead>"
            "<tbody id=\"all-body\"></tbody></table>")


def _data(build: LastBuild, by_task: dict[str, _Task]) -> str:
    """The page's JSON: the computations that ran first, by start, then the others."""
    import json

    order = sorted(build.timed(), key=lambda e: (e.start_s, e.id)) + [e for e in build.entries if not e.timed]
    rows = [[e.id, e.task, e.status, e.reason, e.start_s, e.end_s, e.lane, _round(e.predicted_s),
             1 if e.critical else 0, e.cache or (e.executor if e.executor == "remote" else None)]
            for e in order]
    setups = [[w.id, w.task, "ran" if w.status == "ok" else w.status, w.reason, w.start_s, w.end_s,
               w.lane, _round(w.predicted_s), 1 if w.critical else 0, None]
              for w in build.worlds if w.timed]
    colors = dict(zip(by_task, PALETTE))
    colors["world set-up"] = SETUP_COLOR
    data = {"wall_s": build.wall_s, "jobs": build.head.get("jobs"),
            "colors": colors, "computations": rows, "setups": setups}
    # "</" would end the script element early: JSON allows "<\/" for it.
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def _cache_split(entries: list[Entry]) -> str:
    local = sum(1 for e in entries if e.status == "cached" and e.cache == "local")
    remote = sum(1 for e in entries if e.status == "cached" and e.cache == "remote")
    return f"{local} local, {remote} remote" if local or remote else ""


def _badge(status: str) -> str:
    return f"<span class=\"badge {escape(status)}\">{escape(status)}</span>"


def _diff(e: Entry) -> str:
    d = e.duration_s - e.predicted_s
    return ("+" if d >= 0 else "−") + _s(abs(d))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
