"""What a Python step reads is recorded: the modules it imports beyond its world's set-up and
the files it opens become discovered inputs, in worlds, with --no-worlds and for a plain
`python` line; a world's set-up's own reads join its fingerprint; and neither the trace nor
the output cache serves an output made from an older version of such a file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from farmer.run.worlds import reads

DRIVER = Path(__file__).resolve().parent.parent / "farmer" / "run" / "worlds" / "driver.py"

# A world whose set-up imports a project module, a task in it that imports a helper module,
# opens an undeclared data file and a third-party package, and writes a file it does not
# declare; a plain python task that imports the helper too.
FARMFILE = """
[world.w]
setup = ["import setupmod"]

[task.scaled]
inputs = ["steps/scaled.py"]
outputs = ["out/scaled.txt"]
world = "w"
python = "steps/scaled.py {outputs}"

[task.plain]
outputs = ["out/plain.txt"]
python = "steps/plain.py {outputs}"
"""

SCALED = """\
import json, sys
from helpers import SCALE
import teamlib
params = json.load(open("params.json"))
with open(sys.argv[1], "w") as f:
    f.write(f"{SCALE} {params['rows']} {teamlib.VERSION} {setupmod.FACTOR}\\n")
"""

PLAIN = """\
import sys
import time
from pathlib import Path
from helpers import SCALE
Path(sys.argv[1]).write_text(f"{SCALE}\\n")
Path("notes.txt").write_text("undeclared")
"""


@pytest.fixture
def pipeline(project, tmp_path, monkeypatch):
    site = tmp_path / "site"  # a package outside the project root, found through PYTHONPATH
    (site / "teamlib").mkdir(parents=True)
    (site / "teamlib" / "__init__.py").write_text('VERSION = "1.0"\n')
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    project.farmfile(FARMFILE)
    project.write("steps/helpers.py", "SCALE = 1\n")
    project.write("steps/scaled.py", SCALED)
    project.write("steps/plain.py", PLAIN)
    project.write("setupmod.py", "FACTOR = 10\n")
    project.write("params.json", '{"rows": 3}\n')
    project.site = site
    return project


def _build(project, worlds: bool, *args: str):
    """A build with real worlds (a farmer process), or with --no-worlds in process (the
    fake executor runs python lines as the real one does: a fresh python3 with the driver)."""
    if worlds:
        r = project.build(*args)
    else:
        options = {"use_cache": True} if "--cache" in args else {}
        r = project.build_in_process("--no-worlds", *(a for a in args if a != "--cache"), **options)
    assert r.returncode == 0, r.output
    return r


def _edit(path: Path, text: str) -> None:
    """Change a file as a user does, not within the file system's time-stamp tick of the
    build's start (such a file may have changed while a step ran, as far as its stat can
    tell: it is recorded as changed, which is right, and what a user's edit never meets)."""
    path.write_text(text)
    time.sleep(0.05)


def _fresh_checkout(project) -> None:
    """No traces and no outputs: what a clone has, beside a cache that outlives it."""
    shutil.rmtree(project.path(".farmer"))
    shutil.rmtree(project.path("out"))


def _ran(project) -> dict[str, str]:
    return {cid: t["reason"] for cid, t in project.tasks().items() if t["status"] == "ran"}


@pytest.mark.parametrize("worlds", [True, False], ids=["worlds", "no-worlds"])
def test_each_file_a_step_read_reruns_it_with_its_reason(pipeline, worlds):
    p = pipeline
    _build(p, worlds)
    assert p.read("out/scaled.txt") == "1 3 1.0 10\n"
    assert _ran(p).keys() == {"out/scaled.txt", "out/plain.txt"}
    _build(p, worlds)
    assert _ran(p) == {}

    _edit(p.path("steps/helpers.py"), "SCALE = 2\n")  # `from helpers import SCALE`
    _build(p, worlds)
    assert _ran(p) == {"out/scaled.txt": "input steps/helpers.py changed",
                       "out/plain.txt": "input steps/helpers.py changed"}
    assert p.read("out/scaled.txt") == "2 3 1.0 10\n" and p.read("out/plain.txt") == "2\n"

    _edit(p.path("params.json"), '{"rows": 4}\n')  # open("params.json")
    _build(p, worlds)
    assert _ran(p) == {"out/scaled.txt": "input params.json changed"}

    _edit(p.site / "teamlib" / "__init__.py", 'VERSION = "2.0"\n')  # a third-party package
    _build(p, worlds)
    assert _ran(p) == {"out/scaled.txt": f"input {p.site}/teamlib/__init__.py changed"}

    _edit(p.path("setupmod.py"), "FACTOR = 20\n")  # imported by the world's set-up
    _build(p, worlds)
    assert _ran(p) == {"out/scaled.txt": "world w changed"}
    assert p.read("out/scaled.txt") == "2 4 2.0 20\n"
    _build(p, worlds)
    assert _ran(p) == {}


def test_query_lists_what_a_step_and_its_world_read(pipeline):
    pipeline.build()
    out = pipeline.farmer("query", "out/scaled.txt").stdout
    listed = out.split("discovered inputs:")[1].split("world inputs:")[0].split()
    assert sorted(listed) == sorted(["steps/helpers.py", f"{pipeline.site}/teamlib/__init__.py", "params.json"])
    setup = out.split("read by the world's setup:")[1].split("outputs:")[0].split()
    assert setup == ["setupmod.py"]


@pytest.mark.parametrize("worlds", [True, False], ids=["worlds", "no-worlds"])
def test_a_clean_checkout_never_restores_an_output_of_an_older_read(pipeline, worlds, tmp_path):
    p = pipeline
    _build(p, worlds, "--cache")
    for edit, rerun in [(lambda: _edit(p.path("steps/helpers.py"), "SCALE = 5\n"), {"out/scaled.txt", "out/plain.txt"}),
                        (lambda: _edit(p.path("params.json"), '{"rows": 9}\n'), {"out/scaled.txt"}),
                        (lambda: _edit(p.site / "teamlib" / "__init__.py", 'VERSION = "3"\n'), {"out/scaled.txt"}),
                        (lambda: _edit(p.path("setupmod.py"), "FACTOR = 7\n"), {"out/scaled.txt"})]:
        _fresh_checkout(p)
        edit()
        _build(p, worlds, "--cache")
        statuses = p.statuses()
        assert {cid for cid, s in statuses.items() if s == "ran"} == rerun
        assert {cid for cid, s in statuses.items() if s == "cached"} == set(statuses) - rerun
    assert p.read("out/scaled.txt") == "5 9 3 7\n"
    _fresh_checkout(p)
    _build(p, worlds, "--cache")  # everything as stored last: all restored, and still tracked
    assert set(p.statuses().values()) == {"cached"}
    _edit(p.path("params.json"), '{"rows": 1}\n')
    _build(p, worlds)
    assert _ran(p) == {"out/scaled.txt": "input params.json changed"}


def test_an_undeclared_write_draws_one_warning_per_task_and_path(pipeline):
    r = pipeline.build()  # (warnings come with the build's lines: stdout in plain mode, as ninja's)
    warning = ("farmer: warning: task plain (out/plain.txt) wrote notes.txt, which it does not declare "
               "as an output; declare it in `outputs`")
    assert r.output.count(warning) == 1, r.output
    assert "task scaled" not in r.output  # its output is declared; what it read is no write
    _edit(pipeline.path("steps/helpers.py"), "SCALE = 3\n")
    r = pipeline.build_in_process("--no-worlds")
    assert r.output.count(warning) == 1, r.output


def test_a_read_file_changed_while_the_step_ran_reruns_it_and_is_not_cached(project):
    project.farmfile("""
        [world.w]
        setup = ["import json"]
        [task.t]
        outputs = ["out/t.txt"]
        world = "w"
        python = "-c 'import os, sys; d = open(\\"data.txt\\").read(); os.utime(\\"data.txt\\"); open(sys.argv[1], \\"w\\").write(d)' {outputs}"
        """)
    project.write("data.txt", "one\n")
    r = project.build("--cache")
    assert r.returncode == 0, r.output
    assert "input data.txt changed while out/t.txt ran" in r.output
    r = project.build("--cache")
    assert project.reasons() == {"out/t.txt": "input data.txt changed"}  # ran again
    _fresh_checkout(project)
    _edit(project.path("data.txt"), "two\n")
    r = project.build("--cache")  # the first run was not stored: nothing to restore
    assert project.statuses() == {"out/t.txt": "ran"} and project.read("out/t.txt") == "two\n"


def test_the_driver_records_imports_and_opens_but_not_the_interpreters_own(tmp_path):
    root, site = tmp_path / "root", tmp_path / "site"
    (root / ".farmer").mkdir(parents=True)
    (site / "extlib").mkdir(parents=True)
    (site / "extlib" / "__init__.py").write_text("X = 1\n")
    (root / "helper.py").write_text("Y = 2\n")
    (root / "setupmod.py").write_text("Z = 3\n")
    (root / "data.txt").write_text("d\n")
    (root / ".farmer" / "mine").write_text("farmer's\n")
    code = ("import csv, extlib, helper; open('data.txt').read(); open('.farmer/mine').read(); "
            "open('/proc/self/status').read(); os.listdir('.'); open('made.txt', 'w').write('m'); "
            "open('made.txt').read(); open(os.path.join(os.path.dirname(csv.__file__), 'abc.py')).read()")
    out = tmp_path / "t.reads"
    env = {**os.environ, "PYTHONPATH": str(site)}
    subprocess.run([sys.executable, str(DRIVER), "--reads", str(out), "--setup",
                    json.dumps([["w", ["import os, setupmod"]]]), "--", "-c", code],
                   cwd=root, env=env, check=True)
    read, wrote, setups = reads.load(str(out))
    assert not out.exists()  # taken
    assert sorted(read) == sorted([f"{site}/extlib/__init__.py", "helper.py", "data.txt"])
    assert wrote == ["made.txt"]  # written, so not an input: the step's own product
    assert [(w, ps) for w, _, ps in setups] == [("w", ["setupmod.py"])]




def test_another_environment_with_another_version_of_a_package_is_no_cache_hit(pipeline, tmp_path, monkeypatch):
    """Two virtual environments of one machine: what the first's step read still exists, at
    its own path, but this environment imports the package from elsewhere."""
    assert pipeline.build("--cache").returncode == 0
    other = tmp_path / "other-site"
    (other / "teamlib").mkdir(parents=True)
    (other / "teamlib" / "__init__.py").write_text('VERSION = "2.0"\n')
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(other), os.environ["PYTHONPATH"].split(os.pathsep, 1)[1]]))
    _fresh_checkout(pipeline)
    r = pipeline.build("--cache")
    assert r.returncode == 0, r.output
    assert pipeline.statuses()["out/scaled.txt"] == "ran"
    assert pipeline.read("out/scaled.txt") == "1 3 2.0 10\n"
