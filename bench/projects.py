"""Real build.ninja projects for bench/run.py: CMake projects from PyPI sdists and Meson's own
test projects, configured here (`cmake -G Ninja`, `meson setup`) and built by ninja and by
`farmer build -f build.ninja`, each tool in its own build directory.

Only the package registry is used: `pip download --no-binary :all:` of sdists that carry a
CMake project (ninja's own source, libuv inside uvloop's, zlib-ng inside zlib-ng's) and of
meson, whose sdist holds its "test cases". Sdists and configured trees are kept under
WORK/projects/ between runs (configuring 55 Meson projects takes minutes); `--fresh-projects`
starts them again.

Scenarios:
  real-noop     a no-op of each fully built project, ninja and farmer interleaved
  real-edits    each CMake project: a clean build, a no-op and a header comment, ninja and
                farmer taking turns; then farmer's output cache after `farmer clean`
  meson-series  N small Meson test projects built from clean one after another (the total)
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

# (name, pip requirement, the CMake project's directory inside the sdist, cmake options).
# The options keep every project off the network (no googletest download) and off tests.
CMAKE_PROJECTS = [
    ("ninja", "ninja==1.13.2", "ninja-1.13.2/ninja-upstream", ["-DBUILD_TESTING=OFF"]),
    ("libuv", "uvloop==0.23.0", "uvloop-0.23.0/vendor/libuv",
     ["-DBUILD_TESTING=OFF", "-DLIBUV_BUILD_TESTS=OFF"]),
    ("zlib-ng", "zlib-ng==1.1.0", "zlib_ng-1.1.0/src/zlib_ng/zlib-ng",
     ["-DBUILD_TESTING=OFF", "-DZLIB_ENABLE_TESTS=OFF", "-DWITH_GTEST=OFF",
      "-DWITH_BENCHMARKS=OFF"]),
]
# A header many of each project's sources include, for the header edit of `real_edits`.
HEADERS = {"ninja": "src/graph.h", "libuv": "src/uv-common.h", "zlib-ng": "zbuild.h"}
MESON = "meson==1.12.1"
TOOLS = ("ninja", "farmer")


class Project:
    """A configured project: one build directory per tool, built from the same sources."""

    __slots__ = ("name", "kind", "dirs")

    def __init__(self, name: str, kind: str, dirs: dict[str, Path]) -> None:
        self.name, self.kind, self.dirs = name, kind, dirs

    def edges(self) -> int:
        text = (self.dirs["ninja"] / "build.ninja").read_text(errors="replace")
        return sum(1 for line in text.splitlines()
                   if line.startswith("build ") and ": phony" not in line)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sdist(requirement: str, dest: Path) -> Path:
    """The sdist of `requirement` (downloaded once), unpacked under dest/src/."""
    archives = dest / "sdists"
    name = requirement.split("==")[0].replace("-", "_").lower()
    found = [p for p in archives.glob("*.tar.gz") if p.name.lower().startswith(name + "-")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", "--disable-pip-version-check", "-d",
                        str(archives), requirement], check=True)
        found = [p for p in archives.glob("*.tar.gz") if p.name.lower().startswith(name + "-")]
    src = dest / "src"
    unpacked = src / found[0].name[:-len(".tar.gz")]
    if not unpacked.exists():
        src.mkdir(parents=True, exist_ok=True)
        with tarfile.open(found[0]) as tf:
            tf.extractall(src, filter="data")
    return src


def meson_command(work: Path) -> list[str]:
    """meson from PyPI, in its own virtual environment under work/projects/."""
    venv = work / "projects" / "meson-venv"
    exe = venv / "bin" / "meson"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", MESON], check=True)
    return [str(exe)]


def cmake_projects(work: Path, fresh: bool, only: list[str] | None = None) -> list[Project]:
    """The CMake projects (`only`: those of these names), configured once per tool."""
    base = work / "projects"
    out = []
    for name, req, subdir, options in CMAKE_PROJECTS:
        if only and name not in only:
            continue
        source = sdist(req, base) / subdir
        dirs = {tool: base / "cmake" / name / tool for tool in TOOLS}
        for tool, d in dirs.items():
            if fresh and d.exists():
                shutil.rmtree(d)
            if not (d / "build.ninja").exists():
                log(f"[projects] cmake -G Ninja {name} ({tool})")
                subprocess.run(["cmake", "-S", str(source), "-B", str(d), "-G", "Ninja",
                                "-DCMAKE_BUILD_TYPE=RelWithDebInfo", *options],
                               check=True, stdout=subprocess.DEVNULL)
        out.append(Project(name, "cmake", dirs))
    return out


def _case_number(path: Path) -> int:
    m = re.match(r"(\d+)", path.name)
    return int(m.group(1)) if m else 1 << 30


def meson_projects(work: Path, count: int, fresh: bool) -> list[Project]:
    """The first `count` of Meson's "test cases/common" (in their numbered order) that
    configure here and build with ninja; the ones that do not (a missing compiler or
    dependency) are skipped, and remembered as skipped."""
    base = work / "projects" / "meson"
    if fresh and base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True, exist_ok=True)
    src = sdist(MESON, work / "projects") / "meson-1.12.1" / "test cases" / "common"
    meson = meson_command(work)
    skipped_file = base / "skipped.txt"
    skipped = set(skipped_file.read_text().splitlines()) if skipped_file.exists() else set()
    out = []
    for case in sorted((p for p in src.iterdir() if (p / "meson.build").exists()),
                       key=_case_number):
        if len(out) == count:
            break
        if case.name in skipped:
            continue
        slug = re.sub(r"[^A-Za-z0-9]+", "-", case.name)
        dirs = {tool: base / slug / tool for tool in TOOLS}
        ok = True
        for tool, d in dirs.items():
            if (d / ".bench-ok").exists():
                continue
            if d.exists():
                shutil.rmtree(d)
            log(f"[projects] meson setup {case.name!r} ({tool})")
            cp = subprocess.run(meson + ["setup", str(d), str(case)], capture_output=True,
                                text=True, timeout=300)
            ok = cp.returncode == 0 and Project(slug, "meson", {"ninja": d}).edges() > 0
            if ok and tool == "ninja":  # it must build here
                cp = subprocess.run(["ninja", "-C", str(d)], capture_output=True, timeout=600)
                clean(d)
                ok = cp.returncode == 0
            if not ok:
                break
            (d / ".bench-ok").touch()
        if not ok:
            skipped.add(case.name)
            skipped_file.write_text("\n".join(sorted(skipped)) + "\n")
            for d in dirs.values():
                shutil.rmtree(d, ignore_errors=True)
            continue
        out.append(Project(slug, "meson", dirs))
    log(f"[projects] {len(out)} Meson test projects ({len(skipped)} skipped: they do not "
        "configure or build here)")
    return out


def clean(d: Path) -> None:
    """Back to just configured: no outputs (generator outputs, such as build.ninja, kept),
    no state of either tool."""
    subprocess.run(["ninja", "-C", str(d), "-t", "clean"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for name in (".ninja_log", ".ninja_deps"):
        try:
            os.unlink(d / name)
        except FileNotFoundError:
            pass
    shutil.rmtree(d / ".farmer", ignore_errors=True)


# --------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------


def tool_argv(tool: str, d: Path, farmer_argv: list[str], jobs: int) -> list[str]:
    if tool == "ninja":
        return ["ninja", "-C", str(d), "-j", str(jobs)]
    return farmer_argv + ["build", "-C", str(d), "-f", "build.ninja", "-j", str(jobs)]


def real_noop(projects: list[Project], repeat: int, jobs: int, farmer_argv: list[str],
              farmer_env: dict, run_timed, timeout: float) -> list[dict]:
    """Build every project completely with each tool (timed once: a full build on a fresh
    tree, else whatever is left to do), then
    `repeat` rounds of a no-op of each, ninja and farmer taking turns first. Every no-op
    must leave the outputs as they were (their mtimes)."""
    rows = []
    for p in projects:
        full = {}
        for tool in TOOLS:
            d = p.dirs[tool]
            env = farmer_env if tool == "farmer" else None
            full[tool] = run_timed(tool_argv(tool, d, farmer_argv, jobs), env, timeout, cwd=d)
            if full[tool].rc != 0:
                raise SystemExit(f"{tool} failed to build {d} (rc {full[tool].rc})")
            run_timed(tool_argv(tool, d, farmer_argv, jobs), env, timeout, cwd=d)  # settle
        before = {tool: outputs_mtimes(p.dirs[tool]) for tool in TOOLS}
        runs: dict[str, list] = {tool: [] for tool in (*TOOLS, "python")}
        # farmer's interpreter starting and doing nothing, in the same rounds: what of
        # farmer's no-op is Python's own start-up (and, on a loaded machine, waiting for it)
        bare = [str(Path(farmer_argv[0]).with_name("python")), "-c", "pass"]
        for i in range(repeat):
            for tool in (*TOOLS, "python") if i % 2 == 0 else ("python", *TOOLS[::-1]):
                d = p.dirs.get(tool, p.dirs["farmer"])
                argv = bare if tool == "python" else tool_argv(tool, d, farmer_argv, jobs)
                r = run_timed(argv, None if tool == "ninja" else farmer_env, timeout, cwd=d)
                if r.rc != 0:
                    raise SystemExit(f"{tool} no-op failed in {d} (rc {r.rc})")
                runs[tool].append(r)
        for tool in TOOLS:
            if outputs_mtimes(p.dirs[tool]) != before[tool]:
                raise SystemExit(f"{tool}: the no-op of {p.name} rewrote outputs")
        rows.append({"project": f"{p.kind} {p.name}", "edges": p.edges(), "full": full,
                     "noop": runs})
    return rows


def outputs_mtimes(d: Path) -> dict[str, int]:
    """mtime of every file in the build directory but the tools' own state and logs."""
    res = {}
    for dirpath, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if x not in (".farmer", "CMakeFiles", "meson-logs",
                                                 "meson-private", "meson-info")]
        for f in files:
            if not f.startswith(".ninja_"):
                path = os.path.join(dirpath, f)
                res[path] = os.lstat(path).st_mtime_ns
    return res


def nothing_to_build(d: Path) -> bool:
    """Whether a clean build of `d` runs no command (ninja -n: "no work to do"): many of
    Meson's test projects only configure, and such a build is the tool's start-up alone."""
    clean(d)  # (each timed build cleans again first)
    out = subprocess.run(["ninja", "-C", str(d), "-n"], capture_output=True, text=True).stdout
    return "no work to do" in out


def meson_series(projects: list[Project], repeat: int, jobs: int, farmer_argv: list[str],
                 farmer_env: dict, run_timed, timeout: float) -> dict:
    """`repeat` rounds of building every project from clean, one after another; per round
    and tool the sum of the build times (cleaning is not timed). Tools alternate first.
    Also each project's median wall time by tool (`per_project`) and the projects whose
    clean build runs nothing (`empty`)."""
    totals: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    cpu: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    walls: dict[str, dict[str, list[float]]] = {p.name: {tool: [] for tool in TOOLS} for p in projects}
    for i in range(repeat):
        wall = dict.fromkeys(TOOLS, 0.0)
        used = dict.fromkeys(TOOLS, 0.0)
        for p in projects:
            for tool in (TOOLS if i % 2 == 0 else TOOLS[::-1]):
                d = p.dirs[tool]
                clean(d)
                r = run_timed(tool_argv(tool, d, farmer_argv, jobs),
                              farmer_env if tool == "farmer" else None, timeout, cwd=d)
                if r.rc != 0:
                    raise SystemExit(f"{tool} failed to build {d} (rc {r.rc})")
                wall[tool] += r.wall
                used[tool] += r.cpu
                walls[p.name][tool].append(r.wall)
        for tool in TOOLS:
            totals[tool].append(wall[tool])
            cpu[tool].append(used[tool])
    per_project = {name: {tool: statistics.median(v) for tool, v in by.items()}
                   for name, by in walls.items()}
    empty = [p.name for p in projects if nothing_to_build(p.dirs["ninja"])]
    return {"wall": totals, "cpu": cpu, "per_project": per_project, "empty": empty}


def _source_dir(d: Path) -> Path:
    """The source directory a CMake build directory was configured from."""
    for line in (d / "CMakeCache.txt").read_text(errors="replace").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.split("=", 1)[1])
    raise SystemExit(f"{d}: no CMAKE_HOME_DIRECTORY in CMakeCache.txt")


def real_edits(projects: list[Project], repeat: int, jobs: int, farmer_argv: list[str],
               farmer_env: dict, run_timed, timeout: float, cache_dir: Path) -> list[dict]:
    """For each CMake project, `repeat` rounds in which ninja and farmer take turns first
    (each in its own build directory, from the same sources): a clean build, a no-op, and a
    comment appended to a header many sources include (HEADERS; taken back after the
    round). Then farmer's local output cache (in `cache_dir`, emptied first): a clean build
    that stores every output, `farmer clean`, and the build that restores them (timed;
    ninja has no such cache: its clean build is the comparison)."""
    rows = []
    for p in projects:
        header = _source_dir(p.dirs["ninja"]) / HEADERS[p.name]
        original = header.read_bytes()
        steps: dict[str, dict[str, list]] = {s: {t: [] for t in TOOLS} for s in ("clean", "noop", "header")}

        def timed(step: str, tool: str) -> None:
            d = p.dirs[tool]
            r = run_timed(tool_argv(tool, d, farmer_argv, jobs), farmer_env if tool == "farmer" else None,
                          timeout, cwd=d)
            if r.rc != 0:
                raise SystemExit(f"{tool}: {step} of {p.name} failed (rc {r.rc})")
            steps[step][tool].append(r)

        try:
            for i in range(repeat):
                order = TOOLS if i % 2 == 0 else TOOLS[::-1]
                for tool in order:
                    clean(p.dirs[tool])
                    timed("clean", tool)
                for tool in order:
                    timed("noop", tool)
                header.write_bytes(original + b"\n/* bench: a comment */\n")
                for tool in order:
                    timed("header", tool)
                header.write_bytes(original)
        finally:
            header.write_bytes(original)
        d = p.dirs["farmer"]
        shutil.rmtree(cache_dir, ignore_errors=True)
        cached_argv = tool_argv("farmer", d, farmer_argv, jobs) + ["--cache", "--cache-dir", str(cache_dir)]
        clean(d)
        store = run_timed(cached_argv, farmer_env, timeout, cwd=d)
        subprocess.run(farmer_argv + ["clean", "-C", str(d), "-f", "build.ninja"], env=farmer_env,
                       stdout=subprocess.DEVNULL, check=True)
        restore = run_timed(cached_argv, farmer_env, timeout, cwd=d)
        summary = subprocess.run(cached_argv, env=farmer_env, cwd=d, capture_output=True, text=True).stdout
        if store.rc or restore.rc:
            raise SystemExit(f"farmer: the cache builds of {p.name} failed")
        shutil.rmtree(cache_dir, ignore_errors=True)
        rows.append({"project": p.name, "edges": p.edges(), "header": HEADERS[p.name], "steps": steps,
                     "store": store, "restore": restore, "after_restore": summary.strip().splitlines()[-1:]})
    return rows
