"""Remote lookups alongside the build: the executor seam around the one that runs things.

Serial lookups (GetActionResult, then a read of the hit's blobs, for one computation at a time)
make a second checkout of many small steps no faster than running them: each costs a few round
trips to the server. Here a computation the scheduler starts, once keyed (farmer/remote/
runcache.py), goes to farmer/remote/restorer.py's thread, which looks many up at once and reads
the blobs of many hits in shared batches, while the scheduler keeps starting others and local
processes run. A hit comes back as a `cached` Outcome, its files in place; a miss runs on the
inner executor (processes, worlds, --remote-exec), which never runs more than its own slots.

The scheduler sees the inner executor's slots plus LOOKUPS more: that many computations can be
looked up while the inner ones run. Plain Python: grpc comes with the restorer, on the first
computation that has a remote key.
"""

from __future__ import annotations

import time

from farmer.run.executors.base import Executor, Outcome
from farmer.run.executors.relay import RelayExecutor

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation
    from farmer.remote.shared import SharedRemote

LOOKUPS = 16  # computations looked up at once, beyond the slots that run them (more made BuildGrid slower here)


class LookupExecutor(RelayExecutor):
    """`inner` runs what is not restored, at most `inner_jobs` at a time; the remote's cache
    (farmer/remote/runcache.py) keys each computation as it is prepared, into `shared`, for
    `start`."""

    looks_up = True

    def __init__(self, inner: Executor, inner_jobs: int, shared: SharedRemote, t0: float) -> None:
        super().__init__(inner, inner_jobs, t0)
        self.shared = shared
        self.looking: dict[int, Computation] = {}  # at the restorer now
        self.done: list[Outcome] = []  # decided here, not yet reported
        self.restorer = None  # farmer.remote.restorer.Restorer, made with the first remote key

    # -- Executor ---------------------------------------------------------------------------------

    def start(self, comp: Computation) -> None:
        found = self.shared.take_key(comp.index)
        remote = self.shared.connection
        if found is None or self._stopping or remote is None or remote.off:
            if found is not None:
                self.shared.miss(comp.index, found)  # it runs here: uploaded after
            self._start_inner(comp)
            return
        if self.restorer is None:
            from farmer.remote.restorer import Restorer

            self.restorer = Restorer(remote, self._wake)
        from farmer.remote.restorer import Request

        self.looking[comp.index] = comp
        self.restorer.submit(Request(comp, found, self.shared.log_of(comp), time.monotonic()))

    def wait(self, timeout: float | None) -> list[Outcome]:
        done = super().wait(timeout)
        lookups = self.shared.lookups
        for outcome in done:  # what its lookup found (last-build.json's remote_lookup)
            if outcome.remote_lookup is None:
                outcome.remote_lookup = lookups.pop(outcome.index, None)
        return done

    def running(self) -> int:
        return self.inner.running() + len(self.looking) + len(self.waiting) + len(self.done)

    def stop(self) -> None:
        self._stopping = True
        if self.restorer is not None:
            self.restorer.cancel()
        now = time.monotonic() - self.t0
        while self.waiting:
            comp = self.waiting.popleft()
            self.done.append(Outcome(comp.index, False, "interrupted", None, now, now))
        self.inner.stop()

    def close(self) -> None:
        if self.running():  # the build ended early (an exception): nothing may go on after it
            self.stop()
        if self.restorer is not None:
            self.restorer.close()
            self._stopping = True
            self._collect()  # what the build no longer waits for: staged files removed
        super().close()

    # -- on the build's thread ----------------------------------------------------------------------

    def _collect(self) -> list[Outcome]:
        out, self.done = self.done, []
        if self.restorer is None:
            return out
        from farmer.remote.restorer import HIT, VARIANTS

        remote = self.shared.connection
        replies = self.restorer.replies
        while not replies.empty():
            r = replies.get()
            comp = r.comp
            if r.reply == VARIANTS and not self._stopping and not remote.off:
                r.candidates = remote.candidates(comp, r.found, r.variants)
                if r.candidates:
                    self.restorer.submit(r)  # the Actions of the variants that match, looked up
                    continue
            self.looking.pop(comp.index, None)
            now = time.monotonic() - self.t0
            if r.reply == HIT:
                if self._stopping:
                    r.fetched.discard()
                else:
                    try:
                        done = r.fetched.write()
                    except OSError as e:
                        done = e
                    contents = remote.restored(comp, r.found, r.log, done, r.tell(remote.say))
                    if contents is not None:
                        remote.learn(comp, contents)
                        hit = Outcome(comp.index, True, None, 0, r.started - self.t0, now)
                        hit.origin = self.shared.restored
                        hit.remote_lookup = (r.found.shown_digest(remote.settings.salt), "hit")
                        out.append(hit)
                        continue
            self.shared.looked_up(comp.index, r.found, r.what())
            r.found.result = None
            self.shared.miss(comp.index, r.found)  # it runs here: uploaded after
            if self._stopping:
                out.append(Outcome(comp.index, False, "interrupted", None, now, now))
            else:
                self._start_inner(comp)
        remote.drain()
        return out
