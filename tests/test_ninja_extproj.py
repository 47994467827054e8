"""An output a build.ninja edge declares but leaves to a later edge (CMake's ExternalProject:
`BUILD_BYPRODUCTS` names what the install step writes) is up to date once that edge made it,
as ninja sees it: a clean build is followed by a no-op, not by a rerun of the build step."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

NINJA = ("-f", "build.ninja")


def test_an_output_made_by_a_later_edge_is_not_edited(project):
    project.write("build.ninja", """\
        rule step
          command = cp $in $out
        rule install
          command = cp built.txt made.txt && cp $in $out
        build build.stamp | made.txt: step input.txt
        build install.stamp: install build.stamp
        """)
    project.write("input.txt", "one\\n")
    project.write("built.txt", "product\\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and sorted(r.finished_lines()) == ["install install.stamp", "step build.stamp"], r
    assert project.read("made.txt") == "product\\n"
    r = project.build_in_process(*NINJA, "--explain")
    assert r.finished_lines() == [], r
    project.write("input.txt", "two\\n")
    r = project.build_in_process(*NINJA)
    assert sorted(r.finished_lines()) == ["install install.stamp", "step build.stamp"], r
    assert project.read("made.txt") == "product\\n"
    # A rebuild: the step finds its declared output there, the old one, and the install
    # step copies a new one over it. ninja then sees it newer than the step's inputs.
    project.write("input.txt", "three\\n")
    project.write("built.txt", "a new product\\n")
    r = project.build_in_process(*NINJA)
    assert sorted(r.finished_lines()) == ["install install.stamp", "step build.stamp"], r
    assert project.read("made.txt") == "a new product\\n"
    r = project.build_in_process(*NINJA, "--explain")
    assert r.finished_lines() == [], r
    os.unlink(project.path("made.txt"))
    r = project.build_in_process(*NINJA)  # a declared output gone: the edge runs, as in ninja
    assert "step build.stamp" in r.finished_lines(), r


TOOLS = all(shutil.which(t) for t in ("cmake", "cc"))


@pytest.mark.skipif(not TOOLS, reason="needs cmake and a C compiler")
def test_external_project_clean_build_then_no_op_then_a_new_value(tmp_path):
    from conftest import farmer_env, run_farmer

    src, build = tmp_path / "src", tmp_path / "build"
    (src / "inner").mkdir(parents=True)
    build.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(outer C)\ninclude(ExternalProject)\n"
        "set(VALUE 1 CACHE STRING \"\")\n"
        "ExternalProject_Add(inner SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/inner\n"
        "  CMAKE_ARGS -DVALUE=${VALUE} -DCMAKE_INSTALL_PREFIX=${CMAKE_BINARY_DIR}/stage\n"
        "  BUILD_BYPRODUCTS ${CMAKE_BINARY_DIR}/stage/bin/prog)\n")
    (src / "inner" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(inner C)\nadd_executable(prog prog.c)\n"
        "target_compile_definitions(prog PRIVATE VALUE=${VALUE})\ninstall(TARGETS prog DESTINATION bin)\n")
    (src / "inner" / "prog.c").write_text("int main(void) { return VALUE; }\n")

    def farmer(*args):
        r = run_farmer(build, "build", *NINJA, *args)
        assert r.returncode == 0, r
        return r

    def prog():
        return subprocess.run([str(build / "stage" / "bin" / "prog")], check=False).returncode

    subprocess.run(["cmake", "-G", "Ninja", str(src)], cwd=build, check=True, capture_output=True, env=farmer_env())
    farmer()
    assert prog() == 1
    r = farmer("--explain")
    assert "ran 0," in r.stdout, r  # the build step's declared output, made by the install step
    # CMake's install copies only over a file of another size or mtime, compared to the
    # second: the new program must not be linked in the same second as the old one.
    time.sleep(1.1)
    subprocess.run(["cmake", "-DVALUE=2", "."], cwd=build, check=True, capture_output=True, env=farmer_env())
    r = farmer("--explain")
    assert prog() == 2, r  # the touched stamps ran every step after the configure step
    r = farmer("--explain")  # the build step's output, rewritten by the install step: as ninja, nothing
    assert "ran 0," in r.stdout, r
