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
    r = project.build()
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
    r = project.build()
    assert r.returncode == 0 and not warnings(r), r


def test_an_empty_farmfile_says_there_is_nothing_to_build(project):
    project.farmfile("# nothing yet\n")
    r = project.build()
    assert r.returncode == 0, r
    assert any("declares no tasks" in w and "nothing to build" in w for w in warnings(r)), r
