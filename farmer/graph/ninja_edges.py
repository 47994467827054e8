"""A parsed ninja manifest becomes farmer's graph of computations.

One build edge is one `Computation`: its id is its first explicit output (its first output
when it has only implicit ones), its task the rule name. Explicit and implicit inputs are
hashed inputs; order-only inputs only order (`order_only`); `|@` validations are built
alongside (`validates`). A `phony` edge is an alias (kind None, no outputs of its own
that farmer checks or deletes): whoever names its output as an input depends on the
phony's own inputs instead, transitively, and waits for their producers. A phony without
inputs stands for its own path: a file that exists is hashed like any input, a missing one
makes its consumers always run, like ninja's `build FORCE: phony`.
"""

from __future__ import annotations

import os

from farmer.errors import UsageError
from farmer.graph.graph import Computation, Graph, NinjaEdge, action_fingerprint, topological_order
from farmer.manifest.ninja_lexer import evaluate
from farmer.manifest.ninja_parser import Edge, Manifest, canonical, shell_escape
from farmer.manifest.spec import Spec

CONSOLE = "console"
MSVC_PREFIX = "Note: including file: "  # cl.exe's /showIncludes lines in English: ninja's default


class _EdgeEnv:
    """Variable lookup for one edge, in ninja's order: `$in`/`$out`, the edge's bindings,
    the rule's (evaluated here, late), then the file scopes outwards."""

    __slots__ = ("edge", "escape", "stack", "made")

    def __init__(self, edge: Edge, escape: bool) -> None:
        self.edge = edge
        self.escape = escape
        self.stack: list[str] = []
        self.made: dict[str, str] = {}  # $in, $out, $in_newline, made once

    def lookup(self, var: str) -> str:
        edge = self.edge
        if var == "in" or var == "in_newline" or var == "out":
            text = self.made.get(var)
            if text is None:
                if var == "out":
                    paths = edge.outs[:edge.explicit_outs]
                else:
                    paths = edge.ins[:edge.explicit_ins]
                if self.escape:
                    paths = [shell_escape(p) for p in paths]
                text = self.made[var] = ("\n" if var == "in_newline" else " ").join(paths)
            return text
        scope = edge.scope
        value = scope.vars.get(var)
        if value is not None:
            return value
        binding = edge.rule.bindings.get(var)
        if binding is not None:
            if var in self.stack:
                chain = " -> ".join(self.stack[self.stack.index(var):] + [var])
                raise UsageError(f"{edge.where}: cycle in rule variables: {chain}")
            self.stack.append(var)
            try:
                return evaluate(binding, self.lookup)
            finally:
                self.stack.pop()
        return scope.parent.lookup(var) if scope.parent is not None else ""


def _flatten(manifest: Manifest) -> tuple[list[list[str] | None], list[set[int] | None]]:
    """For each phony edge with inputs: the inputs it stands for (its explicit and implicit
    inputs, through other phonies) and the edges they wait for (through order-only inputs
    too). Phony chains are walked once each."""
    edges = manifest.edges
    producer = manifest.producer
    inputs: list[list[str] | None] = [None] * len(edges)
    waits: list[set[int] | None] = [None] * len(edges)
    busy: set[int] = set()

    def walk(i: int) -> None:
        if inputs[i] is not None or i in busy:
            return  # done, or a cycle of phonies: the topological sort reports it
        busy.add(i)
        edge = edges[i]
        flat: list[str] = []
        seen: set[str] = set()
        deps: set[int] = set()
        hashed = edge.explicit_ins + edge.implicit_ins
        for k, path in enumerate(edge.ins):
            p = producer.get(path)
            expand = p is not None and edges[p].is_phony and edges[p].ins
            if p is not None:
                deps.add(p)
                if edges[p].is_phony:
                    walk(p)
                    deps.update(waits[p] or ())
            if k >= hashed:
                continue
            for q in (inputs[p] or () if expand else (path,)):
                if q not in seen:
                    seen.add(q)
                    flat.append(q)
        inputs[i], waits[i] = flat, deps
        busy.discard(i)

    for i, edge in enumerate(edges):
        if edge.is_phony:
            walk(i)
    return inputs, waits


def _pool(manifest: Manifest, edge: Edge, env: _EdgeEnv) -> str | None:
    name = env.lookup("pool")
    if not name:
        return None
    if name != CONSOLE and name not in manifest.pools:
        raise UsageError(f"{edge.where}: unknown pool name '{name}'")
    if manifest.pools.get(name) == 0:
        return None  # depth 0: no limit
    return name


class FileChecks:
    """What of a graph depends on which files exist now, not on the manifest: kept apart so
    that a cached graph can be brought up to date without reading the manifest again."""

    __slots__ = ("needed", "force", "defaults")

    def __init__(self, needed: list[list[str]], force: list[list[str]],
                 defaults: list[str] | None) -> None:
        self.needed = needed  # per computation: paths nobody makes, which must exist
        self.force = force  # per computation: inputs made by a phony without inputs
        self.defaults = defaults  # the `default` targets as written


def build_graph(manifest: Manifest) -> tuple[Spec, Graph, FileChecks]:
    edges = manifest.edges
    producer = manifest.producer
    root = manifest.root
    flat_inputs, flat_waits = _flatten(manifest)
    comps: list[Computation] = []
    by_task: dict[str, list[int]] = {}
    by_id: dict[str, int] = {}
    checks = FileChecks([], [], list(manifest.defaults) if manifest.has_default else None)

    for index, edge in enumerate(edges):
        hashed = edge.explicit_ins + edge.implicit_ins
        inputs: list[str] = []
        seen: set[str] = set()
        producers: set[int] = set()
        needed: list[str] = []
        force: list[str] = []
        for k, path in enumerate(edge.ins):
            p = producer.get(path)
            phony_with_inputs = False
            if p is not None:
                producers.add(p)
                if edges[p].is_phony:
                    producers.update(flat_waits[p] or ())
                    phony_with_inputs = bool(edges[p].ins)
            else:
                needed.append(path)
            if k >= hashed:
                continue
            for q in (flat_inputs[p] or () if phony_with_inputs else (path,)):
                if q not in seen:
                    seen.add(q)
                    inputs.append(q)
                    f = producer.get(q)
                    if f is not None and edges[f].is_phony and not edges[f].ins:
                        force.append(q)
        validates = []
        for path in edge.validations:
            p = producer.get(path)
            if p is not None:
                validates.append(p)
            else:
                needed.append(path)
        cid = edge.outs[0]
        task = edge.rule.name
        if edge.is_phony:
            comp = Computation(
                index=index, id=cid, task=task, wildcards={}, inputs=inputs, outputs=[],
                depfile=None, kind=None, action=None, env={}, world=None, cost=None, cpus=1,
                pool=None, timeout=None, always=False, cache=False, validates=validates,
                ninja=NinjaEdge(order_only=edge.order_only))
        else:
            comp = _command(manifest, edge, index, cid, inputs, validates)
        comp.fingerprint = action_fingerprint(comp)
        comp.producers = sorted(producers)
        comps.append(comp)
        checks.needed.append(needed)
        checks.force.append(force)
        by_id[cid] = index
        by_task.setdefault(task, []).append(index)
    for comp in comps:
        for p in comp.producers:
            comps[p].consumers.append(comp.index)
    order = topological_order(comps)
    pools = {name: depth for name, depth in manifest.pools.items() if depth > 0}
    pools[CONSOLE] = 1
    # The digest covers every file the manifest was read from (a no-op proof rests on it).
    spec = Spec(path=manifest.path, root=root, default=None, vars={}, pools=pools,
                worlds={}, tasks={}, digest="ninja:" + manifest.digest)
    graph = Graph(root=root, computations=comps, producer=dict(producer), by_task=by_task,
                  order=order, by_id=by_id, paths_first=True)
    apply_file_checks(spec, graph, checks)
    return spec, graph, checks


def apply_file_checks(spec: Spec, graph: Graph, checks: FileChecks) -> None:
    """Set what depends on the files that exist now: missing inputs (an error only for a
    build that needs them), the computations a missing `build FORCE: phony` makes always run,
    and the default targets (one that names a source file asks for nothing to be built)."""
    root = spec.root
    exists: dict[str, bool] = {}

    def missing(path: str) -> bool:
        there = exists.get(path)
        if there is None:
            there = exists[path] = os.path.exists(os.path.join(root, path))
        return not there

    for comp, needed, force in zip(graph.computations, checks.needed, checks.force):
        comp.missing = [p for p in needed if missing(p)]
        comp.always = comp.kind is not None and any(missing(p) for p in force)
    if checks.defaults is not None:
        spec.default = [d for d in checks.defaults if d in graph.producer or missing(d)]


def _command(manifest: Manifest, edge: Edge, index: int, cid: str, inputs: list[str],
             validates: list[int]) -> Computation:
    shell = _EdgeEnv(edge, escape=True)
    plain = _EdgeEnv(edge, escape=False)
    names = manifest.names

    def get(env: _EdgeEnv, var: str) -> str:  # a name bound nowhere needs no lookup
        return env.lookup(var) if var in names else ""

    command = shell.lookup("command")
    dyndep = get(plain, "dyndep")
    if dyndep:
        dyndep = canonical(dyndep)
        if dyndep not in edge.ins:
            raise UsageError(f"{edge.where}: dyndep file '{dyndep}' is not an input of this build statement")
    depfile = get(plain, "depfile") or None
    deps = get(plain, "deps")
    if deps not in ("", "gcc", "msvc"):
        raise UsageError(f"{edge.where}: unknown deps type '{deps}'")
    msvc_prefix = None
    if deps == "msvc":  # the headers are in the command's output (cl /showIncludes), not a depfile
        msvc_prefix = get(plain, "msvc_deps_prefix") or MSVC_PREFIX
        depfile = None
    if deps == "gcc" and not depfile:
        raise UsageError(f"{edge.where}: deps = gcc needs a depfile")
    rspfile = get(plain, "rspfile") or None
    description = get(shell, "description") or None
    generator = bool(get(plain, "generator"))
    restat = bool(get(plain, "restat"))
    pool = _pool(manifest, edge, plain) if "pool" in names else None
    return Computation(
        index=index, id=cid, task=edge.rule.name, wildcards={}, inputs=inputs,
        outputs=list(edge.outs), depfile=os.path.normpath(depfile) if depfile else None,
        kind="cmd", action=command, env={}, world=None, cost=None, cpus=1,
        pool=pool, timeout=None, always=False, cache=not generator,
        validates=validates, ninja=NinjaEdge(
            order_only=edge.order_only, description=description, generator=generator,
            # A generator's depfile is kept: the no-op check reads what it lists (ninja keeps
            # that in its deps log).
            remove_depfile=deps == "gcc" and not generator, rspfile=rspfile,
            rspfile_content=shell.lookup("rspfile_content") if rspfile else None,
            optional_outputs=True, console=pool == CONSOLE, restat=restat, dyndep=dyndep or None,
            msvc_prefix=msvc_prefix))
