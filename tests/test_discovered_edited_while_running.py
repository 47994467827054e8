"""A file a depfile lists (a discovered input: a header), saved while the command that read
it runs, or saved and put back, is not what the run read: the trace records it as changed,
with the warning a declared input gets (farmer/record/recorder.py, `Recorder._discovered`), so the
next build runs the computation again (`input PATH changed`) and the run is not cached. A
header the build itself generated just before is what its reader read: never a rerun.

Whole builds in-process (tests/fakes.py's FakeRunner): the command does its work at its
start, and the test's "user" saves files right after (or before) it, while the run is
still running on the build's clock."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fakes import FakeRunner

HEADER_TASK = """
[task.c]
inputs = ["src/main.txt"]
outputs = ["out/c.txt"]
depfile = "out/c.d"
cmd = "cat src/main.txt {header} > out/c.txt; echo 'out/c.txt: {header}' > out/c.d"
"""

WARNING = "farmer: warning: input {header} changed while out/c.txt ran; it will run again next build"


class Saving(FakeRunner):
    """A FakeRunner during whose run of computation `cid` the user saves files: `before`
    its command reads them, and `after`."""

    def __init__(self, root, cid: str, before: Callable[[], None] | None = None,
                 after: Callable[[], None] | None = None) -> None:
        super().__init__(root, strict=True)
        self.cid, self.before, self.after = cid, before, after

    def start(self, comp) -> None:
        if comp.id == self.cid and self.before is not None:
            self.before()
        super().start(comp)
        if comp.id == self.cid and self.after is not None:
            self.after()


def save(project, rel: str, text: str) -> Callable[[], None]:
    """The user's save, a moment into the run: past the file system's time-stamp tick (its
    clock may lag the wall clock by one), so that its ctime is after the run's start."""

    def saving() -> None:
        time.sleep(0.02)
        project.write(rel, text)

    return saving


def header_project(project, header: str = "src/h.txt") -> None:
    project.farmfile(HEADER_TASK.replace("{header}", header))
    project.write("src/main.txt", "main\n")
    if header.startswith("../"):
        (project.root.parent / "outside").mkdir(exist_ok=True)
    project.write(header, "AAAA\n")
    time.sleep(0.15)  # older than the time stamps' tick farmer allows for (grains.RACY_NS)


def warnings_of(r) -> list[str]:
    return [line for line in r.output.splitlines() if line.startswith("farmer: warning:")]


def assert_runs_again_with(project, header: str, text: str, **options) -> None:
    """The next build runs the computation again, saying why, and builds what `header` now
    holds; the one after it is a no-op."""
    r = project.build_in_process("--explain", **options)
    assert r.returncode == 0, r
    assert r.runner.ran == ["out/c.txt"], r
    assert f"farmer: explain: out/c.txt: input {header} changed" in r.output, r
    assert project.reasons()["out/c.txt"] == f"input {header} changed", r
    assert project.read("out/c.txt") == f"main\n{text}", r
    again = project.build_in_process(**options)
    assert again.returncode == 0 and again.runner.ran == [], again


def test_a_header_saved_while_its_command_runs_is_read_again_next_build(project):
    header_project(project)
    runner = Saving(project.root, "out/c.txt", after=save(project, "src/h.txt", "BBBB\n"))
    r = project.build_in_process(runner=runner)
    assert r.returncode == 0, r
    assert project.read("out/c.txt") == "main\nAAAA\n"  # what the command read
    assert warnings_of(r) == [WARNING.format(header="src/h.txt")], r
    assert_runs_again_with(project, "src/h.txt", "BBBB\n")


@pytest.mark.parametrize("header", ["src/h.txt", "../outside/h.txt"])
@pytest.mark.parametrize("edit", ["declared-input", "header"])
def test_a_known_header_saved_while_its_command_runs_is_read_again_next_build(project, edit, header):
    """The header is known from an earlier build's trace. `declared-input`: the build runs
    the computation for its declared input, and digests the header once it has run;
    `header`: the build runs it for the header itself, digested before it starts (outside
    the root, checked once the run's consumers have started)."""
    header_project(project, header)
    assert project.build_in_process().returncode == 0
    project.write("src/main.txt" if edit == "declared-input" else header,
                  "main 2\n" if edit == "declared-input" else "CCCC\n")
    runner = Saving(project.root, "out/c.txt", after=save(project, header, "BBBB\n"))
    r = project.build_in_process(runner=runner)
    assert r.returncode == 0 and runner.ran == ["out/c.txt"], r
    assert warnings_of(r) == [WARNING.format(header=header)], r
    main = "main 2\n" if edit == "declared-input" else "main\n"
    r = project.build_in_process()
    assert r.returncode == 0 and r.runner.ran == ["out/c.txt"], r
    assert project.reasons()["out/c.txt"] == f"input {header} changed", r
    assert project.read("out/c.txt") == f"{main}BBBB\n"


def test_a_header_saved_and_put_back_while_its_command_runs_is_read_again_next_build(project):
    """The command read the edit; the file is as it was before the build when the run
    ends: its content cannot tell, its ctime can."""
    header_project(project)
    runner = Saving(project.root, "out/c.txt", before=save(project, "src/h.txt", "BBBB\n"),
                    after=save(project, "src/h.txt", "AAAA\n"))
    r = project.build_in_process(runner=runner)
    assert r.returncode == 0, r
    assert project.read("out/c.txt") == "main\nBBBB\n"  # the edit's bytes
    assert warnings_of(r) == [WARNING.format(header="src/h.txt")], r
    assert_runs_again_with(project, "src/h.txt", "AAAA\n")


@pytest.mark.parametrize("header", ["src/h.txt", "../outside/h.txt"])
def test_with_the_output_cache_a_header_saved_while_its_command_runs_is_not_cached(project, tmp_path, header):
    """With an output cache every header is hashed when its run is recorded (outside the
    root too): the same check, and the run is not stored."""
    cache = {"use_cache": True, "cache_dir": str(tmp_path / "cache")}
    header_project(project, header)
    runner = Saving(project.root, "out/c.txt", after=save(project, header, "BBBB\n"))
    r = project.build_in_process(runner=runner, **cache)
    assert r.returncode == 0, r
    assert project.read("out/c.txt") == "main\nAAAA\n"
    assert warnings_of(r) == [WARNING.format(header=header)], r
    project.remove("out/c.txt")  # a restore of the run would bring AAAA back
    time.sleep(0.15)  # (a header changed just before a run is not stored either: the cache's rule)
    r = project.build_in_process(**cache)
    assert r.returncode == 0 and r.runner.ran == ["out/c.txt"], r
    assert r.summary()["cached"] == 0, r
    assert project.read("out/c.txt") == "main\nBBBB\n"
    project.remove("out/c.txt")  # and the good run is stored, and restored
    r = project.build_in_process(**cache)
    assert r.returncode == 0 and r.runner.ran == [] and r.summary()["cached"] == 1, r
    assert project.read("out/c.txt") == "main\nBBBB\n"


def test_a_header_generated_just_before_its_reader_runs_is_no_change(project):
    """A header an earlier step of the same build wrote is as fresh as can be (its ctime
    well within the time stamps' tick of its reader's start), but digested when its command
    ended, before its reader started, and unchanged since: no rerun, no warning."""
    project.farmfile("""
        [task.gen]
        inputs = ["src/h.in"]
        outputs = ["gen/h.txt", "gen/stamp"]
        cmd = "cp src/h.in gen/h.txt; touch gen/stamp"

        [task.c]
        inputs = ["src/main.txt", "gen/stamp"]
        outputs = ["out/c.txt"]
        depfile = "out/c.d"
        cmd = "cat src/main.txt gen/h.txt > out/c.txt; echo 'out/c.txt: gen/h.txt' > out/c.d"
    """)
    project.write("src/main.txt", "main\n")
    project.write("src/h.in", "generated\n")
    for text in ("generated\n", "generated again\n"):
        project.write("src/h.in", text)
        r = project.build_in_process(runner=FakeRunner(project.root, strict=True))
        assert r.returncode == 0 and r.runner.ran == ["gen/h.txt", "out/c.txt"], r
        assert warnings_of(r) == [], r
        assert project.read("out/c.txt") == f"main\n{text}"
        again = project.build_in_process()
        assert again.returncode == 0 and again.runner.ran == [], again


def test_a_header_written_just_before_the_build_is_no_change(project):
    """Written a moment before `farmer build` (a generator, a checkout), within the time
    stamps' tick of its reader's start, but before the build's runs began by its file
    system's own clock: what the run read, no rerun."""
    project.farmfile(HEADER_TASK.replace("{header}", "src/h.txt"))
    project.write("src/main.txt", "main\n")
    for text in ("AAAA\n", "BBBB\n"):
        project.write("src/main.txt", f"main {text}")  # the header is digested after the run
        project.write("src/h.txt", text)
        time.sleep(0.02)  # past the file system's clock tick, as farmer's own start would be
        r = project.build_in_process(runner=FakeRunner(project.root, strict=True))
        assert r.returncode == 0 and r.runner.ran == ["out/c.txt"], r
        assert warnings_of(r) == [], r
        again = project.build_in_process()
        assert again.returncode == 0 and again.runner.ran == [], again


def test_an_output_its_own_depfile_lists_is_no_change(project):
    """A depfile that names the run's own output among what it read (written during the
    run, of course): recorded as the run left it, as before, not run again for ever."""
    project.farmfile("""
        [task.c]
        inputs = ["src/main.txt"]
        outputs = ["out/c.txt"]
        depfile = "out/c.d"
        cmd = "cat src/main.txt > out/c.txt; echo 'out/c.txt: src/main.txt out/c.txt' > out/c.d"
    """)
    project.write("src/main.txt", "main\n")
    r = project.build_in_process(runner=FakeRunner(project.root, strict=True))
    assert r.returncode == 0 and r.runner.ran == ["out/c.txt"] and warnings_of(r) == [], r
    again = project.build_in_process()
    assert again.returncode == 0 and again.runner.ran == [], again
