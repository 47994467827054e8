"""Finding the Farmfile (SPEC §3): without -f, the current directory or the nearest parent
that has one, as git, cargo and just do; the error names where farmer looked."""

from conftest import assert_error


def write_project(project):
    project.farmfile(
        """
        [task.copy]
        inputs = ["src/a.txt"]
        outputs = ["out/a.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.write("src/a.txt", "A\n")
    project.path("src/deep/er").mkdir(parents=True)


def test_build_from_a_subdirectory_uses_the_nearest_farmfile(project):
    write_project(project)
    for args in (["build"], ["build", "-k"], ["build", "-n"], ["plan"], ["query", "out/a.txt"]):
        r = project.farmer(*args, cwd=project.path("src/deep/er"))
        assert r.returncode == 0, r
    r = project.build(cwd=project.path("src/deep/er"))
    assert r.returncode == 0, r
    assert project.read("out/a.txt") == "A\n"
    assert project.exists(".farmer/last-build.json") and not project.exists("src/deep/er/.farmer")
    # targets are paths relative to the project root, wherever farmer starts
    r = project.build("out/a.txt", cwd=project.path("src"))
    assert r.returncode == 0, r
    assert r.summary()["up to date"] == 1, r


def test_dash_C_into_a_subdirectory_finds_the_farmfile_above(project):
    write_project(project)
    r = project.build("-C", "src/deep", cwd=project.root)
    assert r.returncode == 0, r
    assert project.read("out/a.txt") == "A\n"


def test_no_farmfile_names_where_it_looked(tmp_path, project):
    empty = tmp_path / "empty" / "sub"
    empty.mkdir(parents=True)
    for args in (["build"], ["plan"]):
        msg = assert_error(project.farmer(*args, cwd=empty), str(empty), "-f FILE")
        assert "Farmfile.example" not in msg


def test_dash_f_is_not_searched_upwards(project):
    write_project(project)
    assert_error(project.build("-f", "Farmfile", cwd=project.path("src")), "no such Farmfile", "-f")
