"""What several test modules share that is neither a fixture nor the farmer runner (those are
in conftest.py): projects written to disk, computations made by hand, the state database's
health, the output of `python -X importtime`, and the crash harness's graph and its
independent model. A test module imports from here, conftest.py or fakes.py, never from
another test module."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from farmer.graph.graph import Computation, Graph

# -- projects on disk -------------------------------------------------------------------------


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Each of `files` (relative path -> text) written under `root`; returns `root`."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def cmake_checkout(top: Path, files: dict[str, str], *cmake_args: str) -> Path:
    """A CMake project (`files` under `top`) configured with `cmake -G Ninja ARGS` in
    top/build; returns top/build."""
    write_files(top, files)
    build = top / "build"
    build.mkdir()
    subprocess.run(["cmake", "-G", "Ninja", *cmake_args, str(top)], cwd=build, check=True, capture_output=True)
    return build


def c_program(tag: str = "") -> dict[str, str]:
    """A small C program under src/ (main.c and util.c, which includes util.h) that prints 42;
    `tag` goes into util.c's object, so a test can have bytes no other test uploaded."""
    return {
        "src/util.h": "int twice(int);\n",
        "src/util.c": f'#include "util.h"\nconst char *tag = "{tag}";\nint twice(int x) {{ return 2 * x; }}\n',
        "src/main.c": '#include <stdio.h>\n#include "util.h"\n'
                      'int main(void) { printf("%d\\n", twice(21)); return 0; }\n',
    }


# a -> b, and c on its own: the smallest graph with a dependency and an independent task
# Two steps on one source file, src.txt: a copy, then the copy twice (the no-op and server tests).
SRC_CHAIN = """
[task.a]
inputs = ["src.txt"]
outputs = ["out/a.txt"]
cmd = "cat src.txt > out/a.txt"

[task.b]
inputs = ["out/a.txt"]
outputs = ["out/b.txt"]
cmd = "cat out/a.txt out/a.txt > out/b.txt"
"""

CHAIN = """
[task.a]
inputs = ["src/a.txt"]
outputs = ["out/a.txt"]
cmd = "cp {inputs} {outputs}"

[task.b]
inputs = ["out/a.txt"]
outputs = ["out/b.txt"]
cmd = "cat {inputs} {inputs} > {outputs}"

[task.c]
inputs = ["src/c.txt"]
outputs = ["out/c.txt"]
cmd = "cp {inputs} {outputs}"
"""


# sources, a foreach over their outputs and a glob over them: the outputs that go stale when a
# source, a task or an output's name goes
STALE_CHAIN = """\
    [task.up]
    foreach = "src/{n}.txt"
    inputs = ["src/{n}.txt"]
    outputs = ["out/{n}.txt"]
    cmd = "tr a-z A-Z < {inputs} > {outputs}"
    [task.twice]
    foreach = "out/{n}.txt"
    inputs = ["out/{n}.txt"]
    outputs = ["twice/{n}.txt"]
    cmd = "cat {inputs} {inputs} > {outputs}"
    [task.all]
    inputs = ["out/*.txt"]
    outputs = ["all.txt"]
    cmd = "cat {inputs} > {outputs}"
    """


def built_stale_chain(project) -> None:
    """`project` with STALE_CHAIN's Farmfile and sources a, b, c, built."""
    project.farmfile(STALE_CHAIN)
    for n in "abc":
        project.write(f"src/{n}.txt", n + "\n")
    r = project.build()
    assert r.returncode == 0, r


def with_chain(project):
    """`project` (conftest.Project) with CHAIN's Farmfile and its two sources."""
    project.farmfile(CHAIN)
    project.write("src/a.txt", "alpha\n")
    project.write("src/c.txt", "gamma\n")
    return project


def last_build_tasks(root: Path | str) -> dict[str, dict]:
    """The tasks of the last build's .farmer/last-build.json, by computation id."""
    with open(os.path.join(root, ".farmer", "last-build.json")) as f:
        return {t["id"]: t for t in json.load(f)["tasks"]}


def state_integrity(root: Path | str) -> str:
    """SQLite's integrity check of the project's .farmer/state.db: "ok" when it is whole."""
    db = sqlite3.connect(os.path.join(root, ".farmer", "state.db"))
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()


# -- file modes that bind root --------------------------------------------------------------

PR_CAPBSET_DROP = 24
DAC_CAPS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


def drop_dac() -> None:
    """A preexec_fn: as root, the child leaves the capabilities that let root read, write and
    chmod anything out of its bounding set, so that after exec file modes bind it as they
    bind any user. (It exits 97 if that is refused: see can_drop_dac.)"""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in DAC_CAPS:
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                os._exit(97)


def can_drop_dac() -> bool:
    return subprocess.run(["true"], preexec_fn=drop_dac).returncode == 0


@contextlib.contextmanager
def mounted_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` ("512k") mounted at `where` for the block, then unmounted; the test
    skips where it may not mount (it needs root and CAP_SYS_ADMIN)."""
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield where
    finally:
        for _ in range(50):  # busy while a process that used it is still exiting
            if subprocess.run(["umount", str(where)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)


# -- computations and graphs ------------------------------------------------------------------


def computation(index: int = 0, action: str = "true", id: str | None = None, task: str = "t",
                **fields) -> Computation:
    """A computation made by hand, without a Farmfile: the `index`-th, id out/INDEX unless
    given; `fields` as Computation takes them (inputs=, env=, timeout=, kind=...)."""
    return Computation(index, f"out/{index}" if id is None else id, task, action=action, **fields)


def computation_of(graph: Graph, cid: str) -> Computation:
    return graph.computations[graph.by_id[cid]]


def computation_graph(n: int, edges=(), task=None, cost=None, cpus=None, pools=None,
                      kinds=None) -> list[Computation]:
    """`n` computations `c0..c{n-1}` of tasks t0..t{n-1}, each with one output `cI.out`; an edge
    (p, c) makes `c` read `p`'s output. `task`, `cost`, `cpus`, `pools` and `kinds` map an
    index to that field's value where it is not the default."""
    task, cost, cpus, pools, kinds = task or {}, cost or {}, cpus or {}, pools or {}, kinds or {}
    comps = [
        Computation(i, f"c{i}.out", task.get(i, f"t{i}"), outputs=[f"c{i}.out"], kind=kinds.get(i, "cmd"),
                    action=f"make c{i}", cost=cost.get(i), cpus=cpus.get(i, 1), pool=pools.get(i))
        for i in range(n)
    ]
    for p, c in edges:
        comps[c].inputs.append(comps[p].outputs[0])
        comps[c].producers.append(p)
        comps[p].consumers.append(c)
    return comps


# -- imports (python -X importtime) -----------------------------------------------------------

PROFILE = {"PYTHONPROFILEIMPORTTIME": "1"}  # python -X importtime: one stderr line a module
# what a no-op build must not import (docs/performance.md "Start-up rules")
HEAVY = {"click", "farmer.build.run", "farmer.cli.app", "networkx", "rich", "sqlite3", "_sqlite3", "tomllib",
         "toml_rs", "array"}  # array imports collections (files/stattable.py)


def imported(result) -> set[str]:
    """The modules a farmer run with PROFILE in its environment imported."""
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


# -- the crash harness (test_reliability_crash.py, test_reliability_interrupts.py) -------------

# Quick computations whose commands write their outputs in two steps (a partial first write, a
# short sleep, then the real content): a build stopped at any point leaves half-written files.
CRASH_FARMFILE = """
[task.up]
foreach = "src/{n}.txt"
inputs = ["src/{n}.txt"]
outputs = ["out/up/{n}.txt"]
cmd = "head -c 2 {inputs} > {outputs}; sleep 0.05; tr a-z A-Z < {inputs} > {outputs}"

[task.num]
foreach = "src/{n}.txt"
inputs = ["src/{n}.txt"]
outputs = ["out/num/{n}.txt"]
cmd = "echo partial > {outputs}; sleep 0.04; wc -l < {inputs} > {outputs}"

[task.pair]
foreach = "out/up/{n}.txt"
inputs = ["out/up/{n}.txt", "out/num/{n}.txt"]
outputs = ["out/pair/{n}.txt"]
cmd = "cat {inputs[0]} > {outputs}; sleep 0.03; cat {inputs} > {outputs}"

[task.all]
inputs = ["@pair"]
outputs = ["out/all.txt"]
cmd = "head -c 1 {inputs[0]} > {outputs}; sleep 0.02; cat {inputs} > {outputs}"

[task.summary]
inputs = ["@num"]
outputs = ["out/summary.txt"]
cmd = "cat {inputs} > {outputs}"
"""


def crash_expected_outputs(sources: dict[str, str]) -> dict[str, str]:
    """What a clean build of CRASH_FARMFILE makes, computed from the sources (src/NAME.txt ->
    text) without farmer or a shell."""
    out: dict[str, str] = {}
    for name, text in sources.items():
        n = name[: -len(".txt")]
        out[f"out/up/{n}.txt"] = text.upper()
        out[f"out/num/{n}.txt"] = f"{text.count(chr(10))}\n"
        out[f"out/pair/{n}.txt"] = out[f"out/up/{n}.txt"] + out[f"out/num/{n}.txt"]
    out["out/all.txt"] = "".join(out[p] for p in sorted(p for p in out if p.startswith("out/pair/")))
    out["out/summary.txt"] = "".join(out[p] for p in sorted(p for p in out if p.startswith("out/num/")))
    return out


def read_outputs(root: Path) -> dict[str, str]:
    """Every file under root/out, by its path relative to root."""
    found = {}
    for dirpath, _, files in os.walk(root / "out"):
        for f in files:
            p = Path(dirpath) / f
            found[str(p.relative_to(root))] = p.read_text()
    return found
