"""Unit tests for farmer/executors/process.py: computations as real processes, each in
its own process group, with a log, exit/signal/timeout reasons in SPEC §4 words."""

from __future__ import annotations

import os
import time

import pytest
from helpers import computation

from farmer.run.executors.process import ProcessExecutor, log_path


@pytest.fixture
def executor(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    ex = ProcessExecutor(logs, time.monotonic(), None, None)
    yield ex
    ex.close()


def wait_all(ex: ProcessExecutor, deadline_s: float = 10.0):
    out = []
    deadline = time.monotonic() + deadline_s
    while ex.running():
        assert time.monotonic() < deadline, "processes did not finish"
        out.extend(ex.wait(1.0))
    return {o.index: o for o in out}


def test_success_and_log(executor, tmp_path):
    c = computation(0, "echo to-stdout; echo to-stderr >&2")
    executor.start(c)
    assert executor.running() == 1
    o = wait_all(executor)[0]
    assert (o.ok, o.reason, o.exit_code) == (True, None, 0)
    assert 0 <= o.start_s <= o.end_s
    assert o.cpu_s is not None and o.max_rss_kb and o.max_rss_kb > 0
    with open(log_path(tmp_path / "logs", c.id)) as f:
        log = f.read()
    assert "to-stdout" in log and "to-stderr" in log


def test_exit_code(executor):
    executor.start(computation(0, "exit 3"))
    o = wait_all(executor)[0]
    assert (o.ok, o.reason, o.exit_code) == (False, "exit 3", 3)


def test_signal(executor):
    executor.start(computation(0, "kill -9 $$"))
    o = wait_all(executor)[0]
    assert not o.ok and o.reason == "signal 9"


def test_timeout_kills(executor):
    t = time.monotonic()
    executor.start(computation(0, "sleep 20", timeout=0.2))
    o = wait_all(executor)[0]
    assert time.monotonic() - t < 5
    assert not o.ok and o.reason == "timeout after 0.2 s"


def test_default_timeout(tmp_path):
    ex = ProcessExecutor(tmp_path, time.monotonic(), 0.3, None)
    try:
        ex.start(computation(0, "sleep 20"))
        ex.start(computation(1, "true"))
        got = wait_all(ex)
        assert got[0].reason == "timeout after 0.3 s"
        assert got[1].ok
    finally:
        ex.close()


def test_env_added(executor, tmp_path):
    c = computation(0, 'echo "[$FARMER_UNIT_X]"', env={"FARMER_UNIT_X": "a b"})
    executor.start(c)
    assert wait_all(executor)[0].ok
    with open(log_path(tmp_path / "logs", c.id)) as f:
        assert "[a b]" in f.read()


def test_stdin_is_empty(executor, tmp_path):
    c = computation(0, "cat; echo done")
    executor.start(c)
    assert wait_all(executor, 5)[0].ok


def test_several_at_once(executor):
    for i in range(4):
        executor.start(computation(i, f"sleep 0.{i}; exit {i}"))
    got = wait_all(executor)
    assert {i: o.exit_code for i, o in got.items()} == {0: 0, 1: 1, 2: 2, 3: 3}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_stop_kills_process_group(executor, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    executor.start(computation(0, f"sleep 30 & echo $! > {pidfile}; wait"))
    deadline = time.monotonic() + 5
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    grandchild = int(pidfile.read_text())
    executor.stop()
    got = wait_all(executor)
    assert got[0].reason == "interrupted" and not got[0].ok
    deadline = time.monotonic() + 3
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(grandchild)


def test_log_path_is_flat_and_distinct(tmp_path):
    a = log_path(tmp_path, "build/a.o")
    b = log_path(tmp_path, "build%2Fa.o")
    assert os.path.dirname(a) == os.fspath(tmp_path) and os.path.dirname(b) == os.fspath(tmp_path)
    assert a != b
    long = log_path(tmp_path, "x/" * 300)
    assert len(os.path.basename(long).encode()) < 255
    assert long != log_path(tmp_path, "x/" * 301)


def test_output_reaches_the_log_when_the_run_ends(executor, tmp_path):
    """What a command prints is kept in memory while it runs (no file made per command) and
    written to its log when it ends, stdout and stderr in the order they were written."""
    flag = tmp_path / "go"
    c = computation(0, f"echo first; echo second >&2; while [ ! -e {flag} ]; do sleep 0.01; done; echo third")
    executor.start(c)
    log = log_path(tmp_path / "logs", c.id)
    time.sleep(0.2)
    assert not os.path.exists(log)
    flag.write_text("")
    assert wait_all(executor)[0].ok
    with open(log) as f:
        assert f.read() == "first\nsecond\nthird\n"


def test_silent_success_leaves_no_log_and_removes_an_older_one(executor, tmp_path):
    c = computation(0, "true", id="out/quiet.txt")
    log = log_path(tmp_path / "logs", c.id)
    with open(log, "w") as f:
        f.write("what an earlier run printed\n")
    executor.start(c)
    assert wait_all(executor)[0].ok
    assert not os.path.lexists(log)


def test_silent_failure_keeps_an_empty_log(executor, tmp_path):
    c = computation(0, "exit 4")
    executor.start(c)
    assert wait_all(executor)[0].reason == "exit 4"
    with open(log_path(tmp_path / "logs", c.id)) as f:
        assert f.read() == ""


def test_a_redirected_command_logs_its_stderr(executor, tmp_path):
    """`cmd > FILE` runs without a shell: stdout to the file, stderr still to the log."""
    out = tmp_path / "o.txt"
    c = computation(0, f"ls {tmp_path / 'missing'} {tmp_path / 'logs'} > {out}")
    executor.start(c)
    assert not wait_all(executor)[0].ok
    with open(log_path(tmp_path / "logs", c.id)) as f:
        assert "missing" in f.read()
    assert out.exists()


def test_a_planted_link_at_a_silent_runs_log_is_removed_not_followed(executor, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    c = computation(0, "true")
    log = log_path(tmp_path / "logs", c.id)
    os.symlink(victim, log)
    executor.start(c)
    assert wait_all(executor)[0].ok
    assert not os.path.lexists(log) and victim.read_text() == "precious\n"


def test_programs_are_found_on_path_as_execvp_finds_them(executor, tmp_path, monkeypatch):
    """A command run without a shell is looked up on PATH once a build, in PATH's order,
    skipping files that are not executable; one found nowhere still fails as it would."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "farmer-unit-tool").write_text("#!/bin/sh\necho not executable\n")
    (second / "farmer-unit-tool").write_text("#!/bin/sh\necho from second\n")
    (second / "farmer-unit-tool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{first}:{second}:{os.environ['PATH']}")
    ok = computation(0, f"farmer-unit-tool > {tmp_path / 'o.txt'}")
    missing = computation(1, "farmer-unit-no-such-tool x")
    executor.start(ok)
    executor.start(missing)
    got = wait_all(executor)
    assert got[0].ok and (tmp_path / "o.txt").read_text() == "from second\n"
    assert got[1].reason == "exit 127"


def test_the_event_loop_reports_what_is_ready_with_its_data():
    from farmer.run.executors.events import READ, event_loop

    loop = event_loop()
    r, w = os.pipe()
    try:
        key = loop.register(r, READ, "mine")
        with pytest.raises(KeyError):
            loop.register(r, READ, "twice")
        started = time.monotonic()
        assert loop.select(0.05) == []  # nothing to read: it waited, and says so
        assert time.monotonic() - started >= 0.04
        os.write(w, b"x")
        [(ready, events)] = loop.select(None)
        assert (ready.fd, ready.data, events) == (r, "mine", READ) and ready is key
        os.close(w)
        w = -1
        os.read(r, 1)
        assert [k.data for k, _ in loop.select(0)] == ["mine"]  # hung up: readable (EOF)
        assert loop.unregister(r) is key
        assert loop.select(0) == []
    finally:
        loop.close()
        os.close(r)
        if w >= 0:
            os.close(w)
