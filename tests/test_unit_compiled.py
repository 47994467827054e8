"""The traversal's fast paths give what the general paths give: compiled templates
(template.compile_list) against template.render, the batch path checks (farmer/graph/expander.py)
against traversal.normalize, the one-call fingerprint against grains.hash_text, listings by
os.scandir against os.walk, and whole graphs and errors with compiling turned off."""

from __future__ import annotations

import os
import random
import shlex
import textwrap

import pytest

from farmer.errors import UsageError
from farmer.files.digests import hash_text
from farmer.graph import expander, traversal
from farmer.graph.expander import all_normal, all_plain_inputs, all_shell_safe
from farmer.graph.graph import Computation, NinjaEdge
from farmer.graph.matching import Files, list_files
from farmer.graph.traversal import glob_start
from farmer.manifest import farmfile, template
from farmer.plan.uptodate import action_fingerprint

TEMPLATES = [
    "plain text",
    "",
    "{x}",
    "{x}{x}/{y}.o",
    "{{literal}} {x} }}{{",
    "{v}",  # a var holding braces: inserted as written
    "{x} shadows {shadowed}",  # a wildcard wins over a var of the same name
    "cat {inputs} > {outputs}",
    "{inputs[0]} {inputs[1]} {outputs[0]}",
    "{inputs[-1]} {inputs[1:]} {outputs[:-1]} {inputs[-2:4]} {inputs[:]}",
    "cc -MF {depfile} {inputs} -o {outputs} {opts}",
    "{depfile[0]}",
    "{nosuch}",  # unknown: not compiled
    "{x[0]}",  # a wildcard with an index: unknown
    "{v[1]}",  # a var with an index: unknown
]
VARIABLES = {"v": "{not expanded} $HOME", "shadowed": "VAR", "opts": "-O2 -Wall"}
WILDCARDS = {"x": "a b", "y": "it's;$(touch PWNED)", "shadowed": "WILD"}
FILE_LISTS = [
    {"inputs": ["src/a.c", "src/my file.c", "it's.c", "ünï.c", "a\tb"], "outputs": ["out/a.o"],
     "depfile": ["out/a.d"]},
    {"inputs": ["x"], "outputs": [], "depfile": ["d"]},
    {"inputs": [], "outputs": ["o1", "o 2"], "depfile": [""]},
    {"inputs": ["", "-n", "a=b,c:d@e%f+g"], "outputs": ["$x", "*", "[a]"], "depfile": ["'"]},
]
SCOPES = [(), ("inputs", "outputs"), ("inputs", "outputs", "depfile")]


def interpreted(text, files, quote):
    try:
        return template.render(text, WILDCARDS, files, VARIABLES, quote)
    except template.TemplateError:
        return "error"


@pytest.mark.parametrize("quote", [False, True])
@pytest.mark.parametrize("scope", SCOPES)
def test_compiled_templates_render_as_render_does(scope, quote):
    for text in TEMPLATES:
        compiled = template.compile_list([text], frozenset(WILDCARDS), scope, VARIABLES, quote)
        for lists in FILE_LISTS:
            files = {k: lists[k] for k in scope}
            want = interpreted(text, files, quote)
            if compiled is None:
                assert want == "error", text  # not compiled: only what render refuses
                continue
            try:
                got = compiled(WILDCARDS, files.get("inputs"), files.get("outputs"), files.get("depfile"))
            except IndexError:
                got = ["error"]
            assert got == [want], (text, scope, files)


def test_compiled_list_renders_every_text_in_order():
    texts = ["{x}.o", "lit", "{v}", "{{x}}"]
    compiled = template.compile_list(texts, frozenset({"x"}), (), VARIABLES, False)
    assert compiled({"x": "q"}, None, None, None) == ["q.o", "lit", "{not expanded} $HOME", "{x}"]
    assert template.compile_list([], frozenset(), (), {}, False)({}, None, None, None) == []
    assert template.compile_list(["{a}", "{nosuch}"], frozenset({"a"}), (), {}, False) is None


def test_quote_join_is_shlex_quote_joined():
    rng = random.Random(1)
    alphabet = "ab/._-=@%+:, '\"$*\tü\n"
    lists = [[], [""], ["a", ""], ["a b"], ["a", "b"], ["a  b"], [" "], ["a", " b"]]
    lists += [["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6)))
               for _ in range(rng.randrange(0, 4))] for _ in range(3000)]
    for paths in lists:
        assert template.quote_join(paths) == " ".join(shlex.quote(p) for p in paths), paths


def test_shell_safe_paths_are_left_alone_by_shlex_quote():
    rng = random.Random(3)
    alphabet = "ab/._-=@%+:, '\"$*ü"
    for _ in range(3000):
        paths = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 5)))
                 for _ in range(rng.randrange(0, 4))]
        assert all_shell_safe(paths) == all(shlex.quote(p) == p for p in paths), paths


def _normalize_unchanged(path: str) -> bool:
    try:
        return traversal.normalize(path, "t", "output") == path
    except UsageError:
        return False


TRICKY_PATHS = ["a", "a/b", "", "/a", "a//b", "./a", "a/./b", "a/..", "..", "../a", "a/../b", "a/",
                "a/.", ".a", "a/.b", "a..b", "a.", "a\x01b", "a\nb", "a\x7f", "x" * 255, "x" * 256,
                "d/" + "x" * 256 + "/e", "é" * 128, "é" * 127, "src/a[1].txt", "@a", "a*b", "a?",
                "a b", "...", "a/...", ".../a"]


def test_batch_path_checks_vouch_only_for_what_normalize_leaves_alone():
    rng = random.Random(2)
    alphabet = "ab/.\n\x01é@*[ "
    paths = TRICKY_PATHS + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
                            for _ in range(5000)]
    for p in paths:
        if all_normal([p]):
            assert _normalize_unchanged(p), repr(p)
        if all_plain_inputs([p]):
            assert _normalize_unchanged(p) and not p.startswith("@") and glob_start(p) < 0, repr(p)
    for p in ["a", "a/b", "a.b/c_d-e", ".a/b", "x" * 255]:
        assert all_normal([p]) and all_plain_inputs([p]), p
    for _ in range(2000):  # a batch is clean exactly when each of its paths is
        batch = rng.sample(paths, rng.randrange(0, 4))
        assert all_normal(batch) == all(all_normal([p]) for p in batch), batch
        assert all_plain_inputs(batch) == all(all_plain_inputs([p]) for p in batch), batch


def test_fingerprint_is_hash_text_of_its_parts():
    comp = Computation(0, "o", "t", {}, ["i"], ["o", "p q"], "d", "cmd", "echo é", {"B": "2", "A": "1"},
                       None, None, 1, None, None, False, True)
    want = hash_text("cmd", "echo é", "A=1", "B=2", "\0outputs", "o", "p q", "\0depfile", "d")
    assert action_fingerprint(comp) == want
    comp.depfile, comp.env, comp.kind, comp.action = None, {}, None, None
    assert action_fingerprint(comp) == hash_text("", "", "\0outputs", "o", "p q", "\0depfile", "")
    comp.ninja = NinjaEdge(rspfile="r.rsp", rspfile_content="a b")
    assert action_fingerprint(comp) == hash_text("", "", "\0outputs", "o", "p q", "\0depfile", "",
                                                 "\0rspfile", "r.rsp", "a b")


def _walk_listing(root, prefix):
    """list_files as it was written with os.walk."""
    found = []
    top = os.path.join(root, prefix) if prefix else str(root)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in (".farmer", ".git")]
        rel = os.path.relpath(dirpath, root)
        base = "" if rel == "." else rel + "/"
        found.extend(base + f for f in filenames)
    found.sort()
    return found


def _tree(tmp_path):
    for rel in ["a.txt", "src/x.c", "src/sub/y.c", "src/.hidden/z.c", ".git/HEAD", ".farmer/s",
                "src/.git/k", "other/o.txt", "weird name/é.txt"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    os.symlink("other", tmp_path / "src" / "linkdir")
    os.symlink("a.txt", tmp_path / "src" / "linkfile")
    os.symlink("nowhere", tmp_path / "src" / "dangling")
    os.mkdir(tmp_path / "empty")


def test_listings_are_what_os_walk_lists(tmp_path):
    _tree(tmp_path)
    for prefix in ["", "src", "src/sub", "other", "nosuch", "a.txt", "src/linkdir", "src/../other", "empty"]:
        assert list_files(tmp_path, prefix) == _walk_listing(tmp_path, prefix), prefix


def test_files_exists_is_os_path_exists(tmp_path):
    _tree(tmp_path)
    files = Files(tmp_path)
    for prefix in ["", "src", "src/../other"]:
        files.under(prefix)
    candidates = set(list_files(tmp_path, "")) | {"src", "nosuch", "src/nosuch", "src/linkdir/o.txt",
                                                  "other/o.txt", "src/dangling", "src/linkfile"}
    for path in sorted(candidates):
        assert files.exists(path) == os.path.exists(tmp_path / path), path


def test_missing_inputs_are_what_os_path_exists_says(tmp_path, monkeypatch):
    _tree(tmp_path)
    candidates = set(list_files(tmp_path, "")) | {"src", "nosuch", "src/nosuch", "src/linkdir/o.txt",
                                                  "other/o.txt", "src/dangling", "src/linkfile",
                                                  "nosuch/x", "a.txt/x", "src/linkdir", "empty"}
    want = {p for p in candidates if not os.path.exists(tmp_path / p)}
    for pays in (1, 1000):  # a listing of every folder, and a stat of every path
        monkeypatch.setattr(traversal, "_LISTING_PAYS", pays)
        assert traversal._missing(str(tmp_path), candidates) == want


# -- whole graphs: compiled against interpreted ------------------------------------------------

FARMFILE = r"""
[vars]
opts = "-n {braces}"
x = "var x"

[task.copy]
foreach = "in/{name}.txt"
inputs = ["in/{name}.txt", "./in/{name}.txt", "lib/common.h"]
outputs = ["out/{name}.o", "out/./{name}.s"]
depfile = "out/{name}.d"
env = {SOURCE = "{inputs[0]}", ALL = "{inputs} {depfile}", X = "{x}"}
cmd = "cat {opts} {inputs} > {outputs[0]} && echo {name}: '{x}' > {outputs[1]} # {depfile}"

[task.second]
foreach = "out/{name}.o"
inputs = ["out/{name}.o", "in/*.txt"]
outputs = ["out2/{name}.txt"]
python = "tool.py {inputs[0]} {outputs}"

[task.third]
foreach = "out2/{name}.txt"
inputs = ["out2/{name}.txt", "lib/common.h", "lib/common.h", "{x}"]
outputs = ["out3/{name}"]
env = {N = "{name}"}
cmd = "wc {inputs} > {outputs} # {inputs[1]}"

[task.grid]
foreach = {a = ["1", "b c"], b = ["x"]}
outputs = ["grid/{a}-{b}"]
cmd = "echo {a} {b} {x} > {outputs}"

[task.fourth]
foreach = "grid/{g}"
inputs = ["grid/{g}", "lib/common.h", "lib/common.h"]
outputs = ["out4/{g}"]
cmd = "cat {inputs} > {outputs} # {inputs[1]}"

[task.safe]
foreach = {k = ["1", "2"]}
inputs = ["lib/common.h", "lib/{k}.h"]
outputs = ["safe/{k}.o"]
cmd = "cat {inputs} > {outputs} '{x}' {inputs[1]}"

[task.noout]
foreach = {n = ["1", "2"]}
inputs = ["@copy"]
cmd = "true {n}"

[task.all]
inputs = ["@second", "@grid", "out2/**"]
"""
FILES = ["in/plain.txt", "in/my file.txt", "in/it's.txt", "in/a[1].txt", "in/ünï.txt",
         "in/sub/deep.txt", "lib/common.h", "tool.py"]


def _graph(tmp_path, text, files, compiled: bool, monkeypatch):
    tmp_path.mkdir()
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "Farmfile").write_text(textwrap.dedent(text))
    with monkeypatch.context() as m:
        if compiled:
            m.setattr(expander, "COMPILE_FROM", 1)  # compile even a task of one computation
        else:  # neither compiled nor literal: every task rendered, resolved, checked path by path
            m.setattr(template, "compile_list", lambda *args: None)
            m.setattr(expander, "_literal_instances", lambda spec: {})
            m.setattr(farmfile, "_PLAIN_TASK_KEYS", frozenset())  # no plain TaskSpec
        try:
            return traversal.traverse(farmfile.load(tmp_path / "Farmfile"))
        except UsageError as e:
            return str(e)


def _rows(graph):
    if isinstance(graph, str):
        return graph
    rows = [tuple(getattr(c, f) for f in Computation.FIELDS) for c in graph.computations]
    return rows, graph.producer, graph.by_task, graph.order, graph.by_id, graph.listings


def test_compiled_graph_equals_interpreted_graph(tmp_path, monkeypatch):
    fast = _graph(tmp_path / "fast", FARMFILE, FILES, True, monkeypatch)
    slow = _graph(tmp_path / "slow", FARMFILE, FILES, False, monkeypatch)
    assert not isinstance(fast, str), fast
    assert _rows(fast)[0] and len(fast.computations) == 6 + 6 + 6 + 2 + 2 + 2 + 2 + 1
    fast.root = slow.root = None
    assert _rows(fast) == _rows(slow)
    wild = [c for c in fast.computations if c.wildcards.get("name") == "a[1]"]
    # `in/a[1].txt` rendered from a wildcard is a glob (matching in/a1.txt), on both paths
    assert wild and wild[0].inputs == ["lib/common.h"]


# Tasks written out in full, as a generator writes them (expander.is_literal): made by the
# literal paths (farmfile._tasks's plain tables, expander._literal_instances,
# traversal._literal_computation), which must give what the general paths give.
LITERAL = r"""
[world.py]
env = {W = "world"}

[task.s0]
inputs = ["src/a.txt"]
outputs = ["out/a.txt"]
cmd = "cat src/a.txt > out/a.txt"

[task.s1]
inputs = ["out/a.txt", "src/b.txt", "out/a.txt"]
outputs = ["out/b.txt", "out/b.log"]
cmd = "cat out/a.txt src/b.txt > out/b.txt 2> out/b.log"

[task.env]
inputs = ["src/a.txt"]
outputs = ["out/env.txt"]
env = {A = "1", B = "two words"}
cmd = "printenv A B > out/env.txt"

[task.py]
world = "py"
inputs = ["src/my file.txt"]
outputs = ["out/py.txt"]
python = "tool.py 'src/my file.txt' out/py.txt"

[task.script]
outputs = ["out/script.txt"]
python = "-m tool out/script.txt"
cost = 2.5
cpus = 2
timeout = 30
always = true
cache = false
remote = false

[task.nothing]
cmd = "true"

[task.glob]
inputs = ["src/*.txt"]
outputs = ["out/glob.txt"]
cmd = "cat src/*.txt > out/glob.txt"

[task.all]
inputs = ["out/b.txt", "out/env.txt", "@py"]

[task.each]
foreach = "out/{n}.txt"
inputs = ["out/{n}.txt"]
outputs = ["each/{n}.txt"]
cmd = "cp {inputs} {outputs}"
"""
LITERAL_FILES = ["src/a.txt", "src/b.txt", "src/my file.txt", "tool.py"]


def test_literal_tasks_make_the_graph_the_general_paths_make(tmp_path, monkeypatch):
    made = []
    literal = traversal._literal_computation
    monkeypatch.setattr(traversal, "_literal_computation", lambda *a: made.append(literal(*a)) or made[-1])
    fast = _graph(tmp_path / "fast", LITERAL, LITERAL_FILES, True, monkeypatch)
    slow = _graph(tmp_path / "slow", LITERAL, LITERAL_FILES, False, monkeypatch)
    assert not isinstance(fast, str), fast
    assert len(fast.computations) == 8 + 6 and len([c for c in made if c is not None]) == 6  # not the glob, nor @py
    assert {c.wildcards["n"] for c in fast.computations if c.task == "each"} == {"a", "b", "env", "glob", "py", "script"}
    fast.root = slow.root = None
    assert _rows(fast) == _rows(slow)
    s1 = fast.computations[fast.by_id["out/b.txt"]]
    assert s1.inputs == ["out/a.txt", "src/b.txt"] and s1.action == "cat out/a.txt src/b.txt > out/b.txt 2> out/b.log"
    assert fast.computations[fast.by_id["out/py.txt"]].env == {"W": "world"}


BAD = [  # errors, and paths that need normalizing
    # an index past the end in one computation, a bad output path in a later one
    ("""
     [task.t]
     foreach = "in/{n}.txt"
     inputs = ["in/{n}.txt"]
     outputs = ["out/{n}"]
     cmd = "cat {inputs[1]}"
     """, ["in/a.txt", "in/b.txt"]),
    ("""
     [task.t]
     foreach = {n = ["ok", "../up", "/abs"]}
     outputs = ["{n}/o"]
     cmd = "true"
     """, []),
    ("""
     [task.t]
     foreach = {n = ["ok", "a/./b", "x//y"]}
     inputs = ["{n}"]
     outputs = ["out/{n}"]
     cmd = "cat {inputs}"
     """, ["ok", "a/b", "x/y"]),
    ("""
     [task.t]
     foreach = {n = ["a", "b"]}
     inputs = ["out/a"]
     outputs = ["out/{n}"]
     cmd = "true"
     """, []),
    ("""
     [task.t]
     foreach = {n = ["a", "b\\u0001"]}
     inputs = ["in/{n}", "@nosuch"]
     outputs = ["out/{n}"]
     cmd = "true"
     """, []),
    ("""
     [task.t]
     foreach = {n = ["a", "b"]}
     outputs = ["out/{n}"]
     env = {A = "{inputs[0]}"}
     python = "x.py 'unclosed {n}"
     """, []),
    ("""
     [task.t]
     foreach = {n = ["a", "a"]}
     outputs = ["out/{n}"]
     cmd = "true"
     """, []),
    ("""
     [task.t]
     foreach = {n = ["a", "a"]}
     cmd = "true {n}"
     """, []),
    ("""
     [task.t]
     foreach = {n = ["a", "b"]}
     outputs = ["out/{n}"]
     python = "x.py 'unclosed {n}"
     """, []),
    ("""
     [task.x]
     cmd = "true"

     [task.t]
     foreach = {n = ["w", "x"]}
     outputs = [":{n}"]
     cmd = "true"
     """, []),
    ("""
     [task.t]
     foreach = {n = ["a", "b"]}
     inputs = ["in/{n}", "in/{n}", "out/{n}"]
     outputs = ["out/{n}"]
     cmd = "true"
     """, ["in/a"]),
    # tasks written out in full: the first error in the Farmfile's order, in its words
    ("""
     [task.a]
     inputs = ["in/a"]
     outputs = ["out/a"]
     cmd = "cat in/a > out/a"

     [task.b]
     inputs = ["out/b", "in/a"]
     outputs = ["out/b"]
     cmd = "true"

     [task.c]
     outputs = ["/abs"]
     cmd = "true"
     """, ["in/a"]),
    ("""
     [task.a]
     outputs = ["out/a"]
     cmd = "true"

     [task.b]
     outputs = ["./out/b", "out//c", "out/d/"]
     cmd = "true"

     [task.c]
     outputs = ["out/a"]
     cmd = "true"
     """, []),
    ("""
     [task.a]
     inputs = ["in/\u0001"]
     outputs = ["out/a"]
     cmd = "true"

     [task.b]
     outputs = ["../up"]
     cmd = "true"
     """, []),
    ("""
     [task.a]
     outputs = ["out/a"]
     python = "x.py 'unclosed"
     """, []),
    ("""
     [task.a]
     outputs = ["out/a"]
     cmd = "true"

     [task.":b"]
     cmd = "true"

     [task.b]
     cmd = "true"
     """, []),
    ("""
     [task.a]
     outputs = [".farmer/x"]
     cmd = "true"
     """, []),
    ("""
     [task.a]
     inputs = ["@b"]
     outputs = ["out/a"]
     cmd = "true"

     [task.b]
     inputs = ["out/a"]
     outputs = ["out/b"]
     cmd = "true"
     """, []),
    ("""
     [task.a]
     outputs = ["out/a"]

     [task.b]
     inputs = ["", "x"]
     cmd = "true"
     """, []),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_compiled_errors_and_odd_paths_equal_interpreted(tmp_path, monkeypatch, case):
    text, files = BAD[case]
    fast = _graph(tmp_path / "fast", text, files, True, monkeypatch)
    slow = _graph(tmp_path / "slow", text, files, False, monkeypatch)
    if not isinstance(fast, str):  # paths the fast path hands to normalize: no error
        fast.root = slow.root = None
    assert _rows(fast) == _rows(slow)


# -- check_inside: a look per directory against an lstat per output ---------------------------


def _check_inside_per_output(root, comps):
    """traversal.check_inside as it was written: every output looked at on its own."""
    real_root = os.path.realpath(root)
    for comp in comps:
        for path in comp.outputs + ([comp.depfile] if comp.depfile else []):
            real = os.path.realpath(os.path.join(root, os.path.dirname(path)))
            ok = real == real_root or real.startswith(real_root + os.sep)
            if ok and os.path.islink(os.path.join(root, path)):
                ok = os.path.realpath(os.path.join(root, path)).startswith(real_root + os.sep)
            if not ok:
                raise UsageError(f"task {comp.task!r}: output {path!r} leads outside the project "
                                 "root through a symlink; declare a path inside the root")


def test_check_inside_equals_a_look_at_each_output(tmp_path):
    root, away = tmp_path / "root", tmp_path / "away"
    for d in ["root/out/sub", "root/real", "away"]:
        (tmp_path / d).mkdir(parents=True)
    (away / "f").write_text("x")
    (root / "real" / "f").write_text("x")
    os.symlink(away, root / "out" / "to-away")  # a directory outside
    os.symlink(root / "real", root / "out" / "to-real")  # a directory inside
    os.symlink(away / "f", root / "out" / "file-away")  # a file outside
    os.symlink(root / "real" / "f", root / "out" / "file-real")  # a file inside
    os.symlink("nowhere", root / "out" / "dangling")  # resolves inside, to nothing
    paths = ["a", "out/x", "out/sub/y", "new/dir/z", "out/to-away/f", "out/to-real/f",
             "out/file-away", "out/file-real", "out/dangling", "out/to-away", "real/f"]
    rng = random.Random(4)
    for _ in range(300):
        comps = []
        for i in range(rng.randrange(1, 5)):
            outs = rng.sample(paths, rng.randrange(0, 3))
            depfile = rng.choice([None, None] + paths)
            comps.append(Computation(i, f"c{i}", f"t{i}", {}, [], outs, depfile, "cmd", "true", {},
                                     None, None, 1, None, None, False, True))
        want = got = None
        try:
            _check_inside_per_output(root, comps)
        except UsageError as e:
            want = str(e)
        try:
            traversal.check_inside(root, comps)
        except UsageError as e:
            got = str(e)
        assert got == want, [(c.outputs, c.depfile) for c in comps]
