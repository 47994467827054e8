"""SPEC §2: a failed computation's declared outputs move to .farmer/failed/PATH (replacing
what an earlier failure left there), and the failure message names where (issue 16 item 2):
a failing test's report is not lost."""


def test_a_failing_test_keeps_its_report(project):
    project.farmfile(
        """
        [task.test]
        outputs = ["build/test.log", "build/junit.xml"]
        cmd = "echo 'test 2 FAILED: expected 3' > build/test.log; exit 1"
        """
    )
    r = project.build()
    assert r.returncode == 1, r
    assert not project.exists("build/test.log") and not project.exists("build/junit.xml")
    assert project.read(".farmer/failed/build/test.log") == "test 2 FAILED: expected 3\n"
    assert "  output kept: .farmer/failed/build/test.log" in r.stdout, r
    assert "junit.xml" not in r.stdout.split("output kept")[-1], r  # never written: not named
    project.farmfile(project.read("Farmfile").replace("expected 3", "expected 4"))
    r = project.build()
    assert r.returncode == 1, r
    assert project.read(".farmer/failed/build/test.log") == "test 2 FAILED: expected 4\n"
    # the kept copy is no output: the next build still reruns the failed test
    assert project.build().summary()["failed"] == 1


def test_kept_outputs_match_no_glob_and_no_foreach(project):
    project.farmfile(
        """
        [task.gen]
        outputs = ["out/a.txt"]
        cmd = "echo a > {outputs}; exit 1"

        [task.count]
        foreach = "{path}.txt"
        outputs = ["counted/{path}"]
        cmd = "touch {outputs}"
        """
    )
    project.write("x.txt", "x")
    assert project.build_in_process("-k").returncode == 1
    assert project.exists(".farmer/failed/out/a.txt")
    assert set(project.statuses()) == {"out/a.txt", "counted/x", "counted/out/a"}
