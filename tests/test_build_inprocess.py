"""The seams a whole build runs through, in-process: the executor handed to a build
(tests/fakes.py's FakeRunner, which test_cli_incremental.py and others use too) and the
recorder's output cache (recorder.RunCache), with the real scheduler, recorder, state and
no-op proof around them (SPEC §2)."""

from __future__ import annotations

import os
import time

import pytest
from helpers import with_chain

from farmer.errors import UsageError
from farmer.record.runcache import RunCache
from farmer.run.executors.base import Restored


@pytest.fixture
def chain(project):
    return with_chain(project)


def test_the_build_runs_through_the_executor_it_is_handed(chain):
    r = chain.build_in_process("-j", "1")
    assert r.returncode == 0, r
    assert r.runner.ran == ["out/a.txt", "out/b.txt", "out/c.txt"]  # by the latency policy
    assert chain.read("out/b.txt") == "alpha\nalpha\n"
    again = chain.build_in_process()
    assert again.returncode == 0 and again.runner.ran == [], again


class DictCache(RunCache):
    """An output cache in a dict, keyed by the action and the inputs' digests: the seam
    farmer/record/cache/ plugs into (recorder.RunCache)."""

    def __init__(self):
        self.kept: dict[tuple, dict[str, str]] = {}
        self.hits: list[str] = []

    def lookup(self, comp, inputs, world):
        outputs = self.kept.get((comp.fingerprint, tuple(inputs)))
        if outputs is None:
            return None
        for path, text in outputs.items():
            with open(path, "w") as f:
                f.write(text)
        self.hits.append(comp.id)
        return Restored("local")

    def store(self, comp, trace, outcome):
        self.kept[(comp.fingerprint, tuple(trace.inputs))] = {p: open(p).read() for p, _ in trace.outputs}


def test_a_cache_hit_restores_outputs_instead_of_running(chain):
    cache = DictCache()
    assert chain.build_in_process(cache=cache).returncode == 0
    assert len(cache.kept) == 3
    chain.remove("out/a.txt")
    chain.remove("out/b.txt")
    r = chain.build_in_process(cache=cache)
    assert r.returncode == 0, r
    assert r.runner.ran == []  # restored, not run
    assert cache.hits == ["out/a.txt", "out/b.txt"]
    assert chain.read("out/b.txt") == "alpha\nalpha\n"
    again = chain.build_in_process(cache=cache)  # what was restored is recorded: up to date
    assert again.runner.ran == [] and again.summary()["up to date"] == 3, again


def test_a_clean_build_starts_its_first_command_before_writing_state(chain):
    """The graph cache and state.db are for later builds: a first build writes them once its
    first commands have started (state.db with its first batch of traces)."""
    from fakes import FakeRunner

    class Watching(FakeRunner):
        def __init__(self, root):
            super().__init__(root)
            self.seen: list[tuple[bool, bool]] = []

        def start(self, comp):
            farmer_dir = os.path.join(self.root, ".farmer")
            self.seen.append((os.path.exists(os.path.join(farmer_dir, "graph.cache")),
                              os.path.exists(os.path.join(farmer_dir, "state.db"))))
            super().start(comp)

    runner = Watching(chain.root)
    r = chain.build_in_process("-j", "1", runner=runner)
    assert r.returncode == 0, r
    assert runner.seen[0] == (False, False)
    assert runner.seen[1][0]  # written while the first command ran
    assert (chain.root / ".farmer" / "graph.cache").is_file()
    again = chain.build_in_process()
    assert again.returncode == 0 and again.runner.ran == [], again


def test_the_cyclic_collector_waits_until_the_first_commands_have_started(chain):
    """A build pauses the collector while it imports, reads and plans (thousands of objects,
    no cycles to free), and resumes it once its first commands run, or when it ends: a long
    build, and `farmer watch`'s builds in one process, collect their cycles."""
    import gc

    from fakes import FakeRunner

    class Watching(FakeRunner):
        def __init__(self, root):
            super().__init__(root)
            self.collecting: list[bool] = []

        def start(self, comp):
            self.collecting.append(gc.isenabled())
            super().start(comp)

    assert gc.isenabled()
    runner = Watching(chain.root)
    assert chain.build_in_process("-j", "1", runner=runner).returncode == 0
    assert runner.collecting == [False, True, True]  # resumed once the first had started
    assert gc.isenabled()
    assert chain.build_in_process().runner.ran == [] and gc.isenabled()  # a no-op resumes it too
    chain.write("Farmfile", "[task.broken]\ncmd = 3\n")
    with pytest.raises(UsageError, match="cmd must be a string"):
        chain.build_in_process()
    assert gc.isenabled()  # and a bad Farmfile


def test_a_build_that_runs_nothing_still_writes_the_graph_cache(chain):
    assert chain.build_in_process().returncode == 0
    chain.write("Farmfile", chain.read("Farmfile") + "\n# a comment: the graph is made again\n")
    os.unlink(chain.root / ".farmer" / "graph.cache")
    r = chain.build_in_process()
    assert r.returncode == 0 and r.runner.ran == [], r
    assert (chain.root / ".farmer" / "graph.cache").is_file()


MESON_LIKE = """\
rule cat
  command = cat $in > $out
rule regen
  command = echo regenerated > build.ninja
  generator = 1
build out.txt: cat src.txt
build build.ninja: regen meson.build
"""


def test_a_first_build_of_a_configured_manifest_runs_only_its_commands(project):
    """As after `meson setup`: build.ninja is newer than what makes it, so the generator is
    taken as run (its trace waits for the build's first batch: state.db is made then), and
    the manifest's graph cache is written once the first command has started; the next
    build runs nothing."""
    from fakes import FakeRunner

    class Watching(FakeRunner):
        def __init__(self, root):
            super().__init__(root)
            self.cached: list[tuple[bool, bool]] = []

        def start(self, comp):
            farmer_dir = project.root / ".farmer"
            self.cached.append(((farmer_dir / "ninja-graph.cache").exists(), (farmer_dir / "state.db").exists()))
            super().start(comp)

    project.write("meson.build", "project('x')\n")
    project.write("src.txt", "alpha\n")
    project.write("build.ninja", MESON_LIKE)
    for name, age in (("meson.build", 20), ("src.txt", 20), ("build.ninja", 10)):
        os.utime(project.root / name, (time.time() - age,) * 2)
    time.sleep(0.2)  # a manifest changed just now (its ctime) is not cached: grains.RACY_NS
    runner = Watching(project.root)
    r = project.build_in_process(runner=runner, farmfile="build.ninja")
    assert r.returncode == 0, r
    assert runner.ran == ["out.txt"] and runner.cached == [(False, False)], r
    assert sorted(os.listdir(project.root / ".farmer")).count("state.db") == 1
    assert not (project.root / ".farmer" / "state.db.new").exists()
    assert project.read("out.txt") == "alpha\n" and project.read("build.ninja") == MESON_LIKE
    assert (project.root / ".farmer" / "ninja-graph.cache").is_file()
    again = project.build_in_process(farmfile="build.ninja")
    assert again.returncode == 0 and again.runner.ran == [], again
