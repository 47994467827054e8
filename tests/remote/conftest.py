"""The REAPI server the remote tests talk to: a real BuildGrid with PostgreSQL and `farmer worker` bots.

Under .ci/run the stack is already up and FARMER_TEST_REAPI names it. Elsewhere the session starts one
itself (tools/reapi_stack.py) when BuildGrid and PostgreSQL are installed, once per session, and stops it
at the end; without them the tests skip, except under CI=true, where a missing server is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

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


def c_sources(path, tag: str = "") -> None:
    """A small C program under path/src (main.c and util.c, which includes util.h) that prints 42;
    `tag` goes into util.c's object, so a test can have bytes no other test uploaded."""
    (path / "src").mkdir(parents=True, exist_ok=True)
    (path / "src" / "util.h").write_text("int twice(int);\n")
    (path / "src" / "util.c").write_text(f'#include "util.h"\nconst char *tag = "{tag}";\n'
                                         'int twice(int x) { return 2 * x; }\n')
    (path / "src" / "main.c").write_text('#include <stdio.h>\n#include "util.h"\n'
                                         'int main(void) { printf("%d\\n", twice(21)); return 0; }\n')


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
        env = stack.start(state, bots=2)
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
