"""The temporary files of restores killed before they renamed them into place.

A restore stages each file as `NAME.PID.cache-tmp` beside its destination (restore.py); a
farmer killed with SIGKILL in between leaves them, and a wildcard over the output folder
(`out/*`) would take them for inputs. They are removed beside the outputs a later restore
writes, and by `farmer clean`, once the process that made them is gone: a live farmer's
(another checkout sharing the folder, or this pid's own) is never touched.
"""

from __future__ import annotations

import os
import stat

SUFFIX = ".cache-tmp"
_PID_MAX = 1 << 22  # the most Linux allows: a bigger number names no process


def temporary(path: str) -> str:
    """The name a restore by this process stages `path` under."""
    return f"{path}.{os.getpid()}{SUFFIX}"


def sweep(folder: str) -> int:
    """Remove the restores' temporary files in `folder` whose process is dead; how many."""
    try:
        with os.scandir(folder or ".") as entries:
            names = [e.name for e in entries if e.name.endswith(SUFFIX)]
    except OSError:
        return 0
    removed = 0
    for name in names:
        pid = _pid_of(name)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        path = os.path.join(folder, name)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                os.unlink(path)
                removed += 1
        except OSError:
            pass
    return removed


def _pid_of(name: str) -> int | None:
    stem, dot, pid = name[:-len(SUFFIX)].rpartition(".")
    if not (stem and dot and pid.isdigit() and pid.isascii()):
        return None
    number = int(pid)
    return number if 0 < number < _PID_MAX else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
