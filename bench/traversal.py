#!/usr/bin/env python3
"""Cold Farmfile parse and traversal of N computations written with `foreach`.

    python bench/traversal.py [--size 100000] [--repeat 5] [--command plan|build-n]
                              [--alias ref|glob] [--farmer-rev REV] [--no-command] [--profile]

Generates into bench/work/traversal-n{N}/ (reused while its Farmfile is the same):
N/2 sources `src/{i}.txt`, a foreach task `compile` (`src/{i}.txt` -> `out/a/{i}.txt`), a
foreach task `copy` over compile's declared outputs (`out/a/{i}.txt` -> `out/b/{i}.txt`)
and an alias `all` over copy's outputs (`@copy`, or the glob `out/b/**` with
--alias glob). Nothing is built: the outputs never exist, as after a Farmfile change in a
clean tree. Measured in fresh processes, median of --repeat:

  import   `import farmer.graph.load` in a fresh `python -c`
  load     `farmer.graph.load.load(path, write_cache=False)` in that process: TOML parse,
           directory walk, foreach matching, rendering, fingerprints, graph checks
  command  the whole `farmer plan all` (or `farmer build -n all`) with no graph cache

--profile runs the load once under cProfile and prints the top 25 by tottime.
Stdlib only.
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
import run as bench  # noqa: E402  (bench/run.py: paths and the environment farmer runs in)

# Runs in the fresh interpreter: prints import and load seconds and the graph's size.
_TIMER = """
import sys, time
t0 = time.perf_counter()
import farmer.graph.load
from pathlib import Path
t1 = time.perf_counter()
spec, graph = farmer.graph.load.load(Path(sys.argv[1]), write_cache=False)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, len(graph.computations), farmer.graph.load.__file__)
"""

_PROFILER = """
import cProfile, pstats, sys
import farmer.graph.load
from pathlib import Path
prof = cProfile.Profile()
prof.enable()
farmer.graph.load.load(Path(sys.argv[1]), write_cache=False)
prof.disable()
pstats.Stats(prof).strip_dirs().sort_stats("tottime").print_stats(int(sys.argv[2]))
"""


def farmfile_text(alias: str) -> str:
    gather = '"@copy"' if alias == "ref" else '"out/b/**"'
    return f"""\
[farmer]
default = ["all"]

[task.compile]
foreach = "src/{{i}}.txt"
inputs = ["src/{{i}}.txt"]
outputs = ["out/a/{{i}}.txt"]
cmd = "cat {{inputs}} > {{outputs}}"

[task.copy]
foreach = "out/a/{{i}}.txt"
inputs = ["out/a/{{i}}.txt"]
outputs = ["out/b/{{i}}.txt"]
cmd = "cat {{inputs}} > {{outputs}}"

[task.all]
inputs = [{gather}]
"""


def generate(size: int, alias: str, work: Path) -> Path:
    """The project for `size` computations (size/2 per foreach task, plus the alias)."""
    d = work / f"traversal-n{size}{'-glob' if alias == 'glob' else ''}"
    farmfile = d / "Farmfile"
    text = farmfile_text(alias)
    sources = size // 2
    src = d / "src"
    if farmfile.exists() and farmfile.read_text() == text and src.is_dir() \
            and len(os.listdir(src)) == sources:
        return d
    if d.exists():
        shutil.rmtree(d)
    src.mkdir(parents=True)
    for i in range(sources):
        with open(src / f"{i}.txt", "w") as f:
            f.write(f"{i}\n")
    farmfile.write_text(text)
    return d


def export(rev: str, dest: Path) -> Path:
    """`git archive REV farmer/` into dest/: measure a commit, not the shared working tree."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(bench.REPO_ROOT), "archive", "--format=tar", rev, "farmer"],
                         capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest


def drop_cache(d: Path) -> None:
    """Cold: whatever made .farmer/ (an earlier build) must not spare the traversal."""
    try:
        os.unlink(d / ".farmer" / "graph.cache")
    except FileNotFoundError:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100000, help="computations (default 100000)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure; the median is shown")
    ap.add_argument("--command", choices=("plan", "build-n"), default="plan",
                    help="the whole command timed: `farmer plan all` or `farmer build -n all`")
    ap.add_argument("--alias", choices=("ref", "glob"), default="ref",
                    help="the alias gathers `@copy` (default) or the glob `out/b/**`")
    ap.add_argument("--farmer-rev", metavar="REV",
                    help="measure farmer/ as of this commit (git archive) instead of the working tree")
    ap.add_argument("--no-command", action="store_true",
                    help="time only the load, not the whole command (quicker while iterating)")
    ap.add_argument("--profile", action="store_true",
                    help="run the load once under cProfile; print the top 25 by tottime")
    ap.add_argument("--top", type=int, default=25, help="entries of the profile (default 25)")
    ap.add_argument("--work", type=Path, default=bench.BENCH_DIR / "work")
    args = ap.parse_args()

    work = args.work.resolve()
    t0 = time.perf_counter()
    d = generate(args.size, args.alias, work)
    print(f"project: {d} ({time.perf_counter() - t0:.1f} s to generate or check)", file=sys.stderr)
    env = bench.farmer_env_base(work)
    if args.farmer_rev:
        src = export(args.farmer_rev, work / "farmer-src-traversal")
        print(f"farmer/ as of {args.farmer_rev} in {src}", file=sys.stderr)
    else:
        src = bench.REPO_ROOT
    env["PYTHONPATH"] = str(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    farmfile = str(d / "Farmfile")

    # One untimed run writes the bytecode cache, as an installed farmer would have it. Every
    # run starts in the project, so that `python -c` cannot import farmer/ from where we are.
    subprocess.run([sys.executable, "-c", "import farmer.cli.app, farmer.graph.load"], env=env, cwd=d, check=True)

    if args.profile:
        drop_cache(d)
        subprocess.run([sys.executable, "-c", _PROFILER, farmfile, str(args.top)], env=env, cwd=d, check=True)
        return 0

    imports, loads, commands = [], [], []
    count = 0
    for _ in range(args.repeat):
        drop_cache(d)
        cp = subprocess.run([sys.executable, "-c", _TIMER, farmfile], env=env, cwd=d,
                            capture_output=True, text=True)
        if cp.returncode != 0:
            print(f"load failed:\n{cp.stderr[-2000:]}", file=sys.stderr)
            return 1
        imp, load, n, where = cp.stdout.strip().split(None, 3)
        imports.append(float(imp))
        loads.append(float(load))
        count = int(n)
    verb = ["plan"] if args.command == "plan" else ["build", "-n"]
    for _ in range(0 if args.no_command else args.repeat):
        drop_cache(d)
        t0 = time.perf_counter()
        cp = subprocess.run([sys.executable, "-m", "farmer", *verb, "-C", str(d), "all"], env=env, cwd=d,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        commands.append(time.perf_counter() - t0)
        if cp.returncode != 0:
            print(f"farmer {' '.join(verb)} failed (rc={cp.returncode}):\n{cp.stderr[-2000:]}",
                  file=sys.stderr)
            return 1

    load = statistics.median(loads)
    print(f"\nfarmer from {Path(where).parent.parent}")
    print(f"{count} computations, {args.repeat} runs each (median; min-max), "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| figure | median s | min s | max s | per computation |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, xs in (("import farmer.graph.load", imports), ("project.load (cold)", loads),
                     (f"farmer {' '.join(verb)} all (cold, whole process)", commands)):
        if not xs:
            continue
        per = f"{statistics.median(xs) / count * 1e6:.1f} µs" if xs is not imports else ""
        print(f"| {name} | {statistics.median(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} | {per} |")
    print(f"\ncold parse+traversal: {load:.3f} s ({'meets' if load <= 1.0 else 'misses'} the 1 s target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
