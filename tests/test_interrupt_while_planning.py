"""A signal after farmer took the lock but before anything ran still ends with
last-build.json (SPEC §3: every build that got the lock writes it) and exit 128 + N."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import farmer_env, run_farmer

# Runs farmer in a child whose planning step signals its own process first.
_DRIVER = textwrap.dedent("""
    import os, signal, sys
    from farmer.plan import session
    original = session.Session.to_run
    signum = int(sys.argv[1])
    def plan(self):
        os.kill(os.getpid(), signum)
        return original(self)
    session.Session.to_run = plan
    sys.argv = ["farmer", "build"]
    from farmer.__main__ import run
    run()
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_while_planning_writes_last_build(tmp_path: Path, signum: int) -> None:
    (tmp_path / "in.txt").write_text("x\n")
    (tmp_path / "Farmfile").write_text(
        '[task.copy]\ninputs = ["in.txt"]\noutputs = ["out/copy.txt"]\ncmd = "cp {inputs} {outputs}"\n')
    r = subprocess.run([sys.executable, "-c", _DRIVER, str(int(signum))], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env=farmer_env({"FARMER_CACHE_DIR": str(tmp_path / "cache")}))
    assert r.returncode == 128 + signum, r
    assert "Traceback" not in r.stderr
    last = json.loads((tmp_path / ".farmer" / "last-build.json").read_text())
    assert last["status"] == "interrupted"
    assert [(t["id"], t["status"], t["reason"]) for t in last["tasks"]] == [
        ("out/copy.txt", "skipped", "build stopped")]
    assert not (tmp_path / "out" / "copy.txt").exists()  # nothing ran


# The signal comes while the graph is read (the lock is held: the no-op check took it).
_DRIVER_LOADING = textwrap.dedent("""
    import os, signal, sys
    from farmer.graph import load as project
    original = project.load_later  # what project.load and a build read the graph with
    signum = int(sys.argv[1])
    def load(*args, **kw):
        os.kill(os.getpid(), signum)
        return original(*args, **kw)
    project.load_later = load
    sys.argv = ["farmer", "build"]
    from farmer.__main__ import run
    run()
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_while_loading_the_graph_writes_last_build(tmp_path: Path, signum: int) -> None:
    (tmp_path / "in.txt").write_text("x\n")
    (tmp_path / "Farmfile").write_text(
        '[task.copy]\ninputs = ["in.txt"]\noutputs = ["out/copy.txt"]\ncmd = "cp {inputs} {outputs}"\n')
    env = farmer_env({"FARMER_CACHE_DIR": str(tmp_path / "cache")})
    r = subprocess.run([sys.executable, "-c", _DRIVER_LOADING, str(int(signum))], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env)
    assert r.returncode == 128 + signum, r
    assert "Traceback" not in r.stderr
    last = json.loads((tmp_path / ".farmer" / "last-build.json").read_text())
    assert last["status"] == "interrupted"
    assert not (tmp_path / "out" / "copy.txt").exists()
    # The next build is not disturbed by it.
    r = run_farmer(tmp_path, "build", env={"FARMER_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0 and (tmp_path / "out" / "copy.txt").read_text() == "x\n", r
