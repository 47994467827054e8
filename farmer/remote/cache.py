"""The remote cache as one build uses it: a lookup before a computation runs, a restore from
the CAS on a hit, an upload after a local run (SPEC §5).

The key is the local cache's action description (farmer/record/cache/key.py) as a REAPI Action
(farmer/remote/action.py). Uploads run on a thread of their own, off the critical path, outputs
before the action-cache entry, so no other build sees a result whose blobs are not all there.
Every remote problem is one warning and a local run: a dead server switches the remote off for
the rest of the build (about a millisecond to find out; a hung one costs one short deadline), a
missing or corrupt blob is a miss.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from farmer.files.digests import NotAFile, digest_or_changed
from farmer.files.queued import take_queued
from farmer.remote import action as actions
from farmer.remote import restore as restoring
from farmer.remote.action import FileDigest, RemoteAction
from farmer.remote.client import GONE, Blob, BlobCorrupt, BlobMissing, Client, Digest, RemoteError, explain
from farmer.remote.config import RemoteSettings
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from farmer.remote.shas import Changed, Shas

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.files.digests import Digests
    from farmer.graph.graph import Computation

# the description's parts that are in the Command itself; the rest go into FARMER_KEY
_IN_COMMAND = frozenset({"action", "env", "outputs", "depfile", "inputs", "inherited"})
UPLOAD_WAIT_S = 60.0  # at the end of a build, for uploads still queued
_UPLOAD_BATCH = 64  # runs uploaded together, at most


class RemoteLookup:
    """A computation's remote key as it is about to run, and the result found for it."""

    __slots__ = ("description", "declared", "key1", "action", "result", "discovered")

    def __init__(self, description, declared: list[FileDigest], key1: str | None) -> None:
        self.description = description
        self.declared = declared  # declared inputs, SHA-256
        self.key1 = key1  # the first-level key (depfile computations)
        self.action: RemoteAction | None = None  # the Action found (or, without a depfile, looked up)
        self.result: re.ActionResult | None = None
        self.discovered: list[tuple[str, str]] = []  # the variant found: (path, farmer digest)

    def shown_digest(self, salt: str) -> str:
        """The Action digest looked up, HASH/SIZE (with a depfile and no variant found: that of
        its variants list)."""
        d = self.action.digest if self.action is not None else actions.variants_action(self.key1 or "", salt).digest
        return f"{d.hash}/{d.size_bytes}"


def variants_blob(result: re.ActionResult | None) -> Digest | None:
    """The blob that lists a first-level key's variants, from its entry's result."""
    if result is None or len(result.output_files) != 1:
        return None
    return result.output_files[0].digest


def _link_target(path: str) -> str:
    """The target of the output link `path`, when another checkout can make the same link:
    relative and inside the project (as the local cache keeps links); Changed otherwise
    (that result is not uploaded)."""
    try:
        target = os.readlink(path)
    except OSError:
        raise Changed(path) from None
    if not restoring.link_stays_inside(path, target):
        raise Changed(path)
    return target


class _Upload:
    __slots__ = ("comp", "found", "discovered", "outputs", "log", "duration_s")

    def __init__(self, comp, found: RemoteLookup, discovered, outputs, log: str, duration_s: float) -> None:
        self.comp, self.found, self.discovered = comp, found, discovered
        self.outputs, self.log, self.duration_s = outputs, log, duration_s


class RemoteCache:
    """`digests` are the build's; `recorded_sha(digest)` reads state.db's SHA-256 side table;
    `warn(text)` prints a line (from the build's thread only)."""

    def __init__(self, settings: RemoteSettings, digests: Digests,
                 recorded_sha: Callable[[str], tuple[str, int] | None], warn: Callable[[str], None]) -> None:
        self.settings = settings
        self.digests = digests
        self.shas = Shas(recorded_sha)
        self._warn = warn
        self._client: Client | None = None
        self._off = False
        self.off_because = ""  # why the remote is off: what its warning said
        # (hash, size) of blobs a download found corrupt: the local run's good copy is uploaded
        # again, past FindMissingBlobs, which would say the server has it (any thread adds)
        self.corrupt: set[tuple[str, int]] = set()
        self._upload_off = not settings.upload
        self._warned: set[str] = set()
        self._messages: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._jobs: queue.SimpleQueue[_Upload | None] = queue.SimpleQueue()
        self._uploader: threading.Thread | None = None
        self.hits = self.misses = self.uploaded = 0

    # -- the connection ------------------------------------------------------------------------

    def client(self) -> Client | None:
        """The client, connected and checked; None (after one warning) when the remote is off."""
        if self._off:
            return None
        if self._client is None:
            try:
                self._client = Client(self.settings.endpoint)
            except RemoteError as e:  # a TLS file that cannot be read now
                self._fail(e)
                return None
            try:
                self._client.capabilities()
                if not self._upload_off and not self._client.can_update_cache():
                    self._upload_off = True  # the server takes no results from clients
            except RemoteError as e:
                self._fail(e)
                return None
        return self._client

    def _fail(self, e: RemoteError) -> None:
        """The remote is down or broken: off for the rest of the build, said once."""
        self._off = True
        self.off_because = self.off_because or explain(e)
        self._once("off", f"farmer: warning: remote {self.settings.endpoint.url}: {explain(e)}; "
                          "building without it")

    # -- looking up and restoring ----------------------------------------------------------------

    def lookup(self, comp: Computation, description) -> RemoteLookup | None:
        """The remote key of `comp` (its action description, farmer/record/cache/key.py) and the result
        cached for it (`.result` None: a miss); None when the remote cannot be used. One
        computation at a time, on the calling thread (a build's lookups go through
        farmer/remote/restorer.py, many at once)."""
        self.drain()
        found = self.key_of(comp, description)
        if found is None:
            return None
        client = self._client
        try:
            if found.action is not None:
                found.result = client.get_action_result(found.action.digest)
            else:
                for action, _, discovered in self.candidates(comp, found, self._variants(client, found.key1)):
                    result = client.get_action_result(action.digest)
                    if result is not None:
                        found.action, found.result, found.discovered = action, result, discovered
                        break
        except RemoteError as e:
            self._fail(e)
            return None
        if found.result is None:
            self.misses += 1
        return found

    def key_of(self, comp: Computation, description) -> RemoteLookup | None:
        """`comp`'s remote key, on the build's thread (it reads the build's digests): the Action
        to look up or, with a depfile, the first-level key whose variants say which; None when
        the remote cannot be used or an input is not the file farmer digested."""
        client = self.client()
        if client is None:
            return None
        try:
            declared = [self.file_now(path) for path in comp.inputs]
        except Changed:
            return None
        # (a python step's discovered inputs are what it read: run/worlds/reads.py)
        key1 = actions.key1_of(description.canonical()) if comp.depfile or comp.kind == "python" else None
        found = RemoteLookup(description, declared, key1)
        if key1 is None:
            found.action = self.action_of(comp, found, [])
        return found

    def candidates(self, comp: Computation, found: RemoteLookup,
                   variants: list[list[FileDigest]]) -> list[tuple[RemoteAction, list[FileDigest], list[tuple[str, str]]]]:
        """The Actions to look up for the variants (discovered inputs) whose files are as they
        are here, in the order of `variants`, each with its variant and the variant's paths with
        farmer's digests; on the build's thread."""
        out = []
        for variant in variants:
            try:
                now = [self.file_now(f.path) for f in variant]
            except Changed:
                continue
            if now == variant:
                discovered = [(f.path, digest_or_changed(self.digests, f.path) or "missing") for f in variant]
                out.append((self.action_of(comp, found, variant), variant, discovered))
        return out

    def _variants(self, client: Client, key1: str) -> list[list[FileDigest]]:
        result = client.get_action_result(actions.variants_action(key1, self.settings.salt).digest)
        d = variants_blob(result)
        if d is None:
            return []
        try:
            return actions.decode_variants(client.read([d])[d.hash])
        except (BlobMissing, BlobCorrupt):
            return []

    def _content(self, path: str) -> str:
        """The digest of `path`'s bytes now (a trace's digest may combine more); Changed if none."""
        try:
            if self.digests.digest(path) is None:
                raise Changed(path)
        except NotAFile:
            raise Changed(path) from None
        content = self.digests.content(path)
        if content is None:
            raise Changed(path)
        return content

    def _file(self, path: str, content: str) -> FileDigest:
        sha, executable = self.shas.of(path, content)
        return FileDigest(path, sha, executable)

    def file_now(self, path: str) -> FileDigest:
        """`path` as the remote sees it now (SHA-256, executable bit); Changed if it is gone."""
        return self._file(path, self._content(path))

    @property
    def off(self) -> bool:
        return self._off

    def cancel_in_flight(self) -> None:
        """End the calls in flight (the remote runs' streams): the remote was found gone."""
        if self._client is not None:
            self._client.cancel_calls()

    def connected(self) -> Client | None:
        """The client once connected (None before the first call, or when the remote is off)."""
        return None if self._off else self._client

    def fail(self, e: RemoteError) -> None:
        """The remote is gone (said by a caller): off for the rest of the build, one warning."""
        self._fail(e)

    def action_of(self, comp, found: RemoteLookup, discovered: list[FileDigest]) -> RemoteAction:
        d = found.description
        s = self.settings
        return actions.build_action(
            d.kind, d.action, d.env, d.inherited, list(comp.outputs), comp.depfile,
            [(label, values) for label, values in d.parts() if label not in _IN_COMMAND],
            [*found.declared, *discovered], {}, path=s.path, salt=s.salt, platform=s.platform,
            timeout_s=comp.timeout, base=s.base)

    def restore(self, comp: Computation, found: RemoteLookup, log: str) -> list[tuple[str, str]] | None:
        """Write the result's outputs (and depfile and log) into the project; the outputs with
        farmer's digests, or None (a warning said why) when the computation must run."""
        if found.result is None or self._client is None or self._off:
            return None
        job = self.restore_job(comp, found, log, self._once)
        if job is None:
            self.misses += 1
            return None
        done = restoring.restore_all(self._client, [job])[0]
        contents = self.restored(comp, found, log, done, self._once)
        if contents is None:
            self.misses += 1
            return None
        return self.learn(comp, contents)

    def restore_job(self, comp: Computation, found: RemoteLookup, log: str,
                    say: Callable[[str, str], None]) -> list[tuple[str, Digest, bool]] | None:
        """The files a hit writes (its outputs, depfile and log), or None when the result is not a
        whole one for `comp` (`say(kind, text)` is told why)."""
        optional = [comp.depfile] if comp.depfile and not (comp.ninja and comp.ninja.remove_depfile) else []
        try:
            files = restoring.files_of(found.result, list(comp.outputs), optional)
        except restoring.Incomplete as e:
            say("incomplete", f"farmer: warning: remote result for {comp.id} unusable ({e}); running it")
            return None
        if found.result.stdout_digest.size_bytes > 0:  # an empty log is no log, as after a local restore
            files.append((log, found.result.stdout_digest, False))
        return files

    def restored(self, comp: Computation, found: RemoteLookup, log: str, done: dict[str, str] | Exception,
                 say: Callable[[str, str], None]) -> dict[str, str] | None:
        """After a hit's files were written (`done`: farmer's digests of them by path, or what
        stopped them): those digests, or None when `comp` must run (`say` is told why)."""
        if isinstance(done, Exception):
            self.refused(comp, done, say)
            return None
        if log not in done and os.path.exists(log):
            os.unlink(log)  # an older run's output is not this one's
        if comp.depfile and comp.ninja and comp.ninja.remove_depfile:  # ninja's deps = gcc: read once, then removed
            from farmer.record import depfile

            depfile.write(comp, found.discovered)  # for the recorder, as after a run
        if comp.kind == "python":  # what the step read, for the recorder, as after a run
            from farmer.run.worlds import reads

            reads.dump(log[:-4] + ".reads", [p for p, _ in found.discovered], [], [])
        return done

    def refused(self, comp: Computation, error: Exception, say: Callable[[str, str], None]) -> None:
        """A hit whose files could not be had: a warning (`say(kind, text)`, said once per kind),
        and a server error switches the remote off."""
        if isinstance(error, BlobCorrupt):
            self.corrupt.add((error.digest.hash, error.digest.size_bytes))
            say("blob", f"farmer: warning: remote blob for {comp.id}: {error}; running it (and uploading "
                        "its good copy again)")
        elif isinstance(error, BlobMissing):
            say("blob", f"farmer: warning: remote blob for {comp.id}: {error}; running it")
        elif isinstance(error, RemoteError):
            self.went_away(error)
        elif isinstance(error, OSError):
            say("restore", f"farmer: warning: cannot restore {comp.id} from the remote "
                           f"({error.strerror or error}); running it")
        else:
            raise error

    def learn(self, comp: Computation, contents: dict[str, str]) -> list[tuple[str, str]]:
        """A hit written: the build's digests told what was written (on the build's thread); its
        outputs with farmer's digests."""
        for path, content in contents.items():
            self.digests.learn(path, content)
        for path in comp.outputs:
            if path not in contents:  # a link: its digest is what it leads to, read again
                self.digests.forget(path)
        self.hits += 1
        return [(p, digest_or_changed(self.digests, p) or "missing") for p in comp.outputs]

    def went_away(self, e: RemoteError) -> None:
        """The remote failed a call (on any thread): off for the rest of the build; the warning
        is said once, on the build's thread."""
        if not self._off:
            self.off_because = explain(e)
            self._off = True
            self._messages.put(("off", f"farmer: warning: remote {self.settings.endpoint.url}: {explain(e)}; "
                                       "building without it"))

    def say(self, kind: str, text: str) -> None:
        """A warning from another thread, said once on the build's thread."""
        self._messages.put((kind, text))

    # -- uploading --------------------------------------------------------------------------------

    def store(self, comp: Computation, found: RemoteLookup, discovered: list[tuple[str, str]],
              outputs: list[tuple[str, str]], log: str, duration_s: float) -> None:
        """Queue a successful local run's results for upload (unless read only or off)."""
        if self._upload_off or self._off or found is None:
            return
        if any(p in self.digests.unstable for p in comp.inputs):
            return  # an input changed while it ran: its result is not vouched for
        try:  # the bytes' digests, taken here: the build's digests are not the uploader's to read
            discovered = [(p, self._content(p)) for p, _ in discovered]
            outputs = [(p, self._content(p)) for p, _ in outputs]
        except Changed:
            return
        self._jobs.put(_Upload(comp, found, discovered, outputs, log, duration_s))
        if self._uploader is None:
            self._uploader = threading.Thread(target=self._upload_all, name="farmer-remote-upload", daemon=True)
            self._uploader.start()

    def _upload_all(self) -> None:
        """The uploader: what is queued, in batches (one FindMissingBlobs and shared
        BatchUpdateBlobs for a batch's blobs, then its entries at once), until None."""
        last = False
        while not last:
            jobs, last = take_queued(self._jobs, _UPLOAD_BATCH)
            if not jobs or self._upload_off or self._off:
                continue
            try:
                self._upload(jobs)
            except RemoteError as e:
                self._upload_off = True
                if e.code == "CANCELLED":  # closed under it: the build said why already
                    self._off = True
                elif e.code in GONE and e.code != "PERMISSION_DENIED":  # gone, as a failed lookup would find
                    self.went_away(e)
                else:  # (a read-only credential: lookups go on)
                    why = explain(e) if e.code == "PERMISSION_DENIED" else f"failed ({e})"
                    self._messages.put(("upload", f"farmer: warning: upload to {self.settings.endpoint.url} "
                                                  f"{why}; not uploading more this build"))
            except OSError as e:
                self._upload_off = True
                self._messages.put(("upload", f"farmer: warning: cannot upload a result ({e.strerror or e}); "
                                              "not uploading more this build"))

    def _upload(self, jobs: list[_Upload]) -> None:
        """Every blob of the batch first, then the entries: no entry is visible before its blobs."""
        client = self._client
        entries = []
        blobs: list[Blob] = []
        for job in jobs:
            try:
                entries.append(self._entry(job, blobs))
            except Changed:
                continue  # a file changed since the run: its result is not vouched for
        if not entries:
            return
        again = frozenset(k for k in ((b.digest.hash, b.digest.size_bytes) for b in blobs) if k in self.corrupt)
        client.upload(blobs, again)  # a blob found corrupt there: sent again, FindMissingBlobs or not
        self.corrupt.difference_update(again)
        client.update_action_results([(act.digest, result) for _, act, result, _ in entries])
        self.uploaded += len(entries)
        for job, _, _, discovered in entries:
            if job.found.key1 is not None:
                self._add_variant(client, job.found.key1, discovered)

    def _entry(self, job: _Upload, blobs: list[Blob]):
        """A run's action-cache entry: (job, Action, ActionResult, discovered inputs); the blobs
        it names are added to `blobs`. Changed if a file is no longer what the run left."""
        comp, found = job.comp, job.found
        discovered = [self._file(p, d) for p, d in job.discovered]
        act = self.action_of(comp, found, discovered)
        result = re.ActionResult(exit_code=0)
        mine: list[Blob] = []
        for path, digest in job.outputs:
            if os.path.islink(path):  # kept as that link (v2.1's field, and v2.0's for older readers)
                target = _link_target(path)
                result.output_symlinks.add(path=path, target=target)
                result.output_file_symlinks.add(path=path, target=target)
                continue
            f = self._file(path, digest)
            result.output_files.add(path=path, digest=f.digest, is_executable=f.executable)
            mine.append(Blob(f.digest, path=path))
        if comp.depfile and not (comp.ninja and comp.ninja.remove_depfile) and os.path.isfile(comp.depfile):
            with open(comp.depfile, "rb") as fh:
                blob = Blob.of(fh.read())
            result.output_files.add(path=comp.depfile, digest=blob.digest)
            mine.append(blob)
        if os.path.isfile(job.log) and os.path.getsize(job.log):  # an empty log is no log
            with open(job.log, "rb") as fh:
                blob = Blob.of(fh.read())
            result.stdout_digest.CopyFrom(blob.digest)
            mine.append(blob)
        md = result.execution_metadata
        md.worker = f"farmer local ({os.uname().nodename})"
        md.execution_completed_timestamp.GetCurrentTime()
        md.execution_start_timestamp.FromNanoseconds(time.time_ns() - int(job.duration_s * 1e9))
        blobs.extend(mine)
        return job, act, result, discovered

    def _add_variant(self, client: Client, key1: str, discovered: list[FileDigest]) -> None:
        merged = actions.merged_variants(self._variants(client, key1), discovered)
        blob = Blob.of(actions.encode_variants(merged))
        result = re.ActionResult(exit_code=0)
        result.output_files.add(path=actions.VARIANTS_FILE, digest=blob.digest)
        client.upload([blob])
        client.update_action_result(actions.variants_action(key1, self.settings.salt).digest, result)

    # -- the end ------------------------------------------------------------------------------------

    def close(self, abandon: bool = False) -> None:
        """Wait (at most UPLOAD_WAIT_S) for the uploads, or drop them with `abandon` (an interrupt);
        cancel what is still in flight; print what the uploader had to say."""
        abandon = abandon or self._off  # a server gone or frozen takes no uploads: no wait for them
        if self._uploader is not None:
            if abandon:
                self._upload_off = True
            self._jobs.put(None)
            self._uploader.join(0 if abandon else UPLOAD_WAIT_S)
            if self._uploader.is_alive():
                self._upload_off = True
                if not abandon:
                    self._once("slow", f"farmer: warning: uploads to {self.settings.endpoint.url} took longer "
                                       f"than {UPLOAD_WAIT_S:.0f} s; the rest were not uploaded")
        if self._client is not None:
            self._client.close()
        if self._uploader is not None:
            self._uploader.join(5)
            self._uploader = None
        self.drain()

    def drain(self) -> None:
        """Say what the other threads had to say (on the build's thread)."""
        while True:
            try:
                kind, text = self._messages.get_nowait()
            except queue.Empty:
                return
            self._once(kind, text)

    def _once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self._warn(text)

