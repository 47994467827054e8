"""The client of a resident farmer (`farmer serve`, `farmer watch`): before anything heavy is
imported, `farmer build|plan|query|graph` asks whether a server runs for the project, is
its user's and of this very farmer; if so, the server runs the command with this process's
stdin, stdout and stderr (passed over the socket, SCM_RIGHTS), so its output is this
terminal's, live view included, and this process exits with the command's status.

A server that is gone (its socket refuses), stuck or stopped (no answer within `ANSWER_S`),
of another user or another farmer is never waited for: `served` returns None and the command
runs in this process as without a server (where, if that server still holds the project's
lock, it exits 3 naming it: files/lock.py).

Only the standard library's built-in modules are imported here (`_socket`, not `socket`,
which imports enum and selectors): this is on the path of every `farmer build`. The server's
side is farmer/cli/server.py; both speak the wire format below.

Wire format, on a Unix stream socket: the client sends one line, `farmer-serve1 VERB
IDENTITY` (VERB: run, status, stop); the server answers one line, `ok PID` or `other PID
VERSION` (another farmer: nothing else is said), then for `status` a marshalled dict and for
`stop` nothing more. For `run`, the client sends the command (a length, then a marshalled
dict) with its descriptors 0, 1 and 2 attached, and the server answers, once the command
ends, its exit status (`exit N` on a line). A Ctrl-C here is sent to the server as SIGINT:
the build it runs for this client stops, the server goes on.
"""

from __future__ import annotations

import os
import sys

from farmer import __version__

SERVED = ("build", "plan", "query", "graph")
ANSWER_S = 1.0  # a server that has not answered the hello by then is not waited for
MAGIC = b"farmer-serve1"
SOCKET_NAME = "serve.sock"
_MAX_SUN_PATH = 107  # sockaddr_un's path, without its final NUL

# The options of the served commands beyond `farmer build`'s table (farmer/cli/quick.py, which
# imports nothing): a command line with any other option (or options run together) is not
# looked into, and runs here.
_OTHER_VALUED = ("--format",)
_OTHER_FLAGS = ("--simulate", "--from-scratch", "--json")


def _options() -> tuple[set[str], set[str]]:
    """The served commands' options that take a value, and those that take none (a count
    such as -k is read as one: a number after it is a word like a target)."""
    from farmer.cli.quick import BUILD_OPTIONS, COUNT, FLAG, SWITCH
    valued, flags = set(_OTHER_VALUED), set(_OTHER_FLAGS)
    for option in BUILD_OPTIONS:
        (flags if option.kind in (FLAG, SWITCH, COUNT) else valued).update(option.flags)
    return valued, flags


# The farmer sources whose stat data, with the version, tells one farmer from another (an
# upgrade, another checkout, an edited tree): a server of other code is not used.
_STAMPED = ("__init__.py", "__main__.py", "cli/client.py", "cli/server.py", "cli/app.py",
            "build/workspace.py", "build/run.py", "build/noop.py", "store/proof.py", "plan/uptodate.py",
            "graph/graph.py", "manifest/farmfile.py", "files/digests.py")


def identity() -> str:
    """This farmer: its version and its sources' stat data, as one word."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [__version__]
    for name in _STAMPED:
        try:
            st = os.stat(os.path.join(package, name))
            parts.append(f"{st.st_mtime_ns:x}.{st.st_size:x}.{st.st_ino:x}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


def command_project(argv: list[str], cwd: str) -> str | None:
    """The project root the served command `argv` (its words after `farmer`) names, as the
    command itself would find it (-C, -f, the Farmfile here or above, a build.ninja here);
    None when `argv` is not a served command in a form read here (it then runs here)."""
    if not argv or argv[0] not in SERVED:
        return None
    valued, flags = _options()
    directory = farmfile = None
    ninja = False
    i, n = 1, len(argv)
    while i < n:
        arg = argv[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in flags and not eq:
            ninja = ninja or name == "--ninja"
            continue
        if name not in valued:
            if arg[:2] in ("-C", "-f", "-j", "-l") and len(arg) > 2:  # -Cdir, -j4
                name, value, eq = arg[:2], arg[2:], "="
            else:
                return None  # --help, an unknown option, -kn: click's to read
        if not eq:
            if i >= n:
                return None
            value = argv[i]
            i += 1
        if name == "-C":
            directory = value
        elif name == "-f":
            farmfile = value
    # As the command finds it once in -C DIR: from the working directory, which has no symlink.
    here = os.path.realpath(os.path.join(cwd, directory) if directory is not None else cwd)
    if farmfile is not None:
        return os.path.dirname(os.path.abspath(os.path.join(here, farmfile)))
    if ninja:  # build.ninja here
        return here
    if os.path.isfile(os.path.join(here, "build.ninja")) and not os.path.exists(os.path.join(here, "Farmfile")):
        return here
    at = here
    while True:
        if os.path.exists(os.path.join(at, "Farmfile")):
            return at
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent


def socket_path(root: str) -> str:
    """Where the server of the project at `root` listens: `.farmer/serve.sock` (in the
    project's 0700 folder), or, where that path is too long for a socket's address, a name
    made from the root in the user's runtime folder ($XDG_RUNTIME_DIR, else a 0700 folder
    of the user's in /tmp)."""
    path = os.path.join(root, ".farmer", SOCKET_NAME)
    if len(os.fsencode(path)) <= _MAX_SUN_PATH:
        return path
    import zlib  # built in: a short, stable name for a long root

    data = os.fsencode(root)
    name = f"farmer-{zlib.crc32(data):08x}{zlib.adler32(data):08x}.sock"
    return os.path.join(runtime_dir(), name)


def runtime_dir() -> str:
    """The user's folder for sockets: $XDG_RUNTIME_DIR, else /tmp/farmer-UID."""
    return os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/farmer-{os.getuid()}"


def peer_allowed(uid: int, expected: int) -> bool:
    """Whether a peer whose credentials say `uid` may be talked to: only the same user."""
    return uid == expected


def peer_uid(sock) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED)."""
    import _socket

    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder)


def connect(path: str, verb: str, timeout: float = ANSWER_S):
    """A connection to the server at `path` that said hello: (socket, its answer's words),
    or None when there is no server there, it is not this user's, or it did not answer in
    `timeout` seconds."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        if not peer_allowed(peer_uid(sock), os.getuid()):
            sock.close()
            return None
        sock.sendall(b"%s %s %s\n" % (MAGIC, verb.encode(), identity().encode()))
        line = read_line(sock)
    except OSError:  # gone (refused, no such file), or no answer in time
        sock.close()
        return None
    words = line.split()
    if not words or words[0] not in (b"ok", b"other") or len(words) < 2:
        sock.close()
        return None
    return sock, words


def read_line(sock, limit: int = 4096) -> bytes:
    """One line from `sock` (without its newline), and nothing after it; OSError if it ends
    first. The bytes are looked at in place (MSG_PEEK) and only the line's taken, not a
    byte at a time: what follows, with any descriptors it carries, is left for its reader."""
    import _socket

    line = b""
    while True:
        data = sock.recv(limit + 1 - len(line), _socket.MSG_PEEK)
        if not data:
            raise ConnectionError("the other end closed the connection")
        end = data.find(b"\n")
        # All of it when no newline is in it: part of this line, the rest still to come.
        line += sock.recv(end + 1 if end >= 0 else len(data))
        if end >= 0:
            return line[:-1]
        if len(line) > limit:
            raise ConnectionError("the line is too long")


def served(argv: list[str]) -> int | None:
    """Run `farmer ARGV` on the project's server: the command's exit status; None when no
    server of this farmer answers for the project (the command then runs here)."""
    try:
        cwd = os.getcwd()
        root = command_project(argv, cwd)
    except OSError:
        return None
    if root is None:
        return None
    path = socket_path(root)
    if not os.path.exists(path):
        return None
    hello = connect(path, "run")
    if hello is None:
        return None
    sock, words = hello
    if words[0] != b"ok" or not words[1].isdigit():
        sock.close()
        return None
    server_pid = int(words[1])
    return _run(sock, server_pid, argv, cwd)


def _run(sock, server_pid: int, argv: list[str], cwd: str) -> int | None:
    import _socket
    import marshal

    from farmer.startup.cheap import signal

    umask = os.umask(0o022)
    os.umask(umask)
    out = sys.stdout
    request = marshal.dumps({"argv": argv, "cwd": cwd, "env": dict(os.environ), "umask": umask,
                             "encoding": getattr(out, "encoding", None) or "utf-8",
                             "errors": getattr(out, "errors", None) or "strict"})
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in map(_open_or_null, (0, 1, 2)))
    got: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if got:  # a second one: leave now (the server stops the build all the same)
            os.write(2, b"farmer: interrupted\n")
            os._exit(128 + got[0])
        got.append(signum)
        try:
            os.kill(server_pid, signal.SIGINT)
        except OSError:
            pass

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for s, handler in before.items():
        if handler != signal.SIG_IGN:
            signal.signal(s, forward)
    try:
        sock.settimeout(None)  # from here on, a build: as long as it takes
        sock.sendmsg([len(request).to_bytes(8, "little") + request],
                     [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        while True:
            try:
                line = read_line(sock)
                break
            except InterruptedError:
                continue
    except OSError:
        line = b""
    finally:
        sock.close()
    words = line.split()
    local = words == [b"local"] or len(words) != 2 or words[0] != b"exit" or not words[1].isdigit()
    for s, handler in before.items():  # no more forwarding (a watch would stop); here, as before
        signal.signal(s, handler if local and not got else signal.SIG_IGN)
    if words == [b"local"]:  # another project than the server's: nothing was printed
        return None
    if local:
        if got:  # stopped before the server answered: as it would have stopped here
            return 128 + got[0]
        os.write(2, b"farmer: the server (pid %d) ended during this command; running it here\n" % server_pid)
        return None
    code = int(words[1])
    if got and code == 128 + signal.SIGINT:
        code = 128 + got[0]  # as if this process had been stopped by its own signal
    return code


def _open_or_null(fd: int) -> int:
    """`fd`, or where it is closed /dev/null in its place: what a farmer of its own writing to
    a closed descriptor amounts to (cli/exit.py's ReaderGone)."""
    try:
        os.fstat(fd)
        return fd
    except OSError:
        return os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)


def ask(root: str, verb: str, timeout: float = ANSWER_S):
    """`serve --status` and `--stop`'s question to the project's server: (its answer's words,
    the socket) or None when none answers."""
    path = socket_path(root)
    if not os.path.exists(path):
        return None
    return connect(path, verb, timeout)
