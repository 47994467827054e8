"""foreach, @task inputs, globs (SPEC §1 Tasks) and substitution (SPEC §1 Substitution): whole
builds in-process with the fake executor (tests/fakes.py), except the errors, which the command
line reports, and paths a real shell must read as quoted."""

from conftest import assert_error

# ---------------------------------------------------------------- foreach --

def test_foreach_over_files(project):
    project.farmfile(
        """
        [task.objects]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["build/{stem}.o"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.write("src/a.c", "int a;\n")
    project.write("src/b.c", "int b;\n")
    project.write("src/readme.txt", "not a C file\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"build/a.o": "ran", "build/b.o": "ran"}
    assert {t["task"] for t in project.last_build()["tasks"]} == {"objects"}
    assert project.read("build/a.o") == "int a;\n"
    # a new matching file is a new computation; the others stay up to date
    project.write("src/c.c", "int c;\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"build/a.o": "up-to-date", "build/b.o": "up-to-date", "build/c.o": "ran"}
    assert project.reasons()["build/c.o"] == "never built"
    assert r.finished_ids() == ["build/c.o"], r


def test_foreach_wildcard_matches_slashes(project):
    project.farmfile(
        """
        [task.copy]
        foreach = "src/{path}.c"
        inputs = ["src/{path}.c"]
        outputs = ["build/{path}.o"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.write("src/top.c", "top\n")
    project.write("src/sub/dir/deep.c", "deep\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert set(project.statuses()) == {"build/top.o", "build/sub/dir/deep.o"}
    assert project.read("build/sub/dir/deep.o") == "deep\n"


def test_foreach_over_declared_outputs_of_another_task(project):
    project.farmfile(
        """
        [task.gen]
        outputs = ["gen/one.txt", "gen/two.txt"]
        cmd = "echo 1 > gen/one.txt && echo 2 > gen/two.txt"

        [task.up]
        foreach = "gen/{n}.txt"
        inputs = ["gen/{n}.txt"]
        outputs = ["out/{n}.up"]
        cmd = "cat {inputs} > {outputs} && echo {n} >> {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"gen/one.txt": "ran", "out/one.up": "ran", "out/two.up": "ran"}
    assert project.read("out/one.up") == "1\none\n"
    assert project.read("out/two.up") == "2\ntwo\n"
    tasks = project.tasks()
    assert tasks["out/one.up"]["start_s"] >= tasks["gen/one.txt"]["end_s"]
    # now the outputs also exist as files: still one computation per match
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"gen/one.txt": "up-to-date", "out/one.up": "up-to-date",
                                  "out/two.up": "up-to-date"}


def test_foreach_never_matches_state_dir(project):
    project.farmfile(
        """
        [task.size]
        foreach = "{f}.json"
        inputs = ["{f}.json"]
        outputs = ["out/{f}.size"]
        cmd = "wc -c < {inputs} > {outputs}"
        """
    )
    project.write("data/x.json", "{}\n")
    assert project.build_in_process().returncode == 0
    assert project.exists(".farmer/last-build.json")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/data/x.size": "up-to-date"}


def test_foreach_table_is_cartesian_product(project):
    project.farmfile(
        """
        [task.grid]
        foreach = {n = ["1", "2"], mode = ["a", "b"]}
        outputs = ["out/{mode}-{n}.txt"]
        cmd = "echo {mode}{n} > {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    ids = {"out/a-1.txt", "out/a-2.txt", "out/b-1.txt", "out/b-2.txt"}
    assert set(project.statuses()) == ids
    assert project.read("out/b-2.txt") == "b2\n"


def test_foreach_table_ids_without_outputs(project):
    project.farmfile(
        """
        [task.t]
        foreach = {n = ["1", "2"], mode = ["a", "b"]}
        cmd = "echo {mode}{n}"

        [task.plain]
        cmd = "true"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {
        ":t[mode=a,n=1]": "ran",
        ":t[mode=a,n=2]": "ran",
        ":t[mode=b,n=1]": "ran",
        ":t[mode=b,n=2]": "ran",
        ":plain": "ran",
    }
    assert set(r.finished_ids()) == set(project.statuses()), r
    assert {t["task"] for t in project.last_build()["tasks"]} == {"t", "plain"}


def test_at_task_inputs_are_all_outputs_sorted(project):
    project.farmfile(
        """
        [task.parts]
        foreach = "src/{p}.txt"
        inputs = ["src/{p}.txt"]
        outputs = ["parts/{p}.part"]
        cmd = "cp {inputs} {outputs}"

        [task.whole]
        inputs = ["@parts"]
        outputs = ["out/whole.txt"]
        cmd = "cat {inputs} > {outputs}"
        """
    )
    for name in ["c", "a", "b"]:
        project.write(f"src/{name}.txt", f"{name}\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/whole.txt") == "a\nb\nc\n"
    tasks = project.tasks()
    for p in ["a", "b", "c"]:
        assert tasks["out/whole.txt"]["start_s"] >= tasks[f"parts/{p}.part"]["end_s"]
    # an edit to one part reruns that part and the whole
    project.write("src/b.txt", "B!\n")
    assert project.build_in_process().returncode == 0
    assert project.statuses() == {"parts/a.part": "up-to-date", "parts/b.part": "ran",
                                  "parts/c.part": "up-to-date", "out/whole.txt": "ran"}
    assert project.reasons()["out/whole.txt"] == "input parts/b.part changed"
    assert project.read("out/whole.txt") == "a\nB!\nc\n"


def test_alias_task_builds_its_inputs(project):
    project.farmfile(
        """
        [task.a]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}"

        [task.b]
        outputs = ["out/b.txt"]
        cmd = "echo b > {outputs}"

        [task.c]
        outputs = ["out/c.txt"]
        cmd = "echo c > {outputs}"

        [task.all]
        inputs = ["@a", "@b"]
        """
    )
    r = project.build_in_process("all")
    assert r.returncode == 0, r
    assert project.exists("out/a.txt") and project.exists("out/b.txt")
    assert not project.exists("out/c.txt")


def test_glob_inputs_sorted_and_match_change_reruns(project):
    project.farmfile(
        """
        [task.cat]
        inputs = ["src/*.txt"]
        outputs = ["out/all.txt"]
        cmd = "cat src/*.txt > {outputs}"
        """
    )
    project.write("src/b.txt", "b\n")
    project.write("src/a.txt", "a\n")
    project.write("src/a.dat", "not matched\n")
    assert project.build_in_process().returncode == 0
    assert project.read("out/all.txt") == "a\nb\n"
    assert project.build_in_process().finished() == []
    # a file not matched by the glob changes nothing
    project.write("src/z.dat", "not matched either\n")
    r = project.build_in_process()
    assert r.finished() == [], r
    # a new match reruns the consumer
    project.write("src/c.txt", "c\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/all.txt": "ran"}
    assert project.reasons()["out/all.txt"] == "inputs changed"
    assert project.read("out/all.txt") == "a\nb\nc\n"
    # a match removed reruns it too
    project.remove("src/a.txt")
    assert project.build_in_process().returncode == 0
    assert project.statuses() == {"out/all.txt": "ran"}
    assert project.reasons()["out/all.txt"] == "inputs changed"
    assert project.read("out/all.txt") == "b\nc\n"


def test_glob_content_change_names_the_file(project):
    project.farmfile(
        """
        [task.cat]
        inputs = ["src/*.txt"]
        outputs = ["out/all.txt"]
        cmd = "cat src/*.txt > {outputs}"
        """
    )
    project.write("src/a.txt", "a\n")
    project.write("src/b.txt", "b\n")
    assert project.build_in_process().returncode == 0
    project.write("src/b.txt", "bee\n")
    assert project.build_in_process().returncode == 0
    assert project.reasons()["out/all.txt"] == "input src/b.txt changed"


def test_recursive_glob_in_inputs(project):
    project.farmfile(
        """
        [task.list]
        inputs = ["src/**/*.txt"]
        outputs = ["out/list.txt"]
        cmd = "printf '%s\\n' {inputs} > {outputs}"
        """
    )
    project.write("src/top.txt", "")
    project.write("src/x/mid.txt", "")
    project.write("src/x/y/deep.txt", "")
    project.write("src/x/y/deep.dat", "")
    r = project.build_in_process()
    assert r.returncode == 0, r
    lines = project.read("out/list.txt").split()
    assert set(lines) >= {"src/x/mid.txt", "src/x/y/deep.txt"}
    assert "src/x/y/deep.dat" not in lines
    assert lines == sorted(lines)


# ----------------------------------------------------------- substitution --

def test_substitute_inputs_outputs_and_indexes(project):
    project.farmfile(
        """
        [task.join]
        inputs = ["src/one.txt", "src/two.txt"]
        outputs = ["out/first.txt", "out/second.txt"]
        cmd = "cat {inputs[1]} > {outputs[0]} && cat {inputs[0]} > {outputs[1]} && echo {inputs} {outputs} > out/all-args.txt"
        """
    )
    project.write("src/one.txt", "1\n")
    project.write("src/two.txt", "2\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/first.txt") == "2\n"
    assert project.read("out/second.txt") == "1\n"
    assert project.read("out/all-args.txt") == "src/one.txt src/two.txt out/first.txt out/second.txt\n"


def test_paths_with_spaces_are_shell_quoted(project):
    project.farmfile(
        """
        [task.copy]
        inputs = ["src/my file.txt", "src/it's.txt"]
        outputs = ["out/my out.txt"]
        cmd = "cat {inputs} > {outputs} && cat {inputs[0]} >> {outputs[0]}"
        """
    )
    project.write("src/my file.txt", "spaced\n")
    project.write("src/it's.txt", "quote\n")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/my out.txt") == "spaced\nquote\nspaced\n"
    assert project.statuses() == {"out/my out.txt": "ran"}


def test_foreach_path_with_space(project):
    project.farmfile(
        """
        [task.copy]
        foreach = "src/{name}.txt"
        inputs = ["src/{name}.txt"]
        outputs = ["out/{name}.copy"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.write("src/two words.txt", "x\n")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/two words.copy") == "x\n"


def test_double_braces_are_literal(project):
    project.farmfile(
        """
        [task.braces]
        inputs = ["src/t.txt"]
        outputs = ["out/b.txt"]
        cmd = "awk '{{print $2}}' {inputs} > {outputs} && printf '%s\\n' '{{inputs}}' >> {outputs}"
        """
    )
    project.write("src/t.txt", "a b c\nd e f\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/b.txt") == "b\ne\n{inputs}\n"


def test_vars_and_wildcards_are_inserted(project):
    project.farmfile(
        """
        [vars]
        greeting = "hello there"
        stem = "VAR-LOSES"
        flags = "-n"

        [task.greet]
        foreach = "src/{stem}.in"
        inputs = ["src/{stem}.in"]
        outputs = ["out/{stem}.txt"]
        cmd = "echo {flags} {greeting} {stem} > {outputs}"
        """
    )
    project.write("src/world.in", "")
    r = project.build_in_process()
    assert r.returncode == 0, r
    # vars are inserted unquoted: "-n" is an option to echo, "hello there" two words
    assert project.read("out/world.txt") == "hello there world"


def test_vars_in_paths(project):
    project.farmfile(
        """
        [vars]
        dir = "generated"

        [task.g]
        outputs = ["{dir}/g.txt"]
        cmd = "echo g > {outputs}"

        [task.h]
        inputs = ["{dir}/g.txt"]
        outputs = ["{dir}/h.txt"]
        cmd = "cat {inputs} {inputs} > {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("generated/h.txt") == "g\ng\n"
    assert set(project.statuses()) == {"generated/g.txt", "generated/h.txt"}


def test_depfile_substitution(project):
    project.farmfile(
        """
        [task.d]
        outputs = ["out/d.txt"]
        depfile = "out/d.dep"
        cmd = "echo {depfile} > {outputs} && echo 'out/d.txt: src/x.txt' > {depfile}"
        """
    )
    project.write("src/x.txt", "x\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/d.txt") == "out/d.dep\n"


def test_env_values_substituted_unquoted(project):
    project.farmfile(
        """
        [vars]
        who = "the world"

        [task.e]
        outputs = ["out/with space.txt"]
        env = {OUT = "{outputs}", WHO = "{who}"}
        cmd = "printf '%s|%s' \\"$OUT\\" \\"$WHO\\" > \\"$OUT\\""
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/with space.txt") == "out/with space.txt|the world"


def test_unknown_name_in_cmd_is_an_error(project):
    project.farmfile(
        """
        [task.ok]
        outputs = ["out/ok.txt"]
        cmd = "echo ok > {outputs}"

        [task.broken]
        outputs = ["out/b.txt"]
        cmd = "echo {nosuchname} > {outputs}"
        """
    )
    r = project.build()
    assert_error(r, "broken", "nosuchname")
    assert not project.exists("out/ok.txt")


def test_unknown_name_in_outputs_is_an_error(project):
    project.farmfile(
        """
        [task.broken]
        outputs = ["out/{missingvar}.txt"]
        cmd = "true"
        """
    )
    assert_error(project.build(), "broken", "missingvar")


def test_index_out_of_range_is_an_error(project):
    project.farmfile(
        """
        [task.idx]
        inputs = ["src/a.txt"]
        outputs = ["out/x.txt"]
        cmd = "cat {inputs[3]} > {outputs}"
        """
    )
    project.write("src/a.txt", "a\n")
    r = project.build()
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr, r
    assert "idx" in r.stderr, r


def test_removed_foreach_source_drops_computation_and_consumer_reruns(project):
    project.farmfile(
        """
        [task.parts]
        foreach = "src/{p}.txt"
        inputs = ["src/{p}.txt"]
        outputs = ["parts/{p}.part"]
        cmd = "cp {inputs} {outputs}"

        [task.whole]
        inputs = ["@parts"]
        outputs = ["out/whole.txt"]
        cmd = "cat {inputs} > {outputs}"
        """
    )
    for name in ["a", "b", "c"]:
        project.write(f"src/{name}.txt", f"{name}\n")
    assert project.build_in_process().returncode == 0
    project.remove("src/b.txt")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert set(project.statuses()) == {"parts/a.part", "parts/c.part", "out/whole.txt"}
    assert project.statuses()["out/whole.txt"] == "ran"
    assert project.read("out/whole.txt") == "a\nc\n"
    project.write("src/d.txt", "d\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses()["parts/d.part"] == "ran"
    assert project.statuses()["out/whole.txt"] == "ran"
    assert project.read("out/whole.txt") == "a\nc\nd\n"


def test_at_task_sorted_by_path_not_by_foreach_order(project):
    project.farmfile(
        """
        [task.parts]
        foreach = {n = ["2", "10", "1"]}
        outputs = ["parts/{n}.part", "a-side/{n}.extra"]
        cmd = "echo {n} > parts/{n}.part && echo x{n} > a-side/{n}.extra"

        [task.whole]
        inputs = ["@parts"]
        outputs = ["out/whole.txt"]
        cmd = "cat {inputs} > {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/whole.txt") == "x1\nx10\nx2\n1\n10\n2\n"


# ------------------------------------------- the graph follows the files --

def test_foreach_directory_created_later(project):
    project.farmfile(
        """
        [task.objects]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["build/{stem}.o"]
        cmd = "cp {inputs} {outputs}"

        [task.other]
        outputs = ["out/other.txt"]
        cmd = "echo o > {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/other.txt": "ran"}
    project.write("src/a.c", "a\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/other.txt": "up-to-date", "build/a.o": "ran"}
    project.write("src/deeper/b.c", "b\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses()["build/deeper/b.o"] == "ran"
    project.write("src/deeper/c.c", "c\n")
    r = project.build_in_process()
    assert project.statuses()["build/deeper/c.o"] == "ran"


def test_foreach_over_outputs_also_matches_extra_files(project):
    project.farmfile(
        """
        [task.gen]
        outputs = ["gen/one.txt"]
        cmd = "echo 1 > {outputs}"

        [task.up]
        foreach = "gen/{n}.txt"
        inputs = ["gen/{n}.txt"]
        outputs = ["out/{n}.up"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    assert project.build_in_process().returncode == 0
    project.write("gen/handmade.txt", "h\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"gen/one.txt": "up-to-date", "out/one.up": "up-to-date",
                                  "out/handmade.up": "ran"}


def test_missing_input_created_after_error(project):
    project.farmfile(
        """
        [task.needy]
        inputs = ["src/later.txt"]
        outputs = ["out/needy.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    assert_error(project.build(), "src/later.txt", "needy")
    project.write("src/later.txt", "here now\n")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/needy.txt") == "here now\n"
    project.remove("src/later.txt")
    assert_error(project.build(), "src/later.txt", "needy")


def test_recursive_glob_sees_new_deep_files(project):
    project.farmfile(
        """
        [task.list]
        inputs = ["src/**/*.txt"]
        outputs = ["out/list.txt"]
        cmd = "find src -name '*.txt' | sort > {outputs}"
        """
    )
    project.write("src/x/y/deep.txt", "")
    assert project.build_in_process().returncode == 0
    project.write("src/x/y/deeper.txt", "")
    r = project.build_in_process()
    assert project.statuses() == {"out/list.txt": "ran"}, r
    assert project.reasons()["out/list.txt"] == "inputs changed"
    project.write("src/brand/new/dir/f.txt", "")
    r = project.build_in_process()
    assert project.statuses() == {"out/list.txt": "ran"}, r
    assert "src/brand/new/dir/f.txt" in project.read("out/list.txt")


def test_depfile_name_without_depfile_is_an_error(project):
    project.farmfile(
        """
        [task.nodep]
        outputs = ["out/x.txt"]
        cmd = "echo {depfile} > {outputs}"
        """
    )
    assert_error(project.build(), "nodep", "depfile")
