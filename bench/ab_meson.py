#!/usr/bin/env python3
"""First builds of Meson's test projects by farmer source trees (and ninja), interleaved:
the meson-series scenario (bench/run.py) as an A/B of CPU, for changes of a few
milliseconds a project that its medians cannot show on a loaded machine.

    python bench/ab_meson.py [--work bench/work] [--count 20] [--rounds 4] [--python PY]
                             [--ninja] NAME=TREE [NAME=TREE ...]

TREE: a directory holding a `farmer/` package (`git archive REV farmer | tar -x -C DIR`).
The projects are bench/run.py's (`bench/projects.py`: the first COUNT of `test cases/common`
that configure and build here); each tree (and ninja) gets its own build directory of each,
`meson setup` once, under WORK/ab-meson/. A round builds every project from clean (as
after `meson setup`: `ninja -t clean`, state removed, untimed) with each tool in turn, the
order reversed every other round. Prints per tool the median over rounds of the total wall
time and CPU (user + system of the process and its children, from wait4) and, for farmer,
its own CPU (its process's getrusage, reported as it exits), a project's share of each.
PY runs farmer (default: this interpreter, whose site-packages follow TREE on PYTHONPATH).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import projects  # noqa: E402  (bench/projects.py)

# farmer's own CPU: its RUSAGE_SELF, written to stderr as it leaves (through os._exit, or
# sys.exit when something at exit needs the interpreter's own way out).
_FARMER = """\
import os, resource, sys
def report():
    r = resource.getrusage(resource.RUSAGE_SELF)
    os.write(2, b"ab-meson-own %f\\n" % (r.ru_utime + r.ru_stime))
leave = os._exit
def leave_reporting(code):
    report()
    leave(code)
os._exit = leave_reporting
sys.argv[0] = "farmer"
from farmer.__main__ import run
try:
    run()
finally:
    report()
"""


def build_dirs(work: Path, found: list[projects.Project], names: list[str]) -> list[dict[str, Path]]:
    src = projects.sdist(projects.MESON, work / "projects") / "meson-1.12.1" / "test cases" / "common"
    cases = {re.sub(r"[^A-Za-z0-9]+", "-", c.name): c for c in src.iterdir()}
    meson = projects.meson_command(work)
    out = []
    for p in found:
        dirs = {}
        for name in names:
            d = work / "ab-meson" / p.name / name
            if not (d / "build.ninja").exists():
                shutil.rmtree(d, ignore_errors=True)
                subprocess.run(meson + ["setup", str(d), str(cases[p.name])], check=True,
                               stdout=subprocess.DEVNULL)
            dirs[name] = d
        out.append(dirs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "work")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--ninja", action="store_true", help="ninja -j 2 takes its turn too")
    ap.add_argument("trees", nargs="+", metavar="NAME=TREE")
    args = ap.parse_args()
    trees = {name: os.path.abspath(tree) for name, tree in (t.split("=", 1) for t in args.trees)}
    names = [*trees, *(["ninja"] if args.ninja else [])]
    found = projects.meson_projects(args.work.resolve(), args.count, False)
    builds = build_dirs(args.work.resolve(), found, names)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as bench/run.py
    site = sysconfig.get_paths()["purelib"]

    def run(name: str, d: Path) -> tuple[float, float, float]:
        projects.clean(d)
        if name == "ninja":
            argv, run_env = ["ninja", "-C", str(d), "-j", "2"], None
        else:
            argv = [args.python, "-c", _FARMER, "build", "-C", str(d), "-f", "build.ninja", "-j", "2"]
            run_env = dict(env, PYTHONPATH=trees[name] + os.pathsep + site)
        t = time.perf_counter()
        p = subprocess.Popen(argv, cwd=d, env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        if status:
            sys.exit(f"{name} failed to build {d}:\n{err.decode(errors='replace')}")
        own = [float(line.split()[1]) for line in err.decode().splitlines() if line.startswith("ab-meson-own ")]
        return wall, ru.ru_utime + ru.ru_stime, own[0] if own else 0.0

    totals: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        sums = {name: [0.0, 0.0, 0.0] for name in names}
        for dirs in builds:
            for name in (names if r % 2 == 0 else names[::-1]):
                for k, v in enumerate(run(name, dirs[name])):
                    sums[name][k] += v
        for name in names:
            totals[name].append(tuple(sums[name]))
        print(f"round {r + 1}: " + ", ".join(f"{n} {s[0]:.2f} s wall, {s[1]:.2f} s CPU" for n, s in sums.items()),
              flush=True)
    load.append(os.getloadavg()[0])
    n = len(builds)
    print(f"load average {load[0]:.1f} to {load[1]:.1f}; {n} projects, {args.rounds} rounds")
    for name, rounds in totals.items():
        wall, cpu, own = (statistics.median(x[k] for x in rounds) for k in range(3))
        line = f"{name:10} wall {wall:6.2f} s  CPU {cpu:6.2f} s ({1000 * cpu / n:5.1f} ms a project)"
        if name != "ninja":
            line += f"  farmer's own CPU {1000 * own / n:5.1f} ms a project"
        print(line)


if __name__ == "__main__":
    main()
