"""Tasks expanded into instances: foreach patterns matched, the templates of inputs and
outputs rendered, output paths normalized (traversal.py then makes the computations).

A foreach task renders the same few templates for each of its computations (100k of them in
a big project). `TaskExpander` holds them compiled (template.compile_list), and whole batches
of rendered paths are checked at once (`all_normal` and its kin). Wherever a compiled form is
missing or a check fails, the general way is taken, template.render and `normalize` path by
path, so errors keep their words and their order.
"""

from __future__ import annotations

import itertools
import os

from farmer.errors import TaskError, UsageError
from farmer.graph.graph import NO_NAMES
from farmer.graph.matching import Files, has_control, pattern_regex
from farmer.manifest import template
from farmer.manifest.farmfile import Spec, TaskSpec

_new = object.__new__

# Anything that makes traversal.normalize do more than return its argument, in paths joined
# and framed by "\n": `//`, `./` (so `../` too), a trailing `/` or `.`, an empty or absolute
# path. Substring tests run at C speed, where a regex alternation would not.
_NOT_NORMAL = ("//", "./", "/\n", ".\n", "\n\n", "\n/")
# Inputs also: an `@` reference or a glob character (also one that came from a wildcard).
_NOT_PLAIN = _NOT_NORMAL + ("\n@", "*", "?", "[")


def _clean(paths: list[str], substrings: tuple[str, ...]) -> bool:
    if not paths:
        return True
    joined = "\n" + "\n".join(paths) + "\n"
    # Not ASCII: a name's length in bytes is not its length in characters, so go the slow
    # way. In ASCII, what is not printable is a control character (a "\n" in a path too).
    return (joined.isascii() and "".join(paths).isprintable()
            and not any(s in joined for s in substrings)
            and max(map(len, paths)) < 256)  # no name of 256 bytes or more


def all_normal(paths: list[str]) -> bool:
    """True when traversal.normalize(p, ...) would return every p unchanged, without error.
    False when some p needs a look (which may still find it fine)."""
    return _clean(paths, _NOT_NORMAL)


def all_plain_inputs(paths: list[str]) -> bool:
    """True when every raw input is a plain path that is already normal: resolving it is
    the path itself (no `@` reference, no glob, nothing to normalize or refuse)."""
    return _clean(paths, _NOT_PLAIN)


def all_shell_safe(paths: list[str]) -> bool:
    """True when shlex.quote(p) is p for every p: a command line can take them as they are."""
    return "" not in paths and template.shell_safe("/".join(paths))


def wildcard_names(task: TaskSpec) -> frozenset[str]:
    """The wildcards every computation of `task` has."""
    foreach = task.foreach
    if foreach is None:
        return frozenset()
    if isinstance(foreach, dict):
        return frozenset(foreach)
    return frozenset(template.names(foreach))


# Compiling a template costs as much as rendering it several times (see
# bench/results/performance-notes.md#figures-from-code-comments): a task with fewer
# computations than this (a task written out by hand, one of 100k generated ones) is rendered
# by template.render. Tests set it to 1 to compare both ways on small graphs.
COMPILE_FROM = 8


class TaskExpander:
    """The templates of one task, each list compiled into one function
    `(wildcards, inputs, outputs, depfile) -> [text, ...]`, or None where template.render
    must be used (it then raises the error): all None until `prepare` compiles them for a
    task with enough computations."""

    __slots__ = ("task", "variables", "compiled", "inputs", "outputs", "depfile", "action",
                 "action_unquoted", "env")

    def __init__(self, task: TaskSpec, spec: Spec) -> None:
        self.task, self.variables, self.compiled = task, spec.vars, False
        self.inputs = self.outputs = self.depfile = self.action = self.action_unquoted = self.env = None

    def prepare(self, count: int) -> None:
        """Compile for a task of `count` computations, once, if that many pay for it."""
        if count < COMPILE_FROM or self.compiled:
            return
        self.compiled = True
        task, variables = self.task, self.variables
        names = wildcard_names(task)
        files = ("inputs", "outputs")  # where {inputs} and {outputs} are known
        self.inputs = template.compile_list(task.inputs, names, (), variables, False)
        self.outputs = template.compile_list(task.outputs, names, (), variables, False)
        if task.depfile is not None:
            self.depfile = template.compile_list([task.depfile], names, files, variables, False)
            files = ("inputs", "outputs", "depfile")
        text = task.cmd if task.cmd is not None else task.python
        if text is not None:
            self.action = template.compile_list([text], names, files, variables, True)
            # Only file lists and wildcards are quoted: for computations whose paths and
            # wildcard values all need no quotes, this is the same text, without a test each.
            self.action_unquoted = template.compile_list([text], names, files, variables, False)
        self.env = template.compile_list(list(task.env.values()), names, files, variables, False)


def normalize(path: str, task: str, what: str) -> str:
    """A project-relative path, or an error when it leaves the root."""
    if not path:
        raise TaskError(f"task {task!r}: an empty path in {what}; remove it or give a path", task)
    if path[0] == "/":
        raise TaskError(f"task {task!r}: {what} path {path!r} is absolute; use a path relative to the project root", task)
    if "//" in path or "./" in path or path[-1] in "/.":
        norm = os.path.normpath(path)
    else:
        norm = path  # already normal, the usual case: spare normpath
    if norm == ".." or norm.startswith("../"):
        raise TaskError(f"task {task!r}: {what} path {path!r} is outside the project root; "
                        "use a path inside it", task)
    if not (norm.isascii() and norm.isprintable()) and has_control(norm):
        raise TaskError(f"task {task!r}: {what} path {path!r} contains a control character; "
                        "rename the file", task)
    if len(norm) > 63 and any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in norm.split("/")):
        raise TaskError(f"task {task!r}: {what} path {path!r} has a name longer than 255 bytes; "
                        "shorten it", task)
    return norm


def _foreach_instances(task: TaskSpec, files: Files, outputs: dict[str, str]) -> list[dict[str, str]]:
    foreach = task.foreach
    if foreach is None:
        return [NO_NAMES]  # one computation, no wildcards
    if isinstance(foreach, dict):
        keys = sorted(foreach)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(foreach[k] for k in keys))]
    regex, prefix = pattern_regex(foreach)
    listed = files.under(prefix)
    files.refuse_control(prefix, regex, f"task {task.name!r}: foreach {foreach!r}")
    # A match starts with the pattern's fixed text, so only outputs under its directory count.
    under = prefix + "/" if prefix else ""
    name = task.name
    declared = [p for p, owner in outputs.items() if owner != name and p.startswith(under)]
    if not declared:
        candidates = listed  # sorted already
    elif not listed:  # the usual fan-out over another task's outputs not built yet
        candidates = sorted(declared)  # often sorted already, which sorting sees at once
    else:
        candidates = sorted(set(listed).union(declared))
    # Never the task's own outputs, even left on disk by an earlier build: `src/{n}.txt`
    # making `src/{n}.2.txt` must not grow `a.2.2.txt` next time.
    if not under or under.startswith(".farmer"):
        candidates = [p for p in candidates if not p.startswith(".farmer/")]
    found = [m for m in map(regex.match, candidates) if m]
    if task.outputs:
        own = [pattern_regex(t) for t in task.outputs]
        # An output template's directory is a prefix of all it matches: one C-level test
        # spares the regexes for every path outside those directories.
        dirs = tuple(d + "/" if d else "" for _, d in own)
        found = [m for m in found if not (m.string.startswith(dirs)
                                          and any(r.match(m.string) for r, _ in own))]
    import re  # imported by pattern_regex already

    return list(map(re.Match.groupdict, found))


def _may_match(task: TaskSpec, paths: list[str]) -> bool:
    """Whether one of `paths` could be matched by the foreach pattern of `task`."""
    regex, prefix = pattern_regex(task.foreach)
    if prefix:
        paths = [p for p in paths if p.startswith(prefix + "/")]
    return any(map(regex.match, paths))


def _render(text: str, task: TaskSpec, wildcards: dict[str, str], files: dict[str, list[str]],
            variables: dict[str, str], quote: bool, what: str) -> str:
    try:
        return template.render(text, wildcards, files, variables, quote)
    except template.TemplateError as e:
        raise TaskError(f"task {task.name!r}: in {what} {text!r}: {e}", task.name) from None


def render_list(compiled, texts: list[str], whats: list[str], task: TaskSpec,
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


class Instance:
    __slots__ = ("task", "wildcards", "raw_inputs", "outputs", "plain", "safe", "literal")

    def __init__(self, task: TaskSpec, wildcards: dict[str, str], raw_inputs: list[str],
                 outputs: list[str], plain: bool = False, safe: bool = False,
                 literal: bool = False) -> None:
        self.task, self.wildcards = task, wildcards
        self.raw_inputs = raw_inputs  # after substitution, before resolving @refs and globs
        self.outputs = outputs
        self.plain = plain  # every raw input is a normal path: resolving changes nothing
        self.safe = safe  # plain, and no input or output path needs shell quotes
        self.literal = literal  # plain, and the task's texts are as written (`is_literal`)

    @classmethod
    def literal_of(cls, task: TaskSpec) -> Instance:
        """`Instance(task, NO_NAMES, task.inputs, task.outputs, True, False, True)`: a literal
        task's one instance (plain; not `safe`: with nothing substituted, there is no quoting
        to decide), made without __init__'s parameters. Its lists are the task's own, as
        every instance's are its computation's: none of them is ever changed."""
        inst = _new(cls)
        inst.task, inst.wildcards, inst.raw_inputs, inst.outputs = task, NO_NAMES, task.inputs, task.outputs
        inst.plain, inst.safe, inst.literal = True, False, True
        return inst


def is_literal(task: TaskSpec) -> bool:
    """Whether `task` has one computation whose every text is as written: no foreach, no
    brace in a template (a generator writing out each step makes such tasks)."""
    if task.foreach is not None:
        return False
    texts = "".join([*task.inputs, *task.outputs, task.cmd or "", task.python or "", task.depfile or "",
                     *task.env.values()])
    return "{" not in texts and "}" not in texts


def _literal_instances(spec: Spec) -> dict[str, list[Instance]]:
    """The instance of each literal task whose outputs are normal and inputs plain, so that
    rendering and resolving them changes nothing: checked in one batch, or task by task
    when some path needs a look. The others take the general way, which words the errors
    (in order: a literal task taken here has none to report)."""
    tasks = [task for task in spec.tasks.values() if task.plain or is_literal(task)]
    if not (all_normal([p for task in tasks for p in task.outputs])
            and all_plain_inputs([p for task in tasks for p in task.inputs])):
        tasks = [task for task in tasks if all_normal(task.outputs) and all_plain_inputs(task.inputs)]
    literal = Instance.literal_of
    return {task.name: [literal(task)] for task in tasks}


class Expanders(dict):
    """Each task's `TaskExpander`, made when first asked for: a literal task never needs one."""

    def __init__(self, spec: Spec) -> None:
        super().__init__()
        self.spec = spec

    def __missing__(self, name: str) -> TaskExpander:
        expander = self[name] = TaskExpander(self.spec.tasks[name], self.spec)
        return expander


def _instances_of(task: TaskSpec, spec: Spec, matches: list[dict[str, str]],
                  expander: TaskExpander) -> list[Instance]:
    expander.prepare(len(matches))
    ins, outs = expander.inputs, expander.outputs
    if ins is not None and outs is not None:
        # Compiled, rendering cannot fail: render all, then check all paths at once.
        raws = [ins(w, None, None, None) for w in matches]
        rendered = [outs(w, None, None, None) for w in matches]
        if not all_normal([p for paths in rendered for p in paths]):
            rendered = [[normalize(p, task.name, "output") for p in paths] for paths in rendered]
        flat_inputs = [p for paths in raws for p in paths]
        plain = all_plain_inputs(flat_inputs)
        # Safe: a command line needs no quotes for any path or wildcard value (SPEC §1
        # quotes wildcard values too, since they come from file names).
        safe = (plain and all_shell_safe(flat_inputs) and all_shell_safe([p for o in rendered for p in o])
                and all_shell_safe([v for w in matches for v in w.values()]))
        return [Instance(task, w, r, o, plain, safe) for w, r, o in zip(matches, raws, rendered)]
    result = []
    for wildcards in matches:
        raw_inputs = [_render(t, task, wildcards, {}, spec.vars, False, "inputs") for t in task.inputs]
        outs = [normalize(_render(t, task, wildcards, {}, spec.vars, False, "outputs"), task.name, "output")
                for t in task.outputs]
        result.append(Instance(task, wildcards, raw_inputs, outs))
    return result


def expand_tasks(spec: Spec, files: Files, expanders: Expanders) -> dict[str, list[Instance]]:
    """Instances of every task, by task in the Farmfile's order. Foreach patterns may match
    other tasks' declared outputs, so pattern tasks are re-matched until no task's set of
    matches changes."""
    instances: dict[str, list[Instance]] = {}
    owner: dict[str, str] = {}
    # Every output path whose owner may have changed, in order; a pattern task needs matching
    # again only if one of the paths logged since its last matching fits its pattern.
    changed_paths: list[str] = []
    checked: dict[str, int] = {}  # pattern task -> length of changed_paths at its last matching

    patterns = any(isinstance(task.foreach, str) for task in spec.tasks.values())

    def record(name: str, new: list[Instance]) -> None:
        if not patterns:  # no foreach pattern looks at what the others make
            instances[name] = new
            return
        for inst in instances.get(name, []):
            changed_paths.extend(inst.outputs)
            for out in inst.outputs:
                if owner.get(out) == name:
                    del owner[out]
        instances[name] = new
        paths = [out for inst in new for out in inst.outputs]
        changed_paths.extend(paths)
        for out in paths:
            owner.setdefault(out, name)

    literal = _literal_instances(spec)
    if len(literal) == len(spec.tasks):  # every task written out in full: nothing to match
        return literal  # (in the Farmfile's order, as `_literal_instances` goes)
    pattern_tasks = []
    matched: dict[str, list[dict[str, str]]] = {}
    for name, task in spec.tasks.items():
        if name in literal:
            record(name, literal[name])
            continue
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
        raise TaskError(
            f"foreach patterns of tasks {', '.join(repr(n) for n in pattern_tasks)} keep matching "
            "each other's outputs without end; make the patterns more specific", pattern_tasks[0]
        )
    return {name: instances[name] for name in spec.tasks}
