"""Graph-level errors name the Farmfile line of the task (or world) they belong to and say
what to do (issue 16 item 6), with or without the graph cache; TOML strings left open name
their line."""

import pytest
from conftest import assert_error

CASES = [
    ("unknown-ref", """
        [task.a]
        outputs = ["x"]
        cmd = "true"

        [task.b]
        inputs = ["@bee"]
        cmd = "true"
        """, ["Farmfile:6:", "@bee names no task", "declare [task.bee]"]),
    ("unknown-name", """
        [task.a]
        outputs = ["x"]
        cmd = "echo {cc} > {outputs}"
        """, ["Farmfile:2:", "unknown name {cc}", "[vars]"]),
    ("missing-input", """
        # the sources
        [task.app]
        inputs = ["src/main.c"]
        outputs = ["app"]
        cmd = "cp {inputs} {outputs}"
        """, ["Farmfile:3:", "missing input 'src/main.c'", "create it"]),
    ("cycle", """
        [task.a]
        inputs = ["y"]
        outputs = ["x"]
        cmd = "true"

        [task.b]
        inputs = ["x"]
        outputs = ["y"]
        cmd = "true"
        """, ["Farmfile:", "dependency cycle", "break one of these edges"]),
    ("two-producers", """
        [task.a]
        outputs = ["x"]
        cmd = "true"

        [task.b]
        outputs = ["x"]
        cmd = "true"
        """, ["Farmfile:6:", "declared by two computations", "rename one"]),
    ("world-input", """
        [world.w]
        inputs = ["nope.json"]

        [task.a]
        world = "w"
        outputs = ["x"]
        python = "-c pass"
        """, ["Farmfile:2:", "missing input 'nope.json'", "world 'w'"]),
    ("outside-root", """
        [task.a]
        outputs = ["../x"]
        cmd = "true"
        """, ["Farmfile:2:", "outside the project root", "inside"]),
]


@pytest.mark.parametrize("name, text, words", CASES, ids=[c[0] for c in CASES])
def test_graph_errors_name_the_line_and_the_fix(project, name, text, words):
    project.farmfile(text)
    for command in (["build"], ["build"], ["plan"], ["graph"]):  # the second: graph cache warm
        assert_error(project.farmer(*command), *words)


def test_cycle_names_a_task_of_the_cycle(project):
    project.farmfile(CASES[3][1])
    msg = assert_error(project.build(), "dependency cycle")
    assert msg.startswith("farmer: error: Farmfile:7:") or msg.startswith("farmer: error: Farmfile:2:"), msg


@pytest.mark.parametrize("text, line, words", [
    ('[task.a]\ncmd = "echo hi\noutputs = ["x"]\n', 2, ["string is not closed on this line"]),
    ("[task.a]\ncmd = 'echo hi\noutputs = ['x']\n", 2, ["string is not closed on this line"]),
    ('[task.a]\noutputs = ["x"]\ncmd = """echo hi\n\n', 3, ['multi-line string', "never closed"]),
])
def test_unclosed_toml_strings_name_their_line(project, text, line, words):
    project.write("Farmfile", text, dedent=False)
    assert_error(project.build(), f"Farmfile:{line}:", *words)
