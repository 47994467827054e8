"""build.ninja manifests whose outputs stand for more than their bytes (issue 11).

A thin static archive (`ar T`) holds its members' names, not their bytes: its digest must
cover the members, or a member that changed but kept its size leaves the archive's bytes,
and so the link, as they were. A stamp file stands for outputs the manifest does not
declare: ninja's rule holds for it, the consumers of an edge that ran are out of date unless
the edge has `restat = 1` and its outputs came out unchanged; real products (objects,
archives, programs) cut off by content (farmer/graph/ninja_cutoff.py). (Whole builds in-process with the
fake executor, tests/fakes.py, which runs the compilers in /bin/sh; a CMake project by the
command line.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap

import pytest

from farmer.files import digests as grains

NINJA = ("-f", "build.ninja")

needs_cc = pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("ar")), reason="needs gcc and ar")


@needs_cc
def test_thin_archive_members_are_read(tmp_path, monkeypatch):
    for name in ("a.txt", "sub/b.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(name)
    (tmp_path / "lib").mkdir()
    subprocess.run(["ar", "csrT", "lib/x.a", "a.txt", "sub/b.txt"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    assert grains.thin_members("lib/x.a") == ["a.txt", "sub/b.txt"]
    assert grains.thin_members("a.txt") is None
    before = grains.Digests({}).digest("lib/x.a")
    data = open("lib/x.a", "rb").read()
    (tmp_path / "sub/b.txt").write_text("B" * len("sub/b.txt"))  # same size
    assert open("lib/x.a", "rb").read() == data  # the archive did not change...
    assert grains.Digests({}).digest("lib/x.a") != before  # ...its digest did


@needs_cc
def test_thin_archive_member_change_relinks(project):
    project.write("build.ninja", """\
        rule cc
          command = gcc -c $in -o $out
        rule ar
          command = rm -f $out && ar csrT $out $in
        rule link
          command = gcc $in -o $out
        build lib.o: cc lib.c
        build main.o: cc main.c
        build libx.a: ar lib.o
        build app: link main.o libx.a
        """)
    project.write("lib.c", "int lib(void) { return 1; }\n")
    project.write("main.c", "int lib(void);\nint main(void) { return lib(); }\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert subprocess.run([str(project.path("app"))]).returncode == 1
    project.write("lib.c", "int lib(void) { return 2; }\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert "link app" in r.finished_lines(), r
    assert subprocess.run([str(project.path("app"))]).returncode == 2
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == [], r


@needs_cc
def test_thin_archive_in_a_farmfile(project):
    """Early cutoff holds in a Farmfile, so there the archive's digest alone must tell."""
    project.farmfile("""\
        [task.obj]
        foreach = "{n}.c"
        inputs = ["{n}.c"]
        outputs = ["{n}.o"]
        cmd = "gcc -c {inputs} -o {outputs}"
        [task.lib]
        inputs = ["lib.o"]
        outputs = ["libx.a"]
        cmd = "rm -f {outputs} && ar csrT {outputs} {inputs}"
        [task.app]
        inputs = ["main.o", "libx.a"]
        outputs = ["app"]
        cmd = "gcc {inputs} -o {outputs}"
        """)
    project.write("lib.c", "int lib(void) { return 1; }\n")
    project.write("main.c", "int lib(void);\nint main(void) { return lib(); }\n")
    assert project.build_in_process().returncode == 0
    project.write("lib.c", "int lib(void) { return 2; }\n")
    r = project.build_in_process("--explain")
    assert r.returncode == 0, r
    assert "app app" in r.finished_lines(), r
    assert subprocess.run([str(project.path("app"))]).returncode == 2


STAMP = """\
    rule gen
      command = cp $in generated.txt && touch $out
    rule use
      command = cat generated.txt > $out
    build gen.stamp: gen input.txt{restat}
    build result.txt: use | gen.stamp
    """


def test_consumer_of_a_stamp_reruns(project):
    project.write("build.ninja", STAMP.format(restat=""))
    project.write("input.txt", "one\n")
    assert project.build_in_process(*NINJA).returncode == 0
    assert project.read("result.txt") == "one\n"
    project.write("input.txt", "two\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and r.finished_lines() == ["gen gen.stamp", "use result.txt"], r
    assert project.read("result.txt") == "two\n"
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == [], r


def test_restat_edge_with_unchanged_outputs_cuts_off(project):
    """`restat = 1` and the outputs came out unchanged: the consumers do not run (a touch of
    the stamp does not change it for farmer, which compares digests)."""
    project.write("build.ninja", """\
        rule copy
          command = cp $in $out
          restat = 1
        rule use
          command = cat $in > $out
        build mid.txt: copy input.txt
        build result.txt: use mid.txt
        """)
    project.write("input.txt", "one\n")
    assert project.build_in_process(*NINJA).returncode == 0
    os.utime(project.path("input.txt"))
    project.write("input.txt", "one\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert r.finished_lines() == [], r  # the same bytes: nothing reran
    project.write("build.ninja", project.read("build.ninja").replace("input.txt\n", "input.txt other.txt\n", 1)
                  .replace("cp $in $out", "cp input.txt $out"))
    project.write("other.txt", "x\n")
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["copy mid.txt"], r  # ran, mid.txt came out the same: result.txt is kept


def test_stamp_consumer_reruns_after_an_interrupted_build(project):
    """The edge ran in a build that did not reach its consumer: the next one runs it."""
    project.write("build.ninja", STAMP.format(restat=""))
    project.write("input.txt", "one\n")
    assert project.build_in_process(*NINJA, "result.txt").returncode == 0
    project.write("input.txt", "two\n")
    r = project.build_in_process(*NINJA, "gen.stamp")
    assert r.returncode == 0 and r.finished_lines() == ["gen gen.stamp"], r
    r = project.build_in_process(*NINJA, "result.txt")
    assert r.finished_lines() == ["use result.txt"], r
    assert project.read("result.txt") == "two\n"



def test_touched_stamp_of_a_restat_edge_reruns_its_consumers(project):
    """CMake writes `restat = 1` on every custom command, and ExternalProject chains them
    with `cmake -E touch` stamps: an empty stamp has no content to compare, so its mtime
    counts, as in ninja."""
    project.write("build.ninja", STAMP.format(restat="\n      restat = 1"))
    project.write("input.txt", "one\n")
    assert project.build_in_process(*NINJA).returncode == 0
    project.write("input.txt", "two\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and r.finished_lines() == ["gen gen.stamp", "use result.txt"], r
    assert project.read("result.txt") == "two\n"
    assert project.build_in_process(*NINJA).finished_lines() == []


def test_a_marker_with_content_keeps_ninjas_rule(project):
    """A non-empty marker of an edge without `restat` that is no object, archive or program:
    what needs it reruns whenever the edge ran, as in ninja."""
    project.write("build.ninja", """\
        rule gen
          command = cp $in generated.txt && echo done > $out
        rule use
          command = cat generated.txt > $out
        build gen.ok: gen input.txt
        build result.txt: use gen.ok
        """)
    project.write("input.txt", "one\n")
    assert project.build_in_process(*NINJA).returncode == 0
    project.write("input.txt", "two\n")
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["gen gen.ok", "use result.txt"], r
    assert project.read("result.txt") == "two\n"


# A program of compiles (`deps = gcc`), an archive and a link.
PROGRAM = """\
        rule cc
          command = gcc -MD -MF $out.d -c $in -o $out
          depfile = $out.d
          deps = gcc
        rule ar
          command = rm -f $out && ar crs $out $in
        rule link
          command = gcc $in -o $out
        build lib.o: cc lib.c
        build main.o: cc main.c
        build libx.a: ar lib.o
        build app: link main.o libx.a
    """

@needs_cc
def test_a_header_comment_relinks_nothing(project):
    """Compiles (`deps = gcc`), archives and links make real products: the objects come out
    byte-identical after a comment, so neither the archive nor the program is made again."""
    project.write("build.ninja", textwrap.dedent(PROGRAM) + textwrap.dedent("""\
        rule run
          command = ./app > $out; true
        build app.txt: run app
        """))
    project.write("x.h", "#define VALUE 3\n")
    project.write("lib.c", '#include "x.h"\nint lib(void) { return VALUE; }\n')
    project.write("main.c", '#include "x.h"\nint lib(void);\nint main(void) { return lib() + VALUE - 3; }\n')
    assert project.build_in_process(*NINJA).returncode == 0
    project.write("x.h", "#define VALUE 3 /* a comment */\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and sorted(r.finished_lines()) == ["cc lib.o", "cc main.o"], r
    project.write("x.h", "#define VALUE 4\n")
    r = project.build_in_process(*NINJA)
    assert sorted(r.finished_lines()) == ["ar libx.a", "cc lib.o", "cc main.o", "link app", "run app.txt"], r
    assert subprocess.run([str(project.path("app"))]).returncode == 5


@needs_cc
def test_what_counts_by_mtime(tmp_path, monkeypatch):
    from farmer.graph.ninja_cutoff import is_product, mtime_counts
    from farmer.graph.ninja_edges import build_graph
    from farmer.manifest.ninja_parser import parse_manifest

    (tmp_path / "build.ninja").write_text(
        "rule cc\n  command = gcc -c $in -o $out\n  depfile = $out.d\n  deps = gcc\n"
        "rule touch\n  command = touch $out\n  restat = 1\n"
        "rule cp\n  command = cp $in $out\n"
        "build a.o: cc a.c\nbuild s.stamp: touch a.c\nbuild b.txt: cp a.c\nbuild c.o: cp a.o\n")
    (tmp_path / "a.c").write_text("int a;\n")
    monkeypatch.chdir(tmp_path)
    subprocess.run(["gcc", "-c", "a.c", "-o", "a.o"], check=True)
    subprocess.run(["cp", "a.o", "c.o"], check=True)
    (tmp_path / "b.txt").write_text("int a;\n")
    _, graph, _ = build_graph(parse_manifest(str(tmp_path / "build.ninja")))
    timed = mtime_counts(graph)
    assert is_product("a.o") and not is_product("b.txt") and not is_product("nothing")
    assert not timed("a.c", 7)  # a source
    assert not timed("a.o", 100) and timed("a.o", 0)  # a compile's object; empty: a stamp
    assert timed("s.stamp", 0) and not timed("s.stamp", 3)  # restat: content unless empty
    assert timed("b.txt", 7) and not timed("c.o", 100)  # by its first bytes

@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")),
                    reason="needs cmake, ninja and a C compiler")
def test_cmake_run_by_the_user_is_not_run_again(tmp_path):
    """`cmake -DVALUE=2 .` by hand changes CMakeCache.txt and writes a newer build.ninja:
    ninja does not rerun CMake, nor does farmer; the program has the new value."""
    from conftest import farmer_env, run_farmer

    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    build.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(v C)\nset(VALUE 1 CACHE STRING \"\")\n"
        "add_executable(v v.c)\ntarget_compile_definitions(v PRIVATE VALUE=${VALUE})\n")
    (src / "v.c").write_text("int main(void) { return VALUE; }\n")

    def run(*cmd):
        cp = subprocess.run(cmd, cwd=build, capture_output=True, text=True, env=farmer_env())
        assert cp.returncode == 0, cp
        return cp

    def farmer():
        r = run_farmer(build, "build", "-f", "build.ninja")
        assert r.returncode == 0, r
        return r

    run("cmake", "-G", "Ninja", str(src))
    assert "Re-running CMake" not in farmer().stdout
    assert subprocess.run([str(build / "v")]).returncode == 1
    run("cmake", "-DVALUE=2", ".")
    r = farmer()
    assert "Re-running CMake" not in r.stdout, r.stdout
    assert subprocess.run([str(build / "v")]).returncode == 2
    assert "Re-running CMake" not in farmer().stdout


@needs_cc
def test_links_and_archives_are_restored_from_the_cache(project, tmp_path):
    """Their keys hold their inputs' content, not the objects' mtimes: after `farmer clean`
    every edge is restored, links and archives too."""
    project.write("build.ninja", PROGRAM)
    project.write("lib.c", "int lib(void) { return 4; }\n")
    project.write("main.c", "int lib(void);\nint main(void) { return lib(); }\n")
    cache = ("--cache", "--cache-dir", str(tmp_path / "cache"))
    assert project.farmer("build", *NINJA, *cache).returncode == 0
    assert project.farmer("clean", *NINJA).returncode == 0
    r = project.farmer("build", *NINJA, *cache)
    assert r.returncode == 0 and "ran 0, up to date 0, cached 4," in r.stdout, r
    assert subprocess.run([str(project.path("app"))], check=False).returncode == 4
