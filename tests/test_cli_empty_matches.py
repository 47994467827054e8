"""A foreach or a glob that matches nothing is said, naming the task and the pattern; an
empty Farmfile says there is nothing to build (issue 16 item 4)."""


def warnings(r):
    return [l for l in r.stderr.splitlines() if l.startswith("farmer: warning:")]


def test_foreach_and_glob_matching_nothing_warn(project):
    project.farmfile(
        """
        [task.objects]
        foreach = "scr/{name}.c"
        inputs = ["scr/{name}.c"]
        outputs = ["build/{name}.o"]
        cmd = "cp {inputs} {outputs}"

        [task.lib]
        inputs = ["@objects", "include/*.h"]
        outputs = ["build/lib.txt"]
        cmd = "echo {inputs} > {outputs}"

        [task.modes]
        foreach = {mode = []}
        cmd = "true"
        """
    )
    project.write("src/a.c", "int a;\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    got = warnings(r)
    assert any("Farmfile:2:" in w and "task 'objects'" in w and "'scr/{name}.c' matches no file" in w
               for w in got), r
    assert any("Farmfile:8:" in w and "task 'lib'" in w and "'include/*.h' matches no file" in w
               for w in got), r
    assert any("task 'modes'" in w and "empty list" in w for w in got), r
    assert len(got) == 3, r


def test_matching_patterns_do_not_warn(project):
    project.farmfile(
        """
        [task.objects]
        foreach = "src/{name}.c"
        inputs = ["src/{name}.c", "src/*.c"]
        outputs = ["build/{name}.o"]
        cmd = "cp {inputs[0]} {outputs}"
        """
    )
    project.write("src/a.c", "int a;\n")
    r = project.build_in_process()
    assert r.returncode == 0 and not warnings(r), r


def test_an_empty_farmfile_says_there_is_nothing_to_build(project):
    project.farmfile("# nothing yet\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert any("declares no tasks" in w and "nothing to build" in w for w in warnings(r)), r


def _errors(r):
    return [l for l in r.stderr.splitlines() if l.startswith("farmer: error:")]


def test_a_target_left_unknown_by_an_empty_match_keeps_the_warning_that_explains_it(project):
    """A run that ends in an error has one error line, last; the warnings before it stay,
    since they say why the target is unknown (reliability N10): no task at all, or a foreach
    that matched no file, whose outputs would have been the target."""
    project.farmfile("# every task removed\n")
    for command in ("query", "build"):
        r = project.farmer(command, "x")
        assert r.returncode == 2, r
        assert len(_errors(r)) == 1 and r.stderr.splitlines()[-1].startswith("farmer: error: unknown target 'x'"), r
        assert [w for w in warnings(r) if "declares no tasks" in w] == warnings(r) != [], r
    project.farmfile('[task.objects]\nforeach = "scr/{name}.c"\noutputs = ["build/{name}.o"]\ncmd = "touch {outputs}"\n')
    project.write("src/a.c", "int a;\n")
    r = project.farmer("query", "build/a.o")
    assert r.returncode == 2 and len(_errors(r)) == 1, r
    assert "unknown target 'build/a.o'" in r.stderr.splitlines()[-1], r
    assert len(warnings(r)) == 1 and "'scr/{name}.c' matches no file" in warnings(r)[0], r


def test_query_of_a_task_without_computations_says_so(project):
    """Not "unknown target ...: not a task name": it is one. The error stands alone, as it
    does when the graph comes from the graph cache and no warning is printed."""
    project.farmfile('[task.objects]\nforeach = "scr/{name}.c"\noutputs = ["build/{name}.o"]\ncmd = "touch {outputs}"\n')
    assert project.build().returncode == 0  # (which writes the graph cache)
    for target in ("objects", "@objects"):
        r = project.farmer("query", target)
        assert r.returncode == 2 and len(_errors(r)) == 1, r
        assert f"task '{target}' has no computations (its foreach matches nothing)" in _errors(r)[0], r
