"""farmer as a GitHub Actions step: with GITHUB_ACTIONS=true, a build ends with one `::error`
workflow command per failed computation (pointing at the file and line its output names,
when it names one as compilers do) and appends the markdown summary to the file
$GITHUB_STEP_SUMMARY names. Outside Actions nothing of this runs."""

from __future__ import annotations

import os
import re
import sys

from farmer.report.pages.model import Entry, LastBuild

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    from farmer.graph.graph import Graph

# `path:line:col:` or `path:line:` as gcc, clang, rustc, mypy, ruff, tsc --pretty false print
_LOCATION = re.compile(r"^(?:In file included from )?([^\s:][^:\n]*?):(\d+):(?:(\d+):)?\s")


def in_actions(env: dict | os._Environ = os.environ) -> bool:
    return env.get("GITHUB_ACTIONS") == "true"


def annotation(build: LastBuild, entry: Entry) -> str:
    """The `::error` line of a failed computation."""
    tail = build.log_tail(entry)
    props = [f"title={_property(f'farmer: {entry.task} {entry.id} failed')}"]
    where = location(tail)
    if where is not None:
        path, line, col = where
        props.insert(0, f"file={_property(path)},line={line}" + (f",col={col}" if col else ""))
    message = f"{entry.task} {entry.id}: {entry.reason}"
    if tail:
        message += "\n" + tail
    return f"::error {','.join(props)}::{_data(message)}"


def location(output: str) -> tuple[str, int, int | None] | None:
    """The first `path:line[:col]:` in a command's output whose path is a file under the
    project (relative, or absolute under the working directory), made relative to it."""
    root = os.getcwd() + os.sep
    for raw in output.splitlines():
        m = _LOCATION.match(raw)
        if not m:
            continue
        path = m[1]
        if os.path.isabs(path):
            if not path.startswith(root):
                continue
            path = path[len(root):]
        if os.path.isfile(path):
            return os.path.normpath(path), int(m[2]), int(m[3]) if m[3] else None
    return None


def report_build(farmer_dir: str, graph: Graph | None = None, out: TextIO = sys.stdout,
                 env: dict | os._Environ = os.environ) -> None:
    """The end of a build in Actions: annotations on stdout, the summary appended to
    $GITHUB_STEP_SUMMARY (with the critical path and predictions when `graph` is given).
    A report that cannot be made is a warning, never a failed build."""
    from farmer.errors import UsageError
    from farmer.report.pages import markdown, model

    try:
        build = model.load(farmer_dir)
    except UsageError as e:
        print(f"farmer: warning: no GitHub Actions report: {e}", file=sys.stderr)
        return
    if graph is not None:
        model.add_history_and_graph(build, graph)
    for entry in build.failures():
        out.write(annotation(build, entry) + "\n")
    out.flush()
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(markdown.render(build) + "\n")
        except OSError as e:
            print(f"farmer: warning: GITHUB_STEP_SUMMARY {summary}: {e.strerror}", file=sys.stderr)


def _data(text: str) -> str:
    """A workflow command's message: %, CR and LF escaped (GitHub's toolkit escapeData)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A workflow command's property value (toolkit escapeProperty)."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")
