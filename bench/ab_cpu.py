#!/usr/bin/env python3
"""CPU of `farmer build` by two farmer source trees, in interleaved runs: for changes too
small for bench/run.py's medians on a loaded machine (a few milliseconds).

    python bench/ab_cpu.py [--size 1000] [--repeat 7] [--python PY] NAME=TREE NAME=TREE

TREE: a directory holding a `farmer/` package (`git archive REV farmer | tar -x -C DIR`
makes one of any commit). Generates bench/run.py's graph once per tree into
bench/work/ab-n{size}-NAME/ (a no-op proof made by one tree's farmer does not hold for the
other's), builds it, then alternates the trees: `farmer build -j 2 all` as a no-op, and
after one source edit (bench/run.py's change scenario). Prints the median CPU (user +
system of the process and its children, from wait4) and wall time. PY runs farmer: best
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
    ap.add_argument("trees", nargs=2, metavar="NAME=TREE")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.trees)
    g = bench.make_graph(args.size)
    src, _ = bench.pick_change_source(g)
    texts = {"farmer": bench.farmfile_text(g), "ninja": bench.ninja_text(g), "make": bench.makefile_text(g)}
    work = bench.BENCH_DIR / "work"
    dirs = {name: work / f"ab-n{args.size}-{name}" for name in trees}
    for d in dirs.values():
        if not (d / "Farmfile").exists():
            shutil.rmtree(d, ignore_errors=True)
            bench.write_project(g, d, texts, "farmer")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}
    site = sysconfig.get_paths()["purelib"]

    def run(name: str, change: bool) -> tuple[float, float]:
        if change:
            with open(dirs[name] / src, "ab") as f:
                f.write(b"x\n")
        t = time.perf_counter()
        p = subprocess.Popen([args.python, "-m", "farmer", "build", "-j", "2", "all"], cwd=dirs[name],
                             env=dict(env, PYTHONPATH=os.path.abspath(trees[name]) + os.pathsep + site),
                             stdout=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        if status:
            sys.exit(f"{name}: farmer build failed ({status})")
        return (ru.ru_utime + ru.ru_stime) * 1000, (time.perf_counter() - t) * 1000

    for name in trees:  # built, and the bytecode written
        run(name, False)
        run(name, False)
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for scenario in ("no-op", "one change"):
        for _ in range(args.repeat):
            for name in trees:
                results.setdefault((scenario, name), []).append(run(name, scenario != "no-op"))
    print(f"load average {os.getloadavg()[0]:.1f}; {args.size} steps, {args.repeat} runs each")
    for (scenario, name), runs in results.items():
        print(f"{scenario:10} {name:10} CPU {statistics.median(c for c, _ in runs):7.1f} ms"
              f"  wall {statistics.median(w for _, w in runs):7.1f} ms")


if __name__ == "__main__":
    main()
