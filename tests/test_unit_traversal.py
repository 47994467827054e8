"""Unit tests for farmer/graph/traversal.py: a Spec becomes a checked graph of computations
(SPEC §1 foreach / inputs / outputs, §3 graph errors, §4 computation ids)."""

from __future__ import annotations

import os
import textwrap

import pytest

from farmer.errors import UsageError
from farmer.graph.graph import Graph, select
from farmer.graph.traversal import traverse
from farmer.manifest import farmfile


def make(tmp_path, text: str, files=()) -> Graph:
    for rel in files:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"content of {rel}\n")
    path = tmp_path / "Farmfile"
    path.write_text(textwrap.dedent(text))
    return traverse(farmfile.load(path))


def graph_error(tmp_path, text: str, files=()) -> str:
    with pytest.raises(UsageError) as info:
        make(tmp_path, text, files)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def of_task(g: Graph, task: str):
    return [g.computations[i] for i in g.by_task[task]]


def by_id(g: Graph, cid: str):
    return g.computations[g.by_id[cid]]


def assert_topological(g: Graph, order: list[int]) -> None:
    position = {i: n for n, i in enumerate(order)}
    for i in order:
        for p in g.computations[i].producers:
            if p in position:
                assert position[p] < position[i], (p, i)


# -- foreach -------------------------------------------------------------------------------


def test_foreach_over_files_wildcard_matches_slash(tmp_path):
    g = make(tmp_path, """
        [task.objects]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["build/{stem}.o"]
        cmd = "cc -c {inputs} -o {outputs}"
        """, ["src/a.c", "src/sub/deep/b.c", "src/c.h", "other/d.c"])
    comps = of_task(g, "objects")
    assert sorted(c.wildcards["stem"] for c in comps) == ["a", "sub/deep/b"]
    b = by_id(g, "build/sub/deep/b.o")
    assert b.inputs == ["src/sub/deep/b.c"]
    assert b.action == "cc -c src/sub/deep/b.c -o build/sub/deep/b.o"
    assert b.kind == "cmd" and b.argv()[:2] == ["/bin/sh", "-c"]


def test_foreach_pattern_with_leading_dot_slash(tmp_path):
    g = make(tmp_path, """
        [task.objects]
        foreach = "./src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["build/{stem}.o"]
        cmd = "true"
        """, ["src/a.c", "src/b.c"])
    assert sorted(c.id for c in of_task(g, "objects")) == ["build/a.o", "build/b.o"]


def test_foreach_never_matches_under_dot_farmer(tmp_path):
    g = make(tmp_path, """
        [task.copy]
        foreach = "{name}.txt"
        inputs = ["{name}.txt"]
        outputs = ["out/{name}.copy"]
        cmd = "cp {inputs} {outputs}"
        """, ["a.txt", ".farmer/logs/x.txt", ".farmer/b.txt", "sub/c.txt"])
    assert sorted(c.wildcards["name"] for c in of_task(g, "copy")) == ["a", "sub/c"]


def test_foreach_wildcard_matches_at_least_one_char(tmp_path):
    g = make(tmp_path, """
        [task.t]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        cmd = "true"
        """, ["src/.c", "src/x.c"])
    assert [c.wildcards for c in of_task(g, "t")] == [{"stem": "x"}]


def test_foreach_repeated_wildcard_must_agree(tmp_path):
    g = make(tmp_path, """
        [task.t]
        foreach = "{d}/{d}.txt"
        inputs = ["{d}/{d}.txt"]
        cmd = "true"
        """, ["a/a.txt", "a/b.txt", "b/b.txt"])
    assert sorted(c.wildcards["d"] for c in of_task(g, "t")) == ["a", "b"]


def test_foreach_over_declared_outputs_chain(tmp_path):
    # `done` is declared before `upper` and matches `upper`'s outputs, which do not exist yet.
    g = make(tmp_path, """
        [task.done]
        foreach = "mid/{s}.up"
        inputs = ["mid/{s}.up"]
        outputs = ["out/{s}.done"]
        cmd = "cp {inputs} {outputs}"

        [task.upper]
        foreach = "src/{s}.txt"
        inputs = ["src/{s}.txt"]
        outputs = ["mid/{s}.up"]
        cmd = "tr a-z A-Z < {inputs} > {outputs}"
        """, ["src/a.txt", "src/b/c.txt"])
    assert sorted(c.id for c in of_task(g, "upper")) == ["mid/a.up", "mid/b/c.up"]
    assert sorted(c.id for c in of_task(g, "done")) == ["out/a.done", "out/b/c.done"]
    done_a = by_id(g, "out/a.done")
    assert [g.computations[p].id for p in done_a.producers] == ["mid/a.up"]
    assert g.computations[g.producer["mid/a.up"]].consumers == [done_a.index]
    assert_topological(g, g.order)


def test_foreach_does_not_match_own_outputs(tmp_path):
    g = make(tmp_path, """
        [task.t]
        foreach = "data/{x}"
        inputs = ["data/{x}"]
        outputs = ["data/{x}.gz"]
        cmd = "gzip -k {inputs}"
        """, ["data/a"])
    assert [c.id for c in of_task(g, "t")] == ["data/a.gz"]


def test_foreach_table_cartesian_product_and_ids(tmp_path):
    g = make(tmp_path, """
        [task.grid]
        foreach = {n = ["1", "2"], mode = ["a", "b"]}
        cmd = "run {n} {mode}"
        """)
    comps = of_task(g, "grid")
    assert sorted(c.id for c in comps) == [
        ":grid[mode=a,n=1]", ":grid[mode=a,n=2]", ":grid[mode=b,n=1]", ":grid[mode=b,n=2]"]
    assert by_id(g, ":grid[mode=b,n=1]").action == "run 1 b"
    assert by_id(g, ":grid[mode=b,n=1]").wildcards == {"n": "1", "mode": "b"}


def test_foreach_table_with_outputs_uses_first_output_as_id(tmp_path):
    g = make(tmp_path, """
        [task.sweep]
        foreach = {k = ["x", "y"]}
        outputs = ["res/{k}.json", "res/{k}.log"]
        cmd = "run {k}"
        """)
    assert sorted(c.id for c in of_task(g, "sweep")) == ["res/x.json", "res/y.json"]


def test_ids_without_outputs(tmp_path):
    g = make(tmp_path, """
        [task.check]
        cmd = "true"

        [task.all]
        inputs = ["a.txt"]
        """, ["a.txt"])
    assert set(g.by_id) == {":check", ":all"}
    assert by_id(g, ":all").kind is None and by_id(g, ":all").action is None


# -- inputs: @refs, aliases, globs -----------------------------------------------------------


def test_task_ref_is_every_output_sorted(tmp_path):
    g = make(tmp_path, """
        [task.gen]
        outputs = ["z.o", "a.o", "m/b.o"]
        cmd = "touch {outputs}"

        [task.link]
        inputs = ["first.txt", "@gen"]
        outputs = ["app"]
        cmd = "cat {inputs} > {outputs}"
        """, ["first.txt"])
    link = by_id(g, "app")
    assert link.inputs == ["first.txt", "a.o", "m/b.o", "z.o"]
    assert link.producers == [by_id(g, "z.o").index]


def test_task_ref_over_foreach_task(tmp_path):
    g = make(tmp_path, """
        [task.app]
        inputs = ["@objects"]
        outputs = ["build/app"]
        cmd = "ld {inputs} -o {outputs}"

        [task.objects]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["build/{stem}.o"]
        cmd = "cc -c {inputs} -o {outputs}"
        """, ["src/b.c", "src/a.c", "src/c.c"])
    app = by_id(g, "build/app")
    assert app.inputs == ["build/a.o", "build/b.o", "build/c.o"]
    assert sorted(app.producers) == sorted(g.by_task["objects"])
    assert app.action == "ld build/a.o build/b.o build/c.o -o build/app"


def test_alias_ref_expands_to_alias_inputs(tmp_path):
    g = make(tmp_path, """
        [task.gen]
        outputs = ["gen/x.h"]
        cmd = "touch {outputs}"

        [task.headers]
        inputs = ["@gen", "inc/b.h", "inc/a.h"]

        [task.use]
        inputs = ["@headers"]
        outputs = ["use.out"]
        cmd = "cat {inputs} > {outputs}"
        """, ["inc/a.h", "inc/b.h"])
    use = by_id(g, "use.out")
    assert use.inputs == ["gen/x.h", "inc/a.h", "inc/b.h"]
    assert [g.computations[p].id for p in use.producers] == ["gen/x.h"]


def test_unknown_task_ref(tmp_path):
    msg = graph_error(tmp_path, """
        [task.a]
        inputs = ["@nope"]
        cmd = "true"
        """)
    assert "@nope" in msg and "'a'" in msg


def test_glob_star_stays_in_one_directory(tmp_path):
    g = make(tmp_path, """
        [task.t]
        inputs = ["src/*.c"]
        outputs = ["out"]
        cmd = "true"
        """, ["src/b.c", "src/a.c", "src/sub/c.c", "src/d.h"])
    assert by_id(g, "out").inputs == ["src/a.c", "src/b.c"]


def test_glob_double_star_spans_directories(tmp_path):
    g = make(tmp_path, """
        [task.t]
        inputs = ["src/**/*.c"]
        outputs = ["out"]
        cmd = "true"
        """, ["src/a.c", "src/sub/c.c", "src/sub/deep/e.c", "src/d.h", "top.c"])
    assert by_id(g, "out").inputs == ["src/a.c", "src/sub/c.c", "src/sub/deep/e.c"]


def test_glob_question_mark(tmp_path):
    g = make(tmp_path, """
        [task.t]
        inputs = ["f?.txt"]
        outputs = ["out"]
        cmd = "true"
        """, ["f1.txt", "f22.txt", "f2.txt"])
    assert by_id(g, "out").inputs == ["f1.txt", "f2.txt"]


def test_glob_matches_declared_outputs(tmp_path):
    g = make(tmp_path, """
        [task.gen]
        foreach = {n = ["x", "y"]}
        outputs = ["gen/deep/{n}.h"]
        cmd = "touch {outputs}"

        [task.use]
        inputs = ["gen/**/*.h", "inc/*.h"]
        outputs = ["use.out"]
        cmd = "true"
        """, ["gen/old.h", "inc/a.h"])
    use = by_id(g, "use.out")
    assert use.inputs == ["gen/deep/x.h", "gen/deep/y.h", "gen/old.h", "inc/a.h"]
    assert sorted(g.computations[p].id for p in use.producers) == ["gen/deep/x.h", "gen/deep/y.h"]


def test_glob_excludes_own_outputs_and_dot_farmer(tmp_path):
    g = make(tmp_path, """
        [task.t]
        inputs = ["*.txt"]
        outputs = ["all.txt"]
        cmd = "cat {inputs} > {outputs}"
        """, ["a.txt", "all.txt", ".farmer/x.txt"])
    assert by_id(g, "all.txt").inputs == ["a.txt"]


def test_glob_matching_nothing_is_empty(tmp_path):
    g = make(tmp_path, """
        [task.t]
        inputs = ["none/*.c"]
        outputs = ["out"]
        cmd = "true"
        """)
    assert by_id(g, "out").inputs == []


def test_duplicate_inputs_listed_once(tmp_path):
    g = make(tmp_path, """
        [task.t]
        inputs = ["a.c", "*.c", "./a.c"]
        outputs = ["out"]
        cmd = "true"
        """, ["a.c", "b.c"])
    assert by_id(g, "out").inputs == ["a.c", "b.c"]


# -- substitution at traversal time ------------------------------------------------------------


def test_cmd_quotes_files_and_wildcards_not_vars(tmp_path):
    g = make(tmp_path, """
        [vars]
        cflags = "-O2 -Wall"

        [task.t]
        foreach = "in/{name}.txt"
        inputs = ["in/{name}.txt"]
        outputs = ["out/{name} copy.txt"]
        depfile = "out/{name}.d"
        env = {SRC = "{inputs}", FLAGS = "{cflags}"}
        cmd = "cp {cflags} {inputs} {outputs} {depfile} {name}"
        """, ["in/my file.txt"])
    c = by_id(g, "out/my file copy.txt")
    assert c.action == "cp -O2 -Wall 'in/my file.txt' 'out/my file copy.txt' 'out/my file.d' 'my file'"
    assert c.depfile == "out/my file.d"
    assert c.env == {"SRC": "in/my file.txt", "FLAGS": "-O2 -Wall"}


def test_unknown_name_in_cmd_names_task_and_name(tmp_path):
    msg = graph_error(tmp_path, """
        [task.build_it]
        outputs = ["o"]
        cmd = "{compiler} -o {outputs}"
        """)
    assert "build_it" in msg and "compiler" in msg


def test_index_out_of_range_in_cmd(tmp_path):
    msg = graph_error(tmp_path, """
        [task.t]
        inputs = ["a"]
        outputs = ["o"]
        cmd = "cat {inputs[3]}"
        """, ["a"])
    assert "'t'" in msg and "inputs[3]" in msg


# -- graph errors ------------------------------------------------------------------------------


MISSING = """
    [task.compile]
    inputs = ["src/missing.c"]
    outputs = ["o"]
    cmd = "true"

    [task.fine]
    outputs = ["fine.txt"]
    cmd = "true"
    """


def test_missing_input_names_path_and_task(tmp_path):
    with pytest.raises(UsageError) as info:
        g = make(tmp_path, MISSING)
        select(g, ["compile"])
    msg = str(info.value)
    assert "src/missing.c" in msg and "compile" in msg


def test_missing_input_only_matters_to_builds_that_need_it(tmp_path):
    # As in make: a target that does not need the missing file can still be built.
    g = make(tmp_path, MISSING)
    assert ids(g, select(g, ["fine"])) == ["fine.txt"]
    with pytest.raises(UsageError, match="src/missing.c"):
        select(g, ["o"])


def test_own_output_as_input_is_an_error(tmp_path):
    msg = graph_error(tmp_path, """
        [task.loop]
        inputs = ["*.txt"]
        outputs = ["all.txt"]
        cmd = "cat {inputs} > {outputs}"

        [task.selfref]
        inputs = ["me.txt"]
        outputs = ["me.txt"]
        cmd = "true"
        """, ["a.txt"])
    assert "selfref" in msg and "me.txt" in msg


def test_input_declared_as_output_elsewhere_is_not_missing(tmp_path):
    g = make(tmp_path, """
        [task.b]
        inputs = ["gen/a.txt"]
        outputs = ["b.txt"]
        cmd = "true"

        [task.a]
        outputs = ["gen/a.txt"]
        cmd = "true"
        """)
    assert by_id(g, "b.txt").producers == [by_id(g, "gen/a.txt").index]


def test_duplicate_output_names_both_tasks(tmp_path):
    msg = graph_error(tmp_path, """
        [task.first]
        outputs = ["out/x"]
        cmd = "true"

        [task.second]
        outputs = ["out/./x"]
        cmd = "true"
        """)
    assert "out/x" in msg and "first" in msg and "second" in msg


@pytest.mark.parametrize("out", ["../x", "a/../../x", "/tmp/abs.txt"])
def test_output_outside_root(tmp_path, out):
    msg = graph_error(tmp_path, f"""
        [task.escape]
        outputs = ["{out}"]
        cmd = "true"
        """)
    assert "escape" in msg and out in msg


def test_input_outside_root(tmp_path):
    msg = graph_error(tmp_path, """
        [task.t]
        inputs = ["../secret"]
        outputs = ["o"]
        cmd = "true"
        """)
    assert "../secret" in msg


def test_output_inside_dot_farmer(tmp_path):
    msg = graph_error(tmp_path, """
        [task.t]
        outputs = [".farmer/state.db"]
        cmd = "true"
        """)
    assert ".farmer" in msg


def test_cycle_names_the_tasks(tmp_path):
    msg = graph_error(tmp_path, """
        [task.start]
        outputs = ["s"]
        cmd = "true"

        [task.alpha]
        inputs = ["s", "b.out"]
        outputs = ["a.out"]
        cmd = "true"

        [task.beta]
        inputs = ["a.out"]
        outputs = ["b.out"]
        cmd = "true"
        """)
    assert "cycle" in msg and "alpha" in msg and "beta" in msg
    assert "start" not in msg


def test_self_cycle_via_other_task(tmp_path):
    msg = graph_error(tmp_path, """
        [task.x]
        inputs = ["y.out"]
        outputs = ["x.out"]
        cmd = "true"

        [task.y]
        inputs = ["z.out"]
        outputs = ["y.out"]
        cmd = "true"

        [task.z]
        inputs = ["x.out"]
        outputs = ["z.out"]
        cmd = "true"
        """)
    for name in ("x", "y", "z"):
        assert f"{name}.out" in msg


# -- select, closure, order ---------------------------------------------------------------------

CHAIN = """
[task.a]
inputs = ["src.txt"]
outputs = ["a.out"]
cmd = "true"

[task.b]
inputs = ["a.out"]
outputs = ["b.out"]
cmd = "true"

[task.c]
inputs = ["b.out", "side.out"]
outputs = ["c.out"]
cmd = "true"

[task.side]
outputs = ["side.out"]
cmd = "true"

[task.other]
outputs = ["other.out"]
cmd = "true"
"""


def ids(g: Graph, indices: list[int]) -> list[str]:
    return [g.computations[i].id for i in indices]


def test_topological_order_covers_everything(tmp_path):
    g = make(tmp_path, CHAIN, ["src.txt"])
    assert sorted(g.order) == list(range(len(g.computations)))
    assert_topological(g, g.order)
    # producers are declared after their consumers here, order still puts them first
    assert ids(g, g.order).index("side.out") < ids(g, g.order).index("c.out")


def test_select_task_includes_producers_transitively(tmp_path):
    g = make(tmp_path, CHAIN, ["src.txt"])
    chosen = select(g, ["c"])
    assert sorted(ids(g, chosen)) == ["a.out", "b.out", "c.out", "side.out"]
    assert_topological(g, chosen)


def test_select_by_output_path(tmp_path):
    g = make(tmp_path, CHAIN, ["src.txt"])
    assert ids(g, select(g, ["b.out"])) == ["a.out", "b.out"]
    assert ids(g, select(g, ["./b.out"])) == ["a.out", "b.out"]


def test_select_several_targets_no_duplicates(tmp_path):
    g = make(tmp_path, CHAIN, ["src.txt"])
    chosen = select(g, ["b", "other", "a.out"])
    assert sorted(ids(g, chosen)) == ["a.out", "b.out", "other.out"]
    assert len(chosen) == len(set(chosen))


def test_select_unknown_target(tmp_path):
    g = make(tmp_path, CHAIN, ["src.txt"])
    with pytest.raises(UsageError) as info:
        select(g, ["nothing.out"])
    assert "nothing.out" in str(info.value)


def test_select_existing_source_is_not_a_target(tmp_path):
    g = make(tmp_path, CHAIN, ["src.txt"])
    with pytest.raises(UsageError):
        select(g, ["src.txt"])


def test_select_by_colon_id(tmp_path):
    g = make(tmp_path, """
        [task.grid]
        foreach = {n = ["1", "2"]}
        cmd = "true"
        """)
    assert ids(g, select(g, [":grid[n=2]"])) == [":grid[n=2]"]


def test_closure_through_alias(tmp_path):
    g = make(tmp_path, CHAIN + """
[task.everything]
inputs = ["@c", "@other"]
""", ["src.txt"])
    chosen = select(g, ["everything"])
    assert sorted(ids(g, chosen)) == sorted(
        ["a.out", "b.out", "c.out", "side.out", "other.out", ":everything"])
    assert ids(g, chosen)[-1] == ":everything"


def test_world_inputs_make_producers(tmp_path):
    g = make(tmp_path, """
        [world.w]
        inputs = ["data.json"]
        setup = ["import json"]

        [task.data]
        outputs = ["data.json"]
        cmd = "echo {{}} > {outputs}"

        [task.r]
        world = "w"
        outputs = ["r.txt"]
        python = "-c pass"
        """)
    r = by_id(g, "r.txt")
    assert r.producers == [by_id(g, "data.json").index]
    assert by_id(g, "data.json").action == "echo {} > data.json"


def test_missing_world_input(tmp_path):
    msg = graph_error(tmp_path, """
        [world.w]
        inputs = ["nope.json"]
        """)
    assert "nope.json" in msg and "w" in msg


def test_python_argv(tmp_path):
    g = make(tmp_path, """
        [task.p]
        inputs = ["my script.py"]
        outputs = ["o.txt"]
        python = "{inputs} --out {outputs}"
        """, ["my script.py"])
    argv = by_id(g, "o.txt").argv()
    assert argv[-3:] == ["my script.py", "--out", "o.txt"]
    assert argv[1].endswith("driver.py") and argv[2:5] == ["--setup", "[]", "--"]
    assert os.path.basename(argv[0]).startswith("python")


def test_foreach_patterns_feeding_each_other_without_end(tmp_path):
    msg = graph_error(tmp_path, """
        [task.ab]
        foreach = "{x}.a"
        inputs = ["{x}.a"]
        outputs = ["{x}.a.b"]
        cmd = "true"

        [task.ba]
        foreach = "{x}.b"
        inputs = ["{x}.b"]
        outputs = ["{x}.b.a"]
        cmd = "true"
        """, ["seed.a"])
    assert "ab" in msg and "ba" in msg


def test_task_settings_carried_to_computations(tmp_path):
    g = make(tmp_path, """
        [pools]
        link = 2

        [task.t]
        outputs = ["o"]
        cmd = "true"
        cpus = 3
        pool = "link"
        cost = 2.5
        timeout = 7
        always = true
        cache = false
        """)
    c = by_id(g, "o")
    assert (c.cpus, c.pool, c.cost, c.timeout, c.always, c.cache, c.task) == (
        3, "link", 2.5, 7.0, True, False, "t")
