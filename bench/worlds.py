#!/usr/bin/env python3
"""Worlds benchmark: many small Python steps that share an expensive start.

    python bench/worlds.py [--tasks 50] [--jobs 2] [--repeat 3]
                           [--workload imports,dataset] [--dataset-mb 100] [--out FILE.md]
    python bench/worlds.py --watch [--tasks 50] [--dataset-mb 19] [--edits 10] [--wakeup-steps 10000]

Each workload is N small analyses (one per output) run by the same script, three ways,
with the same -j:

  farmer   `farmer build -j J`: the world's setup pays the expensive start once, every
           analysis is a fork of it (the last one runs in the world itself)
  fresh    `farmer build -j J --no-worlds`: every analysis a fresh python3 that runs the
           world's setup first
  make     `make -j J`: every analysis a fresh `python3 SCRIPT` (the script imports or
           loads what it needs itself)

Workloads:
  imports  the script imports numpy, networkx and rich (console, table, markdown, syntax:
           pygments comes with it), then analyses a small random graph and renders a table
  dataset  the script loads a generated JSON dataset (~--dataset-mb MB) and aggregates a
           slice of it; the world loads it once in setup

With --watch: the time from saving one edited analysis script (both workloads in one world:
the imports and a --dataset-mb JSON dataset loaded in setup; one script per output) to its
output rewritten, with `farmer watch` (the world warm), `farmer build` run right after the
save, and `make -j J` likewise; then the CPU time a watch of --wakeup-steps computations
spends when a source is touched but not changed (net of its idle CPU), which must run
nothing.

The script is written the way a worlds user writes one: it imports (a no-op in a world,
where the module is in sys.modules already) and loads the dataset only when the world
has not (`if "DATA" not in globals()`), so it runs unchanged under make.

Every timed run is a clean build (out/ and .farmer/ removed). Figures: the median and the
best wall time (perf_counter around the tool's process), and the median CPU time of the
tool and all its processes (which other load on the machine hardly changes). All three
must write byte-identical outputs, which is checked. Stdlib only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent

IMPORTS_SCRIPT = '''\
import io, sys
import numpy as np
import networkx as nx
from rich.console import Console
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.table import Table

i, out = int(sys.argv[1]), sys.argv[2]
g = nx.gnm_random_graph(150, 600, seed=i)
central = nx.degree_centrality(g)
clustering = nx.clustering(g)
top = sorted(central, key=lambda n: (-central[n], n))[:5]
degrees = np.array([d for _, d in g.degree()])
table = Table(title=f"graph {i}")
for col in ("node", "centrality", "clustering"):
    table.add_column(col)
for n in top:
    table.add_row(str(n), f"{central[n]:.4f}", f"{clustering[n]:.4f}")
console = Console(file=io.StringIO(), width=80, color_system=None)
console.print(table)
console.print(f"mean degree {degrees.mean():.3f}, components {nx.number_connected_components(g)}")
with open(out, "w") as f:
    f.write(console.file.getvalue())
'''

IMPORTS_SETUP = [
    "import io, numpy, networkx",
    "import rich.console, rich.markdown, rich.syntax, rich.table",
    # Exercise the libraries once, so that their lazy caches are built here, in the world,
    # and not again in every fork (generic calls, not the analysis itself).
    "rich.console.Console(file=io.StringIO(), color_system=None).print(rich.table.Table('a', 'b'))",
    "_g = networkx.gnm_random_graph(10, 20, seed=0)",
    "networkx.degree_centrality(_g), networkx.clustering(_g), networkx.number_connected_components(_g)",
]

DATASET_SCRIPT = '''\
import sys

from load import INDEX  # in a world, setup imported it: loaded and indexed once per build

i, out = int(sys.argv[1]), sys.argv[2]
ids, values, tags = INDEX[i]
best = max(range(len(values)), key=lambda k: (values[k], ids[k]))
with open(out, "w") as f:
    f.write(f"group {i}: {len(values)} rows, total {sum(values):.3f}, "
            f"best {ids[best]} {tags.split(chr(10))[best]}\\n")
'''

# The project's loader: the JSON rows become one compact record per group (arrays and a
# string), and the rows themselves are dropped. A fork then shares a small heap, and a task
# touches only its group's few objects: no copy-on-write of the whole dataset.
LOADER = '''\
import array, json

def _index(path):
    with open(path) as f:
        rows = json.load(f)["rows"]
    groups = {}
    for r in rows:
        g = groups.setdefault(r["group"], ([], [], []))
        g[0].append(r["id"])
        g[1].append(r["value"])
        g[2].append(r["tag"])
    return {k: (array.array("q", ids), array.array("d", values), "\\n".join(tags))
            for k, (ids, values, tags) in groups.items()}

INDEX = _index("data/dataset.json")
'''

DATASET_SETUP = ["from load import INDEX"]


def write_project(work: Path, workload: str, tasks: int, dataset_mb: int) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    script = IMPORTS_SCRIPT if workload == "imports" else DATASET_SCRIPT
    setup = IMPORTS_SETUP if workload == "imports" else DATASET_SETUP
    (work / "analyze.py").write_text(script)
    inputs = ["analyze.py"]
    if workload == "dataset":
        (work / "load.py").write_text(LOADER)
        inputs += ["load.py", "data/dataset.json"]
        cached = BENCH_DIR / "work" / "worlds-datasets" / f"{tasks}x{dataset_mb}MB.json"
        if not cached.exists():  # generating 100 MB takes a while: once per size
            write_dataset(cached.with_suffix(".tmp"), tasks, dataset_mb)
            cached.with_suffix(".tmp").rename(cached)
        (work / "data").mkdir()
        os.link(cached, work / "data" / "dataset.json")
    ids = [str(i) for i in range(tasks)]
    (work / "Farmfile").write_text(
        f"[world.w]\nsetup = {json.dumps(setup)}\n"
        + (f"inputs = {json.dumps(inputs[1:])}\n" if workload == "dataset" else "")
        + f"\n[task.analyze]\nforeach = {{i = {json.dumps(ids)}}}\nworld = \"w\"\n"
        f"inputs = [\"analyze.py\"]\noutputs = [\"out/{{i}}.txt\"]\n"
        f"python = \"analyze.py {{i}} {{outputs}}\"\n")
    rules = "".join(f"out/{i}.txt: {' '.join(inputs)}\n\t@mkdir -p out && python3 analyze.py {i} $@\n\n"
                    for i in ids)
    (work / "Makefile").write_text(
        "all: " + " ".join(f"out/{i}.txt" for i in ids) + "\n.PHONY: all\n\n" + rules)


def write_dataset(path: Path, groups: int, megabytes: int) -> None:
    """Deterministic rows of ~100 bytes of JSON each, spread over `groups` groups."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20261130)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    n = megabytes * 1024 * 1024 // 100
    with open(path, "w") as f:
        f.write('{"rows": [')
        for k in range(n):
            row = {"id": k, "group": k % groups, "value": round(rng.random() * 1000, 3),
                   "tag": rng.choice(words) + "-" + rng.choice(words), "flag": rng.random() < 0.5}
            f.write(("," if k else "") + json.dumps(row))
        f.write("]}")


def clean(work: Path) -> None:
    for d in ("out", ".farmer"):
        shutil.rmtree(work / d, ignore_errors=True)


def run(cmd: list[str], work: Path) -> tuple[float, float]:
    """Wall time, and CPU time (user + system) of the tool and every process under it: all
    are reaped by their parents, so RUSAGE_CHILDREN counts them. CPU time hardly moves when
    other work shares the machine; wall time does."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cp = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cp.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed in {work} ({cp.returncode}):\n{cp.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def digest(work: Path, tasks: int) -> str:
    h = hashlib.sha256()
    for i in range(tasks):
        h.update((work / "out" / f"{i}.txt").read_bytes())
    return h.hexdigest()


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{model or platform.processor()}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def bench(workload: str, tasks: int, jobs: int, repeat: int, dataset_mb: int) -> dict:
    work = BENCH_DIR / "work" / f"worlds-{workload}"
    write_project(work, workload, tasks, dataset_mb)
    farmer = [sys.executable, "-m", "farmer", "build", "-j", str(jobs)]
    tools = {"farmer": farmer, "fresh": farmer + ["--no-worlds"], "make": ["make", "-s", "-j", str(jobs)]}
    times: dict[str, list[float]] = {t: [] for t in tools}
    cpus: dict[str, list[float]] = {t: [] for t in tools}
    digests = {}
    for r in range(repeat):
        for name, cmd in tools.items():
            clean(work)
            wall, cpu = run(cmd, work)
            times[name].append(wall)
            cpus[name].append(cpu)
            digests[name] = digest(work, tasks)
        print(f"  {workload} run {r + 1}/{repeat}: " +
              ", ".join(f"{t} {times[t][-1]:.2f} s ({cpus[t][-1]:.1f} s CPU)" for t in tools),
              flush=True)
    if len(set(digests.values())) != 1:
        raise SystemExit(f"outputs differ between tools: {digests}")
    return {"workload": workload, "tasks": tasks, "jobs": jobs, "repeat": repeat,
            "median": {t: statistics.median(v) for t, v in times.items()},
            "best": {t: min(v) for t, v in times.items()},
            "cpu": {t: statistics.median(v) for t, v in cpus.items()}, "runs": times}


# -- farmer watch: from saving an edited analysis to its output rewritten ----------------

EDIT_SCRIPT = '''\
import io, sys
import networkx as nx
import numpy as np
from rich.console import Console
from rich.table import Table

from load import INDEX  # in a world, setup imported it: loaded and indexed once

EDIT = 0
i, out = int(sys.argv[1]), sys.argv[2]
ids, values, tags = INDEX[i]
g = nx.gnm_random_graph(60, 120, seed=i)
table = Table(title=f"group {i}, edit {EDIT}")
for col in ("rows", "total", "mean degree"):
    table.add_column(col)
table.add_row(str(len(values)), f"{sum(values):.3f}", f"{np.mean([d for _, d in g.degree()]):.2f}")
console = Console(file=io.StringIO(), width=80, color_system=None)
console.print(table)
with open(out, "w") as f:
    f.write(console.file.getvalue())
'''


def write_edit_project(work: Path, tasks: int, dataset_mb: int) -> None:
    """The imports and dataset workloads together: the world imports numpy, networkx and
    rich and loads the JSON dataset; one analysis script per output, so that an edit
    reruns one analysis."""
    write_project(work, "dataset", tasks, dataset_mb)
    (work / "analyze.py").unlink()
    (work / "analyses").mkdir()
    for i in range(tasks):
        (work / "analyses" / f"a{i}.py").write_text(EDIT_SCRIPT)
    ids = [str(i) for i in range(tasks)]
    (work / "Farmfile").write_text(
        f"[world.w]\nsetup = {json.dumps(IMPORTS_SETUP + DATASET_SETUP)}\n"
        f"inputs = [\"load.py\", \"data/dataset.json\"]\n\n"
        f"[task.analyze]\nforeach = {{i = {json.dumps(ids)}}}\nworld = \"w\"\n"
        f"inputs = [\"analyses/a{{i}}.py\"]\noutputs = [\"out/{{i}}.txt\"]\n"
        f"python = \"analyses/a{{i}}.py {{i}} {{outputs}}\"\n")
    rules = "".join(f"out/{i}.txt: analyses/a{i}.py load.py data/dataset.json\n"
                    f"\t@mkdir -p out && PYTHONPATH=. python3 analyses/a{i}.py {i} $@\n\n" for i in ids)
    (work / "Makefile").write_text(
        "all: " + " ".join(f"out/{i}.txt" for i in ids) + "\n.PHONY: all\n\n" + rules)


def _save_edit(work: Path, i: int, k: int) -> None:
    """Save analysis i with edit k as an editor does: a new file renamed over the old."""
    path = work / "analyses" / f"a{i}.py"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(EDIT_SCRIPT.replace("EDIT = 0", f"EDIT = {k}"))
    os.replace(tmp, path)


def _rewritten(work: Path, i: int, k: int, timeout: float = 60.0) -> None:
    out = work / "out" / f"{i}.txt"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if re.search(rf"edit {k}\b", out.read_text()):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.001)
    raise SystemExit(f"{out} was not rewritten with edit {k} in {timeout:g} s")


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _watch(work: Path, argv: list[str]) -> tuple[subprocess.Popen, Path]:
    """`farmer watch` started in `work`, once it waits after its first build."""
    err = work.parent / f"{work.name}-watch.err"
    with open(err, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "farmer", "watch", *argv], cwd=work, env=_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f)
    _waits(proc, err, 1)
    return proc, err


def _waits(proc: subprocess.Popen, err: Path, n: int, timeout: float = 300.0) -> None:
    """Until the watch says it waits for the n-th time."""
    deadline = time.monotonic() + timeout
    while err.read_text().count("waiting for changes") < n:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"farmer watch ended or hung:\n{err.read_text()}")
        time.sleep(0.005)


def edit_latency(tasks: int, jobs: int, edits: int, dataset_mb: int) -> dict:
    """Seconds from saving one edited analysis to its output rewritten: `farmer watch`
    (worlds warm), `farmer build` run right after the save, and `make` likewise."""
    work = BENCH_DIR / "work" / "worlds-watch"
    write_edit_project(work, tasks, dataset_mb)
    times: dict[str, list[float]] = {"watch": [], "build": [], "make": []}
    run([sys.executable, "-m", "farmer", "build", "-j", str(jobs)], work)
    run(["make", "-s", "-j", str(jobs)], work)
    proc, err = _watch(work, ["-j", str(jobs)])
    try:
        for k in range(1, edits + 1):
            time.sleep(0.3)
            _save_edit(work, k % tasks, k)
            t0 = time.perf_counter()
            _rewritten(work, k % tasks, k)
            times["watch"].append(time.perf_counter() - t0)
            _waits(proc, err, k + 1)
    finally:
        proc.send_signal(2)
        proc.wait(10)
    for name, cmd in (("build", [sys.executable, "-m", "farmer", "build", "-j", str(jobs)]),
                      ("make", ["make", "-s", "-j", str(jobs)])):
        for k in range(edits + 1, 2 * edits + 1):
            _save_edit(work, k % tasks, k)
            t0 = time.perf_counter()
            run(cmd, work)
            _rewritten(work, k % tasks, k, timeout=0.0)  # it has been: the tool has ended
            times[name].append(time.perf_counter() - t0)
    print(f"  edit to output, {edits} edits: " + ", ".join(
        f"{t} median {statistics.median(v) * 1000:.0f} ms (best {min(v) * 1000:.0f})"
        for t, v in times.items()), flush=True)
    return {"tasks": tasks, "jobs": jobs, "dataset_mb": dataset_mb, "edits": edits,
            "median": {t: statistics.median(v) for t, v in times.items()},
            "best": {t: min(v) for t, v in times.items()}}


def _cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid` so far, in ns (schedstat: finer than clock ticks)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def noop_wakeup(n: int, touches: int) -> dict:
    """The CPU a watch of n computations spends on a file touched but unchanged, net of
    what it spends idle over the same time; and that it runs nothing."""
    work = BENCH_DIR / "work" / f"watch-wakeup-{n}"
    if not (work / ".farmer").exists():
        shutil.rmtree(work, ignore_errors=True)
        (work / "src").mkdir(parents=True)
        for i in range(n):
            (work / "src" / f"{i}.txt").write_text(f"{i}\n")
        (work / "Farmfile").write_text('[task.copy]\nforeach = "src/{n}.txt"\ninputs = ["src/{n}.txt"]\n'
                                       'outputs = ["out/{n}.txt"]\ncmd = "cp {inputs} {outputs}"\n')
        run([sys.executable, "-m", "farmer", "build"], work)
    proc, err = _watch(work, [])
    pause = 0.4
    try:
        time.sleep(1.0)
        idle0 = _cpu_ns(proc.pid)
        time.sleep(pause * touches)
        idle = _cpu_ns(proc.pid) - idle0
        before = _cpu_ns(proc.pid)
        for k in range(touches):
            path = work / "src" / f"{k * 7 % n}.txt"
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
            time.sleep(pause)
        busy = _cpu_ns(proc.pid) - before
        ran = err.read_text().count(" changed")
    finally:
        proc.send_signal(2)
        proc.wait(10)
    if ran:
        raise SystemExit(f"a touched file started {ran} builds:\n{err.read_text()}")
    per = max(0, busy - idle) / touches / 1e6
    print(f"  no-op wake-up at {n} computations: {per:.2f} ms CPU each "
          f"({touches} touches, idle {idle / 1e6:.1f} ms over the same time), nothing ran", flush=True)
    return {"computations": n, "touches": touches, "cpu_ms": per, "idle_ms": idle / 1e6}


def table(results: list[dict]) -> str:
    lines = ["| workload | figure | farmer (worlds) | farmer --no-worlds | make -j | "
             "make / farmer | --no-worlds / farmer |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        name = f"{r['workload']} ({r['tasks']} tasks, -j {r['jobs']})"
        for key, label in (("median", "wall, median"), ("best", "wall, best"), ("cpu", "CPU, median")):
            m = r[key]
            lines.append(f"| {name} | {label} | {m['farmer']:.2f} s | {m['fresh']:.2f} s | "
                         f"{m['make']:.2f} s | {m['make'] / m['farmer']:.1f}x | "
                         f"{m['fresh'] / m['farmer']:.1f}x |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workload", default="imports,dataset")
    ap.add_argument("--dataset-mb", type=int, default=100)
    ap.add_argument("--out", help="append the results as Markdown to this file")
    ap.add_argument("--watch", action="store_true",
                    help="instead: the edit-to-output time with farmer watch, farmer build and "
                         "make (imports and a --dataset-mb dataset in one world), and the CPU "
                         "of a no-op wake-up at --wakeup-steps computations")
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--wakeup-steps", type=int, default=10000)
    args = ap.parse_args()
    if shutil.which("make") is None:
        raise SystemExit("make is not on PATH")
    print(f"machine: {machine()}", flush=True)
    if args.watch:
        edit = edit_latency(args.tasks, args.jobs, args.edits, args.dataset_mb)
        wake = noop_wakeup(args.wakeup_steps, 20)
        text = ("| from saving one edited analysis to its output rewritten | farmer watch | "
                "farmer build after the save | make -j after the save |\n| --- | ---: | ---: | ---: |\n"
                + "".join(f"| {label} ({edit['edits']} edits, {edit['tasks']} analyses, "
                          f"{edit['dataset_mb']} MB, -j {edit['jobs']}) | "
                          + " | ".join(f"{edit[key][t] * 1000:.0f} ms" for t in ("watch", "build", "make"))
                          + " |\n" for key, label in (("median", "median"), ("best", "best")))
                + f"\nNo-op wake-up (a source touched, content unchanged) at {wake['computations']} "
                  f"computations: {wake['cpu_ms']:.2f} ms CPU each, nothing ran.\n")
        print(text)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.out:
            with open(args.out, "a") as f:
                f.write(f"\nMachine: {machine()}\n\n{text}")
        return
    results = [bench(w, args.tasks, args.jobs, args.repeat, args.dataset_mb)
               for w in args.workload.split(",")]
    text = table(results)
    print(text)
    for r in results:
        m = r["median"]
        print(f"{r['workload']}: farmer with worlds is {m['make'] / m['farmer']:.1f}x faster than "
              f"make -j {r['jobs']} and {m['fresh'] / m['farmer']:.1f}x faster than --no-worlds")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\nMachine: {machine()}\n\n{text}\n")


if __name__ == "__main__":
    main()
