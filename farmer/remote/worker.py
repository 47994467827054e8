"""`farmer worker`: a bot for BuildGrid's Bots API (Remote Workers API v1test2).

BuildGrid ships no worker. This one takes leases of REAPI Actions, stages each input root in a
private directory, runs the Command there (its own process group, its environment exactly as the
Command gives it, killed at the Action's timeout), uploads outputs (files, directories as Trees,
symlinks), stdout and stderr, and reports the ActionResult. No sandbox: the command sees the host's
file system outside its directory, as a local build would.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from farmer.remote.client import Blob, Client, Digest, RemoteError, digest_of, digest_of_file
from farmer.remote.config import Endpoint
from farmer.remote.merkle import segments
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from farmer.remote.protos.google.devtools.remoteworkers.v1test2 import bots_pb2 as bots
from farmer.remote.protos.google.rpc import code_pb2

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_TIMEOUT_S = 3600
POLL_S = 20          # UpdateBotSession long-poll deadline (the server answers at ~80 % of it)
KEEPALIVE_S = 10     # while an action runs, tell the server the lease is alive this often
# what UpdateBotSession answers once the server has dropped the session (BuildGrid: "Bot does
# not exist while validating leases", INVALID_ARGUMENT)
FORGOTTEN = frozenset({"INVALID_ARGUMENT", "NOT_FOUND"})


class Stopped(Exception):
    """The bot was told to stop (SIGTERM/SIGINT) or its lease was cancelled."""


class Run:
    """One leased action: staged, run, its outputs collected. `cancel()` kills the command."""

    __slots__ = ("client", "action", "root", "proc", "cancelled")

    def __init__(self, client: Client, action: re.Action, root: str) -> None:
        self.client, self.action, self.root = client, action, root
        self.proc: subprocess.Popen | None = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.proc is not None and self.proc.poll() is None:
            _kill_group(self.proc)

    def execute(self) -> tuple[re.ActionResult, int]:
        """The ActionResult and the status code to report (OK, or DEADLINE_EXCEEDED on a timeout)."""
        cmd = re.Command.FromString(self.client.read([self.action.command_digest])[self.action.command_digest.hash])
        self.stage(self.action.input_root_digest, self.root)
        cwd = os.path.join(self.root, *segments(cmd.working_directory)) if cmd.working_directory else self.root
        os.makedirs(cwd, exist_ok=True)
        outputs = sorted(set(cmd.output_paths) or set(cmd.output_files) | set(cmd.output_directories))
        for o in outputs:
            os.makedirs(os.path.dirname(os.path.join(cwd, o)) or cwd, exist_ok=True)
        env = {v.name: v.value for v in cmd.environment_variables}
        env.setdefault("PATH", DEFAULT_PATH)
        timeout = self.action.timeout.ToTimedelta().total_seconds() or DEFAULT_TIMEOUT_S
        started = time.time()
        status = code_pb2.OK
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                self.proc = subprocess.Popen(list(cmd.arguments), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=err, start_new_session=True)
            except OSError as e:
                err.write(f"farmer worker: cannot run {cmd.arguments[0]!r}: {e.strerror}\n".encode())
                exit_code = 127
            else:
                if self.cancelled:
                    _kill_group(self.proc)
                try:
                    exit_code = self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    _kill_group(self.proc)
                    exit_code = self.proc.wait()
                    err.write(f"\nfarmer worker: killed after the action's timeout of {timeout:g} s\n".encode())
                    status = code_pb2.DEADLINE_EXCEEDED
                _kill_group(self.proc)  # anything the command left behind in its group
            if self.cancelled:
                raise Stopped("lease cancelled")
            blobs: list[Blob] = []
            result = re.ActionResult(exit_code=exit_code)
            for f, field in ((out, result.stdout_digest), (err, result.stderr_digest)):
                f.seek(0)
                blob = Blob.of(f.read())
                field.CopyFrom(blob.digest)
                blobs.append(blob)
        if exit_code == 0 or outputs:
            self.collect(cwd, outputs, result, blobs)
        self.client.upload(blobs)
        md = result.execution_metadata
        md.worker = socket.gethostname()
        md.execution_start_timestamp.FromNanoseconds(int(started * 1e9))
        md.execution_completed_timestamp.GetCurrentTime()
        return result, status

    def stage(self, digest: Digest, path: str) -> None:
        """Write the input root `digest` under `path`: all Directories first, then files in batches."""
        directories: dict[str, re.Directory] = {}
        todo = [digest]
        while todo:
            got = self.client.read(todo)
            todo = []
            for d in got.values():
                msg = re.Directory.FromString(d)
                directories[digest_of(d).hash] = msg
                todo.extend(sub.digest for sub in msg.directories if sub.digest.hash not in directories)
        files: list[tuple[str, re.FileNode]] = []
        links: list[tuple[str, str]] = []

        def walk(d: Digest, at: str) -> None:
            os.makedirs(at, exist_ok=True)
            msg = directories[d.hash]
            for f in msg.files:
                files.append((os.path.join(at, *segments(f.name)), f))
            for s in msg.symlinks:
                links.append((os.path.join(at, *segments(s.name)), s.target))
            for sub in msg.directories:
                walk(sub.digest, os.path.join(at, *segments(sub.name)))

        walk(digest, path)
        for i in range(0, len(files), 200):
            part = files[i:i + 200]
            contents = self.client.read(f.digest for _, f in part)
            for p, f in part:
                with open(p, "wb") as fh:
                    fh.write(contents[f.digest.hash])
                os.chmod(p, 0o755 if f.is_executable else 0o644)
        for p, target in links:
            os.symlink(target, p)

    def collect(self, cwd: str, outputs: list[str], result: re.ActionResult, blobs: list[Blob]) -> None:
        """Outputs that exist, as ActionResult entries; what does not exist is simply absent."""
        for o in outputs:
            p = os.path.join(cwd, o)
            if os.path.islink(p):
                result.output_symlinks.add(path=o, target=os.readlink(p))
            elif os.path.isfile(p):
                d = digest_of_file(p)
                blobs.append(Blob(d, path=p))
                result.output_files.add(path=o, digest=d, is_executable=os.access(p, os.X_OK))
            elif os.path.isdir(p):
                tree = re.Tree()
                tree.root.CopyFrom(_directory(p, tree, blobs))
                data = tree.SerializeToString(deterministic=True)
                blob = Blob.of(data)
                blobs.append(blob)
                result.output_directories.add(path=o, tree_digest=blob.digest)


def _directory(path: str, tree: re.Tree, blobs: list[Blob]) -> re.Directory:
    msg = re.Directory()
    entries = sorted(os.listdir(path), key=os.fsencode)
    for name in entries:
        p = os.path.join(path, name)
        if os.path.islink(p):
            msg.symlinks.add(name=name, target=os.readlink(p))
        elif os.path.isfile(p):
            d = digest_of_file(p)
            blobs.append(Blob(d, path=p))
            msg.files.add(name=name, digest=d, is_executable=os.access(p, os.X_OK))
        elif os.path.isdir(p):
            child = _directory(p, tree, blobs)
            tree.children.append(child)
            msg.directories.add(name=name, digest=digest_of(child.SerializeToString(deterministic=True)))
    return msg


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Bot:
    """The bot's session with the server, and the loop that serves its leases one at a time."""

    __slots__ = ("client", "bot_id", "workdir", "stopping", "run", "session")

    def __init__(self, client: Client, bot_id: str, workdir: str) -> None:
        self.client, self.bot_id, self.workdir = client, bot_id, workdir
        self.stopping = threading.Event()
        self.run: Run | None = None
        self.session: bots.BotSession | None = None

    def stop(self, *_args) -> None:
        self.stopping.set()
        self.client.cancel_calls()  # the long poll
        if self.run is not None:
            self.run.cancel()

    def serve(self) -> None:
        """Serve leases until told to stop. A server that no longer knows this bot's session
        (it dropped it after a freeze or a network partition longer than its bot session
        timeout: UpdateBotSession then answers INVALID_ARGUMENT or NOT_FOUND, "Bot does not
        exist") gets a new one: the bot comes back by itself."""
        session = self.create_session()
        while not self.stopping.is_set():
            for lease in session.leases:
                if lease.state in (bots.LeaseState.PENDING, bots.LeaseState.ACTIVE):
                    self.serve_lease(lease)
            try:
                session = self.update(session, POLL_S)
            except RemoteError as e:
                if e.code in ("DEADLINE_EXCEEDED", "CANCELLED"):
                    continue
                print(f"farmer worker: UpdateBotSession: {e}", file=sys.stderr, flush=True)
                if e.code in FORGOTTEN:
                    print("farmer worker: the server dropped this bot's session; registering again",
                          file=sys.stderr, flush=True)
                    session = self.create_session()
                else:
                    self.stopping.wait(0.5)
        # say goodbye, so the scheduler assigns nothing more to this session
        session.status = bots.BotStatus.BOT_TERMINATING
        try:
            self.update(session, 3)
        except RemoteError:
            pass

    def create_session(self) -> bots.BotSession:
        """A new session with the server, waiting for it as long as it takes (or until told
        to stop: the session is then the one asked for)."""
        session = bots.BotSession(bot_id=self.bot_id, status=bots.BotStatus.OK)
        session.worker.devices.add(handle=self.bot_id)
        while not self.stopping.is_set():
            try:
                session = self.client.call("CreateBotSession", bots.CreateBotSessionRequest(
                    parent=self.client.endpoint.instance, bot_session=session), timeout=10, retry=False)
                break
            except RemoteError as e:
                print(f"farmer worker: waiting for the server ({e.code})", file=sys.stderr, flush=True)
                self.stopping.wait(0.5)
        self.session = session
        print(f"farmer worker: session {session.name}", file=sys.stderr, flush=True)
        return session

    def update(self, session: bots.BotSession, timeout: float) -> bots.BotSession:
        new = self.client.call("UpdateBotSession", bots.UpdateBotSessionRequest(
            name=session.name, bot_session=session), timeout=timeout, retry=False, cancellable=True)
        self.session = new
        return new

    def serve_lease(self, lease: bots.Lease) -> None:
        lease.state = bots.LeaseState.ACTIVE
        root = tempfile.mkdtemp(prefix="farmer-worker-", dir=self.workdir)
        outcome: dict = {}
        try:
            action = self.action_of(lease)
            self.run = Run(self.client, action, root)
            t = threading.Thread(target=self._execute, args=(self.run, outcome), daemon=True)
            t.start()
            while t.is_alive():
                t.join(KEEPALIVE_S)
                if t.is_alive() and not self.stopping.is_set():
                    self.keepalive(lease)
        except Exception as e:  # noqa: BLE001 - any failure of the bot is the lease's INTERNAL
            outcome["error"] = e
        finally:
            self.run = None
            shutil.rmtree(root, ignore_errors=True)
        error = outcome.get("error")
        if isinstance(error, Stopped) or self.stopping.is_set():
            lease.status.code = code_pb2.UNAVAILABLE  # BuildGrid retries UNAVAILABLE on another bot
            lease.status.message = "the worker stopped"
        elif error is not None:
            lease.status.code = code_pb2.INTERNAL
            lease.status.message = f"farmer worker: {error}"[:500]
        else:
            result, status = outcome["result"]
            lease.result.Pack(result)
            lease.status.code = status
        lease.state = bots.LeaseState.COMPLETED

    @staticmethod
    def _execute(run: Run, outcome: dict) -> None:
        try:
            outcome["result"] = run.execute()
        except Exception as e:  # noqa: BLE001 - reported to the server by serve_lease
            outcome["error"] = e

    def keepalive(self, lease: bots.Lease) -> None:
        """Report the running lease; if the server says it is cancelled, kill the command."""
        session = self.session
        try:
            session = self.update(session, KEEPALIVE_S / 2)
        except RemoteError:
            return
        for other in session.leases:
            if other.id == lease.id and other.state == bots.LeaseState.CANCELLED and self.run is not None:
                self.run.cancel()

    def action_of(self, lease: bots.Lease) -> re.Action:
        if lease.payload.Is(re.Action.DESCRIPTOR):
            action = re.Action()
            lease.payload.Unpack(action)
            return action
        d = re.Digest()
        lease.payload.Unpack(d)
        return re.Action.FromString(self.client.read([d])[d.hash])


def main(endpoint: Endpoint, bot_id: str | None, workdir: str | None) -> int:
    """Serve `endpoint` (its URL, instance, headers and TLS settings) until SIGTERM or SIGINT."""
    client = Client(endpoint)
    bot = Bot(client, bot_id or f"farmer-{socket.gethostname()}-{os.getpid()}", workdir or tempfile.gettempdir())
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, bot.stop)
    try:
        bot.serve()
    finally:
        client.close()
    return 0
