"""`farmer report`: the last build's model, then each report asked for."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from farmer.errors import UsageError
from farmer.report.pages import model


def gather(load_project: Callable[[], tuple]) -> model.LastBuild:
    """The last build of the project `load_project` finds (it enters the project root), with
    the graph's critical path and predictions; without them, and a note saying why, when
    the Farmfile cannot be read now."""
    try:
        spec, graph = load_project()
    except UsageError as e:
        build = model.load(os.path.join(os.getcwd(), ".farmer"))
        build.notes.append(f"no critical path nor predictions: {e}")
        return build
    build = model.load(os.path.join(spec.root, ".farmer"))
    model.add_history_and_graph(build, graph, {name: w.parent for name, w in spec.worlds.items()})
    return build


def report(load_project: Callable[[], tuple], html_file: str | None, junit_file: str | None,
           markdown: bool) -> int:
    """Write what was asked; with nothing asked, print the markdown summary."""
    build = gather(load_project)
    from farmer.files.atomic import write_text_atomically

    if html_file:
        from farmer.report.pages import html

        write_text_atomically(html_file, html.render(build))
    if junit_file:
        from farmer.report.pages import junit

        write_text_atomically(junit_file, junit.render(build))
    if markdown or not (html_file or junit_file):
        from farmer.report.pages import markdown as md

        sys.stdout.write(md.render(build))
    return 0
