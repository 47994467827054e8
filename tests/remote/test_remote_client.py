"""farmer.remote's client, input-root builder and worker against a real BuildGrid (tests/remote/conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
import time

import pytest

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)

from farmer.remote import merkle  # noqa: E402
from farmer.remote.client import Blob, BlobMissing, RemoteError, digest_of, wait_ready  # noqa: E402
from farmer.remote.config import Endpoint, RemoteConfigError, parse_header, parse_url  # noqa: E402
from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re  # noqa: E402
from farmer.remote.protos.google.rpc import code_pb2  # noqa: E402


def unique(n: int = 64) -> bytes:
    return os.urandom(n)


def action_of(client, argv: list[str], files: dict[str, bytes], outputs: list[str], tmp_path,
              timeout_s: int = 0, working_directory: str = "", executable: frozenset = frozenset()):
    """Upload an action that runs `argv` over `files`; its digest."""
    inputs = []
    for rel, data in files.items():
        p = tmp_path / "src" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        inputs.append(merkle.InputFile(rel, digest_of(data), rel in executable, str(p)))
    root = merkle.build(inputs, [working_directory] if working_directory else [])
    cmd = re.Command(arguments=argv, output_paths=sorted(outputs), working_directory=working_directory)
    cmd.environment_variables.add(name="PATH", value="/usr/bin:/bin")
    cblob = Blob.of(cmd.SerializeToString(deterministic=True))
    action = re.Action(command_digest=cblob.digest, input_root_digest=root.digest, salt=unique(16))
    if timeout_s:
        action.timeout.seconds = timeout_s
    ablob = Blob.of(action.SerializeToString(deterministic=True))
    client.upload([cblob, ablob, *root.blobs])
    return ablob.digest


def test_capabilities_say_sha256_and_which_instance_executes(client_of, reapi):
    execution = client_of("")
    assert re.DigestFunction.SHA256 in execution.capabilities().cache_capabilities.digest_functions
    assert execution.can_execute()
    assert not client_of(reapi.cache_instance).can_execute()


def test_cas_round_trip_in_batches_and_by_bytestream_above_the_batch_limit(client_of, reapi):
    client = client_of(reapi.cache_instance)
    small = [Blob.of(unique(100 + i)) for i in range(50)]
    big = Blob.of(unique(5 * 1024 * 1024))  # above BuildGrid's 4 MiB batch limit
    everything = [*small, big]
    assert len(client.find_missing(b.digest for b in everything)) == 51
    assert client.upload(everything) == sum(b.digest.size_bytes for b in everything)
    assert client.find_missing(b.digest for b in everything) == []
    assert client.upload(everything) == 0  # nothing is sent twice
    got = client.read(b.digest for b in everything)
    assert all(got[b.digest.hash] == b.data for b in everything)


def test_a_missing_blob_is_BlobMissing_small_or_large(client_of, reapi):
    client = client_of(reapi.cache_instance)
    for size in (10, 6 * 1024 * 1024):
        with pytest.raises(BlobMissing):
            client.read([re.Digest(hash=digest_of(unique(16)).hash, size_bytes=size)])


def test_action_cache_update_get_and_miss(client_of, reapi):
    client = client_of(reapi.cache_instance)
    out = Blob.of(unique())
    client.upload([out])
    key = digest_of(unique())
    assert client.get_action_result(key) is None
    result = re.ActionResult(exit_code=0)
    result.output_files.add(path="out/a", digest=out.digest, is_executable=True)
    client.update_action_result(key, result)
    got = client.get_action_result(key)
    assert got.output_files[0].digest == out.digest and got.output_files[0].is_executable


def test_an_entry_whose_output_blob_is_missing_is_a_miss(client_of, reapi):
    client = client_of(reapi.cache_instance)
    key = digest_of(unique())
    result = re.ActionResult(exit_code=0)
    result.output_files.add(path="out/a", digest=digest_of(unique()))  # never uploaded
    client.update_action_result(key, result)
    assert client.get_action_result(key) is None


def test_execute_runs_on_a_worker_and_returns_outputs(client_of, tmp_path):
    client = client_of("")
    script = b"#!/bin/sh\ntr a-z A-Z\n"
    digest = action_of(client, ["/bin/sh", "-c",
                                "./up.sh < in/a.txt > out/A.txt && mkdir -p out/dir && echo x > out/dir/y "
                                "&& cp up.sh out/up && echo ran; pwd >&2"],
                       {"in/a.txt": b"hello\n", "up.sh": script}, ["out/A.txt", "out/dir", "out/up"], tmp_path,
                       executable=frozenset({"up.sh"}))
    resp = client.execute(digest, timeout=120)
    assert resp.status.code == code_pb2.OK, resp.status
    result = resp.result
    assert result.exit_code == 0
    files = {f.path: f for f in result.output_files}
    assert client.read([files["out/A.txt"].digest])[files["out/A.txt"].digest.hash] == b"HELLO\n"
    assert files["out/up"].is_executable
    assert client.read([result.stdout_digest])[result.stdout_digest.hash] == b"ran\n"
    workdir = client.read([result.stderr_digest])[result.stderr_digest.hash].decode().strip()
    assert workdir != str(tmp_path / "src") and "farmer-worker-" in workdir  # a private directory
    assert not os.path.exists(workdir)  # and removed afterwards
    (tree_entry,) = result.output_directories
    tree = re.Tree.FromString(client.read([tree_entry.tree_digest])[tree_entry.tree_digest.hash])
    root = digest_of(tree.root.SerializeToString(deterministic=True))
    assert [p for p, _ in merkle.flatten(root, merkle.tree_directories(tree))] == ["y"]
    assert client.get_action_result(digest).exit_code == 0  # the server cached it


def test_execute_honours_the_working_directory(client_of, tmp_path):
    client = client_of("")
    digest = action_of(client, ["/bin/sh", "-c", "cat ../top.txt > here.txt"], {"top.txt": b"top\n"},
                       ["here.txt"], tmp_path, working_directory="sub")
    result = client.execute(digest, timeout=120).result
    (f,) = result.output_files
    assert f.path == "here.txt" and client.read([f.digest])[f.digest.hash] == b"top\n"


def test_execute_of_a_failing_command_reports_its_exit_code(client_of, tmp_path):
    client = client_of("")
    digest = action_of(client, ["/bin/sh", "-c", "echo no >&2; exit 3"], {}, ["never"], tmp_path)
    result = client.execute(digest, timeout=120).result
    assert result.exit_code == 3 and not result.output_files
    assert client.read([result.stderr_digest])[result.stderr_digest.hash] == b"no\n"


def test_the_worker_kills_an_action_at_its_timeout(client_of, tmp_path):
    client = client_of("")
    digest = action_of(client, ["/bin/sh", "-c", "sleep 60"], {}, [], tmp_path, timeout_s=1)
    t0 = time.monotonic()
    resp = client.execute(digest, timeout=120)
    assert resp.status.code == code_pb2.DEADLINE_EXCEEDED
    assert resp.result.exit_code != 0
    assert time.monotonic() - t0 < 30  # killed, not waited for


def test_wait_execution_reattaches_to_a_running_operation(client_of, tmp_path):
    client = client_of("")
    digest = action_of(client, ["/bin/sh", "-c", "sleep 1; echo late > out.txt"], {}, ["out.txt"], tmp_path)
    from farmer.remote import rpc

    stream = rpc.bind(client._channel, "Execute")(re.ExecuteRequest(action_digest=digest), timeout=60)
    name = next(iter(stream)).name  # the first Operation names it; then the stream breaks
    stream.cancel()
    resp = client.wait_execution(name, timeout=120)
    (f,) = resp.result.output_files
    assert client.read([f.digest])[f.digest.hash] == b"late\n"


def test_execute_on_a_cache_only_instance_fails_cleanly(client_of, reapi, tmp_path):
    client = client_of(reapi.cache_instance)
    digest = action_of(client, ["/bin/true"], {}, [], tmp_path)
    with pytest.raises(RemoteError):
        client.execute(digest, timeout=30)


def test_a_dead_server_fails_at_once(client_of):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = client_of("", url=f"grpc://127.0.0.1:{port}")
    t0 = time.monotonic()
    with pytest.raises(RemoteError) as e:
        client.capabilities()
    assert e.value.code == "UNAVAILABLE"
    assert time.monotonic() - t0 < 1.5


def test_a_server_that_hangs_costs_one_short_deadline(client_of):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts connections, never speaks HTTP/2
        client = client_of("", url=f"grpc://127.0.0.1:{listener.getsockname()[1]}", timeout=30)
        t0 = time.monotonic()
        with pytest.raises(RemoteError) as e:
            client.capabilities()
        assert e.value.code == "DEADLINE_EXCEEDED"
        assert time.monotonic() - t0 < 5  # CONNECT_TIMEOUT_S, not the 30 s call timeout


def test_close_cancels_a_call_in_flight(client_of, tmp_path):
    client = client_of("")
    digest = action_of(client, ["/bin/sh", "-c", "sleep 30"], {}, [], tmp_path)
    errors = []

    def run():
        try:
            client.execute(digest, timeout=120)
        except RemoteError as e:
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.0)
    client.close()
    t.join(10)
    assert not t.is_alive() and errors and errors[0].code == "CANCELLED"


def test_headers_are_sent_but_never_shown(client_of, reapi):
    endpoint = Endpoint(reapi.url, "", (parse_header("Authorization=Bearer s3cr3t"),))
    assert endpoint.headers == (("authorization", "Bearer s3cr3t"),)
    assert "s3cr3t" not in repr(endpoint) and "authorization" in repr(endpoint)
    client = client_of("", headers=endpoint.headers)
    assert client.capabilities()  # BuildGrid without auth ignores them
    with pytest.raises(RemoteConfigError) as e:
        parse_header("s3cr3t-token-without-a-name")
    assert "s3cr3t" not in str(e.value)


def test_urls():
    assert parse_url("grpc://127.0.0.1:50051") == ("127.0.0.1:50051", False)
    assert parse_url("grpcs://remote.example.com") == ("remote.example.com:443", True)
    for bad in ("http://x:1", "grpc://", "127.0.0.1:50051", "grpc://h:1/path"):
        with pytest.raises(RemoteConfigError):
            parse_url(bad)


def test_wait_ready_gives_up(client_of):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RemoteError):
        wait_ready(Endpoint(f"grpc://127.0.0.1:{port}"), 0.3)
