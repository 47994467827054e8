"""The process groups a build starts, recorded in `.farmer/groups`, so that the next farmer
can stop what a farmer killed with -9 left running before it plans: such orphans would race
the recovery build (a half-done `mv` of an old `.part`, an old output written over a new one).

Each line is `PGID START`: the group's leader and a time in clock ticks since boot
(/proc/PID/stat's clock, field 22) no later than the leader's start: the start of the farmer
that started it, read once, since reading the leader's own /proc entry cost every computation
a file read. A build that ends removes the file (everything it started has
ended or been killed by then); a file found by a farmer that just took the lock was left by
one that died. What is left of each group is killed then, but only processes that are in
that group and started no earlier than the farmer that recorded it: a group that
was already there when that farmer started is somebody else's (its pid reused) and is left
alone. Linux's /proc is needed; elsewhere nothing is recorded.
"""

from __future__ import annotations

import os

from farmer.files import private
from farmer.startup.cheap import signal

NAME = "groups"


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot), or None when it is gone."""
    found = _stat(pid)
    return found[1] if found is not None else None


def _stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time) of `pid`, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[2]), int(fields[19])  # pgrp, starttime (fields 5 and 22)
    except (OSError, IndexError, ValueError):
        return None


class GroupLog:
    """Appends the groups a build starts to .farmer/groups; `close` removes it."""

    __slots__ = ("path", "fd", "since")

    def __init__(self, farmer_dir: str) -> None:
        self.path = os.path.join(farmer_dir, NAME)
        self.fd: int | None = None
        self.since = b""  # this farmer's start time, read with the first group

    def started(self, pid: int) -> None:
        try:
            if self.fd is None:
                since = start_time(os.getpid())
                if since is None:
                    return  # no /proc: nothing is recorded
                self.since = b" %d\n" % since
                self.fd = private.open_file(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.write(self.fd, b"%d%s" % (pid, self.since))
        except OSError:
            pass  # a full disk costs only the orphan kill after a crash

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def kill_orphans(farmer_dir: str) -> int:
    """After taking the lock: kill what is left of the groups a dead farmer recorded; how
    many processes were killed."""
    path = os.path.join(farmer_dir, NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return 0  # the usual case: the last build ended
    with os.fdopen(fd, "rb") as f:
        text = f.read().decode("ascii", "replace")
    groups: dict[int, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            groups[int(parts[0])] = int(parts[1])
    killed = 0
    if groups:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            found = _stat(pid)
            if found is None or pid == os.getpid():
                continue
            group, started = found
            leader_start = groups.get(group)
            if leader_start is not None and started >= leader_start:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except (ProcessLookupError, PermissionError):
                    pass
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return killed
