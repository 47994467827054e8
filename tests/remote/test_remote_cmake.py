"""A CMake project's build.ninja (absolute paths everywhere) with a base directory
(farmer/graph/basedir.py) against a real BuildGrid: its compiles and links run on the workers and the
program works; a second checkout at another path restores everything from the remote, and a
third from the local cache; without a base directory nothing is shared nor sent."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import textwrap

import pytest
from conftest import Result, run_farmer
from helpers import cmake_checkout, last_build_tasks

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)
if not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")):
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true and cmake, ninja or cc is missing (.ci/run installs them)", pytrace=False)
    pytest.skip("needs cmake, ninja and cc", allow_module_level=True)

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.16)
project(demo C)
add_library(shapes STATIC src/area.c src/scale.c)
target_include_directories(shapes PUBLIC include)
add_custom_command(OUTPUT version.h
  COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_SOURCE_DIR}/version.h.in version.h
  DEPENDS version.h.in)
add_executable(demo src/main.c ${CMAKE_CURRENT_BINARY_DIR}/version.h)
target_include_directories(demo PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
target_link_libraries(demo shapes)
"""


def checkout(top, salt: str) -> str:
    """The project under `top` (salted: bytes no other test uploaded), configured in top/build
    (Release: no debug information, which would name the build directory)."""
    files = {
        "CMakeLists.txt": CMAKELISTS,
        "include/common.h": f'#define SALT "{salt}"\n#define UNIT 2\n',
        "src/area.c": '#include "common.h"\nconst char *area_salt = SALT;\ndouble area(double w, double h) { return w * h * UNIT; }\n',
        "src/scale.c": '#include "common.h"\nconst char *scale_salt = SALT;\ndouble scale(double x) { return 3 * x; }\n',
        "src/main.c": textwrap.dedent("""\
            #include <stdio.h>
            #include "common.h"
            #include "version.h"
            double area(double, double); double scale(double);
            int main(void) { printf("%s %g %s\\n", VERSION, area(2, scale(1)), __FILE__); return 0; }
            """),
        "version.h.in": '#define VERSION "v1"\n',
    }
    return str(cmake_checkout(top, files, "-DCMAKE_BUILD_TYPE=Release"))


def farmer(build: str, *args: str, env: dict | None = None) -> Result:
    r = run_farmer(build, "build", "-f", "build.ninja", *args, env=env, timeout=300,
                   unset=("FARMER_REMOTE", "FARMER_CACHE", "FARMER_BASE"))
    assert r.returncode == 0, r
    return r


def tasks(build: str) -> dict[str, dict]:
    return {cid: t for cid, t in last_build_tasks(build).items() if t["status"] != "up-to-date"}


def program(build: str) -> str:
    return subprocess.run([os.path.join(build, "demo")], capture_output=True, text=True, check=True).stdout


# (the custom command, `cd BUILD && cmake -E copy ...` rewritten, may run on a worker too, when a
# remote slot is free as it starts)
COMPILES = {"CMakeFiles/shapes.dir/src/area.c.o", "CMakeFiles/shapes.dir/src/scale.c.o",
            "CMakeFiles/demo.dir/src/main.c.o"}
LINKS = {"libshapes.a", "demo"}


def test_compiles_and_links_of_a_cmake_build_run_on_the_workers(tmp_path, reapi):
    salt = os.urandom(8).hex()
    build = checkout(tmp_path / "proj", salt)
    remote = ["--remote", reapi.url, "--remote-exec", "--base-dir", "auto", "-j", "2"]
    r = farmer(build, *remote)  # never built: the compiles' headers from a preprocessor scan
    assert "warning" not in r.stdout + r.stderr, r.stdout + r.stderr
    ran = tasks(build)
    assert {cid for cid, t in ran.items() if t["executor"] == "remote"} >= COMPILES | LINKS, ran
    assert program(build) == "v1 12 ../src/main.c\n"
    (tmp_path / "proj" / "include" / "common.h").write_text(f'#define SALT "{salt}-2"\n#define UNIT 5\n')
    r = farmer(build, *remote)  # and with their depfiles' headers
    assert "warning" not in r.stdout + r.stderr, r.stdout + r.stderr
    ran = tasks(build)
    assert {cid for cid, t in ran.items() if t["executor"] == "remote"} >= COMPILES | LINKS, ran
    assert program(build) == "v1 30 ../src/main.c\n"  # __FILE__ is the path the command names
    r = farmer(build, *remote)
    assert "ran 0" in r.stdout and "cached 0" in r.stdout  # a no-op: every result has its trace
    os.unlink(os.path.join(build, "demo"))  # its inputs unchanged, vouched for by state.db: a remote hit
    farmer(build, *remote)
    assert {cid: (t["status"], t["cache"]) for cid, t in tasks(build).items()} == {"demo": ("cached", "remote")}
    assert program(build) == "v1 30 ../src/main.c\n"
    other = checkout(tmp_path / "elsewhere" / "proj", salt)  # what ran on the workers serves another checkout
    (tmp_path / "elsewhere" / "proj" / "include" / "common.h").write_text(f'#define SALT "{salt}-2"\n#define UNIT 5\n')
    farmer(other, "--remote", reapi.url, "--base-dir", "auto")
    assert {cid for cid, t in tasks(other).items() if t["cache"] == "remote"} >= COMPILES | LINKS, tasks(other)
    assert program(other) == "v1 30 ../src/main.c\n"


def test_a_second_cmake_checkout_elsewhere_restores_everything(tmp_path, reapi):
    salt = os.urandom(8).hex()
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    env = {"FARMER_BASE_DIR": "auto", "FARMER_CACHE": "1", "FARMER_CACHE_DIR": str(tmp_path / "cache")}
    first = checkout(tmp_path / "one", salt)
    farmer(first, *remote, env=env)  # into the local cache and the remote
    assert {cid for cid, t in tasks(first).items() if t["status"] == "ran"} >= COMPILES | LINKS
    second = checkout(tmp_path / "elsewhere" / "two", salt)
    r = farmer(second, *remote, "--no-cache", "--explain", env=env)
    assert "warning" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert {t["status"] for t in tasks(second).values()} == {"cached"}, tasks(second)  # the custom command too
    assert {t["cache"] for t in tasks(second).values()} == {"remote"}
    assert program(second) == "v1 12 ../src/main.c\n"
    third = checkout(tmp_path / "three", salt)
    farmer(third, env=env)  # no remote: the local cache alone
    # (the local key of what consumes an output of an edge without restat holds that output's
    # mtime, ninja's rule: the links run again; the remote keys by content)
    assert {cid for cid, t in tasks(third).items() if t["cache"] == "local"} >= COMPILES - {
        "CMakeFiles/demo.dir/src/main.c.o"}, tasks(third)  # main.c's depfile names the generated version.h
    assert program(third) == "v1 12 ../src/main.c\n"


def test_without_a_base_directory_a_cmake_checkout_shares_nothing_and_runs_locally(tmp_path, reapi):
    salt = os.urandom(8).hex()
    remote = ["--remote", reapi.url, "--remote-exec"]
    first = checkout(tmp_path / "one", salt)
    farmer(first, *remote)
    compiled = {cid: t for cid, t in tasks(first).items() if cid in COMPILES}
    assert {t["executor"] for t in compiled.values()} == {"local"}  # absolute paths: not sent
    second = checkout(tmp_path / "two", salt)
    farmer(second, "--remote", reapi.url)
    assert {t["status"] for cid, t in tasks(second).items() if cid in COMPILES} == {"ran"}
