"""`farmer graph`, `farmer query` and `farmer clean`: looking at and pruning a project."""

from __future__ import annotations

import json
import os

from farmer.errors import UsageError
from farmer.files.confine import check_inside
from farmer.files.lock import ProjectLock
from farmer.graph.graph import Graph, select
from farmer.manifest.spec import Spec
from farmer.run.executors.process import log_path
from farmer.store.state import State, world_setup_id


def _edges(graph: Graph, selected: list[int]) -> list[tuple[int, int]]:
    inside = set(selected)
    return [(p, i) for i in selected for p in graph.computations[i].producers if p in inside]


def graph_json(graph: Graph, selected: list[int]) -> str:
    comps = graph.computations
    return json.dumps({
        "computations": [
            {"id": comps[i].id, "task": comps[i].task, "inputs": comps[i].inputs,
             "outputs": comps[i].outputs, "command": comps[i].action}
            for i in selected],
        "edges": [[comps[p].id, comps[c].id] for p, c in _edges(graph, selected)],
    }, indent=1)


def graph_dot(graph: Graph, selected: list[int]) -> str:
    comps = graph.computations
    lines = ["digraph farmer {", "  rankdir=LR;", "  node [shape=box];"]
    for i in selected:
        lines.append(f"  {json.dumps(comps[i].id)} [label={json.dumps(comps[i].task + chr(10) + comps[i].id)}];")
    for p, c in _edges(graph, selected):
        lines.append(f"  {json.dumps(comps[p].id)} -> {json.dumps(comps[c].id)};")
    lines.append("}")
    return "\n".join(lines)


def _one(graph: Graph, target: str) -> int:
    if target in graph.by_id:
        return graph.by_id[target]
    norm = os.path.normpath(target)
    if norm in graph.producer:
        return graph.producer[norm]
    found = graph.by_task.get(target[1:] if target.startswith("@") else target)
    if found and len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"task {target!r} has {len(found)} computations; query one of its outputs or ids")
    if found is not None:  # a task all the same: "unknown target" would send the reader astray
        raise UsageError(f"task {target!r} has no computations (its foreach matches nothing), so "
                         "there is nothing to query; query it once its foreach matches")
    raise UsageError(f"unknown target {target!r}: not a computation id, task name or declared output")


def query(spec: Spec, graph: Graph, target: str, remote: bool = False) -> str:
    comp = graph.computations[_one(graph, target)]
    farmer_dir = os.path.join(spec.root, ".farmer")
    discovered: list[str] = []
    setup_read: list[str] = []  # what the set-ups of its world chain read (recorded with the world)
    if os.path.exists(os.path.join(farmer_dir, "state.db")):
        state = State(farmer_dir, readonly=True)
        try:
            traces = state.traces()
        finally:
            state.close()
        trace = traces.get(comp.id)
        if trace is not None:
            discovered = [p for p, _ in trace.discovered]
        world = comp.world
        while world is not None and world in spec.worlds:
            kept = traces.get(world_setup_id(world))
            setup_read = [p for p, _ in kept.discovered] + setup_read if kept is not None else setup_read
            world = spec.worlds[world].parent
    lines = [f"id: {comp.id}", f"task: {comp.task}"]
    if comp.wildcards:
        lines.append("wildcards: " + ", ".join(f"{k}={v}" for k, v in sorted(comp.wildcards.items())))
    lines.append(f"{comp.kind or 'command'}: {comp.action if comp.action is not None else '(alias: runs nothing)'}")
    if comp.world:
        lines.append(f"world: {comp.world}")
    if comp.depfile:
        lines.append(f"depfile: {comp.depfile}")
    world_inputs = graph.world_inputs.get(comp.world, []) if comp.world else []
    for title, items in (("inputs", comp.inputs), ("discovered inputs", discovered),
                         *((("world inputs", world_inputs), ("read by the world's setup", setup_read))
                           if comp.world else ()),
                         ("outputs", comp.outputs),
                         ("consumers", [graph.computations[c].id for c in comp.consumers])):
        lines.append(f"{title}:" + ("" if items else " (none)"))
        lines.extend(f"  {x}" for x in items)
    if remote:
        lines.extend(_remote_lines(farmer_dir, comp.id))
    return "\n".join(lines) + "\n"


def _remote_lines(farmer_dir: str, cid: str) -> list[str]:
    """What the last build's remote said of computation `cid` (last-build.json): the Action
    digest it looked up, what came of it, and why it ran here if it did."""
    import json

    try:
        with open(os.path.join(farmer_dir, "last-build.json")) as f:
            tasks = json.load(f).get("tasks", [])
    except (OSError, ValueError):
        return ["remote: no last build (build with a remote first)"]
    task = next((t for t in tasks if t.get("id") == cid), None)
    lookup = task.get("remote_lookup") if task else None
    if not lookup:
        why = "up to date" if task and task.get("status") == "up-to-date" else "no remote lookup"
        return [f"remote: not looked up in the last build ({why})"]
    lines = [f"remote action: {lookup.get('action')}", f"remote lookup: {lookup.get('result')}"]
    if task.get("local_because"):
        lines.append(f"ran here because: {task['local_because']}")
    return lines


def clean(spec: Spec, graph: Graph, targets: list[str]) -> str:
    """Remove the declared outputs (and depfiles and logs) of the targets, all if none, and
    forget their traces so the next build runs them."""
    selected = select(graph, targets) if targets else list(graph.order)
    if targets:
        # Only the named targets' own computations, not what they need.
        wanted = set()
        for t in targets:
            name = t[1:] if t.startswith("@") else t
            wanted.update(graph.by_task.get(name) or [_one(graph, t)])
        selected = [i for i in selected if i in wanted]
    if not graph.paths_first:  # a graph from the cache: its symlinks may have changed since
        check_inside(spec.root, [graph.computations[i] for i in selected])
    farmer_dir = os.path.join(spec.root, ".farmer")
    removed = 0
    with ProjectLock(farmer_dir):
        ids = []
        for i in selected:
            comp = graph.computations[i]
            if comp.ninja is not None and comp.ninja.generator:  # as ninja's clean: keep what regenerates the build (build.ninja)
                continue
            ids.append(comp.id)
            for path in comp.outputs + ([comp.depfile] if comp.depfile else []):
                try:
                    os.unlink(path)
                    removed += 1
                except (FileNotFoundError, IsADirectoryError):
                    pass
            try:
                os.unlink(log_path(os.path.join(farmer_dir, "logs"), comp.id))
            except FileNotFoundError:
                pass
        from farmer.record.cache.leftovers import sweep  # what restores killed with SIGKILL left

        for folder in {os.path.dirname(p) for i in selected for p in graph.computations[i].outputs}:
            removed += sweep(folder)
        state = State(farmer_dir)
        try:
            state.save([], ids, [], {})
        finally:
            state.close()
    return f"farmer: removed {removed} files of {len(selected)} computations"
