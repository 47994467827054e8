"""`farmer serve`, `serve --status`, `serve --stop`: a resident farmer for one project, started
in the background (the server itself: farmer/cli/server.py; its client: farmer/cli/client.py).
"""

from __future__ import annotations

import os
import sys
import time

from farmer.build import command
from farmer.cli import client
from farmer.cli.server import Server, Served, unlink
from farmer.errors import LockHeld, UsageError
from farmer.files.private import make_state_dir, open_file
from farmer.startup.cheap import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

DEFAULT_IDLE = "3h"
LOG_NAME = "serve.log"
_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """`--idle`: `90s`, `30m`, `3h` or a number of seconds, above 0."""
    value = text.strip()
    unit = _UNITS.get(value[-1:].lower()) if value else None
    number = value[:-1] if unit is not None else value
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"--idle {text}: give a duration above 0, as 90s, 30m, 3h or a number of seconds")
    return seconds


def project_root(directory: str | None, farmfile: str | None) -> str:
    """The project a server serves, found as its clients find theirs (cli/client.py)."""
    argv = ["build"] + (["-C", directory] if directory else []) + (["-f", farmfile] if farmfile else [])
    root = client.command_project(argv, os.getcwd())
    if root is None:
        # The command's own words for what is missing.
        command.named_manifest(directory, farmfile or "Farmfile", farmfile is not None, False)
        raise UsageError("no project here: run farmer serve in a project, or pass -C DIR")
    return root


# -- the command: start, status, stop ------------------------------------------------------------


def start(directory: str | None, farmfile: str | None, idle: str,
          runner: Callable[[list[str], Served], int]) -> int:
    """`farmer serve`: the server started in the background for the project; returns once it
    listens (0), or with its error (3: another farmer holds the lock)."""
    idle_s = parse_duration(idle)
    root = project_root(directory, farmfile)
    make_state_dir(os.path.join(root, ".farmer"))
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the server: whatever happens, it ends here
        code = 1
        try:
            os.close(read)
            os.setsid()
            code = _serve_detached(root, idle_s, runner, write)
        finally:
            os._exit(code)
    os.close(write)
    with open(read, "rb") as f:
        answer = f.read().decode(errors="replace")
    if not answer.startswith("ok "):
        os.waitpid(pid, 0)
        code, _, message = answer.partition(" ")
        print(f"farmer: error: {message or 'the server ended before it listened'}", file=sys.stderr)
        return int(code) if code.isdigit() else 1
    print(f"farmer: serving {root} (pid {answer.split()[1]}; exits after {idle} idle; "
          "stop it with farmer serve --stop)")
    return 0


def _serve_detached(root: str, idle_s: float, runner, ready: int) -> int:
    """The server's process: stdin from /dev/null, output to .farmer/serve.log."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    log = open_file(os.path.join(root, ".farmer", LOG_NAME), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(root)
    server = Server(root, idle_s, runner)
    try:
        try:
            server.open()
        except (LockHeld, UsageError, OSError) as e:
            code = getattr(e, "exit_code", 2)
            os.write(ready, f"{code} {e}".encode())
            return code
        os.write(ready, f"ok {os.getpid()}".encode())
        os.close(ready)
        print(f"farmer serve: pid {os.getpid()} serving {root}", flush=True)
        return server.run()
    finally:
        server.close()
        print(f"farmer serve: pid {os.getpid()} ended after {server.commands} commands", flush=True)


def status(directory: str | None, farmfile: str | None) -> int:
    """`farmer serve --status`: 0 and what it holds when a server runs, 1 when none does."""
    root = project_root(directory, farmfile)
    hello = client.ask(root, "status")
    if hello is None:
        holder = _silent_holder(root)
        if holder is not None:
            print(f"farmer serve: pid {holder} holds the lock of {root} but does not answer "
                  f"(stopped or busy)")
            return 0
        print(f"farmer serve: none runs for {root}")
        return 1
    sock, words = hello
    try:
        import marshal

        size = int.from_bytes(_read_exactly(sock, 8), "little")
        info = marshal.loads(_read_exactly(sock, size))
    except (OSError, ValueError, EOFError):
        info = None
    finally:
        sock.close()
    if not isinstance(info, dict):
        print(f"farmer serve: pid {words[1].decode()} runs for {root}")
        return 0
    other = "" if words[0] == b"ok" else " (another farmer than this one: it serves no command of this one)"
    rss = info.get("rss_kb")
    worlds = info.get("worlds_rss_kb")
    memory = f"{rss / 1024:.0f} MB" if rss else "unknown"
    if worlds:
        memory += f" (its worlds: {worlds / 1024:.0f} MB more)"
    print(f"farmer serve: pid {info['pid']}, farmer {info['version']}{other}\n"
          f"  project: {info['root']}\n"
          f"  as: farmer {info['role']}\n"
          f"  up: {_duration(info['uptime_s'])}, {info['commands']} commands; "
          + ("running one now" if info["busy"] else f"idle {_duration(info['idle_s'])}"
             + (f" (exits after {_duration(info['idle_limit_s'])} idle)"
                if info["idle_limit_s"] != float("inf") else " (serves while the watch runs)")) + "\n"
          f"  holds: {', '.join(info['holds'])}\n"
          + (f"  changes: {info['watching']}\n" if info.get("watching") else "") +
          f"  memory (RSS): {memory}")
    return 0


def stop(directory: str | None, farmfile: str | None) -> int:
    """`farmer serve --stop`: the project's server stopped (0, also when none ran)."""
    root = project_root(directory, farmfile)
    hello = client.ask(root, "stop")
    if hello is not None:
        sock, words = hello
        try:
            sock.settimeout(30)
            while sock.recv(4096):  # it closes the connection as it ends
                pass
        except OSError:
            pass
        finally:
            sock.close()
        _wait_for_lock(root, 10.0)
        print(f"farmer serve: stopped pid {words[1].decode()}")
        return 0
    holder = _silent_holder(root)
    if holder is not None and holder.isdigit():
        # Stopped (SIGSTOP) or busy: SIGTERM, seen once it runs again.
        for s in (signal.SIGTERM, signal.SIGCONT):
            try:
                os.kill(int(holder), s)
            except OSError:
                pass
        _wait_for_lock(root, 10.0)
        print(f"farmer serve: stopped pid {holder}")
        return 0
    print(f"farmer serve: none runs for {root}")
    return 0


def _silent_holder(root: str) -> str | None:
    """The pid of a server that holds the project's lock without answering; None when none
    does (then a socket it left is removed: a killed server's)."""
    from farmer.files.lock import ProjectLock

    if not os.path.isdir(os.path.join(root, ".farmer")):
        return None
    lock = ProjectLock(os.path.join(root, ".farmer"))
    try:
        lock.acquire()
    except LockHeld:
        from farmer.files.lock import holder

        pid, role = holder(lock.path)
        return pid if role in ("serve", "watch") else None
    except OSError:
        return None
    try:
        unlink(client.socket_path(root))
    except OSError:
        pass
    finally:
        lock.release()
    return None


def _wait_for_lock(root: str, seconds: float) -> None:
    """Until the project's lock is free (the server has ended), at most `seconds`."""
    from farmer.files.lock import ProjectLock

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lock = ProjectLock(os.path.join(root, ".farmer"))
        try:
            lock.acquire()
        except LockHeld:
            time.sleep(0.05)
            continue
        except OSError:
            return
        lock.release()
        return


def _read_exactly(sock, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("cut short")
        data += chunk
    return data


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
