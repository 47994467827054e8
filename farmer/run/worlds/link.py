"""farmer's end of one world process: its FIFOs, its pid and pidfd, the jobs sent to it.

Only I/O lives here (read frames, send commands, kill, reap, let go); what to do about
what a world says is `farmer.run.executors.world`'s business.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from farmer.graph.graph import Computation
from farmer.run.executors.process import RESET_SIGNALS
from farmer.run.worlds.protocol import Decoder, encode

DRIVER = str(Path(__file__).resolve().with_name("driver.py"))
_SEND_WAIT_S = 10.0  # a world that takes no command for this long is taken for hung


@dataclass(slots=True)
class Job:
    """One world task, from the scheduler's `start` to its outcome (across a retry)."""

    comp: Computation
    queued: float  # monotonic: when the scheduler started it
    timeout: float | None
    id: int = 0  # this attempt's job id
    mode: str = "fork"  # or "exec": the world's last future, run in the world itself
    dispatched: float | None = None
    deadline: float | None = None
    pid: int | None = None  # the forked child, leader of its own process group
    hits: int = 0  # deaths of a world this computation was running or waiting on
    ran: bool = False  # sent to a world at least once: its log has its output
    killed_for: str | None = None


@dataclass(slots=True)
class Proc:
    """One process of a world; a restarted world is a new Proc."""

    name: str
    base: str  # FIFO paths without .in / .out
    out_fd: int  # our read end of BASE.out, non-blocking
    parent: Proc | None  # the world process a child world is forked from
    selector: selectors.BaseSelector
    decoder: Decoder = field(default_factory=Decoder)
    pid: int | None = None  # for a child world: once its parent says `forked`
    pidfd: int | None = None
    reaped: bool = False
    in_fd: int | None = None  # our write end of BASE.in, once it is ready
    state: str = "starting"  # starting -> ready -> closing (close or exec sent) -> ended
    closing_normally: bool = False
    jobs: dict[int, Job] = field(default_factory=dict)  # sent to it, by job id
    waiting: list[Job] = field(default_factory=list)  # until it is ready
    pending_children: list[Proc] = field(default_factory=list)  # to fork once ready
    forked_worlds: dict[int, Proc] = field(default_factory=dict)  # `world` job id -> child
    spawn_job: int | None = None  # a child world: the id of the `world` job that forks it
    kill_when_forked: bool = False
    eof: bool = False
    eof_at: float | None = None  # when EOF came while its exit status was still unknown
    status: str | None = None  # how it ended: "exit 3", "signal 9"
    error: str | None = None  # what went wrong with it, when something did
    setup_reads: list | None = None  # [began_ns, [path...]]: what its own setup read (`ready`)

    def read(self) -> tuple[list[dict], bool]:
        """The messages that arrived, and whether the stream ended; ProtocolError on garbage."""
        chunks = []
        at_eof = False
        while True:
            try:
                data = os.read(self.out_fd, 65536)
            except BlockingIOError:
                break
            if not data:
                at_eof = True
                break
            chunks.append(data)
        messages = self.decoder.feed(b"".join(chunks))
        if at_eof:
            self.decoder.eof()
        return messages, at_eof

    def stop_reading(self) -> None:
        if not self.eof:
            self.eof = True
            self.selector.unregister(self.out_fd)  # a hung-up FIFO would stay readable

    def open_input(self) -> None:
        # It holds the read end open since before `ready`, so this does not fail with ENXIO.
        self.in_fd = os.open(self.base + ".in", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    def send(self, kind: str, **fields: object) -> None:
        """Write one command; OSError (TimeoutError too) when the world cannot take it."""
        if self.in_fd is None:
            raise OSError("its input FIFO is not open")
        data = memoryview(encode(kind, **fields))
        deadline = time.monotonic() + _SEND_WAIT_S
        while data:
            try:
                data = data[os.write(self.in_fd, data):]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [self.in_fd], [], left)[1]:
                    raise TimeoutError("it takes no commands") from None

    def kill(self) -> None:
        """SIGKILL its process group: the world, an execute-job and what they started."""
        if self.pid is not None:
            killpg(self.pid)
        else:
            self.kill_when_forked = True  # a child world not announced yet

    def reap(self, block: bool) -> bool:
        """For a root world (our child): collect its exit status; True once it is reaped."""
        if self.reaped or self.pid is None or self.parent is not None:
            return self.reaped
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, None
        if pid == 0:
            return False
        self.reaped = True
        self._close_pidfd()
        if status is not None and self.status is None:
            code = os.waitstatus_to_exitcode(status)
            self.status = f"signal {-code}" if code < 0 else f"exit {code}"
        return True

    def wait_gone(self, deadline: float) -> None:
        """After a kill: wait until the process is gone (so its FIFO holds all it said)."""
        if self.parent is None:
            self.reap(block=True)
            return
        if self.pid is None:
            return
        try:
            fd = os.pidfd_open(self.pid)  # also for a process that is not our child
        except (OSError, AttributeError):
            time.sleep(0.02)
            return
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)

    def close(self) -> None:
        """Let go of every descriptor; for a root world, reap it first (killed if need be)."""
        if self.parent is None and self.pid is not None and not self.reap(block=False):
            killpg(self.pid)
            self.reap(block=True)
        self.stop_reading()
        os.close(self.out_fd)
        if self.in_fd is not None:
            os.close(self.in_fd)
            self.in_fd = None
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            self.selector.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None


def spawn(proc: Proc, root: str, setup_json: str, env: dict[str, str], log: str) -> None:
    """Start a root world: the driver in a fresh interpreter and its own process group,
    output to the world's log, with a pidfd when the kernel has them."""
    argv = [sys.executable, DRIVER, "--serve", proc.base, "--world", proc.name, "--root", root,
            "--setup", setup_json, "--parent", str(os.getpid())]
    proc.pid = os.posix_spawn(
        sys.executable, argv, env,
        file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                      (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644),
                      (os.POSIX_SPAWN_DUP2, 1, 2)],
        setpgroup=0, setsigdef=RESET_SIGNALS, setsigmask=())
    if hasattr(os, "pidfd_open"):
        try:
            proc.pidfd = os.pidfd_open(proc.pid)
        except OSError:
            proc.pidfd = None


def killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def status_text(code: int | None, sig: int | None) -> str:
    return f"signal {sig}" if sig is not None else f"exit {code}"


def code_of(status: str | None) -> int | None:
    """"exit 3" -> 3, "signal 9" -> -9 (as Outcome.exit_code has it)."""
    word, _, number = (status or "").partition(" ")
    if not number.isdigit():
        return None
    return -int(number) if word == "signal" else int(number)
