"""`deps = msvc`: a compiler that names its headers on its output (cl.exe's /showIncludes),
here a shell script standing for cl.exe. The header lines (after `msvc_deps_prefix`, English
cl's "Note: including file: " by default) and the echoed source name leave the output; the
headers become inputs, as in ninja (farmer/record/depfile.py)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from farmer.record.depfile import filter_msvc_output

NINJA = ("-f", "build.ninja")

# Echoes the source's name, names each header it includes after the prefix, warns once, and
# writes the source and its headers into the object.
FAKE_CL = r"""
prefix="$1"; src="$2"; out="$3"
echo "$src"
headers=$(sed -n 's/^#include "\(.*\)"/\1/p' "$src")
for h in $headers; do echo "$prefix  $h"; done
echo "$prefix C:\\Program Files\\Windows Kits\\stdio.h"
echo "main.c(1): warning C4996: something old"
cat "$src" $headers > "$out"
"""

MANIFEST = """\
rule cl
  command = sh fakecl.sh '{prefix}' $in $out
  deps = msvc
{extra}build main.obj: cl main.c
"""


def write(project, prefix: str, extra: str = "") -> None:
    project.write("fakecl.sh", FAKE_CL)
    project.write("build.ninja", MANIFEST.format(prefix=prefix, extra=extra))
    project.write("main.c", '#include "a.h"\n#include "sub/b.h"\nint main;\n')
    project.write("a.h", "int a;\n")
    project.write("sub/b.h", "int b;\n")
    project.write("other.h", "int other;\n")


@pytest.mark.parametrize("prefix, extra", [
    ("Note: including file:", ""),
    ("Remarque : inclusion du fichier :", "  msvc_deps_prefix = Remarque : inclusion du fichier :\n"),
], ids=["default", "msvc_deps_prefix"])
def test_headers_named_on_the_output_are_inputs_and_leave_the_output(project, prefix, extra):
    write(project, prefix, extra)
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and r.finished_lines() == ["cl main.obj"], r
    assert "warning C4996: something old" in r.stdout, r
    assert prefix not in r.stdout and "main.c\n" not in r.stdout.replace("main.c(1)", ""), r
    r = project.build_in_process(*NINJA, "--explain")
    assert r.finished_lines() == [], r
    project.write("other.h", "int other2;\n")  # not included: nothing to do
    assert project.build_in_process(*NINJA).finished_lines() == []
    project.write("sub/b.h", "int b2;\n")
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["cl main.obj"], r
    assert "int b2;" in project.read("main.obj")
    query = project.farmer("query", *NINJA, "main.obj").stdout
    assert "a.h" in query and "sub/b.h" in query and "Program Files" not in query, query


def test_filter_output_is_ninjas_clparser():
    text = ("foo.cpp\nNote: including file: ./a.h\nNote: including file:    sub\\..\\b.h\r\n"
            "foo.cpp(3): error C2065: 'x': undeclared identifier\n"
            "Note: including file: C:\\Program Files (x86)\\Microsoft Visual Studio\\vc\\stdio.h\n")
    kept, headers = filter_msvc_output(text, "Note: including file: ")
    assert kept == "foo.cpp(3): error C2065: 'x': undeclared identifier\n"
    assert headers[0] == "a.h" and len(headers) == 2


NINJA_BIN = shutil.which("ninja")


@pytest.mark.skipif(not NINJA_BIN and os.environ.get("CI") != "true", reason="needs ninja")
def test_ninja_continues_a_tree_farmer_built_with_msvc_deps(project):
    write(project, "Note: including file:")
    assert project.build_in_process(*NINJA).returncode == 0
    deps = subprocess.run([NINJA_BIN, "-t", "deps", "main.obj"], cwd=project.path("."), capture_output=True,
                          text=True, check=True).stdout
    assert "a.h" in deps and "sub/b.h" in deps and "VALID" in deps, deps
    r = subprocess.run([NINJA_BIN], cwd=project.path("."), capture_output=True, text=True, check=True)
    assert r.stdout == "ninja: no work to do.\n", r.stdout
