"""`--remote-exec`: eligible computations run on the server's workers, everything else (and
every remote failure) on the local executor (SPEC §5).

The scheduler sees one executor with `-j` + `[remote] jobs` slots. A computation it starts goes
remote when it is eligible and a remote slot is free; otherwise it runs locally, or waits here
for a local slot, so local processes never exceed `-j`. A remote run happens on a thread of a
pool of `[remote] jobs`: upload what the server lacks, Execute, check the result, download the
outputs (verified), and write the log. Whatever goes wrong there (the server, a missing blob, a
non-zero exit, a depfile naming a file that was not sent) sends the computation back to run
locally: the remote never fails a build nor leaves a wrong output.

Eligible: a `cmd` computation, `remote` not false, cacheable, not in the console pool, whose
outputs are under the project root, whose declared inputs are under it (or under the base
directory, farmer/graph/basedir.py: the input root is then the base), whose command does not name the
root's (nor the base's) absolute path (it would not be that path on a worker), and, with a
depfile, built before or a plain compile whose headers a preprocessor scan lists
(farmer/remote/depscan.py): its discovered inputs are sent too; absolute ones outside the base,
/usr/include, are the worker's own.
"""

from __future__ import annotations

import os
import queue
import time
from concurrent.futures import ThreadPoolExecutor

from farmer.files.digests import digest_or_changed
from farmer.record import depfile as depfiles
from farmer.remote import depscan
from farmer.remote import restore as restoring
from farmer.remote.action import in_root, root_path
from farmer.remote.cache import RemoteCache, RemoteLookup
from farmer.remote.client import GONE, BlobCorrupt, BlobMissing, QueueTimeout, RemoteError, explain, missing_in
from farmer.remote.protos.google.rpc import code_pb2
from farmer.remote.shas import Changed
from farmer.run.executors.base import Outcome, Ran
from farmer.run.executors.relay import RelayExecutor

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Computation
    from farmer.run.executors.process import ProcessExecutor
    from farmer.store.state import Trace

DEFAULT_TIMEOUT_S = 3600.0  # a remote run without a task timeout, once a worker took it, waits at most this long


class Fallback(Exception):
    """The remote run did not give a usable result: run it locally (the message says why)."""


class _Plan:
    __slots__ = ("comp", "found", "action", "sent")

    def __init__(self, comp, found: RemoteLookup, action, sent: frozenset[str]) -> None:
        self.comp, self.found, self.action, self.sent = comp, found, action, sent


class RemoteExecutor(RelayExecutor):
    """`describe(comp)` is the computation's action description; `trace_of(id)` its last trace;
    `log_of(comp)` its log's path; `warn(text)` prints a line (on the build's thread); `ran`:
    what the outcome of a remote run says it came from."""

    def __init__(self, local: ProcessExecutor, remote: RemoteCache, local_jobs: int, t0: float,
                 describe: Callable, trace_of: Callable[[str], Trace | None], log_of: Callable,
                 warn: Callable[[str], None], ran: Ran) -> None:
        super().__init__(local, local_jobs, t0)
        self.remote = remote
        self.describe, self.trace_of, self.log_of, self.warn = describe, trace_of, log_of, warn
        self.ran = ran
        self.jobs = remote.settings.jobs
        self.pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="farmer-remote-exec")
        self.inflight: dict[int, object] = {}
        self.results: queue.SimpleQueue = queue.SimpleQueue()
        self.remote_ran: set[int] = set()  # indices that ran remotely (last-build.json's executor)
        self.local_because: dict[int, str] = {}  # why one that runs here does not run remotely
        self.queue_timed_out = False  # an action waited --remote-timeout for a worker: send no more
        self._abandoned = False  # the remote went off: the runs in flight there were cancelled
        self.fallbacks = 0
        self._warned: set[str] = set()

    # -- Executor ---------------------------------------------------------------------------------

    def start(self, comp: Computation) -> None:
        if self._stopping:
            self._start_inner(comp)
            return
        plan = self._plan(comp)
        if isinstance(plan, str):
            self.local_because[comp.index] = plan
            self._start_inner(comp)
            return
        started = time.monotonic()
        future = self.pool.submit(self._run, plan)
        self.inflight[comp.index] = future
        future.add_done_callback(lambda f, c=comp, s=started: self._finished(c, s, f))

    def wait(self, timeout: float | None) -> list[Outcome]:
        if self.remote.off and self.inflight and not self._abandoned:
            self._abandoned = True  # the server went away (a lookup found it): the runs there end now
            self.remote.cancel_in_flight()
        done = super().wait(timeout)
        for outcome in done:  # those that ran here say why (last-build.json, --explain)
            outcome.local_because = self.local_because.pop(outcome.index, None)
        return done

    def running(self) -> int:
        return self.inner.running() + len(self.waiting) + len(self.inflight) + self.results.qsize()

    def stop(self) -> None:
        self._stopping = True
        client = self.remote.connected()
        if client is not None:
            client.cancel_calls(for_good=True)
        now = time.monotonic() - self.t0
        while self.waiting:
            comp = self.waiting.popleft()
            self.results.put((comp, Outcome(comp.index, False, "interrupted", None, now, now), None))
        self.inner.stop()

    def close(self) -> None:
        self.stop()
        self.pool.shutdown(wait=True, cancel_futures=True)
        super().close()

    # -- on the build's thread ----------------------------------------------------------------------

    def _plan(self, comp: Computation) -> _Plan | str:
        """The Action to run `comp` remotely, or why it runs locally (last-build.json's
        `local_because`)."""
        from farmer.record.cache.key import uncacheable

        if comp.world is not None:
            return "world task"
        if comp.kind != "cmd" or not comp.action:
            return f"{comp.kind or 'phony'} task"
        if comp.ninja and comp.ninja.console:
            return "console pool"
        if comp.remote is False:
            return "remote = false"
        why = uncacheable(comp)
        if why is not None:
            return why
        if self.remote.off:
            return f"remote failed: {self.remote.off_because}"
        if self.queue_timed_out:
            return "remote queue timeout"  # no worker took the last ones: none is sent again
        if len(self.inflight) >= self.jobs:
            return "remote slots full"
        # not relocatable: a worker's directory is not this one, nor has it our files
        base = self.remote.settings.base
        here = os.getcwd()
        if here in comp.action:
            return f"absolute path {here} under the root"
        if base is not None and base.names_base(comp.action):
            return f"absolute path {base.path} in the command"
        for p in comp.outputs:
            if not in_root(os.path.normpath(p)):
                return f"output {p} outside the root"
        for p in comp.inputs:
            if root_path(p, base) is None:
                return f"input {p} outside the root"
        discovered: list[str] = []
        if comp.depfile:
            trace = self.trace_of(comp.id)
            if trace is not None:
                discovered = [p for p, _ in trace.discovered]
            else:  # never built here: a compile's headers from the preprocessor (farmer/remote/depscan.py)
                scanned = depscan.scan(comp.action, comp.env, comp.inputs, comp.outputs)
                if scanned is None:
                    return "never built with a depfile yet"  # its inputs are known only once it ran here
                discovered = scanned
            for p in discovered:
                if not p.startswith("/") and root_path(p, base) is None:
                    return f"discovered input {p} outside the root"  # which a worker has not got
            # absolute ones outside the base (/usr/include/...) are the platform's: keyed by digest, not sent
        digests = self.remote.digests
        inputs = [(p, digest_or_changed(digests, p) or "missing") for p in comp.inputs]
        try:
            found = RemoteLookup(self.describe(comp, inputs), [], None)
            found.declared = [self.remote.file_now(p) for p in comp.inputs]
            extra = [self.remote.file_now(p) for p in discovered]
        except Changed as e:
            return f"input {e} changed while it was sent"
        try:
            action = self.remote.action_of(comp, found, extra)
        except ValueError:
            return "two of its paths are one place in the input root"
        return _Plan(comp, found, action, action.root.paths)

    def _collect(self) -> list[Outcome]:
        out = []
        while True:
            try:
                comp, outcome, error = self.results.get_nowait()
            except queue.Empty:
                return out
            self.inflight.pop(comp.index, None)
            if outcome is not None:
                if outcome.ok:
                    self.remote_ran.add(comp.index)
                    outcome.origin = self.ran
                out.append(outcome)
                continue
            self.fallbacks += 1
            if isinstance(error, QueueTimeout):
                self.local_because[comp.index] = "remote queue timeout"
                self.queue_timed_out = True
                self._once("queue", f"farmer: warning: remote execution of {comp.id} was still queued after "
                                    f"{self.remote.settings.endpoint.timeout:g} s ({error}); running it and "
                                    "the rest here")
            elif self.remote.off and isinstance(error, RemoteError) and error.code == "CANCELLED":
                self.local_because[comp.index] = f"remote failed: {self.remote.off_because}"
            elif isinstance(error, RemoteError) and error.code in GONE:
                self.local_because[comp.index] = f"remote failed: {explain(error)}"
                self.remote.fail(error)  # the server is gone: no more remote runs this build
            else:
                self.local_because[comp.index] = f"remote failed: {error}"
                self._once(type(error).__name__, f"farmer: warning: remote execution of {comp.id} failed "
                                                 f"({error}); running it here")
            if self._stopping:
                now = time.monotonic() - self.t0
                out.append(Outcome(comp.index, False, "interrupted", None, now, now))
            else:
                self._start_inner(comp)

    def _once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self.warn(text)

    # -- on a pool thread ---------------------------------------------------------------------------

    def _finished(self, comp: Computation, started: float, future) -> None:
        error = future.exception() if not future.cancelled() else Fallback("cancelled")
        if error is None:
            end = time.monotonic()
            outcome = Outcome(comp.index, True, None, 0, started - self.t0, end - self.t0)
            self.results.put((comp, outcome, None))
        else:
            self.results.put((comp, None, error))
        self._wake()

    def _run(self, plan: _Plan) -> None:
        comp, client = plan.comp, self.remote.connected()
        if client is None or self._stopping:
            raise Fallback("the remote is off")
        timeout = 2 * comp.timeout + 60 if comp.timeout else DEFAULT_TIMEOUT_S
        refresh = self.remote.settings.refresh  # --remote-refresh: run it, whatever the server has cached
        client.upload(plan.action.blobs)
        response = client.execute(plan.action.digest, timeout, skip_cache_lookup=refresh)
        missing = missing_in(response.status) if response.status.code == code_pb2.FAILED_PRECONDITION else []
        if missing:  # the server lost some of what was sent: once more
            client.upload(plan.action.blobs)
            response = client.execute(plan.action.digest, timeout, skip_cache_lookup=refresh)
        if response.status.code != code_pb2.OK:
            raise Fallback(f"status {code_pb2.Code.Name(response.status.code)}: {response.status.message[:200]}")
        result = response.result
        if result.exit_code != 0:
            raise Fallback(f"exit {result.exit_code} on the worker")
        optional = [comp.depfile] if comp.depfile else []
        try:
            files = restoring.files_of(result, list(comp.outputs), optional, what="the worker's result")
        except restoring.Incomplete as e:
            raise Fallback(str(e)) from None
        if comp.depfile:
            self._check_depfile(client, plan, result)
        log = self.log_of(comp)
        try:
            restoring.restore(client, files)
            streams = [d for d in (result.stdout_digest, result.stderr_digest) if d.hash]
            data = client.read(streams)
        except BlobCorrupt as e:
            self.remote.corrupt.add((e.digest.hash, e.digest.size_bytes))  # the local run's copy goes up
            raise Fallback(str(e)) from None
        except BlobMissing as e:
            raise Fallback(str(e)) from None
        with open(log + ".remote-tmp", "wb") as f:
            for d in streams:
                f.write(data[d.hash])
        os.replace(log + ".remote-tmp", log)

    def _check_depfile(self, client, plan: _Plan, result) -> None:
        """Every file the depfile names under the root must have been sent; a result that read
        others (they were not in its input root: it cannot have seen them) is discarded."""
        entry = next((f for f in result.output_files if f.path == plan.comp.depfile), None)
        if entry is None:
            raise Fallback(f"the worker wrote no {plan.comp.depfile}")
        text = client.read([entry.digest])[entry.digest.hash].decode("utf-8", "surrogateescape")
        try:
            listed = depfiles.parse(text)
        except depfiles.DepfileError as e:
            raise Fallback(f"{plan.comp.depfile}: {e}") from None
        outputs = set(plan.comp.outputs)
        base = self.remote.settings.base
        for p in listed:
            p = os.path.normpath(p)
            where = root_path(p, base)
            if where is not None and where not in plan.sent and p not in outputs:
                raise Fallback(f"its depfile names {p}, which was not sent")
