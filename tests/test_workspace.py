"""A workspace (farmer/build/workspace.py) that keeps what outlives a build, as `farmer watch`
holds one: builds in-process through it, with the fake executor of tests/fakes.py."""

from __future__ import annotations

import contextlib
import io
import os
import signal

import pytest
from fakes import FakeRunner
from test_cli_incremental import CHAIN

from farmer.build.deferred import Deferred
from farmer.build.request import BuildRequest
from farmer.build.workspace import Engines, Workspace
from farmer.errors import LockHeld
from farmer.files.lock import ProjectLock


@pytest.fixture
def kept(project):
    """A keeping workspace on the chain project, its builds' output swallowed, closed after."""
    project.farmfile(CHAIN)
    project.write("src/a.txt", "alpha\n")
    project.write("src/c.txt", "gamma\n")
    cwd = os.getcwd()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    runner = FakeRunner(project.root)
    ws = Workspace(Engines(executor=runner), keep=True, role="watch")
    os.chdir(project.root)
    try:
        yield project, ws, runner
    finally:
        ws.close()
        os.chdir(cwd)
        for s, handler in handlers.items():
            signal.signal(s, handler)


def _build(ws: Workspace, *targets: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return ws.build(BuildRequest(list(targets), jobs=1))


def test_a_keeping_workspace_holds_the_lock_and_state_between_builds_and_releases_once(kept):
    project, ws, runner = kept
    ws.read_graph("Farmfile", given=False)
    ws.hold(str(project.root))
    assert _build(ws) == 0 and runner.ran == ["out/a.txt", "out/b.txt", "out/c.txt"]
    state, lock = ws.state, ws.lock
    assert state is not None and lock.fd is not None
    with pytest.raises(LockHeld, match="farmer watch"):
        ProjectLock(project.root / ".farmer").acquire()
    project.write("src/a.txt", "alpha 2\n")
    assert _build(ws) == 0 and runner.ran[3:] == ["out/a.txt", "out/b.txt"]
    assert ws.state is state and ws.lock is lock and lock.fd is not None  # the same, still held
    ws.close()
    assert lock.fd is None and ws.state is None
    with ProjectLock(project.root / ".farmer"):  # released with the workspace
        pass
    ws.close()  # twice: nothing more to release


def test_the_graph_stays_warm_until_the_farmfile_changes(kept):
    project, ws, runner = kept
    spec, graph = ws.read_graph("Farmfile", given=False)
    ws.hold(str(project.root))
    assert _build(ws) == 0
    assert ws.graph is graph  # the build used the graph read before it
    project.write("src/a.txt", "alpha 2\n")
    assert _build(ws) == 0 and ws.graph is graph
    project.farmfile(CHAIN + "\n# a comment: other bytes, the same computations\n")
    assert _build(ws) == 0
    assert ws.graph is not graph and ws.spec.digest != spec.digest
    assert project.read("out/b.txt") == "alpha 2\nalpha 2\n"


def test_a_one_build_workspace_gives_everything_up_at_its_end(project):
    project.farmfile(CHAIN)
    project.write("src/a.txt", "alpha\n")
    project.write("src/c.txt", "gamma\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    with ProjectLock(project.root / ".farmer"):
        pass


def test_deferred_work_runs_once_in_the_declared_order():
    ran: list[str] = []
    deferred = Deferred()
    for name in reversed(Deferred.__slots__):  # set in another order than they run
        setattr(deferred, name, lambda name=name: ran.append(name))
    deferred.graph_cache = None  # (a slot emptied: the graph was made again)
    deferred.run()
    deferred.run()
    assert ran == ["sweep", "ninja_stamp", "collector", "prediction"]


def test_a_dry_run_leaves_the_warm_graphs_cache_to_the_next_build(kept):
    project, ws, runner = kept
    ws.read_graph("Farmfile", given=False)
    ws.hold(str(project.root))
    with contextlib.redirect_stdout(io.StringIO()):
        assert ws.build(BuildRequest([], jobs=1, dry_run=True)) == 0
    assert runner.ran == [] and not project.exists(".farmer/graph.cache")
    assert _build(ws) == 0 and runner.ran == ["out/a.txt", "out/b.txt", "out/c.txt"]
    assert project.exists(".farmer/graph.cache")
