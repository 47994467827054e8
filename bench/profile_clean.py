#!/usr/bin/env python3
"""Where a clean build of the bench's graph spends its time before its first command, or
its memory.

    python bench/profile_clean.py [--size 1000] [--memory] [--top 40] [--repeat N [--tree DIR]]
    python bench/profile_clean.py --repeat N --compare DIR DIR...
    python bench/profile_clean.py --warm N [--repeat R] [--compare DIR DIR...]
    python bench/profile_clean.py --cold N [--compare DIR DIR...]

Generates bench/run.py's graph (one `[task]` per step) into bench/work/clean-n{size}/,
removes out/ and .farmer/, and runs `farmer build -j 2 all` of the working tree in this
process:
  default   under cProfile until the first `os.posix_spawn` or `os.posix_spawnp` (the
            first started command) or `os.fork` (of the executor that starts them);
            prints the CPU and wall time to it and the top entries by cumulative time
  --memory  under tracemalloc (one frame): the traced memory around each phase (load,
            session, prediction, the scheduler's runs, the proof) and the 20 lines that
            hold the most at the end of the run
  --repeat  N fresh processes without the profiler, each to its first command: the median
            CPU and wall time to it, and the CPU of its phases (farmer's imports, the
            Farmfile's parse, the traversal, the rest); bench/run.py's first-command column
            also counts the interpreter's start. Each runs `python -S` with farmer, xxhash
            and toml_rs on PYTHONPATH, so that what a site's .pth files import (an editable
            install's finder imports pathlib, re and typing) is not taken from farmer's share
  --warm    N builds in one process after a first one (what imports and first calls cost is
            left out), each stopped at its first start (the fork of the process starter, or
            a spawn): the median CPU of each phase of the way there (the TOML parse, the
            rest of the Farmfile's parse, the traversal, the stale-output sweep, the session,
            the plan and its prediction, the scheduler up to its first start); with --compare
            the trees' processes interleaved, R (--repeat, default 5) each
  --cold    N fresh processes a tree (interleaved with --compare), each ended at its first
            start: the CPU from the interpreter's start (`python -S`) to it, median, lower
            quartile and least; quicker than --compare's, whose builds run to their end,
            so that enough runs for a loaded machine take a minute
  --compare the trees' builds interleaved, N each, as `farmer build` runs them (the quick path
            imported first, the rest by the build): the wall time from the build's first line
            to the first spawn, in farmer or in its forked process starter, and farmer's CPU
            at its fork
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
    from farmer.build.request import BuildRequest
    from farmer.build.workspace import Workspace
    from farmer.cli import exit as ending

    out, sys.stdout = sys.stdout, open(os.devnull, "w")  # the build's progress lines
    try:
        ending.main(lambda: Workspace().build(BuildRequest(["all"], jobs=2)))
    except SystemExit:
        pass
    finally:
        sys.stdout.close()
        sys.stdout = out


def first_command(top: int) -> None:
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

    # posix_spawn for a command found on PATH, posix_spawnp for the shell and the rest; a
    # fork for the executor's child (executors/forked.py), which starts them
    os.posix_spawn, os.posix_spawnp = spawning(os.posix_spawn), spawning(os.posix_spawnp)
    os.fork = spawning(os.fork)
    prof.enable()
    build()
    prof.disable()
    print(f"first command after {first['cpu'] * 1000:.1f} ms of CPU, {first['wall'] * 1000:.1f} ms "
          "of wall time (in this process, after the interpreter's start; under cProfile)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


# The children's wrapper of `owner.name`: its CPU time added to `phases[phase]`.
_TIMED = """
def timed(owner, name, phase):
    real = getattr(owner, name)
    def run(*a, **k):
        t = time.process_time()
        try:
            return real(*a, **k)
        finally:
            phases[phase] = phases.get(phase, 0.0) + time.process_time() - t
    setattr(owner, name, run)
"""


# One of --repeat's runs: `python -S -c _CHILD PROJECT`. CPU time from here (after the
# interpreter's start) to the first spawn, with parse_text and traverse timed on the way
# (the fork of the process starter, executors/forked.py, comes at the first start).
_CHILD = """
import gc, os, sys, time
c0, w0 = time.process_time(), time.perf_counter()
os.chdir(sys.argv[1])
gc.disable()  # as `farmer build` imports these: with the collector paused (build/command.py)
import farmer.build.run, farmer.build.workspace, farmer.cli.exit, farmer.manifest.farmfile, farmer.manifest.tomlparse, farmer.graph.traversal
farmer.manifest.tomlparse._toml_rs()
gc.enable()
phases = {"imports": time.process_time() - c0, "parse": 0.0, "traversal": 0.0}
""" + _TIMED + """timed(farmer.manifest.farmfile, "parse_text", "parse")
timed(farmer.graph.traversal, "traverse", "traversal")
first = {}
def spawning(real):
    def spawn(*a, **k):
        if not first:
            first.update(cpu=time.process_time() - c0, wall=time.perf_counter() - w0)
        return real(*a, **k)
    return spawn
os.posix_spawn, os.posix_spawnp = spawning(os.posix_spawn), spawning(os.posix_spawnp)
os.fork = spawning(os.fork)  # the executor's child (executors/forked.py) starts the commands
sys.stdout = open(os.devnull, "w")
try:
    farmer.cli.exit.main(lambda: farmer.build.workspace.Workspace().build(farmer.build.request.BuildRequest(["all"], jobs=2)))
except SystemExit:
    pass
phases["the rest"] = first["cpu"] - sum(phases.values())
phases.update(cpu=first["cpu"], wall=first["wall"])
os.write(2, repr(phases).encode())
"""


# One of --compare's runs: `farmer build` as its command line runs it (only the modules of its quick path
# imported first). The wall time from here to the first posix_spawn, in whichever process
# makes it (farmer, or its process starter: executors/forked.py), and farmer's CPU at its
# fork (or at its first spawn, without a fork).
_LAUNCH = """
import os, sys, time
t0, c0 = time.perf_counter(), time.process_time()
os.chdir(sys.argv[1])
seen = []
def spawning(real):
    def spawn(*a, **k):
        if not seen:
            seen.append(1)
            os.write(2, f"SPAWN {time.perf_counter() - t0} {time.process_time() - c0}\\n".encode())
        return real(*a, **k)
    return spawn
os.posix_spawn, os.posix_spawnp = spawning(os.posix_spawn), spawning(os.posix_spawnp)
real_fork = os.fork
def fork():
    os.write(2, f"FORK {time.process_time() - c0}\\n".encode())
    return real_fork()
os.fork = fork
sys.stdout = open(os.devnull, "w")
import farmer.build.workspace, farmer.cli.exit
try:
    farmer.cli.exit.main(lambda: farmer.build.workspace.Workspace().build(farmer.build.request.BuildRequest(["all"], jobs=2)))
except SystemExit:
    pass
"""


# One process of --warm: `python -S -c _WARM PROJECT N`. Each build raises _First at its
# first start, which ends it there (through its own cleanup, not timed).
_WARM = """
import gc, os, shutil, sys, time
os.chdir(sys.argv[1])
class _First(BaseException):
    pass
stopped = []
def stop(*a, **k):
    stopped.append(time.process_time())
    raise _First
os.fork = os.posix_spawn = os.posix_spawnp = stop
import farmer.build.run, farmer.build.workspace, farmer.manifest.farmfile, farmer.graph.load, farmer.run.scheduler, farmer.plan.session
import farmer.plan.stale, farmer.manifest.tomlparse, farmer.graph.traversal
phases = {}
""" + _TIMED + """timed(farmer.manifest.tomlparse, "loads", "toml")
timed(farmer.manifest.farmfile, "parse", "parse")
timed(farmer.graph.traversal, "traverse", "traversal")
timed(farmer.plan.stale, "sweep", "sweep")
timed(farmer.build.run, "open_session", "session")
timed(farmer.plan.session.Session, "to_run", "plan")
timed(farmer.plan.session.Session, "predict", "prediction")
timed(farmer.run.scheduler.Scheduler, "__init__", "scheduler")
timed(farmer.run.scheduler.Scheduler, "run", "scheduler")
sys.stdout = open(os.devnull, "w")
runs = []
for k in range(int(sys.argv[2]) + 1):
    for name in ("out", ".farmer"):
        shutil.rmtree(name, ignore_errors=True)
    os.mkdir("out")
    gc.collect()
    phases.clear()
    t = time.process_time()
    try:
        farmer.build.workspace.Workspace().build(farmer.build.request.BuildRequest(["all"], jobs=2))
    except _First:
        pass
    if k:  # the first imported what the build imports as it goes, and made the first calls
        phases["total"] = stopped[-1] - t
        phases["the rest"] = phases["total"] - sum(v for p, v in phases.items() if p != "total")
        runs.append(dict(phases))
shutil.rmtree("out", ignore_errors=True)
med = {p: sorted(r[p] for r in runs)[len(runs) // 2] * 1000 for p in runs[0]}
os.write(2, repr(med).encode())
"""


# One run of --cold: `python -S -c _COLD PROJECT`, ended at its first start.
_COLD = """
import os, sys, time
os.chdir(sys.argv[1])
def stop(*a, **k):
    os.write(2, f"CPU {time.process_time()}\\n".encode())
    os._exit(0)
os.fork = os.posix_spawn = os.posix_spawnp = stop
sys.stdout = open(os.devnull, "w")
import farmer.build.workspace, farmer.cli.exit
farmer.cli.exit.main(lambda: farmer.build.workspace.Workspace().build(farmer.build.request.BuildRequest(["all"], jobs=2)))
"""


def cold(size: int, rounds: int, work: Path, trees: list[Path]) -> None:
    """--cold: the trees' fresh processes interleaved, each to its first start."""
    import statistics
    import subprocess

    cpus: dict[Path, list[float]] = {t: [] for t in trees}
    for k in range(rounds + 1):
        for tree in trees:
            d = project(size, work)
            (d / "out").mkdir()
            cp = subprocess.run([sys.executable, "-S", "-c", _COLD, str(d)], env=child_env(tree),
                                capture_output=True, text=True)
            line = next((x for x in cp.stderr.splitlines() if x.startswith("CPU ")), None)
            if line is None:
                sys.exit(f"the build did not start a command (farmer from {tree}):\n{cp.stderr}")
            if k:  # the first compiled the bytecode
                cpus[tree].append(float(line.split()[1]) * 1000)
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} fresh processes a tree, interleaved: "
          "CPU ms from the interpreter's start to the first start")
    for tree, vs in cpus.items():
        vs.sort()
        print(f"{tree}: median {statistics.median(vs):.2f}, lower quartile {vs[len(vs) // 4]:.2f}, "
              f"least {vs[0]:.2f}")


def warm(size: int, builds: int, work: Path, trees: list[Path], rounds: int) -> None:
    """--warm: each tree's processes interleaved, the medians of their medians."""
    import statistics
    import subprocess

    d = project(size, work)
    meds: dict[Path, list[dict]] = {t: [] for t in trees}
    for _ in range(rounds):
        for tree in trees:
            cp = subprocess.run([sys.executable, "-S", "-c", _WARM, str(d), str(builds)],
                                env=child_env(tree), capture_output=True, text=True)
            if cp.returncode:
                sys.exit(f"the build failed (farmer from {tree}):\n{cp.stderr}")
            meds[tree].append(eval(cp.stderr.strip().splitlines()[-1]))  # noqa: S307 - our child's repr
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} processes a tree, {builds} warm builds "
          "each, to the first start: CPU ms, the median of the processes' medians")
    for tree, ms in meds.items():
        order = ["total"] + [p for p in ms[0] if p != "total"]
        print(f"{tree}: " + ", ".join(f"{p} {statistics.median(m[p] for m in ms):.2f}" for p in order))


def child_env(tree: Path) -> dict:
    """farmer from `tree`, with xxhash and toml_rs from this interpreter's site-packages."""
    import toml_rs
    import xxhash

    path = os.pathsep.join([str(tree), str(Path(xxhash.__file__).parent.parent),
                            str(Path(toml_rs.__file__).parent.parent)])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the first run writes farmer's bytecode
    return env


def compared(size: int, repeat: int, work: Path, trees: list[Path]) -> None:
    """The trees' builds interleaved, each as `farmer build` runs it: wall to the first
    spawn and farmer's CPU to its fork, medians and the fastest quarter."""
    import statistics
    import subprocess

    runs: dict[Path, list[tuple[float, float]]] = {t: [] for t in trees}
    for k in range(repeat + 1):
        for tree in trees:
            d = project(size, work)
            cp = subprocess.run([sys.executable, "-S", "-c", _LAUNCH, str(d)], env=child_env(tree),
                                capture_output=True, text=True)
            marks = {line.split()[0]: line.split()[1:] for line in cp.stderr.splitlines()
                     if line.startswith(("SPAWN ", "FORK "))}
            if cp.returncode or "SPAWN" not in marks:
                sys.exit(f"the build failed (farmer from {tree}):\n{cp.stderr}")
            if k:  # the first compiled the bytecode
                cpu = float(marks["FORK"][0] if "FORK" in marks else marks["SPAWN"][1])
                runs[tree].append((float(marks["SPAWN"][0]) * 1000, cpu * 1000))
    print(f"load average {os.getloadavg()[0]:.1f}; {repeat} interleaved runs each")
    for tree, rs in runs.items():
        walls, cpus = sorted(w for w, _ in rs), sorted(c for _, c in rs)
        quarter = max(1, len(rs) // 4)
        print(f"{tree}: wall to the first spawn {statistics.median(walls):.1f} ms (fastest quarter "
              f"{walls[0]:.1f}-{walls[quarter - 1]:.1f}), farmer's CPU at its fork "
              f"{statistics.median(cpus):.1f} ms ({cpus[0]:.1f}-{cpus[quarter - 1]:.1f})")


def repeated(size: int, repeat: int, work: Path, tree: Path) -> None:
    """Fresh processes, without the profiler: CPU and wall to the first command."""
    import statistics
    import subprocess

    env = child_env(tree)
    runs = []
    for k in range(repeat + 1):
        d = project(size, work)
        cp = subprocess.run([sys.executable, "-S", "-c", _CHILD, str(d)], env=env,
                            capture_output=True, text=True)
        if cp.returncode:
            sys.exit(f"the build failed (farmer from {tree}):\n{cp.stderr}")
        if k:  # the first compiled the bytecode
            runs.append(eval(cp.stderr.strip().splitlines()[-1]))  # noqa: S307 - our child's repr
    med = {k: statistics.median(r[k] for r in runs) * 1000 for k in runs[0]}
    print(f"load average {os.getloadavg()[0]:.1f}; {repeat} runs, medians: first command after "
          f"{med['cpu']:.1f} ms of CPU and {med['wall']:.1f} ms of wall time (in the build's "
          "process, after the interpreter's start); CPU ms: "
          + ", ".join(f"{k} {v:.1f}" for k, v in med.items() if k not in ("cpu", "wall")))


def memory() -> None:
    tracemalloc.start(1)
    import farmer.build.run as build_mod
    import farmer.graph.load as project_mod
    import farmer.plan.session as session_mod
    import farmer.run.scheduler as scheduler_mod

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
    ap.add_argument("--warm", type=int, default=0)
    ap.add_argument("--cold", type=int, default=0)
    ap.add_argument("--tree", default=str(bench.REPO_ROOT),
                    help="with --repeat: the directory holding the farmer/ to run (another commit's, "
                         "from git archive COMMIT farmer | tar -x -C DIR)")
    ap.add_argument("--compare", nargs="+", metavar="DIR",
                    help="with --repeat: these trees' builds interleaved, each as `farmer build` runs "
                         "it: the wall time to the first spawn (in farmer or its process starter) "
                         "and farmer's CPU to its fork")
    args = ap.parse_args()
    if args.cold:
        cold(args.size, args.cold, bench.BENCH_DIR / "work", [Path(t).resolve() for t in args.compare or [args.tree]])
        return 0
    if args.warm:
        trees = [Path(t).resolve() for t in args.compare or [args.tree]]
        warm(args.size, args.warm, bench.BENCH_DIR / "work", trees, args.repeat or 5)
        return 0
    if args.compare:
        compared(args.size, args.repeat or 7, bench.BENCH_DIR / "work", [Path(t).resolve() for t in args.compare])
        return 0
    if args.repeat:
        repeated(args.size, args.repeat, bench.BENCH_DIR / "work", Path(args.tree).resolve())
        return 0
    os.chdir(project(args.size, bench.BENCH_DIR / "work"))
    if args.memory:
        memory()
    else:
        first_command(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
