"""SPEC §1: a python task's script, or its module's file when under the project root, is
an input whether or not `inputs` lists it (issue 16 item 7)."""

from conftest import assert_error


def test_editing_the_script_reruns_the_task(project):
    project.farmfile(
        """
        [task.gen]
        outputs = ["out/gen.txt"]
        python = "tools/make.py {outputs}"
        """
    )
    project.write("tools/make.py", "import sys\nopen(sys.argv[1], 'w').write('one')\n")
    assert project.build().returncode == 0
    assert project.read("out/gen.txt") == "one"
    r = project.build("--explain")
    assert r.returncode == 0 and r.summary()["up to date"] == 1, r
    project.write("tools/make.py", "import sys\nopen(sys.argv[1], 'w').write('two')\n")
    r = project.build("--explain")
    assert r.returncode == 0, r
    assert project.read("out/gen.txt") == "two"
    assert project.reasons()["out/gen.txt"] in ("inputs changed", "input tools/make.py changed"), r
    assert "tools/make.py" in project.farmer("query", "out/gen.txt").stdout


def test_a_module_under_the_root_is_an_input_and_the_standard_library_is_not(project):
    project.farmfile(
        """
        [task.mod]
        outputs = ["out/mod.txt"]
        python = "-m pkg.writer {outputs}"

        [task.std]
        outputs = ["out/std.txt"]
        python = "-c 'import sys; open(sys.argv[1], \\"w\\").write(\\"std\\")' {outputs}"

        [task.tool]
        inputs = ["data.json"]
        outputs = ["out/tool.txt"]
        cmd = "true > {outputs}"
        """
    )
    project.write("pkg/__init__.py", "")
    project.write("pkg/writer.py", "import sys\nopen(sys.argv[1], 'w').write('a')\n")
    project.write("data.json", "{}")
    assert project.build().returncode == 0
    project.write("pkg/writer.py", "import sys\nopen(sys.argv[1], 'w').write('b')\n")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/mod.txt") == "b"
    assert project.statuses()["out/mod.txt"] == "ran"
    assert project.statuses()["out/std.txt"] == "up-to-date"


def test_a_world_task_script_is_an_input(project):
    project.farmfile(
        """
        [world.w]
        setup = ["import json"]

        [task.report]
        world = "w"
        outputs = ["out/r.txt"]
        python = "report.py {outputs}"
        """
    )
    project.write("report.py", "import sys\nopen(sys.argv[1], 'w').write(json.dumps(1))\n")
    assert project.build_in_process().returncode == 0
    project.write("report.py", "import sys\nopen(sys.argv[1], 'w').write(json.dumps(2))\n")
    assert project.build_in_process().returncode == 0
    assert project.read("out/r.txt") == "2"


def test_a_missing_script_is_a_missing_input(project):
    project.farmfile(
        """
        [task.gen]
        outputs = ["out/gen.txt"]
        python = "nope.py {outputs}"
        """
    )
    assert_error(project.build(), "missing input 'nope.py'", "task 'gen'", "Farmfile:2:")
