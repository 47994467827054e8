"""Static traversal: a `Spec` becomes a graph of computations joined by file grains.

Every foreach instance of a task is one `Computation`. An edge runs from the computation
that declares a path as output to every computation that lists it as input. The graph is
checked here: one producer per output, outputs inside the root, every input either an
existing file or somebody's output, and no cycles.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from farmer import template
from farmer.errors import UsageError
from farmer.expander import TaskExpander, all_normal, all_plain_inputs, all_shell_safe
from farmer.farmfile import Spec, TaskSpec
from farmer.graph import Computation, Graph, topological_order
from farmer.matching import GLOB_CHARS, Files, glob_regex, pattern_regex
from farmer.uptodate import action_fingerprint

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize(path: str, task: str, what: str) -> str:
    """A project-relative path, or an error when it leaves the root."""
    if not path:
        raise UsageError(f"task {task!r}: an empty path in {what}")
    if path[0] == "/":
        raise UsageError(f"task {task!r}: {what} path {path!r} is absolute; use a path relative to the project root")
    if "//" in path or "./" in path or path[-1] in "/.":
        norm = os.path.normpath(path)
    else:
        norm = path  # already normal, the usual case: spare normpath
    if norm == ".." or norm.startswith("../"):
        raise UsageError(f"task {task!r}: {what} path {path!r} is outside the project root")
    if _CONTROL.search(norm):
        raise UsageError(f"task {task!r}: {what} path {path!r} contains a control character")
    if len(norm) > 63 and any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in norm.split("/")):
        raise UsageError(f"task {task!r}: {what} path {path!r} has a name longer than 255 bytes")
    return norm


def _chain(names: list[str]) -> str:
    """A cycle for an error line: a long one shows its ends."""
    if len(names) > 12:
        names = names[:6] + [f"... ({len(names) - 10} more) ..."] + names[-4:]
    return " -> ".join(names)


def check_inside(root: Path, comps: list[Computation]) -> None:
    """What farmer writes (outputs' folders, and their removal when a computation fails)
    stays inside the root, also through symlinks that exist when the graph is made."""
    real_root = os.path.realpath(root)
    inside: dict[str, bool] = {}  # directory -> whether it resolves inside the root
    # directory -> names of the symlinks in it (one listing instead of an lstat per output;
    # None: it could not be listed, look at each output)
    links: dict[str, set[str] | None] = {}

    def is_link(parent: str, path: str) -> bool:
        names = links.get(parent, ())
        if names == ():
            try:
                with os.scandir(os.path.join(root, parent)) as entries:
                    names = links[parent] = {e.name for e in entries if e.is_symlink()}
            except (FileNotFoundError, NotADirectoryError):
                names = links[parent] = set()  # nothing there, so no symlink either
            except OSError:
                names = links[parent] = None
        if names is None:
            return os.path.islink(os.path.join(root, path))
        return path.rpartition("/")[2] in names

    def leaves(path: str) -> bool:
        parent = path.rpartition("/")[0]  # os.path.dirname of a normalized path
        ok = inside.get(parent)
        if ok is None:
            real = os.path.realpath(os.path.join(root, parent))
            ok = inside[parent] = real == real_root or real.startswith(real_root + os.sep)
        if ok and is_link(parent, path):
            real = os.path.realpath(os.path.join(root, path))
            ok = real.startswith(real_root + os.sep)
        return not ok

    for comp in comps:
        for path in comp.outputs + ([comp.depfile] if comp.depfile else []):
            if leaves(path):
                raise UsageError(f"task {comp.task!r}: output {path!r} leads outside the project "
                                 "root through a symlink; declare a path inside the root")


def _foreach_instances(task: TaskSpec, files: Files, outputs: dict[str, str]) -> list[dict[str, str]]:
    foreach = task.foreach
    if foreach is None:
        return [{}]
    if isinstance(foreach, dict):
        keys = sorted(foreach)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(foreach[k] for k in keys))]
    regex, prefix = pattern_regex(foreach)
    listed = files.under(prefix)
    # A match starts with the pattern's fixed text, so only outputs under its directory count.
    under = prefix + "/" if prefix else ""
    name = task.name
    declared = [p for p, owner in outputs.items() if owner != name and p.startswith(under)]
    candidates = sorted(set(listed).union(declared)) if declared else listed  # listed: sorted
    # Never the task's own outputs, even left on disk by an earlier build: `src/{n}.txt`
    # making `src/{n}.2.txt` must not grow `a.2.2.txt` next time.
    match = regex.match
    found = [m for path in candidates if (m := match(path)) and not path.startswith(".farmer/")]
    if task.outputs:
        own = [pattern_regex(t) for t in task.outputs]
        # An output template's directory is a prefix of all it matches: one C-level test
        # spares the regexes for every path outside those directories.
        dirs = tuple(d + "/" if d else "" for _, d in own)
        found = [m for m in found if not (m.string.startswith(dirs)
                                          and any(r.match(m.string) for r, _ in own))]
    return [m.groupdict() for m in found]


def _may_match(task: TaskSpec, paths: list[str]) -> bool:
    """Whether one of `paths` could be matched by the foreach pattern of `task`."""
    regex, prefix = pattern_regex(task.foreach)
    under = prefix + "/" if prefix else ""
    match = regex.match
    return any(p.startswith(under) and match(p) for p in paths)


def _render(text: str, task: TaskSpec, wildcards: dict[str, str], files: dict[str, list[str]],
            variables: dict[str, str], quote: bool, what: str) -> str:
    try:
        return template.render(text, wildcards, files, variables, quote)
    except template.TemplateError as e:
        raise UsageError(f"task {task.name!r}: in {what} {text!r}: {e}") from None


def _render_list(compiled, texts: list[str], whats: list[str], task: TaskSpec,
                 wildcards: dict[str, str], spec: Spec, quote: bool, inputs: list[str],
                 outputs: list[str], depfile: list[str] | None = None) -> list[str]:
    """`texts` rendered with these files (`depfile` None: {depfile} is not known there): by
    their compiled form when there is one and it can, else one by one by template.render,
    which raises the first error in its words."""
    if compiled is not None:
        try:
            return compiled(wildcards, inputs, outputs, depfile)
        except (IndexError, KeyError):
            pass  # {inputs[N]} past the end: render words the error
    files = {"inputs": inputs, "outputs": outputs}
    if depfile is not None:
        files["depfile"] = depfile
    return [_render(t, task, wildcards, files, spec.vars, quote, what) for t, what in zip(texts, whats)]


@dataclass(slots=True)
class _Instance:
    task: TaskSpec
    wildcards: dict[str, str]
    raw_inputs: list[str]  # after substitution, before resolving @refs and globs
    outputs: list[str]
    plain: bool = False  # every raw input is a normal path: resolving changes nothing
    safe: bool = False  # plain, and no input or output path needs shell quotes


def _instances_of(task: TaskSpec, spec: Spec, matches: list[dict[str, str]],
                  expander: TaskExpander) -> list[_Instance]:
    ins, outs = expander.inputs, expander.outputs
    if ins is not None and outs is not None:
        # Compiled, rendering cannot fail: render all, then check all paths at once.
        raws = [ins(w, None, None, None) for w in matches]
        rendered = [outs(w, None, None, None) for w in matches]
        if not all_normal([p for paths in rendered for p in paths]):
            rendered = [[normalize(p, task.name, "output") for p in paths] for paths in rendered]
        flat_inputs = [p for paths in raws for p in paths]
        plain = all_plain_inputs(flat_inputs)
        safe = plain and all_shell_safe(flat_inputs) and all_shell_safe([p for o in rendered for p in o])
        return [_Instance(task, w, r, o, plain, safe) for w, r, o in zip(matches, raws, rendered)]
    result = []
    for wildcards in matches:
        raw_inputs = [_render(t, task, wildcards, {}, spec.vars, False, "inputs") for t in task.inputs]
        outs = [normalize(_render(t, task, wildcards, {}, spec.vars, False, "outputs"), task.name, "output")
                for t in task.outputs]
        result.append(_Instance(task, wildcards, raw_inputs, outs))
    return result


def _expand_tasks(spec: Spec, files: Files, expanders: dict[str, TaskExpander]) -> list[_Instance]:
    """Instances of every task. Foreach patterns may match other tasks' declared outputs,
    so pattern tasks are re-matched until no task's set of matches changes."""
    instances: dict[str, list[_Instance]] = {}
    owner: dict[str, str] = {}
    # Every output path whose owner may have changed, in order; a pattern task needs matching
    # again only if one of the paths logged since its last matching fits its pattern.
    changed_paths: list[str] = []
    checked: dict[str, int] = {}  # pattern task -> length of changed_paths at its last matching

    def record(name: str, new: list[_Instance]) -> None:
        for inst in instances.get(name, []):
            changed_paths.extend(inst.outputs)
            for out in inst.outputs:
                if owner.get(out) == name:
                    del owner[out]
        instances[name] = new
        for inst in new:
            changed_paths.extend(inst.outputs)
            for out in inst.outputs:
                owner.setdefault(out, name)

    pattern_tasks = []
    matched: dict[str, list[dict[str, str]]] = {}
    for name, task in spec.tasks.items():
        matched[name] = _foreach_instances(task, files, owner)
        checked[name] = len(changed_paths)
        record(name, _instances_of(task, spec, matched[name], expanders[name]))
        if isinstance(task.foreach, str):
            pattern_tasks.append(name)
    for _round in range(len(pattern_tasks) + 2):
        changed = False
        for name in pattern_tasks:
            if not _may_match(spec.tasks[name], changed_paths[checked[name]:]):
                checked[name] = len(changed_paths)
                continue  # what it matches is what it matched
            now = _foreach_instances(spec.tasks[name], files, owner)
            checked[name] = len(changed_paths)
            if now != matched[name]:  # expand again only what matches differently
                matched[name] = now
                record(name, _instances_of(spec.tasks[name], spec, now, expanders[name]))
                changed = True
        if not changed:
            break
    else:
        raise UsageError(
            f"foreach patterns of tasks {', '.join(repr(n) for n in pattern_tasks)} keep matching "
            "each other's outputs without end; make the patterns more specific"
        )
    return [inst for name in spec.tasks for inst in instances[name]]


def _computation_id(inst: _Instance) -> str:
    if inst.outputs:
        return inst.outputs[0]
    if inst.wildcards:
        inner = ",".join(f"{k}={inst.wildcards[k]}" for k in sorted(inst.wildcards))
        return f":{inst.task.name}[{inner}]"
    return f":{inst.task.name}"


class _Resolver:
    """Turns raw input strings into paths: `@task` references, globs, plain files."""

    def __init__(self, spec: Spec, files: Files, by_task: dict[str, list[_Instance]],
                 producer: dict[str, int]) -> None:
        self.spec = spec
        self.files = files
        self.by_task = by_task
        self.producer = producer
        self._refs: dict[str, list[str]] = {}
        self._resolving: list[str] = []

    def task_ref(self, name: str, needed_by: str) -> list[str]:
        if name not in self.spec.tasks:
            raise UsageError(f"task {needed_by!r}: input @{name} names no task; declare [task.{name}] or fix the name")
        if name in self._refs:
            return self._refs[name]
        if not self._resolving:
            self._gather_first(name, needed_by)
        if name in self._resolving:
            chain = _chain(self._resolving[self._resolving.index(name):] + [name])
            raise UsageError(f"@ references form a cycle: {chain}")
        self._resolving.append(name)
        try:
            task = self.spec.tasks[name]
            paths: set[str] = set()
            if task.cmd is None and task.python is None:
                # An alias stands for what it gathers.
                for inst in self.by_task.get(name, []):
                    for raw in inst.raw_inputs:
                        paths.update(self.resolve(raw, inst.task.name, set()))
            else:
                for inst in self.by_task.get(name, []):
                    paths.update(inst.outputs)
            result = sorted(paths)
        finally:
            self._resolving.pop()
        self._refs[name] = result
        return result

    def _alias_refs(self, name: str) -> list[str]:
        task = self.spec.tasks.get(name)
        if task is None or task.cmd is not None or task.python is not None:
            return []
        return [raw[1:] for inst in self.by_task.get(name, []) for raw in inst.raw_inputs
                if raw.startswith("@")]

    def _gather_first(self, name: str, needed_by: str) -> None:
        """Resolve the aliases that alias `name` gathers from, deepest first (an iterative
        depth-first walk), so that resolving recurses at most one alias deep however long a
        chain of `@` references is."""
        path, post, done = [name], [], set()
        stack = [iter(self._alias_refs(name))]
        while stack:
            for dep in stack[-1]:
                if dep in self._refs or dep in done:
                    continue
                if dep in path:
                    chain = _chain(path[path.index(dep):] + [dep])
                    raise UsageError(f"@ references form a cycle: {chain}")
                path.append(dep)
                stack.append(iter(self._alias_refs(dep)))
                break
            else:
                stack.pop()
                post.append(path.pop())
                done.add(post[-1])
        for dep in post[:-1]:
            self.task_ref(dep, needed_by)

    def resolve(self, raw: str, task: str, own_outputs: set[str]) -> list[str]:
        if raw.startswith("@"):
            return self.task_ref(raw[1:], task)
        if GLOB_CHARS.search(raw):
            norm = normalize(raw, task, "input")
            pattern = glob_regex(norm)
            prefix = norm[: GLOB_CHARS.search(norm).start()].rpartition("/")[0]
            matched = {p for p in self.files.under(prefix) if pattern.match(p)}
            # Declared outputs match too, so a clean build sees the same inputs as a rebuild.
            matched.update(p for p in self.producer if pattern.match(p))
            if not (norm.startswith(".") or "/." in norm):  # like the shell: no hidden files
                matched = {p for p in matched if not p.startswith(".") and "/." not in p}
            return sorted(matched - own_outputs)
        return [normalize(raw, task, "input")]


def traverse(spec: Spec) -> Graph:
    files = Files(spec.root)
    expanders = {name: TaskExpander(task, spec) for name, task in spec.tasks.items()}
    instances = _expand_tasks(spec, files, expanders)

    producer: dict[str, int] = {}
    by_task_inst: dict[str, list[_Instance]] = {}
    for index, inst in enumerate(instances):
        by_task_inst.setdefault(inst.task.name, []).append(inst)
        for out in inst.outputs:
            if out.startswith(".farmer/") or out == ".farmer":
                raise UsageError(f"task {inst.task.name!r}: output {out!r} is inside .farmer/, which farmer owns")
            other = producer.get(out)
            if other is not None and other != index:
                first = instances[other].task.name
                raise UsageError(
                    f"output {out!r} is declared by two computations (tasks {first!r} and "
                    f"{inst.task.name!r}); each output needs exactly one producer"
                )
            producer[out] = index

    resolver = _Resolver(spec, files, by_task_inst, producer)
    comps: list[Computation] = []
    by_id: dict[str, int] = {}
    by_task: dict[str, list[int]] = {}
    task = None
    for index, inst in enumerate(instances):
        if inst.task is not task:  # instances come task by task: what is the task's, once
            task = inst.task
            expander = expanders[task.name]
            kind = "cmd" if task.cmd is not None else "python" if task.python is not None else None
            text = task.cmd if task.cmd is not None else task.python
            world_env = _world_env(spec, task.world)
            world_setup = _world_setup(spec, task.world)
            env_keys = list(task.env)
            env_whats = [f"env.{k}" for k in env_keys]
            env_texts = list(task.env.values())
            task_indices = by_task.setdefault(task.name, [])
            action_quoted, action_unquoted = expander.action, expander.action_unquoted
        outputs = inst.outputs
        raw = inst.raw_inputs
        if inst.plain and not any(map(outputs.__contains__, raw)):
            inputs = list(raw) if len(raw) < 2 else list(dict.fromkeys(raw))
        else:
            inputs = _resolve_inputs(inst, resolver)
        wildcards = inst.wildcards
        depfile = depfiles = None  # without a depfile, {depfile} is an error
        if task.depfile is not None:
            rendered = _render_list(expander.depfile, [task.depfile], ["depfile"], task, wildcards,
                                    spec, False, inputs, outputs)[0]
            depfile = normalize(rendered, task.name, "depfile")
            depfiles = [depfile]
        action = None
        if text is not None:
            # A depfile's path is quoted too: only without one may quoting be skipped.
            compiled = action_unquoted if inst.safe and depfile is None else action_quoted
            action = _render_list(compiled, [text], [kind], task, wildcards, spec, True, inputs,
                                  outputs, depfiles)[0]
        if kind == "python":
            try:  # it is split into an argv, not given to a shell: it must split
                shlex.split(action)
            except ValueError as e:
                raise UsageError(f"task {task.name!r}: python line {action!r} cannot be split ({e}); "
                                 "close its quotes") from None
        env = dict(world_env)
        if env_keys:
            env.update(zip(env_keys, _render_list(expander.env, env_texts, env_whats, task,
                                                  wildcards, spec, False, inputs, outputs, depfiles)))
        cid = outputs[0] if outputs else _computation_id(inst)
        if cid in by_id:
            raise UsageError(f"task {task.name!r}: two computations share the id {cid!r}; make outputs or wildcards differ")
        by_id[cid] = index
        task_indices.append(index)
        comp = Computation(
            index, cid, task.name, inst.wildcards, inputs, outputs, depfile, kind, action, env,
            task.world, task.cost, task.cpus, task.pool, task.timeout, task.always, task.cache,
            world_setup,
        )
        comp.fingerprint = action_fingerprint(comp)
        comps.append(comp)

    check_inside(spec.root, comps)
    mark_missing(comps, producer, spec.root, files)
    world_inputs = _world_inputs(spec, files, producer)
    made_by = producer.get
    for comp in comps:
        inputs = comp.inputs
        if len(inputs) == 1 and comp.world is None:  # the usual foreach computation, quicker
            p = made_by(inputs[0])
            comp.producers = [] if p is None else [p]
            if p is not None:
                comps[p].consumers.append(comp.index)
            continue
        producers = {producer[p] for p in inputs if p in producer}  # own outputs refused above
        if comp.world is not None:
            # A world's setup reads its inputs: tasks of the world wait for their producers.
            producers.update(producer[p] for p in world_inputs[comp.world] if p in producer)
        comp.producers = sorted(producers)
        for p in comp.producers:
            comps[p].consumers.append(comp.index)
    for name in spec.tasks:
        by_task.setdefault(name, [])
    order = topological_order(comps)
    for target in spec.default or []:
        name = target[1:] if target.startswith("@") else target
        if name not in by_task and os.path.normpath(target) not in producer and target not in by_id:
            at = f"{spec.path.name}:{spec.default_line}" if spec.default_line else spec.path.name
            raise UsageError(f"{at}: default target {target!r} is not a task, a declared output "
                             "or a computation id; fix the name in [farmer] default")
    return Graph(root=spec.root, computations=comps, producer=producer, by_task=by_task,
                 order=order, by_id=by_id, listings=files.digests(), world_inputs=world_inputs)


def _resolve_inputs(inst: _Instance, resolver: _Resolver) -> list[str]:
    """The instance's inputs: references and globs resolved, paths normalized, each once."""
    task = inst.task
    own = set(inst.outputs)
    inputs: list[str] = []
    seen: set[str] = set()
    for raw in inst.raw_inputs:
        for path in resolver.resolve(raw, task.name, own):
            if path in own:
                raise UsageError(
                    f"dependency cycle: task {task.name!r} lists its own output {path!r} as an "
                    f"input (through {raw!r}); a computation cannot read what it makes")
            if path not in seen:
                seen.add(path)
                inputs.append(path)
    return inputs


def mark_missing(comps: list[Computation], producer: dict[str, int], root: Path,
                 files: Files | None = None) -> None:
    """Note inputs that neither exist nor are made: an error only for a build that needs
    them, as in make. `files` knows many files to exist from its listings."""
    exists: dict[str, bool] = dict.fromkeys(files.plain_files(), True) if files is not None else {}
    for comp in comps:
        missing = comp.missing = []
        for p in comp.inputs:
            if p not in producer:
                there = exists.get(p)
                if there is None:
                    there = exists[p] = os.path.exists(os.path.join(root, p))
                if not there:
                    missing.append(p)


def _world_chain(spec: Spec, name: str) -> list:
    out = []
    world: str | None = name
    while world is not None:
        out.append(spec.worlds[world])
        world = spec.worlds[world].parent
    out.reverse()
    return out


def _world_env(spec: Spec, name: str | None) -> dict[str, str]:
    env: dict[str, str] = {}
    if name is not None:
        for w in _world_chain(spec, name):
            env.update(w.env)
    return env


def _world_inputs(spec: Spec, files: Files, producer: dict[str, int]) -> dict[str, list[str]]:
    """Each world's input paths, its ancestors' included."""
    own = {}
    for name, w in spec.worlds.items():
        paths = []
        for text in w.inputs:
            try:
                raw = template.render(text, {}, {}, spec.vars, False)
            except template.TemplateError as e:
                raise UsageError(f"world {name!r}: in inputs {text!r}: {e}") from None
            path = normalize(raw, f"world {name}", "input")
            if path not in producer and not os.path.exists(os.path.join(files.root, path)):
                raise UsageError(f"missing input {path!r} needed by world {name!r}: no such file and no task declares it as output")
            paths.append(path)
        own[name] = paths
    return {name: [p for w in _world_chain(spec, name) for p in own[w.name]] for name in spec.worlds}


def _world_setup(spec: Spec, name: str | None) -> str | None:
    if name is None:
        return None
    return json.dumps([(w.name, w.setup) for w in _world_chain(spec, name)])


