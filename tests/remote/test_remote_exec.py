"""Remote execution (farmer/remote/executor.py) on BuildGrid's workers: compiles and links of a real C
project run remotely and the program works; what cannot run remotely, or fails there, runs locally."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time

import pytest
from helpers import c_program, write_files

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)

from farmer.files.digests import Digests  # noqa: E402
from farmer.graph.load import load  # noqa: E402
from farmer.record.cache.key import Programs, describe  # noqa: E402
from farmer.remote.cache import RemoteCache  # noqa: E402
from farmer.remote.config import Endpoint, RemoteSettings  # noqa: E402
from farmer.remote.executor import RemoteExecutor  # noqa: E402
from farmer.run.executors.base import Ran  # noqa: E402
from farmer.run.executors.process import ProcessExecutor, log_path  # noqa: E402
from farmer.store.state import State, Trace  # noqa: E402

FARMFILE = """\
[task.objects]
foreach = "src/{stem}.c"
inputs = ["src/{stem}.c", "src/util.h"]
outputs = ["build/{stem}.o"]
cmd = "cc -c {inputs[0]} -o {outputs} && echo compiled {stem} on $(hostname)"

[task.app]
inputs = ["@objects"]
outputs = ["build/app"]
cmd = "cc {inputs} -o {outputs}"

[task.deps]
inputs = ["src/main.c"]
outputs = ["build/deps.o"]
depfile = "build/deps.d"
cmd = "cc -c -MD -MF {depfile} {inputs} -o {outputs}"

[task.wrapped]
inputs = ["src/main.c"]
outputs = ["build/wrapped.o"]
depfile = "build/wrapped.d"
cmd = "cc -c -MD -MF {depfile} {inputs} -o {outputs} && true"

[task.fails]
inputs = ["src/util.h"]
outputs = ["build/fails.txt"]
cmd = "test -e /nonexistent-on-workers-$$ || true; exit 3"

[task.here]
inputs = ["src/util.h"]
outputs = ["build/here.txt"]
cmd = "echo {root} > build/here.txt"
"""


def project(path, tag: str) -> str:
    return str(write_files(path, {"Farmfile": FARMFILE.replace("{root}", str(path)), **c_program(tag)}))


class Run:
    """The computations of a project run through a RemoteExecutor, in order, one at a time."""

    def __init__(self, root: str, url: str, warnings: list[str]) -> None:
        _, self.graph = load(os.path.join(root, "Farmfile"), write_cache=False)
        self.comps = {c.id: c for c in self.graph.computations}
        self.state = State(os.path.join(root, ".farmer"))
        self.digests = Digests({})
        programs = Programs(self.digests.digest)
        self.logs = os.path.join(root, ".farmer", "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.remote = RemoteCache(RemoteSettings(Endpoint(url, ""), execute=True, jobs=2, salt=os.urandom(8).hex()),
                                  self.digests, self.state.sha256, warnings.append)
        self.remote.client()
        self.traces: dict[str, Trace] = {}
        local = ProcessExecutor(self.logs, time.monotonic(), None, None)
        self.ex = RemoteExecutor(local, self.remote, 1, time.monotonic(),
                                 lambda c, inputs: describe(c, None, inputs, [], programs),
                                 self.traces.get, lambda c: log_path(self.logs, c.id), warnings.append,
                                 Ran("remote", history_prefix="remote:"))

    def build(self, cid: str):
        comp = self.comps[cid]
        for out in comp.outputs + ([comp.depfile] if comp.depfile else []):
            os.makedirs(os.path.dirname(out), exist_ok=True)
        self.ex.remote_ran.discard(comp.index)  # where this run ran, not an earlier one
        self.ex.start(comp)
        until = time.monotonic() + 120
        while time.monotonic() < until:
            done = self.ex.wait(0.5)
            if done:
                (outcome,) = done
                for p in comp.outputs:
                    self.digests.forget(p)
                if comp.depfile and outcome.ok:
                    from farmer.record import depfile
                    listed = depfile.parse(open(comp.depfile).read())
                    self.traces[cid] = Trace(cid, "", None, [], [(p, "") for p in listed if p not in comp.inputs], [])
                return outcome, comp.index in self.ex.remote_ran
        raise AssertionError(f"{cid} did not finish")

    def close(self) -> None:
        self.ex.close()
        self.remote.close()
        self.state.close()


@pytest.fixture
def run(reapi, tmp_path, monkeypatch):
    made = []

    def make(name="p", url=None):
        root = project(tmp_path / name, os.urandom(6).hex())
        monkeypatch.chdir(root)
        warnings: list[str] = []
        r = Run(root, url or reapi.url, warnings)
        r.warnings = warnings
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_compiles_and_the_link_run_on_workers_and_the_program_works(run):
    r = run()
    for cid in ("build/main.o", "build/util.o", "build/app"):
        outcome, remote = r.build(cid)
        assert outcome.ok and remote, (cid, r.warnings)
    assert not r.warnings
    assert subprocess.run(["build/app"], capture_output=True, text=True).stdout == "42\n"
    assert os.access("build/app", os.X_OK)
    log = open(log_path(r.logs, "build/main.o")).read()
    assert log.startswith("compiled main on ")


def test_a_depfile_computation_runs_here_first_then_remotely_with_its_headers(run):
    r = run()
    outcome, remote = r.build("build/wrapped.o")
    assert outcome.ok and not remote  # never built and not a plain compile: its headers are not known yet
    os.unlink("build/wrapped.o")
    outcome, remote = r.build("build/wrapped.o")
    assert outcome.ok and remote, r.warnings
    assert "src/util.h" in open("build/wrapped.d").read()


def test_a_plain_compile_never_built_runs_remotely_with_the_headers_a_scan_lists(run):
    r = run()
    outcome, remote = r.build("build/deps.o")  # farmer/remote/depscan.py: cc ... -M found util.h
    assert outcome.ok and remote, r.warnings
    assert "src/util.h" in open("build/deps.d").read()
    assert not os.path.exists("deps.d") and not os.path.exists("main.d")  # the scan wrote nothing


def test_a_depfile_naming_a_file_not_sent_discards_the_remote_result(run):
    r = run()
    r.build("build/deps.o")
    # the last trace forgot util.h: the worker's compile cannot have read it
    r.traces["build/deps.o"] = Trace("build/deps.o", "", None, [], [], [])
    os.unlink("build/deps.o")
    outcome, remote = r.build("build/deps.o")
    # the worker's compiler fails without util.h, or its depfile names it: either way it ran here
    assert outcome.ok and not remote
    assert any("remote execution of build/deps.o failed" in w for w in r.warnings), r.warnings


def test_a_command_failing_on_the_worker_runs_locally_and_fails_there(run):
    r = run()
    outcome, remote = r.build("build/fails.txt")
    assert not outcome.ok and outcome.reason == "exit 3" and not remote


def test_a_command_naming_the_absolute_root_runs_locally(run):
    r = run()
    outcome, remote = r.build("build/here.txt")
    assert outcome.ok and not remote and not r.warnings


def test_a_dead_server_runs_everything_locally_with_one_warning(run):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run(url=f"grpc://127.0.0.1:{port}")
    for cid in ("build/main.o", "build/util.o", "build/app"):
        outcome, remote = r.build(cid)
        assert outcome.ok and not remote
    assert len(r.warnings) == 1 and "unavailable" in r.warnings[0]
    assert subprocess.run(["build/app"], capture_output=True, text=True).stdout == "42\n"
