"""The base-directory rewrite (farmer/graph/basedir.py) and the debug-directory part of the key
(farmer/record/cache/key.py's debug_workdir), as pure functions."""

from __future__ import annotations

import os

import pytest

from farmer.errors import UsageError
from farmer.graph.basedir import BaseDir, cmake_base, resolve, rewritable, tagged
from farmer.record.cache.key import debug_workdir
from farmer.remote.depscan import scan_argv

B = BaseDir("/x/src", "/x/src", "build")


def test_compile_paths_under_the_base_become_relative_to_the_build_directory():
    cmd = "/usr/bin/cc -I/x/src/include -isystem /x/src/sys -o CMakeFiles/a.o -MF /x/src/build/a.d -c /x/src/lib/a.c"
    assert B.rewrite(cmd) == "/usr/bin/cc -I../include -isystem ../sys -o CMakeFiles/a.o -MF ./a.d -c ../lib/a.c"


def test_a_prefix_that_is_not_a_directory_is_not_under_the_base():
    assert B.rewrite("cc -c /x/srcfoo/a.c -I/x/srcfoo") == "cc -c /x/srcfoo/a.c -I/x/srcfoo"
    assert B.relative("/x/srcfoo/a.c") == "/x/srcfoo/a.c"
    assert B.root_path("/x/srcfoo/a.c") is None
    assert B.rewrite("cc -c /x/src -o /x/src/build") == "cc -c .. -o ."  # the base itself, the build dir itself


def test_paths_outside_the_base_stay_absolute():
    assert B.rewrite("cc -I/usr/include/x -c /x/src/a.c /y/x/src/b.c") == "cc -I/usr/include/x -c ../a.c /y/x/src/b.c"
    assert B.root_path("/usr/include/stdio.h") is None
    assert B.root_path("../../elsewhere.h") is None  # beside the base


def test_quoted_paths_keep_their_quotes():
    assert B.rewrite("cc -c '/x/src/a b.c' \"/x/src/c d.c\" -I'/x/src/i'") == \
        "cc -c '../a b.c' \"../c d.c\" -I'../i'"


def test_dotdot_after_the_base_is_kept_as_written():
    # `src/../inc` walks through src as the kernel would: not collapsed (src may be a symlink)
    assert B.rewrite("cc -c /x/src/lib/../inc/a.c") == "cc -c ../lib/../inc/a.c"
    assert B.root_path("../lib/../inc/a.c") == "inc/a.c"


def test_what_a_program_keeps_for_later_is_never_rewritten():
    cmd = ("c++ a.o -o app -Wl,-rpath,/x/src/build/lib -Xlinker -rpath -Xlinker /x/src/lib "
           "-DDATA=/x/src/data -ffile-prefix-map=/x/src=.")
    assert B.rewrite(cmd) == cmd


def test_a_prefix_map_of_the_build_directory_maps_the_directory_the_compiler_runs_in():
    cmd = "cc -g -ffile-prefix-map=/x/src/build=. -fdebug-prefix-map=/x/src/build/sub=s -c /x/src/a.c"
    rewritten = B.rewrite(cmd)
    assert rewritten == 'cc -g -ffile-prefix-map="$PWD"=. -fdebug-prefix-map=/x/src/build/sub=s -c ../a.c'
    # what the key holds for the debug information: `.`, the same in every checkout
    assert debug_workdir(rewritten, "/x/src/build") == debug_workdir(rewritten, "/elsewhere/build") == "."


def test_only_compilers_archivers_and_file_copies_are_rewritten():
    assert rewritable("/usr/bin/x86_64-linux-gnu-gcc-12 -c a.c")
    assert rewritable(": && /usr/bin/c++ a.o -o app && :")
    assert rewritable("/usr/bin/cmake -E rm -f lib.a && /usr/bin/ar qc lib.a a.o && /usr/bin/ranlib lib.a")
    assert not rewritable("python3 /x/src/gen.py /x/src/in > out")  # may embed the path it is given
    assert not rewritable("cmake -E create_symlink /x/src/a link")
    assert not rewritable("cmake -P /x/src/script.cmake")
    cmd = "cd /x/src/sub && cc -c /x/src/a.c"  # another directory: relative paths would mean other files
    assert B.rewrite(cmd) == cmd
    assert B.rewrite("cd /x/src/build && /usr/bin/cmake -E copy /x/src/v.h.in v.h") == \
        "cd . && /usr/bin/cmake -E copy ../v.h.in v.h"  # CMake's custom commands cd into the build dir


def test_the_relative_path_climbs_only_out_of_what_it_does_not_share_with_the_build_directory():
    deep = BaseDir("/x", "/x", "src/out/debug")
    assert deep.rewrite("cc -I/x/src/include -c /x/src/out/gen.c -o /x/src/out/debug/a.o -I/x/other") == \
        "cc -I../../include -c ../gen.c -o ./a.o -I../../../other"
    assert deep.relative("/x/src/out/debug") == "." and deep.relative("/x/src/lib/a.c") == "../../lib/a.c"
    assert deep.rewrite("cc -c /x/src/outer/a.c") == "cc -c ../../outer/a.c"  # outer is not out
    # the same layout under a shallower or a deeper base: the same command, the same key
    assert BaseDir("/x/src", "/x/src", "out/debug").rewrite("cc -c /x/src/lib/a.c") == "cc -c ../../lib/a.c"


def test_a_symlinked_base_is_matched_by_either_path(tmp_path):
    real = tmp_path / "real"
    (real / "build").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    base = resolve(str(link), str(link / "build"))
    assert base.workdir == "build" and base.real == str(real)
    assert base.rewrite(f"cc -c {link}/a.c {real}/b.c") == "cc -c ../a.c ../b.c"
    # the relative path leads from the build directory's real place to the base's
    assert os.path.samefile(os.path.join(link / "build", base.relative(str(link))), link)


def test_a_build_directory_reached_through_a_symlink_out_of_the_base_is_refused(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "proj" / "build").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="not under it"):
        resolve(str(tmp_path / "proj"), str(tmp_path / "proj" / "build"))


def test_bad_settings_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="absolute"):
        resolve("proj", str(tmp_path))
    with pytest.raises(UsageError, match="cannot be /"):
        resolve("/", str(tmp_path))
    with pytest.raises(UsageError, match="no such directory"):
        resolve(str(tmp_path / "nope"), str(tmp_path))
    with pytest.raises(UsageError, match="no CMakeCache.txt"):
        resolve("auto", str(tmp_path))
    assert resolve("", str(tmp_path)) is None


def test_auto_is_the_parent_of_a_cmake_build_and_its_sources(tmp_path):
    build = tmp_path / "out" / "debug"
    build.mkdir(parents=True)
    (build / "CMakeCache.txt").write_text(f"CMAKE_CACHEFILE_DIR:INTERNAL={build}\n"
                                          f"CMAKE_HOME_DIRECTORY:INTERNAL={tmp_path}/src\n")
    assert cmake_base(str(build)) == str(tmp_path)
    assert resolve("auto", str(build)).workdir == "out/debug"
    assert resolve("auto", str(build)).rewrite(f"cc -c {tmp_path}/src/a.c") == "cc -c ../../src/a.c"


def test_the_no_op_digest_holds_the_setting():
    a, b = BaseDir("/a", "/a", "b"), BaseDir("/c", "/c", "b")
    assert tagged("d1", None) == "d1"
    assert tagged(tagged("d1", a), None) == "d1"
    assert tagged(tagged("d1", a), b) == tagged("d1", b) != tagged("d1", a)


def test_debug_information_keys_the_directory_it_names():
    assert debug_workdir("cc -O2 -c a.c", "/x/src/build") is None
    assert debug_workdir("cc -g -O2 -c a.c", "/x/src/build") == "/x/src/build"
    assert debug_workdir("cc -g -g0 -c a.c", "/x/src/build") is None
    assert debug_workdir("cc -ggdb3 -c a.c", "/x/src/build") == "/x/src/build"
    assert debug_workdir("cc -g -ffile-prefix-map=/x/src=. -c a.c", "/x/src/build") == "./build"
    assert debug_workdir("cc -g -fdebug-prefix-map=$PWD=. -c a.c", "/x/src/build") == "."
    assert debug_workdir("cc -g -fdebug-prefix-map=/y=. -c a.c", "/x/src/build") == "/x/src/build"


def test_the_dependency_scan_of_a_compile_is_the_compile_with_minus_m_for_its_outputs():
    cmd = "/usr/bin/cc -I../include -O3 -MD -MT a.o -MF a.o.d -o a.o -c ../src/a.c"
    assert scan_argv(cmd) == ["/usr/bin/cc", "-I../include", "-O3", "-c", "../src/a.c", "-M"]
    assert scan_argv("cc -c -MMD -MFa.d -oa.o a.c") == ["cc", "-c", "a.c", "-M"]
    for cmd in ["cc a.o -o app",  # a link: no headers
                "cc -c a.c -o a.o && touch b",  # more than a compile
                "FOO=1 cc -c a.c", "cc -c $SRC", "cc -c a.c > log", "python3 gen.py -c x", "cc -E -c a.c"]:
        assert scan_argv(cmd) is None, cmd
