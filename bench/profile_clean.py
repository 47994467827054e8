#!/usr/bin/env python3
"""Where a clean build of the bench's graph spends its time before its first command, or
its memory.

    python bench/profile_clean.py [--size 1000] [--memory] [--top 40] [--repeat N]

Generates bench/run.py's graph (one `[task]` per step) into bench/work/clean-n{size}/,
removes out/ and .farmer/, and runs `farmer build -j 2 all` of the working tree in this
process:
  default   under cProfile until the first `os.posix_spawn` or `os.posix_spawnp` (the
            first started command);
            prints the CPU and wall time to it and the top entries by cumulative time
  --memory  under tracemalloc (one frame): the traced memory around each phase (load,
            session, prediction, the scheduler's runs, the proof) and the 20 lines that
            hold the most at the end of the run
  --repeat  N fresh processes without the profiler, each to its first command: the median
            CPU and wall time to it (bench/run.py's first-command column also counts the
            interpreter's start)
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: the generator)

sys.path.insert(0, str(bench.REPO_ROOT))


def project(size: int, work: Path) -> Path:
    d = work / f"clean-n{size}"
    if not (d / "Farmfile").exists():
        shutil.rmtree(d, ignore_errors=True)
        g = bench.make_graph(size)
        bench.write_project(g, d, {"farmer": bench.farmfile_text(g), "ninja": bench.ninja_text(g),
                                   "make": bench.makefile_text(g)}, "farmer")
    for name in ("out", ".farmer"):
        shutil.rmtree(d / name, ignore_errors=True)
    return d


def build() -> None:
    from farmer import command

    out, sys.stdout = sys.stdout, open(os.devnull, "w")  # the build's progress lines
    try:
        command.main(lambda: command.build(["all"], jobs=2))
    except SystemExit:
        pass
    finally:
        sys.stdout.close()
        sys.stdout = out


def first_command(top: int, profile: bool = True) -> None:
    prof = cProfile.Profile()
    first: dict[str, float] = {}
    c0, w0 = time.process_time(), time.perf_counter()

    def spawning(real):
        def spawn(*a, **k):
            if not first:
                prof.disable()
                first.update(cpu=time.process_time() - c0, wall=time.perf_counter() - w0)
            return real(*a, **k)
        return spawn

    # posix_spawn for a command found on PATH, posix_spawnp for the shell and the rest
    os.posix_spawn, os.posix_spawnp = spawning(os.posix_spawn), spawning(os.posix_spawnp)
    if profile:
        prof.enable()
    build()
    prof.disable()
    if not profile:  # one of --repeat's runs
        print(f"{first['cpu']} {first['wall']}")
        return
    print(f"first command after {first['cpu'] * 1000:.1f} ms of CPU, {first['wall'] * 1000:.1f} ms "
          "of wall time (in this process, after the interpreter's start; under cProfile)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def repeated(size: int, repeat: int) -> None:
    """Fresh processes, without the profiler: CPU and wall to the first command."""
    import statistics
    import subprocess

    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, __file__, "--size", str(size), "--plain"], check=True,
                             capture_output=True, text=True).stdout.split()
        runs.append((float(out[0]), float(out[1])))
    print(f"load average {os.getloadavg()[0]:.1f}; {repeat} runs, medians: first command after "
          f"{statistics.median(r[0] for r in runs) * 1000:.1f} ms of CPU and "
          f"{statistics.median(r[1] for r in runs) * 1000:.1f} ms of wall time (in the build's "
          "process, after the interpreter's start)")


def memory() -> None:
    tracemalloc.start(1)
    import farmer.build as build_mod
    import farmer.project as project_mod
    import farmer.scheduler as scheduler_mod
    import farmer.session as session_mod

    marks, at_end = [], []

    def wrap(owner, name):
        f = getattr(owner, name)

        def measured(*a, **k):
            marks.append((f"> {name}", *tracemalloc.get_traced_memory()))
            tracemalloc.reset_peak()
            try:
                return f(*a, **k)
            finally:
                if name == "run":
                    at_end[:] = [tracemalloc.take_snapshot()]
                marks.append((f"< {name}", *tracemalloc.get_traced_memory()))
                tracemalloc.reset_peak()
        setattr(owner, name, measured)

    wrap(project_mod, "load")
    wrap(build_mod, "open_session")
    wrap(session_mod.Session, "predict")
    wrap(session_mod.Session, "write_proof")
    wrap(scheduler_mod.Scheduler, "run")
    build()
    for mark, current, peak in marks:
        print(f"{mark:16} traced {current / 1e6:7.1f} MB, peak since the last mark {peak / 1e6:7.1f} MB")
    print("-- held at the end of the last scheduler run:")
    for st in at_end[0].statistics("lineno")[:20]:
        print(f"{st.size / 1e6:7.2f} MB {st.count:8d}  {st.traceback[0]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)  # one of --repeat's runs
    args = ap.parse_args()
    if args.repeat:
        project(args.size, bench.BENCH_DIR / "work")
        repeated(args.size, args.repeat)
        return 0
    os.chdir(project(args.size, bench.BENCH_DIR / "work"))
    if args.memory:
        memory()
    else:
        first_command(args.top, profile=not args.plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
