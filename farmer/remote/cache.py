"""The remote cache as one build uses it: a lookup before a computation runs, a restore from
the CAS on a hit, an upload after a local run (SPEC §5).

The key is the local cache's action description (farmer/cache/key.py) as a REAPI Action
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

from farmer.grains import NotAFile
from farmer.remote import action as actions
from farmer.remote import restore as restoring
from farmer.remote.action import FileDigest, RemoteAction
from farmer.remote.client import Blob, BlobCorrupt, BlobMissing, Client, RemoteError
from farmer.remote.config import RemoteSettings
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from farmer.remote.shas import Changed, Shas
from farmer.uptodate import digest_or_changed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.grains import Digests
    from farmer.graph import Computation

# the description's parts that are in the Command itself; the rest go into FARMER_KEY
_IN_COMMAND = frozenset({"action", "env", "outputs", "depfile", "inputs", "inherited"})
_DOWN = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"})
UPLOAD_WAIT_S = 60.0  # at the end of a build, for uploads still queued


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
            self._client = Client(self.settings.endpoint)
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
        self._once("off", f"farmer: warning: remote {self.settings.endpoint.url} unavailable ({e}); "
                          "building without it")

    # -- looking up and restoring ----------------------------------------------------------------

    def lookup(self, comp: Computation, description) -> RemoteLookup | None:
        """The remote key of `comp` (its action description, farmer/cache/key.py) and the result
        cached for it (`.result` None: a miss); None when the remote cannot be used."""
        self._drain()
        client = self.client()
        if client is None:
            return None
        try:
            declared = [self.file_now(path) for path in comp.inputs]
        except Changed:
            return None
        key1 = actions.key1_of(description.canonical()) if comp.depfile else None
        found = RemoteLookup(description, declared, key1)
        try:
            if key1 is None:
                found.action = self.action_of(comp, found, [])
                found.result = client.get_action_result(found.action.digest)
            else:
                self._lookup_variants(client, comp, found)
        except RemoteError as e:
            self._fail(e)
            return None
        if found.result is None:
            self.misses += 1
        return found

    def _lookup_variants(self, client: Client, comp, found: RemoteLookup) -> None:
        for variant in self._variants(client, found.key1):
            try:
                now = [self.file_now(f.path) for f in variant]
            except Changed:
                continue
            if now != variant:
                continue
            action = self.action_of(comp, found, variant)
            result = client.get_action_result(action.digest)
            if result is not None:
                found.action, found.result = action, result
                found.discovered = [(f.path, digest_or_changed(self.digests, f.path) or "missing") for f in variant]
                return

    def _variants(self, client: Client, key1: str) -> list[list[FileDigest]]:
        result = client.get_action_result(actions.variants_action(key1, self.settings.salt).digest)
        if result is None or len(result.output_files) != 1:
            return []
        d = result.output_files[0].digest
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
        optional = [comp.depfile] if comp.depfile and not (comp.ninja and comp.ninja.remove_depfile) else []
        try:
            files = restoring.files_of(found.result, list(comp.outputs), optional)
            stdout = found.result.stdout_digest if found.result.HasField("stdout_digest") else None
            contents = restoring.restore(self._client, files, (log, stdout) if stdout is not None else None)
        except restoring.Incomplete as e:
            self._once("incomplete", f"farmer: warning: remote result for {comp.id} unusable ({e}); running it")
        except (BlobMissing, BlobCorrupt) as e:
            self._once("blob", f"farmer: warning: remote blob for {comp.id}: {e}; running it")
        except RemoteError as e:
            self._fail(e)
        except OSError as e:
            self._once("restore", f"farmer: warning: cannot restore {comp.id} from the remote "
                                  f"({e.strerror or e}); running it")
        else:
            if stdout is None and os.path.exists(log):
                os.unlink(log)  # an older run's output is not this one's
            if comp.depfile and comp.ninja and comp.ninja.remove_depfile:  # ninja's deps = gcc: read once, then removed
                from farmer.cache.use import write_depfile

                write_depfile(comp, found.discovered)  # for the recorder, as after a run
            for path, content in contents.items():
                self.digests.learn(path, content)
            self.hits += 1
            return [(p, digest_or_changed(self.digests, p) or "missing") for p in comp.outputs]
        self.misses += 1
        return None

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
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if self._upload_off or self._off:
                continue
            try:
                self._upload(job)
                self.uploaded += 1
            except Changed:
                continue  # a file changed since the run: its result is not vouched for
            except RemoteError as e:
                self._upload_off = True
                if e.code in _DOWN:  # the server went away: as a failed lookup would find
                    self._off = True
                    self._messages.put(("off", f"farmer: warning: remote {self.settings.endpoint.url} "
                                               f"unavailable ({e}); building without it"))
                else:
                    self._messages.put(("upload", f"farmer: warning: upload to {self.settings.endpoint.url} "
                                                  f"failed ({e}); not uploading more this build"))
            except OSError as e:
                self._upload_off = True
                self._messages.put(("upload", f"farmer: warning: cannot upload a result ({e.strerror or e}); "
                                              "not uploading more this build"))

    def _upload(self, job: _Upload) -> None:
        comp, found, client = job.comp, job.found, self._client
        discovered = [self._file(p, d) for p, d in job.discovered]
        act = self.action_of(comp, found, discovered)
        result = re.ActionResult(exit_code=0)
        blobs: list[Blob] = []
        for path, digest in job.outputs:
            f = self._file(path, digest)
            result.output_files.add(path=path, digest=f.digest, is_executable=f.executable)
            blobs.append(Blob(f.digest, path=path))
        if comp.depfile and not (comp.ninja and comp.ninja.remove_depfile) and os.path.isfile(comp.depfile):
            with open(comp.depfile, "rb") as fh:
                blob = Blob.of(fh.read())
            result.output_files.add(path=comp.depfile, digest=blob.digest)
            blobs.append(blob)
        if os.path.isfile(job.log):
            with open(job.log, "rb") as fh:
                blob = Blob.of(fh.read())
            result.stdout_digest.CopyFrom(blob.digest)
            blobs.append(blob)
        md = result.execution_metadata
        md.worker = f"farmer local ({os.uname().nodename})"
        md.execution_completed_timestamp.GetCurrentTime()
        md.execution_start_timestamp.FromNanoseconds(time.time_ns() - int(job.duration_s * 1e9))
        client.upload(blobs)  # every output first: the entry is never visible before its blobs
        client.update_action_result(act.digest, result)
        if found.key1 is not None:
            self._add_variant(client, found.key1, discovered)

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
        self._drain()

    def _drain(self) -> None:
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

