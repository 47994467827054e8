"""File names with a control character (issue 11): one rule wherever a pattern meets one.
A foreach or a glob that would match such a file is refused with one line naming the file
(exit 2), whether the character is a TAB or a newline, and whether the graph comes from the
graph cache or not; a build without such files is not disturbed by one its patterns do not
match."""

from __future__ import annotations

import pytest
from conftest import assert_error

TASKS = {
    "foreach": 'foreach = "src/{n}.txt"\ninputs = ["src/{n}.txt"]\noutputs = ["out/{n}.txt"]',
    "glob": 'inputs = ["src/*.txt"]\noutputs = ["all.txt"]',
    "globstar": 'inputs = ["src/**"]\noutputs = ["all.txt"]',
}


@pytest.mark.parametrize("char", ["\t", "\n", "\x1b"], ids=["tab", "newline", "escape"])
@pytest.mark.parametrize("kind", sorted(TASKS))
def test_a_matched_name_with_a_control_character_is_refused(project, kind, char):
    project.farmfile(f'[task.t]\n{TASKS[kind]}\ncmd = "cat {{inputs}} > {{outputs}}"\n')
    project.write("src/ok.txt", "ok\n")
    assert project.build().returncode == 0  # the graph cache now holds the graph
    bad = f"src/a{char}b.txt"
    project.write(bad, "x\n")
    for args in (("build",), ("plan",)):
        r = project.farmer(*args)
        assert_error(r, "task 't'", repr(bad), "control character", "rename the file")


def test_a_name_no_pattern_matches_is_left_alone(project):
    project.farmfile('[task.t]\ninputs = ["src/*.txt"]\noutputs = ["all.txt"]\ncmd = "cat {inputs} > {outputs}"\n')
    project.write("src/ok.txt", "ok\n")
    project.write("src/notes\t.md", "x\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("all.txt") == "ok\n"
