"""The server of farmer/cli/client.py: `farmer serve`'s, and `farmer watch`'s between its builds.

A server holds a workspace (build/workspace.py) for its lifetime: the project's lock,
state.db, the stat cache, the graph and the worlds stay warm between builds. It answers
`farmer build|plan|query|graph` run in the project: each command runs here, one at a time,
through the very command line code a farmer run in the client's process would run
(cli/app.py's `run_served`), with the client's descriptors 0, 1 and 2 in place of the
server's, its working directory, environment and umask; so its output, exit status and
files are those of a farmer run there, and its live view is drawn on the client's terminal.

Signals: a client sends SIGINT when it is interrupted, which stops the build run for it
(exit 130 for that client) and not the server; SIGINT while no command runs is a late one of
those and is ignored. SIGTERM and SIGHUP stop the server (and the command it runs);
`serve --stop` asks it over the socket.

What changed since the last build, `farmer serve` learns from the kernel
(files/inotify.py): a no-op is decided from the files it names (build/watched.py); else,
and in `farmer watch`, a build checks the files as every build does.
"""

from __future__ import annotations

import os
import sys
import time

from farmer import __version__
from farmer.build import command
from farmer.build.request import BuildRequest
from farmer.build.workspace import OtherProject, Workspace
from farmer.cli import client
from farmer.cli import exit as ending
from farmer.cli.quick import quick_build_args
from farmer.files.private import make_dir, make_state_dir
from farmer.startup.cheap import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.build.watched import WatchedCheck
    from farmer.files.inotify import Watcher
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec

_READ_S = 5.0  # a client that connected and then says nothing is not waited on longer
_REQUEST_MAX = 64 << 20


class Served:
    """What a command run for a client sees of the server (cli/app.py reads it from click's
    context object): the workspace its builds share, the warm graph its reads share, and
    the kernel's word on what changed (`watcher`, None where there is none)."""

    __slots__ = ("workspace", "watcher", "checker", "old_last_build")

    def __init__(self, workspace: Workspace, watcher: Watcher | None = None,
                 checker: WatchedCheck | None = None) -> None:
        self.workspace = workspace
        self.watcher = watcher
        self.checker = checker
        self.old_last_build: int | None = None  # closed by the server once the client has its answer

    def done(self) -> None:
        """Once the client has its answer: the old last-build.json let go, and the next
        no-op's staged."""
        if self.old_last_build is not None:
            os.close(self.old_last_build)
            self.old_last_build = None
        if self.checker is not None:
            self.checker.ahead.stage()

    def build(self, request: BuildRequest) -> int:
        """A build in the server's workspace: a no-op decided from what the kernel saw
        changed when it can be, else the build as a farmer of its own runs it."""
        code = self._watched_noop(request)
        if code is not None:
            return code
        watcher = self.watcher
        if watcher is not None and not request.dry_run:
            # This build checks every file (its proof's, or all it reads): what changes from
            # now on is the next one's to see.
            watcher.drain()
            if watcher.lost:
                watcher.reset()
            watcher.clear()
            watcher.fresh = False
            if self.checker is not None:
                self.checker.full += 1
        return self.workspace.build(request)

    def _watched_noop(self, request: BuildRequest) -> int | None:
        watcher = self.watcher
        if watcher is None or self.checker is None or not watcher.reliable or request.dry_run \
                or request.trace_file:
            return None
        watcher.drain()
        if watcher.lost or watcher.fresh:  # it may have missed something: every file is checked
            return None
        cwd = os.getcwd()
        code = self._noop_here(request.checked(), watcher)
        if code is None:
            os.chdir(cwd)  # where the build that goes on starts from (-C)
        return code

    def _noop_here(self, request: BuildRequest, watcher: Watcher) -> int | None:
        ninja = request.is_ninja()
        if ninja:  # as the workspace finds it (build/workspace.py)
            command.enter(request.directory)
            farmfile = os.path.abspath(request.farmfile if request.farmfile_given else "build.ninja")
        elif request.farmfile_given:
            command.enter(request.directory)
            farmfile = command.find_farmfile(request.farmfile, True)
        else:
            farmfile, _ = command.named_manifest(request.directory, request.farmfile, False, False)
            ninja = command.is_ninja(farmfile, False)
        if os.path.dirname(farmfile) != self.workspace.root:
            return None
        os.chdir(self.workspace.root)
        from farmer.build import noop
        from farmer.errors import TaskError

        # The last build's last-build.json, held open while this one replaces it: the file
        # system frees the old one's blocks at its last close, once the client has its answer,
        # not in the rename the client waits for (megabytes at 10 000 computations).
        self.old_last_build = _open_quietly(os.path.join(self.workspace.root, ".farmer", "last-build.json"))
        hooks = {"check": self.checker.check, "reader": self.checker.proofs.read, "writer": self.checker.ahead.write}
        try:
            if ninja:  # the manifest's stamp (its files and what regenerates it), then the proof
                outcome = command.ninja_noop(farmfile, request.targets, request.jobs, self.workspace.lock,
                                             request.base_dir, request.ending(), **hooks)
            else:
                outcome = noop.try_build(farmfile, request.targets, request.jobs, **hooks)
        except TaskError:  # the full path says it, with the Farmfile's line
            self.checker.proofs.forget()
            return None
        if not isinstance(outcome, int):
            self.checker.proofs.forget()
            return None
        watcher.clear()
        self.checker.noops += 1
        return command.built(outcome)

    def load(self, directory: str | None, farmfile: str, ninja: bool, given: bool) -> tuple[Spec, Graph]:
        """`plan`, `query` and `graph`'s project: the graph the last build left warm while it
        is still the Farmfile's, else read as those commands read it."""
        farmfile, given = command.named_manifest(directory, farmfile, given, ninja)
        if not command.is_ninja(farmfile, ninja):
            warm = self.workspace.warm_graph(command.find_farmfile(farmfile, given), None)
            if warm is not None:
                return warm
        return command.load_project(None, farmfile, False, ninja, given)

    def interrupted(self, code: int) -> int:
        print("farmer: interrupted", file=sys.stderr, flush=True)
        return code


class Server:
    """The loop: accept a client, run its command, until idle for `idle_s` or stopped."""

    def __init__(self, root: str, idle_s: float, runner: Callable[[list[str], Served], int],
                 workspace: Workspace | None = None, handlers: Callable[[], None] | None = None) -> None:
        self.root = root
        self.idle_s = idle_s
        self.runner = runner
        # farmer watch's own workspace and signal handlers, when it serves between its builds
        self.workspace = workspace if workspace is not None else Workspace(keep=True, role="serve")
        self.role = self.workspace.role
        self.handlers = handlers or self._idle_handlers
        self.watcher: Watcher | None = None  # farmer serve's (farmer watch has its own)
        self.checker: WatchedCheck | None = None
        self.path = client.socket_path(root)
        self.identity = client.identity()
        self.listener = None
        self.started = time.time()
        self.last = _clock()
        self.commands = 0
        self.stopping = False
        self.busy = False
        self.signals: list[int] = []  # those that came while a command ran
        self.worlds_env = _environment(os.environ)  # what the warm worlds were set up under

    # -- start and end ---------------------------------------------------------------

    def open(self) -> None:
        """Take the project's lock (LockHeld: another farmer has it), watch the project's
        files, and listen."""
        self.workspace.hold(self.root)
        from farmer.files.inotify import Unavailable, Watcher

        try:
            self.watcher = Watcher(self.root)
        except (Unavailable, OSError, AttributeError, ImportError) as e:
            print(f"farmer serve: no inotify ({e}): every build checks every file", flush=True)
        else:
            from farmer.build.watched import WatchedCheck

            self.checker = WatchedCheck(self.watcher)
            if not self.watcher.reliable:
                print("farmer serve: a network or shared file system: every build checks every file", flush=True)
        self.listen()

    def listen(self) -> None:
        """Listen (under the project's lock, which the workspace holds)."""
        self.listener = _listen(self.path)

    def close(self) -> None:
        try:
            self.unlisten()
            if self.watcher is not None:
                self.watcher.close()
            if self.checker is not None:
                self.checker.ahead.drop()
                self.checker.proofs.forget()
        finally:
            self.workspace.close()

    def unlisten(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            unlink(self.path)

    # -- farmer watch's: between its builds --------------------------------------------------

    def pending(self) -> bool:
        """Whether a client waits (watchfiles asks, as its stop event, while it waits)."""
        import select

        return self.listener is not None and bool(select.select([self.listener], [], [], 0)[0])

    is_set = pending  # watchfiles' stop event

    def serve_pending(self) -> bool:
        """Answer the clients waiting now; False when one asked the server to stop, or a
        SIGTERM or SIGHUP came while a command ran."""
        while not self.stopping and self.pending():
            try:
                conn = _accept(self.listener)
            except OSError:
                return True
            try:
                self.answer(conn)
            except _Stop:
                self.stopping = True
            finally:
                conn.close()
        return not self.stopping

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> int:
        import select

        self._idle_handlers()
        while not self.stopping:
            left = self.idle_s - (_clock() - self.last)
            if left <= 0:
                break
            watching = [self.watcher] if self.watcher is not None and self.watcher.fd >= 0 else []
            try:
                ready, _, _ = select.select([self.listener, *watching], [], [], min(left, 3600.0))
            except _Stop:
                break
            if watching and watching[0] in ready:
                self.watcher.drain()  # while idle: the kernel's queue never fills
            if self.listener in ready:
                try:
                    conn = _accept(self.listener)
                except OSError:
                    continue
                try:
                    self.answer(conn)
                except _Stop:
                    break
                except Exception:  # a bug answering one client: said in the log, the server goes on
                    import traceback

                    traceback.print_exc()
                finally:
                    conn.close()
                self.last = _clock()
        return 0

    def answer(self, conn) -> None:
        """One client: its hello, then its command, status or stop."""
        conn.settimeout(_READ_S)
        try:
            if not client.peer_allowed(client.peer_uid(conn), os.getuid()):
                return
            words = client.read_line(conn).split()
        except OSError:
            return
        if len(words) != 3 or words[0] != client.MAGIC:
            return
        verb, theirs = words[1], words[2].decode(errors="replace")
        mine = theirs == self.identity
        hello = b"ok %d\n" % os.getpid() if mine else b"other %d %s\n" % (os.getpid(), __version__.encode())
        try:
            if verb == b"status":
                data = _marshalled(self.status())
                conn.sendall(hello + len(data).to_bytes(8, "little") + data)
            elif verb == b"stop":
                conn.sendall(hello)
                self.stopping = True
            elif verb == b"run":
                conn.sendall(hello)
                if mine:
                    self._command(conn)
        except OSError:
            pass

    def _command(self, conn) -> None:
        # A client's SIGINT from now on is for this command: kept until it runs, which then
        # stops at once (the client sends it as soon as it has asked).
        self.signals = []
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self._keep)
        try:
            request, fds = _receive(conn)
        except BaseException:
            self.handlers()
            raise
        if request is None:
            self.handlers()
            return
        served = Served(self.workspace, self.watcher, self.checker)
        try:
            try:
                code = self.run_command(request, fds, served)
            except OtherProject:  # it runs in the client (nothing was printed)
                conn.sendall(b"local\n")
                return
            self.commands += 1
            try:
                conn.sendall(b"exit %d\n" % code)
            except OSError:
                pass  # the client has gone: its command ran to its end all the same
        finally:
            served.done()
        if any(s != signal.SIGINT for s in self.signals):
            raise _Stop()

    def run_command(self, request: dict, fds: list[int], served: Served) -> int:
        """A client's command, run with its descriptors, directory, environment and umask;
        its exit status. OtherProject: it builds another project (nothing was printed)."""
        saved = [os.dup(k) for k in (0, 1, 2)]
        streams = sys.stdin, sys.stdout, sys.stderr
        environ = dict(os.environ)
        umask = os.umask(request.get("umask", 0o022))
        try:
            for k, fd in enumerate(fds[:3]):
                os.dup2(fd, k)
            for fd in fds:
                os.close(fd)
            fds = []
            encoding, errors = request.get("encoding", "utf-8"), request.get("errors", "strict")
            # As the interpreter makes them: stdout line-buffered on a terminal, stderr always.
            sys.stdout = ending.ReaderGone(open(1, "w", 1 if os.isatty(1) else -1, encoding, errors,
                                                closefd=False))
            sys.stderr = ending.ReaderGone(open(2, "w", 1, encoding, "backslashreplace", closefd=False))
            sys.stdin = open(0, encoding=encoding, closefd=False)
            os.environ.clear()
            os.environ.update(request["env"])
            self._worlds_for(os.environ)
            self.busy = True
            self._command_handlers()
            if self.signals:  # the client was stopped before its command began
                print("farmer: interrupted", file=sys.stderr, flush=True)
                return 128 + self.signals[0]
            os.chdir(request["cwd"])
            argv = list(request["argv"])
            args = quick_build_args(argv)
            if args is None:
                return self.runner(argv, served)
            # The common form of `farmer build`, as farmer/__main__.py reads it without click.
            request = BuildRequest(**args, farmfile_given="farmfile" in args)
            return ending.guarded(lambda: served.build(request), served.interrupted)
        except OSError as e:  # its directory is gone, say
            print(f"farmer: error: {e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}",
                  file=sys.stderr)
            return 2
        finally:
            self.busy = False
            self.handlers()
            for fd in fds:
                os.close(fd)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            sys.stdin, sys.stdout, sys.stderr = streams
            for k, fd in enumerate(saved):
                os.dup2(fd, k)
                os.close(fd)
            os.environ.clear()
            os.environ.update(environ)
            os.umask(umask)
            os.chdir(self.root)
            lock = self.workspace.lock
            if lock is not None:
                del lock.early[:]  # a client's Ctrl-C stopped its command, not this server

    def _worlds_for(self, environ) -> None:
        """Warm worlds set up under another environment than this command's (another
        shell's variables) go: a world's set-up may read them."""
        worlds = self.workspace.worlds
        digest = _environment(environ)
        if worlds is not None and worlds.kept and digest != self.worlds_env:
            worlds.retain(())
        self.worlds_env = digest  # the worlds this command sets up are set up under it

    # -- signals ---------------------------------------------------------------------------

    def _idle_handlers(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a client's, late: its command has ended
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self._stop)

    def _command_handlers(self) -> None:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self._interrupt)

    def _keep(self, signum: int, frame: object) -> None:
        self.signals.append(signum)

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True
        raise _Stop()

    def _interrupt(self, signum: int, frame: object) -> None:
        """Before the build has its own handlers (which stop it the same way)."""
        self.signals.append(signum)
        stop = KeyboardInterrupt()
        stop.signum = signum  # type: ignore[attr-defined]
        raise stop

    # -- status ------------------------------------------------------------------------------

    def status(self) -> dict:
        ws = self.workspace
        holds = ["the lock", "state.db" if ws.state is not None else None]
        if ws.graph is not None:
            holds.append(f"the graph of {os.path.relpath(ws.spec.path, self.root)} "
                         f"({len(ws.graph.computations)} computations)")
        if ws.worlds is not None and ws.worlds.kept:
            holds.append("worlds " + ", ".join(sorted(ws.worlds.kept)))
        return {"pid": os.getpid(), "version": __version__, "role": self.role, "root": self.root,
                "uptime_s": time.time() - self.started, "idle_s": _clock() - self.last,
                "idle_limit_s": self.idle_s, "commands": self.commands, "busy": self.busy,
                "holds": [h for h in holds if h], "rss_kb": _rss_kb(), "worlds_rss_kb": _worlds_rss_kb(ws),
                "watching": self._watching()}

    def _watching(self) -> str:
        watcher, checker = self.watcher, self.checker
        if watcher is None or checker is None:
            return "no watcher: every build checks every file"
        if not watcher.reliable:
            return "a network or shared file system: every build checks every file"
        return (f"{len(watcher.watched)} folders (inotify); {checker.noops} no-ops from the kernel's "
                f"events, {checker.full} builds that checked every file")


class _Stop(BaseException):
    """SIGTERM, SIGHUP or `serve --stop`: the loop ends."""


# What differs between two shells of one user without changing what a program computes: not
# compared when deciding whether warm worlds were set up under this command's environment.
_SHELL_ONLY = ("PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLUMNS", "LINES", "WINDOWID", "TERM_SESSION_ID",
               "SSH_TTY", "TMUX_PANE", "PS1", "PROMPT_COMMAND")


def _environment(environ) -> str:
    from farmer.files.digests import hash_text

    return hash_text(*(f"{k}={v}" for k, v in sorted(environ.items()) if k not in _SHELL_ONLY))


def _clock() -> float:
    """Seconds that go on while the machine sleeps (an idle limit counts them)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _listen(path: str):
    """A listening socket at `path`, made under another name and renamed there, so that a
    socket found at `path` is a listening one or a dead server's. Called under the project's
    lock: one found there is a dead server's, and goes."""
    import _socket

    folder = os.path.dirname(path)
    if os.path.basename(folder) == ".farmer":
        make_state_dir(folder)
    else:
        make_dir(folder)
        if os.lstat(folder).st_uid != os.geteuid():  # (clients check the server's uid all the same)
            from farmer.errors import UsageError

            raise UsageError(f"{folder} belongs to another user: set XDG_RUNTIME_DIR to a folder of yours")
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    temporary = f"{path}.{os.getpid()}"
    unlink(temporary)
    old = os.umask(0o077)
    try:
        sock.bind(temporary)
    finally:
        os.umask(old)
    sock.listen(16)
    os.rename(temporary, path)
    return sock


def _open_quietly(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None


def _accept(listener):
    """The next client's connection (`_socket`'s sockets accept a descriptor)."""
    import _socket

    fd, _ = listener._accept()
    return _socket.socket(fileno=fd)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _receive(conn) -> tuple[dict | None, list[int]]:
    """A client's command and the descriptors it sent (closed here if the command is not whole)."""
    import _socket
    import marshal

    fds: list[int] = []
    data, ancillary, _, _ = conn.recvmsg(1 << 16, _socket.CMSG_SPACE(3 * 4), _socket.MSG_CMSG_CLOEXEC)
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[k:k + 4], sys.byteorder, signed=True)
                    for k in range(0, len(payload) - len(payload) % 4, 4)]
    try:
        if len(data) < 8 or len(fds) != 3:
            raise ValueError("not a command")
        size = int.from_bytes(data[:8], "little")
        if size > _REQUEST_MAX:
            raise ValueError("too long")
        body = bytearray(data[8:])
        while len(body) < size:
            chunk = conn.recv(min(1 << 20, size - len(body)))
            if not chunk:
                raise ValueError("cut short")
            body += chunk
        request = marshal.loads(bytes(body))
        if not isinstance(request, dict) or not isinstance(request.get("argv"), list) \
                or not isinstance(request.get("env"), dict) or not isinstance(request.get("cwd"), str):
            raise ValueError("not a command")
        return request, fds
    except (OSError, ValueError, EOFError, TypeError):
        for fd in fds:
            os.close(fd)
        return None, []


def _marshalled(data: dict) -> bytes:
    import marshal

    return marshal.dumps(data)


def _rss_kb(pid: int | str = "self") -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _worlds_rss_kb(ws: Workspace) -> int | None:
    if ws.worlds is None or not ws.worlds.kept:
        return None
    sizes = [_rss_kb(proc.pid) for proc, _ in ws.worlds.kept.values() if getattr(proc, "pid", None)]
    return sum(s for s in sizes if s) or None
