#!/usr/bin/env python3
"""The remote cache and remote execution against a real BuildGrid on loopback (docs/remote.md).

    python bench/remote.py [--repeat 3] [--jobs 2] [--exec-files 24] [--cmake-files 24] [--only cache,example,exec,cmake]

Uses the server named by FARMER_TEST_REAPI (as .ci/run exports it), else starts one with
tools/reapi_stack.py (BuildGrid 0.4.4, PostgreSQL, two `farmer worker` bots) and stops it after.
Scenarios, each with a salt of its own (so no run sees another's entries):

  cache    bench/run.py's 1k graph: a clean local build; a clean build with the remote read-only
           (every computation a miss: the lookup overhead); a clean build that uploads; a second
           checkout at another path restoring everything from the remote; the same with the local
           cache on (the hits land in it); a third checkout restoring from that local cache
  example  Farmfile.example: a clean local build against a second checkout restoring from the remote
  exec     N C files compiled and linked: local -j JOBS against --remote-exec ([remote] jobs 4)
           on the stack's bots
  cmake    the same C files as a CMake project's build.ninja with FARMER_BASE_DIR=auto: a clean
           build, then the header all include edited and the rebuild; local -j JOBS against
           --remote-exec with FARMER_REMOTE_JOBS=4

Times are wall clock and CPU (farmer's and its commands', not the server's), the median of the
repeats, with the load average before and after; every build's outputs are checked.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def load(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def farmer(root: str, *args: str, env: dict | None = None) -> float:
    return timed(root, *args, env=env)[0]


def timed(root: str, *args: str, env: dict | None = None) -> tuple[float, float]:
    """`farmer build ARGS` in `root`: its wall time and CPU time (farmer's and its commands')."""
    import resource

    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FARMER_REMOTE", "FARMER_CACHE", "FARMER_BASE"))}
    env.update(extra)
    env["PYTHONPATH"] = REPO
    # as users run it: with bytecode caches (this machine's environment turns them off, which
    # makes every run compile grpc's and the REAPI messages' sources again: about 0.8 s)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cp = subprocess.run([sys.executable, "-m", "farmer", "build", *args], cwd=root, env=env,
                        capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cp.returncode != 0 or "warning" in cp.stdout + cp.stderr:
        raise SystemExit(f"farmer build {' '.join(args)} in {root}: {cp.returncode}\n{cp.stdout}{cp.stderr}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def loadavg() -> str:
    return "load average %.1f %.1f %.1f" % os.getloadavg()


def summary(root: str) -> str:
    import json
    with open(os.path.join(root, ".farmer", "last-build.json")) as f:
        tasks = json.load(f)["tasks"]
    counts: dict[str, int] = {}
    for t in tasks:
        key = t["status"] + (f"/{t.get('cache') or t.get('executor')}" if t["status"] in ("ran", "cached") else "")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def cache_scenario(url: str, instance: str, work: str, repeat: int, jobs: int) -> list[str]:
    run = load("bench_run", os.path.join(HERE, "run.py"))
    from pathlib import Path

    g = run.make_graph(1000)
    text = run.farmfile_text(g)
    texts = {"farm": text, "ninja": run.ninja_text(g), "make": run.makefile_text(g)}
    names = ("local", "miss", "upload", "restore", "restore-keep", "local-hit")
    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in names}
    notes = {}
    loads = [loadavg()]
    for k in range(repeat):
        salt = os.urandom(8).hex()
        dirs = {}
        for name in rows:
            d = os.path.join(work, f"cache-{k}-{name}")
            shutil.rmtree(d, ignore_errors=True)
            run.write_project(g, Path(d), texts, "farm")
            with open(os.path.join(d, "Farmfile"), "a") as f:
                f.write(f'\n[remote]\nsalt = "{salt}"\n')
            dirs[name] = d
        remote = ["--remote", url, "--remote-instance", instance]
        both = [*remote, "--cache", "--cache-dir", os.path.join(work, f"cache-{k}-local-cache")]
        j = ["-j", str(jobs)]
        rows["local"].append(timed(dirs["local"], *j))
        rows["miss"].append(timed(dirs["miss"], *j, *remote, "--no-remote-upload"))
        rows["upload"].append(timed(dirs["upload"], *j, *remote))
        rows["restore"].append(timed(dirs["restore"], *j, *remote))
        rows["restore-keep"].append(timed(dirs["restore-keep"], *j, *both))  # the hits land in the local cache
        rows["local-hit"].append(timed(dirs["local-hit"], *j, *both))  # and come from there
        for name, d in dirs.items():
            notes[name] = summary(d)
            if run.tree_digests(Path(d) / "out") != run.tree_digests(Path(dirs["local"]) / "out"):
                raise SystemExit(f"{name}: outputs differ from the local build's")
    loads.append(loadavg())
    med = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items()}
    n = len(g.steps_in)

    def row(label: str, name: str) -> str:
        return f"| {label} | {med[name]:.2f} | {cpu[name]:.2f} | {notes[name]} |"

    return [
        f"### Remote cache: bench/run.py's 1k graph ({n} computations), -j {jobs}, BuildGrid on loopback",
        "",
        f"{loads[0]} before, {loads[1]} after.",
        "",
        f"| build | wall s (median of {repeat}) | CPU s, farmer and its commands | what happened |",
        "| --- | --- | --- | --- |",
        row("clean, no remote", "local"),
        row("clean, remote read-only, every lookup a miss", "miss"),
        row("clean, remote, uploading", "upload"),
        row("second checkout elsewhere, all from the remote", "restore"),
        row("the same with the local cache on (the hits are stored in it)", "restore-keep"),
        row("third checkout, all from that local cache", "local-hit"),
        "",
        f"Overhead per lookup (miss, read-only): {(med['miss'] - med['local']) / n * 1000:.2f} ms; "
        f"with the upload: {(med['upload'] - med['local']) / n * 1000:.2f} ms; "
        f"second checkout against a local clean build: {med['local'] / med['restore']:.2f}x faster.",
        "",
    ]


def example_scenario(url: str, instance: str, work: str, repeat: int, jobs: int) -> list[str]:
    """Farmfile.example (C compiles with depfiles, a link, a run, Python steps in a world)."""
    rows: dict[str, list[tuple[float, float]]] = {"local": [], "restore": []}
    notes = {}
    loads = [loadavg()]
    for k in range(repeat):
        salt = os.urandom(8).hex()
        dirs = {}
        for name in ("local", "upload", "restore"):
            d = os.path.join(work, f"example-{k}-{name}")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(os.path.join(REPO, "example"), os.path.join(d, "example"))
            with open(os.path.join(REPO, "Farmfile.example")) as f:
                text = f.read()
            with open(os.path.join(d, "Farmfile"), "w") as f:
                f.write(text + f'\n[remote]\nsalt = "{salt}"\n')
            dirs[name] = d
        remote = ["--remote", url, "--remote-instance", instance]
        rows["local"].append(timed(dirs["local"], "-j", str(jobs)))
        farmer(dirs["upload"], "-j", str(jobs), *remote)
        rows["restore"].append(timed(dirs["restore"], "-j", str(jobs), *remote))
        for name in rows:
            notes[name] = summary(dirs[name])
    loads.append(loadavg())
    med = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items()}
    return [
        f"### Remote cache: Farmfile.example, -j {jobs}",
        "",
        f"{loads[0]} before, {loads[1]} after.",
        "",
        f"| build | wall s (median of {repeat}) | CPU s, farmer and its commands | what happened |",
        "| --- | --- | --- | --- |",
        f"| clean, no remote | {med['local']:.2f} | {cpu['local']:.2f} | {notes['local']} |",
        f"| second checkout elsewhere, all from the remote | {med['restore']:.2f} | {cpu['restore']:.2f} | {notes['restore']} |",
        "",
    ]


EXEC_FARMFILE = """\
[remote]
salt = "{salt}"
jobs = 4

[task.objects]
foreach = "src/{{stem}}.c"
inputs = ["src/{{stem}}.c", "src/common.h"]
outputs = ["build/{{stem}}.o"]
cmd = "cc -O2 -c {{inputs[0]}} -o {{outputs}}"

[task.app]
inputs = ["@objects"]
outputs = ["build/app"]
cmd = "cc {{inputs}} -o {{outputs}}"
"""


def exec_project(d: str, files: int, salt: str) -> None:
    os.makedirs(os.path.join(d, "src"))
    with open(os.path.join(d, "Farmfile"), "w") as f:
        f.write(EXEC_FARMFILE.format(salt=salt))
    with open(os.path.join(d, "src", "common.h"), "w") as f:
        f.write("double work(int);\n")
    calls = []
    for i in range(files):
        # enough code that a compile takes a noticeable fraction of a second at -O2
        body = "\n".join(f"static double f{i}_{j}(double x) {{ for (int k = 0; k < {j + 3}; k++) x = x * 1.000001 + {j}; "
                         f"return x; }}" for j in range(120))
        chain = " + ".join(f"f{i}_{j}(x)" for j in range(120))
        with open(os.path.join(d, "src", f"u{i}.c"), "w") as f:
            f.write(f'#include "common.h"\n{body}\ndouble u{i}(double x) {{ return {chain}; }}\n')
        calls.append(f"u{i}(1.0)")
    with open(os.path.join(d, "src", "main.c"), "w") as f:
        decls = "".join(f"double u{i}(double);\n" for i in range(files))
        f.write(f'#include <stdio.h>\n{decls}int main(void) {{ printf("%.3f\\n", {" + ".join(calls)}); return 0; }}\n')


def exec_scenario(url: str, work: str, repeat: int, jobs: int, files: int) -> list[str]:
    rows: dict[str, list[float]] = {"local": [], "remote": []}
    notes = {}
    for k in range(repeat):
        salt = os.urandom(8).hex()
        out = {}
        for name in rows:
            d = os.path.join(work, f"exec-{k}-{name}")
            shutil.rmtree(d, ignore_errors=True)
            exec_project(d, files, salt + name)  # salts differ: the remote run must not hit the cache
            args = ["-j", str(jobs)] if name == "local" else ["-j", str(jobs), "--remote", url, "--remote-exec"]
            rows[name].append(farmer(d, *args))
            notes[name] = summary(d)
            out[name] = subprocess.run([os.path.join(d, "build", "app")], capture_output=True, text=True).stdout
        if out["local"] != out["remote"]:
            raise SystemExit(f"the programs differ: {out}")
    med = {k: statistics.median(v) for k, v in rows.items()}
    return [
        f"### Remote execution: {files} C files at -O2 and a link, BuildGrid with 2 `farmer worker` bots on this machine",
        "",
        "| build | wall s (median of %d) | what happened |" % repeat,
        "| --- | --- | --- |",
        f"| local, -j {jobs} | {med['local']:.2f} | {notes['local']} |",
        f"| --remote-exec, [remote] jobs 4 (and -j {jobs} for what stays local) | {med['remote']:.2f} | {notes['remote']} |",
        "",
    ]


def cmake_project(top: str, files: int, salt: str) -> str:
    """exec_project's C files as a CMake project (CMake -G Ninja, Release) under `top`: the
    build directory, top/build. common.h, which every file includes, carries `salt`."""
    exec_project(top, files, salt)
    os.unlink(os.path.join(top, "Farmfile"))
    sources = " ".join(f"src/u{i}.c" for i in range(files))
    with open(os.path.join(top, "CMakeLists.txt"), "w") as f:
        f.write(f"cmake_minimum_required(VERSION 3.16)\nproject(bench C)\nadd_executable(app src/main.c {sources})\n")
    salted(top, salt)
    build = os.path.join(top, "build")
    os.makedirs(build)
    subprocess.run(["cmake", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", top], cwd=build, check=True,
                   capture_output=True)
    return build


def salted(top: str, salt: str) -> None:
    with open(os.path.join(top, "src", "common.h"), "w") as f:
        f.write(f'double work(int);\nstatic const char salt[] __attribute__((used)) = "{salt}";\n')


def cmake_scenario(url: str, work: str, repeat: int, jobs: int, files: int) -> list[str]:
    """A CMake build.ninja with FARMER_BASE_DIR=auto, local -j JOBS against --remote-exec with
    FARMER_REMOTE_JOBS=4 on the stack's bots: a clean build (each compile's headers from a
    preprocessor scan, farmer/remote/depscan.py), then the header every file includes edited
    and the rebuild (every compile and the link; their headers from their depfiles)."""
    if not shutil.which("cmake"):
        raise SystemExit("the cmake scenario needs cmake")
    modes = ("local", "remote")
    rows: dict[tuple[str, str], list[float]] = {(m, b): [] for b in ("clean", "edit") for m in modes}
    notes = {}
    env = {"FARMER_BASE_DIR": "auto", "FARMER_REMOTE_JOBS": "4"}
    for k in range(repeat):
        out = {}
        for name in modes:
            top = os.path.join(work, f"cmake-{k}-{name}")
            shutil.rmtree(top, ignore_errors=True)
            salt = os.urandom(8).hex()  # a salt of its own: the remote runs must not hit the cache
            build = cmake_project(top, files, salt)
            args = ["-f", "build.ninja", "-j", str(jobs)]
            if name == "remote":
                args += ["--remote", url, "--remote-exec"]
            rows[(name, "clean")].append(farmer(build, *args, env=env))
            notes[(name, "clean")] = summary(build)
            salted(top, salt + "-edited")
            rows[(name, "edit")].append(farmer(build, *args, env=env))
            notes[(name, "edit")] = summary(build)
            out[name] = subprocess.run([os.path.join(build, "app")], capture_output=True, text=True).stdout
        if out["local"] != out["remote"]:
            raise SystemExit(f"the programs differ: {out}")
    med = {key: statistics.median(v) for key, v in rows.items()}
    lines = [
        f"### Remote execution of a CMake build.ninja: {files} C files at -O2 and a link, `FARMER_BASE_DIR=auto`",
        "",
        "| build | wall s (median of %d) | what happened |" % repeat,
        "| --- | --- | --- |",
    ]
    for what, label in (("clean", "clean build"), ("edit", "rebuild after the header all include changed")):
        lines += [
            f"| {label}, local -j {jobs} | {med[('local', what)]:.2f} | {notes[('local', what)]} |",
            f"| {label}, --remote-exec, FARMER_REMOTE_JOBS=4 (and -j {jobs} here) | {med[('remote', what)]:.2f} | "
            f"{notes[('remote', what)]} |",
        ]
    lines += ["", "Remote against local: clean %.2fx, rebuild %.2fx." % (
        med[("local", "clean")] / med[("remote", "clean")], med[("local", "edit")] / med[("remote", "edit")]), ""]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--exec-files", type=int, default=24)
    ap.add_argument("--cmake-files", type=int, default=24)
    ap.add_argument("--only", default="cache,example,exec,cmake")
    a = ap.parse_args()
    stack = load("reapi_stack", os.path.join(REPO, "tools", "reapi_stack.py"))
    state = None
    url = os.environ.get("FARMER_TEST_REAPI")
    instance = os.environ.get("FARMER_TEST_REAPI_CACHE", "cache")
    work = tempfile.mkdtemp(prefix="farmer-bench-remote-")
    try:
        if not url:
            state = os.path.join(work, "stack")
            url = stack.start(state, 2)["FARMER_TEST_REAPI"]
        lines = []
        if "cache" in a.only:
            lines += cache_scenario(url, instance, work, a.repeat, a.jobs)
        if "example" in a.only:
            lines += example_scenario(url, instance, work, a.repeat, a.jobs)
        if "exec" in a.only:
            lines += exec_scenario(url, work, a.repeat, a.jobs, a.exec_files)
        if "cmake" in a.only:
            lines += cmake_scenario(url, work, a.repeat, a.jobs, a.cmake_files)
        print("\n".join(lines))
    finally:
        if state:
            stack.stop(state)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
