"""The local cache as one build uses it: a lookup before a computation runs, a restore on a
hit, a store after a successful run.

Stores happen on a thread of their own, off the critical path: a run's outputs were hashed
for its trace already, so storing is copying them into blobs and writing one row. Every
problem with the cache (unwritable, locked, full, a damaged blob) is one warning and a
miss or a skipped store: a build never fails, nor gets a wrong output, because of it.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from farmer.cache.key import Programs, describe, uncacheable, variant_key
from farmer.cache.restore import BadBlob, restore_files
from farmer.cache.store import CacheError, CacheFull, Changed, Entry, FileRecord, LocalCache
from farmer.grains import hash_file, stat_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.cache.settings import CacheSettings
    from farmer.grains import Digests
    from farmer.graph import Computation

# A discovered input whose change time is this close to the run's start may have changed
# while it ran (time stamps lag the clock by up to a kernel tick): that run is not stored.
_CHANGE_MARGIN_NS = 20_000_000
_GC_TO = 0.9  # a build that finds the cache over its limit evicts down to this fraction


class Lookup:
    """A computation's first-level key, taken as it is about to run, and the variant found."""

    __slots__ = ("key1", "entry", "used_at", "started_ns")

    def __init__(self, key1: str, entry: Entry | None, used_at: float) -> None:
        self.key1, self.entry, self.used_at = key1, entry, used_at
        self.started_ns = time.time_ns()


class _Job:
    __slots__ = ("key1", "discovered", "outputs", "depfile", "log", "duration_s", "started_ns")

    def __init__(self, key1: str, discovered: list[tuple[str, str]],
                 outputs: list[tuple[str, str, tuple | None]], depfile: str | None, log: str,
                 duration_s: float, started_ns: int) -> None:
        self.key1, self.discovered, self.outputs = key1, discovered, outputs
        self.depfile, self.log, self.duration_s, self.started_ns = depfile, log, duration_s, started_ns


class BuildCache:
    """`warn(text)` prints a warning line (from the build's thread only)."""

    def __init__(self, settings: CacheSettings, digests: Digests, warn: Callable[[str], None]) -> None:
        self.settings = settings
        self.digests = digests
        self.programs = Programs(self._digest)
        self._warn = warn
        self._store: LocalCache | None = None
        self._off = False  # the cache failed this build: no more lookups
        self._warned: set[str] = set()
        self._messages: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()  # from the writer
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._used: list[tuple[str, float]] = []
        self.hits = self.misses = self.stored = 0

    # -- looking up and restoring ------------------------------------------------------------

    def lookup(self, comp: Computation, world: str | None, inputs: list[tuple[str, str]]) -> Lookup | None:
        """The computation's key and the variant stored for it (Lookup.entry None: a
        miss), or None when it is never cached or the cache is unusable."""
        self._drain()
        if self._off or uncacheable(comp) is not None:
            return None
        store = self._open()
        if store is None:
            return None
        key1 = describe(comp, world, inputs, self.settings.env, self.programs).key()
        try:
            found = store.lookup(key1, self._digest_text)
        except CacheError as e:
            self._fail("read", str(e))
            return None
        if found is None:
            self.misses += 1
            return Lookup(key1, None, 0.0)
        return Lookup(key1, found[0], found[1])

    def restore(self, comp: Computation, found: Lookup, log: str) -> list[tuple[str, str]] | None:
        """Write the entry's outputs (and depfile and log) into the project; the outputs
        with their digests, or None (a warning said why) when the computation must run."""
        entry, store = found.entry, self._store
        if entry is None or store is None:
            return None
        if [p for p, _, _, _ in entry.outputs] != comp.outputs:
            return None  # cannot happen for one key (the outputs are in it), but never wrong
        files = list(entry.outputs)
        if entry.depfile is not None and comp.depfile and not comp.remove_depfile:
            files.append((comp.depfile, *entry.depfile[1:]))
        if entry.log is not None:
            files.append((log, entry.log[0], entry.log[1], 0o644))
        elif os.path.exists(log):
            os.unlink(log)  # an older run's output is not this one's
        try:
            restore_files(store.blob_path, files)
        except BadBlob as e:
            self._once("blob", f"farmer: warning: cache {store.dir}: {e} ({comp.id}); "
                               "running it instead and dropping the entry")
            store.forget(entry.key, e.digest if e.what != "is missing" else None)
            self.misses += 1
            return None
        except OSError as e:
            self._once("restore", f"farmer: warning: cannot restore {comp.id} from the cache "
                                  f"({e.strerror or e}); running it instead")
            self.misses += 1
            return None
        from farmer.uptodate import digest_or_changed

        digests = self.digests
        for path, content, _, _ in entry.outputs:
            digests.learn(path, content)
        self.hits += 1
        self._used.append((entry.key, found.used_at))
        return [(p, digest_or_changed(digests, p) or "missing") for p in comp.outputs]

    # -- storing -------------------------------------------------------------------------

    def store(self, comp: Computation, found: Lookup, discovered: list[tuple[str, str]],
              outputs: list[tuple[str, str]], log: str, duration_s: float) -> None:
        """Queue a successful run's results for storing, unless an input changed while it
        ran (the caller's `unstable`)."""
        if self._store is None or self._off:
            return
        if any(p in self.digests.unstable for p in comp.inputs):
            return
        if any(d in ("missing", "not-a-file") or d.startswith("unreadable") for _, d in discovered):
            return  # its content cannot be vouched for
        # Blobs are named by their bytes' digest, which a trace's may combine with more.
        with_stats = [(p, self.digests.content(p), self.digests.seen(p)) for p, _ in outputs]
        if any(content is None or seen is None for _, content, seen in with_stats):
            return
        depfile = comp.depfile if comp.depfile and not comp.remove_depfile else None
        self._jobs.put(_Job(found.key1, discovered, with_stats, depfile, log, duration_s, found.started_ns))
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_all, args=(True,), name="farmer-cache",
                                            daemon=True)
            self._writer.start()

    def close(self, abandon: bool = False) -> None:
        """Wait for the stores (or, with `abandon`, drop those not started), record what
        was used, evict if over the limit, and print what the writer had to say."""
        if self._writer is not None:
            if abandon:
                while True:
                    try:
                        self._jobs.get_nowait()
                    except queue.Empty:
                        break
            self._jobs.put(None)
            self._writer.join()
            self._writer = None
        elif self._store is not None and self._used and not abandon:
            self._write_all(False)
        self._drain()
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- inside ------------------------------------------------------------------------

    def _open(self) -> LocalCache | None:
        if self._store is None:
            try:
                self._store = LocalCache(self.settings.dir).open()
            except CacheError as e:
                self._fail("open", str(e))
                return None
        return self._store

    def _digest(self, path: str) -> str | None:
        return self.digests.digest(path)

    def _digest_text(self, path: str) -> str:
        from farmer.uptodate import digest_or_changed

        return digest_or_changed(self.digests, path) or "missing"

    def _write_all(self, jobs: bool) -> None:
        """The writer: every queued job (with `jobs`, until None), then the uses, then an
        eviction if the cache is over its limit."""
        store = self._store
        if store is None:
            return
        try:
            db = store.connect()
        except CacheError as e:
            self._messages.put(("write", f"farmer: warning: cache: {e}; not storing this build"))
            return
        failed = False
        try:
            while jobs:
                job = self._jobs.get()
                if job is None:
                    break
                if failed:
                    continue
                try:
                    self._write(store, db, job)
                except CacheFull as e:
                    failed = True
                    self._messages.put(("write", f"farmer: warning: cache: {e}; not storing more this build"))
                except CacheError as e:
                    failed = True
                    self._messages.put(("write", f"farmer: warning: cache: {e}; not storing this build"))
            try:
                store.touch(db, self._used)
                if not failed and store.recorded_bytes() > self.settings.max_size:
                    store.gc(int(self.settings.max_size * _GC_TO), wait_s=0.0)
            except CacheError:
                pass  # another farmer evicts now, or the cache went away: the next build tries
        finally:
            db.close()

    def _write(self, store: LocalCache, db, job: _Job) -> None:
        for path, _ in job.discovered:  # changed while it ran (or since): not stored
            try:
                if os.stat(path).st_ctime_ns >= job.started_ns - _CHANGE_MARGIN_NS:
                    return
            except OSError:
                return
        fd = store.shared_lock()
        try:
            added = 0
            outputs: list[FileRecord] = []
            try:
                for path, digest, seen in job.outputs:
                    new, size, mode = store.put_file(path, digest, seen)
                    added += new
                    outputs.append((path, digest, size, mode))
                depfile = log = None
                if job.depfile is not None and os.path.isfile(job.depfile):
                    digest, st = _digest_now(job.depfile)
                    new, size, mode = store.put_file(job.depfile, digest, st)
                    added += new
                    depfile = (job.depfile, digest, size, mode)
                if os.path.isfile(job.log) and os.path.getsize(job.log):
                    digest, st = _digest_now(job.log)
                    new, size, _ = store.put_file(job.log, digest, st)
                    added += new
                    log = (digest, size)
            except (Changed, OSError):
                return  # a file changed (or went) since it was hashed: nothing is stored
            entry = Entry(variant_key(job.key1, job.discovered), job.discovered, outputs, depfile,
                          log, job.duration_s)
            store.put_entry(db, job.key1, entry, added)
            self.stored += 1
        finally:
            os.close(fd)

    def _drain(self) -> None:
        while True:
            try:
                kind, text = self._messages.get_nowait()
            except queue.Empty:
                return
            self._once(kind, text)

    def _fail(self, kind: str, message: str) -> None:
        self._off = True
        self._once(kind, f"farmer: warning: cache: {message}; building without it")

    def _once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self._warn(text)


def _digest_now(path: str) -> tuple[str, tuple]:
    """A file farmer did not hash for the trace (the depfile, the log), with its stat."""
    st = stat_key(os.stat(path))
    return hash_file(path), st
