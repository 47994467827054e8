"""Reliability: a hostile environment (issue 5). Disk full while writing an output or
state.db, an unreadable input, a read-only `.farmer/`.

Each fault ends in a clear result, never a traceback: a failed computation (exit 1) when
one command could not do its work, or one `farmer: error:` line (exit 2) when farmer itself
cannot go on; state.db passes `PRAGMA integrity_check` afterwards and the next build, once
the fault is gone, is correct.

How the faults are made, without LD_PRELOAD:
* disk full: `RLIMIT_FSIZE` set for the farmer process (its commands inherit it; a command
  that exceeds it dies of SIGXFSZ, SQLite gets EFBIG); and where the tests run as root and
  may mount, a real 512 KiB tmpfs (ENOSPC) -- skipped with the reason otherwise;
* unreadable files and read-only directories: `chmod`; as root (who reads anything) farmer
  runs with CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER dropped from its bounding
  set (prctl), so that permissions apply to it -- skipped if that is refused.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess

import pytest
from conftest import Result, wait_no_process_in
from helpers import can_drop_dac, drop_dac, mounted_tmpfs, state_integrity

needs_permissions = pytest.mark.skipif(
    not can_drop_dac(), reason="running as root without CAP_SETPCAP: file permissions cannot apply to farmer")


def farmer(project, *args, fsize: int | None = None, permissions: bool = False, timeout: float = 120) -> Result:
    """`farmer ARGS` with a file-size limit and/or file permissions that apply even to root."""
    def preexec():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if permissions:
            drop_dac()

    return project.farmer(*args, timeout=timeout, preexec_fn=preexec)


def one_error_line(r: Result, *words: str) -> str:
    assert "Traceback" not in r.output, r
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("farmer: error: "), r
    for w in words:
        assert w in lines[0], (w, r)
    return lines[0]


# ------------------------------------------------------------------ disk full --

def test_disk_full_while_writing_an_output(project):
    project.write("in.txt", "x\n")
    project.farmfile(
        """
        [task.small]
        foreach = {n = ["1", "2", "3"]}
        inputs = ["in.txt"]
        outputs = ["out/small-{n}.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.big]
        inputs = ["in.txt"]
        outputs = ["out/big.bin"]
        cmd = "head -c 3000000 /dev/zero > {outputs}"
        """
    )
    r = farmer(project, "build", "-k", fsize=1_000_000)
    assert r.returncode == 1, r
    assert "Traceback" not in r.output
    t = project.tasks()
    assert t["out/big.bin"]["status"] == "failed"
    # head dies of SIGXFSZ; the shell around it reports that as exit 128 + 25
    assert t["out/big.bin"]["reason"] in (f"signal {signal.SIGXFSZ}", f"exit {128 + signal.SIGXFSZ}")
    assert all(t[f"out/small-{n}.txt"]["status"] == "ran" for n in "123")
    assert not project.exists("out/big.bin"), "the truncated output was left behind"
    assert state_integrity(project.root) == "ok"
    r = project.build()  # the disk has room again
    assert r.returncode == 0, r
    assert project.statuses()["out/big.bin"] == "ran"
    assert all(project.statuses()[f"out/small-{n}.txt"] == "up-to-date" for n in "123")
    assert project.path("out/big.bin").stat().st_size == 3_000_000


def _wide_project(project, n: int = 40) -> None:
    """Few commands, big traces: every computation reads 20 inputs with long names."""
    for i in range(20):
        project.write(f"in/{'long-name-' * 8}{i}.txt", f"{i}\n")
    values = ", ".join(f'"{i}"' for i in range(n))
    project.farmfile(
        f"""
        [task.wide]
        foreach = {{n = [{values}]}}
        inputs = ["in/*.txt"]
        outputs = ["out/{{n}}.txt"]
        cmd = "cat {{inputs}} > {{outputs}}"
        """
    )


def test_disk_full_while_writing_state_db(project):
    _wide_project(project)
    r = farmer(project, "build", "-j", "4", fsize=48_000)
    assert r.returncode == 2, r
    one_error_line(r, ".farmer/state.db", "disk")
    assert wait_no_process_in(project) == []
    assert state_integrity(project.root) == "ok"
    r = project.build("-j", "4")  # room again: what was recorded holds, the rest runs
    assert r.returncode == 0, r
    expected = "".join(f"{i}\n" for i in sorted(range(20), key=lambda i: f"{'long-name-' * 8}{i}.txt"))
    assert all(project.read(f"out/{n}.txt") == expected for n in range(40))
    r = project.build()
    assert r.returncode == 0 and r.summary()["ran"] == 0, r


@pytest.fixture
def tiny_tmpfs(tmp_path):
    with mounted_tmpfs(tmp_path / "tmpfs", "512k") as mnt:
        yield mnt


def test_disk_really_full(tiny_tmpfs):
    """A real ENOSPC: a 512 KiB file system that a command fills up."""
    from conftest import Project

    project = Project(tiny_tmpfs / "proj")
    project.root.mkdir()
    try:
        project.write("in.txt", "x\n")
        project.farmfile(
            """
            [task.small]
            foreach = {n = ["1", "2", "3", "4"]}
            inputs = ["in.txt"]
            outputs = ["out/small-{n}.txt"]
            cmd = "cp {inputs} {outputs}"

            [task.big]
            outputs = ["out/big.bin"]
            cmd = "head -c 2000000 /dev/zero > {outputs}"
            """
        )
        r = project.build("-k")
        assert r.returncode in (1, 2), r
        assert "Traceback" not in r.output, r
        if r.returncode == 2:
            one_error_line(r)
        else:
            assert project.tasks()["out/big.bin"]["status"] == "failed"
        assert not project.exists("out/big.bin")
        assert state_integrity(project.root) == "ok"
        subprocess.run(["mount", "-o", "remount,size=8m", str(tiny_tmpfs)], check=True)
        r = project.build()
        assert r.returncode == 0, r
        assert project.path("out/big.bin").stat().st_size == 2_000_000
        assert all(project.read(f"out/small-{n}.txt") == "x\n" for n in "1234")
    finally:
        project.cleanup()


# -------------------------------------------------------------- permissions --

@needs_permissions
def test_unreadable_source(project):
    """farmer cannot read a source: the computation that needs it runs, fails with its own
    message (exit 1), the others are built, and nothing is recorded as up to date."""
    project.write("src/a.txt", "a\n")
    project.write("src/b.txt", "b\n")
    project.farmfile(
        """
        [task.copy]
        foreach = "src/{n}.txt"
        inputs = ["src/{n}.txt"]
        outputs = ["out/{n}.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    os.chmod(project.path("src/b.txt"), 0)
    try:
        r = farmer(project, "build", "-k", permissions=True)
        assert r.returncode == 1, r
        assert "Traceback" not in r.output
        t = project.tasks()
        assert t["out/a.txt"]["status"] == "ran"
        assert t["out/b.txt"]["status"] == "failed"
        assert "Permission denied" in r.stdout
        assert state_integrity(project.root) == "ok"
    finally:
        os.chmod(project.path("src/b.txt"), 0o644)
    r = farmer(project, "build", permissions=True)
    assert r.returncode == 0, r
    assert project.statuses() == {"out/a.txt": "up-to-date", "out/b.txt": "ran"}
    assert project.read("out/b.txt") == "b\n"


@needs_permissions
def test_output_made_unreadable_is_never_up_to_date(project):
    project.write("in.txt", "x\n")
    project.farmfile(
        """
        [task.hide]
        inputs = ["in.txt"]
        outputs = ["out/hidden.txt"]
        cmd = "rm -f {outputs}; cp {inputs} {outputs} && chmod 000 {outputs}"

        [task.read]
        inputs = ["out/hidden.txt"]
        outputs = ["out/read.txt"]
        cmd = "cat {inputs} > {outputs}"
        """
    )
    try:
        r = farmer(project, "build", "-k", permissions=True)
        assert r.returncode == 1, r
        assert "Traceback" not in r.output
        t = project.tasks()
        assert t["out/hidden.txt"]["status"] == "ran"
        assert t["out/read.txt"]["status"] == "failed"
        r = farmer(project, "build", "-k", permissions=True)
        assert r.returncode == 1, r
        assert project.tasks()["out/hidden.txt"]["status"] == "ran"  # farmer cannot vouch for it
        assert state_integrity(project.root) == "ok"
    finally:
        if project.exists("out/hidden.txt"):
            os.chmod(project.path("out/hidden.txt"), 0o644)


@needs_permissions
@pytest.mark.parametrize("what", ["farmer-dir", "state-db"])
def test_read_only_farmer_dir(project, what):
    project.write("in.txt", "x\n")
    project.farmfile(
        """
        [task.copy]
        inputs = ["in.txt"]
        outputs = ["out/copy.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    project.write("in.txt", "y\n")
    fdir = project.path(".farmer")
    targets = [fdir / "state.db"] if what == "state-db" else \
        [p for p in fdir.rglob("*") if p.is_file()] + [p for p in fdir.rglob("*") if p.is_dir()] + [fdir]
    modes = {p: p.stat().st_mode for p in targets}
    before = {p: p.read_bytes() for p in fdir.rglob("*") if p.is_file() and p.name != "lock"}
    try:
        for p in targets:
            os.chmod(p, modes[p] & 0o555)
        r = farmer(project, "build", permissions=True)
        assert r.returncode == 2, r
        one_error_line(r, ".farmer/", "ermission" if what == "farmer-dir" else "readonly")
        after = {p: p.read_bytes() for p in fdir.rglob("*") if p.is_file() and p.name != "lock"}
        assert after == before, "farmer changed .farmer/ although it could not write there"
    finally:
        for p in reversed(targets):
            os.chmod(p, modes[p])
    assert state_integrity(project.root) == "ok"
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/copy.txt") == "y\n"


@needs_permissions
def test_read_only_output_folder(project):
    project.write("in.txt", "x\n")
    project.farmfile(
        """
        [task.copy]
        inputs = ["in.txt"]
        outputs = ["out/sub/copy.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.other]
        inputs = ["in.txt"]
        outputs = ["other.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.path("out").mkdir()
    os.chmod(project.path("out"), 0o555)
    try:
        r = farmer(project, "build", "-k", permissions=True)
        assert r.returncode in (1, 2), r
        assert "Traceback" not in r.output, r
        if r.returncode == 2:
            one_error_line(r, "out/sub")
        else:
            assert project.tasks()["out/sub/copy.txt"]["status"] == "failed"
    finally:
        os.chmod(project.path("out"), 0o755)
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/sub/copy.txt") == "x\n"
