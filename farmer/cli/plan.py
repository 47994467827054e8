"""`farmer plan`: what a build would run and why (and the stale outputs it would remove
first), and with `--simulate` how long it would take. It reads the state and writes nothing
(but the trace file asked for)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from farmer.graph.graph import Graph
from farmer.manifest.spec import Spec
from farmer.plan.session import open_session
from farmer.plan.stale import would_remove
from farmer.report.timeline import prediction_json, prediction_text, write_chrome_trace


def run_plan(spec: Spec, graph: Graph, targets: list[str], jobs: int, simulated: bool,
             from_scratch: bool, as_json: bool, trace_file: str | None) -> int:
    session = open_session(spec, graph, os.path.join(spec.root, ".farmer"), targets, readonly=True,
                           from_scratch=from_scratch)
    try:
        comps = graph.computations
        if from_scratch:
            to_run = {i: "never built" for i in session.selected if comps[i].kind is not None}
        else:
            to_run = session.to_run()
        prediction = session.predict(to_run, jobs, compare=simulated)
        stale = would_remove(spec, graph, session.state)
    finally:
        session.state.close()
    if trace_file:
        write_chrome_trace(Path(trace_file), prediction.simulation.timeline, comps, set(prediction.critical_steps),
                           "farmer plan --simulate", prediction.simulation.world_spans)
    if as_json:
        print(json.dumps({**prediction_json(prediction, comps, simulated), "stale_outputs": stale}, indent=1))
    else:
        text = prediction_text(prediction, comps, len(session.selected), simulated)
        head, _, rows = text.partition("\n")
        # What a build does first: after the heading, before what it would run.
        removals = "".join(f"\n  would remove stale output {path} (no computation declares it now)" for path in stale)
        print(head + removals + ("\n" + rows if rows else ""))
    return 0
