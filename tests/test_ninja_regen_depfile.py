"""A generator edge whose inputs are listed only in its depfile (GN's `build build.ninja.stamp:
gn` with `depfile = build.ninja.d`, GN's bootstrap `build build.ninja: regen`): farmer reads
the depfile when it adopts the edge the user's `gn gen` made, and in the no-op stamp, so an
edit of a file it lists regenerates the manifest and builds what the new one says."""

from __future__ import annotations

import os
import shutil
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


# `deps = gcc`: the depfile is deleted once a run read it; what it listed stays recorded.
DEPS = {**PLAIN, "regen": PLAIN["regen"] + "\n  deps = gcc"}


@pytest.mark.parametrize("form", [PLAIN, GN, DEPS], ids=["plain", "gn", "deps-gcc"])
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
    project.write("config.txt", "a.txt\n")  # again, after a regeneration farmer ran itself
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and project.read("out.txt") == "A\n", r


GN_TOOLCHAIN = """\
toolchain("gcc") {
  tool("cc") {
    depfile = "{{output}}.d"
    command = "gcc -MMD -MF $depfile {{defines}} {{include_dirs}} -c {{source}} -o {{output}}"
    depsformat = "gcc"
    outputs = [ "{{source_out_dir}}/{{target_output_name}}.{{source_name_part}}.o" ]
  }
  tool("alink") {
    command = "rm -f {{output}} && ar rcs {{output}} {{inputs}}"
    outputs = [ "{{target_out_dir}}/{{target_output_name}}{{output_extension}}" ]
    default_output_extension = ".a"
    output_prefix = "lib"
  }
  tool("link") {
    command = "gcc -o {{output}} {{inputs}} {{libs}}"
    outputs = [ "{{root_out_dir}}/{{target_output_name}}{{output_extension}}" ]
  }
  tool("stamp") {
    command = "touch {{output}}"
  }
  tool("copy") {
    command = "cp -af {{source}} {{output}}"
  }
}
"""
GN_BUILD = """\
static_library("core") {{
  sources = [ {sources} ]
}}
executable("app") {{
  sources = [ "main.c" ]
  deps = [ ":core" ]
  defines = [ {defines} ]
}}
"""
MAIN = """\
int a(void);
#ifdef EXTRA
int extra(void);
#define MORE + extra()
#else
#define MORE
#endif
int main(void) { return a() MORE; }
"""


@pytest.mark.skipif(not (shutil.which("gn") and shutil.which("gcc")), reason="needs gn and gcc")
def test_gn_project_regenerates_after_a_build_gn_edit(tmp_path):
    """GN itself: `gn gen`, a build, then a new source in BUILD.gn: GN runs again and the
    new source is compiled into the library (before, nothing ran)."""
    from conftest import run_farmer

    src, out = tmp_path / "src", tmp_path / "out"
    (src / "build").mkdir(parents=True)
    (src / ".gn").write_text('buildconfig = "//build/BUILDCONFIG.gn"\n')
    (src / "build" / "BUILDCONFIG.gn").write_text('set_default_toolchain("//build:gcc")\n')
    (src / "build" / "BUILD.gn").write_text(GN_TOOLCHAIN)
    (src / "BUILD.gn").write_text(GN_BUILD.format(sources='"a.c"', defines=""))
    (src / "a.c").write_text("int a(void) { return 1; }\n")
    (src / "extra.c").write_text("int extra(void) { return 2; }\n")
    (src / "main.c").write_text(MAIN)
    subprocess.run(["gn", "gen", str(out)], cwd=src, check=True, capture_output=True)

    def farmer():
        r = run_farmer(out, "build", *NINJA)
        assert r.returncode == 0, r
        return r

    farmer()
    assert subprocess.run([str(out / "app")], check=False).returncode == 1
    time.sleep(0.25)
    assert "ran 0," in farmer().stdout
    (src / "BUILD.gn").write_text(GN_BUILD.format(sources='"a.c", "extra.c"', defines='"EXTRA"'))
    farmer()
    assert subprocess.run([str(out / "app")], check=False).returncode == 3
    assert (out / "obj" / "libcore.extra.o").exists()
    assert "ran 0," in farmer().stdout


NINJA_BIN = shutil.which("ninja")


@pytest.mark.skipif(not NINJA_BIN and os.environ.get("CI") != "true", reason="needs ninja")
@pytest.mark.parametrize("form", [DEPS, {**GN, "regen": GN["regen"].replace("\nbuild build.ninja:", "\n  deps = gcc\nbuild build.ninja:")}],
                         ids=["deps-gcc", "gn-deps-gcc"])
def test_a_depfile_ninja_moved_into_its_deps_log_still_regenerates(project, form):
    """ninja built the tree: it read the generator's depfile, deleted it and keeps what it
    listed in .ninja_deps. farmer takes the list from there: its no-op is stamped, and an
    edit of a listed file regenerates the manifest."""
    project.write("configure.sh", CONFIGURE.format(**form))
    project.write("config.txt", "a.txt\n")
    project.write("a.txt", "A\n")
    project.write("b.txt", "B\n")
    subprocess.run(["sh", "configure.sh"], cwd=project.path("."), check=True)
    subprocess.run([NINJA_BIN], cwd=project.path("."), check=True, capture_output=True)
    assert not project.exists("build.ninja.d") and project.exists(".ninja_deps")
    assert project.read("out.txt") == "A\n"
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and r.finished_lines() == [], r  # ninja's work adopted
    time.sleep(0.25)
    assert project.build_in_process(*NINJA).finished_lines() == []
    assert project.exists(".farmer/ninja.stamp")  # the no-op is stamped, with config.txt in it
    assert project.build_in_process(*NINJA).finished_lines() == []
    project.write("config.txt", "b.txt\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and "cp out.txt" in r.finished_lines(), r
    assert project.read("out.txt") == "B\n"
    assert project.build_in_process(*NINJA).finished_lines() == []
