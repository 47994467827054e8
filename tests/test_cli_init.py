"""`farmer init [--python | --c]` (issue 34): a commented starter Farmfile in the current
directory that builds as written once the user adds the files it names; never written over
an existing Farmfile."""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import assert_error

SUMMARY_PY = """\
    import json, sys
    values = [float(row["value"]) for row in ROWS]
    with open(sys.argv[1], "w") as f:
        json.dump({"rows": len(ROWS), "mean": statistics.mean(values)}, f)
    """

REPORT_PY = """\
    import json, sys
    summary = json.load(open(sys.argv[1]))
    with open(sys.argv[2], "w") as f:
        f.write(f"{summary['rows']} rows, mean {summary['mean']}\\n")
        f.writelines(f"{row['city']} {row['value']}\\n" for row in ROWS)
    """


def _keys_explained(text: str) -> list[str]:
    """The keys whose first use has no comment on its line ([vars] names are the user's)."""
    seen, bare, table = set(), [], ""
    for line in text.splitlines():
        if line.startswith("["):
            table = line.split("]")[0]
            continue
        m = re.match(r"(\w+) = ", line)
        if m and table != "[vars" and m[1] not in seen:
            seen.add(m[1])
            if "#" not in line:
                bare.append(m[1])
    return bare


def test_the_python_starter_builds_once_its_files_are_there(project):
    r = project.farmer("init", "--python")
    assert r.returncode == 0, r
    assert r.stdout.splitlines() == [
        "farmer: wrote Farmfile, a starter for a Python data pipeline (for a C program: farmer init --c)",
        "farmer: add data/measurements.csv, scripts/summary.py and scripts/report.py, then run farmer build"], r
    text = project.read("Farmfile")
    assert _keys_explained(text) == [], text
    assert "[world.data]" in text and "setup" in text
    project.write("data/measurements.csv", "city,value\nOslo,1\nLima,2\nRome,6\n")
    project.write("scripts/summary.py", SUMMARY_PY)
    project.write("scripts/report.py", REPORT_PY)
    r = project.build()
    assert r.returncode == 0 and r.summary()["ran"] == 2, r
    assert project.read("out/report.md") == "3 rows, mean 3.0\nOslo 1\nLima 2\nRome 6\n"
    assert project.statuses() == {"out/summary.json": "ran", "out/report.md": "ran"}
    assert project.build().summary()["up to date"] == 2
    project.write("data/measurements.csv", "city,value\nOslo,3\n")  # the world's input
    r = project.build("--explain")
    assert r.returncode == 0 and r.summary()["ran"] == 2 and "world data changed" in r.stdout, r
    assert project.read("out/report.md") == "1 rows, mean 3.0\nOslo 3\n"


def test_the_python_starter_is_the_default_and_its_example_script_works(project):
    assert project.farmer("init").returncode == 0
    text = project.read("Farmfile")
    example = "".join(line[4:] + "\n" for line in text.splitlines() if line.startswith("#   "))
    assert "statistics.mean" in example, text
    project.write("scripts/summary.py", example, dedent=False)  # as the comment says it could be
    project.write("data/measurements.csv", "city,value\nOslo,1\nLima,2\n")
    r = project.build("out/summary.json")
    assert r.returncode == 0, r
    assert project.read("out/summary.json") == '{"rows": 2, "mean": 1.5}'


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_the_c_starter_builds_once_its_sources_are_there(project):
    r = project.farmer("init", "--c")
    assert r.returncode == 0, r
    assert "a starter for a C program" in r.stdout, r
    text = project.read("Farmfile")
    assert _keys_explained(text) == [], text
    project.write("src/main.c", '#include <stdio.h>\n#include "greet.h"\nint main(void) { greet(); return 0; }\n')
    project.write("src/greet.c", '#include <stdio.h>\n#include "greet.h"\nvoid greet(void) { puts("hello"); }\n')
    project.write("src/greet.h", "void greet(void);\n")
    r = project.build()
    assert r.returncode == 0 and r.summary()["ran"] == 4, r
    assert project.read("build/output.txt") == "hello\n"
    project.write("src/greet.h", "void greet(void);  /* says hello */\n")  # found through the depfiles
    r = project.build()
    assert r.returncode == 0, r
    assert project.statuses() == {"build/greet.o": "ran", "build/main.o": "ran", "build/program": "up-to-date",
                                  "build/output.txt": "up-to-date"}


def test_an_existing_farmfile_is_never_replaced(project):
    project.farmfile("# mine\n")
    for flag in ("--python", "--c"):
        assert_error(project.farmer("init", flag), "Farmfile exists already")
        assert project.read("Farmfile") == "# mine\n"


def test_one_starter_at_a_time(project):
    assert_error(project.farmer("init", "--python", "--c"), "one of --python and --c")
    assert not project.exists("Farmfile")


def test_dash_C_and_a_project_above(project):
    project.farmfile("# the project above\n")
    project.path("sub").mkdir()
    assert project.farmer("init", "-C", "sub").returncode == 0
    assert "[world.data]" in project.read("sub/Farmfile")
    assert project.read("Farmfile") == "# the project above\n"


def test_without_a_farmfile_the_error_names_init(project):
    assert_error(project.build(), "no Farmfile in", "farmer init")
    assert_error(project.build("-f", "Nope"), "no such Farmfile", "farmer init")
