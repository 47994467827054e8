#!/usr/bin/env python3
"""Prediction benchmark: `farmer plan --simulate` against the real build, and the makespan of
farmer, make and ninja (>= 1.12) against the lower bound, on graphs of sleeping steps.

    python bench/predict.py [--jobs 2] [--reps 3] [--graphs 3] [--out FILE.md] [--json FILE]
                            [--ninja PATH] [--farmer CMD | --farmer-rev REV] [--seed S]

Graphs (seeded, deterministic): `--graphs` random layered DAGs of 40-80 steps, each step
`sleep D && cat INPUTS > out/NAME.txt` (or `echo NAME > ...` without inputs) with D uniform in
0.05-0.4 s; and two *skewed* graphs in which 48 short compile-like steps (0.05-0.2 s) feeding a
thin chain of 4 link-like steps come first in manifest order and three chains of 4 steps come
LAST: `skewed` (one chain of 4 x 1.5 s, two of 4 x 0.25 s: the long chain alone outlasts
everything else that is left when FIFO order reaches it) and `skewed-even` (3 chains of
4 x 0.5 s: at -j 2 three equal chains keep both slots busy on their own, so no order can lose
much there; a control). Every compile step is 5 steps from the end and every chain head 4, so
a unit-weight critical path (ninja >= 1.12) ranks the short steps first too.

Each graph is written as a Farmfile (one explicit [task.NAME] per step plus an `all` alias),
a build.ninja and a Makefile with byte-identical commands, one directory per tool under
bench/work/predict/ (wiped at the start). For each graph:

  farmer  learn: clean build from nothing (`farmer build -j N all`); then per repetition:
          predict: `farmer plan --simulate --from-scratch --json -j N all`;
          measure: remove out/ and .farmer/last-build.json (state.db, i.e. the history,
          stays) and build again; compare the predicted makespan with `wall_s` from
          last-build.json and with the wall time measured around the process.
  ninja   one untimed build first (so .ninja_log exists, in case the version uses it), then per
          repetition: remove out/, build (.ninja_log kept).
  make    per repetition: remove out/, `make -j N all`.

After every build out/ must hold exactly the expected files and contents. The lower bound is
max(critical path, total work / N) over the sleep durations written into the commands (the
true durations, not farmer's estimates; process start-up is not in them). Makespan is the wall
time around the tool's process (median over the repetitions); for farmer also `wall_s`.

ninja: `--ninja PATH`, else bench/work/venv/bin/ninja, created on first use with
`python -m venv bench/work/venv && bench/work/venv/bin/pip install 'ninja>=1.12'`.
Stdlib only.
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
SEED = 20261201
WORK_NAME = "predict"          # bench/work/predict/ belongs to this script alone

# --------------------------------------------------------------------------------------
# Graphs
# --------------------------------------------------------------------------------------


@dataclass
class Step:
    name: str
    inputs: list[int]          # indices of producer steps
    dur: float                 # seconds of sleep
    role: str = ""             # for the skewed graphs: short / link / chainA / ...

    @property
    def out(self) -> str:
        return f"out/{self.name}.txt"


@dataclass
class Graph:
    name: str
    steps: list[Step]          # in manifest order (topological)
    note: str = ""
    roots: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        used = {p for s in self.steps for p in s.inputs}
        self.roots = [k for k in range(len(self.steps)) if k not in used]

    def cmd(self, k: int) -> str:
        s = self.steps[k]
        if s.inputs:
            body = "cat " + " ".join(self.steps[p].out for p in s.inputs)
        else:
            body = f"echo {s.name}"
        return f"sleep {s.dur:.3f} && {body} > {s.out}"

    def expected(self) -> dict[str, bytes]:
        content: dict[str, bytes] = {}
        for s in self.steps:
            if s.inputs:
                content[s.out] = b"".join(content[self.steps[p].out] for p in s.inputs)
            else:
                content[s.out] = f"{s.name}\n".encode()
        return content

    def work(self) -> float:
        return sum(s.dur for s in self.steps)

    def critical_path(self) -> float:
        """Longest chain of sleep durations."""
        finish: list[float] = []
        for s in self.steps:
            finish.append(s.dur + max((finish[p] for p in s.inputs), default=0.0))
        return max(finish, default=0.0)

    def lower_bound(self, jobs: int) -> float:
        return max(self.critical_path(), self.work() / jobs)


def random_graph(rng: random.Random, name: str) -> Graph:
    """A layered DAG of 40-80 steps in 4-7 layers; each step above layer 0 reads one step
    of the layer below and 0-2 more from any earlier layer."""
    n = rng.randint(40, 80)
    n_layers = rng.randint(4, 7)
    first = max(4, round(n * rng.uniform(0.25, 0.4)))
    rest = n - first
    weights = [rng.uniform(0.5, 1.5) for _ in range(n_layers - 1)]
    sizes = [max(1, round(rest * w / sum(weights))) for w in weights]
    sizes[-1] += rest - sum(sizes)
    while sizes[-1] < 1:                 # rounding took too much from the last layer
        big = max(range(len(sizes) - 1), key=lambda i: sizes[i])
        sizes[big] -= 1
        sizes[-1] += 1
    layers: list[list[int]] = []
    steps: list[Step] = []
    for li, size in enumerate([first] + sizes):
        cur = []
        for _ in range(size):
            k = len(steps)
            ins: list[int] = []
            if li:
                ins.append(rng.choice(layers[-1]))
                earlier = [j for layer in layers for j in layer]
                for _ in range(rng.choices((0, 1, 2), weights=(3, 5, 2))[0]):
                    c = rng.choice(earlier)
                    if c not in ins:
                        ins.append(c)
            steps.append(Step(f"s{k}", ins, round(rng.uniform(0.05, 0.4), 3)))
            cur.append(k)
        layers.append(cur)
    return Graph(name, steps, f"random layered DAG, {n_layers} layers")


def skewed_graph(rng: random.Random, name: str, chains: list[tuple[int, float]]) -> Graph:
    """48 short steps feeding 4 link steps, listed first; then the given chains (count of
    steps, seconds each), listed last. Every short step is 5 steps from the end (itself and 4
    links), every chain head as many as its chain has steps."""
    steps: list[Step] = []
    n_short = 48
    for k in range(n_short):
        steps.append(Step(f"short{k}", [], round(rng.uniform(0.05, 0.2), 3), "short"))
    half = n_short // 2
    steps.append(Step("link1a", list(range(half)), round(rng.uniform(0.05, 0.1), 3), "link"))
    steps.append(Step("link1b", list(range(half, n_short)), round(rng.uniform(0.05, 0.1), 3), "link"))
    steps.append(Step("link2", [n_short, n_short + 1], round(rng.uniform(0.05, 0.1), 3), "link"))
    steps.append(Step("link3", [n_short + 2], round(rng.uniform(0.05, 0.1), 3), "link"))
    for ci, (length, dur) in enumerate(chains):
        letter = "ABCDEFGH"[ci]
        prev: list[int] = []
        for j in range(length):
            steps.append(Step(f"chain{letter}{j}", prev, dur, f"chain{letter}"))
            prev = [len(steps) - 1]
    desc = ", ".join(f"{n} x {d:g} s" for n, d in chains)
    return Graph(name, steps, f"48 short steps + 4 links first, chains {desc} last")


def make_graphs(n_random: int, seed: int) -> list[Graph]:
    rng = random.Random(seed)
    graphs = [random_graph(random.Random(rng.random()), f"random-{i + 1}") for i in range(n_random)]
    graphs.append(skewed_graph(random.Random(seed + 1), "skewed", [(4, 1.5), (4, 0.25), (4, 0.25)]))
    graphs.append(skewed_graph(random.Random(seed + 1), "skewed-even", [(4, 0.5)] * 3))
    return graphs


# --------------------------------------------------------------------------------------
# Writing the three manifests
# --------------------------------------------------------------------------------------


def farmfile_text(g: Graph) -> str:
    q = json.dumps
    parts = ["# generated by bench/predict.py — do not edit\n\n"]
    for k, s in enumerate(g.steps):
        parts.append(f"[task.{s.name}]\n")
        if s.inputs:
            parts.append(f"inputs = [{', '.join(q(g.steps[p].out) for p in s.inputs)}]\n")
        parts.append(f"outputs = [{q(s.out)}]\ncmd = {q(g.cmd(k))}\n\n")
    parts.append("[task.all]\ninputs = [" + ", ".join(q(g.steps[r].out) for r in g.roots) + "]\n")
    return "".join(parts)


def ninja_text(g: Graph) -> str:
    parts = ["# generated by bench/predict.py — do not edit\n",
             "rule sh\n  command = $cmd\n\n"]
    for k, s in enumerate(g.steps):
        ins = " ".join(g.steps[p].out for p in s.inputs)
        parts.append(f"build {s.out}: sh{' ' + ins if ins else ''}\n  cmd = {g.cmd(k)}\n")
    parts.append("\nbuild all: phony " + " ".join(g.steps[r].out for r in g.roots) + "\n")
    parts.append("default all\n")
    return "".join(parts)


def makefile_text(g: Graph) -> str:
    parts = ["# generated by bench/predict.py — do not edit\n",
             "MAKEFLAGS += -rR\n.SUFFIXES:\n.PHONY: all\n.DEFAULT_GOAL := all\n\n",
             "all: " + " ".join(g.steps[r].out for r in g.roots) + "\n\n"]
    for k, s in enumerate(g.steps):
        ins = " ".join(g.steps[p].out for p in s.inputs)
        parts.append(f"{s.out}:{' ' + ins if ins else ''}\n\t{g.cmd(k)}\n")
    return "".join(parts)


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------


class BenchError(Exception):
    pass


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


_current: subprocess.Popen | None = None      # the child running now, killed on the way out


def run(argv: list[str], cwd: Path, env: dict | None, timeout: float,
        capture: bool = False) -> tuple[float, float, str]:
    """Run argv in its own session; return (wall seconds, time.time() at launch, stdout)."""
    global _current
    t_launch = time.time()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True, text=True)
    _current = p
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        p.communicate()
        raise BenchError(f"{argv[0]} timed out after {timeout} s in {cwd}")
    finally:
        _current = None
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = "\n    ".join((err or "").strip().splitlines()[-12:])
        raise BenchError(f"{shlex.join(argv)} exited {p.returncode} in {cwd}:\n    {tail}")
    return wall, t_launch, out or ""


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reset_out(d: Path) -> None:
    shutil.rmtree(d / "out", ignore_errors=True)
    (d / "out").mkdir()


def verify(g: Graph, d: Path, expected: dict[str, bytes], tool: str) -> None:
    found = {}
    for p in (d / "out").iterdir():
        found[f"out/{p.name}"] = p.read_bytes()
    if found != expected:
        missing = sorted(set(expected) - set(found))
        wrong = sorted(k for k in found if expected.get(k) != found[k])
        raise BenchError(f"{tool} on {g.name}: out/ differs: missing {missing[:3]}, "
                         f"wrong or extra {wrong[:3]}")


def end_times(g: Graph, d: Path, t_launch: float) -> dict[int, float]:
    """When each step finished, from its output's mtime (the redirection writes it once the
    sleep is over), in seconds since the tool was launched."""
    return {k: os.stat(d / s.out).st_mtime_ns / 1e9 - t_launch for k, s in enumerate(g.steps)}


def chain_heads(g: Graph) -> dict[str, int]:
    heads: dict[str, int] = {}
    for k, s in enumerate(g.steps):
        if s.role.startswith("chain") and s.role not in heads:
            heads[s.role] = k
    return heads


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


def farmer_command(override: str | None, rev: str | None, work: Path) -> tuple[list[str], dict, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)        # as an installed farmer runs
    env["PYTHONPYCACHEPREFIX"] = str(work / ".pycache")
    if override:
        return shlex.split(override), env, override
    src = REPO_ROOT
    desc = "working tree"
    if rev:
        src = work / "farmer-src"
        src.mkdir(parents=True)
        tar = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", "--format=tar", rev, "farmer"],
                             capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            tf.extractall(src)
        desc = subprocess.run(["git", "-C", str(REPO_ROOT), "log", "-1", "--format=%h %s", rev],
                              capture_output=True, text=True).stdout.strip()
    env["PYTHONPATH"] = str(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return [sys.executable, "-m", "farmer"], env, f"{sys.executable} -m farmer ({desc})"


def ensure_ninja(path: str | None, work_root: Path) -> str:
    if path:
        return path
    venv = work_root / "venv"
    exe = venv / "bin" / "ninja"
    if not exe.exists():
        log(f"installing pip's ninja into {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "ninja>=1.12"], check=True)
    return str(exe)


def version_of(argv: list[str], env: dict | None = None) -> str:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, cwd="/")
        lines = (cp.stdout or cp.stderr).strip().splitlines()
        return lines[0] if cp.returncode == 0 and lines else f"unavailable (rc={cp.returncode})"
    except OSError as e:
        return f"unavailable ({e})"


def ninja_version_ok(v: str) -> bool:
    m = re.match(r"(\d+)\.(\d+)", v)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (1, 12)


# --------------------------------------------------------------------------------------
# The benchmark of one graph
# --------------------------------------------------------------------------------------

_SIM_RE = {
    "fifo": re.compile(r"FIFO order as make:\s+([\d.]+) s"),
    "unit": re.compile(r"unit-weight critical path as ninja:\s+([\d.]+) s"),
}


def bench_graph(g: Graph, args, farmer_argv: list[str], farmer_env: dict, ninja: str) -> dict:
    j = str(args.jobs)
    base = args.work / g.name
    texts = {"Farmfile": farmfile_text(g), "build.ninja": ninja_text(g), "Makefile": makefile_text(g)}
    dirs = {}
    for tool in ("farmer", "make", "ninja"):
        d = base / tool
        d.mkdir(parents=True)
        for fn, text in texts.items():
            (d / fn).write_text(text)
        dirs[tool] = d
    expected = g.expected()
    res: dict = {
        "graph": g.name, "note": g.note, "steps": len(g.steps), "work_s": round(g.work(), 3),
        "critical_path_s": round(g.critical_path(), 3), "lower_bound_s": round(g.lower_bound(args.jobs), 3),
        "farmer": [], "make": [], "ninja": [], "learn": {},
    }
    log(f"[{g.name}] {len(g.steps)} steps ({g.note}); work {g.work():.2f} s, critical path "
        f"{g.critical_path():.2f} s, lower bound at -j {j} {g.lower_bound(args.jobs):.2f} s")
    heads = chain_heads(g)

    fd = dirs["farmer"]
    farmer_build = farmer_argv + ["build", "-j", j, "all"]
    farmer_plan = farmer_argv + ["plan", "--simulate", "--from-scratch", "--json", "-j", j, "all"]
    farmer_plan_text = farmer_argv + ["plan", "--simulate", "--from-scratch", "-j", j, "all"]

    # learn
    reset_out(fd)
    wall, _, _ = run(farmer_build, fd, farmer_env, args.timeout)
    verify(g, fd, expected, "farmer")
    res["learn"]["farmer_s"] = round(wall, 3)
    nd = dirs["ninja"]
    reset_out(nd)
    wall, t_launch, _ = run([ninja, "-j", j, "all"], nd, None, args.timeout)
    verify(g, nd, expected, "ninja")
    res["learn"]["ninja_s"] = round(wall, 3)
    ends = end_times(g, nd, t_launch)   # without .ninja_log: does the log change ninja's order?
    res["learn"]["ninja_chain_starts"] = {c: round(ends[k] - g.steps[k].dur, 3) for c, k in heads.items()}

    for rep in range(args.reps):
        # farmer: predict, then the real clean build with the history kept
        _, _, out = run(farmer_plan, fd, farmer_env, args.timeout, capture=True)
        plan = json.loads(out)
        _, _, text = run(farmer_plan_text, fd, farmer_env, args.timeout, capture=True)
        sims = {k: (float(m.group(1)) if (m := r.search(text)) else None) for k, r in _SIM_RE.items()}
        reset_out(fd)
        (fd / ".farmer" / "last-build.json").unlink(missing_ok=True)
        outer, t_launch, _ = run(farmer_build, fd, farmer_env, args.timeout)
        verify(g, fd, expected, "farmer")
        lb = json.loads((fd / ".farmer" / "last-build.json").read_text())
        ran = sum(1 for t in lb["tasks"] if t["status"] == "ran")
        if ran != len(g.steps):
            raise BenchError(f"farmer on {g.name}: {ran} computations ran, expected {len(g.steps)}")
        ends = end_times(g, fd, t_launch)
        pred = plan["makespan_s"]
        row = {
            "predicted_s": pred, "wall_s": lb["wall_s"], "outer_s": round(outer, 4),
            "build_predicted_s": lb.get("predicted_makespan_s"),
            "err_wall": (pred - lb["wall_s"]) / lb["wall_s"], "err_outer": (pred - outer) / outer,
            "plan_critical_path_s": plan["critical_path_s"], "plan_total_work_s": plan["total_work_s"],
            "sim_fifo_s": sims["fifo"], "sim_unit_s": sims["unit"],
            "chain_starts": {c: round(ends[k] - g.steps[k].dur, 3) for c, k in heads.items()},
            "measured_work_s": round(sum(t["duration_s"] or 0 for t in lb["tasks"]), 3),
        }
        res["farmer"].append(row)
        log(f"[{g.name}] rep {rep + 1}: farmer predicted {pred:.2f} s, wall_s {lb['wall_s']:.2f} s "
            f"(outer {outer:.2f} s): error {100 * row['err_wall']:+.1f}%")

        for tool in ("make", "ninja"):
            d = dirs[tool]
            reset_out(d)
            argv = ["make", "-j", j, "all"] if tool == "make" else [ninja, "-j", j, "all"]
            wall, t_launch, _ = run(argv, d, None, args.timeout)
            verify(g, d, expected, tool)
            ends = end_times(g, d, t_launch)
            res[tool].append({
                "outer_s": round(wall, 4),
                "chain_starts": {c: round(ends[k] - g.steps[k].dur, 3) for c, k in heads.items()},
            })
            log(f"[{g.name}] rep {rep + 1}: {tool} {wall:.2f} s")
    return res


# --------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------


def med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarise(r: dict) -> dict:
    f = r["farmer"]
    s = {
        "pred": med([x["predicted_s"] for x in f]),
        "wall": med([x["wall_s"] for x in f]),
        "farmer": med([x["outer_s"] for x in f]),
        "make": med([x["outer_s"] for x in r["make"]]),
        "ninja": med([x["outer_s"] for x in r["ninja"]]),
        "err": med([abs(x["err_wall"]) for x in f]),
        "err_outer": med([abs(x["err_outer"]) for x in f]),
        "sim_fifo": med([x["sim_fifo_s"] for x in f]),
        "sim_unit": med([x["sim_unit_s"] for x in f]),
    }
    return s


def fmt(v: float | None, nd: int = 2) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or not b else f"{a / b:.2f}"


def tables(results: list[dict], jobs: int) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    h1 = ["graph", "steps", "work s", "crit. path s", "lower bound s", "predicted s", "farmer wall_s",
          "farmer outer s", "error vs wall_s", "error vs outer"]
    rows1 = []
    h2 = ["graph", "lower bound s", "farmer s", "make s", "ninja s", "farmer / LB", "make / LB",
          "ninja / LB", "farmer's model of make s", "farmer's model of ninja s"]
    rows2 = []
    for r in results:
        s = summarise(r)
        lb = r["lower_bound_s"]
        rows1.append([r["graph"], str(r["steps"]), fmt(r["work_s"]), fmt(r["critical_path_s"]), fmt(lb),
                      fmt(s["pred"]), fmt(s["wall"]), fmt(s["farmer"]), pct(s["err"]), pct(s["err_outer"])])
        rows2.append([r["graph"], fmt(lb), fmt(s["farmer"]), fmt(s["make"]), fmt(s["ninja"]),
                      ratio(s["farmer"], lb), ratio(s["make"], lb), ratio(s["ninja"], lb),
                      fmt(s["sim_fifo"]), fmt(s["sim_unit"])])
    return h1, rows1, h2, rows2


def render(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(headers) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def chain_report(results: list[dict]) -> list[str]:
    """For graphs with chains: when each tool started each chain (median over the reps)."""
    lines = []
    for r in results:
        chains = sorted(r["farmer"][0]["chain_starts"]) if r["farmer"] else []
        if not chains:
            continue
        parts = []
        for tool in ("farmer", "make", "ninja"):
            cells = []
            for c in chains:
                v = med([x["chain_starts"].get(c) for x in r[tool]])
                cells.append(f"{c[5:]} {fmt(v)}")
            parts.append(f"{tool}: " + ", ".join(cells))
        first = r["learn"].get("ninja_chain_starts") or {}
        parts.append("ninja's first build, without .ninja_log: "
                     + ", ".join(f"{c[5:]} {fmt(first.get(c))}" for c in chains))
        lines.append(f"{r['graph']}: chain heads started at (s after the tool's launch: output "
                     f"mtime minus the sleep) — " + "; ".join(parts))
    return lines


def machine_info(farmer_argv, farmer_env, farmer_desc, ninja) -> list[tuple[str, str]]:
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count()
    cpu = "?"
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "log", "-1", "--format=%h %s"],
                            capture_output=True, text=True).stdout.strip()
    return [
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("nproc", str(nproc)),
        ("cpu", cpu),
        ("os", platform.platform()),
        ("python", sys.version.split()[0]),
        ("farmer", f"{version_of(farmer_argv + ['--version'], farmer_env)} via {farmer_desc}"),
        ("repo commit", commit),
        ("ninja", f"{version_of([ninja, '--version'])} ({ninja})"),
        ("make", version_of(["make", "--version"])),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", "-j", type=int, default=2, help="the same -j for every tool (default 2)")
    ap.add_argument("--reps", type=int, default=3, help="predict/measure cycles per graph (default 3)")
    ap.add_argument("--graphs", type=int, default=3, help="random graphs (default 3)")
    ap.add_argument("--only", help="comma-separated graph names (e.g. skewed,random-1)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", type=Path, help="write the tables as Markdown here")
    ap.add_argument("--json", type=Path, help="write every measurement as JSON here")
    ap.add_argument("--ninja", help="ninja binary (>= 1.12; default bench/work/venv/bin/ninja, "
                                    "installed from pip on first use)")
    ap.add_argument("--farmer", help="farmer command (default: python -m farmer from this repo)")
    ap.add_argument("--farmer-rev", metavar="REV", help="measure farmer/ as of this commit (git archive)")
    ap.add_argument("--timeout", type=float, default=300, help="per build, seconds")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be >= 1")

    command = "python " + " ".join(shlex.quote(a) for a in
                                   [os.path.relpath(__file__)] + (argv if argv is not None else sys.argv[1:]))
    work_root = BENCH_DIR / "work"
    args.work = work_root / WORK_NAME
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    ninja = ensure_ninja(args.ninja, work_root)
    farmer_argv, farmer_env, farmer_desc = farmer_command(args.farmer, args.farmer_rev, args.work)
    info = machine_info(farmer_argv, farmer_env, farmer_desc, ninja)
    for k, v in info:
        log(f"{k}: {v}")
    nv = version_of([ninja, "--version"])
    if not ninja_version_ok(nv):
        log(f"WARNING: ninja {nv} is older than 1.12: no critical-path scheduler")

    graphs = make_graphs(args.graphs, args.seed)
    if args.only:
        wanted = {s.strip() for s in args.only.split(",")}
        graphs = [g for g in graphs if g.name in wanted]
    load_before = os.getloadavg()
    log(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    results = []
    errors = []
    t0 = time.perf_counter()

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        for g in graphs:
            try:
                results.append(bench_graph(g, args, farmer_argv, farmer_env, ninja))
            except BenchError as e:
                log(f"ERROR: {e}")
                errors.append(str(e))
    finally:
        if _current is not None:
            kill_group(_current)
    total = time.perf_counter() - t0
    load_after = os.getloadavg()
    log(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    shutil.rmtree(args.work, ignore_errors=True)   # the projects; nothing else is kept

    all_err = [abs(x["err_wall"]) for r in results for x in r["farmer"]]
    all_err_outer = [abs(x["err_outer"]) for r in results for x in r["farmer"]]
    per_graph = [summarise(r)["err"] for r in results]
    h1, rows1, h2, rows2 = tables(results, args.jobs)
    loads = (f"load average (1/5/15 min) {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f} "
             f"before, {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f} after")
    summary = [
        f"median absolute prediction error vs wall_s: {pct(med(all_err))} over {len(all_err)} builds "
        f"(median of the per-graph medians {pct(med(per_graph))}; max {pct(max(all_err, default=None))}); "
        f"vs the outer wall time {pct(med(all_err_outer))}",
        f"total benchmark time {total:.0f} s; {loads}",
    ]
    print()
    print(f"Prediction (-j {args.jobs}, {args.reps} predict/measure cycles per graph, medians)")
    print(render(h1, rows1, markdown=False))
    print()
    print(f"Makespan against the lower bound max(critical path, work / {args.jobs}) (medians, seconds)")
    print(render(h2, rows2, markdown=False))
    print()
    for ln in chain_report(results) + summary:
        print(ln)

    if args.out:
        md = [f"Command: `{command}`", "",
              f"**Prediction** (`-j {args.jobs}`, {args.reps} predict/measure cycles per graph, medians; "
              "error = |predicted − measured| / measured):", "",
              render(h1, rows1, markdown=True), "",
              f"**Makespan / lower bound** (lower bound = max(critical path, work / {args.jobs}) from "
              "the sleep durations; makespan = wall time around the tool's process, median; the last two "
              "columns are what farmer's `plan --simulate` predicts for FIFO and unit-weight order):", "",
              render(h2, rows2, markdown=True), ""]
        md += [f"- {ln}" for ln in chain_report(results) + summary]
        md += ["", "Machine:", ""] + [f"- {k}: {v}" for k, v in info]
        args.out.write_text("\n".join(md) + "\n")
        log(f"wrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "machine": dict(info), "load_before": load_before,
                                         "load_after": load_after, "results": results}, indent=1))
    if errors:
        for e in errors:
            log(f"ERROR: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
