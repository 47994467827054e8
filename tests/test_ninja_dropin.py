"""farmer-ninja as CMake's CMAKE_MAKE_PROGRAM and Meson's NINJA: a tiny C project configured
(CMake's try_compile checks and Meson's compiler checks built by farmer), built, tested
(ctest, meson test), built again (`ninja: no work to do.`), cleaned -- every call the
generators make goes to farmer, and each is answered."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import REPO
from test_ninja_cli import needs


def logged_script(where: Path) -> tuple[Path, Path]:
    """farmer-ninja running this checkout, with each call's arguments logged."""
    import sys

    log = where / "calls.log"
    script = where / "farmer-ninja"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\nPYTHONPATH={REPO} exec {sys.executable} -m farmer ninja "$@"\n')
    script.chmod(0o755)
    return script, log


def _run(args: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"{args} failed:\n{r.stdout}\n{r.stderr}"
    return r


def test_cmake_configures_builds_and_tests_through_farmer(tmp_path):
    cmake = needs("cmake")
    needs("ctest")
    needs("cc")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.13)
        project(p C)
        include(CheckCSourceCompiles)
        check_c_source_compiles("int main(void) { return 0; }" HAVE_WORKING_CC)
        if(NOT HAVE_WORKING_CC)
          message(FATAL_ERROR "try_compile failed")
        endif()
        enable_testing()
        add_executable(app main.c)
        add_test(NAME app COMMAND app)
        """))
    (src / "main.c").write_text("int main(void) { return 0; }\n")
    script, log = logged_script(tmp_path)
    build = tmp_path / "build"
    _run([cmake, "-S", src, "-B", build, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={script}"], tmp_path)
    calls = log.read_text().splitlines()
    assert "--version" in calls and any(c.endswith("-t restat build.ninja") for c in calls)
    assert any(c.startswith("cmTC_") for c in calls), calls  # try_compile built by farmer
    first = _run([cmake, "--build", build], tmp_path)
    assert "Linking C executable app" in first.stdout and (build / "app").exists()
    assert (build / ".farmer").is_dir()
    assert _run([cmake, "--build", build], tmp_path).stdout.strip() == "ninja: no work to do."
    assert "100% tests passed" in _run(["ctest"], build).stdout
    _run([cmake, "--build", build, "--target", "clean"], tmp_path)
    assert not (build / "app").exists() and (build / "build.ninja").exists()
    (src / "main.c").write_text("int main(void) { return 1; }\n")
    _run([cmake, "--build", build, "-v"], tmp_path)
    tested = subprocess.run(["ctest"], cwd=build, capture_output=True, text=True, check=False)
    assert tested.returncode != 0 and "0% tests passed" in tested.stdout  # the edit was built
    (src / "main.c").write_text("int main(void) { return 0; }\n")
    log.write_text("")
    both = _run(["ctest", "--build-and-test", src, tmp_path / "bt", "--build-generator", "Ninja",
                 "--build-makeprogram", script, "--test-command", "ctest"], tmp_path)
    assert "100% tests passed" in both.stdout
    assert (tmp_path / "bt" / ".farmer").is_dir() and (tmp_path / "bt" / "app").exists()  # built by farmer


def test_meson_sets_up_compiles_and_tests_through_farmer(tmp_path):
    meson = needs("meson")
    needs("cc")
    src = tmp_path / "src"
    src.mkdir()
    (src / "meson.build").write_text(textwrap.dedent("""\
        project('p', 'c')
        assert(meson.get_compiler('c').has_header('stdio.h'))
        gen = custom_target('gen', output: 'gen.h', command: ['sh', '-c', 'echo "#define X 0" > @OUTPUT@'])
        app = executable('app', 'main.c', gen)
        test('app', app)
        """))
    (src / "main.c").write_text('#include "gen.h"\nint main(void) { return X; }\n')
    script, log = logged_script(tmp_path)
    env = {"NINJA": str(script)}
    _run([meson, "setup", "b", "src"], tmp_path, env)
    assert any(c.startswith("-t compdb -x") for c in log.read_text().splitlines())
    assert '"file": "../src/main.c"' in (tmp_path / "b" / "compile_commands.json").read_text()
    _run([meson, "compile", "-C", "b"], tmp_path, env)
    assert (tmp_path / "b" / ".farmer").is_dir()
    assert "Ok:                 1" in _run([meson, "test", "-C", "b"], tmp_path, env).stdout
    assert "ninja: no work to do." in _run([meson, "compile", "-C", "b"], tmp_path, env).stdout


@pytest.fixture(autouse=True)
def _no_user_cache(tmp_path, monkeypatch):
    """The builds' farmer never writes into the user's cache directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
