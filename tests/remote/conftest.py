"""The REAPI server the remote tests talk to: a real BuildGrid with PostgreSQL and `farmer worker` bots.

Under .ci/run the stack is already up and FARMER_TEST_REAPI names it. Elsewhere the session starts one
itself (tools/reapi_stack.py) when BuildGrid and PostgreSQL are installed, once per session, and stops it
at the end; without them the tests skip, except under CI=true, where a missing server is a failure.
Every stack or server a test starts here is tied to the test process (reapi_stack.tie): when pytest is
killed, even with SIGKILL, a watchdog stops it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from conftest import Result, run_farmer, start_farmer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_stack():
    spec = importlib.util.spec_from_file_location("reapi_stack", os.path.join(REPO, "tools", "reapi_stack.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unavailable(why: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and no REAPI server: {why}")
    pytest.skip(f"no REAPI server: {why}")


class Farmer:
    """`farmer build ARGS` in a project, each command counting its local runs in $RUNS: a worker
    gets only the task's env, so a command that ran remotely (or was restored) leaves no mark
    there. The remote and cache settings of the environment are left out."""

    __slots__ = ("runs",)

    def __init__(self, tmp_path) -> None:
        self.runs = str(tmp_path / "runs.txt")

    def __call__(self, root: str, *args: str, env: dict | None = None, timeout: float = 180) -> Result:
        return run_farmer(root, "build", *args, env={"RUNS": self.runs, **(env or {})}, timeout=timeout,
                          unset=("FARMER_REMOTE", "FARMER_CACHE"))

    def start(self, root: str, *args: str) -> subprocess.Popen:
        """`farmer build ARGS` started and left running (with the environment's remote settings)."""
        return start_farmer(root, "build", *args, env={"RUNS": self.runs})

    def ran(self) -> list[str]:
        """The commands that ran locally since the last call."""
        if not os.path.exists(self.runs):
            return []
        with open(self.runs) as f:
            out = f.read().split()
        os.unlink(self.runs)
        return sorted(out)


@pytest.fixture
def farmer(tmp_path):
    return Farmer(tmp_path)


@pytest.fixture
def salt():
    return os.urandom(8).hex()  # a key space of the test's own on the shared server


class Server:
    """A running REAPI server: `url` with an execution instance "" and a cache-only instance."""

    __slots__ = ("url", "cache_instance", "state")

    def __init__(self, url: str, cache_instance: str, state: str | None) -> None:
        self.url, self.cache_instance, self.state = url, cache_instance, state


@pytest.fixture(scope="session")
def reapi(tmp_path_factory):
    if importlib.util.find_spec("grpc") is None or (importlib.util.find_spec("google") is None or importlib.util.find_spec("google.protobuf") is None):
        unavailable("grpcio and protobuf are not installed (pip install -e '.[remote]')")
    url = os.environ.get("FARMER_TEST_REAPI")
    if url:
        yield Server(url, os.environ.get("FARMER_TEST_REAPI_CACHE", "cache"), os.environ.get("FARMER_TEST_REAPI_STATE"))
        return
    stack = load_stack()
    if stack.bgd() is None:
        unavailable("BuildGrid is not installed (python tools/reapi_stack.py install)")
    if stack.pgbin() is None:
        unavailable("PostgreSQL is not installed (apt-get install postgresql)")
    state = str(tmp_path_factory.mktemp("reapi"))
    try:
        env = stack.start(state, bots=2, tied_to=os.getpid())
    except Exception as e:  # noqa: BLE001 - reported as the reason to skip (or fail under CI)
        unavailable(f"the stack did not start: {e}")
    try:
        yield Server(env["FARMER_TEST_REAPI"], env["FARMER_TEST_REAPI_CACHE"], state)
    finally:
        stack.stop(state)


class CacheServer:
    """A cache-only bgd of a test's own (no PostgreSQL), which the test may kill; its blobs are
    files under `blobs` (cas/objects/ab/cdef...), which the test may damage."""

    __slots__ = ("url", "pid", "stack", "state", "blobs")

    def __init__(self, stack, state: str) -> None:
        self.stack, self.state = stack, state
        self.blobs = os.path.join(state, "blobs")
        stack.tie(state, os.getpid())
        self.url = stack.start_server(state, "cache-bgd", execution=False, cache_instance="", disk=self.blobs)
        import json
        self.pid = json.load(open(os.path.join(state, "pids.json")))["cache-bgd"]

    def kill(self) -> None:
        self.stack.kill(self.pid)

    def blob(self, digest) -> str:
        return os.path.join(self.blobs, "cas", "objects", digest.hash[:2], digest.hash[2:])


@pytest.fixture
def own_cache_server(reapi, tmp_path):
    stack = load_stack()
    if stack.bgd() is None:
        unavailable("BuildGrid is not installed")
    state = str(tmp_path / "own-bgd")
    os.makedirs(state)
    server = CacheServer(stack, state)
    try:
        yield server
    finally:
        stack.stop(state)


class ExecStack:
    """A whole execution stack of a test's own (PostgreSQL, bgd, bots), which the test may freeze,
    and whose bots it may stop: `pids` by name (bgd, bot-0, ...) as tools/reapi_stack.py recorded them."""

    __slots__ = ("url", "state", "stack")

    def __init__(self, stack, state: str, url: str) -> None:
        self.stack, self.state, self.url = stack, state, url

    @property
    def pids(self) -> dict:
        import json
        with open(os.path.join(self.state, "pids.json")) as f:
            return json.load(f)

    def bot_sessions(self) -> int:
        """The bot sessions the server's scheduler keeps (in its database)."""
        import re
        with open(os.path.join(self.state, "bgd.yml")) as f:
            port = re.search(r"postgresql\+psycopg2://bgd@127\.0\.0\.1:(\d+)/bgd", f.read()).group(1)
        out = subprocess.run([os.path.join(self.stack.pgbin(), "psql"), "-h", "127.0.0.1", "-p", port, "-U", "bgd",
                              "-d", "bgd", "-tAc", "SELECT count(*) FROM bots"], check=True, timeout=60,
                             capture_output=True, text=True).stdout
        return int(out.strip())

    def bot_log(self, i: int) -> str:
        with open(os.path.join(self.state, f"bot-{i}.log"), errors="replace") as f:
            return f.read()


@pytest.fixture
def own_exec_stack(reapi, tmp_path):
    """own_exec_stack(bots=1, bot_timeout_s=60) -> an ExecStack, stopped after the test."""
    stack = load_stack()
    if stack.bgd() is None or stack.pgbin() is None:
        unavailable("BuildGrid or PostgreSQL is not installed")
    states = []

    def make(bots: int = 1, bot_timeout_s: int = 60) -> ExecStack:
        state = str(tmp_path / f"own-stack-{len(states)}")
        states.append(state)
        env = stack.start(state, bots=bots, bot_timeout_s=bot_timeout_s, tied_to=os.getpid())
        return ExecStack(stack, state, env["FARMER_TEST_REAPI"])

    try:
        yield make
    finally:
        for state in states:
            for pid in _stopped_pids(state):  # a frozen process cannot take its SIGTERM
                try:
                    os.kill(pid, __import__("signal").SIGCONT)
                except ProcessLookupError:
                    pass
            stack.stop(state)


def _stopped_pids(state: str) -> list[int]:
    import json
    try:
        with open(os.path.join(state, "pids.json")) as f:
            data = json.load(f)
    except OSError:
        return []
    return [v for k, v in data.items() if isinstance(v, int) and k not in ("tied_to", "watchdog")]


@pytest.fixture
def client_of(reapi):
    """client_of(instance="") -> a farmer.remote Client on the test server, closed after the test."""
    sys.path.insert(0, REPO)
    from farmer.remote.client import Client
    from farmer.remote.config import Endpoint

    made = []

    def make(instance: str = "", url: str | None = None, **kw):
        c = Client(Endpoint(url or reapi.url, instance, **kw))
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


class TlsServer:
    """A cache-only bgd of a test's own behind TLS (a private CA made with openssl), asking for
    a client certificate (mTLS) and a JWT on every call: `url` (grpcs://), the CA, the client's
    certificate and key files, and `token()` a valid JWT."""

    __slots__ = ("url", "ca", "cert", "key", "secret", "dir")

    def __init__(self, directory: str, secret: str) -> None:
        self.dir, self.secret = directory, secret
        self.ca = os.path.join(directory, "ca.pem")
        self.cert = os.path.join(directory, "client.pem")
        self.key = os.path.join(directory, "client.key")
        self.url = ""

    def token(self, lifetime_s: int = 3600) -> str:
        """A JWT (HS256) the server takes: signed with its secret, expiring in `lifetime_s`."""
        import base64
        import hashlib
        import hmac
        import json
        import time

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = b64(json.dumps({"sub": "farmer-test", "exp": int(time.time()) + lifetime_s}).encode())
        signature = hmac.new(self.secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{b64(signature)}"


def _openssl(directory: str) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=120)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=farmer test CA")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(directory, f"{name}.ext"), "w") as f:
            f.write(ext)
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN=farmer test {name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")


def _tls_setup(stack, directory: str) -> TlsServer:
    """Certificates made and the JWT secret written in `directory`; a TlsServer without its url."""
    import shutil
    if stack.bgd() is None:
        unavailable("BuildGrid is not installed")
    if shutil.which("openssl") is None:
        unavailable("openssl is not installed (apt-get install openssl)")
    os.makedirs(directory)
    _openssl(directory)
    server = TlsServer(directory, os.urandom(16).hex())
    with open(os.path.join(directory, "jwt-secret"), "w") as f:
        f.write(server.secret)
    return server


def _start_tls(stack, server: TlsServer, state: str, execution: bool) -> str:
    """A bgd behind TLS (mTLS and a JWT on every call) with `server`'s files; its grpcs:// URL."""
    sys.path.insert(0, REPO)
    from farmer.remote.config import Endpoint

    tls = {"key": os.path.join(server.dir, "server.key"), "cert": os.path.join(server.dir, "server.pem"),
           "client_ca": server.ca}
    return stack.start_server(
        state, "tls-bgd", execution=execution, cache_instance="cache" if execution else "", tls=tls,
        jwt_secret=os.path.join(server.dir, "jwt-secret"),
        ready=lambda url: Endpoint(url, "", (("authorization", f"Bearer {server.token()}"),), ca=server.ca,
                                   cert=server.cert, key=server.key))


@pytest.fixture(scope="module")
def tls_server(reapi, tmp_path_factory):
    """One TlsServer for a module's tests (each starts a bgd and makes certificates)."""
    tmp_path = tmp_path_factory.mktemp("tls-server")
    stack = load_stack()
    server = _tls_setup(stack, str(tmp_path / "tls"))
    state = str(tmp_path / "tls-bgd")
    os.makedirs(state)
    try:
        stack.tie(state, os.getpid())
        server.url = _start_tls(stack, server, state, execution=False)
        yield server
    finally:
        stack.stop(state)


@pytest.fixture
def tls_exec_stack(reapi, tmp_path):
    """A TlsServer whose bgd has an execution instance "" (PostgreSQL) and one `farmer worker` bot
    that reaches it over TLS with the client certificate and a JWT; stopped after the test."""
    stack = load_stack()
    if stack.pgbin() is None:
        unavailable("PostgreSQL is not installed")
    server = _tls_setup(stack, str(tmp_path / "tls"))
    state = str(tmp_path / "tls-stack")
    os.makedirs(state)
    try:
        stack.tie(state, os.getpid())
        server.url = _start_tls(stack, server, state, execution=True)
        stack.start_bots(state, server.url, 1, ("--remote-ca", server.ca, "--remote-cert", server.cert,
                                                "--remote-key", server.key,
                                                "--remote-header", f"authorization=Bearer {server.token()}"))
        yield server
    finally:
        stack.stop(state)
