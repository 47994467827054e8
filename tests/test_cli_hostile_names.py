"""File names are not commands (SPEC §1 Substitution): wildcard values are shell-quoted in
`cmd` and `python`, as `{inputs}` is, so a file anyone can add to the repository cannot run
anything, whether the task is rendered one computation at a time or compiled (many)."""

import pytest

HOSTILE = ["a;touch PWNED;b", "$(touch PWNED)", "`touch PWNED`", "x&touch PWNED&y",
           "x|touch PWNED", "it's", "two words", "-n"]


@pytest.mark.parametrize("padding", [0, 10])  # 10 plain names more: the compiled path
def test_hostile_foreach_names_stay_names(project, padding):
    project.farmfile(
        """
        [task.copy]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["out/{stem}.txt"]
        cmd = "printf '%s\\n' {stem} > out/{stem}.txt"

        [task.py]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["py/{stem}.txt"]
        python = "-c 'import sys; open(sys.argv[2], \\"w\\").write(sys.argv[1])' {stem} py/{stem}.txt"
        """
    )
    names = HOSTILE + [f"plain{i}" for i in range(padding)]
    for name in names:
        project.write(f"src/{name}.c", "int x;\n")
    r = project.build()
    assert r.returncode == 0, r
    assert not project.exists("PWNED") and not project.exists("src/PWNED"), r
    for name in names:
        assert project.read(f"out/{name}.txt") == name + "\n"
        assert project.read(f"py/{name}.txt") == name
