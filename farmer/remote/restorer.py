"""Remote lookups and restores for many computations at once, on a thread of their own.

A build hands over each computation it is about to run, keyed on the build's thread (the key
reads the build's digests; farmer/remote/cache.py `key_of`). The thread takes what is queued in
rounds: every GetActionResult of a round is in flight at once, and the small blobs of all its
hits come in shared BatchReadBlobs batches (larger ones by ByteStream into temporary files).
Each computation gets one reply:
  HIT       its blobs, fetched and verified (restore.py's Fetched), which the build's thread
            writes into place, all or none: many small writes on this thread would each wait
            for the GIL the busy build thread holds;
  MISS      it runs (a warning may say why);
  VARIANTS  a depfile computation's variants: the build's thread picks those whose files are
            as here (`candidates`) and hands it back.
A call that fails switches the remote off (one warning, said on the build's thread) and makes
the rest of the round misses. `cancel` (Ctrl-C) ends the calls in flight: a file half-fetched
is removed, and what is queued becomes a miss without a call.
"""

from __future__ import annotations

import queue
import threading

from farmer.files.queued import take_queued
from farmer.remote import action as actions
from farmer.remote import restore as restoring
from farmer.remote.cache import RemoteCache, RemoteLookup, variants_blob
from farmer.remote.client import BlobCorrupt, BlobMissing, RemoteError
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Computation

HIT, MISS, VARIANTS = "hit", "miss", "variants"


class Request:
    """One computation's lookup as it goes to the thread and back. `candidates`, once the
    variants are known: (Action, variant, discovered) to look up in order."""

    __slots__ = ("comp", "found", "log", "candidates", "reply", "fetched", "variants", "started", "why")

    def __init__(self, comp: Computation, found: RemoteLookup, log: str, started: float) -> None:
        self.comp, self.found, self.log, self.started = comp, found, log, started
        self.candidates: list | None = None
        self.reply = MISS
        self.fetched: restoring.Fetched | None = None  # HIT: its files, to write on the build's thread
        self.variants: list = []  # VARIANTS: as the server lists them
        self.why = ""  # a result found and not used: why (the warning's words)

    def tell(self, say: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """`say`, which also keeps what was said as why this lookup's result was not used."""
        def said(kind: str, text: str) -> None:
            self.why = self.why or text
            say(kind, text)
        return said

    def what(self) -> str:
        """What came of the lookup, for a computation that then ran."""
        if self.why:
            return "unusable: " + self.why.removeprefix("farmer: warning: ").split("; running it")[0]
        if self.found.action is None:
            return "miss (no variant of its discovered inputs matches)" if self.variants else "miss"
        return "miss"


class Restorer:
    """`wake()` tells the build's thread that replies are waiting (any thread may call it)."""

    def __init__(self, remote: RemoteCache, wake: Callable[[], None]) -> None:
        self.remote = remote
        self.wake = wake
        self.replies: queue.SimpleQueue[Request] = queue.SimpleQueue()
        self._todo: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._cancelled = False
        self._thread = threading.Thread(target=self._loop, name="farmer-remote-restore", daemon=True)
        self._thread.start()

    def submit(self, request: Request) -> None:
        self._todo.put(request)

    def cancel(self) -> None:
        """End the calls in flight; what is queued becomes misses without a call."""
        self._cancelled = True
        client = self.remote.connected()
        if client is not None:
            client.cancel_calls(for_good=True)

    def close(self) -> None:
        """Wait for the thread (after `cancel`, the round in flight ends at once)."""
        self._todo.put(None)
        self._thread.join()

    # -- on the thread ----------------------------------------------------------------------------

    def _loop(self) -> None:
        last = False
        while not last:
            batch, last = take_queued(self._todo)
            if batch:
                try:
                    self._round(batch)
                except RemoteError as e:  # the client was closed under the round
                    self._gone(e)
                except Exception as e:  # noqa: BLE001 - never a failed build because of the remote
                    self.remote.went_away(RemoteError("INTERNAL", f"{type(e).__name__}: {e}"))
                for r in batch:
                    self.replies.put(r)
                self.wake()

    def _round(self, batch: list[Request]) -> None:
        for r in batch:
            r.reply = MISS
        client = self.remote.connected()
        if client is None or self._cancelled:
            return
        asks: list[list] = [self._asks(r) for r in batch]
        instance = self.remote.settings.endpoint.instance
        requests = [re.GetActionResultRequest(instance_name=instance, action_digest=d, inline_stdout=False,
                                              inline_stderr=False, digest_function=re.DigestFunction.SHA256)
                    for digests in asks for d in digests]
        answers = iter(client.call_many("GetActionResult", requests, timeout=client.lookup_timeout()))
        results = []
        for digests in asks:
            got = []
            for _ in digests:
                answer = next(answers)
                if isinstance(answer, RemoteError):
                    if answer.code == "RESOURCE_EXHAUSTED":  # busy, not gone: this one runs here
                        self.remote.say("busy", f"farmer: warning: remote {self.remote.settings.endpoint.url} "
                                                f"busy ({answer}); running some computations here")
                    elif answer.code != "NOT_FOUND":
                        return self._gone(answer)
                    answer = None
                got.append(answer)
            results.append(got)
        variants: list[tuple[Request, object]] = []
        hits: list[tuple[Request, list]] = []
        for r, got in zip(batch, results):
            found = r.found
            if r.candidates is None and found.action is None:  # a first-level key: its variants
                blob = variants_blob(got[0])
                if blob is not None:
                    variants.append((r, blob))
                continue
            for k, result in enumerate(got):
                if result is not None:
                    if r.candidates is not None:
                        found.action, _, found.discovered = r.candidates[k]
                    found.result = result
                    break
            if found.result is not None:
                job = self.remote.restore_job(r.comp, found, r.log, r.tell(self.remote.say))
                if job is not None:
                    hits.append((r, job))
        if variants:
            try:
                data, bad = client.read_many(blob for _, blob in variants)
            except RemoteError as e:
                return self._gone(e)
            for r, blob in variants:
                if blob.hash in data:
                    r.reply, r.variants = VARIANTS, actions.decode_variants(data[blob.hash])
        if hits:
            for (r, _), fetched in zip(hits, restoring.fetch_all(client, [job for _, job in hits])):
                if isinstance(fetched, restoring.Fetched):
                    r.reply, r.fetched = HIT, fetched
                elif isinstance(fetched, RemoteError) and not isinstance(fetched, (BlobMissing, BlobCorrupt)):
                    self._gone(fetched)
                else:
                    self.remote.refused(r.comp, fetched, r.tell(self.remote.say))

    def _asks(self, r: Request) -> list:
        """The Action digests to look up for `r`, in order."""
        if r.candidates is not None:
            return [action.digest for action, _, _ in r.candidates]
        if r.found.action is not None:
            return [r.found.action.digest]
        return [actions.variants_action(r.found.key1, self.remote.settings.salt).digest]

    def _gone(self, e: RemoteError) -> None:
        if not self._cancelled:  # a call ended by Ctrl-C says nothing of the server
            self.remote.went_away(e)
