"""Where the worlds' FIFO directories live, and the sweep of those a killed farmer left.

A farmer killed with -9 cannot remove its FIFO directory (its worlds die with it: they ask
the kernel for SIGKILL when their parent dies). Every build that gets as far as its plan
sweeps such directories, not only one that starts a world, once its first commands have
started (or it found nothing to run): cheap (one listing of the temporary folder), and kept
out of the world modules so that a build without worlds imports nothing more. A farmer that
makes such a directory also leaves a mark in its project's `.farmer/` while it has one
(`lock.mark_fifos`): every farmer that takes the project's lock and finds it sweeps at
once, a no-op build too (farmer/files/lock.py), for the price of one stat when there is none.
"""

from __future__ import annotations

import os

PREFIX = "farmer-worlds-"


def fifo_parent() -> str:
    """$XDG_RUNTIME_DIR when it is a folder we may write, else the temporary folder as
    tempfile.gettempdir chooses it (without importing tempfile, which a build spares)."""
    env = os.environ
    for where in (env.get("XDG_RUNTIME_DIR"), env.get("TMPDIR"), env.get("TEMP"),
                  env.get("TMP"), "/tmp", "/var/tmp", "/usr/tmp"):
        if where and os.path.isdir(where) and os.access(where, os.W_OK):
            return where
    return os.getcwd()


def sweep(where: str | None = None) -> None:
    """Remove the FIFO directories of farmers that no longer exist: ours by owner, named
    `farmer-worlds-PID-...` after a process that is gone."""
    if where is None:
        where = fifo_parent()
    try:
        names = [n for n in os.listdir(where) if n.startswith(PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(PREFIX):].partition("-")[0]
        if not pid.isdigit():
            continue
        path = os.path.join(where, name)
        try:
            if os.lstat(path).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue
