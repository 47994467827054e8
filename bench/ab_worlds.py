#!/usr/bin/env python3
"""bench/worlds.py's farmer builds by two farmer source trees, interleaved run by run: for
changes to the world path too small for separate runs on a loaded machine.

    python bench/ab_worlds.py [--tasks 50] [--dataset-mb 20] [--workloads imports,dataset]
                              [--worlds-repeat 9] [--fresh-repeat 3] NAME=TREE NAME=TREE

TREE: a directory holding `farmer/` and `bench/` (`git archive REV farmer bench | tar -x -C
DIR` makes one of any commit; `python -m compileall DIR/farmer` with PYTHONDONTWRITEBYTECODE
unset gives it the bytecode an installed farmer has). Each tree's own bench/worlds.py writes
its projects (under TREE/bench/work/) and runs its farmer, so each side measures itself. For
each workload, `farmer build -j 2` (worlds) and `farmer build -j 2 --no-worlds` (fresh), the
trees take turns, each run a clean build; the outputs of every run must be the same.
Prints every run, then the medians of wall and CPU time (the tool and all its processes), and
the CPU difference of the second tree against the first. Run it with the interpreter whose
packages the steps import (the imports workload needs numpy, networkx and rich) and with
that interpreter's bin folder first on PATH.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--dataset-mb", type=int, default=20)
    ap.add_argument("--workloads", default="imports,dataset")
    ap.add_argument("--worlds-repeat", type=int, default=9)
    ap.add_argument("--fresh-repeat", type=int, default=3)
    ap.add_argument("trees", nargs=2, metavar="NAME=TREE")
    args = ap.parse_args()
    mods = {}
    for arg in args.trees:
        name, _, tree = arg.partition("=")
        spec = importlib.util.spec_from_file_location(f"worlds_{name}", f"{tree}/bench/worlds.py")
        mods[name] = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mods[name])  # type: ignore[union-attr]
    repeat = {"worlds": args.worlds_repeat, "fresh": args.fresh_repeat}
    results: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for workload in args.workloads.split(","):
        works = {}
        for name, m in mods.items():
            works[name] = m.BENCH_DIR / "work" / f"worlds-{workload}"
            m.write_project(works[name], workload, args.tasks, args.dataset_mb)
        for mode, extra in (("worlds", []), ("fresh", ["--no-worlds"])):
            if not repeat[mode]:
                continue
            cmd = [sys.executable, "-m", "farmer", "build", "-j", "2", *extra]
            digests = set()
            for r in range(repeat[mode]):
                for name, m in mods.items():
                    m.clean(works[name])
                    wall, cpu = m.run(cmd, works[name])
                    results.setdefault((workload, mode, name), []).append((wall, cpu))
                    digests.add(m.digest(works[name], args.tasks))
                    print(f"{workload} {mode} {name} run {r + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
            if len(digests) != 1:
                raise SystemExit(f"{workload} {mode}: the outputs differ between runs")
    names = list(mods)
    print("\n| workload | build | tree | runs | median wall | median CPU | CPU against " + names[0] + " |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for (workload, mode, name), runs in results.items():
        cpu = statistics.median(c for _, c in runs)
        first = statistics.median(c for _, c in results[(workload, mode, names[0])])
        print(f"| {workload} | {mode} | {name} | {len(runs)} | {statistics.median(w for w, _ in runs):.2f} s "
              f"| {cpu:.2f} s | {100 * (cpu - first) / first:+.1f} % |")


if __name__ == "__main__":
    main()
