"""Unit tests for farmer/plan/uptodate.py: the up-to-date rule and its reasons in SPEC §4 words
(`never built`, `command changed`, `input PATH changed`, `inputs changed`, `output PATH
missing`, `output PATH edited`, `always`, `world NAME changed`), and `to_run()`."""

from __future__ import annotations

import os
import textwrap

import pytest
from helpers import computation_of

from farmer.files.digests import Digests, hash_file
from farmer.graph.traversal import traverse
from farmer.manifest import farmfile
from farmer.plan.uptodate import action_fingerprint, out_of_date, to_run
from farmer.store.state import Trace

FARMFILE = """
[task.compile]
inputs = ["src/a.c", "src/*.h"]
outputs = ["build/a.o"]
depfile = "build/a.d"
env = {MODE = "fast"}
cmd = "cc -c {inputs[0]} -o {outputs}"

[task.link]
inputs = ["build/a.o"]
outputs = ["build/app"]
cmd = "ld {inputs} -o {outputs}"

[task.report]
inputs = ["build/app"]
outputs = ["out/report.txt"]
cmd = "size {inputs} > {outputs}"

[task.independent]
inputs = ["src/a.c"]
outputs = ["out/wc.txt"]
cmd = "wc {inputs} > {outputs}"

[task.all]
inputs = ["@report", "@independent"]
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    files = {
        "src/a.c": "int a;\n",
        "src/a.h": "#define A\n",
        "inc/x.h": "#define X\n",
        "build/a.o": "OBJ\n",
        "build/app": "APP\n",
        "out/report.txt": "REPORT\n",
        "out/wc.txt": "WC\n",
    }
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp_path / "Farmfile").write_text(textwrap.dedent(FARMFILE))
    monkeypatch.chdir(tmp_path)
    graph = traverse(farmfile.load(tmp_path / "Farmfile"))
    return graph


def good_trace(c, world=None) -> Trace:
    """The trace a successful run of `c` leaves with the files as they are now."""
    discovered = [("inc/x.h", hash_file("inc/x.h"))] if c.id == "build/a.o" else []
    return Trace(
        id=c.id,
        action=action_fingerprint(c),
        world=world,
        inputs=[(p, hash_file(p)) for p in c.inputs],
        discovered=discovered,
        outputs=[(p, hash_file(p)) for p in c.outputs],
    )


def check(c, trace, world=None):
    c.fingerprint = action_fingerprint(c)  # as a new traversal of the edited Farmfile would
    return out_of_date(c, trace, world, Digests({}))


def test_up_to_date_when_everything_matches(proj):
    for cid in ("build/a.o", "build/app", "out/report.txt", "out/wc.txt"):
        c = computation_of(proj, cid)
        assert check(c, good_trace(c)) is None, cid


def test_never_built(proj):
    assert check(computation_of(proj, "build/a.o"), None) == "never built"


def test_always(proj):
    c = computation_of(proj, "build/a.o")
    c.always = True
    assert check(c, good_trace(c)) == "always"
    assert check(c, None) == "always"


def test_command_changed(proj):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    c.action = c.action + " -O2"
    assert check(c, t) == "command changed"


def test_env_change_is_command_changed(proj):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    c.env = {"MODE": "slow"}
    assert check(c, t) == "command changed"


def test_outputs_change_is_command_changed(proj):
    c = computation_of(proj, "out/wc.txt")
    t = good_trace(c)
    c.outputs = ["out/wc.txt", "out/extra.txt"]
    assert check(c, t) == "command changed"


def test_action_fingerprint_is_stable_and_sensitive(proj):
    c = computation_of(proj, "build/a.o")
    assert action_fingerprint(c) == action_fingerprint(computation_of(proj, "build/a.o"))
    assert action_fingerprint(c) != action_fingerprint(computation_of(proj, "build/app"))


def test_world_changed(proj):
    c = computation_of(proj, "out/wc.txt")
    c.world = "sci"
    assert check(c, good_trace(c, world="fp1"), world="fp1") is None
    assert check(c, good_trace(c, world="fp1"), world="fp2") == "world sci changed"


def test_inputs_changed_when_glob_matches_more(proj, tmp_path):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    (tmp_path / "src/b.h").write_text("#define B\n")
    c2 = computation_of(traverse(farmfile.load(tmp_path / "Farmfile")), "build/a.o")
    assert c2.inputs == ["src/a.c", "src/a.h", "src/b.h"]
    assert check(c2, t) == "inputs changed"


def test_inputs_changed_when_declared_set_shrinks(proj):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    c.inputs = ["src/a.c"]
    assert check(c, t) == "inputs changed"


def test_inputs_changed_when_order_differs(proj):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    c.inputs = list(reversed(c.inputs))
    assert check(c, t) == "inputs changed"


def test_input_path_changed(proj, tmp_path):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    (tmp_path / "src/a.h").write_text("#define A 2\n")
    assert check(c, t) == "input src/a.h changed"


def test_input_touched_is_not_changed(proj, tmp_path):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    p = tmp_path / "src/a.c"
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns + 10**11, st.st_mtime_ns + 10**11))
    assert check(c, t) is None


def test_input_deleted_is_changed(proj, tmp_path):
    c = computation_of(proj, "build/app")
    t = good_trace(c)
    (tmp_path / "build/a.o").unlink()
    assert check(c, t) == "input build/a.o changed"


def test_discovered_input_changed(proj, tmp_path):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    (tmp_path / "inc/x.h").write_text("#define X 2\n")
    assert check(c, t) == "input inc/x.h changed"


def test_discovered_input_deleted(proj, tmp_path):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    (tmp_path / "inc/x.h").unlink()
    assert check(c, t) == "input inc/x.h changed"


def test_discovered_input_replaced_by_directory(proj, tmp_path):
    c = computation_of(proj, "build/a.o")
    t = good_trace(c)
    (tmp_path / "inc/x.h").unlink()
    (tmp_path / "inc/x.h").mkdir()
    assert check(c, t) == "input inc/x.h changed"


def test_output_missing(proj, tmp_path):
    c = computation_of(proj, "build/app")
    t = good_trace(c)
    (tmp_path / "build/app").unlink()
    assert check(c, t) == "output build/app missing"


def test_output_edited(proj, tmp_path):
    c = computation_of(proj, "build/app")
    t = good_trace(c)
    (tmp_path / "build/app").write_text("hand edited\n")
    assert check(c, t) == "output build/app edited"


def test_input_change_reported_before_output_problems(proj, tmp_path):
    c = computation_of(proj, "build/app")
    t = good_trace(c)
    (tmp_path / "build/a.o").write_text("OBJ2\n")
    (tmp_path / "build/app").unlink()
    assert check(c, t) == "input build/a.o changed"


# -- to_run ----------------------------------------------------------------------------------


def selected_all(graph):
    return list(graph.order)


def test_plan_nothing_when_all_up_to_date(proj):
    comps = proj.computations
    traces = {c.index: good_trace(c) for c in comps if c.kind}
    digests = Digests({})
    planned = to_run(comps, selected_all(proj),
                   lambda i: out_of_date(comps[i], traces[i], None, digests))
    assert planned == {}


def test_plan_marks_consumers_will_be_rebuilt(proj, tmp_path):
    comps = proj.computations
    traces = {c.index: good_trace(c) for c in comps if c.kind}
    (tmp_path / "src/a.h").write_text("#define A 3\n")  # only `compile` reads it
    digests = Digests({})
    planned = to_run(comps, selected_all(proj),
                   lambda i: out_of_date(comps[i], traces[i], None, digests))
    by_id = {comps[i].id: r for i, r in planned.items()}
    assert by_id == {
        "build/a.o": "input src/a.h changed",
        "build/app": "input build/a.o will be rebuilt",
        "out/report.txt": "input build/app will be rebuilt",
    }


def test_plan_skips_aliases_and_keeps_own_reason(proj):
    comps = proj.computations
    reasons = {proj.by_id["build/a.o"]: "never built", proj.by_id["build/app"]: "command changed"}
    planned = to_run(comps, selected_all(proj), lambda i: reasons.get(i))
    by_id = {comps[i].id: r for i, r in planned.items()}
    assert by_id == {
        "build/a.o": "never built",
        "build/app": "command changed",  # its own reason wins
        "out/report.txt": "input build/app will be rebuilt",
    }
    assert ":all" not in by_id


def test_plan_only_selected(proj):
    comps = proj.computations
    selected = [proj.by_id["out/wc.txt"]]
    calls = []

    def check_(i):
        calls.append(i)
        return "never built"

    assert to_run(comps, selected, check_) == {proj.by_id["out/wc.txt"]: "never built"}
    assert calls == selected
