"""Usage and Farmfile messages a newcomer meets first (issue 16 item 12)."""

from conftest import assert_error


def test_bare_farmer_prints_its_usage_not_an_error(project):
    r = project.farmer()
    assert r.returncode == 2, r
    assert r.stderr.startswith("Usage: farmer [OPTIONS] COMMAND"), r
    assert "farmer: error" not in r.stderr and "see farmer --help" not in r.stderr, r
    assert "build" in r.stderr and "Traceback" not in r.stderr


def test_options_before_the_command_get_a_hint(project):
    assert_error(project.farmer("-j2", "build"), "No such option '-j'",
                 "options go after the command: farmer build -j2")
    assert_error(project.farmer("build", "--bogus"), "--bogus", "see farmer --help")


def test_unknown_top_level_key_says_top_level_and_the_near_name(project):
    project.farmfile("[tasks.a]\ncmd = 'true'\n")
    msg = assert_error(project.build(), "Farmfile:1:", "unknown key 'tasks' at the top level",
                       "did you mean 'task'?")
    assert "in []" not in msg


def test_vars_must_be_a_string_or_a_number(project):
    project.farmfile("[vars]\ndebug = [1]\n")
    assert_error(project.build(), "Farmfile:2:", "vars.debug must be a string or a number")
    project.farmfile("[vars]\ndebug = 1\n[task.a]\noutputs = ['o']\ncmd = 'echo {debug} > {outputs}'\n")
    assert project.build().returncode == 0
    assert project.read("o") == "1\n"


def test_query_lists_the_world_inputs(project):
    project.farmfile(
        """
        [world.w]
        inputs = ["data/table.json"]
        setup = ["import json"]

        [task.a]
        world = "w"
        outputs = ["out.txt"]
        python = "-c pass"
        """
    )
    project.write("data/table.json", "{}")
    r = project.farmer("query", "out.txt")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[lines.index("world inputs:") + 1] == "  data/table.json", r
