"""The no-op path (docs/performance.md): a build with nothing to do ends before click or the
build engine is imported, also right after a build that ran something; the command lines
read by hand for it mean what click reads. (The builds before the no-op under test run
in-process, with the fake executor; the no-ops whose imports are counted, by the command
line.)"""

import json
import os

import pytest
from helpers import HEAVY, imported, PROFILE, SRC_CHAIN as CHAIN

from farmer.cli.quick import quick_build_args
from farmer.files import digests as grains
from farmer.files import stattable
from farmer.store import proof as noop



DEPFILE = """
[task.obj]
inputs = ["src.txt"]
outputs = ["out.txt"]
depfile = "out.d"
cmd = "cat src.txt > out.txt && if grep -q use-h src.txt; then printf 'out.txt: h.txt\\\\n' > out.d; else printf 'out.txt:\\\\n' > out.d; fi"
"""


def test_noop_build_imports_neither_click_nor_the_engine(project):
    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    assert project.build_in_process().returncode == 0
    r = project.build("-j", "2", env=PROFILE)
    assert r.returncode == 0, r
    assert r.summary()["ran"] == 0
    modules = imported(r)
    assert "farmer.store.proof" in modules
    assert not HEAVY & modules, sorted(HEAVY & modules)
    assert set(project.statuses().values()) == {"up-to-date"}
    assert json.loads(project.read(".farmer/last-build.json"))["jobs"] == 2


def test_build_right_after_a_change_is_a_fast_noop(project):
    """The outputs just written are racy (their stat could survive a rewrite within the same
    tick): the proof records their digests and their content vouches for them."""
    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    assert project.build_in_process().returncode == 0
    project.write("src.txt", "two\n")
    r = project.build_in_process()
    assert r.summary()["ran"] == 2, r
    r = project.build(env=PROFILE)
    assert r.summary()["ran"] == 0, r
    assert "farmer.build.run" not in imported(r)
    project.write("out/b.txt", "tampered\n")  # an output edited by hand: b runs again
    r = project.build(env=PROFILE)
    assert r.summary()["ran"] == 1, r
    assert project.read("out/b.txt") == "two\ntwo\n"
    assert project.statuses() == {"out/a.txt": "up-to-date", "out/b.txt": "ran"}


def test_a_file_no_computation_rests_on_any_more_leaves_the_proof(project):
    """A depfile input that is listed no more: changing it rebuilds nothing, and the proof
    forgets it, so the build after that is a fast no-op again."""
    project.farmfile(DEPFILE)
    project.write("h.txt", "header\n")
    project.write("src.txt", "use-h\n")
    assert project.build_in_process().returncode == 0
    project.write("h.txt", "header 2\n")
    assert project.build_in_process().summary()["ran"] == 1  # h.txt was discovered
    project.write("src.txt", "plain\n")
    assert project.build_in_process().summary()["ran"] == 1
    project.write("h.txt", "header 3\n")
    r = project.build(env=PROFILE)
    assert r.summary()["ran"] == 0, r
    r = project.build(env=PROFILE)
    assert r.summary()["ran"] == 0, r
    assert "farmer.build.run" not in imported(r)


def test_a_racy_file_is_vouched_for_by_its_content(tmp_path, monkeypatch):
    """A file rewritten within the time-stamp tick of its hashing may keep its stat: the
    proof then compares content (what a same-tick rewrite looks like, without the race)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("one")
    st = os.stat("f")
    key = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
    assert noop.Proof(["f"], stattable.table([key]), {0: grains.hash_file("f")}, "[]", 0).check() == set()
    assert noop.Proof(["f"], stattable.table([key]), {0: grains.hash_bytes(b"two")}, "[]", 0).check() == {0}
    assert noop.Proof(["f"], stattable.table([key]), {}, "[]", 0).check() == set()
    os.unlink("f")
    assert noop.Proof(["f"], stattable.table([key]), {}, "[]", 0).check() == {0}


def test_last_build_entries_are_replaced_in_place():
    entries = [json.dumps({"id": name, "status": "up-to-date"}) for name in "abcd"]
    proof = noop.Proof.of([entries[:3], entries[3:]], [0, 1, 2, 3])  # given a list at a time
    assert json.loads(proof.tasks) == [json.loads(e) for e in entries]
    fresh = {0: '{"id":"a","status":"ran"}', 3: '{"id":"d","status":"failed"}'}
    assert [t["status"] for t in json.loads(b"".join(proof.tasks_with(fresh)))] == \
        ["ran", "up-to-date", "up-to-date", "failed"]
    assert b"".join(proof.tasks_with({2: '{"id":"c","status":"ran"}'})) == \
        proof.tasks.replace(b'{"id": "c", "status": "up-to-date"}', b'{"id":"c","status":"ran"}')
    assert proof.tasks_with({}) == [proof.tasks]


@pytest.mark.parametrize("argv, expected", [
    (["build"], {"targets": []}),
    (["build", "all", "out/x.txt"], {"targets": ["all", "out/x.txt"]}),
    (["build", "-j", "3", "all", "-k"], {"targets": ["all"], "jobs": 3, "keep_going": 0}),
    (["build", "-j4", "-j", "2"], {"targets": [], "jobs": 2}),  # the last one counts, as in click
    (["build", "-C", "sub", "-f", "other.toml", "t"],
     {"targets": ["t"], "directory": "sub", "farmfile": "other.toml"}),
    (["build", "-Csub", "-fF"], {"targets": [], "directory": "sub", "farmfile": "F"}),
    (["build", "--", "-odd-name"], {"targets": ["-odd-name"]}),
])
def test_common_build_command_lines_are_read_by_hand(argv, expected):
    assert quick_build_args(argv) == expected


@pytest.mark.parametrize("argv", [
    [], ["plan"], ["--version"], ["build", "--help"], ["build", "-n"], ["build", "-kj2"],
    ["build", "-j"], ["build", "-j", "0x2"], ["build", "-j", "-1"], ["build", "-j", "٣"],
    ["build", "-l", "2"], ["build", "--trace", "t.json"], ["build", "-"], ["build", "-C"],
])
def test_other_command_lines_go_to_click(argv):
    assert quick_build_args(argv) is None


def test_stat_data_of_another_snapshot_is_never_used(project):
    """noop.stats and noop.snapshot are written apart: stat data left from before the
    snapshot was rewritten (a crash between the two writes) proves nothing."""
    project.farmfile(DEPFILE)
    project.write("h.txt", "header\n")
    project.write("src.txt", "use-h\n")
    assert project.build_in_process().returncode == 0
    old_stats = project.path(".farmer/noop.stats").read_bytes()
    snapshot = project.path(".farmer/noop.snapshot").read_bytes()
    project.write("src.txt", "plain\n")  # h.txt is no longer discovered: a new snapshot
    assert project.build_in_process().summary()["ran"] == 1
    assert project.path(".farmer/noop.snapshot").read_bytes() != snapshot
    project.path(".farmer/noop.stats").write_bytes(old_stats)
    digest = grains.hash_bytes(project.path("Farmfile").read_bytes())
    assert noop.read(str(project.path(".farmer")), str(project.path("Farmfile")), digest, []) is None
    project.write("out.txt", "tampered\n")
    r = project.build_in_process()
    assert r.summary()["ran"] == 1, r
    assert project.read("out.txt") == "plain\n"


def test_version_imports_neither_click_nor_networkx_nor_rich(project):
    r = project.farmer("--version", env=PROFILE)
    assert r.returncode == 0 and r.stdout.strip() == "farmer 0.1.0", r
    assert not {"click", "networkx", "rich", "farmer.build.run", "sqlite3", "_sqlite3"} & imported(r)


def test_a_proof_of_another_graph_is_never_used(tmp_path, monkeypatch):
    """The proof names computations by their index in the graph: it is used only with a
    graph whose computations have the same ids at the same indices."""
    from farmer.graph.traversal import traverse
    from farmer.manifest.farmfile import parse_text
    from farmer.plan.session import proven_selection

    (tmp_path / "src.txt").write_text("one\n")
    spec = parse_text(tmp_path / "Farmfile", CHAIN.encode())
    monkeypatch.chdir(tmp_path)
    graph = traverse(spec)
    selected = list(graph.order)
    proof = noop.Proof.of([["{}"] * len(selected)], selected)
    proof.graph, proof.changed = graph.identify(), set()
    exists = os.path.exists
    assert proven_selection(graph, proof, {0}, exists) == (selected, selected, {i: k for k, i in enumerate(selected)})
    reordered = traverse(spec)
    reordered.computations.reverse()  # the same computations at other indices
    reordered.identity = ""
    assert reordered.identify() != graph.identify()
    assert proven_selection(reordered, proof, {0}, exists) is None
