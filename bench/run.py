#!/usr/bin/env python3
"""Benchmark farmer against ninja and make on the same generated build graph.

    python bench/run.py [--sizes 1000,10000,100000] [--repeat 5] [--jobs 2]
                        [--only full,noop,change] [--out FILE.md]

For every size N a layered graph of N `cat` steps is generated (deterministically) and
written three times — Farmfile (one explicit [task.sK] per step), build.ninja and
Makefile — into one directory per tool under the work dir, so every tool has its own
sources, outputs and state. Scenarios (same -j for all tools):

  full    clean build from scratch (out/ and every tool's state removed first)
  noop    build right after a complete build (one untimed settling run, then timed runs)
  change  append a line to one source that feeds a chain, then build
  cache   (farmer only, not by default) a clean build with the output cache on and empty,
          then a clean build with every output restored from it
  memory  (not by default) clean builds like full, every one launched through GNU time:
          each tool's peak RSS (the highest of the runs), wall and CPU time

Times are wall-clock (perf_counter around the child), the median of the repeats. Peak
RSS comes from os.wait4 on the tool's own process. Correctness is checked as we go:
after every full build each tool's out/ must equal the expected tree (computed here in
Python), a noop must change nothing (and farmer/ninja/make must each report that
nothing was out of date), and a change must rewrite exactly the outputs downstream of
the edited source.

Stdlib only. `--foreach` adds a second farmer variant whose first layer is written as
one `foreach` task instead of N/2 explicit tasks (same commands, same outputs).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import math
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
SEED = 20261130

# --------------------------------------------------------------------------------------
# Graph generation
# --------------------------------------------------------------------------------------


@dataclass
class Graph:
    n: int
    sources: list[str]                 # src/s{i}.txt
    source_text: list[bytes]
    steps_in: list[list[str]]          # inputs of step k (paths)
    layer: list[int]                   # layer of step k
    roots: list[str]                   # outputs nobody consumes -> `all`
    expected: dict[str, str] = field(default_factory=dict)   # out path -> digest
    out_bytes: int = 0
    max_out: int = 0

    @staticmethod
    def out(k: int) -> str:
        return f"out/s{k}.txt"

    def cmd(self, k: int) -> str:
        return f"cat {' '.join(self.steps_in[k])} > {self.out(k)}"


WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
         "omicron pi rho sigma tau upsilon phi chi psi omega").split()


def make_graph(n: int, seed: int = SEED) -> Graph:
    """A layered graph of n steps.

    Layer 0 ("compile"): one step per source, `cat src/s{i}.txt > out/s{i}.txt`
    (n/2 of them). The other n/2 steps sit in L-1 further layers (L ~ log2 n). Each
    takes its primary input from the previous layer (so chains run through every
    layer) plus 0-2 extras: mostly a not-yet-consumed compile output, else a source
    (like a shared header) or any earlier output. 1-3 inputs per step in total.
    """
    rng = random.Random(seed + n)
    n_src = (n + 1) // 2
    sources = [f"src/s{i}.txt" for i in range(n_src)]
    source_text = []
    for i in range(n_src):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))
        source_text.append(f"source {i}: {words}\n".encode())

    steps_in: list[list[str]] = [[sources[i]] for i in range(n_src)]
    layer = [0] * n_src
    n_up = n - n_src
    n_layers = max(3, round(math.log2(max(n, 2))))
    n_up_layers = min(n_layers - 1, n_up)
    layers: list[list[int]] = [list(range(n_src))]
    pool = list(range(n_src))           # compile outputs, consumed in random order
    rng.shuffle(pool)
    used: set[int] = set()

    def from_pool() -> int | None:
        while pool:
            c = pool.pop()
            if c not in used:
                return c
        return None

    k = n_src
    for li in range(1, n_up_layers + 1):
        width = n_up // n_up_layers + (1 if li <= n_up % n_up_layers else 0)
        prev = layers[-1]
        order = prev[:]
        rng.shuffle(order)
        cur = []
        for w in range(width):
            # primary: walk the previous layer in shuffled order (each one consumed once
            # where the widths allow: chains through every layer); rest random
            prim = order[w] if w < len(order) else rng.choice(prev)
            if li == 1 and prim in used:
                prim = from_pool() if pool else prim
            used.add(prim)
            ins = [Graph.out(prim)]
            for _ in range(rng.choices((0, 1, 2), weights=(2, 5, 3))[0]):
                r = rng.random()
                c = from_pool() if r < 0.75 else None
                if c is not None:
                    cand = Graph.out(c)
                elif r < 0.9:
                    cand = rng.choice(sources)          # like a shared header
                else:
                    cand = Graph.out(rng.randrange(0, prev[-1] + 1))  # any earlier layer
                if cand not in ins:
                    ins.append(cand)
                    if c is not None:
                        used.add(c)
            steps_in.append(ins)
            layer.append(li)
            cur.append(k)
            k += 1
        layers.append(cur)
    assert k == n, (k, n)

    consumed = set()
    for ins in steps_in[n_src:]:
        consumed.update(p for p in ins if p.startswith("out/"))
    roots = [Graph.out(j) for j in range(n) if Graph.out(j) not in consumed]
    g = Graph(n, sources, source_text, steps_in, layer, roots)

    # Expected contents (cat = concatenation), as digests.
    content: dict[str, bytes] = dict(zip(sources, source_text))
    for j in range(n):
        data = b"".join(content[p] for p in steps_in[j])
        content[Graph.out(j)] = data
        g.expected[Graph.out(j)] = digest(data)
        g.out_bytes += len(data)
        g.max_out = max(g.max_out, len(data))
    return g


def consumers_map(g: Graph) -> dict[str, list[int]]:
    cons: dict[str, list[int]] = {}
    for j, ins in enumerate(g.steps_in):
        for p in ins:
            cons.setdefault(p, []).append(j)
    return cons


def downstream(g: Graph, cons: dict[str, list[int]], path: str) -> set[str]:
    """Every output that (transitively) depends on `path`."""
    seen: set[str] = set()
    todo = [path]
    while todo:
        for j in cons.get(todo.pop(), ()):
            o = Graph.out(j)
            if o not in seen:
                seen.add(o)
                todo.append(o)
    return seen


def pick_change_source(g: Graph) -> tuple[str, set[str]]:
    """A source feeding a chain through every layer, with a typical (median) fan-out."""
    cons = consumers_map(g)
    top = max(g.layer)
    rng = random.Random(SEED)
    cand = rng.sample(g.sources, min(300, len(g.sources)))
    scored = []
    for s in cand:
        ds = downstream(g, cons, s)
        depth = max((g.layer[int(o[5:-4])] for o in ds), default=-1)
        scored.append((depth == top, len(ds), s, ds))
    full = [t for t in scored if t[0]] or scored
    full.sort(key=lambda t: (t[1], t[2]))
    _, _, s, ds = full[len(full) // 2]
    return s, ds


def farmfile_text(g: Graph, foreach: bool = False) -> str:
    q = json.dumps
    parts = ["# generated by bench/run.py — do not edit\n"]
    n_src = len(g.sources)
    if foreach:
        parts.append(
            "[task.compile]\n"
            'foreach = "src/s{i}.txt"\n'
            'inputs = ["src/s{i}.txt"]\n'
            'outputs = ["out/s{i}.txt"]\n'
            'cmd = "cat {inputs} > {outputs}"\n\n')
    for k, ins in enumerate(g.steps_in):
        if foreach and k < n_src:
            continue
        parts.append(
            f"[task.s{k}]\n"
            f"inputs = [{', '.join(q(p) for p in ins)}]\n"
            f"outputs = [{q(g.out(k))}]\n"
            f"cmd = {q(g.cmd(k))}\n\n")
    parts.append("[task.all]\ninputs = [\n")
    parts.extend(f"  {q(r)},\n" for r in g.roots)
    parts.append("]\n")
    return "".join(parts)


def ninja_text(g: Graph) -> str:
    parts = ["# generated by bench/run.py — do not edit\n",
             "rule cat\n  command = cat $in > $out\n\n"]
    for k, ins in enumerate(g.steps_in):
        parts.append(f"build {g.out(k)}: cat {' '.join(ins)}\n")
    parts.append("\nbuild all: phony $\n")
    parts.append(" $\n".join(f"    {r}" for r in g.roots))
    parts.append("\ndefault all\n")
    return "".join(parts)


def makefile_text(g: Graph) -> str:
    # -rR: no built-in implicit rules/variables (otherwise make tries dozens of implicit
    # rules per file, which is not what a tuned generated Makefile does).
    parts = ["# generated by bench/run.py — do not edit\n",
             "MAKEFLAGS += -rR\n.SUFFIXES:\n.PHONY: all\n.DEFAULT_GOAL := all\n\nall: \\\n"]
    parts.append(" \\\n".join(f"    {r}" for r in g.roots))
    parts.append("\n\nout:\n\tmkdir -p out\n\n")
    for k, ins in enumerate(g.steps_in):
        parts.append(f"{g.out(k)}: {' '.join(ins)} | out\n\t{g.cmd(k)}\n")
    return "".join(parts)


def write_project(g: Graph, d: Path, texts: dict[str, str], farm_variant: str) -> None:
    (d / "src").mkdir(parents=True)
    for name, data in zip(g.sources, g.source_text):
        with open(d / name, "wb") as f:
            f.write(data)
    (d / "Farmfile").write_text(texts[farm_variant])
    (d / "build.ninja").write_text(texts["ninja"])
    (d / "Makefile").write_text(texts["make"])


# --------------------------------------------------------------------------------------
# Running and measuring
# --------------------------------------------------------------------------------------


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def tree_digests(d: Path) -> dict[str, str]:
    """relative path -> content digest, for every file under d/out."""
    res: dict[str, str] = {}
    root = d / "out"
    if not root.exists():
        return res
    base = len(str(d)) + 1
    for dirpath, _dirs, files in os.walk(root):
        for fn in files:
            p = os.path.join(dirpath, fn)
            with open(p, "rb") as f:
                res[p[base:]] = digest(f.read())
    return res


@dataclass
class RunResult:
    wall: float
    rc: int
    maxrss_kb: int | None   # only from runs launched through GNU time, see run_timed
    cpu: float              # user+sys of the tool and the children it waited for
    first: float | None = None  # seconds from the launch to the first file made in `watch`


class FirstCreate:
    """When the first file appears in a directory (inotify IN_CREATE, read by a thread):
    a clean build's time to its first started command, whatever the tool, since every
    command here starts by opening its output (the shell's or farmer's redirection)."""

    IN_CREATE = 0x100

    def __init__(self, directory: Path) -> None:
        import ctypes
        import select

        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, str(directory).encode(),
                                                 self.IN_CREATE) < 0:
            raise OSError(ctypes.get_errno(), f"inotify on {directory}")
        self.at: float | None = None
        self.stop = threading.Event()
        self.select = select.select
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        while not self.stop.is_set():
            if self.select([self.fd], [], [], 0.05)[0]:
                self.at = time.perf_counter()
                return

    def close(self) -> float | None:
        self.stop.set()
        self.thread.join()
        os.close(self.fd)
        return self.at


GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run_timed(argv: list[str], env: dict | None, timeout: float,
              rss_file: Path | None = None, cwd: Path | None = None,
              watch: Path | None = None) -> RunResult:
    """Run argv, wall time by perf_counter, rusage by os.wait4.

    Peak RSS: on Linux a child's ru_maxrss starts from the RSS of the process that
    forked it (the kernel keeps the pre-exec high-water mark), so wait4 on a child of
    this harness would report at least the harness's own RSS. With rss_file, the tool
    is launched through GNU time (a ~2 MB process) and its %M is read back: that is
    the tool's own peak. The launcher adds ~1 ms, so only untimed runs or long full
    builds use it.
    """
    if rss_file is not None:
        argv = [GNU_TIME, "-f", "%M", "-o", str(rss_file)] + argv
    first = FirstCreate(watch) if watch is not None else None
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env, start_new_session=True, cwd=cwd)

    def kill():
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    first_at = first.close() if first is not None else None
    p.returncode = os.waitstatus_to_exitcode(status)
    rss = None
    if rss_file is not None:
        try:
            rss = int(rss_file.read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            pass
    return RunResult(wall, p.returncode, rss, ru.ru_utime + ru.ru_stime,
                     first_at - t0 if first_at is not None else None)


class BenchError(Exception):
    pass


@dataclass
class Tool:
    name: str           # farmer | farmer-foreach | farmer-serve | ninja | make
    dir: Path
    argv: list[str]
    env: dict | None
    state: tuple[str, ...]
    serve: list[str] | None = None  # farmer-serve: `farmer serve -C DIR`, started before its builds

    def clean(self) -> None:
        if self.serve:  # the server holds .farmer/: stopped, then started on the clean tree
            self.stop_server()
        for s in self.state + ("out",):
            p = self.dir / s
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        if self.serve:
            self.start_server()

    def start_server(self) -> None:
        # (in the project, as its builds run: `python -m farmer` imports from the working directory first)
        cp = subprocess.run(self.serve + ["--idle", "2h"], env=self.env, capture_output=True, text=True,
                            timeout=60, cwd=self.dir)
        if cp.returncode != 0:
            raise BenchError(f"{self.name}: farmer serve failed: {cp.stderr.strip()}")

    def stop_server(self) -> None:
        subprocess.run(self.serve + ["--stop"], env=self.env, capture_output=True, timeout=60, cwd=self.dir)

    def diagnose(self, timeout: float) -> str:
        """Re-run untimed with output captured, for an error message."""
        try:
            cp = subprocess.run(self.argv, env=self.env, capture_output=True, text=True,
                                timeout=timeout, cwd=self.dir)
            out = (cp.stdout + cp.stderr).strip().splitlines()
            return f"rc={cp.returncode}; last output:\n    " + "\n    ".join(out[-15:])
        except Exception as e:  # noqa: BLE001
            return f"diagnostic run failed: {e}"

    def build(self, timeout: float, rss: bool = False, first: bool = False) -> RunResult:
        rss_file = self.dir.parent / f".rss-{self.name}" if rss and GNU_TIME else None
        if first:  # out/ made empty beforehand, so its first entry is the first output
            (self.dir / "out").mkdir(exist_ok=True)
        r = run_timed(self.argv, self.env, timeout, rss_file, cwd=self.dir,
                      watch=self.dir / "out" if first else None)
        if r.rc != 0:
            raise BenchError(f"{self.name} build failed in {self.dir} (rc={r.rc}); "
                             f"{self.diagnose(timeout)}")
        return r

    def check_noop(self) -> str | None:
        """Ask the tool itself whether anything is out of date; None if all good."""
        if self.name.startswith("farmer"):
            lb = self.dir / ".farmer" / "last-build.json"
            try:
                data = json.loads(lb.read_text())
            except (OSError, ValueError) as e:
                return f"cannot read {lb}: {e}"
            ran = [t["id"] for t in data.get("tasks", []) if t.get("status") != "up-to-date"]
            if ran:
                return f"farmer noop was not a no-op: {len(ran)} not up-to-date, e.g. {ran[:5]}"
            return None
        if self.name == "ninja":
            cp = subprocess.run(self.argv + ["-n"], capture_output=True, text=True, cwd=self.dir)
            if "no work to do" not in cp.stdout:
                return "ninja -n: " + cp.stdout.strip().splitlines()[-1][:200]
            return None
        if self.name == "make":
            cp = subprocess.run(self.argv + ["-q"], capture_output=True, text=True, cwd=self.dir)
            if cp.returncode != 0:
                return f"make -q all exited {cp.returncode}"
            return None
        return None

    def farmer_ran(self) -> int | None:
        if not self.name.startswith("farmer"):
            return None
        try:
            data = json.loads((self.dir / ".farmer" / "last-build.json").read_text())
        except (OSError, ValueError):
            return None
        return sum(1 for t in data.get("tasks", []) if t.get("status") == "ran")


def farmer_env_base(work: Path) -> dict:
    """The environment farmer runs in: ours, but with bytecode caching on.

    A sandbox may export PYTHONDONTWRITEBYTECODE=1, which makes every farmer start
    recompile farmer's own modules (~50 ms) — not what an installed farmer does. The
    cache goes to the work dir (PYTHONPYCACHEPREFIX), not into farmer/.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("FARMER_CACHE", None)  # the output cache is off but in the `cache` scenario
    env.setdefault("PYTHONPYCACHEPREFIX", str(work / ".pycache"))
    return env


def export_farmer(rev: str, work: Path, name: str = "farmer-src") -> tuple[Path, str]:
    """`git archive REV` of farmer/ and what installs it (pyproject.toml, bin/, README.md)
    into work/NAME/: measure a commit, not whatever the shared working tree holds right
    now. Returns (dir, 'sha subject')."""
    dest = work / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    sha = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", rev],
                         capture_output=True, text=True, check=True).stdout.strip()
    last = subprocess.run(["git", "-C", str(REPO_ROOT), "log", "-1", "--format=%h %s", rev,
                           "--", "farmer"], capture_output=True, text=True).stdout.strip()
    desc = f"{sha}; last farmer/ change {last}"
    present = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-tree", "--name-only", rev],
                             capture_output=True, text=True, check=True).stdout.split()
    wanted = [p for p in ("farmer", "bin", "pyproject.toml", "README.md") if p in present]
    tar = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", "--format=tar", rev, *wanted],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(dest)
    return dest, desc


def install_farmer(src: Path, work: Path) -> Path:
    """Install farmer from `src` into a fresh virtual environment, as a user would (`pip
    install`, bytecode compiled by pip): the measured start-up is then an installed
    farmer's, not that of this interpreter's site-packages and start-up hooks."""
    venv = work / "farmer-venv"
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", str(src)], check=True)
    return venv / "bin" / "farmer"


def farmer_command(override: str | None, work: Path, rev: str | None = None,
                   venv: bool = True) -> tuple[list[str], dict, str]:
    env = farmer_env_base(work)
    if override:
        return shlex.split(override), env, override
    src, desc = export_farmer(rev or "HEAD", work)
    if venv:
        exe = install_farmer(src, work)
        return [str(exe)], env, f"{exe} (pip install of {rev or 'HEAD'} = {desc})"
    # the child runs with cwd = the project dir, so PYTHONPATH wins over the repo's working
    # tree (and over an editable install's finder)
    env["PYTHONPATH"] = str(src)
    where = subprocess.run([sys.executable, "-c", "import farmer; print(farmer.__file__)"],
                           env=env, cwd="/", capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(src)):
        raise SystemExit(f"--farmer-rev: farmer imports from {where!r}, not {src}")
    return [sys.executable, "-m", "farmer"], env, f"python -m farmer at {rev or 'HEAD'} = {desc}"


def tool_version(argv: list[str], env: dict | None = None) -> str:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60,
                            cwd="/")
        out = (cp.stdout or cp.stderr).strip().splitlines()
        return out[0] if cp.returncode == 0 and out else f"unavailable (rc={cp.returncode})"
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({e})"


def fmt_s(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.4f}" if v < 1 else f"{v:.3f}" if v < 100 else f"{v:.1f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "—"
    return f"{a / b:.1f}×"


def fmt_ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1000:.0f}"


def fmt_mb(kb: int | None) -> str:
    return "—" if kb is None else f"{kb / 1024:.0f}"


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


SIZED = ("full", "noop", "change", "cache", "memory")
ONCE = ("version", "real-noop", "real-edits", "meson-series")


def bench_once(args, farmer_argv: list[str], farmer_env: dict) -> list[str]:
    """The scenarios that do not depend on --sizes, as Markdown lines."""
    import projects

    lines: list[str] = []
    if "version" in args.only:
        argvs = {"farmer --version": farmer_argv + ["--version"],
                 "python -c pass (farmer's interpreter)":
                     [str(Path(farmer_argv[0]).with_name("python")), "-c", "pass"],
                 "ninja --version": ["ninja", "--version"]}
        runs: dict[str, list[RunResult]] = {k: [] for k in argvs}
        for _ in range(max(args.repeat, 20)):
            for k, argv in argvs.items():
                runs[k].append(run_timed(argv, farmer_env, args.timeout))
        lines += ["### Start-up", "", "| command | median ms | min ms | cpu ms |", "|---|---:|---:|---:|"]
        for k, rr in runs.items():
            lines.append(f"| `{k}` | {statistics.median(r.wall for r in rr) * 1000:.1f} | "
                         f"{min(r.wall for r in rr) * 1000:.1f} | "
                         f"{statistics.median(r.cpu for r in rr) * 1000:.1f} |")
        lines.append("")
    if "real-noop" in args.only:
        found = projects.cmake_projects(args.work, args.fresh_projects)
        found += projects.meson_projects(args.work, 1, args.fresh_projects)
        rows = projects.real_noop(found, args.repeat, args.jobs, farmer_argv, farmer_env,
                                  run_timed, args.timeout)
        lines += ["### No-op of real build.ninja projects", "",
                  "| project | edges | first build ninja s | first build farmer s | no-op ninja ms | no-op farmer ms "
                  "| farmer/ninja | farmer cpu ms | farmer wall − cpu ms | `python -c pass` ms (cpu) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in rows:
            med = {t: statistics.median(r.wall for r in row["noop"][t]) for t in row["noop"]}
            cpu = statistics.median(r.cpu for r in row["noop"]["farmer"])
            bare_cpu = statistics.median(r.cpu for r in row["noop"]["python"])
            lines.append(f"| {row['project']} | {row['edges']} | {row['full']['ninja'].wall:.2f} | "
                         f"{row['full']['farmer'].wall:.2f} | {med['ninja'] * 1000:.1f} | "
                         f"{med['farmer'] * 1000:.1f} | {fmt_ratio(med['farmer'], med['ninja'])} | "
                         f"{cpu * 1000:.1f} | {(med['farmer'] - cpu) * 1000:.1f} | "
                         f"{med['python'] * 1000:.1f} ({bare_cpu * 1000:.1f}) |")
            log(f"[real-noop] {row['project']}: ninja {med['ninja'] * 1000:.1f} ms, "
                f"farmer {med['farmer'] * 1000:.1f} ms")
        lines.append("")
    if "real-edits" in args.only:
        found = projects.cmake_projects(args.work, args.fresh_projects,
                                        [n for n in args.real_projects.split(",") if n])
        rows = projects.real_edits(found, args.repeat, args.jobs, farmer_argv, farmer_env,
                                   run_timed, args.timeout, args.work / "real-edits-cache")
        lines += ["### Real CMake projects: clean build, no-op, header comment, output cache", "",
                  "| project (edges) | step | ninja s (rounds) | farmer s (rounds) | farmer/ninja | "
                  "ninja cpu s | farmer cpu s |", "|---|---|---|---|---:|---:|---:|"]
        for row in rows:
            for step, label in (("clean", "clean build"), ("noop", "no-op"),
                                ("header", f"comment appended to `{row['header']}`")):
                by = row["steps"][step]
                med = {t: statistics.median(r.wall for r in by[t]) for t in by}
                cpu = {t: statistics.median(r.cpu for r in by[t]) for t in by}
                lines.append(f"| {row['project']} ({row['edges']}) | {label} | "
                             + " | ".join(", ".join(f"{r.wall:.3f}" for r in by[t]) for t in projects.TOOLS)
                             + f" | {fmt_ratio(med['farmer'], med['ninja'])} | {cpu['ninja']:.2f} | {cpu['farmer']:.2f} |")
            clean_ninja = statistics.median(r.wall for r in row["steps"]["clean"]["ninja"])
            lines.append(f"| {row['project']} ({row['edges']}) | farmer's cache: clean build storing, then "
                         f"`farmer clean` and the build restoring | {clean_ninja:.3f} (clean) | "
                         f"{row['store'].wall:.3f}, {row['restore'].wall:.3f} | "
                         f"{fmt_ratio(row['restore'].wall, clean_ninja)} | | {row['restore'].cpu:.2f} |")
            log(f"[real-edits] {row['project']}: after the restore: {row['after_restore']}")
        lines.append("")
    if "meson-series" in args.only:
        found = projects.meson_projects(args.work, args.meson_count, args.fresh_projects)
        res = projects.meson_series(found, args.repeat, args.jobs, farmer_argv, farmer_env,
                                    run_timed, args.timeout)
        med = {t: statistics.median(v) for t, v in res["wall"].items()}
        cpu = {t: statistics.median(v) for t, v in res["cpu"].items()}
        lines += [f"### {len(found)} Meson test projects built from clean, one after another", "",
                  "| tool | total wall s (median of rounds) | rounds s | cpu s |", "|---|---:|---|---:|"]
        for t in projects.TOOLS:
            lines.append(f"| {t} | {med[t]:.2f} | {', '.join(f'{x:.2f}' for x in res['wall'][t])} | "
                         f"{cpu[t]:.2f} |")
        lines += ["", f"farmer/ninja: {fmt_ratio(med['farmer'], med['ninja'])} "
                      f"({(med['farmer'] - med['ninja']) / len(found) * 1000:.0f} ms a project)", ""]
        # Split: a project whose clean build runs no command measures each tool's start-up.
        per, empty = res["per_project"], set(res["empty"])
        lines += ["| projects | how many | ninja s (sum of medians) | farmer s | farmer − ninja ms a project |",
                  "|---|---:|---:|---:|---:|"]
        for label, names in (("nothing to build", [n for n in per if n in empty]),
                             ("with commands", [n for n in per if n not in empty])):
            if names:
                sums = {t: sum(per[n][t] for n in names) for t in projects.TOOLS}
                lines.append(f"| {label} | {len(names)} | {sums['ninja']:.2f} | {sums['farmer']:.2f} | "
                             f"{(sums['farmer'] - sums['ninja']) / len(names) * 1000:.1f} |")
        lines.append("")
        log(f"[meson-series] ninja {med['ninja']:.2f} s, farmer {med['farmer']:.2f} s")
    return lines


def bench_size(n: int, args, farmer_argv, farmer_env, results: list[dict]) -> None:
    t0 = time.perf_counter()
    g = make_graph(n)
    change_src, change_outs = pick_change_source(g)
    texts = {"ninja": ninja_text(g), "make": makefile_text(g),
             "farmer": farmfile_text(g), "farmer-foreach": farmfile_text(g, foreach=True)}
    base = args.work / f"n{n}"
    tools: list[Tool] = []
    j = str(args.jobs)
    for name in args.tools:
        d = base / name
        write_project(g, d, texts, "farmer-foreach" if name == "farmer-foreach" else "farmer")
        if name.startswith("farmer"):
            t = Tool(name, d, farmer_argv + ["build", "-C", str(d), "-j", j, "all"],
                     farmer_env, (".farmer",))
            if name == "farmer-serve":  # its builds answered by a server (docs/serve.md)
                t.serve = farmer_argv + ["serve", "-C", str(d)]
                t.start_server()
        elif name == "ninja":
            t = Tool(name, d, ["ninja", "-C", str(d), "-j", j, "all"], None,
                     (".ninja_log", ".ninja_deps"))
        else:
            t = Tool(name, d, ["make", "-C", str(d), "-j", j, "all"], None, ())
        tools.append(t)
    log(f"[n={n}] generated {n} steps, {len(g.sources)} sources, {max(g.layer) + 1} layers, "
        f"{len(g.roots)} roots, outputs {g.out_bytes / 1e6:.1f} MB (max file {g.max_out} B), "
        f"change source {change_src} -> {len(change_outs)} outputs; "
        f"{time.perf_counter() - t0:.1f}s")

    def record(scenario: str, per_tool: dict[str, list[RunResult]],
               rss_runs: dict[str, RunResult | None]) -> None:
        row = {"size": n, "scenario": scenario, "tools": {}}
        for name, runs in per_tool.items():
            rr = rss_runs.get(name) if runs else None
            row["tools"][name] = {
                "median_s": statistics.median(r.wall for r in runs) if runs else None,
                "runs_s": [round(r.wall, 4) for r in runs],
                "maxrss_kb": rr.maxrss_kb if rr else None,
                "cpu_s": statistics.median(r.cpu for r in runs) if runs else None,
            }
            firsts = [r.first for r in runs if r.first is not None]
            if firsts:
                row["tools"][name]["first_s"] = statistics.median(firsts)
        results.append(row)
        cells = "  ".join(f"{k}={fmt_s(v['median_s'])}s" + (f" (first command {v['first_s'] * 1000:.0f} ms)"
                                                        if "first_s" in v else "")
                          for k, v in row["tools"].items())
        log(f"[n={n}] {scenario}: {cells}")

    try:
        _bench_tools(n, args, g, tools, change_src, change_outs, base, record)
    finally:
        for t in tools:
            if t.serve:
                t.stop_server()


def _bench_tools(n, args, g, tools, change_src, change_outs, base, record) -> None:
    failed: set[str] = set()

    def attempt(t: Tool, fn):
        if t.name in failed:
            return None
        try:
            return fn()
        except BenchError as e:
            log(f"[n={n}] ERROR: {e}")
            failed.add(t.name)
            return None

    def verify_full(t: Tool) -> None:
        tree = tree_digests(t.dir)
        if tree != g.expected:
            missing = sorted(set(g.expected) - set(tree))
            wrong = sorted(p for p in tree if g.expected.get(p) != tree[p])
            raise BenchError(f"{t.name}: out/ differs from expected after full build: "
                             f"{len(missing)} missing (e.g. {missing[:3]}), "
                             f"{len(wrong)} wrong/extra (e.g. {wrong[:3]})")

    full_built = False
    # ---- full ------------------------------------------------------------------------
    if "full" in args.only:
        reps = args.repeat if n < 10000 else min(args.repeat, 3) if n < 100000 else 1
        runs: dict[str, list[RunResult]] = {t.name: [] for t in tools}
        rss_runs: dict[str, RunResult | None] = {}
        for i in range(reps):
            # The tools take turns, the order reversed every other round: what one tool's
            # build leaves to the next (its dirty pages written back, its `rm -rf`'s freed
            # inodes, which ext4 without a journal skips when it creates files for a minute
            # or more) falls on each tool alike.
            for t in tools if i % 2 == 0 else tools[::-1]:
                last = i == reps - 1   # measure RSS on the last one (launcher: +1 ms)
                def one(t=t, last=last):
                    t.clean()
                    r = t.build(args.timeout, rss=last, first=not last)
                    verify_full(t)
                    return r
                r = attempt(t, one)
                if r:
                    runs[t.name].append(r)
                    if last:
                        rss_runs[t.name] = r
        record("full", runs, rss_runs)
        full_built = True

    # ---- memory: every clean build through GNU time, for each tool's peak RSS ------------
    if "memory" in args.only:
        reps = args.repeat if n < 10000 else min(args.repeat, 3) if n < 100000 else 1
        runs = {t.name: [] for t in tools}
        rss_runs = {}
        for _ in range(reps):
            for t in tools:  # the tools take turns, so that each sees the same machine
                def one(t=t):
                    t.clean()
                    r = t.build(args.timeout, rss=True)
                    verify_full(t)
                    return r
                r = attempt(t, one)
                if r:
                    runs[t.name].append(r)
                    if r.maxrss_kb is not None and (t.name not in rss_runs or
                                                    r.maxrss_kb > rss_runs[t.name].maxrss_kb):
                        rss_runs[t.name] = r  # the highest peak of the runs
        record("memory", runs, rss_runs)
        log(f"[n={n}] memory: " + "  ".join(
            f"{name}: peak {fmt_mb(r.maxrss_kb)} MB, cpu {r.cpu:.1f} s" for name, r in rss_runs.items()))
        full_built = True

    if not full_built and ({"noop", "change"} & set(args.only)):
        for t in tools:      # make sure every tool starts from a complete build
            def prep(t=t):
                t.clean()
                t.build(args.timeout)
                verify_full(t)
            attempt(t, prep)

    # ---- noop ------------------------------------------------------------------------
    if "noop" in args.only:
        before: dict[str, dict[str, str]] = {}
        for t in tools:
            def settle(t=t):
                t.build(args.timeout)
                before[t.name] = tree_digests(t.dir)
            attempt(t, settle)
        runs = {t.name: [] for t in tools}
        for _ in range(args.repeat):
            for t in tools:
                r = attempt(t, lambda t=t: t.build(args.timeout))
                if r:
                    runs[t.name].append(r)
        rss_runs = {t.name: attempt(t, lambda t=t: t.build(args.timeout, rss=True))
                    for t in tools}                       # extra untimed run for RSS
        for t in tools:
            def check(t=t):
                if tree_digests(t.dir) != before[t.name]:
                    raise BenchError(f"{t.name}: noop build changed out/")
                problem = t.check_noop()
                if problem:
                    raise BenchError(f"{t.name}: {problem}")
            attempt(t, check)
        record("noop", {k: (v if k not in failed else []) for k, v in runs.items()}, rss_runs)

    # ---- change ----------------------------------------------------------------------
    if "change" in args.only:
        runs = {t.name: [] for t in tools}
        rss_runs = {}
        trees = {t.name: tree_digests(t.dir) for t in tools if t.name not in failed}
        for rep in range(args.repeat + 1):
            for t in tools:
                def one(t=t, rep=rep):
                    with open(t.dir / change_src, "a") as f:
                        f.write(f"benchmark change {rep}\n")
                    # the extra last round is untimed, for RSS through the launcher
                    r = t.build(args.timeout, rss=rep == args.repeat)
                    after = tree_digests(t.dir)
                    prev = trees[t.name]
                    changed = {p for p in after if prev.get(p) != after[p]} | (set(prev) - set(after))
                    trees[t.name] = after
                    if changed != change_outs:
                        raise BenchError(
                            f"{t.name}: change rewrote {len(changed)} outputs, expected "
                            f"{len(change_outs)}; unexpected {sorted(changed - change_outs)[:3]}, "
                            f"not rebuilt {sorted(change_outs - changed)[:3]}")
                    ran = t.farmer_ran()
                    if ran is not None and ran != len(change_outs):
                        raise BenchError(f"{t.name}: ran {ran} computations, expected "
                                         f"{len(change_outs)}")
                    return r
                r = attempt(t, one)
                if r and rep < args.repeat:
                    runs[t.name].append(r)
                elif r:
                    rss_runs[t.name] = r
        ok = [t.name for t in tools if t.name not in failed]
        for a in ok[1:]:
            if trees[a] != trees[ok[0]]:
                log(f"[n={n}] ERROR: after the change runs out/ of {a} differs from {ok[0]}")
                failed.add(a)
        record(f"change ({len(change_outs)} steps)",
               {k: (v if k not in failed else []) for k, v in runs.items()}, rss_runs)

    # ---- cache (farmer only) ------------------------------------------------------------
    if "cache" in args.only:
        cached = [Tool(t.name, t.dir, t.argv, {**t.env, "FARMER_CACHE": "1",
                                               "FARMER_CACHE_DIR": str(base / f"cache-{t.name}")},
                       t.state) for t in tools if t.name.startswith("farmer") and t.name not in failed]
        reps = args.repeat if n < 10000 else min(args.repeat, 3)
        off: dict[str, list[RunResult]] = {t.name: [] for t in cached}
        cold: dict[str, list[RunResult]] = {t.name: [] for t in cached}
        warm: dict[str, list[RunResult]] = {t.name: [] for t in cached}
        plain = {t.name: t for t in tools}
        for _ in range(reps):  # the three interleaved, so that a loaded machine skews none
            for t in cached:
                def off_build(t=plain[t.name]):  # the same clean build, the cache off
                    t.clean()
                    r = t.build(args.timeout)
                    verify_full(t)
                    return r
                def cold_build(t=t):  # clean build, empty cache: everything runs and is stored
                    t.clean()
                    shutil.rmtree(t.env["FARMER_CACHE_DIR"], ignore_errors=True)
                    r = t.build(args.timeout)
                    verify_full(t)
                    return r
                def cached_build(t=t):  # clean build again: everything is restored
                    t.clean()
                    r = t.build(args.timeout)
                    verify_full(t)
                    data = json.loads((t.dir / ".farmer" / "last-build.json").read_text())
                    not_cached = [x["id"] for x in data["tasks"] if x["outputs"] and x["status"] != "cached"]
                    if not_cached:
                        raise BenchError(f"{t.name}: {len(not_cached)} not restored, e.g. {not_cached[:3]}")
                    return r
                for fn, runs in ((off_build, off), (cold_build, cold), (cached_build, warm)):
                    r = attempt(t, fn)
                    if r:
                        runs[t.name].append(r)
        record("full, cache off", off, {})
        record("full, cache on and cold", cold, {})
        record("full, all cached", warm, {})


def render_table(results: list[dict], tool_names: list[str], markdown: bool) -> str:
    headers = ["size", "scenario"]
    for name in tool_names:
        headers.append(f"{name} s")
    if "farmer" in tool_names:
        for other in ("ninja", "make"):
            if other in tool_names:
                headers.append(f"farmer/{other}")
    for variant in ("farmer-foreach", "farmer-serve"):
        if variant in tool_names and "ninja" in tool_names:
            headers.append(f"{variant}/ninja")
    for name in tool_names:
        headers.append(f"{name} RSS MB")
    firsts = [name for name in tool_names
              if any("first_s" in row["tools"].get(name, {}) for row in results)]
    headers += [f"{name} first cmd ms" for name in firsts]
    rows = []
    for row in results:
        tl = row["tools"]
        med = {k: tl.get(k, {}).get("median_s") for k in tool_names}
        cells = [f"{row['size']:,}".replace(",", " ") if not markdown else f"{row['size']}",
                 row["scenario"]]
        cells += [fmt_s(med[k]) for k in tool_names]
        if "farmer" in tool_names:
            for other in ("ninja", "make"):
                if other in tool_names:
                    cells.append(fmt_ratio(med["farmer"], med[other]))
        for variant in ("farmer-foreach", "farmer-serve"):
            if variant in tool_names and "ninja" in tool_names:
                cells.append(fmt_ratio(med[variant], med["ninja"]))
        cells += [fmt_mb(tl.get(k, {}).get("maxrss_kb")) for k in tool_names]
        cells += [fmt_ms(tl.get(k, {}).get("first_s")) for k in firsts]
        rows.append(cells)
    if markdown:
        out = ["| " + " | ".join(headers) + " |",
               "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i < 2 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def machine_info(farmer_argv, farmer_env, farmer_desc) -> list[tuple[str, str]]:
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "log", "-1", "--format=%h %s"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                "farmer"], capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += " (farmer/ in the working tree has uncommitted changes)"
    except OSError:
        commit = "?"
    cpu = "?"
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return [
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("nproc", f"{affinity} (os.cpu_count {os.cpu_count()})"),
        ("cpu", cpu),
        ("os", platform.platform()),
        ("python", sys.version.split()[0]),
        ("farmer", f"{tool_version(farmer_argv + ['--version'], farmer_env)} via `{farmer_desc}`"
                   f" (bytecode cache: PYTHONPYCACHEPREFIX={farmer_env.get('PYTHONPYCACHEPREFIX')})"),
        ("repo commit", commit),
        ("ninja", tool_version(["ninja", "--version"])),
        ("make", tool_version(["make", "--version"])),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated step counts")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per scenario")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--only", default="full,noop,change",
                    help="scenarios: full,noop,change,cache,memory (per size; cache: farmer's full build with "
                         "the output cache off, on and cold, and with every output restored; memory: clean builds, "
                         "each tool's peak RSS through GNU time); version,real-noop,real-edits,meson-series "
                         "(once)")
    ap.add_argument("--meson-count", type=int, default=55,
                    help="meson-series: how many of Meson's test projects (default 55)")
    ap.add_argument("--real-projects", default="",
                    help="real-edits: which CMake projects (comma-separated: ninja,libuv,zlib-ng; default all)")
    ap.add_argument("--fresh-projects", action="store_true",
                    help="configure the real projects again (kept in WORK/projects/)")
    ap.add_argument("--tools", default="farmer,ninja,make",
                    help="farmer,farmer-foreach,farmer-serve,ninja,make (default: farmer,ninja,make; "
                         "farmer-serve: farmer's builds answered by `farmer serve`)")
    ap.add_argument("--foreach", action="store_true",
                    help="also measure farmer with the first layer as one foreach task")
    ap.add_argument("--out", type=Path, help="write the table as Markdown here")
    ap.add_argument("--json", type=Path, help="write all raw timings as JSON here")
    ap.add_argument("--work", type=Path, default=BENCH_DIR / "work",
                    help="work dir (default bench/work; its n<size>/ and .pycache/ are "
                         "wiped and recreated)")
    ap.add_argument("--farmer", help="farmer command (default: farmer at --farmer-rev, "
                                     "pip-installed into a fresh venv in the work dir)")
    ap.add_argument("--farmer-rev", metavar="REV", default="HEAD",
                    help="the commit of farmer to measure (git archive; default HEAD)")
    ap.add_argument("--no-venv", action="store_true",
                    help="run the exported farmer as `python -m farmer` with PYTHONPATH "
                         "instead of installing it (no network needed)")
    ap.add_argument("--timeout", type=float, default=3600, help="per build, seconds")
    args = ap.parse_args(argv)

    args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = set(args.only) - set(SIZED) - set(ONCE)
    if bad:
        ap.error(f"unknown scenario(s): {', '.join(sorted(bad))}")
    args.tools = [s.strip() for s in args.tools.split(",") if s.strip()]
    if args.foreach and "farmer-foreach" not in args.tools:
        args.tools.insert(args.tools.index("farmer") + 1 if "farmer" in args.tools else 0,
                          "farmer-foreach")
    bad = set(args.tools) - {"farmer", "farmer-foreach", "farmer-serve", "ninja", "make"}
    if bad:
        ap.error(f"unknown tool(s): {', '.join(sorted(bad))}")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    args.work = args.work.resolve()

    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__)] +
                                   (argv if argv is not None else sys.argv[1:]))
    # Wipe what this harness made before (n<size>/, .pycache/, farmer-src/); other scripts keep
    # their own things under bench/work/ too, so never the whole directory.
    args.work.mkdir(parents=True, exist_ok=True)
    for p in args.work.iterdir():
        if p.is_dir() and (p.name in (".pycache", "farmer-src", "farmer-venv")
                           or re.fullmatch(r"n\d+", p.name)):
            shutil.rmtree(p)
    farmer_argv, farmer_env, farmer_desc = farmer_command(args.farmer, args.work, args.farmer_rev,
                                                          not args.no_venv)
    info = machine_info(farmer_argv, farmer_env, farmer_desc)
    for k, v in info:
        log(f"{k}: {v}")
    if any(t.startswith("farmer") for t in args.tools) and info[5][1].startswith("unavailable"):
        log("WARNING: farmer --version failed; farmer columns will likely be empty")


    results: list[dict] = []
    t0 = time.perf_counter()
    once = bench_once(args, farmer_argv, farmer_env)
    if set(SIZED) & set(args.only):
        for n in args.sizes:
            bench_size(n, args, farmer_argv, farmer_env, results)
    total = time.perf_counter() - t0
    if once:
        print()
        print("\n".join(once))

    table = render_table(results, args.tools, markdown=False) if results else ""
    print()
    print(f"median wall seconds, -j {args.jobs}, repeat {args.repeat} "
          f"(full builds: min(repeat, 3) at >=10000 steps, one at >=100000)")
    print(table)

    if args.out:
        md = ["# farmer benchmark", "",
              f"Command: `{command}`", "",
              f"Median wall time in seconds over the timed runs (`-j {args.jobs}`, "
              f"`--repeat {args.repeat}`; full builds use min(repeat, 3) runs at ≥10 000 steps, "
              "one at ≥100 000). "
              "RSS: peak resident set of the tool's own process (GNU time %M; for full the last run, for memory the highest of its runs, "
              "for noop and change one extra untimed run). "
              "`change (K steps)`: one source edited, K outputs downstream of it rebuilt.", "",
              render_table(results, args.tools, markdown=True), "",
              *once, "", "## Machine", ""]
        md += [f"- {k}: {v}" for k, v in info]
        md += ["", f"Total benchmark time: {total:.0f} s.", ""]
        md += ["## All runs (seconds)", ""]
        for row in results:
            for name, v in row["tools"].items():
                md.append(f"- {row['size']} {row['scenario']} {name}: "
                          f"{', '.join(f'{x:.3f}' for x in v['runs_s']) or 'failed'}")
        args.out.write_text("\n".join(md) + "\n")
        log(f"wrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "machine": dict(info),
                                         "results": results}, indent=1))
    errors = any(v["median_s"] is None for row in results for v in row["tools"].values())
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
