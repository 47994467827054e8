"""Runs computations as fresh processes, each in its own process group.

Children are started with posix_spawn (no fork of the large farmer process), and exits are
noticed through pidfds in one selector (SIGCHLD on the wake-up fd where pidfds are
missing), then reaped with wait4 for the child's CPU time and peak RSS.

stdout and stderr go to a memory file (memfd), copied into the computation's log when it ends,
if it printed anything or failed; a successful run that printed nothing has no log, as one
restored from the cache (docs/up-to-date.md). Creating a file is most of what a small command
costs beyond its exec on some file systems (as much as running `cat` on ext4: see
bench/results/performance-notes.md#figures-from-code-comments), and that file was made for
every computation while farmer waited for the child's exec. Where memfds are missing, the child
writes its log itself.
"""

from __future__ import annotations

import os
import time

from farmer.files.private import open_file, unlink_link
from farmer.graph.graph import Computation
from farmer.run.executors.base import Executor, Outcome
from farmer.run.executors.events import READ, event_loop
from farmer.run.executors.shell import Direct, direct
from farmer.startup.cheap import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.run.orphans import GroupLog

# What every child farmer spawns (a computation's, a world's) starts with at its default
# action, whatever farmer ignores or handles itself.
RESET_SIGNALS = {signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGXFSZ,
                 signal.SIGCHLD}


_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW


def _output_to(output: int | None, log: str) -> tuple:
    """The file action that makes fd 2 the run's output: its memory file, or its log."""
    if output is None:
        return (os.POSIX_SPAWN_OPEN, 2, log, _LOG_FLAGS, 0o644)
    return (os.POSIX_SPAWN_DUP2, output, 2)


def _direct_actions(plain: Direct, output: int | None, log: str) -> list[tuple]:
    """stdin from /dev/null; stdout to the output, or to the `>` file with stderr to the output."""
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), _output_to(output, log)]
    if plain.stdout is None:
        actions.append((os.POSIX_SPAWN_DUP2, 2, 1))
    else:
        mode = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if plain.append else os.O_TRUNC)
        actions.append((os.POSIX_SPAWN_OPEN, 1, plain.stdout, mode, 0o666))
    return actions


def _memory_file() -> int | None:
    """A memory file for a run's output (close-on-exec, above stderr so that a dup2 onto
    1 or 2 always copies it), or None where there is none."""
    try:
        fd = os.memfd_create("farmer-output", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # not Linux, or out of descriptors: the log file then
        return None
    if fd > 2:
        return fd
    try:  # farmer's own stdin, stdout or stderr was closed
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return None
    finally:
        os.close(fd)


def _keep_output(output: int, logs: str, cid: str, failed: bool, older: bool) -> bool | None:
    """Copy a run's output from its memory file into its log (of `cid` in `logs`); a run
    that printed nothing and succeeded leaves no log (an older run's is removed; `older`:
    there may be one). A log that cannot be written (a full disk) costs only the log, as it
    did when the command wrote it. Whether it printed anything (None: not known)."""
    size = None
    try:
        size = os.fstat(output).st_size
        if size == 0 and not failed and not older:
            return False
        log = log_path(logs, cid)
        if size == 0 and not failed:
            if older:
                try:
                    os.unlink(log)
                except FileNotFoundError:
                    pass
            return False
        fd = open_file(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            offset = 0
            while offset < size:
                data = os.pread(output, min(size - offset, 1 << 20), offset)
                if not data:
                    break
                offset += len(data)
                while data:
                    data = data[os.write(fd, data):]
        finally:
            os.close(fd)
    except OSError:
        pass
    finally:
        os.close(output)
    return None if size is None else size > 0


def log_path(logs: str | os.PathLike, comp_id: str) -> str:
    """One log file per computation; ids become flat, readable file names."""
    name = comp_id.replace("%", "%25").replace("/", "%2F")
    if len(name.encode()) > 200:
        import hashlib

        name = name[:100] + "-" + hashlib.sha1(comp_id.encode()).hexdigest()[:16]
    return os.path.join(logs, name + ".log")


def reads_path(logs: str | os.PathLike, comp_id: str) -> str:
    """Where a python step's driver writes what it read (run/worlds/reads.py), beside its log."""
    return log_path(logs, comp_id)[:-4] + ".reads"


def drop_empty_log(log: str) -> None:
    """A successful run that printed nothing leaves no log (the rule `_keep_output` follows),
    for executors whose runs write their logs themselves (worlds)."""
    try:
        if os.lstat(log).st_size == 0:
            os.unlink(log)
    except OSError:
        pass


def _on_path(name: str) -> str | None:
    """The first executable regular file called `name` in the directories of PATH, as
    execvp looks (an empty entry is the working directory), or None."""
    for folder in os.environ.get("PATH", "/bin:/usr/bin").split(":"):
        path = os.path.join(folder, name) if folder else name
        if os.access(path, os.X_OK) and os.path.isfile(path):
            return path if folder else "./" + name
    return None


def keep_log(log: str) -> None:
    """An empty log where a run has none: a failure's message names its log, and a command
    that printed nothing and exited 0 can still fail (a declared output missing)."""
    try:
        os.close(open_file(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    except OSError:
        pass


class _Running:
    __slots__ = ("index", "pid", "pidfd", "start", "deadline", "timeout", "killed_for", "group",
                 "output", "cid")

    def __init__(self, index: int, pid: int, pidfd: int | None, start: float,
                 deadline: float | None, timeout: float | None, killed_for: str | None = None,
                 group: bool = True, output: int | None = None, cid: str = "") -> None:
        self.index, self.pid, self.pidfd = index, pid, pidfd
        self.start = start  # monotonic
        self.deadline, self.timeout, self.killed_for = deadline, timeout, killed_for
        self.group = group  # leads its own process group (not a console-pool command)
        self.output = output  # the memory file its stdout and stderr go to, if any
        self.cid = cid  # the computation's id, which names its log


class ProcessExecutor(Executor):
    """Its selector is the build's one event loop: other executors (worlds) register their
    descriptors on it with a callable as data, called with the descriptor when it is ready.
    It knows nothing of traces, digests or the graph: a computation in, an `Outcome` out."""

    def __init__(self, logs: str | os.PathLike, t0: float, timeout: float | None,
                 wake_fd: int | None, load: float | None = None) -> None:
        self.logs = os.fspath(logs)
        self.load = load
        self.t0 = t0  # monotonic time of the build's start
        self.default_timeout = timeout
        self.selector = event_loop()
        self.wake_fd = wake_fd
        if wake_fd is not None:
            self.selector.register(wake_fd, READ, None)
        self.by_pid: dict[int, _Running] = {}
        self._finished: list[Outcome] = []
        self._use_pidfd = hasattr(os, "pidfd_open")
        self._env = dict(os.environ)
        self._programs: dict[str, str | None] = {}  # name -> where PATH finds it, this build
        self.logs_new = False  # the logs folder was made for this build: no older log in it
        self.groups: GroupLog | None = None  # where the groups it starts are recorded
        # What runs instead of a `cmd` computation's argv (`wrap(comp, argv)`: under a
        # tracer, farmer/record/checkdeps.py); None: the argv as it is.
        self.wrap: Callable[[Computation, list[str]], list[str]] | None = None

    def running(self) -> int:
        """Computations started and not yet reported back (reaped ones included)."""
        return len(self.by_pid) + len(self._finished)

    def start(self, comp: Computation) -> None:
        now = time.monotonic()
        env = {**self._env, **comp.env} if comp.env else self._env
        # ninja's console pool: the terminal's stdin/stdout/stderr, in farmer's process group.
        console = comp.ninja is not None and comp.ninja.console
        output = None
        log = ""  # its path, where the run writes it itself (else `_keep_output` makes it)
        if console:
            log = log_path(self.logs, comp.id)
            os.close(open_file(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        else:
            output = _memory_file()
            if output is None:
                log = log_path(self.logs, comp.id)
                unlink_link(log)  # farmer's own file: never written through a planted link
        group = {} if console else {"setpgroup": 0}
        argv = None
        try:
            pid = None
            # (a wrapped command runs through the shell: its `>` files opened in the tracee)
            wrap = self.wrap if comp.kind == "cmd" else None
            plain = direct(comp.action) if comp.kind == "cmd" and not console and comp.action and wrap is None \
                else None
            if plain is not None:
                try:  # no shell needed: one exec instead of two
                    program = self._program(plain.argv[0])
                    spawn = os.posix_spawnp if program is None else os.posix_spawn
                    pid = spawn(program or plain.argv[0], plain.argv, env,
                                file_actions=_direct_actions(plain, output, log), **group,
                                setsigdef=RESET_SIGNALS, setsigmask=())
                except OSError:
                    pass  # let the shell run it and say what is wrong, as it would have
            if pid is None:
                argv = comp.argv(reads_path(self.logs, comp.id) if comp.kind == "python" else None)
                if wrap is not None:
                    argv = wrap(comp, argv)
                actions = [] if console else [
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    _output_to(output, log),
                    (os.POSIX_SPAWN_DUP2, 2, 1),
                ]
                pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, **group,
                                      setsigdef=RESET_SIGNALS, setsigmask=())
        except OSError as e:
            if output is not None:
                os.close(output)
            with os.fdopen(open_file(log or log_path(self.logs, comp.id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w") as f:
                f.write(f"farmer: cannot start {argv[0]}: {e.strerror}\n")
            self._finished.append(Outcome(comp.index, False, "exit 127", 127, now - self.t0, now - self.t0))
            return
        timeout = comp.timeout if comp.timeout is not None else self.default_timeout
        pidfd = None
        if self._use_pidfd:
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                self._use_pidfd = False  # old kernel: fall back to SIGCHLD on the wake-up fd
        run = _Running(comp.index, pid, pidfd, now, now + timeout if timeout else None, timeout,
                       group=not console, output=output, cid=comp.id)
        self.by_pid[pid] = run
        if self.groups is not None and run.group:
            self.groups.started(pid)
        if pidfd is not None:
            self.selector.register(pidfd, READ, run)

    def _program(self, name: str) -> str | None:
        """Where posix_spawnp would find `name` on farmer's PATH, looked up once a build:
        the child, which farmer waits for until it execs, then makes one exec instead of
        one per PATH entry before it. None: not found (posix_spawnp then says so)."""
        if "/" in name:
            return name
        found = self._programs.get(name, "")
        if found == "":
            found = self._programs[name] = _on_path(name)
        return found

    def wait(self, timeout: float | None) -> list[Outcome]:
        if self._finished:
            done, self._finished = self._finished, []
            return done
        deadlines = [r.deadline for r in self.by_pid.values() if r.deadline is not None]
        if deadlines:
            until = min(max(0.0, min(deadlines) - time.monotonic()), 86400.0)  # select's limit
            timeout = until if timeout is None else min(timeout, until)
        if not self._use_pidfd:
            timeout = 0.05 if timeout is None else min(timeout, 0.05)
        for key, _ in self.selector.select(timeout):
            if key.data is None:
                drain(key.fd)
            elif isinstance(key.data, _Running):
                self._reap(key.data, block=False)
            else:  # another executor's descriptor on the build's one selector (worlds)
                key.data(key.fd)
        if not self._use_pidfd:
            for run in list(self.by_pid.values()):
                self._reap(run, block=False)
        now = time.monotonic()
        for run in list(self.by_pid.values()):
            if run.deadline is not None and now >= run.deadline:
                run.killed_for = f"timeout after {run.timeout:g} s"
                self._kill(run)
        done, self._finished = self._finished, []
        return done

    def stop(self) -> None:
        for run in list(self.by_pid.values()):
            run.killed_for = "interrupted"
            self._kill(run)

    def close(self) -> None:
        self.stop()
        self.selector.close()

    def _kill(self, run: _Running) -> None:
        try:
            if run.group:
                os.killpg(run.pid, signal.SIGKILL)
            else:
                os.kill(run.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap(run, block=True)

    def _reap(self, run: _Running, block: bool) -> None:
        try:
            pid, status, usage = os.wait4(run.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pid, status, usage = run.pid, 0, None
        if pid == 0:
            return
        end = time.monotonic()
        del self.by_pid[run.pid]
        if run.group:  # what it left running in its group (`daemon &`) ends with it, as in Bazel
            try:
                os.killpg(run.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if run.pidfd is not None:
            self.selector.unregister(run.pidfd)
            os.close(run.pidfd)
        code = os.waitstatus_to_exitcode(status) if usage is not None else None
        if run.killed_for is not None:
            ok, reason = False, run.killed_for
        elif code == 0:
            ok, reason = True, None
        elif code is not None and code < 0:
            ok, reason = False, f"signal {-code}"
        else:
            ok, reason = False, f"exit {code}"
        printed = None if run.output is None else _keep_output(run.output, self.logs, run.cid, not ok,
                                                                      not self.logs_new)
        outcome = Outcome(
            index=run.index, ok=ok, reason=reason,
            exit_code=code if code is not None and code >= 0 else None,  # a signal is no exit
            start_s=run.start - self.t0, end_s=end - self.t0,
            cpu_s=(usage.ru_utime + usage.ru_stime) if usage else None,
            max_rss_kb=usage.ru_maxrss if usage else None,
        )
        outcome.printed = printed
        self._finished.append(outcome)


def drain(fd: int) -> None:
    """Read a non-blocking wake-up pipe empty."""
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass
