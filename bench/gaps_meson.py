#!/usr/bin/env python3
"""Where a first build of a small Meson project waits between commands, by farmer source
trees, interleaved: for each run, a first build (as after `meson setup`) under `strace -f
--seccomp-bpf -e trace=clone3,wait4,exit_group` (only those calls stop the process), and
from its farmer process's calls the time from each reap to the next spawn (a command's end
to its consumer's start), summed over the build, and from the last reap to the exit.

    python bench/gaps_meson.py [--work bench/work] [--runs 8] [--python PY]
                               --projects 1-trivial,2-cpp NAME=TREE [NAME=TREE ...]

The build directories are bench/ab_meson.py's (WORK/ab-meson/PROJECT/NAME: run it once
with the same NAMEs first). Prints the medians over runs. PY: as for ab_meson.py (give it
the benchmark's venv interpreter where the system one runs a site `.pth` at start-up).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def ms(line: str) -> float:
    h, m, s = line.split()[1].split(":")
    return (int(h) * 3600 + int(m) * 60 + float(s)) * 1000


def one_build(python: str, tree: str, d: Path, log: Path) -> tuple[float, float]:
    subprocess.run(["ninja", "-C", str(d), "-t", "clean"], stdout=subprocess.DEVNULL)
    shutil.rmtree(d / ".farmer", ignore_errors=True)
    for name in (".ninja_log", ".ninja_deps"):
        (d / name).unlink(missing_ok=True)
    subprocess.run(["strace", "-f", "--seccomp-bpf", "-tt", "-e", "trace=clone3,wait4,exit_group",
                    "-o", str(log), python, "-m", "farmer", "build", "-f", "build.ninja", "-j", "2"],
                   cwd=d, env=dict(os.environ, PYTHONPATH=tree), stdout=subprocess.DEVNULL, check=True)
    lines = log.read_text().splitlines()
    pid = lines[0].split()[0]
    calls = [l for l in lines if l.startswith(pid + " ") and "resumed" not in l
             and " --- " not in l and " +++ " not in l]
    gaps = sum(ms(b) - ms(a) for a, b in zip(calls, calls[1:]) if " wait4(" in a and " clone3(" in b)
    reaps = [l for l in calls if " wait4(" in l]
    exits = [l for l in calls if " exit_group(" in l]
    return gaps, ms(exits[-1]) - ms(reaps[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "work")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--projects", required=True, help="comma-separated, as WORK/ab-meson names them")
    ap.add_argument("trees", nargs="+", metavar="NAME=TREE")
    args = ap.parse_args()
    trees = {name: os.path.abspath(tree) for name, tree in (t.split("=", 1) for t in args.trees)}
    projects = args.projects.split(",")
    log = args.work.resolve() / "gaps-strace.txt"
    found: dict[tuple[str, str], list[tuple[float, float]]] = {(p, t): [] for p in projects for t in trees}
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for r in range(args.runs):
        for p in projects:
            for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                d = args.work.resolve() / "ab-meson" / p / name
                found[(p, name)].append(one_build(args.python, trees[name], d, log))
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs")
    for (p, name), runs in found.items():
        gaps = statistics.median(g for g, _ in runs)
        end = statistics.median(e for _, e in runs)
        print(f"{p:16} {name:8} reaps to the next spawn {gaps:6.2f} ms   last reap to exit {end:6.2f} ms")


if __name__ == "__main__":
    main()
