"""Unit tests for farmer/worlds/protocol.py and the world manager's bookkeeping: frames
survive any split, garbage is an error at once (never a wait for more bytes)."""

from __future__ import annotations

import json
import os
import stat
import struct

import pytest

from farmer.manifest.farmfile import WorldSpec
from farmer.run.worlds import protocol
from farmer.run.worlds.manager import FifoDir, Futures, WorldTree
from farmer.run.worlds.protocol import Decoder, ProtocolError, encode


def test_round_trip_in_any_split():
    data = encode("ready", pid=12, version=protocol.VERSION, threads=1) + encode(
        "done", job=3, code=0, signal=None, wall=0.5, cpu=0.25, rss_kb=1000)
    for size in (1, 2, 3, 7, len(data)):
        d = Decoder()
        got = []
        for i in range(0, len(data), size):
            got += d.feed(data[i:i + size])
        d.eof()
        assert [m["t"] for m in got] == ["ready", "done"]
        assert got[1]["wall"] == 0.5 and got[1]["signal"] is None


def test_garbage_is_an_error_at_the_first_byte():
    with pytest.raises(ProtocolError, match="not a farmer world frame"):
        Decoder().feed(b"x")  # one wrong byte is enough: no waiting for a header
    with pytest.raises(ProtocolError):
        Decoder().feed(b"Traceback (most recent call last):\n")


def test_wrong_version_and_huge_length():
    with pytest.raises(ProtocolError, match="version 9"):
        Decoder().feed(protocol.HEADER.pack(protocol.MAGIC, 9, 2) + b"{}")
    with pytest.raises(ProtocolError, match="above the limit"):
        Decoder().feed(protocol.HEADER.pack(protocol.MAGIC, protocol.VERSION, 1 << 30))


@pytest.mark.parametrize("payload,words", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (json.dumps({"t": "launch"}).encode(), "unknown message type"),
    (json.dumps({"t": "forked", "job": 1}).encode(), "without 'pid'"),
    (json.dumps({"t": "forked", "job": "1", "pid": 2}).encode(), "wrong type"),
    (json.dumps({"t": "forked", "job": True, "pid": 2}).encode(), "wrong type"),
])
def test_bad_payloads(payload, words):
    frame = protocol.HEADER.pack(protocol.MAGIC, protocol.VERSION, len(payload)) + payload
    with pytest.raises(ProtocolError, match=words):
        Decoder().feed(frame)


def test_truncated_stream_is_an_error_at_eof():
    d = Decoder()
    frame = encode("close")
    assert d.feed(frame[:-1]) == []
    with pytest.raises(ProtocolError, match="ended inside a frame"):
        d.eof()


def test_encode_refuses_unknown_types():
    with pytest.raises(ValueError):
        encode("launch")
    assert struct.unpack(">3sBI", encode("close")[:8])[1] == protocol.VERSION


# -- manager: futures and the world tree ------------------------------------------------

def tree():
    return WorldTree({
        "base": WorldSpec("base", None, ["import json"]),
        "mid": WorldSpec("mid", None, ["M = 1"], parent="base"),
        "leaf": WorldSpec("leaf", None, ["L = 1"], parent="mid"),
        "other": WorldSpec("other", None, []),
    })


def test_world_chain():
    t = tree()
    assert t.chain("leaf") == ["base", "mid", "leaf"]
    assert t.ancestors("leaf") == ["mid", "base"]
    assert t.nodes["base"].children == ["mid"]


def test_futures_keep_ancestors_needed_and_find_the_last():
    t = tree()
    f = Futures(t, {0: "leaf", 1: "leaf", 2: "base", 3: "other"}, expected=[0, 1, 2])
    assert f.needed("base") == 3 and f.needed("mid") == 2 and f.needed("other") == 0
    assert not f.is_last("leaf")
    f.remove(0)
    assert f.is_last("leaf")  # one future left below leaf, and it is leaf's own
    assert not f.is_last("base")  # base's task is not alone: leaf still needs base
    f.add(3)
    f.add(3)  # counted once
    assert f.own["other"] == 1
    assert f.remove(1) == "leaf" and f.remove(1) is None
    assert f.closable("leaf") == ["leaf", "mid"]  # base still has its own task
    f.remove(2)
    assert f.closable("leaf") == ["leaf", "mid", "base"]


def test_fifo_dir_is_private_and_removed():
    d = FifoDir()
    base = d.pair("w")
    assert stat.S_IMODE(os.stat(d.path).st_mode) == 0o700
    assert stat.S_ISFIFO(os.stat(base + ".in").st_mode) and stat.S_ISFIFO(os.stat(base + ".out").st_mode)
    path = d.path
    d.close()
    assert not os.path.exists(path)


def test_fifo_dirs_of_killed_builds_are_swept(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f"farmer-worlds-{gone}-abc"
    live = tmp_path / f"farmer-worlds-{os.getpid()}-abc"
    stale.mkdir()
    live.mkdir()
    d = FifoDir()
    d.pair("w")
    assert not stale.exists() and live.exists()
    assert os.path.dirname(d.path) == str(tmp_path)
    d.close()
