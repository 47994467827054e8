"""What a build knows before it runs anything: the state read, the no-op proof, the
selection, and each computation's verdict, taken once when first asked.

`open_session` makes one: `Session.full` when there is no proof (every selected
computation is looked at), `Session.from_proof` when the last good build's proof says which
computations a changed file touches (only those and what is downstream are looked at; the
rest are up to date without a look at their traces). At the end of a good build
`write_proof` hands noop.py what each computation's verdict now rests on.
"""

from __future__ import annotations

import os
import sys

from farmer.files.digests import Digests
from farmer.graph.graph import Graph, check_inputs, select_targets
from farmer.plan.latency import estimates
from farmer.plan.latency.predict import Prediction, predict
from farmer.plan.uptodate import out_of_date, timed_outputs, to_run
from farmer.report import console as report
from farmer.run.scheduler import UP_TO_DATE
from farmer.startup.cheap import int64s
from farmer.store import proof as noop
from farmer.store.state import State, Trace, world_setup_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from farmer.files.atomic import Part
    from farmer.manifest.spec import Spec
    from farmer.run.executors.base import Outcome
    from farmer.run.scheduler import Settled

_UNCHECKED = object()  # a verdict not taken yet (None means "up to date")
_PRIOR_RUNS = 5000  # the newest measured runs a never measured computation is guessed from


class Session:
    __slots__ = ("spec", "graph", "state", "digests", "traces", "all_traces", "selected",
                 "affected", "worlds", "verdicts", "dirty", "proof", "rank", "rechecked", "fresh",
                 "fresh_at", "fresh_discovered", "setup_reads_now", "declared_worlds", "setup_paths")

    def __init__(self, spec: Spec, graph: Graph, state: State, digests: Digests,
                 traces: dict[str, Trace], all_traces: bool, selected: list[int],
                 affected: list[int]) -> None:
        self.spec = spec
        self.graph = graph
        self.state = state
        self.digests = digests
        digests.timed = timed_outputs(graph)
        self.traces = traces  # read from state.db when first needed, unless `all_traces`
        self.all_traces = all_traces
        self.selected = selected
        # What this build looks at, in topological order: all of `selected` without a proof;
        # with one, what a changed file touches and everything downstream of that. Everything
        # else selected is up to date, and nothing of it needs to be read.
        self.affected = affected
        self.worlds: dict[str, str] = {}  # world fingerprints, taken when first needed
        # By index: why it runs, None, or _UNCHECKED (a list, lighter than a dict on a large graph).
        self.verdicts: list[object] = [_UNCHECKED] * len(graph.computations)
        # From the proof: the computations a file of which changed since (None: no proof, so
        # none is known to be up to date), and each selected one's position in the proof.
        self.dirty: set[int] | None = None
        self.proof: noop.Proof | None = None
        self.rank: dict[int, int] = {}
        self.rechecked: set[int] = set()  # checked against their traces this build, with a proof
        # Of each computation recorded in this build, what the proof needs of its trace
        # (`recorded`): the digests it names, one computation's after another in `fresh`
        # from `fresh_at[index]` (-1: none; None: nothing recorded yet), and what its
        # depfile listed.
        self.fresh: list[str] = []
        self.fresh_at: memoryview | None = None
        self.fresh_discovered: dict[int, list[str]] = {}
        # What each world's set-up read: (path, the digest it read), for a world set up in
        # this build; (path, None) as state.db keeps it from the last set-up (digested now).
        self.setup_reads_now: dict[str, list[tuple[str, str | None]]] = {}
        self.declared_worlds: dict[str, str] = {}  # world fingerprints without what set-ups read
        self.setup_paths: dict[str, list[str]] = {}  # `world_setup_paths`, once per world

    @classmethod
    def full(cls, spec: Spec, graph: Graph, state: State, selected: list[int],
             digests: Digests | None = None) -> Session:
        """No proof: every selected computation is looked at, so all traces are read.
        `digests`: the caller's (a workspace's, warm), else state.db's whole stat cache."""
        if digests is None:
            digests = Digests(state.stat_cache())
        return cls(spec, graph, state, digests, state.traces(), True, selected, selected)

    @classmethod
    def from_proof(cls, spec: Spec, graph: Graph, state: State, proof: noop.Proof,
                   selected: list[int], affected: list[int], rank: dict[int, int],
                   dirty: set[int], digests: Digests | None = None) -> Session:
        if len(dirty) > 1000 and len(dirty) > len(selected) // 8:  # one query beats thousands of small ones
            if digests is None:
                digests = Digests(state.stat_cache())
            session = cls(spec, graph, state, digests, state.traces(), True, selected, affected)
        else:  # most are clean: read only the traces and stat entries the others need
            if digests is None:
                digests = Digests({}, state.stat_entry)
            session = cls(spec, graph, state, digests, {}, False, selected, affected)
        session.proof, session.rank, session.dirty = proof, rank, dirty
        return session

    def trace(self, cid: str) -> Trace | None:
        if cid not in self.traces and not self.all_traces:
            self.traces[cid] = self.state.trace(cid)
        return self.traces.get(cid)

    def check(self, i: int) -> str | None:
        """The computation's own verdict, taken once per build (see `recheck`)."""
        verdict = self.verdicts[i]
        if verdict is _UNCHECKED:
            comp = self.graph.computations[i]
            clean = self.dirty is not None and i not in self.dirty and not comp.always
            verdict = self.verdicts[i] = None if clean else self.recheck(i)
        return verdict  # type: ignore[return-value]

    def recheck(self, i: int) -> str | None:
        """A fresh verdict: after a producer ran, its outputs may or may not have changed."""
        if self.proof is not None:  # only an update of the proof asks
            self.rechecked.add(i)
        comp = self.graph.computations[i]
        if comp.kind is None:
            return None
        return out_of_date(comp, self.trace(comp.id), self.world_fingerprint(comp.world),
                           self.digests)

    def world_fingerprint(self, name: str | None) -> str | None:
        if name is None:
            return None
        if not self.worlds:
            from farmer.run.worlds.chain import fingerprints

            self.worlds = fingerprints(self.spec, self.digests, self.setup_reads)
        return self.worlds[name]

    def world_declared_fingerprint(self, name: str) -> str:
        """A world's fingerprint without the files its set-up read: what a world kept warm by
        `farmer watch` is kept under (those files are checked apart, by their change times:
        run/executors/world_warm.py)."""
        if not self.declared_worlds:
            from farmer.run.worlds.chain import fingerprints

            self.declared_worlds = fingerprints(self.spec, self.digests)
        return self.declared_worlds[name]

    def setup_reads(self, world: str) -> list[tuple[str, str | None]]:
        """The files world `world`'s set-up read, with the digests it read when it was set
        up in this build, else (None) as it last ran (its record in state.db:
        run/worlds/reads.py, record/recorder.py)."""
        now = self.setup_reads_now.get(world)
        if now is None:
            kept = self.trace(world_setup_id(world))
            now = self.setup_reads_now[world] = [(p, None) for p, _ in kept.discovered] if kept else []
        return now

    def world_set_up(self, world: str, read: list[tuple[str, str]]) -> None:
        """World `world` was set up in this build and read `read` (paths, digests as read):
        its fingerprint from now on holds them, as the world does."""
        self.setup_reads_now[world] = list(read)  # type: ignore[arg-type]
        self.worlds = {}
        self.setup_paths = {}

    def world_setup_paths(self, world: str) -> list[str]:
        """The files the set-ups of `world` and its ancestors read (what a no-op proof of
        its tasks rests on besides their own files)."""
        paths = self.setup_paths.get(world)
        if paths is None:
            paths = self.setup_paths[world] = []
            name: str | None = world
            while name is not None:
                paths += [p for p, _ in self.setup_reads(name)]
                name = self.spec.worlds[name].parent
        return paths

    def outputs_written(self, paths: list[str]) -> None:
        """A world whose input was just rebuilt has a new fingerprint."""
        if self.worlds and any(i in paths for inputs in self.graph.world_inputs.values()
                               for i in inputs):
            self.worlds = {}
            self.declared_worlds = {}

    def to_run(self) -> dict[int, str]:
        """What would run, and why: the computations out of date now, and everything
        downstream of them (uptodate.to_run)."""
        return to_run(self.graph.computations, self.affected, self.check)

    def predict(self, to_run: dict[int, str], jobs: int, compare: bool = False,
                worlds: bool = True) -> Prediction:
        """`worlds`: world tasks run in worlds, which take their set-up (not --no-worlds)."""
        comps = self.graph.computations
        needed = self.worlds_needed(to_run) if worlds else []
        # Only estimates need history, and only of the tasks that run (their others fill in)
        # and of the worlds they need set up.
        tasks = {comps[i].task for i in to_run} | {world_setup_id(w) for w in needed}
        history = self.state.history(tasks) if to_run else {}
        # Input sizes fit durations to the sizes of a task's measured runs: none without history.
        sizes = {i: self.digests.total_size(comps[i].inputs) for i in to_run} if history else {}

        def prior() -> estimates.Prior:  # for computations of tasks never measured
            def program_of(cid: str) -> str | None:
                i = self.graph.by_id.get(cid)
                return estimates.program(comps[i]) if i is not None else None

            runs = [r for r in self.state.recent(_PRIOR_RUNS) if not r.id.startswith("world:")]
            return estimates.Prior.of(runs, program_of)  # of computations, not world set-ups

        est = estimates.estimate(comps, list(to_run), history, sizes, prior)
        setups = None
        if needed:  # a world never set up before costs nothing yet: nothing is known of it
            seconds = {w: estimates.from_history(history[world_setup_id(w)]) for w in needed
                       if world_setup_id(w) in history}
            from farmer.run.executors.simulated import WorldSetups

            setups = WorldSetups(seconds, {w: self.spec.worlds[w].parent for w in needed},
                                 self.world_producers(needed))
        return predict(comps, self.affected, to_run, est, jobs, self.spec.pools, compare, setups)

    def world_producers(self, names: Iterable[str]) -> dict[str, list[int]]:
        """Per world, the computations that make its inputs (its set-up reads them)."""
        producer, inputs = self.graph.producer, self.graph.world_inputs
        return {w: sorted({producer[p] for p in inputs.get(w, ()) if p in producer}) for w in names}

    def worlds_needed(self, to_run: dict[int, str]) -> list[str]:
        """The worlds the world tasks in `to_run` run in, with their ancestors."""
        comps, worlds = self.graph.computations, self.spec.worlds
        needed: dict[str, None] = {}
        for i in to_run:
            world = comps[i].world
            while world is not None and world not in needed:
                needed[world] = None
                world = worlds[world].parent
        return list(needed)

    def last_build_tasks(self, settled: dict[int, Settled], outcomes: dict[int, Outcome]) -> Iterable[Part]:
        """last-build.json's tasks, in parts. The proof keeps them as they are when
        everything is up to date: only the others are rendered."""
        comps, selected, proof = self.graph.computations, self.selected, self.proof
        if proof is None or proof.count != len(selected):
            return report.last_build_json(comps, selected, settled, outcomes)
        others = [i for i, s in settled.items() if s.status != UP_TO_DATE or i in outcomes]
        tasks = report.last_build_tasks(comps, others, settled, outcomes)
        entries = report.compact_json_each(tasks)
        return proof.tasks_with({self.rank[i]: entry for i, entry in zip(others, entries)})

    def recorded(self, i: int, trace: Trace) -> None:
        """Computation `i` ran (or was restored) and `trace` is on its way to state.db:
        what the proof will need of it is kept, not the trace (see
        bench/results/issue17-passes.md#memory-of-a-100k-clean-build): the digests it names in order,
        and the paths its depfile listed."""
        self.traces.pop(trace.id, None)  # no longer its trace: only `write_proof` asks again
        if self.fresh_at is None:
            self.fresh_at = int64s(len(self.graph.computations), -1)
        self.fresh_at[i] = len(self.fresh)
        for pairs in (trace.inputs, trace.discovered, trace.outputs):
            self.fresh += [d for _, d in pairs]
        if trace.discovered:
            self.fresh_discovered[i] = [p for p, _ in trace.discovered]
        else:
            self.fresh_discovered.pop(i, None)

    def ran(self, outcomes: dict[int, Outcome]) -> bytearray:
        """Which computations ran (or were restored), flagged by index."""
        flags = bytearray(len(self.graph.computations))
        for i in outcomes:
            flags[i] = 1
        return flags

    def write_proof(self, farmer_dir: str, targets: list[str], ran: bytearray) -> None:
        """Everything selected is up to date now: record what each verdict rests on, so that
        the next build of the same targets can check just those files (noop.py). With the
        last build's proof at hand, only what was checked against traces this build is
        redone. `ran`: what ran, as `ran` flags it."""
        comps = self.graph.computations
        old = self.proof  # written only when no computation is `always`, and for this graph
        if not self.spec.digest or old is None and any(comps[i].always for i in self.selected):
            return
        if self.digests.unstable:  # a file changed while the build ran: no snapshot holds
            return
        self.verdicts = []  # taken: not held while the proof is made
        redo = self.selected if old is None else sorted((self.dirty or set()) | self.rechecked)
        if not self._traces_hold(redo):
            return
        entries = None
        if old is None:
            entries = (report.last_build_json_each(comps, redo[k:k + 1000], {}, {})
                       for k in range(0, len(redo), 1000))
        updated = noop.update(old, self._rests_on(redo), self.digests, self._written(ran), self.selected,
                              self.rank, entries, self.graph.identify(), farmer_dir)
        if updated is not None:
            proof, snapshot = updated
            noop.write(farmer_dir, self.spec.path, self.spec.digest, targets, self.graph.listings,
                       proof, snapshot)

    def _traced(self, i: int) -> tuple[list[str], Iterable[tuple[str, str]]] | None:
        """The paths the trace of computation `i` names beyond its declared inputs and
        outputs (its depfile's), and each file it names with its digest; None when it has
        no trace."""
        comp = self.graph.computations[i]
        at = self.fresh_at[i] if self.fresh_at is not None else -1
        if at >= 0:  # as `recorded` laid it: its declared inputs, what its depfile listed, its outputs
            discovered = self.fresh_discovered.get(i, [])
            paths = comp.inputs + discovered + comp.outputs
            return discovered, zip(paths, self.fresh[at:at + len(paths)])
        trace = self.trace(comp.id)
        if trace is None:
            return None
        return [p for p, _ in trace.discovered], trace.inputs + trace.discovered + trace.outputs

    def _traces_hold(self, redo: list[int]) -> bool:
        """Whether the stat data the proof will record is that of the content each trace
        names: a file hashed again after the trace was taken (it changed while the build
        ran) breaks that."""
        taken = self.digests.taken_digest
        for i in redo:
            traced = self._traced(i)
            if traced is not None:
                for p, digest in traced[1]:
                    now = taken(p)
                    if now is not None and now != digest:
                        return False
        return True

    def _rests_on(self, redo: list[int]) -> Iterator[tuple[int, list[str]]]:
        """Per computation of `redo`, the files its verdict rests on."""
        comps = self.graph.computations
        for i in redo:
            comp = comps[i]
            paths = comp.inputs + comp.outputs
            traced = self._traced(i)
            if traced is not None and traced[0]:
                paths += traced[0]
            if comp.world is not None:
                paths += self.graph.world_inputs[comp.world] + self.world_setup_paths(comp.world)
            yield i, paths

    def _written(self, ran: bytearray) -> Callable[[str], bool]:
        """Whether a path is an output of what ran (the set made only when first asked)."""
        made: list[set[str]] = []

        def written(path: str) -> bool:
            if not made:
                comps = self.graph.computations
                made.append({p for i, flag in enumerate(ran) if flag for p in comps[i].outputs})
            return path in made[0]
        return written


def open_session(spec: Spec, graph: Graph, farmer_dir: str | os.PathLike, targets: list[str],
                 readonly: bool = False, proof: noop.Proof | None = None,
                 from_scratch: bool = False, state: State | None = None,
                 digests: Digests | None = None) -> Session:
    """`proof`: the no-op proof as the no-op check read and checked it, if it did;
    `from_scratch`: look at every selected computation (`plan --from-scratch`); `state`:
    state.db as the caller opened it (a workspace's), if it did; `digests`: the digests
    the caller keeps across builds (a workspace's stat cache), else made here from
    `state`."""
    if state is None:
        state = State(farmer_dir, readonly=readonly)
        for warning in state.warnings:
            print(f"farmer: warning: {warning}", file=sys.stderr)
    if from_scratch:
        return Session.full(spec, graph, state, select_targets(spec, graph, targets), digests)
    if proof is None or not noop.matches(proof, spec.path, spec.digest, targets):
        proof = noop.read(farmer_dir, spec.path, spec.digest, targets) if spec.digest else None
    if proof is None:
        return Session.full(spec, graph, state, select_targets(spec, graph, targets), digests)
    positions = proof.dirty()
    kept = proof.kept_files(positions)  # only a changed file can be missing
    proven = proven_selection(graph, proof, positions, lambda p: p in kept or os.path.exists(p))
    if proven is None:  # the proof does not fit the graph: no proof
        exists = lambda p: proof.kept(p) is not None or os.path.exists(p)  # noqa: E731
        return Session.full(spec, graph, state, select_targets(spec, graph, targets, exists), digests)
    selected, affected, rank = proven
    return Session.from_proof(spec, graph, state, proof, selected, affected, rank,
                              {selected[k] for k in positions}, digests)


def proven_selection(graph: Graph, proof: noop.Proof, positions: set[int],
                     exists: Callable[[str], bool]) -> tuple[list[int], list[int], dict[int, int]] | None:
    """What the proof's build selected (the same Farmfile and targets select the same),
    what of it this build must look at (the computations at `positions`, whose files
    changed, and all that is downstream of them), and each one's position. None when the
    proof does not fit the graph."""
    selected = proof.selected
    if selected is None or len(selected) != proof.count or proof.graph != graph.identify():
        return None  # a graph with other computations at these indices (another farmer)
    comps = graph.computations
    rank = dict(zip(selected, range(len(selected))))
    seeds = [selected[k] for k in sorted(positions)]
    check_inputs(graph, seeds, exists)  # only a changed file can be missing
    seen, stack = set(seeds), list(seeds)
    while stack:
        for c in comps[stack.pop()].consumers:
            if c not in seen and c in rank:
                seen.add(c)
                stack.append(c)
    return selected, sorted(seen, key=rank.__getitem__), rank
