"""Around each run of a real build: prepare it, and record how it ended (ninja's
`Builder::StartEdge` and `FinishCommand`).

`prepare` digests the inputs the run will read, makes the output folders and writes the
rspfile; `record` digests the outputs (a declared output missing fails the run), reads the
depfile, and keeps the trace and the duration sample, written to state.db in batches. A
file a depfile lists that may have changed while the run ran is recorded as changed, as a
declared input is (`_discovered`). Those outside the project root (the system's and the
source tree's headers: 30 for <stdio.h>, 180 for <iostream>) are hashed, or checked when
this build hashed them already, by `hash_discovered`, once the consumers the run released
have started, not between the two (see `_Unhashed`). It knows nothing of the scheduler,
the terminal, the executor or the session: it is handed the build's digests and state, a
world's fingerprint as a callable, and what to tell (`RunListener`, `warn`).

The seams, in the order a run meets them:
  prepare  -> `RunCache.lookup`:  outputs restored from a cache instead of running; the
                                  outcome's origin is the cache's `Restored`;
  record   -> `RunListener`:      outputs written (a world's fingerprint may change), then
                                  each complete trace (the session keeps what the proof needs);
           -> `RunCache.store`:   a successful run's outputs kept (after its trace), and a
                                  restore's when its origin says `keep_locally`;
           -> `failed_outputs`:   a failed run's outputs moved to .farmer/failed/ (SPEC §2);
           -> `RunObserver.after_run`: each outcome, as recorded.
The caches and observers are the engines' that the build turned on (farmer/record/engine.py,
stacked by farmer/build/compose.py), as is every outcome's origin: the recorder knows no
engine by name, and keeps a run's duration under its origin's `Ran.history_prefix`.
"""

from __future__ import annotations

import os
import stat
import time

from farmer.errors import UsageError
from farmer.files import private
from farmer.files.digests import RACY_NS, NotAFile
from farmer.files.stattable import stat_key
from farmer.record.runcache import RunCache
from farmer.run.executors.base import Outcome, Ran, Restored
from farmer.store.state import Sample, Trace, world_setup_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.files.digests import Digests
    from farmer.graph.graph import Computation
    from farmer.record.engine import RunObserver
    from farmer.store.state import State

_FLUSH_EVERY_S = 1.0
FAILED_DIR = os.path.join(".farmer", "failed")  # in the project root, the working directory


class RunListener:
    """What hears of the runs the recorder records (the session: the no-op proof's buffers,
    its worlds' fingerprints). This one hears nothing."""

    __slots__ = ()

    def outputs_written(self, paths: list[str]) -> None:
        """A run that succeeded wrote `paths` (before its trace is complete)."""

    def recorded(self, index: int, trace: Trace) -> None:
        """Computation `index` ran (or was restored) and `trace`, complete, is on its way to
        state.db."""

    def world_set_up(self, world: str, read: list[tuple[str, str]]) -> None:
        """World `world` was set up in this build, and its set-up read `read` (paths with
        the digests it read): its fingerprint holds them from now on."""


class Recorder:
    """`comps`: the graph's computations; `root`: the project's; `digests` and `state`: the
    build's; `world_fingerprint(name)`: a world's fingerprint now; `listener`: told of each
    run recorded; `warn(text)`: prints a warning line; `cache`: the output caches;
    `observers`: the engines' (farmer/record/engine.py), told of each run's outcome; `logs`:
    the logs' folder, where a python step's driver leaves what the step read;
    `world_inputs`: each world's declared inputs (its ancestors' too), which its fingerprint
    holds already: not among what its set-up read."""

    def __init__(self, comps: list[Computation], root: str, digests: Digests, state: State,
                 world_fingerprint: Callable[[str | None], str | None], listener: RunListener,
                 warn: Callable[[str], None], cache: RunCache | None = None,
                 observers: list[RunObserver] | None = None, logs: str | None = None,
                 world_inputs: dict[str, list[str]] | None = None) -> None:
        self.comps = comps
        self.world_inputs = world_inputs or {}
        self.logs = logs if logs is not None else os.path.join(root, ".farmer", "logs")
        # World set-ups whose reads were judged (`_python_reads`): (world, began_ns) -> files
        # with the digests the world read; and the undeclared writes warned of: (task, path).
        self._setups: dict[tuple[str, int], tuple[list[tuple[str, str]], bool]] = {}
        self._warned_writes: set[tuple[str, str]] = set()
        # A world task's chain of set-ups' reads, for its cache entry (`_keep`): its trace
        # leaves them to its world's fingerprint.
        self._chain_reads: dict[int, list[tuple[str, str]]] = {}
        self.observers = observers or []
        self.digests = digests
        self.state = state
        self.world_fingerprint = world_fingerprint
        self.listener = listener
        self.warn = warn
        self.cache = cache or RunCache()
        self._inputs_before: dict[int, list[tuple[str, str]]] = {}  # input digests at start
        self.failed_kept: dict[int, list[str]] = {}  # a failed run's outputs: where they went
        self._pending_traces: list[Trace] = []
        self._pending_samples: list[Sample] = []
        self._last_flush = time.monotonic()
        # Output folders made (or found) in this build: one mkdir and stat each, not one a run.
        self._folders: set[str] = set()
        # Each run's start: the wall clock, and how many stats the digests had put then
        # (`Digests.taken_before`), for what its depfile lists (`_discovered`).
        self._started: dict[int, tuple[int, int]] = {}
        # The file system's clock before the first run with a depfile started (`_fs_now`),
        # and the device it tells of: (st_dev, ctime_ns).
        self._fs_start: tuple[int, int] | None = None
        self._output_stats: dict[int, list[os.stat_result]] = {}  # `outputs_there`'s, for `record`
        self._unhashed: list[_Unhashed] = []  # traces whose depfile's files are not all hashed yet
        self._warm = False  # `idle` has readied what comes after the first commands
        # Hashing a run's headers later is for builds that keep no outputs: a cache stores a
        # run's outputs with its trace, as soon as the run is recorded.
        self._later = type(self.cache) is RunCache
        self._root = root if root.endswith(os.sep) else root + os.sep
        # The build.ninja runs recorded in this build, for `rewritten_outputs`: (index, trace).
        self._ninja_kept: list[tuple[int, Trace]] = []
        # ninja's `-d keepdepfile` / `-d keeprsp` (`farmer ninja`): what is not deleted once read
        self.keep: frozenset[str] = frozenset()

    def prepare(self, comp: Computation, now_s: float) -> Outcome | None:
        """Ready `comp` to run. An Outcome when it is done without running (restored from
        the cache at `now_s`, seconds into the build); None: start it."""
        digests = self.digests
        before = []
        for path in comp.inputs:  # the content the run reads, recorded in its trace
            if digests.moved(path):  # changed since it was digested earlier in this build
                digests.unstable.add(path)
                digests.forget(path)
            before.append((path, digest_text(digests, path)))
        self._inputs_before[comp.index] = before
        discovers = comp.depfile or comp.kind == "python" or (comp.ninja is not None and comp.ninja.msvc_prefix)
        if discovers and self._fs_start is None:
            self._fs_start = _fs_now(os.path.join(self._root, ".farmer", "lock"))
        if comp.kind == "python":  # what an older run left is not what this one will read
            _unlink(self._reads_file(comp))
        hit = self.cache.lookup(comp, before, self.world_fingerprint(comp.world))
        # After the lookup, which digests the files a cached run's depfile lists: a restore
        # starts from what it checked, as a command does from what it reads.
        self._started[comp.index] = (time.time_ns(), digests.puts)
        if hit is not None:
            done = Outcome(comp.index, True, None, 0, now_s, now_s)
            done.origin = hit
            return done
        for out in comp.outputs:
            parent = os.path.dirname(out)
            if parent and parent not in self._folders:
                os.makedirs(parent, exist_ok=True)
                self._folders.add(parent)
        if comp.depfile and os.path.dirname(comp.depfile):
            os.makedirs(os.path.dirname(comp.depfile), exist_ok=True)
        edge = comp.ninja
        if edge is not None and edge.rspfile:  # ninja: written before the command, removed once it succeeded
            if os.path.dirname(edge.rspfile):
                os.makedirs(os.path.dirname(edge.rspfile), exist_ok=True)
            with open(edge.rspfile, "w", errors="surrogateescape") as f:
                f.write(edge.rspfile_content or "")
        return None

    def outputs_there(self, comp: Computation) -> bool:
        """Whether `record` will find each declared output a file (a stat each), asked
        before it runs: the scheduler starts what is ready in between only when it will."""
        edge = comp.ninja
        if edge is not None and edge.optional_outputs:
            return True
        stats = []
        for path in comp.outputs:
            try:
                st = os.stat(path)
            except OSError:
                return False
            if not stat.S_ISREG(st.st_mode):
                return False
            stats.append(st)
        self._output_stats[comp.index] = stats  # `record` digests them with these stats
        return True

    def record(self, comp: Computation, outcome: Outcome) -> Outcome:
        """Record how the run ended; a declared output missing (or not a file) turns
        success into failure."""
        digests = self.digests
        outputs: list[tuple[str, str]] = []
        edge = comp.ninja
        stats = self._output_stats.pop(comp.index, None)
        # `deps = msvc`: the header lines leave the output, whatever the outcome, as ninja's
        includes = self._msvc_includes(comp, edge.msvc_prefix) if edge is not None and edge.msvc_prefix else None
        if outcome.ok:
            for k, path in enumerate(comp.outputs):
                digests.forget(path)
                try:
                    d = digests.digest(path, stats[k] if stats else None)
                except NotAFile:
                    d, outcome.reason = None, f"declared output {path} is not a file"
                if d is None and edge is not None and edge.optional_outputs:  # ninja: no check; it runs again next time
                    d, outcome.reason = "not-a-file" if outcome.reason else "missing", None
                if d is None:
                    outcome.ok = False
                    outcome.reason = outcome.reason or f"declared output {path} missing"
                    break
                outputs.append((path, d))
        started = self._started.pop(comp.index, None)
        if not outcome.ok:
            self._inputs_before.pop(comp.index, None)
            self.failed_outputs(comp)
            if comp.kind == "python":  # what a failed run read is no record of anything
                _unlink(self._reads_file(comp))
        else:
            if started is None:  # not prepared: nothing digested vouches for what it read
                started = (time.time_ns(), 0)
            # (a run an engine saw read what it does not declare is kept out of the caches too)
            unsure = self._changed_inputs(comp) or outcome.uncacheable is not None
            trace, unhashed, unsure_discovered = self._trace(comp, outcome, outputs, started, includes)
            unsure = unsure or unsure_discovered
            self.listener.outputs_written(comp.outputs)
            if unhashed:
                self._unhashed.append(_Unhashed(comp, trace, outcome, unsure, unhashed, started))
            else:
                self._keep(comp, trace, outcome, unsure)
        for observer in self.observers:
            observer.after_run(comp, outcome)
        return outcome

    def _keep(self, comp: Computation, trace: Trace, outcome: Outcome, unsure: bool) -> None:
        """`trace` is complete: on its way to state.db (and the output cache)."""
        self.listener.recorded(comp.index, trace)
        self._pending_traces.append(trace)
        if comp.ninja is not None:
            self._ninja_kept.append((comp.index, trace))
        origin = outcome.origin
        chain = self._chain_reads.pop(comp.index, None)
        if (not isinstance(origin, Restored) or origin.keep_locally) and not unsure:
            if chain:  # an entry names every file its run rested on, its world's set-up's too
                own = {p for p, _ in chain}
                trace = Trace(trace.id, trace.action, trace.world, trace.inputs,
                              chain + [d for d in trace.discovered if d[0] not in own], trace.outputs)
            self.cache.store(comp, trace, outcome)

    def idle(self) -> None:
        """The scheduler waits for the commands it started: hash what `record` left for
        later, and, the first time, get ready what the first run's end and the build's end
        would otherwise wait for; the batch due every second (written here, once the
        consumers of what ran have started, not between a run's end and theirs)."""
        self.hash_discovered()
        if time.monotonic() - self._last_flush > _FLUSH_EVERY_S:
            self.flush()
        if self._warm:
            return
        self._warm = True
        import resource  # noqa: F401  os.wait4 imports it at its first reap (its struct_rusage)

        if any(self.comps[i].depfile for i in self._started):
            from farmer.record import depfile  # noqa: F401
        self.state.prepare()  # the first batch's database, without state.db

    def hash_discovered(self) -> None:
        """Hash what the depfiles of the runs recorded since listed and `record` left for
        later (`_Unhashed`), and keep their traces. Called once the consumers those runs
        released have started, and before anything is written to state.db: until then a
        trace is nowhere, so an interrupt or a crash in between leaves the run unrecorded
        (it runs again), never recorded with files it did not check."""
        while self._unhashed:
            late = self._unhashed[0]
            comp, discovered = late.comp, late.trace.discovered
            for k, path in late.paths:
                digest = self._discovered(comp, path, late.started)
                late.unsure = late.unsure or digest == CHANGED
                discovered[k] = (path, digest)
            self._unhashed.pop(0)
            self._keep(comp, late.trace, late.outcome, late.unsure)

    def rewritten_outputs(self) -> None:
        """At the end of a build: a build.ninja output that changed after its edge was
        recorded is recorded as it stands now. Another edge of this build wrote it without
        declaring it (CMake's ExternalProject: the build step declares what the install step
        copies over it); ninja sees it newer than the edge's inputs, so up to date, and so
        does the next build here, rather than rerunning the edge and all after it once."""
        digests = self.digests
        for index, trace in self._ninja_kept:
            outputs = trace.outputs
            for k, (path, digest) in enumerate(outputs):
                if digest in ("missing", "not-a-file") or not digests.moved(path):
                    continue
                digests.forget(path)
                try:
                    now = digests.digest(path)
                except NotAFile:
                    now = None
                if now is not None and now != digest:
                    if outputs is trace.outputs:
                        outputs = list(outputs)
                    outputs[k] = (path, now)
            if outputs is not trace.outputs:
                trace = Trace(trace.id, trace.action, trace.world, trace.inputs, trace.discovered, outputs)
                self.listener.recorded(index, trace)
                self._pending_traces.append(trace)
        self._ninja_kept = []

    def failed_outputs(self, comp: Computation) -> None:
        """A failed computation leaves no output in its place (SPEC §2): each is moved to
        .farmer/failed/PATH, replacing what an earlier failure left there, so that what a
        failing test wrote can still be read. Where they went: `failed_kept`."""
        digests = self.digests
        kept = []
        for path in comp.outputs:
            digests.forget(path)
            where = _move_failed(path)
            if where is not None:
                kept.append(where)
        self.failed_kept[comp.index] = kept

    def record_world_setups(self, seconds: dict[str, float | None]) -> None:
        """Keep the set-up times of the worlds set up in this build (None: kept warm, not
        measured), which the next prediction starts from (Session.predict)."""
        now = time.time()
        for name, s in seconds.items():
            if s is not None:
                sid = world_setup_id(name)
                self._pending_samples.append(Sample(sid, sid, now, s, None, None, None))

    def flush(self) -> None:
        """Write the traces and samples recorded so far, and the stat data hashed."""
        self.hash_discovered()
        self.state.save(self._pending_traces, [], self._pending_samples, self.digests.changed)
        self._pending_traces, self._pending_samples = [], []
        self.digests.changed = {}
        self._last_flush = time.monotonic()

    def _changed_inputs(self, comp: Computation) -> bool:
        """Whether an input changed while the command ran: its stat data changed (Bazel's
        ctime guard: whatever its content is now, edited and put back, the command may have
        read something else), or, for a file too fresh for its stat to vouch for it, its
        content. Its trace then records that input as CHANGED, which matches no content:
        the computation runs again next build (`input PATH changed`), and is not cached."""
        before = self._inputs_before.get(comp.index, ())
        unsure = False
        for k, (path, digest) in enumerate(before):
            if self._moved(path, digest):
                before[k] = (path, self._changed(comp, path, True))
                unsure = True
        return unsure

    def _moved(self, path: str, digest: str) -> bool:
        """Whether `path` changed since its digest (`digest`) was taken in this build: its
        stat data did (one stat), or, for a file too fresh then for its stat to vouch for
        it, its content."""
        digests = self.digests
        since = digests.since(path)
        if since is None:  # racy: only its content can tell
            digests.forget(path)
            return digest_text(digests, path, digests.since_stat) != digest
        return since

    def _changed(self, comp: Computation, path: str, while_running: bool) -> str:
        """`path` cannot vouch for what `comp`'s run read: CHANGED, the digest its trace then
        records, which matches no content, so the run runs again next build (`input PATH
        changed`), and is not cached. Said with a warning when it changed while the run
        ran (`while_running`), not just before it started."""
        digests = self.digests
        digests.forget(path)
        digests.unstable.add(path)  # no no-op proof for this build
        if while_running:
            self.warn(f"farmer: warning: input {path} changed while {comp.id} ran; "
                      "it will run again next build")
        return CHANGED

    def _discovered(self, comp: Computation, path: str, started: tuple[int, int]) -> str:
        """The digest `comp`'s trace records for a file its depfile lists, once the run has
        ended (`started`: its start, as `_started` keeps it); CHANGED when the file cannot
        vouch for what the run read (`_changed`). Unlike a declared input, it may not have
        been digested before the run:
        - digested before the run started (while planning, a generated header when its
          command ended, another run's input): as a declared input, its stat since tells;
        - else by its ctime, which nothing can set back: a file changed since shortly before
          the run started (RACY_NS, the time stamps' tick), during the run or after it, may
          not be what the run read, unless its own file system's clock says it changed
          before the build's runs began (`_before_runs`). A header saved while its compile
          ran, even put back since, is so compiled again next build. The build's own
          outputs are older than the runs that read them, and digested when their commands
          ended: the first case."""
        digests = self.digests
        started_ns, mark = started
        before = digests.taken_before(path, mark)
        if before is not None:
            return self._changed(comp, path, True) if self._moved(path, before) else before
        try:
            st: os.stat_result | None = os.stat(path)
        except OSError:
            st = None
        seen = digests.seen(path)  # digested since the run started, by another run's trace
        if seen is not None and (st is None or stat_key(st) != seen):
            return self._changed(comp, path, True)  # and changed since: while this one ran
        digest = digest_text(digests, path, st)  # the stat taken here, not a second one
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_ctime_ns >= started_ns - RACY_NS \
                and not self._before_runs(st):
            return self._changed(comp, path, st.st_ctime_ns >= started_ns)
        return digest

    def _add_discovered(self, comp: Computation, path: str, started: tuple[int, int],
                        discovered: list[tuple[str, str]], unhashed: list[tuple[int, str]]) -> bool:
        """Append `path`, a file the run read that it does not declare, to its trace's
        `discovered`; whether it is recorded as CHANGED."""
        # Outside the root: a header of the system or of the source tree, an installed
        # module, which no command of the build writes. Judged later (`_discovered`), if
        # digested already too: a stat each, which the run's consumers need not wait for.
        if self._later and (path.startswith("../") or path.startswith("/") and not path.startswith(self._root)):
            unhashed.append((len(discovered), path))
            discovered.append((path, CHANGED))
            return False
        if path in comp.outputs:  # written by the run itself: recorded as it left it
            discovered.append((path, digest_text(self.digests, path)))
            return False
        digest = self._discovered(comp, path, started)
        discovered.append((path, digest))
        return digest == CHANGED

    def _reads_file(self, comp: Computation) -> str:
        from farmer.run.executors.process import reads_path

        return reads_path(self.logs, comp.id)

    def _python_reads(self, comp: Computation, started: tuple[int, int],
                      discovered: list[tuple[str, str]], unhashed: list[tuple[int, str]]) -> bool:
        """What a python step read, as its driver recorded it (run/worlds/reads.py), into its
        trace's `discovered`, less what it declares. What each set-up of its world chain
        read is the world's: judged once per set-up, against the set-up's start (a file
        changed since may not be what the world holds), told to the listener (the world's
        fingerprint holds it) and kept in state.db for the next build's; the step's cache
        entry names it too (`_keep`). Said: each file inside the root it wrote without
        declaring it. Whether a file is recorded as CHANGED (the run is then not cached,
        and runs again next build)."""
        from farmer.run.worlds import reads

        got = reads.load(self._reads_file(comp))
        if got is None:  # no record (`os._exit`, a line run as plain python3): nothing known
            return False
        read, wrote, setups = got
        unsure = False
        chain: list[tuple[str, str]] = []
        for world, began_ns, paths in setups:
            known = self._setups.get((world, began_ns))
            if known is None:
                if paths is None:  # written once by the world process (reads.ship)
                    paths = reads.load_setup(os.path.join(self.logs, "worlds", world + ".reads"), world, began_ns)
                    if paths is None:
                        continue  # set up again since: what this set-up read is not known
                declared = set(self.world_inputs.get(world, ()))
                judged = [(p, self._discovered(comp, p, (began_ns, 0))) for p in paths if p not in declared]
                known = self._setups[(world, began_ns)] = (judged, any(d == CHANGED for _, d in judged))
                self.listener.world_set_up(world, judged)
                self._pending_traces.append(Trace(world_setup_id(world), "", None, [], judged, []))
            chain += known[0]
            unsure = unsure or known[1]
        if chain and not self._later:  # (`_later`: a build without an output cache)
            self._chain_reads[comp.index] = chain
        seen = set(comp.inputs)
        for p in read:
            if p not in seen and p not in comp.outputs:
                seen.add(p)
                unsure = self._add_discovered(comp, p, started, discovered, unhashed) or unsure
        for p in wrote:
            if p not in comp.outputs and (comp.task, p) not in self._warned_writes:
                self._warned_writes.add((comp.task, p))
                self.warn(f"farmer: warning: task {comp.task} ({comp.id}) wrote {p}, which it does "
                          "not declare as an output; declare it in `outputs`")
        return unsure

    def _before_runs(self, st: os.stat_result) -> bool:
        """Whether a file's ctime says it changed before this build's runs started, by its
        own file system's clock (`_fs_start`: the same device's), not the wall clock's,
        which time stamps lag: what a script wrote just before `farmer build`, a checkout,
        a generator, is what the runs read, not a change to run again for."""
        start = self._fs_start
        return start is not None and st.st_dev == start[0] and st.st_ctime_ns < start[1]

    def _msvc_includes(self, comp: Computation, prefix: str) -> list[str]:
        """The headers a `deps = msvc` command named in its output (`/showIncludes`), its log
        rewritten without those lines (ninja's CLParser)."""
        from farmer.record.depfile import filter_msvc_output
        from farmer.run.executors.process import log_path

        path = log_path(self.logs, comp.id)
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
        except OSError:
            return []  # it printed nothing
        kept, includes = filter_msvc_output(text, prefix)
        if kept != text:
            with open(path, "wb") as f:
                f.write(kept.encode("utf-8", "surrogateescape"))
        return includes

    def _trace(self, comp: Computation, outcome: Outcome, outputs: list[tuple[str, str]],
               started: tuple[int, int], includes: list[str] | None = None
               ) -> tuple[Trace, list[tuple[int, str]], bool]:
        """The run's trace, where in its `discovered` a file is left to `hash_discovered`
        (its digest there a placeholder until then), and whether a file its depfile lists
        was recorded as CHANGED (`_discovered`). `includes`: a `deps = msvc` run's headers."""
        digests = self.digests
        unsure = False
        inputs = self._inputs_before.pop(comp.index, None) or [(p, digest_text(digests, p)) for p in comp.inputs]
        discovered: list[tuple[str, str]] = []
        unhashed: list[tuple[int, str]] = []
        edge = comp.ninja
        if comp.depfile:
            from farmer.record import depfile  # only a computation with a depfile needs its parser

            text = _depfile_text(comp.depfile)
            if text is None:
                self.warn(f"farmer: warning: {comp.depfile}: not a regular file; no inputs discovered")
                text = ""
            try:
                declared = set(comp.inputs)
                for p in depfile.parse(text):
                    p = os.path.normpath(p)
                    if p not in declared:
                        declared.add(p)
                        unsure = self._add_discovered(comp, p, started, discovered, unhashed) or unsure
            except depfile.DepfileError as e:
                self.warn(f"farmer: warning: {comp.depfile}: {e}; no inputs discovered")
            if edge is not None and edge.remove_depfile and "keepdepfile" not in self.keep:
                _unlink(comp.depfile)  # ninja's `deps = gcc`: what it lists is kept, not the file
        if includes:
            declared = set(comp.inputs)
            for p in includes:
                if p not in declared:
                    declared.add(p)
                    unsure = self._add_discovered(comp, p, started, discovered, unhashed) or unsure
        if comp.kind == "python":
            unsure = self._python_reads(comp, started, discovered, unhashed) or unsure
        if edge is not None and edge.rspfile and "keeprsp" not in self.keep:
            _unlink(edge.rspfile)
        trace = Trace(comp.id, comp.fingerprint, self.world_fingerprint(comp.world), inputs,
                      discovered, outputs)
        origin = outcome.origin
        if isinstance(origin, Ran):  # a restore says nothing of how long the run takes
            # a run elsewhere is kept apart, under ids of its own (`Ran.history_prefix`), so the
            # local estimates `plan --simulate` uses stay the local ones
            prefix = origin.history_prefix
            self._pending_samples.append(Sample(
                prefix + comp.id, prefix + comp.task, time.time(), outcome.end_s - outcome.start_s,
                outcome.cpu_s, outcome.max_rss_kb, digests.total_size(comp.inputs)))
        return trace, unhashed, unsure


class _Unhashed:
    """A run's trace whose depfile named files left to hash once its consumers have
    started: hashing the compiler's headers between a compile's end and its link's start
    delayed the link, where ninja keeps their mtimes. What it hashes then is judged as
    `Recorder._discovered` judges every file a depfile lists: by its ctime against the
    run's start (`started`), so a file that changed since shortly before the run started,
    during the run or after it (the user saved a header while the build ran), is recorded
    as CHANGED, and the run runs again next build. Only files outside the project root are
    left (the system's headers, the source tree's, which no command of the build writes),
    and only in a build without an output cache, which stores a run's outputs with its trace
    as soon as the run is recorded."""

    __slots__ = ("comp", "trace", "outcome", "unsure", "paths", "started")

    def __init__(self, comp: Computation, trace: Trace, outcome: Outcome, unsure: bool,
                 paths: list[tuple[int, str]], started: tuple[int, int]) -> None:
        self.comp, self.trace, self.outcome, self.unsure = comp, trace, outcome, unsure
        self.paths, self.started = paths, started


CHANGED = "changed-while-running"  # a trace's digest for an input that changed during the run


def digest_text(digests: Digests, path: str, st: os.stat_result | None = None) -> str:
    """A file's digest as a trace records it: "missing" or "not-a-file" when it is neither.
    `st`: its stat, just taken."""
    try:
        return digests.digest(path, st) or "missing"
    except NotAFile:
        return "not-a-file"


def _fs_now(path: str) -> tuple[int, int] | None:
    """The clock of the file system that holds `path` (a file of ours: the project's lock),
    as it stamps a change made now: (its device, the ctime it gives `path` now); None when
    it cannot be touched."""
    try:
        os.utime(path)
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ctime_ns


def _depfile_text(path: str) -> str | None:
    """A depfile's text ("" when there is none), or None when it is not a regular file (a
    FIFO would block farmer for ever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read().decode("utf-8", "surrogateescape")


def _move_failed(path: str) -> str | None:
    """Move a failed run's output to FAILED_DIR/PATH; where it went, or None (nothing there,
    a folder, or it could only be removed)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return None  # a folder is not a file farmer declared: left alone
    except OSError:
        return None
    kept = os.path.join(FAILED_DIR, path)
    try:
        private.make_dir(os.path.dirname(kept))
        if os.path.isdir(kept) and not os.path.islink(kept):  # what an older graph made there
            import shutil  # rare: not on every build's way (shutil imports re)

            shutil.rmtree(kept)
        os.replace(path, kept)
        return kept
    except (OSError, UsageError):  # another file system (a mount in the root), a planted link
        _unlink(path)
        _unlink(path)
        return None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
