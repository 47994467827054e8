"""`--base-dir` / FARMER_BASE_DIR on a real CMake build.ninja, without a remote
(farmer/graph/basedir.py): the commands run in their relative form, two checkouts at different paths
share the local cache's compiles, the no-op proof holds only for the setting it was taken with,
and a setting that cannot be used is a usage error."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import Result, run_farmer
from helpers import cmake_checkout

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")),
                                reason="needs cmake, ninja and cc")

FILES = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(demo C)\n"
                      "add_library(parts STATIC src/part.c)\ntarget_include_directories(parts PUBLIC include)\n"
                      "add_executable(demo src/main.c)\ntarget_link_libraries(demo parts)\n",
    "include/part.h": "int part(void);\n",
    "src/part.c": '#include "part.h"\nint part(void) { return 21; }\n',
    "src/main.c": '#include <stdio.h>\n#include "part.h"\n'
                  'int main(void) { printf("%d %s\\n", 2 * part(), __FILE__); return 0; }\n',
}
COMPILES = {"CMakeFiles/parts.dir/src/part.c.o", "CMakeFiles/demo.dir/src/main.c.o"}


def checkout(top: Path, build_type: str = "Release", *extra: str) -> Path:
    return cmake_checkout(top, FILES, f"-DCMAKE_BUILD_TYPE={build_type}", *extra)


def farmer(build: Path, *args: str, env: dict | None = None) -> Result:
    """`farmer build` of build.ninja with no base directory, cache nor remote unless `env` sets them."""
    return run_farmer(build, "build", "-f", "build.ninja", *args, env=env, timeout=120,
                      unset=("FARMER_BASE_DIR", "FARMER_CACHE", "FARMER_REMOTE"))


def statuses(build: Path) -> dict[str, tuple[str, str | None]]:
    tasks = json.loads((build / ".farmer" / "last-build.json").read_text())["tasks"]
    return {t["id"]: (t["status"], t.get("cache")) for t in tasks if t["id"] in COMPILES}


def test_checkouts_at_different_paths_share_the_local_cache(tmp_path):
    env = {"FARMER_BASE_DIR": "auto", "FARMER_CACHE": "1", "FARMER_CACHE_DIR": str(tmp_path / "cache")}
    first = checkout(tmp_path / "one")
    r = farmer(first, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(statuses(first).values()) == {("ran", None)}
    second = checkout(tmp_path / "deeper" / "two")
    r = farmer(second, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(statuses(second).values()) == {("cached", "local")}
    # the object restored is the one this checkout would compile: it names the relative path
    out = subprocess.run([str(second / "demo")], capture_output=True, text=True, check=True).stdout
    assert out == "42 ../src/main.c\n"
    without = checkout(tmp_path / "three")
    r = farmer(without, env={k: v for k, v in env.items() if k != "FARMER_BASE_DIR"})
    assert r.returncode == 0 and set(statuses(without).values()) == {("ran", None)}  # absolute: its own keys


def test_debug_objects_are_shared_only_at_one_path(tmp_path):
    env = {"FARMER_BASE_DIR": "auto", "FARMER_CACHE": "1", "FARMER_CACHE_DIR": str(tmp_path / "cache")}
    first = checkout(tmp_path / "one", "Debug")
    assert farmer(first, env=env).returncode == 0
    second = checkout(tmp_path / "two", "Debug")
    r = farmer(second, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(statuses(second).values()) == {("ran", None)}  # -g: the objects name their directory


def test_debug_objects_with_the_build_directory_mapped_away_are_shared(tmp_path):
    env = {"FARMER_BASE_DIR": "auto", "FARMER_CACHE": "1", "FARMER_CACHE_DIR": str(tmp_path / "cache")}

    def mapped(top: Path) -> Path:  # each checkout maps its own build directory
        return checkout(top, "Debug", f"-DCMAKE_C_FLAGS=-ffile-prefix-map={top / 'build'}=.")

    first = mapped(tmp_path / "one")
    assert farmer(first, env=env).returncode == 0
    second = mapped(tmp_path / "two")
    r = farmer(second, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(statuses(second).values()) == {("cached", "local")}
    for obj in COMPILES:  # the objects restored name neither checkout's directory
        data = (second / obj).read_bytes()
        assert str(tmp_path).encode() not in data, obj


def test_the_no_op_holds_only_for_the_setting_it_was_taken_with(tmp_path):
    build = checkout(tmp_path / "proj")
    assert farmer(build, "--base-dir", str(tmp_path / "proj")).returncode == 0
    r = farmer(build, "--base-dir", str(tmp_path / "proj"))
    assert r.returncode == 0 and "ran 0" in r.stdout, r.stdout
    r = farmer(build, "--explain")  # the absolute commands again: everything compiles again
    assert r.returncode == 0 and set(statuses(build).values()) == {("ran", None)}, r.stdout
    assert "part.c.o: inputs changed" in r.stdout  # their sources have their absolute names again
    r = farmer(build, env={"FARMER_BASE_DIR": "auto"})
    assert r.returncode == 0 and set(statuses(build).values()) == {("ran", None)}
    assert "ran 0" in farmer(build, env={"FARMER_BASE_DIR": "auto"}).stdout


@pytest.mark.parametrize("setting, message", [
    ("relative/dir", "not an absolute path"),
    ("/", "cannot be /"),
    ("/nonexistent-farmer-base", "no such directory"),
    ("{elsewhere}", "is not under it"),
])
def test_a_setting_that_cannot_be_used_is_a_usage_error(tmp_path, setting, message):
    build = checkout(tmp_path / "proj")
    (tmp_path / "elsewhere").mkdir()
    r = farmer(build, "--base-dir", setting.format(elsewhere=tmp_path / "elsewhere"))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = farmer(build, env={"FARMER_BASE_DIR": setting.format(elsewhere=tmp_path / "elsewhere")})
    assert r.returncode == 2 and "FARMER_BASE_DIR" in r.stderr and message in r.stderr, r.stderr
