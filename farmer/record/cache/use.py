"""The local cache as one build uses it (the recorder's `RunCache`, farmer/record/runcache.py): a
lookup before a computation runs, a restore on a hit, a store after a successful run. Its
engine (farmer/record/cache/engine.py) makes it.

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
from stat import S_ISREG

from farmer.files.digests import digest_or_changed, hash_fd
from farmer.files.queued import take_queued
from farmer.files.stattable import stat_key
from farmer.record.cache.entry import LINK_MODE, Entry, FileRecord
from farmer.record.cache.errors import CacheError, Changed, Unstorable
from farmer.record.cache.key import Programs, describe, uncacheable, variant_key
from farmer.record.cache.leftovers import sweep
from farmer.record.cache.restore import BadBlob, NotHere, restore_files
from farmer.record.cache.store import LocalCache
from farmer.record.runcache import RunCache
from farmer.run.executors.base import Outcome, Restored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.files.digests import Digests
    from farmer.graph.graph import Computation
    from farmer.record.cache.settings import CacheSettings
    from farmer.store.state import Trace

# A discovered input whose change time is this close to the run's start may have changed
# while it ran (time stamps lag the clock by up to a kernel tick): that run is not stored.
_CHANGE_MARGIN_NS = 20_000_000
_GC_TO = 0.9  # a build that finds the cache over its limit evicts down to this fraction
_BATCH = 256  # stores written in one transaction, at most


class _Job:
    """A successful run to store: what the writer thread needs, taken on the build's thread."""

    __slots__ = ("key1", "discovered", "outputs", "depfile", "log", "started_ns")

    def __init__(self, key1: str, discovered: list[tuple[str, str]],
                 outputs: list[tuple[str, str, tuple]], depfile: str | None, log: str,
                 started_ns: int) -> None:
        self.key1, self.discovered, self.outputs = key1, discovered, outputs
        self.depfile, self.log, self.started_ns = depfile, log, started_ns


class LocalRunCache(RunCache):
    """`warn(text)` prints a warning line (called on the build's thread only); `restored`:
    what a hit's outcome says it came from."""

    def __init__(self, settings: CacheSettings, digests: Digests, logs: str,
                 warn: Callable[[str], None], root: str, restored: Restored) -> None:
        self.settings = settings
        self.restored = restored
        self._real_root = os.path.realpath(root)  # where an output that is a link must lead
        self.digests = digests
        self.logs = logs
        self.programs = Programs(self.digests.digest)
        self._warn = warn
        self._store: LocalCache | None = None
        self._off = False  # the cache failed this build: no more lookups
        self._warned: set[str] = set()
        # The misses, till they are stored: their first-level key, and when they started.
        self._found: dict[int, tuple[str, int]] = {}
        self._messages: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()  # from the writer
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._used: list[tuple[str, float]] = []  # entries restored, with their last use before
        self._swept: set[str] = set()  # folders rid of killed restores' temporary files

    # -- looking up and restoring ------------------------------------------------------------

    def lookup(self, comp: Computation, inputs: list[tuple[str, str]], world: str | None) -> Restored | None:
        """`restored` when `comp`'s outputs were restored from the cache (its key made of
        `inputs`, the declared inputs' digests now, and `world`, its world's fingerprint);
        else (None) it runs, and is stored after."""
        self._drain()
        if self._off or uncacheable(comp) is not None:
            return None
        store = self._open()
        if store is None:
            return None
        key1 = describe(comp, world, inputs, self.settings.env, self.programs).key()
        try:
            found = store.lookup(key1, self._digest_now, lambda key: self._damaged(store, comp))
        except CacheError as e:
            self._fail("read", str(e))
            return None
        if found is not None and self._restore(comp, store, found[0]):
            self._used.append((found[0].key, found[1]))
            return self.restored
        self._found[comp.index] = (key1, time.time_ns())
        return None

    def _restore(self, comp: Computation, store: LocalCache, entry: Entry) -> bool:
        """Write the entry's outputs, depfile and log into the project (all or none)."""
        if [p for p, _, _, _ in entry.outputs] != comp.outputs:
            return False  # cannot happen for one key (the outputs are in it), but never wrong
        files = list(entry.outputs)
        log = _log_path(self.logs, comp.id)
        if entry.log is not None:
            files.append((log, entry.log[0], entry.log[1], 0o644))
        if comp.depfile and entry.depfile is not None:
            files.append((comp.depfile, *entry.depfile[1:]))
        self._sweep(files)
        try:
            restore_files(store.blob_path, files, entry.inline, self._real_root)
            if comp.depfile and entry.depfile is None:
                from farmer.record import depfile

                depfile.write(comp, entry.discovered)  # one ninja removes once read: as listed
            if comp.kind == "python":  # what the step read, for the recorder, as after a run
                from farmer.run.worlds import reads

                reads.dump(log[:-4] + ".reads", [p for p, _ in entry.discovered], [], [])
        except NotHere:
            return False  # a link that would lead out of this root or to no file: a miss
        except BadBlob as e:
            dropped = "running instead" if store.read_only else "dropped it, running instead"
            self._once("blob", f"farmer: warning: cache {store.dir}: {e} (for {comp.id}); {dropped}")
            store.forget(entry.key, e.damaged)
            return False
        except OSError as e:
            self._once("restore", f"farmer: warning: cannot restore {comp.id} from the cache "
                                  f"({e.strerror or e}); running it instead")
            return False
        if entry.log is None:
            try:
                os.unlink(log)  # an older run's output is not this one's
            except OSError:
                pass
        return True

    # -- storing -------------------------------------------------------------------------

    def store(self, comp: Computation, trace: Trace, outcome: Outcome) -> None:
        """Queue a successful run for the writer, unless an input changed while it ran or a
        file of it cannot be vouched for."""
        found = self._found.pop(comp.index, None)
        if found is None or self._store is None or self._off or self._store.read_only:
            return
        digests = self.digests
        if any(p in digests.unstable for p in comp.inputs):
            return
        if any(d in ("missing", "not-a-file") or d.startswith("unreadable") for _, d in trace.discovered):
            return
        # Blobs are named by their bytes' digest, which a trace's may combine with more.
        outputs = [(p, digests.content(p), digests.seen(p)) for p, _ in trace.outputs]
        if any(content is None or seen is None for _, content, seen in outputs):
            return
        depfile = comp.depfile if comp.depfile and not (comp.ninja and comp.ninja.remove_depfile) else None
        key1, started_ns = found
        self._jobs.put(_Job(key1, trace.discovered, outputs, depfile,  # type: ignore[arg-type]
                            _log_path(self.logs, comp.id), started_ns))
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_all, args=(True,), name="farmer-cache",
                                            daemon=True)
            self._writer.start()

    def close(self, interrupted: bool = False) -> None:
        """Wait for the stores (interrupted: drop those not begun), record what was used,
        evict if over the limit, and say what the writer had to say."""
        if self._writer is not None:
            if interrupted:
                while True:
                    try:
                        self._jobs.get_nowait()
                    except queue.Empty:
                        break
            self._jobs.put(None)
            self._writer.join()
            self._writer = None
        elif self._store is not None and self._used and not interrupted and not self._store.read_only:
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
            if self._store.read_only:
                self._once("open", f"farmer: warning: cache: {self._store.read_only}; restoring from it "
                                   "read-only, storing nothing")
        return self._store

    def _digest_now(self, path: str) -> str:
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
                batch, last = take_queued(self._jobs, _BATCH)  # what is queued: one transaction
                if not failed:
                    try:
                        self._write(store, db, batch)
                    except CacheError as e:  # CacheFull too
                        failed = True
                        self._messages.put(("write", f"farmer: warning: cache: {e}; storing nothing more this build"))
                if last:
                    break
            try:
                store.touch(db, self._used)
                if not failed and store.recorded_bytes() > self.settings.max_size:
                    store.gc(int(self.settings.max_size * _GC_TO), wait_s=0.0)
            except CacheError:
                pass  # another farmer evicts now, or the cache went away: the next build tries
        finally:
            db.close()

    def _write(self, store: LocalCache, db, jobs: list[_Job]) -> None:
        """Blobs first, then the entries that name them, under the shared lock."""
        if not jobs:
            return
        fd = store.shared_lock()
        try:
            added = 0
            entries: list[tuple[str, Entry]] = []
            for job in jobs:
                made = self._blobs(store, job)
                if made is not None:
                    added += made[1]
                    entries.append((job.key1, made[0]))
            if entries:
                store.put_entries(db, entries, added)
        finally:
            os.close(fd)

    def _blobs(self, store: LocalCache, job: _Job) -> tuple[Entry, int] | None:
        """Copy a run's files into blobs: its entry and the bytes added, or None when a file
        changed since it was hashed (or a discovered input since the run began)."""
        for path, _ in job.discovered:
            try:
                if os.stat(path).st_ctime_ns >= job.started_ns - _CHANGE_MARGIN_NS:
                    return None
            except OSError:
                return None
        added = 0
        outputs: list[FileRecord] = []
        inline: dict[str, bytes] = {}

        def put(path: str, digest: str, seen: tuple) -> tuple[int, int]:
            nonlocal added
            new, size, mode, data = store.put_file(path, digest, seen)
            added += new
            if data is not None:
                inline[digest] = data
            return size, mode

        def put_output(path: str, digest: str, seen: tuple) -> FileRecord:
            if not os.path.islink(path):
                return (path, digest, *put(path, digest, seen))
            digest, target = store.put_link(path, seen, self._real_root)
            inline[digest] = target
            return (path, digest, len(target), LINK_MODE)

        try:
            for path, digest, seen in job.outputs:
                outputs.append(put_output(path, digest, seen))
            depfile = log = None
            if job.depfile is not None and os.path.isfile(job.depfile):
                digest, st = _digest_now(job.depfile)
                depfile = (job.depfile, digest, *put(job.depfile, digest, st))
            if os.path.isfile(job.log) and os.path.getsize(job.log):
                digest, st = _digest_now(job.log)
                log = (digest, put(job.log, digest, st)[0])
        except (Changed, Unstorable, OSError):
            return None
        return Entry(variant_key(job.key1, job.discovered), job.discovered, outputs, depfile, log,
                     inline), added

    def _drain(self) -> None:
        while True:
            try:
                kind, text = self._messages.get_nowait()
            except queue.Empty:
                return
            self._once(kind, text)

    def _sweep(self, files: list[FileRecord]) -> None:
        """Remove what restores killed earlier left beside these files (once a folder a build)."""
        for path, _, _, _ in files:
            folder = os.path.dirname(path)
            if folder not in self._swept:
                self._swept.add(folder)
                sweep(folder)

    def _damaged(self, store: LocalCache, comp: Computation) -> None:
        dropped = "" if store.read_only else "; dropped it"
        self._once("entry", f"farmer: warning: cache {store.dir}: a damaged entry (for {comp.id}){dropped}")

    def _fail(self, kind: str, message: str) -> None:
        self._off = True
        self._once(kind, f"farmer: warning: cache: {message}; building without it")

    def _once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self._warn(text)


def _log_path(logs: str, comp_id: str) -> str:
    from farmer.run.executors.process import log_path

    return log_path(logs, comp_id)


def _digest_now(path: str) -> tuple[str, tuple]:
    """A file farmer did not hash for the trace (the depfile, the log), with its stat;
    Changed unless it is a regular file (opened without blocking: a FIFO put there since
    would hang the writer, and the build's end waiting for it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        raise Changed(path) from None
    try:
        st = os.fstat(fd)
        if not S_ISREG(st.st_mode):
            raise Changed(path)
        return hash_fd(fd, st.st_size), stat_key(st)
    finally:
        os.close(fd)


