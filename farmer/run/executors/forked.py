"""A ProcessExecutor in a forked child, so that the build's thread never waits for an exec.

`os.posix_spawn` returns only once glibc's vfork child has made its file actions and
exec'd: in a clean build of many small commands that wait was most of the build's one
thread, longer the busier the machine (the child waits for a CPU). A thread cannot take it:
`os.posix_spawn` holds the GIL, and libc's called through ctypes releases it but the GIL's
hand-overs between the two threads cost more CPU than the wait (both measured: see
bench/results/issue17-passes.md#clean-builds-the-first-command-the-1k-clean-build-the-meson-series).

So the executor itself runs in a child forked once the graph is loaded (it has the
computations already): at the first start, which the child makes as it begins, or before
the scheduler runs where a thread might start before that (a live view's, a cache's). The
build's thread sends it the indices of what to start, and it sends back each run's outcome (exit, times, CPU, RSS, whether it printed), as
ProcessExecutor made it there: its process groups, timeouts, logs and kills, unchanged.
`stop` asks it to kill what runs; an end of its requests (the build is over, or farmer
died) makes it kill what runs and exit. It ignores the terminal's signals: farmer decides.
Used for builds with many commands to run, which pay for the fork. With -j 2 or
more, a second start while the first starter is busy forks another (one a CPU at most):
see ForkedExecutor.
"""

from __future__ import annotations

import marshal
import os
import sys

from farmer.run.executors.base import Executor, Outcome
from farmer.run.executors.events import READ, event_loop
from farmer.run.executors.process import drain
from farmer.startup.cheap import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation
    from farmer.run.executors.process import ProcessExecutor

_STOP = -1  # a request: kill what runs
_IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # farmer stops the build


# Not from a farmer this large (a 100k-step graph): each page it writes while the child
# lives is copied, so the pair could hold up to twice its memory.
_LARGEST = 256 << 20


def _resident() -> int:
    """Bytes of this process in memory (0 where /proc does not say)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _send(fd: int, value: object) -> None:
    data = marshal.dumps(value)
    data = len(data).to_bytes(4, "little") + data
    while data:
        data = data[os.write(fd, data):]


_READ = 1 << 12  # bytes a read asks for: a round's requests or reports are a few dozen each


class _Messages:
    """Length-prefixed marshalled values from a non-blocking pipe."""

    __slots__ = ("fd", "buf", "ended")

    def __init__(self, fd: int) -> None:
        self.fd, self.buf, self.ended = fd, b"", False

    def read(self) -> list:
        """What has come. A read that returns less than it asked for emptied the pipe: the
        next one would fail (EAGAIN), and an end still to come wakes the loop again."""
        try:
            while True:
                chunk = os.read(self.fd, _READ)
                if not chunk:
                    self.ended = True
                    break
                self.buf += chunk
                if len(chunk) < _READ:
                    break
        except (BlockingIOError, InterruptedError):
            pass
        values = []
        buf, at = self.buf, 0
        while len(buf) - at >= 4:
            n = int.from_bytes(buf[at:at + 4], "little")
            if len(buf) - at - 4 < n:
                break
            values.append(marshal.loads(buf[at + 4:at + 4 + n]))
            at += 4 + n
        self.buf = buf[at:]
        return values


def _serve(inner: ProcessExecutor, comps: list[Computation], requests: int, reports: int,
           first: list[int]) -> None:
    """The child's loop: start `first`, then what is asked, report what ends, until asked
    no more. (The cyclic collector stays as the build's start left it, paused: the child
    makes no cycles, and a pass over the heap it shares would copy its pages.)"""
    for s in _IGNORED:
        signal.signal(s, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)
    inner.selector = event_loop()  # its own: the parent's epoll instance is shared across fork
    inner.wake_fd = None
    for i in first:
        inner.start(comps[i])
    os.set_blocking(requests, False)
    asked = _Messages(requests)

    def on_requests(fd: int) -> None:
        for batch in asked.read():
            for i in batch:
                if i == _STOP:
                    inner.stop()
                else:
                    inner.start(comps[i])
        if asked.ended:
            inner.selector.unregister(requests)
            inner.stop()

    inner.selector.register(requests, READ, on_requests)
    gone = False
    while not asked.ended or inner.running():
        done = inner.wait(None)
        if done and not gone:
            try:
                _send(reports, [(o.index, o.ok, o.reason, o.exit_code, o.start_s, o.end_s, o.cpu_s,
                                 o.max_rss_kb, o.printed) for o in done])
            except OSError:  # farmer is gone: what runs is killed all the same
                gone = True


def forked(inner: ProcessExecutor, comps: list[Computation], wake_fd: int | None,
           at_once: bool = True, starters: int = 1) -> Executor:
    """`inner` run from forked children (up to `starters` of them), or `inner` itself where
    that cannot be: no pidfds (SIGCHLD would go to the child), threads alive (a lock held
    mid-operation would be copied), a large farmer, no process to spare. `at_once`: fork
    the first now; else at the first start (a first build's first command then waits
    neither for the copy of the parent's pages that its work between the fork and that
    start would make, nor for a request), for a build that starts no thread before it
    starts a command (no live view, no cache)."""
    threading = sys.modules.get("threading")
    if not hasattr(os, "pidfd_open") or threading is not None and threading.active_count() > 1 \
            or _resident() > _LARGEST:
        return inner
    executor = ForkedExecutor(inner, comps, wake_fd, starters)
    if at_once and not executor.fork([]):
        executor.selector.close()
        return inner
    return executor


class _Starter:
    """One forked child: where its requests go, where its reports come from, what it was
    asked to start and has not reported back."""

    __slots__ = ("pid", "requests", "reports", "asked", "out", "dead")

    def __init__(self, pid: int, requests: int, reports: int) -> None:
        self.pid, self.requests, self.reports = pid, requests, _Messages(reports)
        self.asked: list[int] = []  # to send at the next wait (one write for a round's starts), or at once when idle
        self.out: set[int] = set()  # started and not yet reported back
        self.dead = False


class ForkedExecutor(Executor):
    """The build's side: its starters, what each was asked to start, and the outcomes as
    they come. A start goes to an idle starter, or forks one more while there are fewer
    than `most` (one per CPU that -j can keep busy: each starter waits for one spawn at a
    time, its vfork child's file actions and exec, and on ext4 without a journal creating a
    `>` file after a clean build's `rm -rf` costs as much as a small command (see
    bench/results/issue17-passes.md#where-each-target-stands-at-80d231b-end-of-the-fifth-pass):
    made by one starter, every start waited for every other's); else to the starter with
    the least to do. Where the first fork is refused at the first start, `inner` starts
    the computations in this process (`_here`); where a later one is, the starters there
    do it all."""

    def __init__(self, inner: ProcessExecutor, comps: list[Computation], wake_fd: int | None,
                 most: int = 1) -> None:
        self.inner, self.comps, self.load = inner, comps, inner.load
        self.most = max(1, most)
        self.starters: list[_Starter] = []
        self.selector = event_loop()  # other executors' descriptors (remote relays) join it
        if wake_fd is not None:
            self.selector.register(wake_fd, READ, None)
        self._done: list[Outcome] = []
        self._stopped = False
        self._here: ProcessExecutor | None = None  # no child after all: `inner` runs them here

    def fork(self, first: list[int]) -> bool:
        """Fork a starter, which starts `first` at once; False where that cannot be (no
        process or pipe to spare; threads alive, when it comes at a start)."""
        threading = sys.modules.get("threading")
        if self._stopped or threading is not None and threading.active_count() > 1:
            return False
        pipes: list[int] = []
        try:
            pipes += os.pipe2(os.O_CLOEXEC)
            pipes += os.pipe2(os.O_CLOEXEC)
            pid = os.fork()
        except OSError:
            for fd in pipes:
                os.close(fd)
            return False
        requests_r, requests_w, reports_r, reports_w = pipes
        if pid == 0:  # the child: whatever happens, it ends here (os._exit: nothing of the parent's runs)
            code = 1
            try:
                os.close(requests_w)
                os.close(reports_r)
                for other in self.starters:  # else the other starters would not see their requests end
                    os.close(other.requests)
                    os.close(other.reports.fd)
                if self.starters:  # forked after the build resumed the collector, whose
                    import gc  # passes over the heap it shares would copy its pages

                    gc.disable()
                _serve(self.inner, self.comps, requests_r, reports_w, first)
                code = 0
            finally:
                os._exit(code)
        os.close(requests_r)
        os.close(reports_w)
        os.set_blocking(reports_r, False)
        starter = _Starter(pid, requests_w, reports_r)
        starter.out.update(first)
        self.selector.register(reports_r, READ, starter)
        if not self.starters:
            self.inner.selector.close()  # the children make their own; this side waits on its own loop
        self.starters.append(starter)
        return True

    def running(self) -> int:
        if self._here is not None:
            return self._here.running()
        return sum(len(s.out) for s in self.starters) + len(self._done)

    def start(self, comp: Computation) -> None:
        if self._here is not None:
            self._here.start(comp)
            return
        least = None
        for starter in self.starters:
            if not starter.dead and (least is None or len(starter.out) < len(least.out)):
                least = starter
        if (least is None or least.out) and len(self.starters) < self.most:
            if self.fork([comp.index]):
                return
            self.most = len(self.starters)  # no more forks: the ones there do it all
            if not self.starters:
                self._start_here()
                self._here.start(comp)  # type: ignore[union-attr]
                return
        if least is None:  # every starter died
            self._done.append(Outcome(comp.index, False, "farmer's process starter died", None, 0.0, 0.0))
            return
        least.asked.append(comp.index)
        if not least.out:  # the starter is idle: it starts this now, not after the round's
            self._send_asked(least)  # other work (a first build writes its graph cache then)
        least.out.add(comp.index)

    def _start_here(self) -> None:
        """No child: `inner` starts the computations in this process, waiting on this
        executor's loop (the wake-up fd is on it, with whatever other executors put there)."""
        self.inner.selector.close()
        self.inner.selector = self.selector
        self._here = self.inner

    @staticmethod
    def _send_asked(starter: _Starter) -> None:
        if starter.asked:
            asked, starter.asked = starter.asked, []
            try:
                _send(starter.requests, asked)
            except OSError:  # the child is gone: `_read` reports what it had
                pass

    def wait(self, timeout: float | None) -> list[Outcome]:
        if self._here is not None:
            return self._here.wait(timeout)
        for starter in self.starters:
            self._send_asked(starter)
        if not self._done:
            for key, _ in self.selector.select(timeout):
                if type(key.data) is _Starter:
                    self._read(key.data)
                elif key.data is None:  # a signal's wake-up
                    drain(key.fd)
                else:
                    key.data(key.fd)
        done, self._done = self._done, []
        return done

    def _read(self, starter: _Starter) -> None:
        for batch in starter.reports.read():
            for index, ok, reason, code, start_s, end_s, cpu_s, rss, printed in batch:
                outcome = Outcome(index, ok, reason, code, start_s, end_s, cpu_s, rss)
                outcome.printed = printed
                starter.out.discard(index)
                self._done.append(outcome)
        if starter.reports.ended:  # the child died: what it ran is not known to have ended well
            self.selector.unregister(starter.reports.fd)
            starter.dead = True
            for index in sorted(starter.out):
                self._done.append(Outcome(index, False, "farmer's process starter died", None, 0.0, 0.0))
            starter.out.clear()

    def stop(self) -> None:
        if self._here is not None:
            self._here.stop()
        elif not self._stopped:
            self._stopped = True  # and no more forks
            for starter in self.starters:  # before the first fork, nothing runs
                starter.asked.append(_STOP)
                self._send_asked(starter)

    def close(self) -> None:
        """Ends the children's requests: each kills what still runs, and exits."""
        if self._here is not None:
            self._here.close()  # and with it this loop, its own now
            return
        if not self.starters:  # never forked: nothing was started
            self.inner.selector.close()
        for starter in self.starters:
            starter.asked = []
            os.close(starter.requests)
        for starter in self.starters:
            os.waitpid(starter.pid, 0)
            os.close(starter.reports.fd)
        self.selector.close()
