"""A generator edge whose inputs are listed only in its depfile (GN's `build build.ninja.stamp:
gn` with `depfile = build.ninja.d`, GN's bootstrap `build build.ninja: regen`): farmer reads
the depfile when it adopts the edge the user's `gn gen` made, and in the no-op stamp, so an
edit of a file it lists regenerates the manifest and builds what the new one says."""

from __future__ import annotations

import subprocess
import time

import pytest

NINJA = ("-f", "build.ninja")

# The manifest it writes copies the file config.txt names.
CONFIGURE = r"""
src=$(cat config.txt)
cat > build.ninja <<END
rule gen
  command = sh configure.sh
  generator = 1
{regen}
rule cp
  command = cp \$in \$out
build out.txt: cp $src
END
echo "{depfile_target}: config.txt" > build.ninja.d
{touch}
"""

PLAIN = {"regen": "build build.ninja: gen\n  depfile = build.ninja.d", "depfile_target": "build.ninja",
         "touch": ""}
# GN's form: a stamp made by the generator, the manifest a phony alias of it.
GN = {"regen": "build build.ninja.stamp: gen\n  depfile = build.ninja.d\nbuild build.ninja: phony build.ninja.stamp",
      "depfile_target": "build.ninja.stamp", "touch": "touch build.ninja.stamp"}


@pytest.mark.parametrize("form", [PLAIN, GN], ids=["plain", "gn"])
def test_an_edit_of_a_file_the_depfile_lists_regenerates(project, form):
    project.write("configure.sh", CONFIGURE.format(**form))
    project.write("config.txt", "a.txt\n")
    project.write("a.txt", "A\n")
    project.write("b.txt", "B\n")
    subprocess.run(["sh", "configure.sh"], cwd=project.path("."), check=True)  # the user's `gn gen`
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and r.finished_lines() == ["cp out.txt"], r  # the generator adopted
    assert project.read("out.txt") == "A\n"
    time.sleep(0.25)  # past the racy window: the next build is a no-op that stamps the project
    assert project.build_in_process(*NINJA).finished_lines() == []
    assert project.build_in_process(*NINJA).finished_lines() == []
    project.write("config.txt", "b.txt\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert "cp out.txt" in r.finished_lines(), r
    assert project.read("out.txt") == "B\n"
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == [], r
    assert "config.txt" in project.farmer("query", *NINJA, form["depfile_target"]).stdout
