"""The remote cache (farmer/remote/cache.py) against a real BuildGrid: keys from real computations of a
real Farmfile, outputs uploaded from one checkout and restored, verified, in another at another path."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

import pytest
from helpers import c_program, write_files

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)

from farmer.files.digests import Digests  # noqa: E402
from farmer.graph.load import load  # noqa: E402
from farmer.plan.uptodate import digest_or_changed  # noqa: E402
from farmer.record.cache.key import Programs, describe  # noqa: E402
from farmer.remote.cache import RemoteCache  # noqa: E402
from farmer.remote.client import Client, digest_of  # noqa: E402
from farmer.remote.config import Endpoint, RemoteSettings  # noqa: E402
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re  # noqa: E402
from farmer.store.state import State  # noqa: E402

FARMFILE = """\
[task.objects]
foreach = "src/{stem}.c"
inputs = ["src/{stem}.c"]
outputs = ["build/{stem}.o"]
depfile = "build/{stem}.d"
cmd = "cc -c -MD -MF {depfile} {inputs} -o {outputs}"

[task.app]
inputs = ["@objects"]
outputs = ["build/app"]
cmd = "cc {inputs} -o {outputs}"
"""


def checkout(path, tag: str = "") -> str:
    return str(write_files(path, {"Farmfile": FARMFILE, **c_program(tag)}))


class Build:
    """What the engine does around a remote, done by hand: load, key, look up, run or restore."""

    def __init__(self, root: str, settings: RemoteSettings, warnings: list[str]) -> None:
        _, self.graph = load(os.path.join(root, "Farmfile"), write_cache=False)
        self.state = State(os.path.join(root, ".farmer"))
        self.digests = Digests({})
        self.programs = Programs(self.digests.digest)
        self.remote = RemoteCache(settings, self.digests, self.state.sha256, warnings.append)
        self.status: dict[str, str] = {}

    def run(self) -> None:
        for comp in self.graph.computations:  # traversal order: producers first
            inputs = [(p, digest_or_changed(self.digests, p) or "missing") for p in comp.inputs]
            found = self.remote.lookup(comp, describe(comp, None, inputs, [], self.programs))
            log = os.path.join(".farmer", "logs", comp.id.replace("/", "_"))
            os.makedirs(os.path.dirname(log), exist_ok=True)
            if found is not None and found.result is not None and self.remote.restore(comp, found, log) is not None:
                self.status[comp.id] = "cached"
                continue
            for out in comp.outputs:
                os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(log, "wb") as f:
                subprocess.run(["/bin/sh", "-c", comp.action], check=True, stdout=f, stderr=subprocess.STDOUT)
            self.status[comp.id] = "ran"
            discovered = []
            if comp.depfile:
                from farmer.record import depfile
                deps = depfile.parse(open(comp.depfile).read())
                discovered = [(p, digest_or_changed(self.digests, p)) for p in deps if p not in comp.inputs]
            for out in comp.outputs:
                self.digests.forget(out)
            outputs = [(p, digest_or_changed(self.digests, p)) for p in comp.outputs]
            self.remote.store(comp, found, discovered, outputs, log, 0.1)

    def close(self) -> None:
        self.remote.close()
        self.state.save_sha256(self.remote.shas.taken())
        self.state.close()


@pytest.fixture
def settings(reapi):
    salt = os.urandom(8).hex()  # a key space of this test's own on the shared server
    return lambda **kw: RemoteSettings(Endpoint(reapi.url, reapi.cache_instance), salt=salt, **kw)


def build(root: str, settings: RemoteSettings, monkeypatch) -> tuple[Build, list[str]]:
    warnings: list[str] = []
    monkeypatch.chdir(root)
    b = Build(root, settings, warnings)
    try:
        b.run()
    finally:
        b.close()
    return b, warnings


def test_a_second_checkout_elsewhere_restores_everything(tmp_path, settings, monkeypatch):
    first = checkout(tmp_path / "a")
    b1, w1 = build(first, settings(), monkeypatch)
    assert set(b1.status.values()) == {"ran"} and not w1
    second = checkout(tmp_path / "elsewhere" / "b")
    b2, w2 = build(second, settings(), monkeypatch)
    assert b2.status == {k: "cached" for k in b1.status}, w2
    assert not w2
    for out in ("build/app", "build/main.o", "build/util.o", "build/main.d"):
        assert open(os.path.join(second, out), "rb").read() == open(os.path.join(first, out), "rb").read()
    assert os.access(os.path.join(second, "build/app"), os.X_OK)
    assert subprocess.run([os.path.join(second, "build/app")], capture_output=True, text=True).stdout == "42\n"
    # the depfile came back too, and so did the log
    assert "util.h" in open(os.path.join(second, "build/main.d")).read()


def test_an_edited_header_misses_its_dependents_only_and_reverting_hits_again(tmp_path, settings, monkeypatch):
    first = checkout(tmp_path / "a")
    build(first, settings(), monkeypatch)
    second = checkout(tmp_path / "b")
    (tmp_path / "b" / "src" / "util.h").write_text("int twice(int);  /* edited */\n")
    b2, _ = build(second, settings(), monkeypatch)
    assert b2.status["build/main.o"] == "ran" and b2.status["build/util.o"] == "ran"
    assert b2.status["build/app"] == "cached"  # the objects came out byte-identical: the link is a hit
    third = checkout(tmp_path / "c")
    b3, _ = build(third, settings(), monkeypatch)
    assert set(b3.status.values()) == {"cached"}  # the first variant is still there


def test_read_only_uploads_nothing(tmp_path, settings, monkeypatch, client_of, reapi):
    tag = os.urandom(8).hex()  # bytes of this test's own: no other test uploaded them
    first = checkout(tmp_path / "a", tag)
    b1, _ = build(first, settings(upload=False), monkeypatch)
    assert set(b1.status.values()) == {"ran"}
    client = client_of(reapi.cache_instance)
    with open(os.path.join(first, "build/app"), "rb") as f:
        assert client.find_missing([digest_of(f.read())])  # the program's bytes never went up
    b2, _ = build(checkout(tmp_path / "b", tag), settings(upload=False), monkeypatch)
    assert set(b2.status.values()) == {"ran"}


def test_missing_or_failed_entries_are_misses_and_the_run_is_right(tmp_path, settings, monkeypatch, client_of, reapi):
    first = checkout(tmp_path / "a")
    b1, _ = build(first, settings(), monkeypatch)
    client = client_of(reapi.cache_instance)
    # poison the objects' entries: one lacks its object, the other names a blob the CAS never had
    second = checkout(tmp_path / "b")
    monkeypatch.chdir(second)
    b = Build(second, settings(), [])
    for comp in b.graph.computations:
        inputs = [(p, digest_or_changed(b.digests, p) or "missing") for p in comp.inputs]
        found = b.remote.lookup(comp, describe(comp, None, inputs, [], b.programs))
        if found is None:
            continue  # app: its inputs (the objects) do not exist here yet
        bad = re.ActionResult()
        bad.CopyFrom(found.result)
        if comp.id == "build/main.o":
            del bad.output_files[:]
            bad.output_files.add(path="build/main.d", digest=digest_of(b""))
        else:
            bad.output_files[0].digest.CopyFrom(digest_of(os.urandom(32)))  # never uploaded
        client.update_action_result(found.action.digest, bad)
    b.close()
    b2, warnings = build(second, settings(), monkeypatch)
    assert b2.status["build/main.o"] == "ran" and b2.status["build/util.o"] == "ran"
    assert any("lacks build/main.o" in w for w in warnings)
    assert subprocess.run([os.path.join(second, "build/app")], capture_output=True, text=True).stdout == "42\n"


def test_a_blob_damaged_on_the_server_is_a_miss_that_changes_nothing(tmp_path, own_cache_server, monkeypatch):
    own = RemoteSettings(Endpoint(own_cache_server.url, ""))
    first = checkout(tmp_path / "a")
    build(first, own, monkeypatch)
    with open(os.path.join(first, "build/util.o"), "rb") as f:
        damaged = own_cache_server.blob(digest_of(f.read()))
    with open(damaged, "r+b") as f:  # the server's file, same size, other bytes
        f.write(b"\0" * 16)
    second = checkout(tmp_path / "b")
    sent: dict[str, bytes] = {}  # what BatchUpdateBlobs carried
    batch_update = Client._batch_update
    monkeypatch.setattr(Client, "_batch_update", lambda self, requests: (
        sent.update((r.digest.hash, r.data) for r in requests), batch_update(self, requests))[1])
    b2, warnings = build(second, own, monkeypatch)
    assert b2.status["build/util.o"] == "ran"
    named = f"blob {digest_of(open(os.path.join(first, 'build/util.o'), 'rb').read()).hash}/"
    assert any("does not match its digest" in w and named in w for w in warnings), warnings
    # the good copy went up again although FindMissingBlobs says the server has it (a server that
    # keeps the first bytes it got, as BuildGrid's disk storage does, stays damaged: docs/remote.md)
    with open(os.path.join(second, "build/util.o"), "rb") as f:
        good = f.read()
    assert sent.get(digest_of(good).hash) == good, sorted(sent)
    assert open(os.path.join(second, "build/util.o"), "rb").read() == open(os.path.join(first, "build/util.o"), "rb").read()
    assert not [f for f in os.listdir(os.path.join(second, "build")) if "remote-tmp" in f]
    # BuildGrid's disk storage kept the damaged bytes: the next checkout finds them again
    b3, warnings = build(checkout(tmp_path / "c"), own, monkeypatch)
    assert b3.status["build/util.o"] == "ran" and any("does not match its digest" in w for w in warnings)
    # what its operator does (docs/remote.md): the damaged file removed; the next build that
    # misses it runs it and uploads it, and from then on it is restored right
    os.unlink(damaged)
    b4, _ = build(checkout(tmp_path / "d"), own, monkeypatch)
    assert b4.status["build/util.o"] == "ran"
    fifth = checkout(tmp_path / "e")
    b5, warnings = build(fifth, own, monkeypatch)
    assert set(b5.status.values()) == {"cached"} and not warnings, (b5.status, warnings)
    with open(damaged, "rb") as f:
        assert f.read() == good
    assert open(os.path.join(fifth, "build/util.o"), "rb").read() == good


def test_a_server_killed_mid_build_is_one_warning_and_the_build_goes_on(tmp_path, own_cache_server, monkeypatch):
    own = RemoteSettings(Endpoint(own_cache_server.url, ""))
    monkeypatch.chdir(checkout(tmp_path / "a"))
    warnings: list[str] = []
    b = Build(str(tmp_path / "a"), own, warnings)
    comps = b.graph.computations
    run_one = b.run  # run the first computation with the server up, the rest after it died
    b.graph.computations = comps[:1]
    run_one()
    own_cache_server.kill()
    b.graph.computations = comps[1:]
    run_one()
    b.close()
    assert set(b.status.values()) == {"ran"} and len(b.status) == len(comps)
    assert len(warnings) == 1 and ("unavailable" in warnings[0] or "upload" in warnings[0]), warnings
    assert subprocess.run(["build/app"], capture_output=True, text=True).stdout == "42\n"


def test_a_dead_server_is_one_warning_and_a_local_build(tmp_path, monkeypatch):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b, warnings = build(checkout(tmp_path / "a"), RemoteSettings(Endpoint(f"grpc://127.0.0.1:{port}")), monkeypatch)
    assert set(b.status.values()) == {"ran"}
    assert len(warnings) == 1 and "unavailable" in warnings[0] and "building without it" in warnings[0]


def test_the_sha_side_table_is_filled(tmp_path, settings, monkeypatch):
    first = checkout(tmp_path / "a")
    build(first, settings(), monkeypatch)
    state = State(os.path.join(first, ".farmer"))
    from farmer.files.digests import hash_file
    assert state.sha256(hash_file(os.path.join(first, "src/util.c")))[1] == os.path.getsize(os.path.join(first, "src/util.c"))
    state.close()
    shutil.rmtree(first)
