"""A build.ninja here (issue 34): without -f or --ninja, a command reads `Farmfile` in the
current directory, else `build.ninja` in it, else the nearest `Farmfile` above (docs/cli.md,
"Finding the project"). So `farmer build` in a CMake or Meson build folder builds it, as
`ninja` there would, silently, also when the source tree above has a Farmfile of its own."""

from __future__ import annotations

import json

from conftest import assert_error

MANIFEST = """\
    rule cat
      command = cat $in > $out
      description = CAT $out
    build out/ab.txt: cat a.txt b.txt
    build all: phony out/ab.txt
    """

FARMFILE = """\
    [task.top]
    outputs = ["top.txt"]
    cmd = "echo top > {outputs}"
    """


def _build_dir(project, folder: str = "build"):
    project.write(f"{folder}/build.ninja", MANIFEST)
    for name in "ab":
        project.write(f"{folder}/{name}.txt", name + "\n")
    return project.path(folder)


def test_a_build_ninja_here_is_built_as_with_dash_f(project):
    here = _build_dir(project, ".")
    r = project.build(cwd=here)
    assert r.returncode == 0, r
    assert project.read("out/ab.txt") == "a\nb\n"
    assert r.stderr == "", r  # silently, as ninja
    assert [l.split("] ", 1)[1] for l in r.stdout.splitlines() if l.startswith("[")] == ["CAT out/ab.txt"], r
    again = project.build(cwd=here)
    assert again.returncode == 0 and again.summary()["up to date"] == 2, again
    same = project.build("-f", "build.ninja", cwd=here)
    assert same.returncode == 0 and same.summary()["up to date"] == 2, same


def test_in_a_build_folder_inside_a_farmfile_project_the_build_ninja_wins(project):
    project.farmfile(FARMFILE)
    build = _build_dir(project)
    r = project.build(cwd=build)
    assert r.returncode == 0, r
    assert project.exists("build/out/ab.txt") and not project.exists("top.txt"), r
    assert project.exists("build/.farmer") and not project.exists(".farmer"), r
    r = project.build("-C", "build")  # -C names the directory the rule starts from
    assert r.returncode == 0 and r.summary()["up to date"] == 2, r


def test_a_farmfile_here_wins_over_a_build_ninja_beside_it(project):
    project.farmfile(FARMFILE)
    _build_dir(project, ".")
    r = project.build()
    assert r.returncode == 0, r
    assert project.exists("top.txt") and not project.exists("out/ab.txt"), r


def test_a_folder_without_either_still_finds_the_farmfile_above(project):
    project.farmfile(FARMFILE)
    _build_dir(project)
    project.path("build/sub").mkdir()
    r = project.build(cwd=project.path("build/sub"))  # a build.ninja above is not looked for
    assert r.returncode == 0 and project.exists("top.txt"), r


def test_a_build_ninja_above_is_not_searched_for(project):
    _build_dir(project)
    project.path("build/sub").mkdir()
    assert_error(project.build(cwd=project.path("build/sub")), "no Farmfile in")


def test_the_other_commands_read_the_build_ninja_here(project):
    project.farmfile(FARMFILE)
    build = _build_dir(project)
    r = project.farmer("plan", "--json", cwd=build)
    assert r.returncode == 0, r
    assert [t["id"] for t in json.loads(r.stdout)["to_run"]] == ["out/ab.txt"]
    r = project.farmer("query", "out/ab.txt", cwd=build)
    assert r.returncode == 0 and "cat a.txt b.txt > out/ab.txt" in r.stdout, r
    r = project.farmer("graph", "--format", "json", cwd=build)
    assert r.returncode == 0 and "out/ab.txt" in r.stdout and "top.txt" not in r.stdout, r
    assert project.build(cwd=build).returncode == 0
    r = project.farmer("clean", cwd=build)
    assert r.returncode == 0 and not project.exists("build/out/ab.txt"), r
    dead = project.farmer("clean", "--dead", cwd=build)  # ninja's cleandead: .ninja_log's, no more in the manifest
    assert (dead.returncode, dead.stdout) == (0, "Cleaning... 0 files.\n"), dead
    assert project.build("-n", cwd=build).stdout.splitlines()[-1].startswith("farmer: would run 1 of 2")


def test_watch_names_the_build_ninja_it_will_not_watch(project):
    project.farmfile(FARMFILE)
    build = _build_dir(project)
    assert_error(project.farmer("watch", cwd=build, timeout=20), "build.ninja: farmer watch reads Farmfiles")
