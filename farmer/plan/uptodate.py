"""The up-to-date rule (SPEC §2): a computation is up to date when its last successful
run's trace matches the action, every recorded input's content and every declared output's
content now. The first difference found is the reason it runs, in SPEC §4's words.
"""

from __future__ import annotations

from farmer.files.digests import Digests, digest_or_changed
from farmer.graph.graph import action_fingerprint
from farmer.store.state import Trace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Computation, Graph


def timed_outputs(graph: Graph) -> Callable[[str, int], bool] | None:
    """Which outputs' digests cover their mtime as well as their content (`Digests.timed`):
    in a build.ninja, stamps and what is not a real product, so that ninja's rule holds for
    them (farmer/graph/ninja_cutoff.py); None for a Farmfile, where early cutoff holds."""
    if not graph.paths_first:
        return None
    from farmer.graph.ninja_cutoff import mtime_counts

    return mtime_counts(graph)


def out_of_date(comp: Computation, trace: Trace | None, world: str | None,
                digests: Digests) -> str | None:
    """Why `comp` must run, or None when it is up to date."""
    if comp.always:
        return "always"
    if trace is None:
        return "never built"
    # The set first: a glob's new match also changes a command that names {inputs}.
    if len(trace.inputs) != len(comp.inputs) or any(
            p != q for (p, _), q in zip(trace.inputs, comp.inputs)):
        return "inputs changed"
    if trace.action != (comp.fingerprint or action_fingerprint(comp)):
        return "command changed"
    if trace.world != world:
        return f"world {comp.world} changed"
    # A trace records a missing input as "missing" (a depfile may list a file that is gone).
    for path, digest in trace.inputs:
        if (digest_or_changed(digests, path) or "missing") != digest:
            return f"input {path} changed"
    for path, digest in trace.discovered:
        if (digest_or_changed(digests, path) or "missing") != digest:
            return f"input {path} changed"
    for path, digest in trace.outputs:
        now = digest_or_changed(digests, path)
        if now is None:
            return f"output {path} missing"
        if now != digest:
            if digest == "missing":
                # A build.ninja output the run did not make, made since by another edge
                # (ExternalProject's install step writes what the build step declares): as
                # ninja sees it, present and newer than the inputs, so up to date.
                continue
            return f"output {path} edited"
    return None


def to_run(comps: list[Computation], selected: list[int], check: Callable[[int], str | None]) -> dict[int, str]:
    """What a build of `selected` would run and why, without running anything. A build
    cannot know early cutoff in advance, so a consumer of anything that would run is listed
    too. `check(i)` is the computation's own up-to-date test."""
    out: dict[int, str] = {}
    for i in selected:  # topological order: producers are decided first
        comp = comps[i]
        if comp.kind is None:
            continue
        reason = check(i)
        if reason is None:
            for p in comp.producers:
                if p in out:
                    path = next((x for x in comp.inputs if x in comps[p].outputs), comps[p].id)
                    reason = f"input {path} will be rebuilt"
                    break
        if reason is not None:
            out[i] = reason
    return out
