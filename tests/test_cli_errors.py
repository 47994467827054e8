"""End-to-end: Farmfile, graph and usage errors (exit 2, one line, no traceback)."""

import re

from conftest import assert_error

GOOD_TASK = """
[task.good]
outputs = ["out/good.txt"]
cmd = "echo good > {outputs}"
"""


def nothing_ran(project):
    assert not project.exists("out/good.txt")


def test_toml_syntax_error_has_line(project):
    project.farmfile(
        """\
        [task.a]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}
        """
    )
    msg = assert_error(project.build(), "Farmfile")
    assert re.search(r"Farmfile:3\b", msg), msg


def test_unknown_key_in_task(project):
    project.farmfile(
        """\
        [task.a]
        outputs = ["out/a.txt"]
        comand = "echo a > {outputs}"
        """
    )
    msg = assert_error(project.build(), "Farmfile", "comand")


def test_unknown_key_in_task_has_line(project):
    project.farmfile(
        """\
        [task.a]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}"

        [task.b]
        outputs = ["out/b.txt"]
        cmd = "echo b > {outputs}"
        inptus = ["x"]
        """
    )
    msg = assert_error(project.build(), "Farmfile", "inptus")
    assert re.search(r"Farmfile:8\b", msg), msg


def test_unknown_top_level_key(project):
    project.farmfile(
        GOOD_TASK
        + """
        [tasks.oops]
        cmd = "true"
        """
    )
    assert_error(project.build(), "Farmfile", "tasks")
    nothing_ran(project)


def test_unknown_key_in_farmer_table(project):
    project.farmfile(
        """
        [farmer]
        defaults = ["good"]
        """
        + GOOD_TASK
    )
    assert_error(project.build(), "Farmfile", "defaults")


def test_unknown_key_in_world(project):
    project.farmfile(
        """
        [world.w]
        setup = ["import json"]
        parrent = "x"

        [task.p]
        world = "w"
        outputs = ["out/p.txt"]
        python = "-c pass"
        """
    )
    assert_error(project.build(), "Farmfile", "parrent")


def test_cmd_and_python_together(project):
    project.farmfile(
        """
        [task.both]
        outputs = ["out/x.txt"]
        cmd = "echo x > {outputs}"
        python = "-c pass"
        """
        + GOOD_TASK
    )
    assert_error(project.build(), "both")
    nothing_ran(project)


def test_world_without_python(project):
    project.farmfile(
        """
        [world.w]
        setup = []

        [task.shell]
        world = "w"
        outputs = ["out/x.txt"]
        cmd = "echo x > {outputs}"
        """
    )
    assert_error(project.build(), "shell")


def test_unknown_world(project):
    project.farmfile(
        """
        [task.p]
        world = "nowhere"
        outputs = ["out/p.txt"]
        python = "-c pass"
        """
    )
    assert_error(project.build(), "nowhere")


def test_cycle_names_the_tasks(project):
    project.farmfile(
        """
        [task.alpha]
        inputs = ["out/gamma.txt"]
        outputs = ["out/alpha.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.beta]
        inputs = ["out/alpha.txt"]
        outputs = ["out/beta.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.gamma]
        inputs = ["out/beta.txt"]
        outputs = ["out/gamma.txt"]
        cmd = "cp {inputs} {outputs}"
        """
        + GOOD_TASK
    )
    msg = assert_error(project.build(), "alpha", "beta", "gamma")
    assert "cycle" in msg.lower(), msg
    nothing_ran(project)


def test_self_cycle_through_at_ref(project):
    project.farmfile(
        """
        [task.selfish]
        inputs = ["@selfish"]
        outputs = ["out/s.txt"]
        cmd = "true"
        """
    )
    msg = assert_error(project.build(), "selfish")
    assert "cycle" in msg.lower(), msg


def test_missing_input_names_path_and_task(project):
    project.farmfile(
        """
        [task.needy]
        inputs = ["src/not-there.txt"]
        outputs = ["out/needy.txt"]
        cmd = "cp {inputs} {outputs}"
        """
        + GOOD_TASK
    )
    assert_error(project.build(), "src/not-there.txt", "needy")
    nothing_ran(project)


def test_missing_input_only_for_unrequested_target_is_fine(project):
    project.farmfile(
        """
        [task.needy]
        inputs = ["src/not-there.txt"]
        outputs = ["out/needy.txt"]
        cmd = "cp {inputs} {outputs}"
        """
        + GOOD_TASK
    )
    r = project.build("good")
    assert r.returncode == 0, r
    assert project.exists("out/good.txt")


def test_two_tasks_one_output(project):
    project.farmfile(
        """
        [task.first]
        outputs = ["out/same.txt"]
        cmd = "echo 1 > {outputs}"

        [task.second]
        outputs = ["out/same.txt"]
        cmd = "echo 2 > {outputs}"
        """
        + GOOD_TASK
    )
    assert_error(project.build(), "out/same.txt")
    nothing_ran(project)


def test_output_outside_root(project):
    project.farmfile(
        """
        [task.escape]
        outputs = ["../escaped.txt"]
        cmd = "echo x > {outputs}"
        """
    )
    assert_error(project.build(), "../escaped.txt")
    assert not (project.root.parent / "escaped.txt").exists()


def test_absolute_output_outside_root(project, tmp_path):
    target = tmp_path / "abs-escaped.txt"
    project.farmfile(
        f"""
        [task.escape]
        outputs = ["{target}"]
        cmd = "echo x > {{outputs}}"
        """
    )
    assert_error(project.build(), str(target))
    assert not target.exists()


def test_unknown_pool(project):
    project.farmfile(
        """
        [pools]
        link = 1

        [task.p]
        pool = "lnk"
        outputs = ["out/p.txt"]
        cmd = "echo p > {outputs}"
        """
    )
    assert_error(project.build(), "lnk")


def test_unknown_task_in_at_ref(project):
    project.farmfile(
        """
        [task.user]
        inputs = ["@nosuchtask"]
        outputs = ["out/u.txt"]
        cmd = "cat {inputs} > {outputs}"
        """
    )
    assert_error(project.build(), "nosuchtask")


def test_errors_reported_by_other_commands_too(project):
    project.farmfile(
        """
        [task.a]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}"
        bogus = 1
        """
    )
    for args in (["plan"], ["graph"], ["query", "a"], ["clean"]):
        assert_error(project.farmer(*args), "bogus")


def test_unknown_subcommand_or_option(project):
    project.farmfile(GOOD_TASK)
    r = project.farmer("biuld")
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr
    r = project.farmer("build", "--no-such-option")
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr
    nothing_ran(project)


def test_bad_jobs_value(project):
    project.farmfile(GOOD_TASK)
    r = project.build("-j", "many")
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr
    nothing_ran(project)
