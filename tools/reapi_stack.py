#!/usr/bin/env python3
"""A throw-away REAPI stack on 127.0.0.1 for farmer's tests: PostgreSQL (Debian's), BuildGrid 0.4.4
(PyPI, in its own venv: it pins its own grpcio and protobuf) and `farmer worker` bots.

    reapi_stack.py install               the BuildGrid venv (once; kept in $FARMER_BGD_VENV)
    reapi_stack.py start DIR [BOTS]      start everything with state in DIR; prints `export` lines
    reapi_stack.py stop DIR              stop by pid what start started
    reapi_stack.py watch DIR PID         (internal) stop the stack in DIR once process PID is gone

The server has two instances: "" (CAS, action cache, execution through the bots) and "cache" (CAS
and action cache only: a cache-only server). Ports are picked free, so parallel runs don't collide.
tests/remote/conftest.py imports this module to start the same stack when CI has not, tied to the
test process (`tie`): a watchdog stops the stack when that process is gone, however it ended (kill -9
too), so no server outlives the tests. `start` from the command line (.ci/run) ties nothing: its
stack lives until `stop`.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's farmer

BUILDGRID = "buildgrid==0.4.4"
VENV = os.environ.get("FARMER_BGD_VENV", "/var/tmp/farmer-ci/bgd-venv")
READY_S = 120

CONFIG = """\
server:
{server}
authorization:
{authorization}
{connections}
storages:
  - !lru-storage &cas
    size: 1024MB
{cache_storage}
caches:
  - !lru-action-cache &ac
    storage: *cas
    max-cached-refs: 100000
    allow-updates: true
    cache-failed-actions: false
  - !lru-action-cache &ac2
    storage: *cas2
    max-cached-refs: 100000
    allow-updates: true
    cache-failed-actions: false
{schedulers}
instances:
{instances}
monitoring:
  enabled: false
thread-pool-size: 20
"""

INSECURE = """\
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true"""

# TLS with the server's certificate and key; with client_ca, clients must show a certificate it signed
TLS = """\
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: false
    credentials:
      tls-server-key: {key}
      tls-server-cert: {cert}"""

# a JWT (HS256) signed with the secret in `secret`: every call must carry one
JWT = """\
  method: jwt
  secret: {secret}
  algorithm: hs256"""

CONNECTIONS = """\
connections:
  - !sql-connection &sql
    connection-string: {dsn}
    pool-size: 5
    max-overflow: 5"""

# the assigner's defaults (1 s interval + jitter, 5 s backoff) would add seconds to every action
SCHEDULERS = """\
schedulers:
  - !sql-scheduler &sched
    sql: *sql
    storage: *cas
    action-cache: *ac
    poll-interval: 0.05
    bot-session-keepalive-timeout: {bot_timeout}
    session-expiry-timer-interval: {expiry_interval}
    assigners:
      - !priority-age-assigner
        count: 1
        interval: 0.02
        jitter-factor: 0.01
        failure-backoff: 0.05"""

EXEC_INSTANCE = """\
  - name: ""
    services:
      - !action-cache
        cache: *ac
      - !execution
        scheduler: *sched
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas"""

CACHE_INSTANCE = """\
  - name: "{name}"
    services:
      - !action-cache
        cache: *ac2
      - !cas
        storage: *cas2
      - !bytestream
        storage: *cas2"""


def bgd() -> str | None:
    """The bgd program: $FARMER_BGD, the venv's, or one on PATH."""
    for candidate in (os.environ.get("FARMER_BGD"), os.path.join(VENV, "bin", "bgd"), shutil.which("bgd")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def pgbin() -> str | None:
    """PostgreSQL's server binaries (Debian puts them in /usr/lib/postgresql/N/bin)."""
    for d in [os.environ.get("PGBIN") or ""] + sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if d and os.access(os.path.join(d, "initdb"), os.X_OK):
            return d
    return None


def install() -> str:
    if bgd() is None:
        os.makedirs(os.path.dirname(VENV), exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "--quiet", BUILDGRID, "psycopg2-binary"],
                       check=True, timeout=900)
    return bgd()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(args: list[str]) -> list[str]:
    # initdb refuses to run as root
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def _spawn(args: list[str], log: str, env: dict | None = None) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)


def start_postgres(state: str) -> str:
    """A fresh PostgreSQL cluster in state/pg; its DSN."""
    pg = pgbin()
    if pg is None:
        raise RuntimeError("no PostgreSQL server binaries (apt-get install -y postgresql)")
    # its own folder, which user postgres can reach (a pytest tmp dir is root's alone)
    top = tempfile.mkdtemp(prefix="farmer-reapi-pg-")
    _record(state, "pg_dir", top)
    data, sock = os.path.join(top, "data"), os.path.join(top, "sock")
    os.makedirs(sock)
    if os.geteuid() == 0:
        shutil.chown(top, "postgres", "postgres")
        shutil.chown(sock, "postgres", "postgres")
    port = free_port()
    log = os.path.join(state, "pg.log")
    run = lambda args, t: subprocess.run(_as_postgres(args), check=True, timeout=t, stdout=subprocess.DEVNULL,
                                         stderr=open(log, "ab"))  # noqa: E731
    run([f"{pg}/initdb", "-D", data, "-U", "bgd", "--auth=trust", "-E", "UTF8"], 120)
    _record(state, "pg_data", data)  # (before it runs: a stop meanwhile stops it once it does)
    opts = (f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off")
    run([f"{pg}/pg_ctl", "-D", data, "-l", os.path.join(top, "server.log"), "-w", "-o", opts, "start"], 60)
    run([f"{pg}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "bgd", "bgd"], 30)
    return f"postgresql+psycopg2://bgd@127.0.0.1:{port}/bgd"


def start_server(state: str, name: str, execution: bool, cache_instance: str = "cache", disk: str | None = None,
                 bot_timeout_s: int = 60, tls: dict | None = None, jwt_secret: str | None = None,
                 ready=None) -> str:
    """A bgd server (with execution: it starts PostgreSQL first); its grpc:// URL. With `disk`, the
    cache instance keeps its blobs in files there (DIR/cas/objects/ab/cdef...), which a test may damage.
    `bot_timeout_s`: how long the scheduler keeps a bot's session that does not call (a test of bots
    the server dropped makes it short). `tls`: {"key", "cert"[, "client_ca"]} files: grpcs:// (with
    client_ca, mTLS); `jwt_secret`: a file whose secret signs the JWTs every call must carry;
    `ready`: the farmer.remote Endpoint to wait on (a TLS server's needs its CA and credentials)."""
    program = bgd()
    if program is None:
        raise RuntimeError(f"no bgd: run `{sys.argv[0]} install` (pip install {BUILDGRID})")
    port = free_port()
    server = INSECURE.format(port=port)
    if tls:
        server = TLS.format(port=port, key=tls["key"], cert=tls["cert"])
        if tls.get("client_ca"):
            server += f"\n      tls-client-certs: {tls['client_ca']}"
    authorization = JWT.format(secret=jwt_secret) if jwt_secret else "  method: none"
    storage = f"  - !disk-storage &cas2\n    path: {disk}" if disk else "  - !lru-storage &cas2\n    size: 256MB"
    if execution:
        dsn = start_postgres(state)
        subprocess.run([program, "migrate", "apply", dsn], check=True, timeout=120,
                       stdout=open(os.path.join(state, "migrate.log"), "ab"), stderr=subprocess.STDOUT)
        schedulers = SCHEDULERS.format(bot_timeout=bot_timeout_s, expiry_interval=min(10.0, bot_timeout_s / 3))
        text = CONFIG.format(server=server, authorization=authorization, connections=CONNECTIONS.format(dsn=dsn),
                             schedulers=schedulers, cache_storage=storage,
                             instances=EXEC_INSTANCE + "\n" + CACHE_INSTANCE.format(name=cache_instance))
    else:
        text = CONFIG.format(server=server, authorization=authorization, connections="", schedulers="",
                             cache_storage=storage,
                             instances=CACHE_INSTANCE.format(name=cache_instance))
    config = os.path.join(state, f"{name}.yml")
    with open(config, "w") as f:
        f.write(text)
    proc = _spawn([program, "server", "start", config], os.path.join(state, f"{name}.log"))
    _record(state, name, proc.pid)
    url = f"{'grpcs' if tls else 'grpc'}://127.0.0.1:{port}"
    _wait_ready(url, cache_instance, proc, ready)
    return url


def _wait_ready(url: str, instance: str, proc: subprocess.Popen, ready=None) -> None:
    from farmer.remote.client import RemoteError, wait_ready
    from farmer.remote.config import Endpoint

    until = time.monotonic() + READY_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"bgd exited with {proc.returncode} before it answered (see its log)")
        try:
            wait_ready(ready(url) if ready else Endpoint(url, instance), 1.0)
            return
        except RemoteError:
            if time.monotonic() > until:
                raise RuntimeError(f"bgd did not answer on {url} within {READY_S} s") from None


def start_bots(state: str, url: str, count: int, worker_args: tuple[str, ...] = ()) -> None:
    """`count` `farmer worker` bots of `url`; `worker_args`: more options for each (a TLS
    server's --remote-ca, --remote-cert, --remote-key, --remote-header)."""
    env = dict(os.environ)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    work = os.path.join(state, "work")
    os.makedirs(work, exist_ok=True)
    for i in range(count):
        proc = _spawn([sys.executable, "-m", "farmer", "worker", "--remote", url, "--bot-id", f"farmer-test-{i}",
                       "--workdir", work, *worker_args], os.path.join(state, f"bot-{i}.log"), env)
        _record(state, f"bot-{i}", proc.pid)


def start(state: str, bots: int = 2, bot_timeout_s: int = 60, tied_to: int | None = None) -> dict[str, str]:
    """The whole stack; the environment variables the tests read. `tied_to`: a pid whose end
    stops the stack (`tie`)."""
    os.makedirs(state, exist_ok=True)
    if tied_to is not None:
        tie(state, tied_to)
    t0 = time.monotonic()
    try:
        url = start_server(state, "bgd", execution=True, bot_timeout_s=bot_timeout_s)
        start_bots(state, url, bots)
    except BaseException:
        stop(state)
        raise
    env = {"FARMER_TEST_REAPI": url, "FARMER_TEST_REAPI_CACHE": "cache", "FARMER_TEST_REAPI_STATE": state}
    _record(state, "env", env)
    print(f"reapi stack: server {url} and {bots} bots up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return env


WATCH_EVERY_S = 0.1  # how often the watchdog looks whether the process it watches is gone
_NOT_PROCESSES = ("pg_data", "pg_dir", "env", "tied_to", "watchdog")  # pids.json keys stop kills not


def tie(state: str, pid: int) -> None:
    """Whatever is started with its state in `state`, stopped once process `pid` is gone: a
    watchdog process (in a session of its own, so the Ctrl-C of the tests' terminal leaves it
    to do its work) that polls for `pid` and then runs `stop`. It ends by itself once the
    stack is stopped otherwise (no pids.json). PostgreSQL, which pg_ctl starts as a daemon,
    is stopped by it too (pg_ctl stop -m immediate)."""
    os.makedirs(state, exist_ok=True)
    _record(state, "tied_to", pid)  # (before the watchdog looks for pids.json)
    with open(os.path.join(state, "watchdog.log"), "ab") as out:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "watch", state, str(pid)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    _record(state, "watchdog", proc.pid)


def watch(state: str, pid: int) -> None:
    """The watchdog's loop (`tie`)."""
    path = os.path.join(state, "pids.json")
    while os.path.exists(path):
        if not _alive(pid):
            stop(state)
            return
        time.sleep(WATCH_EVERY_S)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie no longer does: it waits only to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _record(state: str, key: str, value) -> None:
    path = os.path.join(state, "pids.json")
    data = json.load(open(path)) if os.path.exists(path) else {}
    data[key] = value
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


def kill(pid: int, within_s: float = 10.0) -> None:
    """SIGTERM the process group `pid` leads, SIGKILL it if it lingers."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    until = time.monotonic() + within_s
    while time.monotonic() < until:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not our child: poll for it
            if not _alive(pid):
                return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop(state: str) -> None:
    path = os.path.join(state, "pids.json")
    if not os.path.exists(path):
        return
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:  # stopped meanwhile (the tests' teardown and the watchdog at once)
        return
    for key in sorted(k for k in data if k.startswith("bot-")):
        kill(data[key])
    for key in sorted(k for k in data if k not in _NOT_PROCESSES and not k.startswith("bot-")):
        kill(data[key])
    if "pg_data" in data and os.path.exists(os.path.join(data["pg_data"], "postmaster.pid")):
        pg = pgbin()
        subprocess.run(_as_postgres([f"{pg}/pg_ctl", "-D", data["pg_data"], "-m", "immediate", "-w", "stop"]),
                       timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if "pg_dir" in data:
        shutil.rmtree(data["pg_dir"], ignore_errors=True)
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    watchdog = data.get("watchdog")
    if watchdog and watchdog != os.getpid():  # it ends by itself now: reaped, if this process started it
        until = time.monotonic() + 10 * WATCH_EVERY_S
        try:
            while os.waitpid(watchdog, os.WNOHANG)[0] == 0 and time.monotonic() < until:
                time.sleep(WATCH_EVERY_S / 4)
        except ChildProcessError:
            pass


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        print(install())
    elif argv[:1] == ["start"] and len(argv) in (2, 3):
        env = start(argv[1], int(argv[2]) if len(argv) == 3 else 2)
        for k, v in env.items():
            print(f"export {k}={v}")
    elif argv[:1] == ["stop"] and len(argv) == 2:
        stop(argv[1])
    elif argv[:1] == ["watch"] and len(argv) == 3:
        watch(argv[1], int(argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
