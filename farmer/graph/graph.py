"""The graph of computations: what each computation is, how they connect, and the
questions asked of the whole (order, cycles, what a set of targets needs)."""

from __future__ import annotations

import os
import sys

from farmer.errors import TaskError, UsageError
from farmer.files.digests import xxhash

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.manifest.spec import Spec

# The wildcards and env of computations that have none: one dict, never changed (a dict
# each would weigh on a large graph: see bench/results/performance-notes.md#figures-from-code-comments).
NO_NAMES: dict[str, str] = {}
_DRIVER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "run", "worlds", "driver.py")


# Start-up rule (docs/performance.md): plain slotted classes, not dataclasses, here and in
# every module a build imports.
class NinjaEdge:
    """What a build.ninja edge adds to its computation (farmer/graph/ninja_edges.py); a Farmfile's
    computations have none (`Computation.ninja is None`)."""

    __slots__ = ("order_only", "description", "generator", "remove_depfile", "rspfile",
                 "rspfile_content", "optional_outputs", "console", "restat", "dyndep", "msvc_prefix")

    def __init__(
        self,
        order_only: list[str] | None = None,  # ordering only: never hashed
        description: str | None = None,  # shown instead of TASK ID when it starts
        generator: bool = False,  # the command is left out of the action fingerprint
        remove_depfile: bool = False,  # the depfile is deleted once read (`deps = gcc`)
        rspfile: str | None = None,  # written with rspfile_content before the run, deleted after
        rspfile_content: str | None = None,
        optional_outputs: bool = False,  # an output missing after a run is no failure: it reruns
        console: bool = False,  # runs on the terminal (stdin/stdout), not into its log
        restat: bool = True,  # False: its outputs' digests cover their mtime (ninja without restat)
        dyndep: str | None = None,  # the dyndep file that adds to its inputs and outputs once made
        msvc_prefix: str | None = None,  # `deps = msvc`: the prefix of the output lines naming headers
    ) -> None:
        self.order_only = [] if order_only is None else order_only
        self.description, self.generator = description, generator
        self.remove_depfile, self.rspfile, self.rspfile_content = remove_depfile, rspfile, rspfile_content
        self.optional_outputs, self.console, self.restat = optional_outputs, console, restat
        self.dyndep = dyndep
        self.msvc_prefix = msvc_prefix

    def row(self) -> tuple:
        """Its fields in __init__'s order, for a cache: `NinjaEdge(*edge.row())` makes it again."""
        return tuple(getattr(self, f) for f in self.__slots__)


class _Settings:
    """The fields of a computation that are nearly always their defaults: the computations
    whose are all defaults share one (`_PLAIN`), so that each holds 15 slots, not 25 (see
    bench/results/issue17-passes.md#memory-of-a-100k-clean-build). Never changed once shared:
    `Computation`'s setters copy it first."""

    __slots__ = ("env", "world", "cost", "cpus", "pool", "timeout", "always", "cache",
                 "world_setup", "validates", "remote")

    def __init__(self, *values: object) -> None:
        for name, value in zip(self.__slots__, values):
            setattr(self, name, value)

    def values(self) -> tuple:
        return tuple(getattr(self, f) for f in self.__slots__)


_PLAIN_VALUES = (NO_NAMES, None, None, 1, None, None, False, True, None, (), True)
_PLAIN = _Settings(*_PLAIN_VALUES)
_new = object.__new__


def _setter(name: str) -> Callable[[Computation, object], None]:
    """Set a computation's field kept in its `_Settings` (copied first if shared)."""

    def fset(self: Computation, value: object) -> None:
        settings = self._settings
        old = getattr(settings, name)
        if old is value or (type(old) is type(value) and old == value):
            return
        if settings is _PLAIN:
            settings = self._settings = _Settings(*settings.values())
        setattr(settings, name, value)

    return fset


class Computation:
    """One run of a task's action (or an alias) with its inputs and outputs. Every field but
    the first three has a default: `Computation(0, "a.o", "cc", inputs=["a.c"], ...)`. The
    graph cache stores a computation as the tuple of its parameters in order (`FIELDS`;
    graphcache._ROW, checked against this signature)."""

    __slots__ = ("index", "id", "task", "wildcards", "inputs", "outputs", "depfile", "kind",
                 "action", "missing", "_fingerprint", "producers", "consumers", "ninja", "_settings")
    FIELDS = ("index", "id", "task", "wildcards", "inputs", "outputs", "depfile", "kind",
              "action", "env", "world", "cost", "cpus", "pool", "timeout", "always", "cache",
              "world_setup", "missing", "fingerprint", "producers", "consumers", "validates",
              "remote", "ninja")

    env = property(lambda self: self._settings.env, _setter("env"))
    world = property(lambda self: self._settings.world, _setter("world"))
    cost = property(lambda self: self._settings.cost, _setter("cost"))
    cpus = property(lambda self: self._settings.cpus, _setter("cpus"))
    pool = property(lambda self: self._settings.pool, _setter("pool"))
    timeout = property(lambda self: self._settings.timeout, _setter("timeout"))
    always = property(lambda self: self._settings.always, _setter("always"))
    cache = property(lambda self: self._settings.cache, _setter("cache"))
    world_setup = property(lambda self: self._settings.world_setup, _setter("world_setup"))
    validates = property(lambda self: self._settings.validates, _setter("validates"))
    remote = property(lambda self: self._settings.remote, _setter("remote"))

    def __init__(
        self,
        index: int,
        id: str,
        task: str,
        wildcards: dict[str, str] | None = None,
        inputs: list[str] | None = None,  # declared inputs, expanded and resolved, in declared order
        outputs: list[str] | None = None,
        depfile: str | None = None,
        kind: str | None = "cmd",  # "cmd", "python" or None for an alias
        action: str | None = None,  # the expanded cmd, or the expanded python line
        env: dict[str, str] | None = None,
        world: str | None = None,
        cost: float | None = None,
        cpus: int = 1,
        pool: str | None = None,
        timeout: float | None = None,
        always: bool = False,
        cache: bool = True,
        world_setup: str | None = None,  # JSON of the world chain's setup, for a fresh interpreter
        missing: list[str] | None = None,  # inputs neither existing nor produced
        fingerprint: str = "",  # the action fingerprint (`action_fingerprint`)
        producers: list[int] | None = None,
        consumers: list[int] | None = None,
        validates: list[int] | None = None,  # built with it, not needed by it (ninja's |@)
        remote: bool = True,  # False: never executed remotely (SPEC §5; it may still be cached)
        ninja: NinjaEdge | None = None,  # set by build.ninja manifests (farmer/ninja/) only
    ) -> None:
        self.index, self.id, self.task = index, id, task
        self.wildcards = NO_NAMES if wildcards is None else wildcards
        self.inputs = [] if inputs is None else inputs
        self.outputs = [] if outputs is None else outputs
        self.depfile, self.kind, self.action = depfile, kind, action
        self.fingerprint = fingerprint
        self.producers = [] if producers is None else producers
        self.consumers = [] if consumers is None else consumers  # appended to by traversals
        self.ninja = ninja
        # Shared and never changed where empty, as they nearly always are (one empty list
        # each weighs on a large graph): set anew, never appended to.
        self.missing = () if missing is None else missing
        settings = (NO_NAMES if env is None else env, world, cost, cpus, pool, timeout, always, cache,
                    world_setup, validates or (), remote)
        self._settings = _PLAIN if settings == _PLAIN_VALUES else _Settings(*settings)

    @classmethod
    def literal(cls, index: int, id: str, task: str, inputs: list[str], outputs: list[str],
                kind: str | None, action: str | None) -> Computation:
        """`Computation(index, id, task, inputs=inputs, outputs=outputs, kind=kind,
        action=action)`, made without __init__'s look at the defaults (a traversal of a
        generated Farmfile makes 100 000 of these). Its fingerprint is taken when first
        read: a first build's first command needs none."""
        comp = _new(cls)
        comp.index, comp.id, comp.task = index, id, task
        comp.wildcards, comp.inputs, comp.outputs = NO_NAMES, inputs, outputs
        comp.depfile, comp.kind, comp.action = None, kind, action
        comp._fingerprint = None
        comp.producers, comp.consumers = [], []
        comp.ninja, comp.missing, comp._settings = None, (), _PLAIN
        return comp

    @property
    def fingerprint(self) -> str:
        """The action fingerprint (`action_fingerprint`); None as set: taken when first read
        (`literal`)."""
        fingerprint = self._fingerprint
        if fingerprint is None:
            fingerprint = self._fingerprint = action_fingerprint(self)
        return fingerprint

    @fingerprint.setter
    def fingerprint(self, value: str | None) -> None:
        self._fingerprint = value

    def __repr__(self) -> str:
        return f"Computation({self.index}, {self.id!r}, task={self.task!r}, kind={self.kind!r})"

    def argv(self, reads: str | None = None) -> list[str]:
        """The process to start: `/bin/sh -c CMD`, or for a python line farmer's driver in a
        fresh `python3`, which runs a world task's world chain's setup first (`--no-worlds`)
        and writes what the step read to `reads` (run/worlds/reads.py). A python line that
        starts with an interpreter option the driver does not take (`-u x.py`) runs as
        `python3 LINE`, unrecorded."""
        if self.kind == "cmd":
            return ["/bin/sh", "-c", self.action or ""]
        import shlex  # here: only a python line is split (a build of cmd tasks never imports it)

        args = shlex.split(self.action or "")
        recorded = ["--reads", reads] if reads else []
        if self.world is not None:
            return [sys.executable, _DRIVER, *recorded, "--setup", self.world_setup or "[]", "--", *args]
        if args and (args[0] in ("-c", "-m") or not args[0].startswith("-")):
            return [sys.executable, _DRIVER, *recorded, "--setup", "[]", "--", *args]
        return [sys.executable, *args]


def action_fingerprint(comp: Computation) -> str:
    """What the computation does, apart from its inputs' contents and its world: a
    property of its action, taken by the traversals and read as `Computation.fingerprint`."""
    env = [f"{k}={v}" for k, v in sorted(comp.env.items())] if comp.env else []
    edge = comp.ninja
    if edge is None:
        action, rsp = comp.action or "", []
    else:
        action = "" if edge.generator else comp.action or ""  # ninja: a generator's command may change
        rsp = ["\0rspfile", edge.rspfile, edge.rspfile_content or ""] if edge.rspfile else []
    parts = [comp.kind or "", action, *env, "\0outputs", *comp.outputs, "\0depfile",
             comp.depfile or "", *rsp, ""]
    # hash_text(*parts) in one buffer and one call (a traversal makes 100k of these): the
    # parts each followed by NUL, as hash_text feeds them.
    return xxhash.xxh3_128_hexdigest("\0".join(parts).encode("utf-8", "surrogateescape"))


class Graph:
    __slots__ = ("root", "computations", "producer", "by_task", "order", "by_id", "listings",
                 "world_inputs", "missing_known", "paths_first", "identity", "inside_checked")

    def __init__(
        self,
        root: str | os.PathLike,  # kept as a str
        computations: list[Computation],
        producer: dict[str, int],  # output path -> index of the computation that declares it
        by_task: dict[str, list[int]],
        order: list[int],  # a topological order: producers before consumers
        by_id: dict[str, int],
        listings: dict[str, str] | None = None,  # walked prefix -> listing digest
        # Each world's input paths, its ancestors' included, as substituted and normalised.
        world_inputs: dict[str, list[str]] | None = None,
        missing_known: bool = True,  # Computation.missing is current (see check_inputs)
        paths_first: bool = False,  # a target that is an output path and a task name means the path
        identity: str = "",  # a digest of every computation's id in index order (`identify`)
        # What every computation writes was checked to stay inside the root as the graph was
        # made, just now (a traversal's): a build need not look again (inside.check_inside).
        inside_checked: bool = False,
    ) -> None:
        self.root, self.computations = os.fspath(root), computations
        self.producer, self.by_task, self.order, self.by_id = producer, by_task, order, by_id
        self.listings = {} if listings is None else listings
        self.world_inputs = {} if world_inputs is None else world_inputs
        self.missing_known, self.paths_first, self.identity = missing_known, paths_first, identity
        self.inside_checked = inside_checked

    def identify(self) -> str:
        """A digest of the computations' ids in index order: what refers to computations
        by index (the no-op proof) holds only for a graph with the same identity."""
        if not self.identity:
            from farmer.files.digests import hash_text

            self.identity = hash_text(*(c.id for c in self.computations))
        return self.identity

    def closure(self, seeds: list[int]) -> list[int]:
        """`seeds` and everything they need (and what they validate), in topological order."""
        wanted = set(seeds)
        stack = list(seeds)
        comps = self.computations
        while stack:
            comp = comps[stack.pop()]
            for p in comp.producers:
                if p not in wanted:
                    wanted.add(p)
                    stack.append(p)
            for p in comp.validates:
                if p not in wanted:
                    wanted.add(p)
                    stack.append(p)
        return [i for i in self.order if i in wanted]


def topological_order(comps: list[Computation]) -> list[int]:
    waiting = [len(c.producers) for c in comps]
    order = [c.index for c in comps if not c.producers]
    head = 0
    while head < len(order):
        for c in comps[order[head]].consumers:
            waiting[c] -= 1
            if waiting[c] == 0:
                order.append(c)
        head += 1
    if len(order) != len(comps):
        cycle = _find_cycle(comps, {i for i, w in enumerate(waiting) if w > 0})
        tasks = []
        for i in cycle:
            if comps[i].task not in tasks:
                tasks.append(comps[i].task)
        path = " -> ".join(comps[i].id for i in cycle + cycle[:1])
        raise TaskError(f"dependency cycle between tasks {', '.join(tasks)}: {path}; break one of "
                        "these edges", tasks[0])
    return order


def _find_cycle(comps: list[Computation], stuck: set[int]) -> list[int]:
    """One cycle among the computations Kahn's algorithm could not order."""
    start = min(stuck)
    position: dict[int, int] = {}
    path: list[int] = []
    node = start
    # Every stuck node has a stuck producer, so walking producers must revisit a node.
    while node not in position:
        position[node] = len(path)
        path.append(node)
        node = next(p for p in comps[node].producers if p in stuck)
    cycle = path[position[node]:]
    cycle.reverse()  # producers first
    return cycle


def select(graph: Graph, targets: list[str],
           exists: Callable[[str], bool] | None = None) -> list[int]:
    """The computations to build for `targets` (task names or output paths), with everything
    they need, in topological order."""
    seeds: list[int] = []
    for target in targets:
        name = target[1:] if target.startswith("@") else target
        norm = os.path.normpath(target)
        if name in graph.by_task and not (graph.paths_first and norm in graph.producer):
            seeds.extend(graph.by_task[name])
            continue
        if norm in graph.producer:
            seeds.append(graph.producer[norm])
        elif target in graph.by_id:
            seeds.append(graph.by_id[target])
        else:
            raise UsageError(f"unknown target {target!r}: not a task name or a declared output")
    return check_inputs(graph, graph.closure(seeds), exists)


def select_targets(spec: Spec, graph: Graph, targets: list[str],
                   exists: Callable[[str], bool] | None = None) -> list[int]:
    """What a command selects: `targets`, else the Farmfile's `default`, else everything."""
    try:
        if targets:
            return select(graph, targets, exists)
        if spec.default is not None:
            return select(graph, spec.default, exists)
        return check_inputs(graph, list(graph.order), exists)
    except TaskError as e:  # a missing input: where its task is written
        from farmer.manifest.farmfile import locate

        raise locate(e, spec.path) from None


def check_inputs(graph: Graph, selected: list[int],
                 exists: Callable[[str], bool] | None = None) -> list[int]:
    """`selected`, or an error naming the first input that neither exists nor is made.
    A graph read from the cache learns now, and only for `selected`, what is missing.
    `exists` knows most files to exist without a look (the no-op proof's), so it is asked
    before the producers (a cached graph reads its maps only when first used); without it,
    the producers are asked first, which spares a stat per made input."""
    if not graph.missing_known:
        comps = graph.computations
        if exists is None:
            for i in selected:
                comp = comps[i]
                comp.missing = [p for p in comp.inputs if p not in graph.producer and not os.path.exists(p)]
        else:
            for i in selected:
                comp = comps[i]
                comp.missing = [p for p in comp.inputs if not exists(p) and p not in graph.producer]
    for i in selected:
        comp = graph.computations[i]
        if comp.missing:
            raise TaskError(
                f"missing input {comp.missing[0]!r} needed by task {comp.task!r}: no such file "
                "and no task declares it as output; create it, fix the path, or declare it as "
                "an output of a task", comp.task)
    return selected
