"""The project lock: one farmer per project at a time.

`flock` on `.farmer/lock`: the kernel releases it when its holder dies, so a farmer killed
with -9 never leaves a stale lock behind. The holder writes its pid into the file so a
second farmer can name it.
"""

from __future__ import annotations

import fcntl
import os
import time

from farmer.errors import LockHeld
from farmer.files.private import make_state_dir, open_file
from farmer.startup.cheap import signal

# In the lock's folder while its holder has a folder for its worlds' FIFOs (made before the
# folder, removed after it: `mark_fifos`, `unmark_fifos`): found by the next holder, it was
# left by one killed with -9, whose folder is still there (farmer/run/worlds/sweep.py).
FIFOS_MARK = "fifos"


def mark_fifos(farmer_dir: str) -> None:
    """Before this farmer makes its worlds' FIFO folder: a kill between the two leaves a
    mark and no folder, which costs the next farmer a sweep, never a folder unmarked."""
    try:
        os.close(open_file(os.path.join(farmer_dir, FIFOS_MARK), os.O_WRONLY | os.O_CREAT))
    except OSError:
        pass  # a full disk: the next build's sweep after its plan still finds the folder


def unmark_fifos(farmer_dir: str) -> None:
    """Once this farmer's FIFO folder is removed."""
    try:
        os.unlink(os.path.join(farmer_dir, FIFOS_MARK))
    except OSError:
        pass


def _holder(fd: int) -> tuple[str, str]:
    """The holder's pid and role (`watch`, `serve`, or "" for a build) as written in the lock file.
    A holder that has just taken the lock writes it within microseconds, so an empty file
    is read again for a moment (a new project's file is empty until its first holder
    writes): up to half a second, which a holder descheduled on a loaded machine may take."""
    for _ in range(100):
        first, _, rest = os.pread(fd, 64, 0).partition(b"\n")
        if first.strip():
            return first.strip().decode(errors="replace"), rest.strip().decode(errors="replace")
        time.sleep(0.005)
    return "unknown", ""


def holder(path: str) -> tuple[str, str]:
    """The pid and role written in the lock file at `path` (its holder's, while it is held)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        return _holder(fd)
    finally:
        os.close(fd)


class ProjectLock:
    """`role`: written under the pid, so that a second farmer can say who holds the lock
    (`watch`, `serve`; "" for a build)."""

    def __init__(self, farmer_dir: str | os.PathLike, role: str = "") -> None:
        self.role = role
        self.dir = os.fspath(farmer_dir)
        self.path = os.path.join(self.dir, "lock")
        self.fd: int | None = None
        self.early: list[int] = []  # signals that came while `defer_signals` held them

    def acquire(self) -> None:
        make_state_dir(self.dir)
        fd = open_file(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder, role = _holder(fd)
            os.close(fd)
            if role == "watch":
                raise LockHeld(
                    f"`farmer watch` (pid {holder}) holds {self.path}: it rebuilds on every change "
                    "already; look at its terminal, or stop it (Ctrl-C) to build by hand") from None
            if role == "serve":  # a command it does not run (busy, stopped, another farmer's version)
                raise LockHeld(
                    f"`farmer serve` (pid {holder}) holds {self.path} and did not run this command "
                    f"(busy, stopped, or another farmer's version); wait for it, or stop it: "
                    f"farmer serve --stop (kill {holder} if it does not answer)") from None
            raise LockHeld(
                f"another farmer (pid {holder}) holds {self.path}; wait for it to finish or stop it"
            ) from None
        # Overwrite, then cut: the file is never empty while a farmer holds the lock.
        line = f"{os.getpid()}\n{self.role}\n".encode() if self.role else f"{os.getpid()}\n".encode()
        os.pwrite(fd, line, 0)
        os.ftruncate(fd, len(line))
        self.fd = fd
        self._sweep_left()

    def _sweep_left(self) -> None:
        """Remove the FIFO folders that a holder killed with -9 left, whatever this farmer
        does next (a no-op build too): one stat when there is none, the module that
        sweeps imported only when there is."""
        mark = os.path.join(self.dir, FIFOS_MARK)
        if not os.path.lexists(mark):
            return
        from farmer.run.worlds.sweep import sweep

        sweep()
        unmark_fifos(self.dir)

    def defer_signals(self, stop_now: bool = False) -> None:
        """From now until a build installs its own handlers, SIGINT, SIGTERM and SIGHUP are
        recorded (in `early`) so that the build that holds the lock writes last-build.json
        saying it was interrupted (SPEC §4: every build that got the lock writes one): it
        stops once it has planned, or with `stop_now` (still reading the graph, which may
        take seconds) at once, by a KeyboardInterrupt carrying the signal (`signum`). A
        second signal leaves at once, 128 + the first's number."""
        early = self.early

        def defer(signum: int, frame: object) -> None:
            if early:  # a second one: stop at once
                os._exit(128 + early[0])
            early.append(signum)
            if stop_now:
                stop = KeyboardInterrupt()
                stop.signum = signum  # type: ignore[attr-defined]
                raise stop

        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, defer)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "ProjectLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
