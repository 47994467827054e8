"""File names are not commands (SPEC §1 Substitution): wildcard values are shell-quoted in
`cmd` and `python`, as `{inputs}` is, so a file anyone can add to the repository cannot run
anything, whether the task is rendered one computation at a time or compiled (many)."""

import pytest
from conftest import assert_error

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
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert not project.exists("PWNED") and not project.exists("src/PWNED"), r
    for name in names:
        assert project.read(f"out/{name}.txt") == name + "\n"
        assert project.read(f"py/{name}.txt") == name


@pytest.mark.parametrize("cmd, where", [
    ("cat 'src/{stem}.c' > 'out/{stem}.txt'", "quotes ('...')"),
    ('cat \\"src/{stem}.c\\" > {outputs}', 'quotes ("...")'),
    ("cat src/{stem}.c > {outputs}; echo \\\"made '{stem}'\\\"", 'quotes ("...")'),
])
def test_a_name_inside_quotes_is_refused_before_anything_runs(project, cmd, where):
    """Inside the author's quotes farmer's quotes would end the author's (or be plain
    characters), and these names would run: the Farmfile is refused when it is read, with
    one line naming the task, the name and the line, and nothing runs."""
    project.farmfile(
        f"""
        [task.first]
        outputs = ["out/first.txt"]
        cmd = "touch out/first.txt"

        [task.copy]
        foreach = "src/{{stem}}.c"
        inputs = ["src/{{stem}}.c"]
        outputs = ["out/{{stem}}.txt"]
        cmd = "{cmd}"
        """
    )
    for name in HOSTILE:
        project.write(f"src/{name}.c", "int x;\n")
    for command in ("build", "plan", "graph"):
        r = project.farmer(command)
        msg = assert_error(r, "Farmfile:10:", "task 'copy':", f"{{stem}} inside {where} in cmd",
                           "write it bare, farmer quotes it")
        assert not project.exists("PWNED") and not project.exists("src/PWNED"), r
        assert not project.exists("out/first.txt") and not project.exists("out"), msg
    # Written bare, as the error says, every name stays a name.
    project.write("Farmfile", project.read("Farmfile").replace(cmd, "cat src/{stem}.c > {outputs}"))
    r = project.build()
    assert r.returncode == 0, r
    assert not project.exists("PWNED") and not project.exists("src/PWNED"), r
    assert all(project.read(f"out/{name}.txt") == "int x;\n" for name in HOSTILE)
