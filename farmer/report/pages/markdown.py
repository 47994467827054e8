"""`farmer report --markdown`: a summary for CI job pages (GitHub's $GITHUB_STEP_SUMMARY,
GitLab's merge request notes): counts, wall time, critical path, slowest steps, failures."""

from __future__ import annotations

from farmer.report.pages.model import LastBuild
from farmer.report.pages.model import seconds as _s

SLOWEST = 10
FAILURES_SHOWN = 20


def render(build: LastBuild) -> str:
    head = build.head
    word = {"ok": "succeeded", "failed": "FAILED", "interrupted": "was INTERRUPTED"}.get(build.status, build.status)
    out = [f"## farmer build {word}", ""]
    out.append("| ran | up to date | cached | failed | skipped | wall | critical path | predicted |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    out.append(f"| {build.count('ran')} | {build.count('up-to-date')} | {build.count('cached')} "
               f"| {build.count('failed')} | {build.count('skipped')} | {_s(head.get('wall_s'))} "
               f"| {_s(head.get('critical_path_s'))} | {_s(head.get('predicted_makespan_s'))} |")
    out.append("")
    if build.remote_error:
        out += [f"**Remote error:** {_html(build.remote_error)}", ""]
    if build.critical_path:
        chain = " → ".join(f"`{_code(e.id)}`" for e in build.critical_path[:12])
        if len(build.critical_path) > 12:
            chain += f" → … ({len(build.critical_path) - 12} more)"
        out += [f"**Critical path:** {chain}", ""]
    if build.worlds:
        said = [f"`{_code(w.name)}` {_s(w.duration_s)}" + ("" if w.status == "ok" else f" ({w.reason})")
                if w.timed else f"`{_code(w.name)}` ({w.reason})" for w in build.worlds]
        out += [f"**World set-ups:** {', '.join(said)}", ""]
    failures = build.failures()
    setups = build.failed_setups()
    if failures or setups:
        out += [f"### Failures ({len(failures) + len(setups)})", ""]
        for w in setups:
            out.append(f"<details><summary><code>{_html(w.id)}</code>: the world's setup failed, so its "
                       f"tasks could not run (.farmer/{_html(w.log)})</summary>")
            out.append("")
            tail = build.world_log_tail(w)
            out += ["```", tail.replace("```", "'''") if tail else "(no output)", "```", "</details>", ""]
        for e in failures[:FAILURES_SHOWN]:
            out.append(f"<details><summary><code>{_html(e.task)} {_html(e.id)}</code>: {_html(e.reason)}</summary>")
            out.append("")
            tail = build.log_tail(e)
            out += ["```", tail.replace("```", "'''") if tail else "(no output)", "```", "</details>", ""]
        if len(failures) > FAILURES_SHOWN:
            out += [f"… and {len(failures) - FAILURES_SHOWN} more failures (see the HTML report).", ""]
    slowest = build.slowest(SLOWEST)
    if slowest:
        out += ["### Slowest steps", "", "| step | task | status | time | predicted |", "|---|---|---|---:|---:|"]
        for e in slowest:
            out.append(f"| `{_code(e.id)}` | {_cell(e.task)} | {e.status} | {_s(e.duration_s)} | {_s(e.predicted_s)} |")
        out.append("")
    for note in build.notes:
        out += [f"_{_cell(note)}_", ""]
    return "\n".join(out)


def _code(text: str) -> str:
    return text.replace("`", "'").replace("|", "\\|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
