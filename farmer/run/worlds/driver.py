"""Runs inside a world's interpreter: setup in the world's globals, then tasks.

Standard library only, so a world starts fast. Two ways to run:

  driver.py [--reads FILE] --setup JSON -- LINE...
                                          a fresh interpreter runs the world chain's setup and
                                          then one task, and exits (`--no-worlds`, and a
                                          `python` task without a world: an empty chain)
  driver.py --serve BASE --world NAME --root DIR --setup JSON
                                          a world process: runs its setup, says `ready` on
                                          BASE.out and serves the commands farmer writes to
                                          BASE.in (protocol.py)

A fork-job runs in a child forked from the world; the world reaps it with wait4 and reports
`done` with its exit status, CPU time and peak RSS (so `os._exit` and signals in a task are
reported exactly). An execute-job runs in the world itself, which then exits: it is the
world's last pending future. A child world is a fork that runs its own setup and serves on
new FIFOs. Every fork moves into its own process group before it runs anything, so farmer
can kill a task with whatever it started, without killing the world.

Every set-up and task is recorded (reads.py): what a task read, beyond what its world's
set-up had, goes to the file farmer names (`reads` in a `run` command, `--reads`), with what
each set-up of its chain read.
"""

from __future__ import annotations

import atexit
import gc
import io
import json
import linecache
import os
import pkgutil  # noqa: F401 - runpy.run_path imports it; once in the world, not per fork
import runpy
import selectors
import signal
import sys
import time
import traceback

if __package__:
    from farmer.run.worlds import protocol, reads
else:  # run as a script: load the modules next to us without the farmer package
    import importlib.util

    def _load(name: str):
        spec = importlib.util.spec_from_file_location(
            f"_farmer_world_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py"))
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module

    protocol = _load("protocol")
    reads = _load("reads")

_HIDDEN_FILES = {os.path.abspath(__file__), runpy.__file__, "<frozen runpy>"}


# -- setup and tasks ----------------------------------------------------------------------

def run_setup(chain: list[tuple[str, list[str]]], world_globals: dict, recording: reads.Reads) -> None:
    """Run each world's setup lines, root world first, in one globals dict, as `python3 -c`
    would in the project root (the working directory): its modules are importable. What
    each set-up reads is recorded as the world's (`recording`)."""
    root = os.getcwd()
    if chain and root not in sys.path:  # (an empty chain: a plain `python` task, as python3 runs it)
        sys.path.insert(0, root)
    for name, lines in chain:
        began = time.time_ns()
        recording.begin()
        try:
            for number, line in enumerate(lines, 1):
                filename = f"<world {name} setup line {number}>"
                # Tracebacks then quote the failing setup line like a line of a file.
                linecache.cache[filename] = (len(line), None, [line + "\n"], filename)
                exec(compile(line, filename, "exec"), world_globals)
        finally:
            read, _ = recording.end(keep=True)
        recording.set_up(name, began, read)


def run_task(args: list[str], world_globals: dict) -> None:
    """Run a `python` line (`script.py args`, `-m module args`, `-c code args`) with the
    world's globals visible; exceptions and SystemExit propagate to the caller."""
    if not args:
        raise SystemExit("farmer: empty python line")
    shared = {k: v for k, v in world_globals.items() if k not in ("__name__", "__file__", "__builtins__")}
    if args[0] == "-c":
        if len(args) < 2:
            raise SystemExit("farmer: -c needs code")
        sys.argv = ["-c", *args[2:]]
        sys.path.insert(0, "")  # as `python3 -c` has it
        g = dict(shared, __name__="__main__")
        exec(compile(args[1], "<string>", "exec"), g)
    elif args[0] == "-m":
        if len(args) < 2:
            raise SystemExit("farmer: -m needs a module name")
        sys.argv = [args[1], *args[2:]]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args[1], init_globals=shared, run_name="__main__", alter_sys=True)
    else:
        script = args[0]
        if not os.path.exists(script):
            print(f"python3: can't open file {os.path.abspath(script)!r}: no such file", file=sys.stderr)
            raise SystemExit(2)
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, init_globals=shared, run_name="__main__")


def finish_task(args: list[str], world_globals: dict, recording: reads.Reads, reads_file: str | None) -> int:
    """Run a task and end it as a fresh interpreter would: exit status from SystemExit or 1
    with a traceback, then exit handlers, non-daemon threads joined, streams flushed; what
    it read (`recording`) is then written to `reads_file`."""
    recording.begin()
    try:
        run_task(args, world_globals)
        code = 0
    except SystemExit as e:
        code = _exit_status(e.code)
    except BaseException as e:  # noqa: BLE001 - whatever the task raised is its failure
        print_traceback(e)
        code = 1
    atexit._run_exitfuncs()
    if "threading" in sys.modules:
        import threading

        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
    if not _flush_std():
        code = code or 120
    read, wrote = recording.end()
    if reads_file:
        reads.dump(reads_file, read, wrote, recording.setup_refs())
    return code


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def print_traceback(e: BaseException) -> None:
    print("".join(format_traceback(e)), end="", file=sys.stderr)


def format_traceback(e: BaseException) -> list[str]:
    """The traceback without our own frames: what the user's code did, as python3 shows it."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in _HIDDEN_FILES:
        tb = tb.tb_next
    return traceback.format_exception(type(e), e, tb)


def _flush_std() -> bool:
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            ok = False
    return ok


def _redirect(log: str, append: bool) -> None:
    """stdout and stderr (the descriptors and the Python objects) to `log`, as a fresh
    `python3 ... > log 2>&1` would have them."""
    _flush_std()
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    try:
        fd = os.open(log, flags, 0o644)
    except OSError:  # a symlink planted where the log goes (ELOOP): farmer's file, not its target
        if not os.path.islink(log):
            raise
        os.unlink(log)
        fd = os.open(log, flags, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    # PYTHONUNBUFFERED as the interpreter's own startup honours it.
    raw = bool(os.environ.get("PYTHONUNBUFFERED"))
    buffering = 0 if raw else -1
    sys.stdout = io.TextIOWrapper(io.open(1, "wb", buffering, closefd=False), encoding=encoding,
                                  write_through=raw)
    sys.stderr = io.TextIOWrapper(io.open(2, "wb", buffering, closefd=False), encoding=encoding,
                                  errors="backslashreplace", line_buffering=True, write_through=raw)


def _rusage() -> tuple[float, int]:
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, me.ru_maxrss


# -- the world process ----------------------------------------------------------------

def die_with_parent(parent: int) -> None:
    """Be killed when `parent` dies (Linux's PR_SET_PDEATHSIG, through ctypes), even in the
    middle of a setup that reads no FIFO: a world and its forks never outlive their farmer
    (or their world). A parent gone already ends us now."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # no prctl: a closed FIFO still ends a world once it reads it
    if os.getppid() != parent:
        os._exit(1)


class World:
    """One world process: its FIFOs, its globals, the children it forked."""

    def __init__(self, name: str, root: str, base: str, recording: reads.Reads) -> None:
        self.name = name
        self.root = root
        self.recording = recording
        self.globals: dict = {"__name__": "__world__", "__builtins__": __builtins__}
        self.children: dict[int, tuple[int, float]] = {}  # pid -> (job, monotonic start)
        self._open(base)

    def _open(self, base: str) -> None:
        # farmer opened the read end of .out before it started us. Non-blocking, so that a
        # farmer gone since (no reader: ENXIO) ends us instead of blocking us for ever.
        try:
            self.out_fd = os.open(base + ".out", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            os._exit(1)
        os.set_blocking(self.out_fd, True)
        # Non-blocking: no writer yet; farmer opens .in once it has read `ready`.
        self.in_fd = os.open(base + ".in", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    def send(self, kind: str, **fields: object) -> None:
        data = memoryview(protocol.encode(kind, **fields))
        try:
            while data:
                data = data[os.write(self.out_fd, data):]
        except OSError:
            self.abandon()  # farmer is gone

    def setup_and_serve(self, chain: list[tuple[str, list[str]]]) -> None:
        saved_argv = sys.argv
        sys.argv = [""]
        started = time.monotonic()
        try:
            run_setup(chain, self.globals, self.recording)
        except BaseException as e:  # noqa: BLE001 - a failing setup is reported, not raised
            text = "".join(format_traceback(e))
            print(text, end="", file=sys.stderr)
            _flush_std()
            self.send("setup-failed", traceback=text)
            os._exit(1)
        sys.argv = saved_argv
        print(f"farmer: world {self.name} (pid {os.getpid()}) set up in "
              f"{time.monotonic() - started:.3f} s", file=sys.stderr)
        _flush_std()
        # The setup's objects never change again here: out of the collector's sight, a fork's
        # collections do not touch (and so copy) every page of them.
        gc.freeze()
        threads = 1
        if "threading" in sys.modules:
            import threading

            threads = threading.active_count()
        _, began, read = self.recording.setups[-1]
        self.send("ready", pid=os.getpid(), version=protocol.VERSION, threads=threads, reads=[began, read])
        self.serve()

    def serve(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        self.sel.register(self.in_fd, selectors.EVENT_READ)
        self.sel.register(self.wake_r, selectors.EVENT_READ)
        try:
            self._loop()
        except BaseException:  # noqa: BLE001 - a bug of ours: say it in the world log, go
            traceback.print_exc()
            _flush_std()
            self.abandon()

    def _loop(self) -> None:
        decoder = protocol.Decoder()
        while True:
            for key, _ in self.sel.select():
                if key.fd == self.wake_r:
                    _drain(self.wake_r)
                    continue
                data = _read_all(self.in_fd)
                if data is None:
                    self.abandon()  # farmer closed without `close`: it is gone
                try:
                    messages = decoder.feed(data)
                except protocol.ProtocolError as e:
                    self.send("error", message=str(e))
                    self.abandon()
                for msg in messages:
                    self.handle(msg)
            self.reap()

    def handle(self, msg: dict) -> None:
        kind = msg["t"]
        if kind == "run":
            if isinstance(msg.get("reads"), str):  # the set-ups' lists, once, not by every task
                self.recording.ship(os.path.dirname(msg["reads"]))
            if msg["mode"] == "exec":
                self.execute(msg)
            elif self.fork(msg["job"]) == 0:
                code = 1
                try:
                    atexit._clear()  # the world's exit handlers are not the task's
                    code = self.run_job(msg)
                except BaseException:  # noqa: BLE001 - our own failure: in the log, exit 1
                    traceback.print_exc()
                finally:
                    os._exit(code)  # never back into the world's loop
        elif kind == "world":
            if self.fork(msg["job"]) == 0:
                try:
                    self.become_world(msg)
                except BaseException:  # noqa: BLE001
                    traceback.print_exc()
                finally:
                    os._exit(1)
        elif kind == "close":
            self.leave(0)
        else:
            self.send("error", message=f"a world does not take {kind!r} messages")
            self.abandon()

    def fork(self, job: int) -> int:
        _flush_std()
        world_pid = os.getpid()
        gate_r, gate_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(gate_w)
            # Wait until the world has moved us into our own group and told farmer our pid:
            # then a kill by farmer can never miss us. No byte: the world died meanwhile.
            go = os.read(gate_r, 1)
            os.close(gate_r)
            if not go:
                os._exit(70)
            die_with_parent(world_pid)  # a fork does not inherit its parent's request
            self._after_fork()
            return 0
        os.close(gate_r)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        self.children[pid] = (job, time.monotonic())
        self.send("forked", job=job, pid=pid)
        os.write(gate_w, b"g")
        os.close(gate_w)
        return pid

    def _after_fork(self) -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.sel.close()
        for fd in (self.in_fd, self.out_fd, self.wake_r, self.wake_w):
            os.close(fd)
        self.children = {}

    def run_job(self, msg: dict) -> int:
        os.chdir(self.root)
        os.environ.update(msg["env"])
        _redirect(msg["log"], append=False)
        return finish_task([str(a) for a in msg["args"]], self.globals, self.recording, msg.get("reads"))

    def execute(self, msg: dict) -> None:
        """The world's last future: run it here, report, and end the world."""
        self.sel.unregister(self.in_fd)
        os.close(self.in_fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        start = time.monotonic()
        cpu0, _ = _rusage()
        code = self.run_job(msg)
        cpu1, rss = _rusage()
        self.send("done", job=msg["job"], code=code, signal=None, wall=time.monotonic() - start,
                  cpu=cpu1 - cpu0, rss_kb=rss)
        os._exit(code)

    def become_world(self, msg: dict) -> None:
        """In a fresh fork: turn into the child world `msg` describes."""
        atexit._clear()  # the parent's exit handlers stay the parent's
        self.name = msg["name"]
        os.environ.update(msg["env"])
        _redirect(msg["log"], append=True)
        self._open(msg["base"])
        self.setup_and_serve([(self.name, [str(line) for line in msg["setup"]])])

    def reap(self) -> None:
        for pid, (job, start) in list(self.children.items()):
            try:
                got, status, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                got, status, usage = pid, None, None
            if got == 0:
                continue
            del self.children[pid]
            code = sig = None
            if status is not None:
                if os.WIFSIGNALED(status):
                    sig = os.WTERMSIG(status)
                else:
                    code = os.WEXITSTATUS(status)
            self.send("done", job=job, code=code, signal=sig, wall=time.monotonic() - start,
                      cpu=(usage.ru_utime + usage.ru_stime) if usage else None,
                      rss_kb=usage.ru_maxrss if usage else None)

    def abandon(self) -> None:
        """farmer is gone or talks nonsense: take every child down with us."""
        for pid in self.children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(1)

    def leave(self, code: int) -> None:
        atexit._run_exitfuncs()
        _flush_std()
        os._exit(code)


def _read_all(fd: int) -> bytes | None:
    """What is available on a non-blocking descriptor; None at end of stream."""
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not data:
            if not chunks:
                return None
            break
        chunks.append(data)
    return b"".join(chunks)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def main(argv: list[str]) -> None:
    # Our own folder must not shadow the user's modules.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if len(argv) == 10 and argv[0] == "--serve" and argv[2] == "--world" and argv[4] == "--root" \
            and argv[6] == "--setup" and argv[8] == "--parent":
        base, name, root, setup = argv[1], argv[3], argv[5], argv[7]
        die_with_parent(int(argv[9]))  # before the setup, which may take long
        os.chdir(root)
        recording = reads.Reads(root)
        recording.install()
        world = World(name, root, base, recording)
        world.setup_and_serve([(name, [str(line) for line in json.loads(setup)])])
        return
    reads_file = None
    if len(argv) >= 2 and argv[0] == "--reads":
        reads_file, argv = argv[1], argv[2:]
    if len(argv) < 3 or argv[0] != "--setup" or argv[2] != "--":
        raise SystemExit("usage: driver.py [--reads FILE] --setup JSON -- PYTHON-LINE...\n"
                         "       driver.py --serve BASE --world NAME --root DIR --setup JSON")
    chain = [(name, lines) for name, lines in json.loads(argv[1])]
    world_globals: dict = {"__name__": "__world__", "__builtins__": __builtins__}
    recording = reads.Reads(os.getcwd())
    recording.install()
    saved_argv = sys.argv
    sys.argv = [""]
    try:
        run_setup(chain, world_globals, recording)
    except BaseException as e:  # noqa: BLE001 - as a world reports a failing setup
        print_traceback(e)
        raise SystemExit(1) from None
    sys.argv = saved_argv
    raise SystemExit(finish_task(argv[3:], world_globals, recording, reads_file))


if __name__ == "__main__":
    main(sys.argv[1:])
