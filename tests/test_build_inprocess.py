"""Whole builds in-process with a fake executor (tests/fakes.py): the real scheduler,
recorder, state and no-op proof, with only running the commands faked (SPEC §2)."""

from __future__ import annotations

import pytest

from farmer.recorder import RunCache

CHAIN = """
[task.a]
inputs = ["src/a.txt"]
outputs = ["out/a.txt"]
cmd = "cp {inputs} {outputs}"

[task.b]
inputs = ["out/a.txt"]
outputs = ["out/b.txt"]
cmd = "echo same > {outputs}"

[task.c]
inputs = ["out/b.txt"]
outputs = ["out/c.txt"]
cmd = "cat {inputs} {inputs} > {outputs}"
"""


@pytest.fixture
def chain(project):
    project.farmfile(CHAIN)
    project.write("src/a.txt", "alpha\n")
    return project


def test_first_build_runs_in_order_then_nothing_runs(chain):
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert r.runner.ran == ["out/a.txt", "out/b.txt", "out/c.txt"]
    assert chain.read("out/c.txt") == "same\nsame\n"
    assert r.summary()["ran"] == 3, r
    again = chain.build_in_process()
    assert again.returncode == 0, again
    assert again.runner.ran == []
    assert again.summary()["up to date"] == 3, again


def test_early_cutoff_stops_the_ripple(chain):
    assert chain.build_in_process().returncode == 0
    chain.write("src/a.txt", "alpha 2\n")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    # b ran again and wrote the same bytes: c, which reads only b, is up to date.
    assert r.runner.ran == ["out/a.txt", "out/b.txt"]
    assert chain.statuses() == {"out/a.txt": "ran", "out/b.txt": "ran", "out/c.txt": "up-to-date"}


def test_a_declared_output_missing_fails_and_skips_its_consumers(project):
    project.farmfile("""
        [task.a]
        outputs = ["a.txt"]
        cmd = "touch elsewhere.txt"

        [task.b]
        inputs = ["a.txt"]
        outputs = ["b.txt"]
        cmd = "cp {inputs} {outputs}"
    """)
    r = project.build_in_process()
    assert r.returncode == 1, r
    assert r.runner.ran == ["a.txt"]
    assert project.reasons() == {"a.txt": "declared output a.txt missing", "b.txt": "input a.txt failed"}
    assert "FAILED" in r.stdout, r


def test_keep_going_runs_what_does_not_need_the_failure(project):
    project.farmfile("""
        [task.bad]
        outputs = ["bad.txt"]
        cmd = "echo oops && exit 3"

        [task.good]
        outputs = ["good.txt"]
        cmd = "echo fine > {outputs}"
    """)
    r = project.build_in_process(keep_going=True)
    assert r.returncode == 1, r
    assert project.statuses() == {"bad.txt": "failed", "good.txt": "ran"}
    assert project.reasons()["bad.txt"] == "exit 3"
    assert "oops" in r.stdout, r  # the failed command's output, from its log
    assert project.read("good.txt") == "fine\n"


def test_a_deleted_output_runs_again(chain):
    assert chain.build_in_process().returncode == 0
    chain.remove("out/c.txt")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert r.runner.ran == ["out/c.txt"]
    assert chain.reasons()["out/c.txt"] == "output out/c.txt missing"


class DictCache(RunCache):
    """An output cache in a dict, keyed by the action and the inputs' digests: the seam
    farmer/cache/ plugs into (recorder.RunCache)."""

    def __init__(self):
        self.kept: dict[tuple, dict[str, str]] = {}
        self.hits: list[str] = []

    def lookup(self, comp, inputs, world):
        outputs = self.kept.get((comp.fingerprint, tuple(inputs)))
        if outputs is None:
            return False
        for path, text in outputs.items():
            with open(path, "w") as f:
                f.write(text)
        self.hits.append(comp.id)
        return True

    def store(self, comp, trace, outcome):
        self.kept[(comp.fingerprint, tuple(trace.inputs))] = {p: open(p).read() for p, _ in trace.outputs}


def test_a_cache_hit_restores_outputs_instead_of_running(chain):
    cache = DictCache()
    assert chain.build_in_process(cache=cache).returncode == 0
    assert len(cache.kept) == 3
    chain.remove("out/b.txt")
    chain.remove("out/c.txt")
    r = chain.build_in_process(cache=cache)
    assert r.returncode == 0, r
    assert r.runner.ran == []  # restored, not run
    assert cache.hits == ["out/b.txt", "out/c.txt"]
    assert chain.read("out/c.txt") == "same\nsame\n"
    again = chain.build_in_process(cache=cache)  # what was restored is recorded: up to date
    assert again.runner.ran == [] and again.summary()["up to date"] == 3, again
