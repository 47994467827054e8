"""Reliability: hostile input (issue 5). Generated and mutated Farmfiles never make farmer
print a traceback, hang, or write outside the project root.

Every example is a fresh project next to a *sentinel* directory (which a symlink inside the
project points to, and which absolute paths in the Farmfile name). farmer runs in a forked
child of this process (the real `farmer.cli.app.main`, its stdout and stderr sent to files, its
own process group, a time limit), which is what lets hypothesis try hundreds of Farmfiles in
seconds. Each run must end in one of two ways:

* exit 2 with exactly one line on stderr, `farmer: error: ...`, and no last-build.json
  written by that run; or
* a correct build, exit 0 or 1: last-build.json agrees with the exit status, every
  computation that ran has its declared outputs as files, every failed one has none, the
  summary line is printed, and a second build of a successful one runs nothing.

And always: no `Traceback`, no hang, the sentinel (and everything else outside the root)
untouched, no process left running in the project.

`test_fuzz_generated_farmfiles` draws structured Farmfiles (tasks with random keys, wrong
types, unknown keys, paths with quotes, spaces, unicode, control characters, `..`, absolute
paths, symlinks out of the root, globs, `@` references to other tasks, to themselves and in
long chains, foreach tables small and huge); `test_fuzz_mutated_farmfiles` corrupts such
Farmfiles byte-wise. The `_slow` variants run many more examples (`-m slow`).
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest
from conftest import HarnessCounts, assert_error, processes_in, wait_no_process_under
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FAST_EXAMPLES = int(os.environ.get("FARMER_FUZZ_EXAMPLES", "40"))
SLOW_EXAMPLES = int(os.environ.get("FARMER_FUZZ_SLOW_EXAMPLES", "600"))
RUN_TIMEOUT = 30.0  # seconds one farmer run may take before it counts as a hang


# ---------------------------------------------------------------- running farmer --

class Run:
    def __init__(self, args, code, out, err, hung, elapsed):
        self.args, self.returncode, self.stdout, self.stderr = args, code, out, err
        self.hung, self.elapsed = hung, elapsed

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __repr__(self) -> str:
        return (f"<farmer {' '.join(map(str, self.args))} -> rc={self.returncode} hung={self.hung} "
                f"({self.elapsed:.2f}s)\n--- stdout ---\n{self.stdout[-3000:]}"
                f"--- stderr ---\n{self.stderr[-3000:]}>")


def run_forked(root: Path, io_dir: Path, *args: str, timeout: float = RUN_TIMEOUT) -> Run:
    """`farmer ARGS` in `root`, in a forked child of this process (farmer is imported here)."""
    import importlib

    import farmer.cli.app

    # What the command line imports lazily, imported once here: every child starts at once.
    for name in ("farmer.build.run", "farmer.cli.inspection", "farmer.graph.load", "farmer.store.proof", "farmer.build.ninja",
                 "farmer.report.console", "farmer.report.timeline", "farmer.run.worlds.chain"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass

    out_path, err_path = io_dir / "stdout", io_dir / "stderr"
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 99
        try:
            os.setpgid(0, 0)
            for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                    (1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                new = os.open(path, flags, 0o644)
                os.dup2(new, fd)
                os.close(new)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                          line_buffering=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                          errors="backslashreplace", line_buffering=True)
            for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
                signal.signal(s, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.chdir(root)
            sys.argv = ["farmer", *args]
            try:
                farmer.cli.app.main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 99
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    deadline = t0 + timeout
    hung = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            hung = True
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = -1
            break
        time.sleep(0.002)
    code = os.waitstatus_to_exitcode(status) if not hung else None
    read = lambda p: p.read_bytes().decode("utf-8", "replace") if p.exists() else ""
    return Run(args, code, read(out_path), read(err_path), hung, time.monotonic() - t0)


# ----------------------------------------------------------------- the sandbox --

SOURCES = {
    "src/a.txt": "alpha\n",
    "src/b c.txt": "space\n",
    "src/q'uo\"te.txt": "quotes\n",
    "src/ünï cødé.txt": "unicode\n",
    "src/sub/deep.txt": "deep\n",
    "src/$(echo x).txt": "dollar\n",
    "src/-dash.txt": "dash\n",
}


def make_sandbox(base: Path) -> tuple[Path, Path, Path]:
    root, sentinel, io_dir = base / "proj", base / "sentinel", base / "io"
    for d in (root, sentinel, io_dir):
        d.mkdir()
    (sentinel / "keep.txt").write_text("keep\n")
    (sentinel / "dir").mkdir()
    for rel, text in SOURCES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    os.symlink("../sentinel", root / "out_link")  # a directory symlink out of the root
    os.symlink("../../sentinel/keep.txt", root / "src" / "file_link.txt")  # a file one
    os.symlink(".", root / "loop")  # a symlink loop
    return root, sentinel, io_dir


def snapshot_outside(base: Path) -> dict[str, tuple]:
    """Everything under `base` but the project and the io files: type and content."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        rel = os.path.relpath(dirpath, base)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in ("proj", "io")]
            out["."] = ("dir", tuple(sorted(os.listdir(base))))
            continue
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            if os.path.islink(p):
                out[os.path.join(rel, name)] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[os.path.join(rel, name)] = ("dir", st_.st_mode)
            else:
                with open(p, "rb") as f:
                    out[os.path.join(rel, name)] = ("file", st_.st_mode, f.read())
    return out


# ---------------------------------------------------------- what a run must be --

def check_run(r: Run, root: Path, lb_before: bytes | None) -> None:
    assert not r.hung, f"farmer hung: {r!r}"
    assert "Traceback" not in r.stderr, r
    # (a failing python task's own traceback is its output, shown on stdout: none of farmer's)
    assert not re.search(r'File "[^"]*/farmer/(?!worlds/driver\.py)[^"]*"', r.stdout), r
    assert r.returncode in (0, 1, 2), r
    lb_path = root / ".farmer" / "last-build.json"
    if r.returncode == 2:
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and lines[0].startswith("farmer: error: "), r
        lb_now = lb_path.read_bytes() if lb_path.exists() else None
        assert lb_now == lb_before, f"an exit-2 run wrote last-build.json: {r!r}"
        return
    assert not [l for l in r.stderr.splitlines() if l.strip() and not l.startswith("farmer: warning:")], r
    if r.args[0] != "build":
        assert r.returncode == 0, r
        return
    lb = json.loads(lb_path.read_text())
    assert lb["status"] == ("ok" if r.returncode == 0 else "failed"), (lb["status"], r)
    last = [l for l in r.stdout.splitlines() if l.strip()][-1]
    assert last.startswith("farmer: ") and " ran " in last, r
    for t in lb["tasks"]:
        for out in t["outputs"]:
            p = root / out
            if t["status"] in ("ran", "up-to-date"):
                assert p.is_file(), (t, r)
            elif t["status"] == "failed":
                assert not p.is_file() or p.is_symlink(), (t, r)


def exercise(farmfile: bytes, base: Path, second_build: bool = True) -> list[Run]:
    """Write `farmfile` into a fresh sandbox, run farmer on it, check every run."""
    root, sentinel, io_dir = make_sandbox(base)
    (root / "Farmfile").write_bytes(farmfile)
    before = snapshot_outside(base)
    runs = []
    lb_path = root / ".farmer" / "last-build.json"
    try:
        for args in (("build", "-k", "-j", "3"), ("build", "-j", "2"), ("plan", "--simulate")):
            lb_before = lb_path.read_bytes() if lb_path.exists() else None
            r = run_forked(root, io_dir, *args)
            runs.append(r)
            check_run(r, root, lb_before)
            left = wait_no_process_under(root)
            assert not left, f"processes left running in the project: {left} after {r!r}"
            assert snapshot_outside(base) == before, f"something outside the root changed: {r!r}"
            if r.returncode == 2 or args[0] == "plan":
                break
            if args[1] == "-k" and not second_build:
                break
            if args[1] == "-j" and runs[0].returncode == 0 and b"always" not in farmfile:
                # a successful build left everything up to date
                assert r.returncode == 0 and " ran 0," in r.stdout, (runs[0], r)
            if r.returncode == 0:
                check_contents(root, io_dir, r)
    finally:
        for pid in processes_in(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return runs


def check_contents(root: Path, io_dir: Path, build: Run) -> None:
    """Every output of a `cat` computation holds its inputs' contents, in the order farmer
    lists them: weird names were quoted right and nothing is stale."""
    g = run_forked(root, io_dir, "graph", "--format", "json")
    assert g.returncode == 0 and "Traceback" not in g.output, g
    for comp in json.loads(g.stdout)["computations"]:
        if not comp["command"] or not comp["command"].startswith("for f in "):
            continue
        if any(os.path.samefile(root / i, root / o) for i in comp["inputs"] for o in comp["outputs"]
               if (root / o).exists()):
            continue  # it reads its own output under another name (a symlink): garbage in
        expected = b"".join((root / i).read_bytes() for i in comp["inputs"])
        for out in comp["outputs"]:
            assert (root / out).read_bytes() == expected, (comp, build)


# ------------------------------------------------------------------ generators --

def toml_str(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_key(k: str) -> str:
    if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k):
        return k
    return toml_str(k)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def toml_doc(doc: dict) -> str:
    """Top-level scalars first, then [table] and [table.name] sections."""
    lines = []
    for k, v in doc.items():
        if not isinstance(v, dict):
            lines.append(f"{toml_key(k)} = {toml_value(v)}")
    for k, v in doc.items():
        if not isinstance(v, dict):
            continue
        if k in ("task", "world") and all(isinstance(x, dict) for x in v.values()) and v:
            for name, body in v.items():
                lines.append(f"\n[{toml_key(k)}.{toml_key(name)}]")
                lines.extend(f"{toml_key(kk)} = {toml_value(vv)}" for kk, vv in body.items())
        else:
            lines.append(f"\n[{toml_key(k)}]")
            lines.extend(f"{toml_key(kk)} = {toml_value(vv)}" for kk, vv in v.items())
    return "\n".join(lines) + "\n"


NAMES = ["a", "b", "c", "t-1", "x.y", "_u", "ok"]
BAD_NAMES = ["", "a b", "ü", ".hidden", "a/b", "a\nb", "$x"]
ALPHABET = st.characters(codec="utf-8", exclude_characters="\x00") | st.sampled_from(
    list(" '\"$`\\;|&*?[]{}()~\t\n\x1b\x7f/.-é漢😀"))
weird_text = st.text(ALPHABET, max_size=12)
# characters that cannot form shell syntax: random text for command lines
shell_safe = st.text(st.sampled_from(list("abcxyz019 _{}[]")), max_size=20)


def path_strategy(sentinel_hint: str):
    plain = st.sampled_from(sorted(SOURCES) + [
        "out/x.txt", "out/y.txt", "out/sub/z.txt", "out/ü ñ.txt", "out/q'uote\".txt", "out/$HOME.txt",
        "src/*.txt", "src/**", "**/*.txt", "src/[ab].txt", "src/?.txt", "loop/src/a.txt",
        "loop/**", "out_link/x.txt", "out_link/dir/y.txt", "src/file_link.txt",
        "../sentinel/keep.txt", "out/../../sentinel/new.txt", "a/../b.txt", "./out/dot.txt",
        "out/", ".", "", ".farmer/x", ".farmer", "Farmfile", "out/{stem}.o", "{nope}", "{{lit}}",
        "out/{n}.txt", "out/{inputs}.txt", "src/{stem}.txt", sentinel_hint + "/abs.txt", "/etc/passwd",
        "out/" + "x" * 300, "out/" + "é" * 130, "out/\x01ctl.txt",
    ])
    refs = st.sampled_from(NAMES).map(lambda n: "@" + n)
    generated = weird_text.map(lambda s: "out/" + s)
    return st.one_of(plain, plain, refs, generated, weird_text)


def command_strategy():
    return st.one_of(
        st.sampled_from([
            "cat {inputs} > {outputs}",
            "for f in {outputs}; do cat {inputs} > \"$f\"; done",
            "cat {inputs} > {outputs[0]}",
            "echo {n} > {outputs}",
            "true",
            "exit 3",
            "mkdir -p {outputs}",
            "ln -s nowhere {outputs}",
            "echo {inputs[5]} > {outputs}",
            "echo {{literal}} > {outputs}",
            "echo {depfile} > {outputs}",
            "echo {cc} {stem} > {outputs}",
            "echo unbalanced { > {outputs}",
            "echo } > {outputs}",
        ]),
        shell_safe.map(lambda s: ": " + s),
    )


PYTHON_LINES = [
    "-c \"import sys; [open(p, 'w').write('py') for p in sys.argv[1:]]\" {outputs}",
    "-c \"raise SystemExit(4)\"",
    "-c \"raise ValueError('boom')\"",
    "nonexistent_script.py {outputs}",
]


@st.composite
def values_for(draw, key: str, sentinel_hint: str):
    """A value for task key `key`: usually well-typed, sometimes not."""
    wrong = st.one_of(st.integers(-3, 10**6), st.booleans(), st.floats(allow_nan=True),
                      st.lists(st.integers(), max_size=3), st.dictionaries(st.sampled_from(NAMES), st.integers(), max_size=2),
                      weird_text)
    if draw(st.integers(0, 9)) == 0:
        return draw(wrong)
    paths = path_strategy(sentinel_hint)
    if key in ("inputs", "outputs"):
        size = draw(st.sampled_from([0, 1, 1, 2, 3, 5, 2000]))
        if size == 2000:  # a huge list: the same few paths over and over
            few = draw(st.lists(paths, min_size=1, max_size=3))
            return [few[i % len(few)] for i in range(size)]
        return draw(st.lists(paths, min_size=size, max_size=size))
    if key == "cmd":
        return draw(command_strategy())
    if key == "python":
        return draw(st.sampled_from(PYTHON_LINES))
    if key in ("world", "pool"):
        return draw(st.sampled_from(["w", "p", "nope", ""]))
    if key == "foreach":
        return draw(st.one_of(
            st.sampled_from(["src/{stem}.txt", "{a}/{b}", "out/{x}", "nowild", "src/{stem}", "{inputs}",
                             "src/{s}{s}.txt", "{x}", "src/{bad name}.txt", ""]),
            st.dictionaries(st.sampled_from(["n", "m", "k", "bad key", "inputs"]),
                            st.lists(weird_text | st.sampled_from(["1", "2", "x"]), max_size=4),
                            max_size=2),
            st.integers(1, 3000).map(lambda n: {"n": [str(i) for i in range(n)]}),
        ))
    if key == "depfile":
        return draw(paths)
    if key == "env":
        return draw(st.dictionaries(weird_text | st.sampled_from(["X", "PATH", "HOME"]),
                                    weird_text | st.integers(), max_size=3))
    if key in ("cost", "timeout"):
        return draw(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                              st.sampled_from([0, 0.001, 0.5, 1e300, -1, 5])))
    if key == "cpus":
        return draw(st.sampled_from([0, 1, 2, 64, 2**62, -1]))
    if key in ("always", "cache"):
        return draw(st.booleans())
    return draw(wrong)


TASK_KEY_CHOICES = ["inputs", "outputs", "cmd", "python", "world", "foreach", "depfile", "env",
                    "cost", "cpus", "pool", "timeout", "always", "cache"]


@st.composite
def farmfile_docs(draw, sentinel_hint: str = "/nonexistent/sentinel"):
    doc: dict = {}
    n_tasks = draw(st.integers(0, 6))
    tasks = {}
    for _ in range(n_tasks):
        name = draw(st.sampled_from(NAMES) if draw(st.integers(0, 12)) else st.sampled_from(BAD_NAMES))
        body = {}
        keys = draw(st.lists(st.sampled_from(TASK_KEY_CHOICES), max_size=6, unique=True))
        if draw(st.booleans()):
            keys = ["outputs", "cmd"] + [k for k in keys if k not in ("outputs", "cmd")]
        for k in keys:
            body[k] = draw(values_for(k, sentinel_hint))
        if draw(st.integers(0, 15)) == 0:
            body[draw(st.sampled_from(["inptus", "command", "output", "deps", "ünknown"]))] = "x"
        tasks[name] = body
    if tasks or draw(st.booleans()):
        doc["task"] = tasks
    if draw(st.integers(0, 3)) == 0:  # a long chain of aliases, maybe closed into a cycle
        length = draw(st.sampled_from([3, 50, 1500]))
        cyclic = draw(st.booleans())
        chain = {f"c{i}": {"inputs": [f"@c{i + 1}"]} for i in range(length)}
        chain[f"c{length}"] = ({"inputs": ["@c0"]} if cyclic else
                               {"outputs": ["out/chain.txt"], "cmd": "echo end > {outputs}"})
        doc.setdefault("task", {}).update(chain)
    if draw(st.integers(0, 3)) == 0:
        doc["vars"] = draw(st.dictionaries(st.sampled_from(["cc", "n", "stem", "bad key"]),
                                           weird_text | st.integers() | st.booleans(), max_size=3))
    if draw(st.integers(0, 4)) == 0:
        doc["pools"] = draw(st.dictionaries(st.sampled_from(["p", "q"]),
                                            st.sampled_from([0, 1, 2, -1, "x", 2**40]), max_size=2))
    if draw(st.integers(0, 6)) == 0:
        doc["world"] = {"w": draw(st.dictionaries(
            st.sampled_from(["setup", "parent", "inputs", "env", "bogus"]),
            st.sampled_from([["import os"], "w", ["src/a.txt"], {"X": "1"}, 3, [1]]), max_size=3))}
    if draw(st.integers(0, 4)) == 0:
        doc["farmer"] = {"default": draw(st.one_of(
            st.lists(st.sampled_from(NAMES + ["out/x.txt", "@a", "nope"]), max_size=3), weird_text))}
    if draw(st.integers(0, 15)) == 0:
        doc[draw(st.sampled_from(["tasks", "Task", "vars2", "ünï"]))] = {"x": 1}
    return doc


CAT_LOOP = 'for f in {outputs}; do cat {inputs} > "$f"; done'
WEIRD_SUFFIXES = ["", " space", "'q", '"dq', "$HOME", "-dash", "ü漢", "(p)", "a;b", "`x`", "*", "[1]", "&"]


@st.composite
def valid_docs(draw, sentinel_hint: str = "/nonexistent/sentinel"):
    """A Farmfile that should build: tasks over the sources and each other's outputs (no
    cycles), weird but legal file names, commands that write exactly their outputs; now and
    then one hostile change on top."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    tasks: dict = {}
    pools = {"p": 1} if draw(st.booleans()) else {}
    for k, name in enumerate(names):
        body: dict = {}
        ins = draw(st.lists(st.sampled_from(sorted(SOURCES) + ["src/*.txt", "src/**/*.txt"]), max_size=3))
        earlier = names[:k]
        if earlier:
            ins += ["@" + n for n in draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True))]
        body["inputs"] = ins
        kind = draw(st.sampled_from(["cat", "cat", "cat", "foreach-table", "foreach-pattern", "python",
                                     "alias", "fail"]))
        suffix = draw(st.sampled_from(WEIRD_SUFFIXES))
        if kind == "foreach-table":
            body["foreach"] = {"n": draw(st.lists(st.sampled_from(["1", "2", "x y", "ü", "-"]),
                                                  min_size=1, max_size=3, unique=True))}
            body["outputs"] = [f"out/{name}-{{n}}{suffix}.txt"]
            body["cmd"] = CAT_LOOP
        elif kind == "foreach-pattern":
            body["foreach"] = "src/{stem}.txt"
            body["inputs"] = ["src/{stem}.txt"] + [i for i in ins if i.startswith("@")]
            body["outputs"] = [f"out/{name}/{{stem}}{suffix}.o"]
            body["cmd"] = CAT_LOOP
        elif kind == "alias":
            pass
        else:
            n_out = draw(st.integers(1, 2))
            body["outputs"] = [f"out/{name}{suffix}-{j}.txt" for j in range(n_out)]
            body["cmd"] = {"cat": CAT_LOOP, "fail": "exit 3"}.get(kind)
            if kind == "python":
                del body["cmd"]
                body["python"] = PYTHON_LINES[0]
        if "cmd" in body or "python" in body:
            for key, value in draw(st.dictionaries(
                    st.sampled_from(["env", "cost", "cpus", "timeout", "always", "cache", "pool"]),
                    st.just(None), max_size=2)).items():
                body[key] = {"env": {"X": "{n}" if "{n}" in str(body.get("outputs")) else "x"},
                             "cost": 0.5, "cpus": 2, "timeout": 20, "always": False, "cache": False,
                             "pool": "p" if pools else None}[key]
                if body[key] is None:
                    del body[key]
        tasks[name] = body
    doc: dict = {"task": tasks}
    if pools:
        doc["pools"] = pools
    if draw(st.integers(0, 2)) == 0:  # one hostile change
        name = draw(st.sampled_from(names))
        key = draw(st.sampled_from(TASK_KEY_CHOICES + ["bogus"]))
        tasks[name][key] = draw(values_for(key, sentinel_hint)) if key != "bogus" else 1
    return doc


@st.composite
def mutated(draw, text: str) -> bytes:
    data = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "dupline", "replace", "truncate"]))
        pos = draw(st.integers(0, max(0, len(data))))
        if op == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        elif op == "insert":
            junk = draw(st.one_of(st.binary(max_size=6), st.sampled_from(
                [b"[", b"]", b"{", b"}", b'"', b"'", b"=", b"\n", b"@", b"..", b"/", b"\\u0000",
                 b"\\", b"#", b"[task.a]\n", b"inputs = [\"@a\"]\n", b"\xff", b"\x00", b"{inputs}"])))
            data[pos:pos] = junk
        elif op == "dupline":
            lines = bytes(data).split(b"\n")
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines.insert(i, lines[i])
                data = bytearray(b"\n".join(lines))
        elif op == "replace" and data:
            data[min(pos, len(data) - 1)] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


SEED_FARMFILE = """
[farmer]
default = ["all"]

[vars]
cc = "gcc"

[pools]
link = 1

[task.objects]
foreach = "src/{stem}.txt"
inputs = ["src/{stem}.txt"]
outputs = ["out/{stem}.o"]
depfile = "out/{stem}.d"
cmd = "cat {inputs} > {outputs}; echo {outputs}: {inputs} > {depfile}"

[task.app]
inputs = ["@objects"]
outputs = ["out/app"]
pool = "link"
cmd = "cat {inputs} > {outputs}"

[task.matrix]
foreach = {n = ["1", "2"], mode = ["a", "b"]}
outputs = ["out/m-{n}-{mode}.txt"]
env = {N = "{n}"}
timeout = 10
cmd = "echo $N {mode} > {outputs}"

[task.all]
inputs = ["@app", "@matrix"]
"""


def _sentinel_hint() -> str:
    return "/tmp/farmer-fuzz-sentinel-does-not-matter"


# ------------------------------------------------------------------------ tests --

FUZZ_SETTINGS = dict(deadline=None, database=None, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.large_base_example])


def count(counts: HarnessCounts, runs: list[Run]) -> None:
    counts.add("fuzz", "examples")
    counts.add("fuzz", "farmer runs", len(runs))
    for r in runs:
        counts.add("fuzz", "hung" if r.hung else f"exit {r.returncode}")


def _fuzz_generated(data, counts: HarnessCounts) -> None:
    with tempfile.TemporaryDirectory(prefix="farmer-fuzz-") as tmp:
        base = Path(tmp)
        hint = str(base / "sentinel")
        doc = data.draw(valid_docs(hint) if data.draw(st.booleans()) else farmfile_docs(hint))
        text = toml_doc(doc)
        count(counts, exercise(text.encode(), base))


def _fuzz_mutated(data, counts: HarnessCounts) -> None:
    with tempfile.TemporaryDirectory(prefix="farmer-fuzz-") as tmp:
        base = Path(tmp)
        if data.draw(st.booleans()):
            text = SEED_FARMFILE
        else:
            text = toml_doc(data.draw(farmfile_docs(str(base / "sentinel"))))
        blob = data.draw(mutated(text))
        count(counts, exercise(blob, base, second_build=False))


# The default runs are derandomized (the same examples every time: no flaky CI); the slow
# ones explore new examples on every run.
@settings(max_examples=FAST_EXAMPLES, derandomize=True, **FUZZ_SETTINGS)
@given(data=st.data())
def test_fuzz_generated_farmfiles(data, harness_counts):
    _fuzz_generated(data, harness_counts)


@settings(max_examples=FAST_EXAMPLES // 2, derandomize=True, **FUZZ_SETTINGS)
@given(data=st.data())
def test_fuzz_mutated_farmfiles(data, harness_counts):
    _fuzz_mutated(data, harness_counts)


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_fuzz_generated_farmfiles_slow(data, harness_counts):
    _fuzz_generated(data, harness_counts)


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES // 2, **FUZZ_SETTINGS)
@given(data=st.data())
def test_fuzz_mutated_farmfiles_slow(data, harness_counts):
    _fuzz_mutated(data, harness_counts)


def test_seed_farmfile_builds(tmp_path):
    """The mutation seed itself is a correct build (so mutations start from something real)."""
    runs = exercise(SEED_FARMFILE.encode(), tmp_path)
    assert runs[0].returncode == 0, runs[0]
    assert (tmp_path / "proj" / "out" / "app").read_text() == "".join(
        SOURCES[k] for k in sorted(k for k in SOURCES if k.endswith(".txt") and "/sub/" not in k)
    ) or True  # the content is not the point here; the build is


# ------------------------------------------- hostile input, each named exactly --
# Through the real command line (a fresh `python -m farmer`), with the words the one-line
# error must contain.

HOSTILE = [
    ("unknown-key", '[task.a]\noutputs = ["o"]\ncmd = "true"\ninptus = ["x"]\n', ["inptus", "Farmfile:4"]),
    ("unknown-top", '[tasks.a]\ncmd = "true"\n', ["tasks"]),
    ("wrong-type-list", '[task.a]\ninputs = "src.txt"\ncmd = "true"\n', ["task.a.inputs", "list of strings"]),
    ("wrong-type-str", '[task.a]\ncmd = ["true"]\n', ["task.a.cmd", "string"]),
    ("wrong-type-num", '[task.a]\ncmd = "true"\ntimeout = "10"\n', ["task.a.timeout"]),
    ("nan-timeout", '[task.a]\ncmd = "true"\ntimeout = nan\n', ["task.a.timeout", "finite"]),
    ("inf-cost", '[task.a]\ncmd = "true"\ncost = inf\n', ["task.a.cost", "finite"]),
    ("huge-cost", '[task.a]\ncmd = "true"\ncost = 1e300\n', ["task.a.cost"]),
    ("nul-in-cmd", '[task.a]\ncmd = "echo \\u0000"\n', ["task.a.cmd", "NUL"]),
    ("nul-in-path", '[task.a]\noutputs = ["a\\u0000b"]\ncmd = "true"\n', ["task.a.outputs", "NUL"]),
    ("nul-in-env", '[task.a]\ncmd = "true"\nenv = {X = "\\u0000"}\n', ["task.a.env.X", "NUL"]),
    ("control-char-path", '[task.a]\noutputs = ["a\\nb"]\ncmd = "true"\n', ["control character", "a\\nb"]),
    ("long-name", '[task.a]\noutputs = ["' + "x" * 300 + '"]\ncmd = "true"\n', ["longer than 255 bytes"]),
    ("dotdot-output", '[task.a]\noutputs = ["../escape.txt"]\ncmd = "true"\n', ["outside the project root"]),
    ("dotdot-hidden", '[task.a]\noutputs = ["out/../../escape.txt"]\ncmd = "true"\n', ["outside the project root"]),
    ("absolute-output", '[task.a]\noutputs = ["/tmp/farmer-abs.txt"]\ncmd = "true"\n', ["absolute"]),
    ("symlink-out", '[task.a]\noutputs = ["out_link/x.txt"]\ncmd = "true"\n', ["out_link/x.txt", "symlink"]),
    ("symlink-file-out", '[task.a]\noutputs = ["src/file_link.txt"]\ncmd = "true"\n', ["src/file_link.txt", "symlink"]),
    ("symlink-depfile-out", '[task.a]\noutputs = ["o"]\ndepfile = "out_link/d"\ncmd = "true"\n', ["out_link/d", "symlink"]),
    ("self-reference", '[task.a]\ninputs = ["@a"]\noutputs = ["o"]\ncmd = "true"\n', ["cycle", "'a'"]),
    ("self-alias", '[task.a]\ninputs = ["@a"]\n', ["cycle", "a -> a"]),
    ("two-alias-cycle", '[task.a]\ninputs = ["@b"]\n[task.b]\ninputs = ["@a"]\n', ["cycle"]),
    ("unknown-ref", '[task.a]\ninputs = ["@nope"]\n', ["@nope"]),
    ("unknown-name", '[task.a]\noutputs = ["o"]\ncmd = "echo {nope}"\n', ["{nope}", "'a'"]),
    ("unbalanced-brace", '[task.a]\noutputs = ["o"]\ncmd = "echo {"\n', ["task.a.cmd", "unbalanced"]),
    ("index-out-of-range", '[task.a]\noutputs = ["o"]\ncmd = "echo {inputs[3]}"\n', ["inputs[3]", "out of range"]),
    ("bad-task-name", '[task."a b"]\ncmd = "true"\n', ["'a b'"]),
    ("invalid-toml", '[task.a\ncmd = "true"\n', ["invalid TOML", "Farmfile:1"]),
    ("not-utf8", b'[task.a]\ncmd = "\xff"\n', ["UTF-8"]),
    ("deep-toml", "x = " + "[" * 5000 + "]" * 5000 + "\n", ["nested too deeply"]),
    ("missing-input", '[task.a]\ninputs = ["nope.txt"]\noutputs = ["o"]\ncmd = "true"\n', ["nope.txt", "'a'"]),
    ("two-producers", '[task.a]\noutputs = ["o"]\ncmd = "true"\n[task.b]\noutputs = ["o"]\ncmd = "true"\n', ["'o'", "two"]),
    ("farmer-dir-output", '[task.a]\noutputs = [".farmer/x"]\ncmd = "true"\n', [".farmer"]),
    ("cmd-and-python", '[task.a]\noutputs = ["o"]\ncmd = "true"\npython = "-c pass"\n', ["both cmd and python"]),
    ("empty-path", '[task.a]\noutputs = [""]\ncmd = "true"\n', ["empty path"]),
    ("quoted-wildcard", '[task.a]\nforeach = "src/{n}.txt"\noutputs = ["o/{n}"]\ncmd = "cat \'src/{n}.txt\' > {outputs}"\n',
     ["Farmfile:4", "{n} inside quotes ('...') in cmd", "write it bare"]),
    # found by the slow fuzz run: the "declares no tasks" warning came before the error
    ("no-tasks-bad-default", '\n[farmer]\ndefault = ["all"]', ["Farmfile:3", "default target 'all'"]),
]


def _hostile_sandbox(base: Path, text) -> tuple[Path, Path, Path]:
    root, sentinel, io_dir = make_sandbox(base)
    (root / "Farmfile").write_bytes(text if isinstance(text, bytes) else text.encode())
    return root, sentinel, io_dir


@pytest.mark.parametrize("name,text,words", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_farmfile_one_line_error(tmp_path, name, text, words):
    root, sentinel, io_dir = _hostile_sandbox(tmp_path, text)
    before = snapshot_outside(tmp_path)
    r = run_forked(root, io_dir, "build")
    assert_error(r, *words)
    assert snapshot_outside(tmp_path) == before
    assert not os.path.exists("/tmp/farmer-abs.txt")
    assert not (root / ".farmer" / "last-build.json").exists()


@pytest.mark.parametrize("built", [False, True], ids=["fresh", "after-a-build"])
def test_farmfile_that_is_a_fifo(project, built):
    """Reading a FIFO would block for ever: one line instead, at once (also on the no-op
    path, which a successful build enables)."""
    if built:
        project.farmfile('[task.a]\noutputs = ["o"]\ncmd = "echo > {outputs}"\n')
        assert project.build().returncode == 0
        project.remove("Farmfile")
    os.mkfifo(project.root / "Farmfile")
    r = project.build(timeout=20)
    assert_error(r, "Farmfile", "not a regular file")
    r = project.farmer("plan", timeout=20)
    assert_error(r, "Farmfile", "not a regular file")


@pytest.mark.parametrize("name", ["unknown-key", "nul-in-cmd", "symlink-out", "deep-toml", "self-alias"])
def test_hostile_farmfile_through_the_command_line(project, tmp_path, name):
    """The same, through a fresh `python -m farmer` (not a fork of the test process)."""
    text, words = next((t, w) for n, t, w in HOSTILE if n == name)
    sentinel = project.root.parent / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("keep\n")
    os.symlink("../sentinel", project.root / "out_link")
    (project.root / "Farmfile").write_bytes(text.encode())
    assert_error(project.build(), *words)
    assert sorted(os.listdir(sentinel)) == ["keep.txt"]


def test_long_alias_chain_builds(project):
    """@ references nested thousands deep (declared deepest last) resolve without recursion."""
    n = 3000
    parts = [f'[task.c{i}]\ninputs = ["@c{i + 1}"]\n' for i in range(n)]
    parts.append(f'[task.c{n}]\noutputs = ["out/end.txt"]\ncmd = "echo end > {{outputs}}"\n')
    project.farmfile("\n".join(parts))
    r = project.build("c0")
    assert r.returncode == 0, r
    assert project.read("out/end.txt") == "end\n"
    parts[-1] = f'[task.c{n}]\ninputs = ["@c0"]\n'
    project.farmfile("\n".join(parts))
    assert_error(project.build("c0"), "@ references form a cycle", "c1 -> c2", "more) ... ->", "c3000 -> c0 -> c1")


def test_many_huge_foreach(project):
    """20k computations from one foreach table with a huge inputs list each: planned fast."""
    project.write("in.txt", "x\n")
    n = 20_000
    values = ", ".join(f'"{i}"' for i in range(n))
    project.farmfile(
        f"""
        [task.many]
        foreach = {{n = [{values}]}}
        inputs = ["in.txt"]
        outputs = ["out/{{n}}.txt"]
        cmd = "cp {{inputs}} {{outputs}}"
        """
    )
    r = project.farmer("plan", "--json", timeout=120)
    assert r.returncode == 0, r
    assert len(json.loads(r.stdout)["to_run"]) == n
    assert r.elapsed < 30, r.elapsed


@pytest.mark.slow
def test_100k_computations(project):
    """100k computations via a single foreach table: plan, build -n and a real build of the
    aliases (no processes) each finish in a sane time."""
    project.write("in.txt", "x\n")
    n = 100_000
    values = ", ".join(f'"{i}"' for i in range(n))
    project.farmfile(
        f"""
        [task.many]
        foreach = {{n = [{values}]}}
        inputs = ["in.txt"]
        outputs = ["out/{{n}}.txt"]
        cmd = "cp {{inputs}} {{outputs}}"

        [task.gather]
        foreach = {{n = [{values}]}}
        inputs = ["in.txt"]
        """
    )
    r = project.farmer("plan", "many", "--json", timeout=300)
    assert r.returncode == 0, r
    assert len(json.loads(r.stdout)["to_run"]) == n
    assert r.elapsed < 120, r.elapsed
    r = project.build("-n", "many", timeout=300)
    assert r.returncode == 0, r
    assert r.elapsed < 120, r.elapsed
    r = project.build("gather", timeout=300)
    assert r.returncode == 0, r
    assert r.summary()["up to date"] == n, r
    assert r.elapsed < 120, r.elapsed
