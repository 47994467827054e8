"""`farmer build --check-deps` end to end, under the real strace: a Farmfile whose command
reads a file it does not declare, writes one, and reads another task's output; strict; the
output cache; a hand-written build.ninja with a generated header and no order dependency
(ninja's missingdeps); a real CMake project whose custom command reads undeclared files.

strace is installed by .ci/run: under CI=true a missing strace fails these tests."""

from __future__ import annotations

import os
import shutil
import textwrap

import pytest
from helpers import cmake_checkout, last_build_tasks, write_files

from farmer.run.tracer import strace

STRACE = strace.find()
pytestmark = pytest.mark.skipif(STRACE is None and os.environ.get("CI") != "true",
                                reason="needs strace (apt-get install strace)")

FARMFILE = """\
    [task.gen]
    outputs = ["gen.txt"]
    cmd = "echo made > gen.txt"

    [task.use]
    inputs = ["in.txt"]
    outputs = ["out.txt"]
    cmd = "cat in.txt extra.txt gen.txt > out.txt; echo x > side.txt; echo t > tmp.txt; cat tmp.txt > /dev/null; rm tmp.txt"

    [task.clean]
    inputs = ["in.txt"]
    outputs = ["copy.txt"]
    cmd = "cp in.txt copy.txt"
    """


@pytest.fixture
def traced(project):
    assert STRACE is not None, "CI=true and no strace: .ci/run installs it"
    project.farmfile(FARMFILE)
    project.write("in.txt", "in\n")
    project.write("extra.txt", "extra\n")
    return project


def block_of(stdout: str, head: str) -> list[str]:
    """The warning block whose first line starts with `head`: its lines."""
    lines = stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(head))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end]


def test_undeclared_reads_and_writes_are_warned_of_with_the_producer_named(traced):
    r = traced.build("--check-deps", "-j", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert block_of(r.stdout, "farmer: warning: use out.txt") == [
        "farmer: warning: use out.txt touched files it does not declare (--check-deps):",
        "  undeclared input extra.txt",
        "  undeclared input gen.txt (an output of gen gen.txt: nothing orders them)",
        "  undeclared output side.txt",
    ]
    assert r.stdout.count("farmer: warning:") == 1  # gen and clean declare what they touch
    assert traced.read("out.txt") == "in\nextra\nmade\n"
    assert os.listdir(traced.path(".farmer/check-deps")) == []


def test_strict_fails_the_computation_with_the_reason_in_last_build_json(traced):
    r = traced.build("--check-deps=strict", "-j", "1", "-k")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED: use out.txt (undeclared input extra.txt)" in r.stdout
    tasks = last_build_tasks(traced.root)
    assert tasks["out.txt"]["status"] == "failed"
    assert tasks["out.txt"]["reason"] == "undeclared input extra.txt"
    assert tasks["copy.txt"]["status"] == "ran" and tasks["gen.txt"]["status"] == "ran"
    assert not traced.exists("out.txt") and traced.exists(".farmer/failed/out.txt")


def test_the_farmfile_key_turns_it_on_and_the_option_wins(traced):
    traced.farmfile('[farmer]\ncheck_deps = "strict"\n\n' + textwrap.dedent(FARMFILE))
    r = traced.build("-j", "1")
    assert r.returncode == 1 and "(undeclared input extra.txt)" in r.stdout
    r = traced.build("--check-deps", "-j", "1")
    assert r.returncode == 0 and "undeclared input extra.txt" in r.stdout


def test_a_run_that_read_an_undeclared_file_is_not_cached(traced, tmp_path):
    env = {"FARMER_CACHE_DIR": str(tmp_path / "cache")}
    r = traced.build("--check-deps", "--cache", "-j", "1", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    for made in ("out.txt", "gen.txt", "copy.txt", "side.txt"):
        traced.remove(made)
    shutil.rmtree(traced.path(".farmer"))
    r = traced.build("--check-deps", "--cache", "-j", "1", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    tasks = last_build_tasks(traced.root)
    assert tasks["out.txt"]["status"] == "ran"  # its undeclared read kept it out of the cache
    assert tasks["gen.txt"]["status"] == "cached" and tasks["copy.txt"]["status"] == "cached"
    assert "undeclared input extra.txt" in r.stdout


def test_without_strace_the_option_is_a_usage_error(traced, tmp_path):
    empty = tmp_path / "no-tools"
    empty.mkdir()
    r = traced.build("--check-deps", env={"PATH": str(empty)})
    assert r.returncode == 2
    assert r.stderr.strip() == "farmer: error: --check-deps needs strace: apt-get install strace"
    assert not traced.exists("out.txt")


NINJA = """\
    rule gen
      command = printf '#define N 3\\n' > $out
    rule cc
      command = cc -MD -MF $out.d -c $in -o $out
      depfile = $out.d
      deps = gcc
    build gen/n.h: gen
    build ordered.o: cc ordered.c || gen/n.h
    build racy.o: cc racy.c
    build all: phony ordered.o racy.o
    default all
    """


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_ninja_a_header_generated_by_another_edge_without_an_order_dependency_is_named(traced):
    write_files(traced.root, {
        "build.ninja": textwrap.dedent(NINJA),
        "ordered.c": '#include "gen/n.h"\nint ordered(void) { return N; }\n',
        "racy.c": '#include "gen/n.h"\nint racy(void) { return N; }\n',
    })
    r = traced.build("-f", "build.ninja", "--check-deps", "-j", "1", "gen/n.h")
    assert r.returncode == 0, r.stdout + r.stderr
    r = traced.build("-f", "build.ninja", "--check-deps", "-j", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    # ordered.o reads it through its order-only input and its depfile: declared
    assert block_of(r.stdout, "farmer: warning:") == [
        "farmer: warning: cc racy.o touched files it does not declare (--check-deps):",
        "  undeclared input gen/n.h (an output of gen gen/n.h: nothing orders them)",
    ]
    assert r.stdout.count("farmer: warning:") == 1


CMAKE = {
    "CMakeLists.txt": """\
        cmake_minimum_required(VERSION 3.16)
        project(demo C)
        add_custom_command(OUTPUT version.h
          COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_SOURCE_DIR}/version.h.in version.h
          DEPENDS version.h.in)
        add_executable(demo main.c ${CMAKE_CURRENT_BINARY_DIR}/version.h)
        target_include_directories(demo PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
        add_custom_command(OUTPUT table.txt COMMAND ${CMAKE_COMMAND} -E echo rows > table.txt)
        add_custom_command(OUTPUT mid.txt COMMAND ${CMAKE_COMMAND} -E touch mid.txt DEPENDS table.txt)
        add_custom_command(OUTPUT report.txt
          COMMAND cat ${CMAKE_CURRENT_BINARY_DIR}/table.txt ${CMAKE_CURRENT_BINARY_DIR}/notes.txt > report.txt
          DEPENDS mid.txt)
        add_custom_target(reports ALL DEPENDS report.txt)
        file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/notes.txt "notes\\n")
        """,
    "version.h.in": '#define VERSION "1"\n',
    "main.c": '#include <stdio.h>\n#include "version.h"\nint main(void) { puts(VERSION); return 0; }\n',
}


@pytest.mark.skipif(not all(shutil.which(t) for t in ("cmake", "ninja", "cc")),
                    reason="needs cmake, ninja and a C compiler")
def test_cmake_a_custom_command_reading_undeclared_files_is_named_and_compiles_are_clean(traced, tmp_path):
    build = cmake_checkout(tmp_path / "cmake", {k: textwrap.dedent(v) for k, v in CMAKE.items()})
    r = traced.farmer("build", "-f", "build.ninja", "--check-deps", "-j", "2", cwd=build)
    assert r.returncode == 0, r.stdout + r.stderr
    # The compile reads the generated version.h, which it declares (order-only and
    # depfile): only the custom command is warned of.
    assert r.stdout.count("farmer: warning:") == 1, r.stdout
    assert block_of(r.stdout, "farmer: warning:") == [
        "farmer: warning: CUSTOM_COMMAND report.txt touched files it does not declare (--check-deps):",
        "  undeclared input table.txt (an output of CUSTOM_COMMAND table.txt: ordered only through other steps)",
        "  undeclared input notes.txt",
    ]
    r = traced.farmer("build", "-f", "build.ninja", "--check-deps=strict", cwd=build)
    assert r.returncode == 0 and "farmer: ran 0" in r.stdout  # only what runs is traced
    (build / "report.txt").unlink()
    r = traced.farmer("build", "-f", "build.ninja", "--check-deps=strict", cwd=build)
    assert r.returncode == 1 and "(undeclared input table.txt)" in r.stdout


def test_what_a_command_leaves_running_does_not_hold_the_build(traced):
    traced.farmfile("""\
        [task.bg]
        outputs = ["bg.txt"]
        cmd = "sleep 60 & cat extra.txt > bg.txt"
        """)
    r = traced.build("--check-deps", timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.elapsed < 20  # not the 60 s of the sleep it started
    assert "  undeclared input extra.txt" in r.stdout


def test_worlds_are_still_set_up_as_steps_under_the_tracer(project):
    """The tracer sits in front of the build's executor: world set-ups go through it as
    without --check-deps (shown in last-build.json), and the world's task runs in it."""
    assert STRACE is not None, "CI=true and no strace: .ci/run installs it"
    project.farmfile("""
        [world.w]
        setup = ["FACTOR = 3"]

        [task.step]
        outputs = ["step.txt"]
        world = "w"
        python = "step.py"

        [task.copy]
        inputs = ["step.txt"]
        outputs = ["copy.txt"]
        cmd = "cp step.txt copy.txt"
        """)
    project.write("step.py", "open('step.txt', 'w').write(str(FACTOR))\n")
    r = project.build("--check-deps")
    assert r.returncode == 0, r
    assert project.read("copy.txt") == "3"
    assert [(w["name"], w["status"]) for w in project.last_build()["worlds"]] == [("w", "ok")]
