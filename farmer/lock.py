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
from farmer.private import open_file, make_dir


def _holder(fd: int) -> tuple[str, str]:
    """The holder's pid and role (`watch`, or "" for a build) as written in the lock file. A holder that has just taken the lock
    writes it within microseconds, so an empty file is read again for a moment (a new
    project's file is empty until its first holder writes): up to half a second, which a
    holder descheduled on a loaded machine may take."""
    for _ in range(100):
        first, _, rest = os.pread(fd, 64, 0).partition(b"\n")
        if first.strip():
            return first.strip().decode(errors="replace"), rest.strip().decode(errors="replace")
        time.sleep(0.005)
    return "unknown", ""


class ProjectLock:
    role = ""  # written under the pid, so that a second farmer can say who holds the lock

    def __init__(self, farmer_dir: str | os.PathLike) -> None:
        self.dir = os.fspath(farmer_dir)
        self.path = os.path.join(self.dir, "lock")
        self.fd: int | None = None

    def acquire(self) -> None:
        make_dir(self.dir)
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
            raise LockHeld(
                f"another farmer (pid {holder}) holds {self.path}; wait for it to finish or stop it"
            ) from None
        # Overwrite, then cut: the file is never empty while a farmer holds the lock.
        line = f"{os.getpid()}\n{self.role}\n".encode() if self.role else f"{os.getpid()}\n".encode()
        os.pwrite(fd, line, 0)
        os.ftruncate(fd, len(line))
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "ProjectLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
