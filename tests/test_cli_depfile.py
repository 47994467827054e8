"""Depfile-discovered inputs with a real compiler (gcc -MD), whole builds in-process: the
fake executor (tests/fakes.py) runs each command line in /bin/sh at its start."""

import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

FARMFILE = """
[vars]
cc = "gcc"
cflags = "-O0 -Iinc"

[task.objects]
foreach = "src/{stem}.c"
inputs = ["src/{stem}.c"]
outputs = ["build/{stem}.o"]
depfile = "build/{stem}.d"
cmd = "{cc} {cflags} -MD -MF {depfile} -c {inputs} -o {outputs}"

[task.app]
inputs = ["@objects"]
outputs = ["build/app"]
cmd = "{cc} {inputs} -o {outputs}"
"""


@pytest.fixture
def cproj(project):
    project.farmfile(FARMFILE)
    project.write("inc/a.h", "#define A_VALUE 1\n")
    project.write("inc/b.h", "#define B_VALUE 2\n")
    project.write("src/main.c", '#include "a.h"\nint f(void);\nint main(void) { return A_VALUE + f() - 3; }\n')
    project.write("src/f.c", '#include "b.h"\nint f(void) { return B_VALUE; }\n')
    return project


def test_c_project_builds_and_links(cproj):
    r = cproj.build_in_process()
    assert r.returncode == 0, r
    assert cproj.statuses() == {"build/main.o": "ran", "build/f.o": "ran", "build/app": "ran"}
    import subprocess
    assert subprocess.run([str(cproj.path("build/app"))]).returncode == 0
    assert cproj.build_in_process().finished() == []


def test_editing_included_header_rebuilds_object(cproj):
    assert cproj.build_in_process().returncode == 0
    cproj.write("inc/a.h", "#define A_VALUE 2\n")
    r = cproj.build_in_process()
    assert r.returncode == 0, r
    st = cproj.statuses()
    assert st["build/main.o"] == "ran", r
    assert st["build/f.o"] == "up-to-date", r
    assert st["build/app"] == "ran", r
    assert cproj.reasons()["build/main.o"] == "input inc/a.h changed"
    import subprocess
    assert subprocess.run([str(cproj.path("build/app"))]).returncode == 1


def test_query_lists_discovered_inputs(cproj):
    assert cproj.build_in_process().returncode == 0
    r = cproj.farmer("query", "build/main.o")
    assert r.returncode == 0, r
    assert "inc/a.h" in r.stdout, r
    assert "src/main.c" in r.stdout, r
    assert "inc/b.h" not in r.stdout, r


def test_removed_include_no_longer_an_input(cproj):
    assert cproj.build_in_process().returncode == 0
    cproj.write("src/main.c", "int f(void);\nint main(void) { return f() - 2; }\n")
    r = cproj.build_in_process()
    assert r.returncode == 0, r
    assert cproj.statuses()["build/main.o"] == "ran"
    assert cproj.reasons()["build/main.o"] == "input src/main.c changed"
    cproj.write("inc/a.h", "#define A_VALUE 42 /* no longer included */\n")
    r = cproj.build_in_process()
    assert r.returncode == 0, r
    assert r.finished() == [], r
    assert set(cproj.statuses().values()) == {"up-to-date"}


def test_deleting_header_together_with_its_include_is_fine(cproj):
    assert cproj.build_in_process().returncode == 0
    cproj.write("src/main.c", "int f(void);\nint main(void) { return f() - 2; }\n")
    cproj.remove("inc/a.h")
    r = cproj.build_in_process()
    assert r.returncode == 0, r
    assert cproj.statuses()["build/main.o"] == "ran"
    assert cproj.build_in_process().finished() == []


def test_new_header_include_is_discovered(cproj):
    assert cproj.build_in_process().returncode == 0
    cproj.write("src/f.c", '#include "b.h"\n#include "a.h"\nint f(void) { return B_VALUE + A_VALUE - 1; }\n')
    assert cproj.build_in_process().returncode == 0
    cproj.write("inc/a.h", "#define A_VALUE 1 /* touched */\n")
    r = cproj.build_in_process()
    assert r.returncode == 0, r
    st = cproj.statuses()
    assert st["build/f.o"] == "ran" and st["build/main.o"] == "ran", r
    assert cproj.reasons()["build/f.o"] == "input inc/a.h changed"


def test_system_headers_in_depfile(project):
    project.farmfile(FARMFILE)
    project.write("src/main.c", "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert r.finished() == [], r


def test_handwritten_depfile_continuations_and_escaped_spaces(project):
    # The depfile's own rules, not gcc's: line continuations, escaped spaces, several targets.
    project.farmfile(
        r"""
        [task.d]
        inputs = ["src/main.txt"]
        outputs = ["out/d.txt"]
        depfile = "out/d.dep"
        cmd = "cat {inputs} 'src/with space.h' src/other.h > {outputs} && printf 'out/d.txt out/d.dep: src/main.txt \\\\\n  src/with\\\\ space.h \\\\\n  src/other.h\\n' > {depfile}"
        """
    )
    project.write("src/main.txt", "main\n")
    project.write("src/with space.h", "ws\n")
    project.write("src/other.h", "other\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    dep = project.read("out/d.dep")
    assert "\\\n" in dep and "with\\ space.h" in dep, dep
    assert project.build_in_process().finished() == []
    project.write("src/with space.h", "ws changed\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.reasons()["out/d.txt"] == "input src/with space.h changed"
    assert project.build_in_process().finished() == []
    project.write("src/other.h", "other changed\n")
    project.build_in_process()
    assert project.reasons()["out/d.txt"] == "input src/other.h changed"
