"""What `--check-deps` costs on a real CMake project: clean builds of ninja's own source
(its PyPI sdist, as bench/projects.py uses it) by ninja, by farmer, and by farmer under
strace (`farmer build --check-deps`), alternating, each in a build directory of its own
configured alike; the median wall and CPU seconds (user + sys of every process) of each,
and the warnings the checked build printed. Then what one command costs: a clean build of
200 `cat` commands with and without --check-deps, `sh -c 'cat a > b'` alone and under
strace (with and without --seccomp-bpf), and reading the trace of one of the compiles.

    python bench/check_deps.py --sdist ninja-1.13.2.tar.gz [--rounds 3] [-j 2] [--work DIR]

Run it with a bytecode-compiled farmer (bench/README.md). The sdist: `pip download
--no-binary :all: --no-deps ninja==1.13.2`. strace traces each command from a grandchild
that farmer does not wait for (`-DD`): this script makes itself their subreaper and waits
for them too, so their CPU is counted.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

FARMER = [sys.executable, "-m", "farmer"]
ROOT = Path(__file__).resolve().parent.parent


def subreaper() -> None:
    """Orphans below this process (the tracers strace leaves as grandchildren) become its
    children, so that their CPU is counted once they are waited for (`reap`)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap() -> None:
    """Wait for every child left (orphans adopted): their CPU joins RUSAGE_CHILDREN."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float, str]:
    """Wall and CPU seconds of `argv` in `cwd`, and what it printed; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cp = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                        check=False)
    wall = time.perf_counter() - t0
    reap()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cp.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed in {cwd}:\n{cp.stdout}\n{cp.stderr}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, cp.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sdist", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "work" / "check-deps")
    args = ap.parse_args()
    subreaper()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    with tarfile.open(args.sdist) as tar:
        tar.extractall(args.work, filter="data")
    source = next(args.work.glob("ninja-*/ninja-upstream"))
    kinds = {"ninja": ["ninja", f"-j{args.j}"],
             "farmer": [*FARMER, "build", "-f", "build.ninja", "-j", str(args.j)],
             "farmer --check-deps": [*FARMER, "build", "-f", "build.ninja", "-j", str(args.j), "--check-deps"]}
    dirs = {}
    for n, kind in enumerate(kinds):
        d = dirs[kind] = args.work / f"build{n}"
        subprocess.run(["cmake", "-S", str(source), "-B", str(d), "-G", "Ninja", "-DBUILD_TESTING=OFF",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    said = ""
    for _ in range(args.rounds):
        for kind, argv in kinds.items():
            d = dirs[kind]
            if kind == "ninja":
                subprocess.run(["ninja", "-t", "clean"], cwd=d, check=True, capture_output=True)
            else:
                subprocess.run([*FARMER, "clean", "-f", "build.ninja"], cwd=d, env=env, check=True,
                               capture_output=True)
                shutil.rmtree(d / ".farmer", ignore_errors=True)
            wall, cpu, out = timed(argv, d, env)
            times[kind].append((wall, cpu))
            if kind.endswith("--check-deps"):
                said = "\n".join(line for line in out.splitlines() if not line.startswith("["))
    print(f"ninja {args.sdist.name}, clean builds at -j{args.j}, median of {args.rounds}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  {'':22} {'wall s':>8} {'cpu s':>8}")
    for kind, runs in times.items():
        print(f"  {kind:22} {statistics.median(w for w, _ in runs):8.2f} {statistics.median(c for _, c in runs):8.2f}")
    print("what the checked build printed besides its progress lines:")
    print(said)
    per_command(args.work, args.rounds, args.j, env, dirs["ninja"])


def per_command(work: Path, rounds: int, jobs: int, env: dict, configured: Path) -> None:
    """The cost of tracing one small command, and of reading a compile's trace."""
    sys.path.insert(0, str(ROOT))
    from farmer.run.tracer import strace

    tiny = work / "tiny"
    (tiny / "src").mkdir(parents=True)
    (tiny / "Farmfile").write_text('[task.t]\nforeach = "src/{n}.txt"\ninputs = ["src/{n}.txt"]\n'
                                   'outputs = ["out/{n}.txt"]\ncmd = "cat src/{n}.txt > out/{n}.txt"\n')
    for n in range(200):
        (tiny / "src" / f"{n}.txt").write_text(f"{n}\n")
    builds: dict[str, list[tuple[float, float]]] = {"farmer": [], "farmer --check-deps": []}
    for _ in range(rounds):
        for kind, runs in builds.items():
            shutil.rmtree(tiny / "out", ignore_errors=True)
            shutil.rmtree(tiny / ".farmer", ignore_errors=True)
            wall, cpu, _ = timed([*FARMER, "build", "-j", str(jobs), *kind.split()[1:]], tiny, env)
            runs.append((wall, cpu))
    print(f"200 `cat` commands, clean builds at -j{jobs}, median of {rounds}:")
    for kind, runs in builds.items():
        print(f"  {kind:22} {statistics.median(w for w, _ in runs):8.2f} {statistics.median(c for _, c in runs):8.2f}")
    found = strace.find()
    trace = str(work / "one.trace")
    command = ["/bin/sh", "-c", "cat src/1.txt > one.txt"]
    seccomp = strace.traced_argv(found, command, trace)
    ptrace = [a for a in seccomp if a != "--seccomp-bpf"]
    print("one command, 50 runs each, ms of CPU a run:")
    for what, argv in (("sh -c 'cat a > b'", command), ("under strace", seccomp), ("without --seccomp-bpf", ptrace)):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(50):
            subprocess.run(argv, cwd=tiny, check=True)
            reap()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(f"  {what:22} {(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 20:8.2f}")
    compile_cmd = next(c for c in subprocess.run(["ninja", "-t", "commands"], cwd=configured, capture_output=True,
                                                 text=True, check=True).stdout.splitlines() if "build.cc.o" in c)
    subprocess.run(strace.traced_argv(found, ["/bin/sh", "-c", compile_cmd], trace), cwd=configured, check=True)
    with open(trace, encoding="utf-8", errors="surrogateescape") as f:
        lines = f.readlines()
    prefix = (str(configured.resolve()) + "/",)
    t0 = time.perf_counter()
    for _ in range(20):
        strace.touched(strace.parse(lines, str(configured), prefix))
    print(f"reading a compile's trace ({len(lines)} lines): {(time.perf_counter() - t0) * 50:.1f} ms")


if __name__ == "__main__":
    main()
