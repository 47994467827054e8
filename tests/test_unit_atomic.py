"""farmer's own files written whole (farmer/atomic.py): a file given in parts (last-build.json
is written from slices of the no-op proof) holds exactly their bytes, however the kernel
splits the writes, and no temporary file is left behind."""

import os

from farmer import atomic


def test_parts_are_written_in_order(tmp_path):
    big = bytes(range(256)) * 100
    parts = [b"{", memoryview(big)[10:20000], b"", memoryview(big)[:0], b"}\n"]
    atomic.write_atomically(tmp_path / "f.json", parts)
    assert (tmp_path / "f.json").read_bytes() == b"{" + big[10:20000] + b"}\n"
    assert os.listdir(tmp_path) == ["f.json"]


def test_more_parts_than_one_call_takes(tmp_path):
    parts = [f"{n}\n".encode() for n in range(3000)]  # above IOV_MAX (1024)
    atomic.write_atomically(tmp_path / "f", parts)
    assert (tmp_path / "f").read_bytes() == b"".join(parts)


def test_short_writes_go_on_where_they_stopped(tmp_path, monkeypatch):
    writev = os.writev

    def at_most_7_bytes(fd, buffers):
        return writev(fd, [bytes(buffers[0])[:7]])

    monkeypatch.setattr(atomic.os, "writev", at_most_7_bytes)
    parts = [b"abc", b"", b"defghijklmnop", memoryview(b"0123456789")[2:], b"!"]
    atomic.write_atomically(tmp_path / "f", parts)
    assert (tmp_path / "f").read_bytes() == b"abcdefghijklmnop23456789!"
