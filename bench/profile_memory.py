#!/usr/bin/env python3
"""Memory of a clean build of the bench's graph, phase by phase, in one process.

    python bench/profile_memory.py [--size 20000] [--trace] [--top 25] [--until-run]

Generates bench/run.py's graph (one `[task]` per step) into bench/work/clean-n{size}/,
removes out/ and .farmer/, and runs `farmer build -j 2 all` of the working tree in this
process, printing at the start and end of each phase (parse, traversal, graph cache,
session, prediction, the scheduler's run, the end's simulation, the proof) the process's
RSS and its high-water mark (VmRSS, VmHWM of /proc/self/status) and the time since the
last mark; with --until-run, only up to where the build's scheduler starts (what a build of
100 000 holds before its first command, in seconds). With --trace, under tracemalloc (one
frame): the traced memory at each mark, and after traversal, the run and the proof's
update, what is held, by file and by line
(tracemalloc's own tables make RSS meaningless then: read the traced figures).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_clean  # noqa: E402  (the same project, and its build in this process)
import run as bench  # noqa: E402


def status() -> dict[str, int]:
    """VmRSS and VmHWM in MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--until-run", action="store_true",
                    help="stop where the build's scheduler starts (what a 100k build holds before its first command)")
    args = ap.parse_args()
    os.chdir(profile_clean.project(args.size, bench.BENCH_DIR / "work"))
    if args.trace:
        tracemalloc.start(1)
    import farmer.build.run as build_mod
    import farmer.graph.cache as graphcache_mod
    import farmer.graph.traversal as traversal_mod
    import farmer.manifest.farmfile as farmfile_mod
    import farmer.plan.session as session_mod
    import farmer.report.lastbuild as lastbuild_mod
    import farmer.run.scheduler as scheduler_mod
    import farmer.store.proof as noop_mod
    marks, snaps = [], {}

    def mark(label: str) -> None:
        traced = tracemalloc.get_traced_memory()[0] / 1e6 if args.trace else 0.0
        marks.append((label, status(), traced, time.perf_counter()))

    def wrap(owner, name: str, snap: bool = False) -> None:
        f = getattr(owner, name)
        label = f"{owner.__name__.rpartition('.')[2]}.{name}"

        def measured(*a, **k):
            mark(f"> {label}")
            try:
                return f(*a, **k)
            finally:
                mark(f"< {label}")
                if snap and args.trace:
                    snaps[label] = tracemalloc.take_snapshot()
        setattr(owner, name, measured)

    wrap(farmfile_mod, "parse_text")
    wrap(traversal_mod, "traverse", snap=True)
    wrap(graphcache_mod, "save")
    wrap(build_mod, "open_session")
    wrap(session_mod.Session, "predict", snap=True)
    wrap(scheduler_mod.Scheduler, "run", snap=True)  # the build's, then the end's simulation
    wrap(build_mod._Build, "finish")
    wrap(session_mod.Session, "last_build_tasks")
    wrap(lastbuild_mod, "write")
    wrap(session_mod.Session, "write_proof")
    wrap(noop_mod, "update", snap=True)
    out = sys.__stdout__  # the build sends its own to /dev/null, and --until-run reports within it

    def report() -> None:
        print(f"clean build of {args.size} steps in process" + (", under tracemalloc" if args.trace else ""),
              file=out)
        previous = marks[0][3]
        for label, st, traced, at in marks:
            extra = f"  traced {traced:6.1f} MB" if args.trace else ""
            print(f"{label:24} RSS {st['VmRSS']:5d} MB  HWM {st['VmHWM']:5d} MB{extra}  +{at - previous:7.2f} s",
                  file=out)
            previous = at
        for label, snap in snaps.items():
            print(f"-- held at the end of {label}, by file, then by line:", file=out)
            for key in ("filename", "lineno"):
                for st in snap.statistics(key)[:12 if key == "filename" else args.top]:
                    print(f"{st.size / 1e6:7.2f} MB {st.count:8d}  {st.traceback[0]}", file=out)

    if args.until_run:
        def stop(self) -> None:
            mark("the scheduler starts")
            report()
            out.flush()
            os._exit(0)  # nothing of the build after this point is measured
        scheduler_mod.Scheduler.run = stop
    mark("start")
    profile_clean.build()
    mark("end")
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
