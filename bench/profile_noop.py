#!/usr/bin/env python3
"""Profile a no-op farmer build under cProfile.

    python bench/profile_noop.py [--size 10000] [--jobs 2] [--foreach] [--top 25]
                                 [--sort cumulative] [--prof FILE]

Generates the same graph as bench/run.py (into bench/work/profile-n{size}/, reused if
already built there, unless --fresh), makes sure it is completely built, then runs

    python -m cProfile -o FILE -m farmer build -C DIR -j J all

on the up-to-date tree and prints the top entries by cumulative time (and a short
tottime list). The .prof file stays for snakeviz / pstats. Stdlib only.
"""
from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: the generator)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10000, help="steps in the graph")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--foreach", action="store_true",
                    help="Farmfile variant with the first layer as one foreach task")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="cumulative", help="pstats sort key (default cumulative)")
    ap.add_argument("--prof", type=Path, help="profile output (default in the work dir)")
    ap.add_argument("--work", type=Path, default=bench.BENCH_DIR / "work")
    ap.add_argument("--fresh", action="store_true", help="regenerate even if present")
    ap.add_argument("--change", action="store_true",
                    help="profile the `change` scenario instead: append a line to the "
                         "source bench/run.py edits, then build")
    ap.add_argument("--farmer-rev", metavar="REV",
                    help="profile farmer/ as of this commit (git archive) instead of the "
                         "working tree")
    args = ap.parse_args()

    d = (args.work / f"profile-n{args.size}{'-foreach' if args.foreach else ''}").resolve()
    prof = (args.prof or d.parent / f"{d.name}.prof").resolve()
    env = bench.farmer_env_base(args.work.resolve())
    if args.farmer_rev:
        src, desc = bench.export_farmer(args.farmer_rev, args.work.resolve(),
                                         "farmer-src-profile")
        env["PYTHONPATH"] = str(src)
        print(f"farmer at {args.farmer_rev} = {desc}", file=sys.stderr)
    else:
        env["PYTHONPATH"] = str(bench.REPO_ROOT) + (os.pathsep + env["PYTHONPATH"]
                                                    if env.get("PYTHONPATH") else "")
    build = [sys.executable, "-m", "farmer", "build", "-C", str(d), "-j", str(args.jobs), "all"]

    if args.fresh or not (d / "Farmfile").exists():
        if d.exists():
            shutil.rmtree(d)
        g = bench.make_graph(args.size)
        texts = {"farmer": bench.farmfile_text(g, foreach=args.foreach),
                 "ninja": bench.ninja_text(g), "make": bench.makefile_text(g)}
        bench.write_project(g, d, texts, "farmer")
        print(f"generated {args.size} steps in {d}", file=sys.stderr)

    for what in ("complete build", "settling no-op"):
        t0 = time.perf_counter()
        cp = subprocess.run(build, env=env, capture_output=True, text=True, cwd=d)
        if cp.returncode != 0:
            print(f"farmer {what} failed (rc={cp.returncode}):\n{cp.stdout[-2000:]}"
                  f"{cp.stderr[-2000:]}", file=sys.stderr)
            return 1
        print(f"{what}: {time.perf_counter() - t0:.3f} s", file=sys.stderr)

    expect_ran = 0
    if args.change:
        src, outs = bench.pick_change_source(bench.make_graph(args.size))
        with open(d / src, "a") as f:
            f.write(f"profile change {time.time_ns()}\n")
        expect_ran = len(outs)
        print(f"appended a line to {src} ({expect_ran} outputs downstream)", file=sys.stderr)

    t0 = time.perf_counter()
    cp = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof)] + build[1:],
                        env=env, capture_output=True, text=True, cwd=d)
    wall = time.perf_counter() - t0
    if cp.returncode != 0:
        print(f"profiled run failed (rc={cp.returncode}):\n{cp.stderr[-2000:]}", file=sys.stderr)
        return 1
    try:
        lb = json.loads((d / ".farmer" / "last-build.json").read_text())
        ran = sum(1 for t in lb.get("tasks", []) if t.get("status") != "up-to-date")
        note = (f"{ran} ran, as expected" if ran == expect_ran
                else f"UNEXPECTED: {ran} not up to date, expected {expect_ran}")
    except (OSError, ValueError):
        note = "last-build.json unreadable"
    print(f"\nprofiled {'change' if args.change else 'no-op'} build of {args.size} steps: {wall:.3f} s wall under cProfile "
          f"({note}); profile in {prof}\n")

    st = pstats.Stats(str(prof))
    st.strip_dirs().sort_stats(args.sort).print_stats(args.top)
    if args.sort == "cumulative":
        print("--- top 10 by tottime ---")
        st.sort_stats("tottime").print_stats(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
