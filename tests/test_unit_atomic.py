"""farmer's own files written whole (farmer/files/atomic.py): a file given in parts (last-build.json
is written from slices of the no-op proof) holds exactly their bytes, however the kernel
splits the writes, and no temporary file is left behind."""

import os

import pytest

from farmer.files import atomic


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


def test_ranges_of_an_open_file_are_copied_between_parts(tmp_path):
    source = tmp_path / "source"
    source.write_bytes(b"0123456789abcdef")
    opened = atomic.OpenFile.open(source)
    whole = atomic.FileRange(opened, 2, 12)  # "23456789abcd"
    source.unlink()  # replaced or removed meanwhile: the open file is what is copied
    atomic.write_atomically(tmp_path / "f", [b"<", whole[:3], b"|", whole[5:], whole[3:3], b">"])
    assert (tmp_path / "f").read_bytes() == b"<234|789abcd>"


def test_ranges_are_copied_through_farmer_where_the_kernel_cannot(tmp_path, monkeypatch):
    source = tmp_path / "source"
    source.write_bytes(b"x" * 100_000 + b"end")
    opened = atomic.OpenFile.open(source)

    def unsupported(*args):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(atomic.os, "copy_file_range", unsupported)
    atomic.write_atomically(tmp_path / "f", [atomic.FileRange(opened, 99_990, 13)])
    assert (tmp_path / "f").read_bytes() == b"x" * 10 + b"end"


def test_a_range_of_a_file_cut_short_fails_and_leaves_the_old_file(tmp_path):
    source = tmp_path / "source"
    source.write_bytes(b"0123456789")
    opened = atomic.OpenFile.open(source)
    part = atomic.FileRange(opened, 0, 10)
    with open(source, "r+b") as f:
        f.truncate(4)  # cut in place behind farmer's back
    (tmp_path / "f").write_bytes(b"old")
    with pytest.raises(OSError):
        atomic.write_atomically(tmp_path / "f", [b"new:", part])
    assert (tmp_path / "f").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["f", "source"]
    with pytest.raises(OSError):
        atomic.FileRange(opened, 8, 5)  # beyond the file as opened


def test_parts_made_as_they_are_written_are_not_all_held(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_HELD", 100)  # a writev once 100 bytes are gathered
    made, written = [], []
    writev = os.writev

    def noting(fd, buffers):
        written.append(len(made))
        return writev(fd, buffers)

    def parts():
        for n in range(50):
            made.append(n)
            yield b"x" * 30

    monkeypatch.setattr(os, "writev", noting)
    atomic.write_atomically(tmp_path / "f", parts())
    assert (tmp_path / "f").read_bytes() == b"x" * 1500
    assert written[:3] == [4, 8, 12]  # each 120 bytes, as soon as they were made


def test_a_part_that_fails_to_be_made_leaves_the_old_file(tmp_path):
    (tmp_path / "f").write_bytes(b"old\n")

    def parts():
        yield b"x" * 3_000_000  # written already when the next part fails
        raise ValueError("cannot render")

    with pytest.raises(ValueError):
        atomic.write_atomically(tmp_path / "f", parts())
    assert (tmp_path / "f").read_bytes() == b"old\n"
    assert os.listdir(tmp_path) == ["f"]
