"""An ML-style pipeline whose wall time is mostly world set-up: two farmer revisions side by
side, each against its own `plan --simulate`, and the first save under `farmer watch`.

The project (the newcomer's shape, with `time.sleep` standing for slow imports): a command
`prep` (PREP s) writes the data; world `ml` ("import pandas", ML_SETUP s) runs FITS tasks `fit`
(FIT s each) over it and `aggregate` (AGG s) over theirs; world `viz` ("import matplotlib",
VIZ_SETUP s, no inputs) runs `plot` (PLOT s) over the aggregate; a command `page` ends it.

Per revision and round: `.farmer/` and `out/` removed, a build (it measures everything), then
`plan --simulate --from-scratch --json`, `out/` removed and a second build: the prediction
against that build's wall time (last-build.json), and when each world's set-up began. `--watch`
also times the first save under `farmer watch` after a no-op first build: editing the plot
script, to the plot rewritten.

A revision other than the working tree (`--before REV`) is exported with `git archive` into
bench/work/ml-pipeline/REV and run from there; both run with bytecode caching on
(`PYTHONDONTWRITEBYTECODE` removed, a `PYTHONPYCACHEPREFIX` under bench/work/), as an
installed farmer would.

    python bench/ml_pipeline.py [--before REV] [--rounds 3] [--jobs 2] [--watch]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WORK = REPO_ROOT / "bench" / "work" / "ml-pipeline"

FARMFILE = """\
[world.ml]
setup = ["import time", "time.sleep({ml_setup})"]

[world.viz]
setup = ["import time", "time.sleep({viz_setup})"]

[task.prep]
inputs = ["src/raw.csv"]
outputs = ["out/raw.csv"]
cmd = "sleep {prep} && cp {{inputs}} {{outputs}}"

[task.fit]
foreach = "src/groups/{{g}}.txt"
inputs = ["out/raw.csv", "src/groups/{{g}}.txt", "steps/fit.py"]
outputs = ["out/fits/{{g}}.json"]
world = "ml"
python = "steps/fit.py {{outputs}}"

[task.aggregate]
inputs = ["@fit", "steps/aggregate.py"]
outputs = ["out/summary.csv"]
world = "ml"
python = "steps/aggregate.py {{outputs}}"

[task.plot]
inputs = ["out/summary.csv", "steps/plot.py"]
outputs = ["out/summary.png"]
world = "viz"
python = "steps/plot.py {{outputs}}"

[task.page]
inputs = ["out/summary.png"]
outputs = ["out/index.html"]
cmd = "echo '<img src=summary.png>' > {{outputs}}"
"""

STEP = """import sys, time
time.sleep({seconds})
open(sys.argv[1], "w").write("{name} #0\\n")
"""


def write_project(root: Path, a: argparse.Namespace) -> None:
    shutil.rmtree(root, ignore_errors=True)
    (root / "src" / "groups").mkdir(parents=True)
    (root / "steps").mkdir()
    (root / "Farmfile").write_text(FARMFILE.format(ml_setup=a.ml_setup, viz_setup=a.viz_setup, prep=a.prep))
    (root / "src" / "raw.csv").write_text("".join(f"{i},{i % a.fits}\n" for i in range(1000)))
    for g in range(a.fits):
        (root / "src" / "groups" / f"g{g:02d}.txt").write_text(f"{g}\n")
    for name, seconds in (("fit", a.fit), ("aggregate", a.agg), ("plot", a.plot)):
        (root / "steps" / f"{name}.py").write_text(STEP.format(seconds=seconds, name=name))


def farmer_tree(rev: str | None) -> Path:
    """Where the revision's `farmer` package is: the working tree, or an export of REV."""
    if rev is None:
        return REPO_ROOT
    tree = WORK / f"rev-{rev}"
    if not (tree / "farmer").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", rev, "farmer"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def env_for(tree: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONPYCACHEPREFIX"] = str(WORK / ".pycache" / tree.name)
    return env


def farmer(root: Path, tree: Path, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "farmer", *args], cwd=root, capture_output=True, text=True,
                       env=env_for(tree), stdin=subprocess.DEVNULL, check=False)
    if r.returncode != 0:
        raise SystemExit(f"farmer {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def last_build(root: Path) -> dict:
    return json.loads((root / ".farmer" / "last-build.json").read_text())


def world_starts(lb: dict) -> dict[str, float]:
    """When each world's set-up began: last-build.json's `worlds`, or, for a revision
    without them, the start of the world's first task (it waited for its world there)."""
    if lb.get("worlds"):
        return {w["name"]: w["start_s"] for w in lb["worlds"] if w["start_s"] is not None}
    starts: dict[str, float] = {}
    for t in lb["tasks"]:
        if t["world"] and t["start_s"] is not None:
            starts[t["world"]] = min(starts.get(t["world"], t["start_s"]), t["start_s"])
    return starts


def rounds(label: str, tree: Path, a: argparse.Namespace) -> dict:
    root = WORK / f"project-{label}"
    write_project(root, a)
    j = str(a.jobs)
    walls, predicted, critical = [], [], []
    for k in range(a.rounds):
        shutil.rmtree(root / ".farmer", ignore_errors=True)
        shutil.rmtree(root / "out", ignore_errors=True)
        farmer(root, tree, "build", "-j", j)
        plan = json.loads(farmer(root, tree, "plan", "--simulate", "--from-scratch", "--json", "-j", j))
        shutil.rmtree(root / "out")
        farmer(root, tree, "build", "-j", j)
        lb = last_build(root)
        walls.append(lb["wall_s"])
        predicted.append(plan["makespan_s"])
        critical.append(lb["critical_path_s"])
        starts = world_starts(lb)
        what = "set-up began" if lb.get("worlds") else "first task of each world began"
        print(f"{label} round {k + 1}: wall {lb['wall_s']:.2f} s, predicted {plan['makespan_s']:.2f} s "
              f"({(plan['makespan_s'] - lb['wall_s']) / lb['wall_s']:+.1%}), critical path "
              f"{lb['critical_path_s']:.2f} s; {what}: "
              + ", ".join(f"{w} {s:.2f} s" for w, s in sorted(starts.items())), flush=True)
    out = {"wall_s": statistics.median(walls), "predicted_s": statistics.median(predicted),
           "critical_path_s": statistics.median(critical),
           "error": statistics.median((p - w) / w for p, w in zip(predicted, walls))}
    if a.watch:
        out["first_save_s"] = first_save(root, tree, a)
    return out


def first_save(root: Path, tree: Path, a: argparse.Namespace) -> float:
    """`farmer watch` on the built project (its first build is a no-op); once it waits, the
    plot script edited: seconds to the plot rewritten."""
    err_path = WORK / f"{root.name}-watch.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "farmer", "watch", "-j", str(a.jobs)], cwd=root,
                                env=env_for(tree), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
    try:
        deadline = time.monotonic() + 120
        while "waiting for changes" not in err_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"farmer watch ended or hung:\n{err_path.read_text()}")
            time.sleep(0.01)
        plot = root / "steps" / "plot.py"
        t0 = time.perf_counter()
        plot.write_text(plot.read_text().replace("#0", "#1"))
        png = root / "out" / "summary.png"
        while "#1" not in (png.read_text() if png.exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"farmer watch ended or hung:\n{err_path.read_text()}")
            time.sleep(0.002)
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="a revision to compare with the working tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fits", type=int, default=24)
    ap.add_argument("--prep", type=float, default=0.5)
    ap.add_argument("--ml-setup", type=float, default=1.5)
    ap.add_argument("--viz-setup", type=float, default=2.0)
    ap.add_argument("--fit", type=float, default=0.15)
    ap.add_argument("--agg", type=float, default=0.2)
    ap.add_argument("--plot", type=float, default=0.3)
    ap.add_argument("--watch", action="store_true", help="also time the first save under farmer watch")
    a = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    results = {}
    if a.before:
        results[a.before] = rounds(a.before, farmer_tree(a.before), a)
    results["working tree"] = rounds("now", farmer_tree(None), a)
    print(f"\n{a.fits + 4} computations, 2 worlds (set-up {a.ml_setup} s and {a.viz_setup} s), -j {a.jobs}, "
          f"medians of {a.rounds} rounds\n")
    print("| farmer | wall | plan --simulate | off by | critical path |" + (" first save (watch) |" if a.watch else ""))
    print("|---|---:|---:|---:|---:|" + ("---:|" if a.watch else ""))
    for label, r in results.items():
        print(f"| {label} | {r['wall_s']:.2f} s | {r['predicted_s']:.2f} s | {r['error']:+.1%} | "
              f"{r['critical_path_s']:.2f} s |" + (f" {r['first_save_s']:.2f} s |" if a.watch else ""))


if __name__ == "__main__":
    main()
