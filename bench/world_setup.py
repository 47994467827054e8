"""How close `plan --simulate --from-scratch` comes to the real wall time of a world-heavy
build once one build has measured the world's set-up (issue 16 item 1).

The project: one world whose set-up sleeps SETUP seconds, TASKS tasks in it that sleep TASK
seconds each, `-j JOBS`. Each round removes `.farmer/` and `out/`, builds once (the set-up is
measured), asks `plan --simulate --from-scratch --json` for the makespan, then removes `out/`
and builds again: the prediction against both builds' `wall_s` (last-build.json).

    python bench/world_setup.py [--setup 3] [--task 0.5] [--tasks 4] [--jobs 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

FARMFILE = """\
[world.slow]
setup = ["import time", "time.sleep({setup})"]

[task.analysis]
foreach = "src/{{n}}.txt"
inputs = ["src/{{n}}.txt"]
outputs = ["out/{{n}}.txt"]
world = "slow"
python = '''-c "import sys, time; time.sleep({task}); open(sys.argv[1], 'w').write('x')" {{outputs}}'''
"""


def farmer(root: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    r = subprocess.run([sys.executable, "-m", "farmer", *args], cwd=root, capture_output=True,
                       text=True, env=env, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"farmer {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def wall(root: str) -> float:
    with open(os.path.join(root, ".farmer", "last-build.json")) as f:
        return json.load(f)["wall_s"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--setup", type=float, default=3.0)
    ap.add_argument("--task", type=float, default=0.5)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "work", "world-setup")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "Farmfile"), "w") as f:
        f.write(FARMFILE.format(setup=args.setup, task=args.task))
    for n in range(args.tasks):
        with open(os.path.join(root, "src", f"{n}.txt"), "w") as f:
            f.write(f"{n}\n")
    j = str(args.jobs)
    errors = []
    for k in range(args.rounds):
        shutil.rmtree(os.path.join(root, ".farmer"), ignore_errors=True)
        shutil.rmtree(os.path.join(root, "out"), ignore_errors=True)
        farmer(root, "build", "-j", j)
        first = wall(root)
        plan = json.loads(farmer(root, "plan", "--simulate", "--from-scratch", "--json", "-j", j))
        shutil.rmtree(os.path.join(root, "out"))
        farmer(root, "build", "-j", j)
        second = wall(root)
        predicted = plan["makespan_s"]
        setup = plan.get("world_setups", [{}])[0].get("setup_s")
        for real in (first, second):
            errors.append((predicted - real) / real)
        print(f"round {k + 1}: set-up measured {setup} s; predicted {predicted:.2f} s; "
              f"builds {first:.2f} s and {second:.2f} s "
              f"({(predicted - first) / first:+.1%}, {(predicted - second) / second:+.1%})")
    print(f"median error {statistics.median(errors):+.1%}, worst {max(errors, key=abs):+.1%} "
          f"(setup {args.setup} s, {args.tasks} x {args.task} s, -j {args.jobs})")


if __name__ == "__main__":
    main()
