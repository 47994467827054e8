"""dyndep (ninja >= 1.10): an edge's `dyndep = FILE` adds the implicit inputs, implicit outputs
and `restat` FILE lists once another edge has written it. A hand-written scanner and
"compiler" whose units provide and use interfaces (as Fortran modules do), the dyndep file
format's errors, and CMake's Fortran support when gfortran is installed."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from farmer.errors import UsageError
from farmer.manifest import ninja_dyndep

NINJA = ("-f", "build.ninja")

MANIFEST = """\
    rule scan
      command = sh scan.sh $in > $out
    rule compile
      command = sh compile.sh $in $out
    rule link
      command = cat $in > $out
    build out.dd: scan a.src b.src
    build a.obj: compile a.src || out.dd
      dyndep = out.dd
    build b.obj: compile b.src || out.dd
      dyndep = out.dd
    build app: link a.obj b.obj
    """

# The scanner: `provide X` makes the unit's compile write X.iface; `use X` makes it read it.
SCAN = """\
    echo "ninja_dyndep_version = 1"
    for f in "$@"; do
      line="build ${f%.src}.obj"
      prov=$(sed -n 's/^provide //p' "$f")
      need=$(sed -n 's/^use //p' "$f")
      [ -n "$prov" ] && line="$line | $prov.iface"
      line="$line: dyndep"
      [ -n "$need" ] && line="$line | $need.iface"
      echo "$line"
      echo "  restat = 1"
    done
    """
COMPILE = """\
    prov=$(sed -n 's/^provide //p' "$1")
    need=$(sed -n 's/^use //p' "$1")
    body=$(sed -n 's/^value //p' "$1")
    [ -n "$need" ] && body="$body+$(cat $need.iface)"
    [ -n "$prov" ] && echo "$body" > $prov.iface
    echo "$body" > $2
    """


@pytest.fixture
def units(project):
    project.write("build.ninja", MANIFEST)
    project.write("scan.sh", SCAN)
    project.write("compile.sh", COMPILE)
    project.write("a.src", "use b\nvalue A\n")
    project.write("b.src", "provide b\nvalue B1\n")
    return project


def test_a_unit_waits_for_the_interface_it_uses(units):
    r = units.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert units.read("app") == "A+B1\nB1\n"
    assert "b.iface" in units.farmer("query", *NINJA, "a.obj").stdout  # an implicit input now
    assert units.build_in_process(*NINJA).finished_lines() == []


def test_a_changed_interface_rebuilds_its_users(units):
    assert units.build_in_process(*NINJA).returncode == 0
    units.write("b.src", "provide b\nvalue B2\n")
    r = units.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert units.read("app") == "A+B2\nB2\n"
    assert units.build_in_process(*NINJA).finished_lines() == []


def test_restat_keeps_users_of_an_unchanged_interface(units):
    assert units.build_in_process(*NINJA).returncode == 0
    units.write("b.src", "provide b\nvalue B1\n# a comment\n")
    r = units.build_in_process(*NINJA)
    assert "compile b.obj" in r.finished_lines() and "compile a.obj" not in r.finished_lines(), r


def test_a_new_use_is_learned(units):
    units.write("a.src", "value A\n")
    assert units.build_in_process(*NINJA).returncode == 0
    assert units.read("app") == "A\nB1\n"
    units.write("a.src", "use b\nvalue A\n")
    assert units.build_in_process(*NINJA).returncode == 0
    assert units.read("app") == "A+B1\nB1\n"


def test_a_dyndep_that_waits_for_another_targets_compiles(project):
    """A program's dyndep file is made after its library's compiles (CMake: `|| libmods.a`):
    rounds, the library's first."""
    project.write("build.ninja", """\
        rule scan
          command = sh scan.sh $in > $out
        rule compile
          command = sh compile.sh $in $out
        build lib.dd: scan b.src
        build b.obj: compile b.src || lib.dd
          dyndep = lib.dd
        build app.dd: scan a.src || b.obj
        build a.obj: compile a.src || app.dd
          dyndep = app.dd
        """)
    project.write("scan.sh", SCAN)
    project.write("compile.sh", COMPILE)
    project.write("a.src", "use b\nvalue A\n")
    project.write("b.src", "provide b\nvalue B1\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert project.read("a.obj") == "A+B1\n"
    project.write("b.src", "provide b\nvalue B2\n")
    assert project.build_in_process(*NINJA).returncode == 0
    assert project.read("a.obj") == "A+B2\n"


@pytest.mark.parametrize(("text", "expected"), [
    ("build a: dyndep\n", "x.dd:1: expected 'ninja_dyndep_version = ...'"),
    ("ninja_dyndep_version = 2\n", "x.dd:1: unsupported 'ninja_dyndep_version = 2'"),
    ("ninja_dyndep_version = 1\nbuild a b: dyndep\n", "x.dd:2: expected exactly one explicit output"),
    ("ninja_dyndep_version = 1\nbuild a: cc\n", "x.dd:2: expected build command name 'dyndep'"),
    ("ninja_dyndep_version = 1\nbuild a: dyndep x\n", "x.dd:2: explicit inputs not expected"),
    ("ninja_dyndep_version = 1\nbuild a: dyndep\n  pool = p\n", "x.dd:2: binding is not 'restat': pool"),
])
def test_dyndep_file_errors_name_file_and_line(text, expected):
    with pytest.raises(UsageError) as e:
        ninja_dyndep.parse("x.dd", text)
    assert str(e.value).startswith(expected)


def test_dyndep_file_statements():
    (b,) = ninja_dyndep.parse("x.dd", "ninja_dyndep_version = 1.0\nbuild ./o/a.o | m.mod: dyndep | n.mod k.mod\n  restat = 1\n")
    assert (b.output, b.implicit_outs, b.implicit_ins, b.restat) == ("o/a.o", ["m.mod"], ["n.mod", "k.mod"], True)


FORTRAN = {"gfortran": shutil.which("gfortran"), "cmake": shutil.which("cmake")}


@pytest.mark.skipif(not all(FORTRAN.values()), reason="needs cmake and gfortran")
def test_cmake_fortran_modules(tmp_path):
    from conftest import farmer_env, run_farmer

    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    build.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(f Fortran)\n"
        "add_library(mods STATIC consts.f90 shapes.f90)\nadd_executable(app main.f90)\n"
        "target_link_libraries(app mods)\n")
    (src / "consts.f90").write_text("module consts\n  integer, parameter :: value = 1\nend module consts\n")
    (src / "shapes.f90").write_text(
        "module shapes\n  use consts\ncontains\n  integer function area()\n    area = value * 2\n"
        "  end function area\nend module shapes\n")
    (src / "main.f90").write_text("program main\n  use shapes\n  print '(I0)', area()\nend program main\n")

    def farmer():
        r = run_farmer(build, "build", *NINJA, "--explain")
        assert r.returncode == 0, r
        return r

    def app():
        return subprocess.run([str(build / "app")], capture_output=True, text=True, check=True).stdout.strip()

    subprocess.run(["cmake", "-G", "Ninja", str(src)], cwd=build, check=True, capture_output=True, env=farmer_env())
    farmer()
    assert app() == "2"
    assert "ran 0," in farmer().stdout
    (src / "consts.f90").write_text("module consts\n  integer, parameter :: value = 5\nend module consts\n")
    r = farmer()
    assert "input consts.mod changed" in r.stderr + r.stdout, r  # shapes.f90.o reads the module
    assert app() == "10"
    (src / "consts.f90").write_text("module consts\n  integer, parameter :: value = 5\nend module consts\n! x\n")
    r = farmer()
    assert "shapes.f90.o:" not in r.stderr + r.stdout, r  # the same module: its users keep
    assert "ran 0," in farmer().stdout
