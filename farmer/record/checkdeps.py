"""`farmer build --check-deps`: each command run under a file-access tracer
(farmer/run/tracer/strace.py), and what it read or wrote inside the project root without
declaring it, said once it ends (docs/up-to-date.md#checking-what-commands-touch).

An engine (farmer/record/engine.py) with two parts: a command wrapper, which the process
executor puts in front of each `cmd` computation's argv (its trace goes to
`.farmer/check-deps/INDEX.trace`), and an executor layer, which reads that trace when the
run's outcome comes back, before the recorder records it: the findings are printed as one
warning block per computation; under `strict` a finding fails the run (`undeclared input
PATH`, `undeclared output PATH`), so its outputs are not kept; and a run that read a file it
does not declare is marked `uncacheable`, so no output cache stores it (what it made depends
on something its cache key does not hold).

Checked: every `cmd` computation but a build.ninja generator edge (`checked`). Declared,
for a run: its inputs (with a Farmfile's `@task` outputs and globs expanded, a
build.ninja edge's explicit, implicit and order-only inputs, its rspfile) and the files its
depfile lists now; its outputs and its depfile. A file its depfile lists that another
computation makes is declared only when that computation runs first (it is among the
run's producers, at any depth): else the two race, and the first build may read the file
before it is made (ninja's `-t missingdeps`: a generated header without an order-only
dependency). Never reported: files outside the root,
farmer's own `.farmer/`, `__pycache__` folders (an interpreter's cache of a source it read),
directories, calls that failed, files the run wrote before it read them, and files it made
and removed again (its temporary files).
"""

from __future__ import annotations

import os
import time

from farmer.record.engine import Engine, EngineContext
from farmer.run.executors.base import Executor, InFront, Outcome, Ran
from farmer.run.tracer import strace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Computation

FOLDER = "check-deps"  # in .farmer/: the traces of the runs going on
_LOOK_AGAIN_S = 0.002  # how often a trace still being written is looked at again
_TRACE_WAIT_S = 30.0  # how long strace may take to end after its command: then what it wrote is read
_IGNORED_DIRS = (".farmer", "__pycache__")


class Finding:
    """One file a run touched without declaring it: `kind` "input" (read) or "output"
    (created or written, and still there); `path` relative to the project root; for an
    input that another computation declares as its output, that computation's `producer`
    (its "TASK ID"), and whether `ordered`: it is among the run's producers' producers, so
    it ran first, though a change to the file alone would not run this one again."""

    __slots__ = ("kind", "path", "producer", "ordered")

    def __init__(self, kind: str, path: str, producer: str | None = None, ordered: bool = False) -> None:
        self.kind, self.path, self.producer, self.ordered = kind, path, producer, ordered

    def __repr__(self) -> str:
        return f"Finding({self.kind!r}, {self.path!r}, {self.producer!r}, {self.ordered!r})"

    def line(self) -> str:
        """How the warning block says it."""
        text = f"  undeclared {self.kind} {self.path}"
        if self.producer is not None:
            order = "ordered only through other steps" if self.ordered else "nothing orders them"
            text += f" (an output of {self.producer}: {order})"
        return text

    def reason(self) -> str:
        """A failed run's reason under strict."""
        return f"undeclared {self.kind} {self.path}"


class Root:
    """The project root as paths in a trace name it: `inside(path)` is a path relative to
    it, or None for one outside it or ignored."""

    __slots__ = ("prefixes", "real")

    def __init__(self, root: str) -> None:
        absolute = os.path.abspath(root)
        self.real = os.path.realpath(absolute)
        self.prefixes = tuple(dict.fromkeys((self.real.rstrip("/") + "/", absolute.rstrip("/") + "/")))

    def inside(self, path: str) -> str | None:
        for prefix in self.prefixes:
            if path.startswith(prefix):
                rel = path[len(prefix):]
                parts = rel.split("/")
                if any(p in _IGNORED_DIRS for p in parts) or not rel:
                    return None
                return rel
        return None

    def relative(self, declared: str) -> str | None:
        """A declared path (relative to the root, or absolute) as `inside` gives it."""
        path = os.path.normpath(declared)
        if not os.path.isabs(path):
            return path
        return self.inside(path)


def judge(comp: Computation, reads: list[str], writes: list[str], root: Root,
          declared_inputs: list[str], declared_outputs: list[str],
          producer_of: Callable[[str], Computation | None],
          ancestors: Callable[[], set[int]],
          is_file: Callable[[str], bool], discovered: list[str] = ()) -> list[Finding]:
    """What `comp`'s run touched inside `root` without declaring it, inputs first: `reads`
    and `writes` as `strace.touched` gives them (absolute); `producer_of(path)`: the
    computation that declares `path` (relative) as an output, if any; `ancestors()`: the
    indices of the computations `comp` waits for, transitively; `is_file(path)`: whether an
    absolute path is a file (not a directory, not gone) now; `discovered`: what its depfile
    lists, declared unless another computation makes it and nothing orders the two."""
    inputs = {p for p in (root.relative(d) for d in declared_inputs) if p is not None}
    outputs = {p for p in (root.relative(d) for d in declared_outputs) if p is not None}
    listed = {p for p in (root.relative(d) for d in discovered) if p is not None} - inputs
    resolved: set[str] | None = None  # the declared paths with their symlinks resolved, once needed
    findings: list[Finding] = []
    order: set[int] | None = None
    for kind, paths in (("input", reads), ("output", writes)):
        for path in paths:
            rel = root.inside(path)
            if rel is None or rel in outputs or kind == "input" and rel in inputs or not is_file(path):
                continue
            if resolved is None:
                resolved = {r for r in (root.inside(os.path.realpath(os.path.join(root.real, d)))
                                        for d in inputs | outputs) if r is not None}
            if rel in resolved:
                continue
            finding = Finding(kind, rel)
            if kind == "input":
                made_by = producer_of(rel)
                if made_by is not None and made_by.index != comp.index:
                    if order is None:
                        order = ancestors()
                    finding.producer = f"{made_by.task} {made_by.id}"
                    finding.ordered = made_by.index in order
                if rel in listed and (finding.producer is None or finding.ordered):
                    continue  # its depfile declares it, and it is not made in a race
            findings.append(finding)
    return findings


def block(comp: Computation, findings: list[Finding]) -> str:
    """The warning block of one run's findings."""
    head = f"farmer: warning: {comp.task} {comp.id} touched files it does not declare (--check-deps):"
    return "\n".join([head, *(f.line() for f in findings)])


def checked(comp: Computation) -> bool:
    """Whether `comp`'s runs are traced: a command's, but a build.ninja generator's (the
    edge that reruns CMake writes dozens of files of its own that are nobody's input)."""
    return comp.kind == "cmd" and not (comp.ninja is not None and comp.ninja.generator)


def _is_file(path: str) -> bool:
    try:
        return not os.path.isdir(path) and os.path.lexists(path)
    except (OSError, ValueError):
        return False


def _ancestors(comps: list[Computation], start: Computation) -> set[int]:
    seen: set[int] = set()
    todo = list(start.producers)
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            todo.extend(comps[i].producers)
    return seen


class CheckDepsEngine(Engine):
    """The engine: `mode` "warn" or "strict"; `tracer`: strace's path; `folder`: where the
    traces go; the build's computations, root, producers and `warn`."""

    __slots__ = ("mode", "tracer", "folder", "comps", "producer", "root", "warn")
    name = "check-deps"

    def __init__(self, mode: str, tracer: str, folder: str, comps: list[Computation],
                 producer: Callable[[str], int | None], root: str, warn: Callable[[str], None]) -> None:
        self.mode, self.tracer, self.folder = mode, tracer, folder
        self.comps, self.producer, self.root = comps, producer, Root(root)
        self.warn = warn

    @classmethod
    def of(cls, ctx: EngineContext, mode: str) -> CheckDepsEngine:
        given = ctx.options.check_deps is not None
        tracer = strace.require("--check-deps" if given else f"{ctx.spec.path}: [farmer] check_deps")
        folder = os.path.join(os.path.dirname(os.path.abspath(ctx.logs)), FOLDER)
        from farmer.files.private import make_dir

        make_dir(folder)
        for name in os.listdir(folder):  # what an interrupted build left
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
        graph = ctx.session.graph
        return cls(mode, tracer, folder, graph.computations, graph.producer.get, ctx.spec.root, ctx.warn)

    def trace_file(self, index: int) -> str:
        return os.path.join(self.folder, f"{index}.trace")

    def command_wrapper(self, ctx: EngineContext) -> Callable[[Computation, list[str]], list[str]] | None:
        tracer, trace_file = self.tracer, self.trace_file

        def wrap(comp: Computation, argv: list[str]) -> list[str]:
            return strace.traced_argv(tracer, argv, trace_file(comp.index)) if checked(comp) else argv

        return wrap

    def executor_layer(self, inner: Executor, slots: int, ctx: EngineContext) -> tuple[Executor, int]:
        return CheckingExecutor(inner, self), slots

    def written(self, outcome: Outcome) -> bool:
        """Whether the trace of the run `outcome` ended can be read: strace, which ends just
        after the command (and what it left running), has written it whole."""
        return not checked(self.comps[outcome.index]) or strace.written(self.trace_file(outcome.index))

    def check(self, outcome: Outcome) -> str | None:
        """Read the trace of the run `outcome` ended (if it was traced), fail it (strict)
        or keep it out of the output caches (an undeclared read) as the mode says; the
        warning block of what it touched without declaring it, if anything."""
        comp = self.comps[outcome.index]
        if not checked(comp) or not isinstance(outcome.origin, Ran):
            return None
        path = self.trace_file(comp.index)
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                # (farmer's working directory is the root: the command's)
                accesses = strace.parse(f, self.root.real, self.root.prefixes)
        except OSError:
            return None  # not traced here (it did not start, or ran elsewhere)
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
        if not outcome.ok:
            return None  # a failed run is not kept: what it touched so far is no dependency
        reads, writes = strace.touched(accesses)
        declared_in, discovered, declared_out = self.declared(comp)
        comps, producer = self.comps, self.producer

        def producer_of(rel: str) -> Computation | None:
            i = producer(rel)
            return None if i is None else comps[i]

        findings = judge(comp, reads, writes, self.root, declared_in, declared_out, producer_of,
                         lambda: _ancestors(comps, comp), _is_file, discovered)
        if not findings:
            return None
        if any(f.kind == "input" for f in findings):
            outcome.uncacheable = "undeclared input"
        if self.mode == "strict":
            outcome.ok = False
            outcome.reason = findings[0].reason()
        return block(comp, findings)

    def declared(self, comp: Computation) -> tuple[list[str], list[str], list[str]]:
        """What `comp` declares it reads, what its depfile lists now that its run ended, and
        what it declares it writes."""
        inputs = list(comp.inputs)
        outputs = list(comp.outputs)
        edge = comp.ninja
        if edge is not None:
            inputs += edge.order_only
            if edge.rspfile:
                inputs.append(edge.rspfile)
        discovered = []
        if comp.depfile:
            outputs.append(comp.depfile)
            discovered = _depfile_inputs(comp.depfile)
        return inputs, discovered, outputs


def _depfile_inputs(path: str) -> list[str]:
    """What the depfile at `path` lists (nothing when it is missing or unreadable: the
    recorder says so)."""
    from farmer.record import depfile

    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return depfile.parse(f.read())
    except (OSError, depfile.DepfileError):
        return []


class CheckingExecutor(InFront):
    """The layer in front of the executor that runs commands: each outcome, as it comes
    back, is checked (`CheckDepsEngine.check`) before the scheduler hands it on, once its
    trace is written whole: until then (strace ends a few milliseconds after the command)
    it is held, counted as running, and looked at again every few milliseconds, so the
    build's thread never waits for one. Its warnings are printed at the next `wait` (or
    `close`): after the line that says the run ended, which the hooks print in between."""

    def __init__(self, inner: Executor, engine: CheckDepsEngine) -> None:
        super().__init__(inner)
        self.engine = engine
        self.said: list[str] = []  # warning blocks not printed yet
        self.held: list[tuple[Outcome, float]] = []  # outcomes whose trace is being written; since

    def _say(self) -> None:
        said, self.said = self.said, []
        for text in said:
            self.engine.warn(text)

    def wait(self, timeout: float | None) -> list[Outcome]:
        self._say()
        if self.held:
            timeout = _LOOK_AGAIN_S if timeout is None else min(timeout, _LOOK_AGAIN_S)
        now = time.monotonic()
        waiting = self.held + [(o, now) for o in self.inner.wait(timeout)]
        self.held, done = [], []
        for outcome, since in waiting:
            if not self.engine.written(outcome) and now - since < _TRACE_WAIT_S:
                self.held.append((outcome, since))
                continue
            text = self.engine.check(outcome)
            if text is not None:
                self.said.append(text)
            done.append(outcome)
        return done

    def running(self) -> int:
        return self.inner.running() + len(self.held)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self._say()
