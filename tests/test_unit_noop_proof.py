"""The no-op proof's tables as written and read back (farmer/store/proof.py): which computations a
changed file makes dirty, from the by-file table the snapshot keeps, is what a look at every
computation's files finds; and a build that discovers a file some other computation already
rests on leaves a proof that holds."""

import json
import os
import random

from helpers import PROFILE, imported

from farmer.files import stattable
from farmer.store import proof as noop


def test_a_flat_table_and_its_transpose_hold_the_rows():
    rng = random.Random(7)
    rows = [rng.sample(range(40), rng.randrange(0, 6)) for _ in range(300)]
    flat = noop.Flat.laid(rows)
    assert [flat.row(k) for k in range(len(rows))] == rows
    by_file = flat.by_row_item(40)
    assert [by_file.row(n) for n in range(40)] == [[k for k, row in enumerate(rows) if n in row]
                                                    for n in range(40)]
    again = noop.Flat.of(*by_file.raw())
    assert [again.row(n) for n in range(40)] == [by_file.row(n) for n in range(40)]


def test_the_dirty_computations_read_back_are_those_resting_on_a_changed_file(tmp_path, monkeypatch):
    """A proof written and read again: each changed file makes dirty exactly the computations
    whose files include it, whichever files change."""
    monkeypatch.chdir(tmp_path)
    rng = random.Random(11)
    paths = [f"f{n}.txt" for n in range(60)]
    for p in paths:
        with open(p, "w") as f:
            f.write(p)
    rows = [sorted(rng.sample(range(60), rng.randrange(1, 5))) for _ in range(25)]
    selected = list(range(25))
    proof = noop.Proof.of([["{}"] * 20, ["{}"] * 5], selected)
    proof.paths[:] = paths
    proof.stats.extend(stattable.table(stattable.stat_key_of(p) for p in paths))
    proof.files_of = rows
    os.mkdir(".farmer")
    noop.write(".farmer", "Farmfile", "digest", ["all"], {}, proof, True)
    for changed in ({3}, {0, 59}, set(rng.sample(range(60), 7)), set()):
        back = noop.read(".farmer", "Farmfile", "digest", ["all"])
        back.changed = set(changed)
        assert back.dirty() == {k for k, row in enumerate(rows) if set(row) & changed}
        assert back.selected == selected
        assert [back.rests(k) for k in range(25)] == rows


CHAIN_WITH_HEADER = """
[task.one]
inputs = ["one.txt", "h.txt"]
outputs = ["out/one.txt"]
cmd = "cat one.txt h.txt > out/one.txt"

[task.two]
inputs = ["two.txt"]
outputs = ["out/two.txt"]
depfile = "out/two.d"
cmd = "cat two.txt > out/two.txt && if grep -q use-h two.txt; then printf 'out/two.txt: h.txt\\\\n' > out/two.d; else printf 'out/two.txt:\\\\n' > out/two.d; fi"
"""


def test_a_file_newly_discovered_that_another_computation_rests_on(project):
    """`two` discovers h.txt, which only `one` rested on before: the new proof names h.txt
    once, for both, so the next build is a fast no-op and an edit of h.txt rebuilds both."""
    project.farmfile(CHAIN_WITH_HEADER)
    project.write("one.txt", "one\n")
    project.write("two.txt", "plain\n")
    project.write("h.txt", "header\n")
    assert project.build_in_process().summary()["ran"] == 2
    project.write("two.txt", "use-h\n")
    assert project.build_in_process().summary()["ran"] == 1
    r = project.build(env=PROFILE)
    assert r.summary()["ran"] == 0, r
    assert "farmer.build.run" not in imported(r)
    project.write("h.txt", "header 2\n")
    r = project.build_in_process()
    assert r.summary()["ran"] == 2, r
    assert project.read("out/one.txt") == "one\nheader 2\n"
    r = project.build(env=PROFILE)
    assert r.summary()["ran"] == 0, r
    assert "farmer.build.run" not in imported(r)


def test_entries_spilled_to_an_unnamed_file_are_what_the_proof_held_and_what_it_writes(tmp_path, monkeypatch):
    """A first proof keeps its last-build.json entries in a file with no name (out of
    memory): the same bytes, in the snapshot and read back, as those held in memory; a
    directory with no such files keeps them in memory."""
    monkeypatch.chdir(tmp_path)
    entries = [[f'{{"id":"o{n}.txt","k":{k}}}' for n in range(k)] for k in (3, 0, 7, 1)]
    held = noop.Proof.of(entries, list(range(11)))
    os.mkdir(".farmer")
    spilled = noop.Proof.of(entries, list(range(11)), ".farmer")
    assert isinstance(spilled.tasks, noop.FileRange) and os.listdir(".farmer") == []
    assert spilled.tasks.bytes() == bytes(held.tasks) and list(spilled.ends) == list(held.ends)
    assert [e["id"] for e in json.loads(spilled.tasks.bytes())][:4] == ["o0.txt", "o1.txt", "o2.txt", "o0.txt"]
    noop.write(".farmer", "Farmfile", "digest", ["all"], {}, spilled, True)
    back = noop.read(".farmer", "Farmfile", "digest", ["all"])
    assert back.tasks.bytes() == bytes(held.tasks)
    monkeypatch.setattr(noop, "unnamed_file", lambda directory: None)
    assert noop.Proof.of(entries, list(range(11)), ".farmer").tasks == held.tasks


def test_entries_that_cannot_be_spilled_any_more_are_held_with_those_spilled_before(tmp_path, monkeypatch):
    entries = [[f'{{"n":{n}}}' for n in range(k, k + 4)] for k in (0, 4, 8)]
    held = noop.Proof.of(entries, list(range(12)))
    calls = []
    write_all = noop.write_all

    def full_disk_after_one(fd, data):
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        write_all(fd, data)

    monkeypatch.setattr(noop, "write_all", full_disk_after_one)
    proof = noop.Proof.of(entries, list(range(12)), tmp_path)
    assert len(calls) == 2 and proof.tasks == held.tasks and list(proof.ends) == list(held.ends)
