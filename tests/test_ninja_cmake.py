"""A real CMake project configured with `cmake -G Ninja`, built by ninja and by farmer.

Each tool builds its own build tree, configured at the same path (compilers write the
build directory into debug info, so the same path is what makes outputs comparable byte for
byte): the tree not in use waits under another name, and `mv` keeps its time stamps, so
ninja's own logs stay valid. Checked:

* a full farmer build gives byte-identical outputs to a full ninja build;
* a second farmer build runs nothing;
* after a header edit farmer compiles exactly the objects ninja compiles (`ninja -n`
  lists them; ninja then builds them), and the outputs are again byte-identical.

The small project below runs in the default suite; ninja's own source (the stretch goal,
from the PyPI sdist, `pip download --no-binary :all: ninja`) runs with `-m slow` when its
sdist is found (FARMER_NINJA_SDIST=/path/ninja-X.tar.gz, or ~/.cache/farmer-tests/), and
prints the timings docs/performance.md quotes.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import Result, run_farmer
from helpers import write_files

TOOLS = {"cmake": shutil.which("cmake"), "ninja": shutil.which("ninja"),
         "cc": shutil.which("cc"), "c++": shutil.which("c++")}
pytestmark = pytest.mark.skipif(
    not all(TOOLS.values()),
    reason="needs cmake, ninja and a C/C++ compiler: missing "
           + ", ".join(k for k, v in TOOLS.items() if not v))

NOOP_RUNS = 5
STARTED = re.compile(r"^\[\d+/\d+\] (.*)$")


def measured(call, what: str) -> tuple[subprocess.CompletedProcess | Result, float, float]:
    """`call()`'s result, its wall time and the CPU seconds (user + sys) of the processes it
    waited for; it must have succeeded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    result = call()
    elapsed = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert result.returncode == 0, f"{what} failed:\n{result.stdout}\n{result.stderr}"
    return result, elapsed, cpu


def run(cmd: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float, float]:
    return measured(lambda: subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL),
                    f"{' '.join(cmd)} in {cwd}")


def farmer(build: Path, *args: str) -> tuple[Result, float, float]:
    return measured(lambda: run_farmer(build, *args, "-f", "build.ninja", timeout=None), f"farmer {' '.join(args)} in {build}")


def configure(src: Path, build: Path, *extra: str) -> None:
    build.mkdir()
    run(["cmake", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo", *extra, str(src)], build)


def outputs_of(build: Path) -> list[str]:
    """Every output of every computation of the default target, as farmer's graph lists them."""
    cp, _, _ = farmer(build, "graph", "--format", "json")
    return sorted({o for c in json.loads(cp.stdout)["computations"] for o in c["outputs"]})


def digests(build: Path, outputs: list[str]) -> dict[str, str]:
    found = {}
    for rel in outputs:
        path = build / rel
        if path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def started(stdout: str) -> set[str]:
    """The descriptions of the `[n/N] ...` lines: what ran (ninja and farmer print alike)."""
    return {m.group(1) for line in stdout.splitlines() if (m := STARTED.match(line))}


def compiled(stdout: str) -> set[str]:
    return {d for d in started(stdout) if d.startswith("Building ")}


class Trees:
    """Two build trees taking turns at one path."""

    def __init__(self, top: Path) -> None:
        self.path = top / "build"
        self.parked = {"ninja": top / "build.ninja-tree", "farmer": top / "build.farmer-tree"}

    def use(self, who: str) -> Path:
        self.parked[who].rename(self.path)
        return self.path

    def park(self, who: str) -> None:
        self.path.rename(self.parked[who])


def compare(src: Path, top: Path, header: Path, extra: tuple[str, ...] = ()) -> dict[str, float]:
    """The whole comparison; returns the timings (seconds)."""
    trees = Trees(top)
    times: dict[str, float] = {}

    configure(src, trees.path, *extra)
    _, times["ninja full"], times["ninja full cpu"] = run(["ninja"], trees.path)
    noops = [run(["ninja"], trees.path) for _ in range(NOOP_RUNS)]
    times["ninja no-op"] = statistics.median(t for _, t, _ in noops)
    times["ninja no-op cpu"] = statistics.median(c for _, _, c in noops)
    ninja_again = started(noops[0][0].stdout)  # custom targets run every time
    assert not compiled(noops[0][0].stdout)
    outputs = outputs_of(trees.path)
    by_ninja = digests(trees.path, outputs)
    trees.park("ninja")

    configure(src, trees.path, *extra)
    cp, times["farmer full"], times["farmer full cpu"] = farmer(trees.path, "build")
    assert "Re-running CMake" not in cp.stdout  # the fresh build.ninja is taken as built
    assert digests(trees.path, outputs) == by_ninja
    assert len(by_ninja) >= 3
    noops = [farmer(trees.path, "build") for _ in range(NOOP_RUNS)]
    times["farmer no-op"] = statistics.median(t for _, t, _ in noops)
    times["farmer no-op cpu"] = statistics.median(c for _, _, c in noops)
    for cp, _, _ in noops:
        # What ran again is ninja's (a custom target without DESC: ninja shows its command).
        assert len(started(cp.stdout)) == len(ninja_again) and not compiled(cp.stdout), cp.stdout
    trees.park("farmer")

    header.write_text(header.read_text() + "\n#define FARMER_TEST_EDIT 1\n")
    trees.use("ninja")
    cp, _, _ = run(["ninja", "-n"], trees.path)
    ninja_compiles = compiled(cp.stdout)
    assert ninja_compiles, "the header edit should make ninja compile something"
    cp, times["ninja header edit"], times["ninja header edit cpu"] = run(["ninja"], trees.path)
    assert compiled(cp.stdout) == ninja_compiles
    by_ninja = digests(trees.path, outputs)
    trees.park("ninja")

    trees.use("farmer")
    cp, times["farmer header edit"], times["farmer header edit cpu"] = farmer(trees.path, "build")
    assert compiled(cp.stdout) == ninja_compiles, cp.stdout
    assert digests(trees.path, outputs) == by_ninja
    cp, _, _ = farmer(trees.path, "build")
    # What ran again is ninja's (a custom target without DESC: ninja shows its command).
    assert len(started(cp.stdout)) == len(ninja_again) and not compiled(cp.stdout), cp.stdout
    return times


def rounds(src: Path, top: Path, header: str, extra: tuple[str, ...] = ()) -> None:
    """`compare` FARMER_NINJA_ROUNDS times (default 1), each on a fresh copy of the source,
    and print the median timings with the load average."""
    runs = []
    for r in range(int(os.environ.get("FARMER_NINJA_ROUNDS", "1"))):
        copy = top / f"round{r}" / "src"
        shutil.copytree(src, copy)
        runs.append(compare(copy, copy.parent, copy / header, extra))
    times = {k: statistics.median(t[k] for t in runs) for k in runs[0]}
    print(f"\n{src.name}: median of {len(runs)} round(s), seconds; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  {'':12} {'ninja wall':>11} {'farmer wall':>12} {'ninja cpu':>10} {'farmer cpu':>11}")
    for what in ("full", "no-op", "header edit"):
        print(f"  {what:12} {times['ninja ' + what]:11.3f} {times['farmer ' + what]:12.3f} "
              f"{times['ninja ' + what + ' cpu']:10.3f} {times['farmer ' + what + ' cpu']:11.3f}")


def write_project(src: Path) -> None:
    """A small C/C++ project: a static library, a generated header, two programs and a
    custom target; include/units.h is the header to edit."""
    files = {
        "CMakeLists.txt": """\
            cmake_minimum_required(VERSION 3.16)
            project(demo C CXX)
            add_library(shapes STATIC lib/area.c lib/names.cc lib/scale.c)
            target_include_directories(shapes PUBLIC include)
            add_custom_command(OUTPUT version.h
              COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_SOURCE_DIR}/version.h.in version.h
              DEPENDS version.h.in)
            add_executable(demo main.cc ${CMAKE_CURRENT_BINARY_DIR}/version.h)
            target_include_directories(demo PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
            target_link_libraries(demo shapes)
            add_executable(tool tool.c)
            target_link_libraries(tool shapes)
            add_custom_target(check ALL COMMAND tool > tool.out BYPRODUCTS tool.out DEPENDS tool)
            """,
        "include/shapes.h": """\
            #ifndef SHAPES_H
            #define SHAPES_H
            #ifdef __cplusplus
            extern "C" {
            #endif
            double area(double w, double h);
            double scale(double x);
            const char *shape_name(int sides);
            #ifdef __cplusplus
            }
            #endif
            #endif
            """,
        "include/units.h": "#define UNIT 1.0\n",
        "lib/area.c": '#include "shapes.h"\n#include "units.h"\ndouble area(double w, double h) { return w * h * UNIT; }\n',
        "lib/scale.c": '#include "shapes.h"\ndouble scale(double x) { return 2 * x; }\n',
        "lib/names.cc": textwrap.dedent("""\
            #include <string>
            #include "shapes.h"
            static const std::string names[] = {"none", "one", "two", "triangle", "square"};
            extern "C" const char *shape_name(int sides) { return names[sides % 5].c_str(); }
            """),
        "main.cc": textwrap.dedent("""\
            #include <cstdio>
            #include "shapes.h"
            #include "version.h"
            int main() { std::printf("%s %s %g\\n", VERSION, shape_name(4), area(2, scale(3))); }
            """),
        "tool.c": '#include <stdio.h>\n#include "shapes.h"\n#include "units.h"\nint main(void) { printf("%g\\n", area(UNIT, 2)); return 0; }\n',
        "version.h.in": '#define VERSION "1.0"\n',
    }
    write_files(src, {rel: textwrap.dedent(text) for rel, text in files.items()})


def test_cmake_project_builds_like_ninja(tmp_path):
    src = tmp_path / "demo"
    write_project(src)
    rounds(src, tmp_path, "include/units.h")


def _ninja_sdist() -> Path | None:
    candidates = [os.environ.get("FARMER_NINJA_SDIST", "")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.cache/farmer-tests/ninja-*.tar.gz")))
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


@pytest.mark.slow
def test_ninja_source_builds_like_ninja(tmp_path):
    sdist = _ninja_sdist()
    if sdist is None:
        pytest.skip("ninja's sdist not found: `pip download --no-binary :all: --no-deps ninja` "
                    "(or fetch ninja-X.tar.gz from PyPI) and set FARMER_NINJA_SDIST to it")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "sdist", filter="data")
    upstream = next((tmp_path / "sdist").glob("*/ninja-upstream"))
    src = tmp_path / sdist.name.removesuffix(".tar.gz")
    shutil.copytree(upstream, src)
    rounds(src, tmp_path, "src/graph.h", ("-DBUILD_TESTING=OFF",))
