"""Model and generators for tests/test_property_incremental.py.

A *scenario* is a random DAG of cat-style tasks over a few source files, plus a sequence of
steps; each step is a few mutations of the project (edit / rewrite / touch / delete a source,
delete / edit / rewrite / touch an output) followed by one `farmer build`.

The model predicts, for every build, the exact set of computations that must run under
SPEC §2 (content digests, early cutoff, outputs edited or deleted by hand are rebuilt, a
touch rebuilds nothing) and every output's content (a from-scratch evaluation of the
commands in pure Python).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hypothesis import strategies as st

# kind -> (shell command, pure-Python meaning over the inputs' contents, in order).
# All commands read every input; some are lossy, so a changed input can leave the output
# byte-identical and the ripple must stop there (early cutoff).


def _sort_u(ins: tuple[str, ...]) -> str:
    lines: list[str] = []
    for text in ins:  # sort(1) ends each file's unterminated last line
        parts = text.split("\n")
        if parts[-1] == "":
            parts.pop()
        lines.extend(parts)
    return "".join(line + "\n" for line in sorted(set(lines)))  # LC_ALL=C: byte order


KINDS: dict[str, tuple[str, object]] = {
    "cat": ("cat {inputs} > {outputs}", lambda ins: "".join(ins)),
    "sortu": ("LC_ALL=C sort -u {inputs} > {outputs}", _sort_u),
    "head3": ("cat {inputs} | head -c 3 > {outputs}", lambda ins: "".join(ins)[:3]),
    "wcl": ("cat {inputs} | wc -l | tr -d ' ' > {outputs}",
            lambda ins: f"{''.join(ins).count(chr(10))}\n"),
    "trdx": ("cat {inputs} | tr -d x > {outputs}", lambda ins: "".join(ins).replace("x", "")),
}


# Lossy kinds twice: early cutoff needs them. ("cat" first: what a failure shrinks to.)
KIND_CHOICES = ["cat", "head3", "sortu", "trdx", "wcl", "head3", "sortu", "trdx", "wcl"]


def src_path(i: int) -> str:
    return f"src/s{i}.txt"


def out_path(k: int) -> str:
    return f"out/t{k}.txt"


@dataclass(frozen=True)
class Task:
    kind: str
    inputs: tuple[tuple[str, int], ...]  # ("src", i) or ("task", j), j < this task's index
    at_refs: tuple[bool, ...]  # per input: write a task input as "@tJ" instead of its path


@dataclass(frozen=True)
class Scenario:
    sources: tuple[str, ...]  # initial contents of src/sK.txt
    tasks: tuple[Task, ...]
    steps: tuple[tuple[tuple, ...], ...]  # each: mutations, then a build

    def farmfile(self) -> str:
        return farmfile_text(self.tasks)


def farmfile_text(tasks) -> str:
    parts = []
    for k, t in enumerate(tasks):
        ins = []
        for (what, j), at in zip(t.inputs, t.at_refs):
            if what == "src":
                ins.append(src_path(j))
            else:
                ins.append(f"@t{j}" if at else out_path(j))
        cmd = KINDS[t.kind][0]
        parts.append(
            f"[task.t{k}]\n"
            f"inputs = [{', '.join(repr_toml(p) for p in ins)}]\n"
            f"outputs = [{repr_toml(out_path(k))}]\n"
            f"cmd = {repr_toml(cmd)}\n")
    return "\n".join(parts)


def repr_toml(s: str) -> str:
    assert '"' not in s and "\\" not in s
    return f'"{s}"'


# -- generators -------------------------------------------------------------------------

# A small alphabet so that edits often keep the size (the stat-cache race) and lossy
# commands often map different inputs to the same output (early cutoff).
LINES = st.sampled_from(["a", "b", "x", "ab", "ba", "xa", "bx", ""])
CONTENT = st.builds(
    lambda lines, nl: "\n".join(lines) + ("\n" if nl and lines else ""),
    st.lists(LINES, max_size=4), st.booleans())
GARBAGE = st.sampled_from(["!", "x", "zz\n", "\n"])
# Indices are drawn large and reduced modulo the number of sources/tasks when applied.
IDX = st.integers(0, 7)
DELTA_S = st.one_of(st.integers(1, 5000), st.integers(-5000, -1))  # seconds, never 0

# Content changes of sources are listed twice: twice as likely as the other mutations.
MUTATION = st.one_of(
    st.tuples(st.just("edit_src"), IDX, CONTENT),
    st.tuples(st.just("edit_src"), IDX, CONTENT),
    st.tuples(st.just("flip_src"), IDX),
    st.tuples(st.just("rewrite_src"), IDX),  # the same bytes again: new mtime/ctime only
    st.tuples(st.just("flip_src"), IDX),  # swap a<->b in place: same size, same inode
    st.tuples(st.just("touch_src"), IDX, DELTA_S),
    st.tuples(st.just("sneaky_src"), IDX),  # swap a<->b, then put the old mtime back
    st.tuples(st.just("delete_out"), IDX),
    st.tuples(st.just("edit_out"), IDX, GARBAGE),  # append garbage by hand
    st.tuples(st.just("rewrite_out"), IDX),
    st.tuples(st.just("flip_out"), IDX),
    st.tuples(st.just("touch_out"), IDX, DELTA_S),
    st.tuples(st.just("sneaky_out"), IDX),
    st.tuples(st.just("delete_src"), IDX),  # a build then fails with exit 2 until it is back
)


@st.composite
def scenarios(draw, max_sources: int = 4, max_tasks: int = 6, max_steps: int = 5) -> Scenario:
    n_src = draw(st.integers(1, max_sources))
    sources = tuple(draw(CONTENT) for _ in range(n_src))
    n_tasks = draw(st.integers(1, max_tasks))
    tasks = []
    for k in range(n_tasks):
        avail = [("src", i) for i in range(n_src)] + [("task", j) for j in range(k)]
        picks = draw(st.lists(st.integers(0, len(avail) - 1), min_size=1,
                              max_size=min(3, len(avail)), unique=True))
        if k > 0 and n_src + k - 1 not in picks and draw(st.booleans()):
            picks[-1] = n_src + k - 1  # often read the previous task: deeper chains
        ins = tuple(avail[p] for p in picks)
        ats = tuple(draw(st.booleans()) if what == "task" else False for what, _ in ins)
        tasks.append(Task(draw(st.sampled_from(KIND_CHOICES)), ins, ats))
    steps = draw(st.lists(st.lists(MUTATION, max_size=3).map(tuple), min_size=1,
                          max_size=max_steps))
    return Scenario(sources, tuple(tasks), tuple(steps))


# -- the model --------------------------------------------------------------------------


@dataclass
class Model:
    """What the project holds, and what farmer's traces should say, per SPEC §2."""

    tasks: tuple[Task, ...]
    src: dict[int, str | None]  # current source contents (None: deleted)
    out: dict[int, str | None] = field(default_factory=dict)  # current output files
    # per task: (input contents, output content) of its last successful run
    trace: dict[int, tuple[tuple[str, ...], str]] = field(default_factory=dict)

    def _input_content(self, ref: tuple[str, int], out: dict[int, str | None]) -> str | None:
        what, j = ref
        return self.src[j] if what == "src" else out.get(j)

    def missing_sources(self) -> list[str]:
        return sorted({src_path(j) for t in self.tasks for what, j in t.inputs
                       if what == "src" and self.src[j] is None})

    def build(self) -> set[str] | None:
        """Advance the model by one build; return the ids that must run, or None when the
        build must stop with a graph error (a needed source is missing)."""
        if self.missing_sources():
            return None
        ran = set()
        for k, t in enumerate(self.tasks):  # declaration order is topological
            ins = tuple(self._input_content(r, self.out) for r in t.inputs)
            assert None not in ins
            tr = self.trace.get(k)
            if tr is None or tr[0] != ins or self.out.get(k) != tr[1]:
                new = KINDS[t.kind][1](ins)
                self.out[k] = new
                self.trace[k] = (ins, new)
                ran.add(out_path(k))
        return ran

    def from_scratch(self) -> dict[int, str]:
        """Every output as a clean build would make it from the current sources."""
        res: dict[int, str] = {}
        for k, t in enumerate(self.tasks):
            ins = tuple(self.src[j] if what == "src" else res[j] for what, j in t.inputs)
            res[k] = KINDS[t.kind][1](ins)
        return res


def apply_mutation(root: str, model: Model, m: tuple) -> str | None:
    """Perform one mutation on disk and in the model; return a description, or None when it
    does not apply (e.g. touching a missing file)."""
    op, idx = m[0], m[1]
    if op.endswith("_src"):
        i = idx % len(model.src)
        rel = src_path(i)
        cur = model.src[i]
    else:
        i = idx % len(model.tasks)
        rel = out_path(i)
        cur = model.out.get(i)
    path = os.path.join(root, rel)
    if op == "edit_src":
        _write(path, m[2])
        model.src[i] = m[2]
        return f"write {rel} = {m[2]!r} (was {cur!r})"
    if cur is None:
        if op == "edit_out":
            _write(path, m[2])
            model.out[i] = m[2]
            return f"create missing {rel} = {m[2]!r}"
        return None
    if op in ("rewrite_src", "rewrite_out"):
        _write(path, cur)
        return f"rewrite {rel} with the same bytes {cur!r}"
    if op in ("touch_src", "touch_out"):
        st_ = os.stat(path)
        d = m[2] * 1_000_000_000
        os.utime(path, ns=(st_.st_atime_ns + d, st_.st_mtime_ns + d))
        return f"touch {rel} by {m[2]:+d} s"
    if op in ("flip_src", "flip_out", "sneaky_src", "sneaky_out"):
        new = cur.translate(_FLIP)
        old = os.stat(path)
        _write(path, new)
        if op.startswith("sneaky"):  # only ctime (and the content) tell it changed
            os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
        if op.endswith("_src"):
            model.src[i] = new
        else:
            model.out[i] = new
        how = ", mtime restored" if op.startswith("sneaky") else ""
        return f"swap a<->b in {rel}: {cur!r} -> {new!r} (same size{how})"
    if op in ("delete_src", "delete_out"):
        os.unlink(path)
        if op == "delete_src":
            model.src[i] = None
        else:
            model.out[i] = None
        return f"delete {rel}"
    if op == "edit_out":
        with open(path, "a") as f:
            f.write(m[2])
        model.out[i] = cur + m[2]
        return f"append {m[2]!r} to {rel}"
    raise AssertionError(op)


_FLIP = str.maketrans("ab", "ba")


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:  # truncate and rewrite in place: same inode
        f.write(text)
