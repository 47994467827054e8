"""Static traversal: a `Spec` becomes a graph of computations joined by file grains.

Every foreach instance of a task (farmer/graph/expander.py makes them) is one `Computation`, with
its inputs resolved (`@task` references, globs) and its command line rendered. An edge runs
from the computation that declares a path as output to every computation that lists it as
input. The graph is checked here: one producer per output, outputs inside the root, every
input either an existing file or somebody's output, and no cycles.
"""

from __future__ import annotations

import os
import sys

from farmer.errors import TaskError, UsageError
from farmer.files.confine import check_inside
from farmer.graph.expander import Expanders, Instance, TaskExpander, expand_tasks, normalize, render_list
from farmer.graph.graph import NO_NAMES, Computation, Graph, action_fingerprint, topological_order
from farmer.graph.matching import Files, glob_regex
from farmer.manifest import template
from farmer.manifest.farmfile import Spec


def glob_start(path: str) -> int:
    """Where the first glob character (`*`, `?`, `[`) of an input path is; -1: it is no glob."""
    found = [at for at in (path.find("*"), path.find("?"), path.find("[")) if at >= 0]
    return min(found) if found else -1


def _chain(names: list[str]) -> str:
    """A cycle for an error line: a long one shows its ends."""
    if len(names) > 12:
        names = names[:6] + [f"... ({len(names) - 10} more) ..."] + names[-4:]
    return " -> ".join(names)


def _computation_id(inst: Instance) -> str:
    if inst.outputs:
        return inst.outputs[0]
    if inst.wildcards:
        inner = ",".join(f"{k}={inst.wildcards[k]}" for k in sorted(inst.wildcards))
        return f":{inst.task.name}[{inner}]"
    return f":{inst.task.name}"


class _Resolver:
    """Turns raw input strings into paths: `@task` references, globs, plain files."""

    def __init__(self, spec: Spec, files: Files, by_task: dict[str, list[Instance]],
                 producer: dict[str, int]) -> None:
        self.spec = spec
        self.files = files
        self.by_task = by_task
        self.producer = producer
        self._refs: dict[str, list[str]] = {}
        self._resolving: list[str] = []
        self.empty_globs: dict[tuple[str, str], None] = {}  # (task, glob) that matched nothing

    def task_ref(self, name: str, needed_by: str) -> list[str]:
        if name not in self.spec.tasks:
            raise TaskError(f"task {needed_by!r}: input @{name} names no task; declare [task.{name}] "
                            "or fix the name", needed_by)
        if name in self._refs:
            return self._refs[name]
        if not self._resolving:
            self._gather_first(name, needed_by)
        if name in self._resolving:
            chain = _chain(self._resolving[self._resolving.index(name):] + [name])
            raise TaskError(f"@ references form a cycle: {chain}; remove one of these references", needed_by)
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
                    raise TaskError(f"@ references form a cycle: {chain}; remove one of these "
                                    "references", needed_by)
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
        if glob_start(raw) >= 0:
            norm = normalize(raw, task, "input")
            pattern = glob_regex(norm)
            prefix = norm[: glob_start(norm)].rpartition("/")[0]
            self.files.refuse_control(prefix, pattern, f"task {task!r}: input {raw!r}")
            matched = {p for p in self.files.under(prefix) if pattern.match(p)}
            # Declared outputs match too, so a clean build sees the same inputs as a rebuild.
            matched.update(p for p in self.producer if pattern.match(p))
            if not (norm.startswith(".") or "/." in norm):  # like the shell: no hidden files
                matched = {p for p in matched if not p.startswith(".") and "/." not in p}
            if not matched - own_outputs:
                self.empty_globs[task, raw] = None
            return sorted(matched - own_outputs)
        return [normalize(raw, task, "input")]


_MISSING_FIX = "create it, fix the path, or declare it as an output of a task"


def traverse(spec: Spec) -> Graph:
    """The graph of `spec`; a task's error names its table's line in the Farmfile."""
    try:
        return _traverse(spec)
    except TaskError as e:
        from farmer.manifest.farmfile import locate

        raise locate(e, spec.path) from None


def _traverse(spec: Spec) -> Graph:
    files = Files(spec.root)
    expanders = Expanders(spec)
    by_task_inst = expand_tasks(spec, files, expanders)
    instances = [inst for insts in by_task_inst.values() for inst in insts]

    producer: dict[str, int] = {}
    for index, inst in enumerate(instances):
        for out in inst.outputs:
            if out in producer or out.startswith(".farmer"):  # the rare case: look closer
                _check_output(out, index, instances, producer)
            producer[out] = index

    resolver = _Resolver(spec, files, by_task_inst, producer)
    comps: list[Computation] = []
    by_id: dict[str, int] = {}
    by_task: dict[str, list[int]] = {}
    for name, insts in by_task_inst.items():  # in the order of `instances`
        if not insts:
            continue
        if insts[0].literal:
            comp = _literal_computation(spec, insts[0], len(comps), by_id)
            if comp is not None:
                by_id[comp.id] = comp.index
                by_task[name] = [comp.index]
                comps.append(comp)
                continue
        made = _plain_computations(spec, insts, len(comps), expanders[name], by_id)
        if made is None:
            made = _computations(spec, insts, len(comps), expanders[name], resolver, by_id)
        for comp in made:
            by_id[comp.id] = comp.index
        by_task[name] = [comp.index for comp in made]
        comps.extend(made)

    _add_scripts(comps, producer, spec.root)
    check_inside(spec.root, comps)
    mark_missing(comps, producer, spec.root, files)
    world_inputs = _world_inputs(spec, files, producer)
    made_by = producer.get
    for comp in comps:
        inputs = comp.inputs
        world = comp.world
        if len(inputs) == 1 and world is None:  # the usual foreach computation, quicker
            p = made_by(inputs[0])
            comp.producers = [] if p is None else [p]
            if p is not None:
                comps[p].consumers.append(comp.index)
            continue
        producers = set(map(made_by, inputs))  # own outputs refused above
        if world is not None:
            # A world's setup reads its inputs: tasks of the world wait for their producers.
            producers.update(map(made_by, world_inputs[world]))
        producers.discard(None)
        comp.producers = sorted(producers)
        for p in comp.producers:
            comps[p].consumers.append(comp.index)
    for name in spec.tasks:
        by_task.setdefault(name, [])
    order = topological_order(comps)
    for target in spec.default or []:
        name = target[1:] if target.startswith("@") else target
        if name not in by_task and os.path.normpath(target) not in producer and target not in by_id:
            file = os.path.basename(spec.path)
            at = f"{file}:{spec.default_line}" if spec.default_line else file
            raise UsageError(f"{at}: default target {target!r} is not a task, a declared output "
                             "or a computation id; fix the name in [farmer] default")
    _warn_empty(spec, by_task_inst, resolver)  # after the errors: a bad Farmfile gets one line
    return Graph(root=spec.root, computations=comps, producer=producer, by_task=by_task,
                 order=order, by_id=by_id, listings=files.digests(), world_inputs=world_inputs,
                 inside_checked=True)


def _warn_empty(spec: Spec, by_task: dict[str, list[Instance]], resolver: _Resolver) -> None:
    """Say so when a foreach or a glob matches nothing, or nothing is declared at all: what
    would follow (an empty archive, a link that fails later) hides the cause."""
    file = os.path.basename(spec.path)
    if not spec.tasks:
        print(f"farmer: warning: {file} declares no tasks, so there is nothing to build; add a "
              "[task.NAME] table", file=sys.stderr)
    for name, task in spec.tasks.items():
        if task.foreach is not None and not by_task[name]:
            at = f"{file}:{task.line}: " if task.line else ""
            what = (f"foreach pattern {task.foreach!r} matches no file" if isinstance(task.foreach, str)
                    else "foreach table has an empty list, so no combination")
            print(f"farmer: warning: {at}task {name!r}: {what}; the task has no computations",
                  file=sys.stderr)
    for task, glob in resolver.empty_globs:
        line = spec.tasks[task].line if task in spec.tasks else None
        at = f"{file}:{line}: " if line else ""
        print(f"farmer: warning: {at}task {task!r}: input glob {glob!r} matches no file",
              file=sys.stderr)


def python_script(argv: list[str]) -> tuple[str, str] | None:
    """What a python line runs from a file: ("script", path) or ("module", name), or None
    (`-c`, or only options). Python's options come before it, as on its command line."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-c" or arg.startswith("-c"):
            return None
        if arg == "-m":
            return ("module", argv[i + 1]) if i + 1 < len(argv) else None
        if arg.startswith("-m"):
            return "module", arg[2:]
        if arg in ("-W", "-X", "--check-hash-based-pycs"):  # options that take a value apart
            i += 2
            continue
        if arg == "-" or not arg.startswith("-"):
            return None if arg == "-" else ("script", arg)
        i += 1
    return None


def _script_input(kind_and_name: tuple[str, str], root: str, producer: dict[str, int]) -> str | None:
    """The file under the root that a python line runs (SPEC §1: it is an input), if any."""
    kind, name = kind_and_name
    if kind == "script":
        candidates = [name]
    else:  # a module: its file, when it is the project's (not the standard library's)
        base = name.replace(".", "/")
        candidates = [base + ".py", base + "/__main__.py", base + "/__init__.py"]
    for path in candidates:
        if path.startswith("/") or not path:
            return None  # outside the project: not its to track
        norm = os.path.normpath(path)
        if norm == ".." or norm.startswith("../"):
            return None
        if kind == "script" or norm in producer or os.path.isfile(os.path.join(root, norm)):
            return norm  # a script that is missing is a missing input, named as such
    return None


def _add_scripts(comps: list[Computation], producer: dict[str, int], root: str) -> None:
    """A python computation's script (or module file under the root) is one of its inputs,
    whether or not `inputs` lists it: editing it must rerun the computation."""
    found: dict[tuple[str, str], str | None] = {}
    for comp in comps:
        if comp.kind != "python":
            continue
        import shlex  # start-up rule (docs/performance.md): only for a python line

        runs = python_script(shlex.split(comp.action))
        if runs is None:
            continue
        if runs not in found:
            found[runs] = _script_input(runs, root, producer)
        script = found[runs]
        if script is not None and script not in comp.inputs and script not in comp.outputs:
            comp.inputs.append(script)


def _check_output(out: str, index: int, instances: list[Instance], producer: dict[str, int]) -> None:
    """Refuse an output inside .farmer/ or declared by an earlier computation."""
    inst = instances[index]
    if out.startswith(".farmer/") or out == ".farmer":
        raise TaskError(f"task {inst.task.name!r}: output {out!r} is inside .farmer/, which farmer "
                        "owns; declare it elsewhere", inst.task.name)
    other = producer.get(out)
    if other is not None and other != index:
        first = instances[other].task.name
        raise TaskError(
            f"output {out!r} is declared by two computations (tasks {first!r} and "
            f"{inst.task.name!r}); each output needs exactly one producer: rename one of them",
            inst.task.name)


def _literal_computation(spec: Spec, inst: Instance, index: int, by_id: dict[str, int]) -> Computation | None:
    """The one computation of a literal task (expander.is_literal), its texts as written:
    what `_computations` makes of it, with nothing to render or resolve. None when it needs
    a closer look (and maybe has an error to report): then `_computations` makes it."""
    task = inst.task
    raw, outputs = inst.raw_inputs, inst.outputs
    cid = outputs[0] if outputs else _computation_id(inst)
    if task.depfile is not None or cid in by_id or (
            outputs[0] in raw if len(outputs) == 1 else any(map(outputs.__contains__, raw))):
        return None  # a depfile to normalize, an id taken, or a cycle: worded there
    if task.plain:  # a cmd (or an alias) with every other field at its default
        inputs = list(raw) if len(raw) < 2 else list(dict.fromkeys(raw))
        return Computation.literal(index, cid, task.name, inputs, outputs,
                                   None if task.cmd is None else "cmd", task.cmd)
    kind = "cmd" if task.cmd is not None else "python" if task.python is not None else None
    action = task.cmd if task.cmd is not None else task.python
    if kind == "python":
        import shlex

        try:
            shlex.split(action)
        except ValueError:
            return None
    if task.world is None:
        env = dict(task.env) if task.env else NO_NAMES
        world_setup = None
    else:
        env = {**_world_env(spec, task.world), **task.env} or NO_NAMES
        world_setup = _world_setup(spec, task.world)
    inputs = list(raw) if len(raw) < 2 else list(dict.fromkeys(raw))
    comp = Computation(index, cid, task.name, NO_NAMES, inputs, outputs, None, kind, action, env,
                       task.world, task.cost, task.cpus, task.pool, task.timeout, task.always,
                       task.cache, world_setup)
    comp.remote = task.remote
    comp.fingerprint = action_fingerprint(comp)
    return comp


def _plain_computations(spec: Spec, insts: list[Instance], start: int, expander: TaskExpander,
                        by_id: dict[str, int]) -> list[Computation] | None:
    """The computations of a task whose inputs are plain paths, whose command line is
    compiled and which has no depfile and no env: what `_computations` makes, in a tighter
    loop. None when one of them needs more (and maybe has an error to report): then
    `_computations` makes them all."""
    task = insts[0].task
    if task.depfile is not None or task.env or not insts[0].plain:  # plain: all or none
        return None
    kind = "cmd" if task.cmd is not None else "python" if task.python is not None else None
    compiled = expander.action_unquoted if insts[0].safe else expander.action
    if kind is not None and compiled is None:
        return None
    world_env = _world_env(spec, task.world)
    # Outputs of a task are distinct (the producer map says so): when no input of the task is
    # an output of it, no computation reads its own output.
    if not {o for inst in insts for o in inst.outputs}.isdisjoint(
            [p for inst in insts for p in inst.raw_inputs]):
        return None  # maybe a cycle, worded by _computations
    settings = (task.world, task.cost, task.cpus, task.pool, task.timeout, task.always, task.cache,
                _world_setup(spec, task.world))
    name = task.name
    made = []
    try:
        for index, inst in enumerate(insts, start):
            outputs = inst.outputs
            raw = inst.raw_inputs
            inputs = list(raw) if len(raw) < 2 else list(dict.fromkeys(raw))
            action = compiled(inst.wildcards, inputs, outputs, None)[0] if kind else None
            cid = outputs[0] if outputs else _computation_id(inst)
            comp = Computation(index, cid, name, inst.wildcards, inputs, outputs, None, kind, action,
                               dict(world_env) if world_env else NO_NAMES, *settings)
            comp.remote = task.remote
            comp.fingerprint = action_fingerprint(comp)
            made.append(comp)
    except (IndexError, KeyError):
        return None  # {inputs[N]} past the end
    if kind == "python":
        import shlex

        try:
            for comp in made:
                shlex.split(comp.action)
        except ValueError:
            return None
    ids = {comp.id for comp in made}
    if len(ids) != len(made) or not by_id.keys().isdisjoint(ids):  # iterates ids, not by_id
        return None
    return made


def _computations(spec: Spec, insts: list[Instance], start: int, expander: TaskExpander,
                  resolver: _Resolver, by_id: dict[str, int]) -> list[Computation]:
    """The computations of one task's instances, numbered from `start`, any path taken;
    the first error in the order of the instances is the one reported."""
    task = insts[0].task
    kind = "cmd" if task.cmd is not None else "python" if task.python is not None else None
    text = task.cmd if task.cmd is not None else task.python
    world_env = _world_env(spec, task.world)
    world_setup = _world_setup(spec, task.world)
    env_keys = list(task.env)
    env_whats = [f"env.{k}" for k in env_keys]
    env_texts = list(task.env.values())
    ids: set[str] = set()
    made = []
    for index, inst in enumerate(insts, start):
        outputs = inst.outputs
        raw = inst.raw_inputs
        if inst.plain and not any(map(outputs.__contains__, raw)):
            inputs = list(raw) if len(raw) < 2 else list(dict.fromkeys(raw))
        else:
            inputs = _resolve_inputs(inst, resolver)
        wildcards = inst.wildcards
        depfile = depfiles = None  # without a depfile, {depfile} is an error
        if task.depfile is not None:
            rendered = render_list(expander.depfile, [task.depfile], ["depfile"], task, wildcards,
                                    spec, False, inputs, outputs)[0]
            depfile = normalize(rendered, task.name, "depfile")
            depfiles = [depfile]
        action = None
        if text is not None:
            # A depfile's path is quoted too: only without one may quoting be skipped.
            compiled = expander.action_unquoted if inst.safe and depfile is None else expander.action
            action = render_list(compiled, [text], [kind], task, wildcards, spec, True, inputs,
                                  outputs, depfiles)[0]
        if kind == "python":
            import shlex

            try:  # it is split into an argv, not given to a shell: it must split
                shlex.split(action)
            except ValueError as e:
                raise TaskError(f"task {task.name!r}: python line {action!r} cannot be split ({e}); "
                                "close its quotes", task.name) from None
        env = dict(world_env) if world_env or env_keys else NO_NAMES
        if env_keys:
            env.update(zip(env_keys, render_list(expander.env, env_texts, env_whats, task,
                                                  wildcards, spec, False, inputs, outputs, depfiles)))
        cid = outputs[0] if outputs else _computation_id(inst)
        if cid in by_id or cid in ids:
            raise TaskError(f"task {task.name!r}: two computations share the id {cid!r}; make outputs "
                            "or wildcards differ", task.name)
        ids.add(cid)
        comp = Computation(
            index, cid, task.name, wildcards, inputs, outputs, depfile, kind, action, env,
            task.world, task.cost, task.cpus, task.pool, task.timeout, task.always, task.cache,
            world_setup,
        )
        comp.remote = task.remote
        comp.fingerprint = action_fingerprint(comp)
        made.append(comp)
    return made


def _resolve_inputs(inst: Instance, resolver: _Resolver) -> list[str]:
    """The instance's inputs: references and globs resolved, paths normalized, each once."""
    task = inst.task
    own = set(inst.outputs)
    inputs: list[str] = []
    seen: set[str] = set()
    for raw in inst.raw_inputs:
        for path in resolver.resolve(raw, task.name, own):
            if path in own:
                raise TaskError(
                    f"dependency cycle: task {task.name!r} lists its own output {path!r} as an "
                    f"input (through {raw!r}); a computation cannot read what it makes", task.name)
            if path not in seen:
                seen.add(path)
                inputs.append(path)
    return inputs


def mark_missing(comps: list[Computation], producer: dict[str, int], root: str | os.PathLike,
                 files: Files | None = None) -> None:
    """Note inputs that neither exist nor are made: an error only for a build that needs
    them, as in make. `files` knows many files to exist from its listings."""
    # The paths to look at, in set operations; usually none is missing.
    unsure = {p for comp in comps for p in comp.inputs}.difference(producer)
    if files is not None:
        unsure.difference_update(files.plain_files())
    gone = _missing(root, unsure)
    if not gone:  # as a computation is made (`Computation.missing`): nothing to set
        return
    for comp in comps:
        comp.missing = [p for p in comp.inputs if p in gone]


_LISTING_PAYS = 16  # paths of one folder from which listing it costs less than a stat each


def _missing(root: str | os.PathLike, paths: set[str]) -> set[str]:
    """The normalized `paths` that `os.path.exists(root/path)` says do not exist; the many
    paths of one folder (a generator's sources) found in one listing of it instead."""
    by_folder: dict[str, list[str]] = {}  # folder -> the names in it
    for path in paths:
        folder, _, name = path.rpartition("/")
        by_folder.setdefault(folder, []).append(name)
    gone = set()
    for folder, names in by_folder.items():
        listed: set[str] = set()  # what is no symlink there: it exists
        if len(names) >= _LISTING_PAYS:
            try:
                with os.scandir(os.path.join(root, folder)) as entries:
                    listed = {e.name for e in entries if not e.is_symlink()}
            except OSError:
                pass  # each looked at below
        unlisted = [f"{folder}/{name}" if folder else name for name in names if name not in listed]
        gone.update(p for p in unlisted if not os.path.exists(os.path.join(root, p)))
    return gone


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
                path = normalize(raw, f"world {name}", "input")
            except (template.TemplateError, TaskError) as e:
                raise TaskError(f"world {name!r}: in inputs {text!r}: {e}", name, "world") from None
            if path not in producer and not os.path.exists(os.path.join(files.root, path)):
                raise TaskError(f"missing input {path!r} needed by world {name!r}: no such file and "
                                f"no task declares it as output; {_MISSING_FIX}", name, "world")
            paths.append(path)
        own[name] = paths
    return {name: [p for w in _world_chain(spec, name) for p in own[w.name]] for name in spec.worlds}


def _world_setup(spec: Spec, name: str | None) -> str | None:
    if name is None:
        return None
    import json  # worlds only

    return json.dumps([(w.name, w.setup) for w in _world_chain(spec, name)])


