#!/usr/bin/env python3
"""How long `farmer report` takes after a build of N steps (bench/run.py's graph).

    python bench/report.py [--size 10000] [--repeat 5] [--jobs 2]

Writes the generated project into bench/work/report-n{N}/, builds it from scratch with this
checkout's farmer (`python -m farmer`, the checkout on PYTHONPATH), then times
`farmer report --html`, `--junit` and `--markdown` (the median of the repeats,
perf_counter around the child) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import REPO_ROOT, farmfile_text, make_graph  # noqa: E402


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one run: CPU (user + sys) tells the work from a loaded
    machine's waiting."""
    before = os.times()
    t0 = time.perf_counter()
    cp = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    elapsed = time.perf_counter() - t0
    after = os.times()
    if cp.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{cp.stderr.decode()}")
    return elapsed, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    work = REPO_ROOT / "bench" / "work" / f"report-n{args.size}"
    shutil.rmtree(work, ignore_errors=True)
    g = make_graph(args.size)
    (work / "src").mkdir(parents=True)
    for name, data in zip(g.sources, g.source_text):
        (work / name).write_bytes(data)
    (work / "Farmfile").write_text(farmfile_text(g))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), FARMER_CACHE="0")
    env.pop("GITHUB_ACTIONS", None)
    farmer = [sys.executable, "-m", "farmer"]
    build_s = timed([*farmer, "build", "-j", str(args.jobs)], work, env)[0]
    rows = []
    for what in (["--html", "report.html"], ["--junit", "junit.xml"], ["--markdown"]):
        runs = [timed([*farmer, "report", *what], work, env) for _ in range(args.repeat)]
        walls = [w for w, _ in runs]
        rows.append((" ".join(what), statistics.median(walls), min(walls), max(walls),
                     statistics.median(c for _, c in runs)))
    size = (work / "report.html").stat().st_size
    print(f"{args.size} steps, built from scratch in {build_s:.1f} s with -j {args.jobs}; "
          f"report.html {size / 1e6:.2f} MB; load average {os.getloadavg()[0]:.1f}\n")
    print("| command | wall median | min | max | CPU median |\n|---|---:|---:|---:|---:|")
    for what, med, lo, hi, cpu in rows:
        print(f"| `farmer report {what}` | {med:.2f} s | {lo:.2f} s | {hi:.2f} s | {cpu:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
