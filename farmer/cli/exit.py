"""How every command ends: errors as one-line messages and exit statuses, signals as a clean
exit, a reader that has gone as nobody reading (SPEC §3, §4). `main` runs a command under that
contract; `farmer build`'s quick path (farmer/__main__.py) and click's (cli/app.py) both end
through it."""

from __future__ import annotations

import os
import sys

from farmer.errors import LockHeld, UsageError
from farmer.startup.cheap import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn


class Stopped(BaseException):
    """SIGTERM or SIGHUP outside a build's own handling: the same clean exit as Ctrl-C.
    (Not a KeyboardInterrupt: click would turn that into Abort, exit 130.)"""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


class ReaderGone:
    """sys.stdout or sys.stderr that, once its reader has gone (`farmer build | head -1`
    closes the pipe), drops what follows instead of failing: the build goes on, writes
    last-build.json and exits with its own status, as if nobody was reading."""

    __slots__ = ("stream",)

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        # /dev/null in the pipe's place: what the stream still buffers, and every later
        # write, by farmer or at interpreter exit, goes nowhere without an error.
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def main(command: Callable[[], int | None], leave_at_once: bool = False) -> NoReturn:
    """Run a command and exit with its status; errors end it with a one-line message.
    `leave_at_once`: end without the interpreter's teardown (`leave`)."""
    if sys.stdout is not None and not isinstance(sys.stdout, ReaderGone):
        sys.stdout = ReaderGone(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, ReaderGone):
        sys.stderr = ReaderGone(sys.stderr)
    try:
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, _stop)
        code = guarded(command)
    finally:
        # The outcome is decided: a signal now (a second Ctrl-C while farmer exits) must
        # not turn the exit status into a KeyboardInterrupt or a death by signal.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
    if leave_at_once:
        leave(code)
    sys.exit(code)


def leave(code: int) -> NoReturn:
    """Exit with `code` through os._exit, once a build has ended: the interpreter's own
    teardown (freeing the graph, the modules, every object one by one) costs a build
    milliseconds of CPU, more the larger its graph, and changes nothing on disk. What it
    would do that matters is done here: a build has closed state.db (its checkpoint),
    last-build.json and the logs itself, and stdout and stderr are flushed (a reader that
    has gone: ReaderGone). Anything unusual takes the ordinary way out: a thread still
    running (the interpreter joins it), exit handlers or a profiler or tracer (`python -m
    cProfile`, coverage: they save their data at exit), a flush that fails."""
    import atexit  # built in

    threading = sys.modules.get("threading")
    running = threading is not None and any(t.is_alive() and not t.daemon and t is not threading.main_thread()
                                            for t in threading.enumerate())
    if running or getattr(atexit, "_ncallbacks", lambda: 1)() or sys.getprofile() or sys.gettrace():
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            sys.exit(code)
    os._exit(code)


def interrupted(code: int) -> NoReturn:
    """Leave at once with 128 + the signal. (Not through sys.exit: a KeyboardInterrupt that
    passed through an exec() of a string, as dataclasses do while farmer imports, leaves
    CPython 3.11 set to kill itself with SIGINT at exit, whatever the exit status.)"""
    print("farmer: interrupted", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def guarded(command: Callable[[], int | None], on_interrupt: Callable[[int], int] | None = None) -> int:
    """The exit status of `command`, its errors said in one line. A signal that stops it
    leaves the process at once (`interrupted`), or with `on_interrupt`, is handed to it
    with 128 + the signal (a server's, which goes on: cli/server.py)."""
    try:
        return command() or 0
    except (UsageError, LockHeld) as e:
        print(f"farmer: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # The file system said no (read-only, full, permissions): say what and where.
        where = f"{e.filename}: " if e.filename else ""
        print(f"farmer: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Stopped) as e:
        code = 128 + getattr(e, "signum", signal.SIGINT)
        if on_interrupt is None:
            interrupted(code)
        return on_interrupt(code)
    except Exception as e:
        sqlite3 = sys.modules.get("_sqlite3")  # only a command that opened state.db has it (state.py)
        if sqlite3 is None or not isinstance(e, sqlite3.Error):
            raise
        # Full, read-only, I/O: the disk's trouble, and the state is intact; else damage.
        hint = ("check the disk's free space and permissions" if isinstance(e, sqlite3.OperationalError)
                else "remove .farmer/ to start afresh")
        print(f"farmer: error: .farmer/state.db: {e}; {hint}", file=sys.stderr)
        return 2
