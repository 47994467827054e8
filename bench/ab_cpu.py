#!/usr/bin/env python3
"""CPU of `farmer build` by two farmer source trees, in interleaved runs: for changes too
small for bench/run.py's medians on a loaded machine (a few milliseconds).

    python bench/ab_cpu.py [--size 1000] [--repeat 7] [--python PY] [--scenarios S,S]
                           NAME=TREE NAME=TREE

TREE: a directory holding a `farmer/` package (`git archive REV farmer | tar -x -C DIR`
makes one of any commit). Generates bench/run.py's graph once per tree into
bench/work/ab-n{size}-NAME/ (a no-op proof made by one tree's farmer does not hold for the
other's), builds it, then alternates the trees: `farmer build -j 2 all` as a no-op, after
one source edit (bench/run.py's change scenario; with `--ninja`, ninja takes its turn in
bench/work/ab-n{size}-ninja/ too) and, with `--scenarios clean`, as a clean
build (out/ and .farmer/ removed first), which both trees make in one directory,
bench/work/ab-n{size}-clean/ (where a folder lies on the disk changes what creating a file
in it costs: on this project's machines from 0.02 to 0.8 ms). Prints the median CPU (user + system of the
process and its children, from wait4) and wall time; for a clean build also farmer's own
CPU: the total less its commands' (the CPU farmer measured of each, in state.db's history). With two
trees, also in how many rounds the second was faster in wall time than the first, and the
median of the rounds' differences. PY runs farmer: best
a venv's interpreter, whose site-packages hold no `.pth` files that import things at
start; the site-packages of the interpreter running this script go on PYTHONPATH for
farmer's dependencies.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: the generator)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--scenarios", default="no-op,one change",
                    help="comma-separated, of: no-op, one change, clean")
    ap.add_argument("--ninja", action="store_true",
                    help="ninja -j 2 all takes its turn in the clean builds (in the same directory) "
                         "and after each one change (in a directory of its own)")
    ap.add_argument("trees", nargs=2, metavar="NAME=TREE")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.trees)
    g = bench.make_graph(args.size)
    src, _ = bench.pick_change_source(g)
    texts = {"farmer": bench.farmfile_text(g), "ninja": bench.ninja_text(g), "make": bench.makefile_text(g)}
    work = bench.BENCH_DIR / "work"
    dirs = {name: work / f"ab-n{args.size}-{name}" for name in trees}
    clean_dir = work / f"ab-n{args.size}-clean"
    if args.ninja and "one change" in args.scenarios.split(","):
        dirs["ninja"] = work / f"ab-n{args.size}-ninja"
    for d in [*dirs.values(), clean_dir]:
        if not (d / "Farmfile").exists():
            shutil.rmtree(d, ignore_errors=True)
            bench.write_project(g, d, texts, "farmer")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}
    site = sysconfig.get_paths()["purelib"]

    def commands_cpu() -> float:
        """The CPU farmer measured of the commands a clean build ran (ms)."""
        import sqlite3

        db = sqlite3.connect(clean_dir / ".farmer" / "state.db")
        try:
            return (db.execute("SELECT sum(cpu_s) FROM history").fetchone()[0] or 0.0) * 1000
        finally:
            db.close()

    def run(name: str, scenario: str) -> tuple[float, float, float | None]:
        where = dirs.get(name, clean_dir)
        if scenario == "one change":
            with open(where / src, "ab") as f:
                f.write(b"x\n")
        elif scenario == "clean":
            where = clean_dir
            for state in ("out", ".farmer", ".ninja_log", ".ninja_deps"):
                if (where / state).is_dir():
                    shutil.rmtree(where / state)
                elif (where / state).exists():
                    (where / state).unlink()
        t = time.perf_counter()
        if name == "ninja":
            p = subprocess.Popen(["ninja", "-j", "2", "all"], cwd=where, stdout=subprocess.DEVNULL)
        else:
            p = subprocess.Popen([args.python, "-m", "farmer", "build", "-j", "2", "all"], cwd=where,
                                 env=dict(env, PYTHONPATH=os.path.abspath(trees[name]) + os.pathsep + site),
                                 stdout=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        if status:
            sys.exit(f"{name}: farmer build failed ({status})")
        wall = (time.perf_counter() - t) * 1000
        cpu = (ru.ru_utime + ru.ru_stime) * 1000
        return cpu, wall, cpu - commands_cpu() if scenario == "clean" and name != "ninja" else None

    for name in dirs:  # built, and the bytecode written
        run(name, "no-op")
        run(name, "no-op")
    results: dict[tuple[str, str], list[tuple[float, float, float | None]]] = {}
    load = [os.getloadavg()[0]]
    for scenario in args.scenarios.split(","):
        for _ in range(args.repeat):
            for name in [*trees, *(["ninja"] if args.ninja and scenario in ("clean", "one change") else [])]:
                results.setdefault((scenario, name), []).append(run(name, scenario))
    load.append(os.getloadavg()[0])
    print(f"load average {load[0]:.1f} to {load[1]:.1f}; {args.size} steps, {args.repeat} runs each")
    for (scenario, name), runs in results.items():
        own = [o for _, _, o in runs if o is not None]
        print(f"{scenario:10} {name:10} CPU {statistics.median(c for c, _, _ in runs):7.1f} ms"
              f"  wall {statistics.median(w for _, w, _ in runs):7.1f} ms"
              + (f"  farmer's own CPU {statistics.median(own):7.1f} ms" if own else ""))
    first, second = trees
    for scenario in args.scenarios.split(","):
        pairs = list(zip(results[scenario, first], results[scenario, second]))
        faster = sum(b[1] < a[1] for a, b in pairs)
        print(f"{scenario:10} {second} faster than {first} in {faster} of {len(pairs)} rounds (wall), median "
              f"difference {statistics.median(b[1] - a[1] for a, b in pairs):+.1f} ms wall, "
              f"{statistics.median(b[0] - a[0] for a, b in pairs):+.1f} ms CPU")


if __name__ == "__main__":
    main()
