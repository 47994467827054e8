"""A pytest killed while a test's REAPI stack runs (PostgreSQL, bgd, a `farmer worker` bot) leaves
none of it running: with SIGTERM its fixtures' teardowns stop it, with SIGKILL the stack's
watchdog does (tools/reapi_stack.py `tie`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO

HELD = os.path.join(REPO, "tests", "remote", "stack_held.py")


def tools_installed() -> bool:
    import importlib.util

    spec = importlib.util.spec_from_file_location("reapi_stack", os.path.join(REPO, "tools", "reapi_stack.py"))
    stack = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stack)
    return stack.bgd() is not None and stack.pgbin() is not None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_pytest_leaves_no_stack_running(reapi, tmp_path, sig):
    if not tools_installed():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and BuildGrid or PostgreSQL is not installed")
        pytest.skip("BuildGrid or PostgreSQL is not installed")
    held = str(tmp_path / "held.json")
    env = {**os.environ, "FARMER_TEST_REAPI": reapi.url, "FARMER_TEST_REAPI_CACHE": reapi.cache_instance,
           "FARMER_TEST_STACK_HELD": held}
    log = tmp_path / "pytest.log"
    with open(log, "wb") as out:
        child = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                  "--basetemp", str(tmp_path / "base"), HELD], cwd=REPO, env=env,
                                 stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not os.path.exists(held):
            assert child.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        with open(held) as f:
            pids = json.load(f)
        assert {"bgd", "bot-0", "postmaster", "watchdog"} <= set(pids), pids
        assert all(alive(pid) for pid in pids.values()), pids
        os.kill(child.pid, sig)
        child.wait(120)
        deadline = time.monotonic() + 60
        while any(alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert {name: pid for name, pid in pids.items() if alive(pid)} == {}, log.read_text()
        if sig == signal.SIGTERM:  # it ended as on Ctrl-C: its teardowns ran
            assert "KeyboardInterrupt" in log.read_text()
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
