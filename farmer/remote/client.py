"""A REAPI v2 client: capabilities, CAS (batch and ByteStream), action cache, execution.

Every call has a deadline; transient failures (UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED, INTERNAL)
are retried a bounded number of times with jittered backoff, honouring a server's RetryInfo. Every
failure surfaces as a RemoteError, which callers turn into "run locally". Downloaded blobs are
verified against their SHA-256 digests. close() cancels whatever is in flight (Ctrl-C).
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator

from farmer.remote.config import quiet_grpc

quiet_grpc()  # before grpc's import: its logging starts with it

import grpc  # noqa: E402

from farmer.remote import rpc  # noqa: E402
from farmer.remote.config import Endpoint, parse_url  # noqa: E402
from farmer.remote.credentials import CredentialError, CredentialHelper, read_file  # noqa: E402
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re  # noqa: E402
from farmer.remote.protos.google.bytestream import bytestream_pb2 as bs  # noqa: E402
from farmer.remote.protos.google.longrunning import operations_pb2 as ops  # noqa: E402
from farmer.remote.protos.google.rpc import code_pb2, error_details_pb2, status_pb2  # noqa: E402

Digest = re.Digest
_EXECUTION = frozenset({"Execute", "WaitExecution", "CancelOperation", "GetCapabilitiesExec"})
SHA256 = re.DigestFunction.SHA256
TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED,
                       grpc.StatusCode.ABORTED, grpc.StatusCode.INTERNAL})
RETRIES = 2                 # attempts after the first
BACKOFF_S = (0.1, 1.0)      # first delay, cap
CONNECT_TIMEOUT_S = 2.0     # the first call: a server that hangs costs this much, once
# A lookup's deadline (and a batch read's, beyond its bytes' time): a server that freezes mid-build
# costs this much once (the remote is then off for the build), not the whole --remote-timeout.
LOOKUP_TIMEOUT_S = 2.0
BATCH_LIMIT = 4 * 1024 * 1024 - 64 * 1024   # gRPC's default 4 MiB message, minus headroom
BATCH_COUNT = 1000
CHUNK = 1024 * 1024
STREAM_RATE = 8 * 1024 * 1024  # bytes/s assumed for a ByteStream deadline beyond the base timeout
MAX_MESSAGE = 64 * 1024 * 1024
# Calls of one call_many in flight at once. A server takes so many at a time (BuildGrid: its
# thread-pool-size, 20 here, its bots' long polls included) and answers RESOURCE_EXHAUSTED beyond:
# the lookups' 16 and the uploads' 2 stay within it.
MANY_AT_ONCE = 16
UPLOADS_AT_ONCE = 2


class RemoteError(Exception):
    """A remote call that failed; `code` is the gRPC status name (or MISSING, CORRUPT, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.method = ""  # the call that failed, when a call did


# the codes that say the server is not there (or not answering): no more calls this build
GONE = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "UNAUTHENTICATED", "PERMISSION_DENIED", "UNIMPLEMENTED"})


class QueueTimeout(RemoteError):
    """A remote execution that no worker took within the progress timeout."""

    def __init__(self, waited_s: float) -> None:
        super().__init__("QUEUE_TIMEOUT", f"no worker took it within {waited_s:g} s")


class BlobMissing(RemoteError):
    def __init__(self, digests: Iterable[Digest]) -> None:
        self.digests = list(digests)
        super().__init__("NOT_FOUND", "blob " + ", ".join(f"{d.hash[:12]}/{d.size_bytes}" for d in self.digests[:3])
                         + (" ..." if len(self.digests) > 3 else "") + " missing")


class BlobCorrupt(RemoteError):
    def __init__(self, digest: Digest) -> None:
        # the whole hash: the server's operator finds the damaged copy by it (docs/remote.md)
        super().__init__("CORRUPT", f"blob {digest.hash}/{digest.size_bytes} does not match its digest")
        self.digest = digest


def digest_of(data: bytes) -> Digest:
    return Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def digest_of_message(message) -> Digest:
    return digest_of(message.SerializeToString(deterministic=True))


def digest_of_file(path: str) -> Digest:
    with open(path, "rb") as f:
        h = hashlib.file_digest(f, "sha256")
        return Digest(hash=h.hexdigest(), size_bytes=f.tell())


class Blob:
    """Something to upload: bytes in memory, or a file read when (and if) the server lacks it."""

    __slots__ = ("digest", "data", "path")

    def __init__(self, digest: Digest, data: bytes | None = None, path: str | None = None) -> None:
        self.digest, self.data, self.path = digest, data, path

    @classmethod
    def of(cls, data: bytes) -> Blob:
        return cls(digest_of(data), data=data)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        with open(self.path, "rb") as f:
            data = f.read()
        if len(data) != self.digest.size_bytes:
            raise RemoteError("CHANGED", f"{self.path} changed while it was uploaded")
        return data


class Client:
    """One channel to one REAPI server and instance. Thread-safe: build threads share it."""

    __slots__ = ("endpoint", "_channel", "_exec_channel", "_methods", "_caps", "_exec_caps", "_lock", "_calls",
                 "_closed", "_refusing", "_metadata", "helper")

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        options = [("grpc.max_receive_message_length", MAX_MESSAGE),
                   ("grpc.max_send_message_length", MAX_MESSAGE),
                   ("grpc.enable_retries", 0),  # ours are bounded and logged; gRPC's are neither
                   ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 2000)]
        self._channel = _channel(endpoint.url, endpoint, options)
        # Execute, WaitExecution and CancelOperation go to the executor, when it is another server
        self._exec_channel = _channel(endpoint.executor, endpoint, options) if endpoint.executor else None
        self._methods: dict[str, Callable] = {}
        self._caps: re.ServerCapabilities | None = None
        self._exec_caps: re.ServerCapabilities | None = None
        self._lock = threading.Lock()
        self._calls: set = set()
        self._closed = False
        self._refusing = False  # cancel_calls(for_good=True): a tracked call that starts after is cancelled
        self._metadata = tuple(endpoint.headers)
        self.helper = CredentialHelper(endpoint.helper, endpoint.url) if endpoint.helper else None

    def _meta(self, fresh: bool = False) -> tuple[tuple[str, str], ...]:
        """The headers of a call: the static ones and the credential helper's (asked again with
        `fresh`, after UNAUTHENTICATED); a helper that fails is an authentication error."""
        if self.helper is None:
            return self._metadata
        try:
            return self._metadata + self.helper.headers(fresh)
        except CredentialError as e:
            raise RemoteError("UNAUTHENTICATED", str(e)) from None

    # -- plumbing ------------------------------------------------------------------------------

    def _method(self, name: str) -> Callable:
        m = self._methods.get(name)
        if m is None:
            channel = self._exec_channel if self._exec_channel is not None and name in _EXECUTION else self._channel
            m = self._methods[name] = rpc.bind(channel, name)
        return m

    def call(self, name: str, request, timeout: float | None = None, retry: bool = True,
             cancellable: bool = False):
        """A unary call (any in rpc.METHODS) with a deadline and bounded retries on transient
        codes. Blocking, unless `cancellable` (a long poll that cancel_calls() must end): a
        future costs a thread per call, and close() cancels a blocking one anyway, by closing
        the channel."""
        timeout = timeout or self.endpoint.timeout
        attempt = 0
        fresh = False  # the helper's headers asked for again (once, after UNAUTHENTICATED)
        while True:
            self._check_open()
            metadata = self._meta(fresh)
            try:
                if not cancellable:
                    return self._method(name)(request, timeout=timeout, metadata=metadata)
                future = self._method(name).future(request, timeout=timeout, metadata=metadata)
                self._track(future)
                try:
                    return future.result()
                finally:
                    self._untrack(future)
            except grpc.FutureCancelledError:
                raise RemoteError("CANCELLED", f"{name} cancelled") from None
            except grpc.RpcError as e:
                if self._closed:
                    raise RemoteError("CANCELLED", f"{name} cancelled") from None
                if e.code() == grpc.StatusCode.UNAUTHENTICATED and self.helper is not None and not fresh:
                    fresh = True  # expired before the helper said: new headers, once
                    continue
                delay = self._retry_delay(e, attempt) if retry else None
                if delay is None:
                    raise _error(name, e) from None
            except ValueError:  # the channel was closed under the call
                raise RemoteError("CANCELLED", f"{name} cancelled") from None
            attempt += 1
            time.sleep(delay)

    def call_many(self, name: str, requests: list, timeout: float | None = None, cancellable: bool = True,
                  at_once: int = MANY_AT_ONCE) -> list:
        """Unary calls of one method, `at_once` of them in flight at a time (each a future that
        cancel_calls() ends, if `cancellable`; close() ends them all): each one's response, or the
        RemoteError it ended with. Those that fail with a transient code are sent again together,
        after one backoff, at most RETRIES times, so a server that died costs one round of
        backoffs, not one per request."""
        timeout = timeout or self.endpoint.timeout
        out: list = [None] * len(requests)
        todo = list(range(len(requests)))
        attempt = 0
        fresh = False
        while True:
            self._check_open()
            method = self._method(name)
            metadata = self._meta(fresh)
            futures = []
            settled = 0  # futures[:settled] have ended
            again, last = [], None
            try:
                for k in todo:
                    if len(futures) - settled >= at_once:  # a window: the oldest ends before the next goes
                        last = self._settle(name, futures[settled], out, again) or last
                        settled += 1
                    future = method.future(requests[k], timeout=timeout, metadata=metadata)
                    if cancellable:
                        self._track(future)
                    futures.append((k, future))
            except ValueError:  # the channel was closed under the calls
                for _, future in futures[settled:]:
                    future.cancel()
            for item in futures[settled:]:
                last = self._settle(name, item, out, again) or last
            for k in todo[len(futures):]:
                out[k] = RemoteError("CANCELLED", f"{name} cancelled")
            refused = [k for k in todo if isinstance(out[k], RemoteError) and out[k].code == "UNAUTHENTICATED"]
            if refused and self.helper is not None and not fresh:
                fresh = True  # the helper's headers expired early: asked again, and those sent again
                todo = sorted(again + refused)
                continue
            delay = self._retry_delay(last, attempt) if last is not None else None
            if delay is None:
                for k in again:
                    out[k] = _error(name, last)
                return out
            attempt += 1
            time.sleep(delay)
            todo = again

    def _settle(self, name: str, item, out: list, again: list):
        """One call of call_many ended: its answer into `out`, or its index into `again` (then the
        transient error is returned)."""
        k, future = item
        try:
            out[k] = future.result()
        except grpc.FutureCancelledError:
            out[k] = RemoteError("CANCELLED", f"{name} cancelled")
        except grpc.RpcError as e:
            if self._closed:
                out[k] = RemoteError("CANCELLED", f"{name} cancelled")
            elif e.code() in TRANSIENT:
                again.append(k)
                return e
            else:
                out[k] = _error(name, e)
        finally:
            self._untrack(future)
        return None

    def _retry_delay(self, e: grpc.RpcError, attempt: int) -> float | None:
        if self._closed or e.code() not in TRANSIENT or attempt >= RETRIES:
            return None
        first, cap = BACKOFF_S
        delay = min(cap, first * 2 ** attempt) * (0.5 + random.random() / 2)
        hinted = _retry_info(e)
        return min(cap, hinted) if hinted is not None else delay

    def _track(self, call) -> None:
        with self._lock:
            self._calls.add(call)
            refused = self._refusing
        if refused:  # under the lock that cancel_calls takes: no call slips between its list and this
            call.cancel()

    def _untrack(self, call) -> None:
        with self._lock:
            self._calls.discard(call)

    def _check_open(self) -> None:
        if self._closed:
            raise RemoteError("CANCELLED", "the remote client was closed")

    def cancel_calls(self, for_good: bool = False) -> None:
        """Cancel the streaming and cancellable calls in flight; the client stays usable. With
        `for_good` (Ctrl-C), those that start later are cancelled as they start: a call_many keeps
        `at_once` in flight, and the next of its calls goes out as soon as one is cancelled."""
        with self._lock:
            self._refusing = self._refusing or for_good
            calls = list(self._calls)
        for c in calls:
            c.cancel()

    def close(self) -> None:
        """Cancel every call in flight and close the channel (Ctrl-C, end of build)."""
        with self._lock:
            self._closed = True
            calls = list(self._calls)
        for c in calls:
            c.cancel()
        self._channel.close()
        if self._exec_channel is not None:
            self._exec_channel.close()

    # -- capabilities --------------------------------------------------------------------------

    def capabilities(self) -> re.ServerCapabilities:
        """The server's capabilities (asked once). The first call of a build: a short deadline, no
        retries, so a dead or hung server costs at most CONNECT_TIMEOUT_S."""
        if self._caps is None:
            caps = self.call("GetCapabilities", re.GetCapabilitiesRequest(instance_name=self.endpoint.instance),
                              timeout=min(self.endpoint.timeout, CONNECT_TIMEOUT_S), retry=False)
            functions = caps.cache_capabilities.digest_functions
            if functions and SHA256 not in functions:
                raise RemoteError("UNSUPPORTED", "the server does not accept SHA-256 digests")
            self._caps = caps
        return self._caps

    def can_execute(self) -> bool:
        """Whether the executor (this server, or --remote-executor's) runs actions."""
        if self._exec_channel is None:
            return self.capabilities().execution_capabilities.exec_enabled
        if self._exec_caps is None:
            self._exec_caps = self.call("GetCapabilitiesExec", re.GetCapabilitiesRequest(
                instance_name=self.endpoint.instance), timeout=min(self.endpoint.timeout, CONNECT_TIMEOUT_S),
                retry=False)
        return self._exec_caps.execution_capabilities.exec_enabled

    def can_update_cache(self) -> bool:
        caps = self.capabilities().cache_capabilities
        return not caps.HasField("action_cache_update_capabilities") or caps.action_cache_update_capabilities.update_enabled

    def _batch_limit(self) -> int:
        server = self.capabilities().cache_capabilities.max_batch_total_size_bytes
        return min(BATCH_LIMIT, server - 64 * 1024) if server > 128 * 1024 else BATCH_LIMIT

    def _stream_timeout(self, size: int) -> float:
        return self.endpoint.timeout + size / STREAM_RATE

    def lookup_timeout(self, size: int = 0) -> float:
        """The deadline of a lookup, or of a read of `size` bytes on the critical path."""
        return min(self.endpoint.timeout, LOOKUP_TIMEOUT_S) + size / STREAM_RATE

    # -- CAS -----------------------------------------------------------------------------------

    def find_missing(self, digests: Iterable[Digest]) -> list[Digest]:
        """The digests the CAS lacks (the empty blob is always there)."""
        unique = {(d.hash, d.size_bytes): d for d in digests if d.size_bytes}
        missing: list[Digest] = []
        items = list(unique.values())
        for i in range(0, len(items), BATCH_COUNT * 10):
            resp = self.call("FindMissingBlobs", re.FindMissingBlobsRequest(
                instance_name=self.endpoint.instance, blob_digests=items[i:i + BATCH_COUNT * 10],
                digest_function=SHA256))
            missing.extend(resp.missing_blob_digests)
        return missing

    def upload(self, blobs: Iterable[Blob], again: frozenset[tuple[str, int]] = frozenset()) -> int:
        """Upload the blobs the CAS lacks: small ones batched, large ones by ByteStream; and
        those of `again` ((hash, size): found corrupt there) whatever FindMissingBlobs says.
        Returns the bytes sent."""
        by_key = {(b.digest.hash, b.digest.size_bytes): b for b in blobs}
        missing = [by_key[(d.hash, d.size_bytes)] for d in self.find_missing(b.digest for b in by_key.values())]
        named = {(b.digest.hash, b.digest.size_bytes) for b in missing}
        missing += [b for k, b in by_key.items() if k in again and k not in named]
        limit = self._batch_limit()
        batch: list[re.BatchUpdateBlobsRequest.Request] = []
        size = sent = 0
        for blob in sorted(missing, key=lambda b: b.digest.size_bytes):
            n = blob.digest.size_bytes
            if n > limit:
                self._write_stream(blob)
            else:
                if batch and (size + n > limit or len(batch) >= BATCH_COUNT):
                    self._batch_update(batch)
                    batch, size = [], 0
                batch.append(re.BatchUpdateBlobsRequest.Request(digest=blob.digest, data=blob.read()))
                size += n + 100
            sent += n
        if batch:
            self._batch_update(batch)
        return sent

    def _batch_update(self, requests: list) -> None:
        resp = self.call("BatchUpdateBlobs", re.BatchUpdateBlobsRequest(
            instance_name=self.endpoint.instance, requests=requests, digest_function=SHA256))
        for r in resp.responses:
            if r.status.code != code_pb2.OK:
                raise RemoteError(_code_name(r.status.code), f"upload of {r.digest.hash[:12]}: {r.status.message}")

    def _write_stream(self, blob: Blob) -> None:
        d = blob.digest
        resource = self._resource(f"uploads/{uuid.uuid4()}/blobs/{d.hash}/{d.size_bytes}")

        def chunks() -> Iterator[bs.WriteRequest]:
            if blob.data is not None:
                data = blob.data
                for off in range(0, len(data), CHUNK):
                    yield bs.WriteRequest(resource_name=resource if off == 0 else "", write_offset=off,
                                          data=data[off:off + CHUNK], finish_write=off + CHUNK >= len(data))
                return
            with open(blob.path, "rb") as f:
                off = 0
                while True:
                    data = f.read(CHUNK)
                    last = off + len(data) >= d.size_bytes
                    if not data and not last:
                        raise RemoteError("CHANGED", f"{blob.path} shrank while it was uploaded")
                    yield bs.WriteRequest(resource_name=resource if off == 0 else "", write_offset=off,
                                          data=data, finish_write=last)
                    off += len(data)
                    if last:
                        return

        attempt = 0
        while True:
            self._check_open()
            future = self._method("Write").future(chunks(), timeout=self._stream_timeout(d.size_bytes),
                                                  metadata=self._meta())
            self._track(future)
            try:
                resp = future.result()
                break
            except grpc.FutureCancelledError:
                raise RemoteError("CANCELLED", "Write cancelled") from None
            except grpc.RpcError as e:
                delay = self._retry_delay(e, attempt)
                if delay is None:
                    raise _error("Write", e) from None
            finally:
                self._untrack(future)
            attempt += 1
            time.sleep(delay)
        if resp.committed_size not in (d.size_bytes, -1):
            raise RemoteError("DATA_LOSS", f"Write of {d.hash[:12]} committed {resp.committed_size} of {d.size_bytes} bytes")

    def _resource(self, tail: str) -> str:
        return f"{self.endpoint.instance}/{tail}" if self.endpoint.instance else tail

    def read(self, digests: Iterable[Digest]) -> dict[str, bytes]:
        """The blobs' contents by hash, each verified; BlobMissing or BlobCorrupt otherwise.
        Blobs above the batch limit come by ByteStream."""
        out: dict[str, bytes] = {}
        limit = self._batch_limit()
        batch: list[Digest] = []
        size = 0
        for d in {(d.hash, d.size_bytes): d for d in digests}.values():
            if d.size_bytes == 0:
                out[d.hash] = b""
                _verify(d, b"")
            elif d.size_bytes > limit:
                out[d.hash] = b"".join(self.read_stream(d))
            else:
                if batch and (size + d.size_bytes > limit or len(batch) >= BATCH_COUNT):
                    out.update(self._batch_read(batch))
                    batch, size = [], 0
                batch.append(d)
                size += d.size_bytes + 100
        if batch:
            out.update(self._batch_read(batch))
        return out

    def read_many(self, digests: Iterable[Digest]) -> tuple[dict[str, bytes], dict[str, RemoteError]]:
        """Blobs up to the batch limit, their batches all in flight at once: the contents of each
        by hash, verified, and for each of the others what is wrong with it (BlobMissing,
        BlobCorrupt, or the status the server gave it). RemoteError when a call fails."""
        found: dict[str, bytes] = {}
        bad: dict[str, RemoteError] = {}
        limit = self._batch_limit()
        batches: list[list[Digest]] = []
        size = 0
        for d in {(d.hash, d.size_bytes): d for d in digests}.values():
            if d.size_bytes == 0:
                found[d.hash] = b""
                continue
            if d.size_bytes > limit:
                raise ValueError(f"blob {d.hash[:12]} is {d.size_bytes} bytes: above the batch limit")
            if not batches or size + d.size_bytes > limit or len(batches[-1]) >= BATCH_COUNT:
                batches.append([])
                size = 0
            batches[-1].append(d)
            size += d.size_bytes + 100
        requests = [re.BatchReadBlobsRequest(instance_name=self.endpoint.instance, digests=batch,
                                             digest_function=SHA256) for batch in batches]
        timeout = self.lookup_timeout(max((sum(d.size_bytes for d in b) for b in batches), default=0))
        for batch, resp in zip(batches, self.call_many("BatchReadBlobs", requests, timeout=timeout)):
            if isinstance(resp, RemoteError):
                raise resp
            for r in resp.responses:
                if r.status.code == code_pb2.NOT_FOUND:
                    bad[r.digest.hash] = BlobMissing([r.digest])
                elif r.status.code != code_pb2.OK:
                    bad[r.digest.hash] = RemoteError(_code_name(r.status.code),
                                                     f"read of {r.digest.hash[:12]}: {r.status.message}")
                elif len(r.data) != r.digest.size_bytes or hashlib.sha256(r.data).hexdigest() != r.digest.hash:
                    bad[r.digest.hash] = BlobCorrupt(r.digest)
                else:
                    found[r.digest.hash] = r.data
            for d in batch:
                if d.hash not in found and d.hash not in bad:
                    bad[d.hash] = BlobMissing([d])  # the server did not answer for it
        return found, bad

    def _batch_read(self, digests: list[Digest]) -> dict[str, bytes]:
        resp = self.call("BatchReadBlobs", re.BatchReadBlobsRequest(
            instance_name=self.endpoint.instance, digests=digests, digest_function=SHA256),
            timeout=self.lookup_timeout(sum(d.size_bytes for d in digests)))
        out, missing = {}, []
        for r in resp.responses:
            if r.status.code == code_pb2.NOT_FOUND:
                missing.append(r.digest)
            elif r.status.code != code_pb2.OK:
                raise RemoteError(_code_name(r.status.code), f"read of {r.digest.hash[:12]}: {r.status.message}")
            else:
                _verify(r.digest, r.data)
                out[r.digest.hash] = r.data
        missing.extend(d for d in digests if d.hash not in out and d not in missing)
        if missing:
            raise BlobMissing(missing)
        return out

    def read_stream(self, d: Digest) -> Iterator[bytes]:
        """A blob's contents in chunks by ByteStream Read; verified when the last chunk is out
        (so a caller writing to a temporary file renames it only after the loop ends)."""
        self._check_open()
        call = self._method("Read")(bs.ReadRequest(resource_name=self._resource(f"blobs/{d.hash}/{d.size_bytes}")),
                                    timeout=self._stream_timeout(d.size_bytes), metadata=self._meta())
        self._track(call)
        h, n = hashlib.sha256(), 0
        try:
            for chunk in call:
                h.update(chunk.data)
                n += len(chunk.data)
                yield chunk.data
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                raise BlobMissing([d]) from None
            raise _error("Read", e) from None
        finally:
            self._untrack(call)
        if n != d.size_bytes or h.hexdigest() != d.hash:
            raise BlobCorrupt(d)

    # -- action cache --------------------------------------------------------------------------

    def get_action_result(self, action: Digest) -> re.ActionResult | None:
        """The cached result of `action`, or None on a miss."""
        try:
            return self.call("GetActionResult", re.GetActionResultRequest(
                instance_name=self.endpoint.instance, action_digest=action, inline_stdout=False,
                inline_stderr=False, digest_function=SHA256), timeout=self.lookup_timeout())
        except RemoteError as e:
            if e.code == "NOT_FOUND":
                return None
            raise

    def update_action_result(self, action: Digest, result: re.ActionResult) -> None:
        self.call("UpdateActionResult", re.UpdateActionResultRequest(
            instance_name=self.endpoint.instance, action_digest=action, action_result=result,
            digest_function=SHA256))

    def update_action_results(self, entries: list[tuple[Digest, re.ActionResult]]) -> None:
        """Several entries, all in flight at once; the first failure raised, once all ended."""
        requests = [re.UpdateActionResultRequest(instance_name=self.endpoint.instance, action_digest=action,
                                                 action_result=result, digest_function=SHA256)
                    for action, result in entries]
        # not ended by cancel_calls (Ctrl-C, the end of the lookups): uploads end with close()
        for answer in self.call_many("UpdateActionResult", requests, cancellable=False, at_once=UPLOADS_AT_ONCE):
            if isinstance(answer, RemoteError):
                raise answer

    # -- execution -----------------------------------------------------------------------------

    def execute(self, action: Digest, timeout: float, skip_cache_lookup: bool = False) -> re.ExecuteResponse:
        """Run `action` on the server's workers and wait for its ExecuteResponse (at most `timeout`
        seconds). A stream that breaks is re-attached with WaitExecution. The server must show
        progress: an action still queued after the endpoint's timeout (no worker took it) raises
        QueueTimeout (the operation is cancelled), and a stream that says nothing for that long,
        not even the operation's state that every (re-)attach answers first, DEADLINE_EXCEEDED."""
        request = re.ExecuteRequest(instance_name=self.endpoint.instance, action_digest=action,
                                    skip_cache_lookup=skip_cache_lookup, digest_function=SHA256)
        return self._follow(request, "", timeout)

    def wait_execution(self, name: str, timeout: float) -> re.ExecuteResponse:
        """Re-attach to the operation `name` (from an Execute stream) and wait for its response."""
        return self._follow(None, name, timeout)

    def _follow(self, request: re.ExecuteRequest | None, name: str, timeout: float) -> re.ExecuteResponse:
        deadline = time.monotonic() + timeout
        progress_s = self.endpoint.timeout
        queued_since: float | None = None  # when the operation was first seen waiting for a worker
        attempt = 0
        while True:
            self._check_open()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RemoteError("DEADLINE_EXCEEDED", f"execution took longer than {timeout:.0f} s")
            # each call lasts at most `progress_s`: its first answer (the state) proves the server
            # alive, and a queued action is given up on, not waited for until `timeout`
            window = min(left, progress_s)
            if name:
                call = self._method("WaitExecution")(re.WaitExecutionRequest(name=name), timeout=window,
                                                     metadata=self._meta())
            else:
                call = self._method("Execute")(request, timeout=window, metadata=self._meta())
            self._track(call)
            heard = False
            try:
                for op in call:
                    heard = True
                    name = op.name or name
                    if op.done:
                        return _execute_response(op)
                    if _stage(op) in (re.ExecutionStage.QUEUED, re.ExecutionStage.CACHE_CHECK,
                                      re.ExecutionStage.UNKNOWN):
                        queued_since = queued_since or time.monotonic()
                    else:
                        queued_since = None
                error = None  # the stream ended without a final operation: re-attach
            except grpc.RpcError as e:
                error = e
            finally:
                self._untrack(call)
            if error is not None:
                if self._closed:
                    raise RemoteError("CANCELLED", "Execute cancelled")
                if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and heard and window < left:
                    if queued_since is not None and time.monotonic() - queued_since >= progress_s:
                        self._cancel_operation(name)
                        raise QueueTimeout(progress_s)
                    continue  # alive and working: re-attach, which answers with the state again
                if name and request is not None and error.code() == grpc.StatusCode.NOT_FOUND:
                    name = ""  # the server forgot the operation: start again
                elif error.code() not in TRANSIENT:
                    raise _error("WaitExecution" if name else "Execute", error)
            attempt += 1
            if attempt > RETRIES + 1:
                raise RemoteError("UNAVAILABLE", "the Execute stream kept breaking")
            time.sleep(min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** attempt))

    def _cancel_operation(self, name: str) -> None:
        """Ask the server to drop an operation farmer no longer waits for (best effort: a server
        may run it anyway, and its result is then cached like any other)."""
        if not name:
            return
        try:
            self.call("CancelOperation", ops.CancelOperationRequest(name=name),
                      timeout=min(self.endpoint.timeout, CONNECT_TIMEOUT_S), retry=False)
        except RemoteError:
            pass


def _stage(op) -> int:
    md = re.ExecuteOperationMetadata()
    return md.stage if op.metadata.Unpack(md) else re.ExecutionStage.UNKNOWN


def _channel(url: str, endpoint: Endpoint, options: list):
    """A channel to `url`, with the endpoint's TLS files when it is grpcs://."""
    target, secure = parse_url(url)
    if not secure:
        return grpc.insecure_channel(target, options)
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=read_file(endpoint.ca),
                                             private_key=read_file(endpoint.key),
                                             certificate_chain=read_file(endpoint.cert))
    except OSError as e:
        raise RemoteError("UNAVAILABLE", f"cannot read a TLS file: {e.filename}: {e.strerror}") from None
    return grpc.secure_channel(target, creds, options)


def _execute_response(op) -> re.ExecuteResponse:
    if op.HasField("error"):
        raise RemoteError(_code_name(op.error.code), op.error.message or "execution failed")
    resp = re.ExecuteResponse()
    if not op.response.Unpack(resp):
        raise RemoteError("INTERNAL", "the final operation holds no ExecuteResponse")
    return resp


def missing_in(status: status_pb2.Status) -> list[Digest]:
    """The blobs a FAILED_PRECONDITION status names as MISSING (blobs/{hash}/{size})."""
    out = []
    for detail in status.details:
        pf = error_details_pb2.PreconditionFailure()
        if detail.Unpack(pf):
            for v in pf.violations:
                parts = v.subject.split("/")
                if v.type == "MISSING" and len(parts) >= 3 and parts[-3] == "blobs":
                    out.append(Digest(hash=parts[-2], size_bytes=int(parts[-1])))
    return out


def _verify(d: Digest, data: bytes) -> None:
    if len(data) != d.size_bytes or hashlib.sha256(data).hexdigest() != d.hash:
        raise BlobCorrupt(d)


def _code_name(code: int) -> str:
    try:
        return code_pb2.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def _error(name: str, e: grpc.RpcError) -> RemoteError:
    details = (e.details() or "").splitlines()
    error = RemoteError(e.code().name, f"{name}: {_cut(details[0]) if details else 'no details'}")
    error.method = name
    return error


def _cut(text: str, limit: int = 300) -> str:
    """A server's message, at most about `limit` characters, cut between words."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def explain(e: RemoteError) -> str:
    """What a failed call says about the server, in words a user acts on: a bad or expired
    credential and a refusal are named as such, a method the server lacks too; the rest is
    the server being unavailable."""
    if e.code == "UNAUTHENTICATED":
        return f"authentication error ({e}; check the remote's token or credential helper)"
    if e.code == "PERMISSION_DENIED":
        return f"permission error ({e})"
    text = str(e)
    if e.code == "UNAVAILABLE" and ("handshake" in text.lower() or "CERTIFICATE_VERIFY" in text):
        return f"TLS error ({e}; check --remote-ca, --remote-cert and --remote-key)"
    if e.code == "UNIMPLEMENTED":
        return f"server does not support {e.method or 'a call farmer makes'} ({e})"
    return f"unavailable ({e})"


def _retry_info(e: grpc.RpcError) -> float | None:
    """The delay a server asks for in its RetryInfo detail, if any."""
    for key, value in (e.trailing_metadata() or ()):
        if key == "grpc-status-details-bin":
            st = status_pb2.Status.FromString(value)
            for detail in st.details:
                info = error_details_pb2.RetryInfo()
                if detail.Unpack(info):
                    return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return None


def wait_ready(endpoint: Endpoint, within_s: float) -> re.ServerCapabilities:
    """Poll GetCapabilities until the server answers (service start-up); RemoteError after `within_s`."""
    until = time.monotonic() + within_s
    while True:
        client = Client(endpoint)
        try:
            return client.capabilities()
        except RemoteError:
            if time.monotonic() > until:
                raise
            time.sleep(0.1)
        finally:
            client.close()
