"""`farmer serve` against farmer on its own and ninja, in one run, taking turns.

  pipeline  A data pipeline whose world takes --setup-s seconds to set up (it sleeps, as an
            import of a large library or a dataset's load would take), with --tasks analysis
            scripts forked from it. One script is edited, then `farmer build` runs until it
            exits (the output written): through a server that keeps the world warm, and
            without one (the set-up paid again).
  cmake     A no-op of a real CMake project's build.ninja (ninja's own source, configured by
            bench/projects.py from its PyPI sdist): ninja, and `farmer build -f build.ninja`
            through a server.

The 10 000-step no-op through a server is bench/run.py's `--tools farmer,farmer-serve,ninja
--only noop`. farmer is measured as bench/run.py measures it: its commit exported, run with a
bytecode cache (`--no-venv`: `python -m farmer` with PYTHONPATH; else a venv install).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import run as harness  # noqa: E402 - bench/run.py: timing, farmer's export

SCRIPT = """import sys
EDIT = 0
with open(sys.argv[2], "w") as f:
    f.write(f"analysis {sys.argv[1]} edit {EDIT}\\n")
"""


def pipeline_project(work: Path, setup_s: float, tasks: int) -> Path:
    d = work / "pipeline"
    if d.exists():
        import shutil

        shutil.rmtree(d)
    (d / "analyses").mkdir(parents=True)
    for i in range(tasks):
        (d / "analyses" / f"a{i}.py").write_text(SCRIPT)
    ids = ", ".join(f'"{i}"' for i in range(tasks))
    (d / "Farmfile").write_text(
        f'[world.w]\nsetup = ["import time", "time.sleep({setup_s})"]\n\n'
        f'[task.analyze]\nforeach = {{i = [{ids}]}}\nworld = "w"\n'
        f'inputs = ["analyses/a{{i}}.py"]\noutputs = ["out/{{i}}.txt"]\n'
        f'python = "analyses/a{{i}}.py {{i}} {{outputs}}"\n')
    return d


def bench_pipeline(args, farmer_argv: list[str], env: dict) -> list[str]:
    served = pipeline_project(args.work / "served", args.setup_s, args.tasks)
    alone = pipeline_project(args.work / "alone", args.setup_s, args.tasks)
    serve = farmer_argv + ["serve", "-C", str(served), "--idle", "1h"]
    subprocess.run(serve, env=env, cwd=served, check=True, capture_output=True)
    times: dict[str, list[float]] = {"served": [], "alone": []}
    try:
        for d in (served, alone):  # a first build of everything
            r = harness.run_timed(farmer_argv + ["build", "-C", str(d), "-j", "2"], env, args.timeout, cwd=d)
            assert r.rc == 0, f"first build failed in {d}"
        for k in range(1, args.repeat + 1):
            for name, d in (("served", served), ("alone", alone)) if k % 2 else (("alone", alone), ("served", served)):
                i = k % args.tasks
                (d / "analyses" / f"a{i}.py").write_text(SCRIPT.replace("EDIT = 0", f"EDIT = {k}"))
                r = harness.run_timed(farmer_argv + ["build", "-C", str(d), "-j", "2"], env, args.timeout, cwd=d)
                text = (d / "out" / f"{i}.txt").read_text()
                assert r.rc == 0 and f"edit {k}\n" in text, (name, r.rc, text)
                times[name].append(r.wall)
    finally:
        subprocess.run(farmer_argv + ["serve", "-C", str(served), "--stop"], env=env, cwd=served,
                       capture_output=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return [f"### A pipeline whose world takes {args.setup_s:g} s to set up: a script edited, then `farmer build`", "",
            "| | median ms | runs ms |", "|---|---:|---|",
            *(f"| {'through farmer serve' if k == 'served' else 'farmer alone'} | {med[k] * 1000:.0f} | "
              f"{', '.join(f'{x * 1000:.0f}' for x in v)} |" for k, v in times.items()), ""]


def bench_cmake(args, farmer_argv: list[str], env: dict) -> list[str]:
    import projects

    projects.CMAKE_PROJECTS = [p for p in projects.CMAKE_PROJECTS if p[0] == "ninja"]  # only ninja's fetched
    project = projects.cmake_projects(args.work, False)[0]
    ninja_dir, farmer_dir = project.dirs["ninja"], project.dirs["farmer"]
    build = {"ninja": ["ninja", "-C", str(ninja_dir)],
             "farmer": farmer_argv + ["build", "-C", str(farmer_dir), "-f", "build.ninja"]}
    for name, argv in build.items():  # built fully, untimed
        r = harness.run_timed(argv, env, args.timeout, cwd=ninja_dir if name == "ninja" else farmer_dir)
        assert r.rc == 0, f"{name} build of {project.name} failed"
    times: dict[str, list[float]] = {"ninja": [], "farmer": [], "farmer serve": []}

    def rounds(names: tuple[str, ...]) -> None:
        for k in range(args.repeat):
            for name in names if k % 2 == 0 else names[::-1]:
                argv = build["ninja" if name == "ninja" else "farmer"]
                r = harness.run_timed(argv, env, args.timeout, cwd=ninja_dir if name == "ninja" else farmer_dir)
                assert r.rc == 0, name
                times[name].append(r.wall)

    rounds(("ninja", "farmer"))
    subprocess.run(farmer_argv + ["serve", "-C", str(farmer_dir), "-f", "build.ninja", "--idle", "1h"],
                   env=env, cwd=farmer_dir, check=True, capture_output=True)
    try:
        harness.run_timed(build["farmer"], env, args.timeout, cwd=farmer_dir)  # the server's first: reads the graph
        rounds(("ninja", "farmer serve"))
    finally:
        subprocess.run(farmer_argv + ["serve", "-C", str(farmer_dir), "-f", "build.ninja", "--stop"], env=env,
                       cwd=farmer_dir, capture_output=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ninja_med = statistics.median(times["ninja"])
    return [f"### No-op of {project.name}'s own source (CMake, build.ninja)", "",
            "| tool | median ms | / ninja |", "|---|---:|---:|",
            *(f"| {k} | {med[k] * 1000:.1f} | {med[k] / ninja_med:.2f}× |" for k in times), ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="pipeline,cmake")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--setup-s", type=float, default=2.0)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--work", type=Path, default=BENCH_DIR / "work")
    ap.add_argument("--farmer-rev", default="HEAD")
    ap.add_argument("--no-venv", action="store_true")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args(argv)
    args.work = args.work.resolve()
    (args.work / "serve").mkdir(parents=True, exist_ok=True)
    farmer_argv, env, desc = harness.farmer_command(None, args.work, args.farmer_rev, not args.no_venv)
    harness.log(f"farmer: {desc}")
    lines: list[str] = []
    only = args.only.split(",")
    if "pipeline" in only:
        args.work, work = args.work / "serve", args.work
        lines += bench_pipeline(args, farmer_argv, env)
        args.work = work
    if "cmake" in only:
        lines += bench_cmake(args, farmer_argv, env)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
