"""`farmer build -f build.ninja` on small hand-written manifests: in-process with the fake
executor (tests/fakes.py) where only the build's decisions are checked, by the command line
for its errors, its flags, the console pool and the other commands.

What a ninja manifest adds to a build: descriptions in the progress lines, `deps = gcc`
depfiles read and deleted, generator edges not rerun for a new command line, order-only
inputs that order but never rebuild, validations built alongside, phony aliases, outputs
a command may leave unmade, the console pool, response files, the manifest remade and read
again before the build, and the other commands (plan, -n, query, graph, clean) on it.
"""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import assert_error

NINJA = ("-f", "build.ninja")


def build(project, *args, **kw):
    """A build of build.ninja in-process, with the fake executor (tests/fakes.py)."""
    return project.build_in_process(*NINJA, *args, **kw)


def test_build_then_nothing_to_do(project):
    project.write("build.ninja", """\
        rule cat
          command = cat $in > $out
          description = CAT $out
        build out/ab.txt: cat a.txt b.txt
        build out/all.txt: cat out/ab.txt c.txt
        """)
    for name in "abc":
        project.write(f"{name}.txt", name + "\n")
    r = build(project)
    assert r.returncode == 0, r
    assert r.finished_lines() == ["CAT out/ab.txt", "CAT out/all.txt"]
    assert project.read("out/all.txt") == "a\nb\nc\n"
    assert project.last_build()["tasks"][0]["task"] == "cat"
    r = build(project)
    assert r.returncode == 0 and r.finished_lines() == [] and r.summary()["up to date"] == 2, r
    project.write("c.txt", "C\n")
    r = build(project)
    assert r.finished_lines() == ["CAT out/all.txt"], r


def test_ninja_flag_and_dash_C(project):
    project.write("b/build.ninja", "rule t\n  command = touch $out\nbuild x: t\n")
    r = project.build("--ninja", "-C", "b")
    assert r.returncode == 0 and project.exists("b/x"), r
    r = project.build("-C", "b", "-f", "build.ninja")
    assert r.returncode == 0 and r.finished_lines() == [], r


def test_errors_name_file_and_line(project):
    project.write("build.ninja", "rule r\n  command = x\n\nbuild o: nope\n")
    assert_error(project.build(*NINJA), "build.ninja:4: unknown build rule 'nope'")
    project.write("build.ninja", "rule r\n  command = x\nbuild o: r missing.c\n")
    assert_error(project.build(*NINJA), "missing input 'missing.c'")


def test_targets_are_paths_and_defaults_apply(project):
    project.write("build.ninja", """\
        rule t
          command = touch $out
        build t: t
        build other: t
        build all: phony t
        default all
        """)
    r = build(project)
    assert r.returncode == 0 and project.exists("t") and not project.exists("other"), r
    r = build(project, "other")
    assert r.returncode == 0 and project.exists("other"), r


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")
def test_deps_gcc_discovers_headers_and_deletes_the_depfile(project):
    project.write("build.ninja", """\
        rule cc
          command = cc -MD -MF $out.d -c $in -o $out
          depfile = $out.d
          deps = gcc
          description = CC $out
        rule link
          command = cc $in -o $out
        build obj/main.o: cc main.c
        build obj/other.o: cc other.c
        build app: link obj/main.o obj/other.o
        """)
    project.write("main.c", '#include "config.h"\nint other(void);\nint main(void) { return VALUE + other(); }\n')
    project.write("other.c", "int other(void) { return 0; }\n")
    project.write("config.h", "#define VALUE 0\n")
    r = build(project)
    assert r.returncode == 0, r
    assert not project.exists("obj/main.o.d") and not project.exists("obj/other.o.d")
    assert "config.h" in project.farmer("query", *NINJA, "obj/main.o").stdout  # discovered
    project.write("config.h", "#define VALUE 0 /* same value, new text */\n")
    r = build(project)
    # The object is recompiled and comes out byte-identical: a compile's object is a real
    # product, so early cutoff keeps the link (ninja would relink).
    assert r.finished_lines() == ["CC obj/main.o"], r
    project.write("config.h", "#define VALUE 1\n")
    r = build(project)
    assert r.finished_lines() == ["CC obj/main.o", "link app"], r


def test_generator_is_not_rerun_for_a_new_command(project):
    text = """\
        rule gen
          command = cp $in $out {flag}
          generator = 1
        rule cp
          command = cp $in $out {flag}
        build gen.txt: gen src.txt
        build copy.txt: cp src.txt
        """
    project.write("src.txt", "1\n")
    project.write("build.ninja", text.format(flag=""))
    assert build(project).returncode == 0
    project.write("build.ninja", text.format(flag="-p"))
    r = build(project)
    assert r.finished_lines() == ["cp copy.txt"], r
    project.write("src.txt", "2\n")
    r = build(project)
    assert sorted(r.finished_lines()) == ["cp copy.txt", "gen gen.txt"], r
    r = project.farmer("clean", *NINJA)
    assert r.returncode == 0 and project.exists("gen.txt") and not project.exists("copy.txt"), r


def test_order_only_orders_but_never_rebuilds(project):
    project.write("build.ninja", """\
        rule cp
          command = cp $in $out
        rule both
          command = cat $in gen.txt > $out
        build gen.txt: cp gen.in
        build out.txt: both main.txt || gen.txt
        """)
    project.write("gen.in", "generated\n")
    project.write("main.txt", "main\n")
    r = build(project, "out.txt")
    assert r.returncode == 0 and r.finished_lines() == ["cp gen.txt", "both out.txt"], r
    assert project.read("out.txt") == "main\ngenerated\n"
    project.write("gen.in", "generated again\n")
    r = build(project, "out.txt")
    assert r.finished_lines() == ["cp gen.txt"], r  # gen.txt is remade first; out.txt does not depend on it


def test_validations_are_built_alongside(project):
    project.write("build.ninja", """\
        rule t
          command = echo $in > $out
        build lint.stamp: t src.txt
        build out.txt: t src.txt |@ lint.stamp
        build other.txt: t lint.stamp
        """)
    project.write("src.txt", "x\n")
    r = build(project, "out.txt")
    assert r.returncode == 0 and project.exists("lint.stamp"), r
    assert sorted(r.finished_lines()) == ["t lint.stamp", "t out.txt"]


def test_phony_force_makes_its_consumers_run_every_time(project):
    project.write("build.ninja", """\
        rule stamp
          command = date +%N > $out
        build FORCE: phony
        build always.txt: stamp | FORCE
        build once.txt: stamp
        """)
    assert build(project).returncode == 0
    r = build(project)
    assert r.finished_lines() == ["stamp always.txt"], r


def test_output_a_command_does_not_make_is_no_failure(project):
    # CMake's custom targets: `build CMakeFiles/x.util: CUSTOM_COMMAND`, never a file.
    project.write("build.ninja", """\
        rule say
          command = echo hello from $out
        build CMakeFiles/say.util: say
        build say: phony CMakeFiles/say.util
        """)
    r = build(project, "say")
    assert r.returncode == 0 and "hello from CMakeFiles/say.util" in r.stdout, r
    r = build(project, "say")
    assert r.returncode == 0 and r.finished_lines() == ["say CMakeFiles/say.util"], r


def test_console_pool_writes_to_the_terminal(project):
    project.write("build.ninja", """\
        rule loud
          command = echo on the console; echo to stderr >&2
          pool = console
        rule quiet
          command = echo into the log > /dev/stdout
        build a: loud
        build b: quiet
        """)
    r = project.build(*NINJA)
    assert r.returncode == 0, r
    assert "on the console" in r.stdout and "to stderr" in r.stderr
    logs = {p.name: p.read_text() for p in (project.root / ".farmer/logs").iterdir()}
    assert logs["a.log"] == "" and "into the log" in logs["b.log"]


def test_console_pool_reads_the_terminal_stdin(project):
    project.write("build.ninja", "rule ask\n  command = cat > $out\n  pool = console\nbuild answer.txt: ask\n")
    cp = project.build(*NINJA, input="typed in\n")
    assert cp.returncode == 0, cp
    assert project.read("answer.txt") == "typed in\n"


def test_rspfile_is_written_and_removed(project):
    project.write("build.ninja", """\
        rule link
          command = cat $out.rsp > $out
          rspfile = $out.rsp
          rspfile_content = $in
        build list.txt: link a.o b$ c.o
        """)
    project.write("a.o", "")
    project.write("b c.o", "")
    r = build(project)
    assert r.returncode == 0, r
    assert project.read("list.txt") == "a.o 'b c.o'"
    assert not project.exists("list.txt.rsp")
    project.write("build.ninja", project.read("build.ninja").replace("$in", "$in extra"))
    r = build(project)
    assert r.finished_lines() == ["link list.txt"], r  # the response file's content is part of the command


def test_the_manifest_is_remade_and_read_again(project):
    project.write("configure.sh", """\
        cat > build.ninja <<EOF
        rule gen
          command = sh configure.sh
          generator = 1
        build build.ninja: gen configure.sh
        rule w
          command = echo $(cat version) > \\$out
        build out.txt: w
        EOF
        """)
    project.write("version", "1")
    assert os.system(f"cd {project.root} && sh configure.sh") == 0
    r = build(project)
    # Made by the user, newer than its inputs: taken as built, not rerun.
    assert r.returncode == 0 and r.finished_lines() == ["w out.txt"], r
    assert project.read("out.txt") == "1\n"
    project.write("version", "2")
    project.write("configure.sh", project.read("configure.sh") + "# edited\n")
    r = build(project)
    assert r.returncode == 0, r
    assert r.finished_lines() == ["gen build.ninja", "w out.txt"], r
    assert project.read("out.txt") == "2\n"
    r = build(project)
    assert r.returncode == 0 and r.finished_lines() == [], r


def test_dry_run_plan_query_graph(project):
    project.write("build.ninja", """\
        rule cp
          command = cp $in $out
          description = COPY $in
        build b.txt: cp a.txt
        build c.txt: cp b.txt
        build all: phony c.txt
        """)
    project.write("a.txt", "a\n")
    r = build(project, "-n")
    assert r.returncode == 0 and "cp b.txt: never built" in r.stdout and not project.exists("b.txt"), r
    r = project.farmer("plan", *NINJA, "--json")
    assert r.returncode == 0 and '"b.txt"' in r.stdout, r
    r = project.farmer("query", *NINJA, "c.txt")
    assert r.returncode == 0 and "cmd: cp b.txt c.txt" in r.stdout and "task: cp" in r.stdout, r
    r = project.farmer("graph", *NINJA, "all")
    assert r.returncode == 0 and '"b.txt" -> "c.txt"' in r.stdout, r


def test_an_edit_in_an_included_file_reruns_what_it_changes(project):
    # CMake keeps its rules in CMakeFiles/rules.ninja: the top file stays the same.
    project.write("build.ninja", "include rules.ninja\nbuild a.txt: w\nbuild b.txt: v\n")
    project.write("rules.ninja", "rule w\n  command = echo 1 > $out\nrule v\n  command = echo v > $out\n")
    assert build(project).returncode == 0
    r = build(project)
    assert r.finished_lines() == [] and project.read("a.txt") == "1\n", r
    project.write("rules.ninja", project.read("rules.ninja").replace("echo 1", "echo 2"))
    r = build(project)
    assert r.finished_lines() == ["w a.txt"] and project.read("a.txt") == "2\n", r


def test_clean_never_deletes_what_a_phony_names(project):
    # CMake: `build CMakeLists.txt ...: phony` for every file its regeneration reads.
    project.write("build.ninja", """\
        rule cp
          command = cp $in $out
        build CMakeLists.txt: phony
        build copy.txt: cp CMakeLists.txt
        build all: phony copy.txt
        """)
    project.write("CMakeLists.txt", "project(x)\n")
    assert build(project).returncode == 0
    r = project.farmer("clean", *NINJA)
    assert r.returncode == 0, r
    assert project.exists("CMakeLists.txt") and not project.exists("copy.txt")
