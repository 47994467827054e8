"""First-build predictions end to end (issue 16 item 11): "no history yet" instead of a
made-up number, and a new task guessed from what the project measured."""

import re


def test_a_fresh_project_says_no_history_yet(project):
    project.farmfile(
        """
        [task.steps]
        foreach = {n = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]}
        outputs = ["out/{n}.txt"]
        cmd = "echo {n} > {outputs}"
        """
    )
    r = project.farmer("plan", "--simulate")
    assert r.returncode == 0, r
    assert "no history yet" in r.stdout and "predicted makespan" in r.stdout, r
    assert not re.search(r"predicted makespan +\d", r.stdout), r
    assert "       ? s  steps out/1.txt" in r.stdout, r
    r = project.build("-n")
    assert r.returncode == 0 and "no history yet" in r.stdout, r
    assert project.build().returncode == 0
    project.remove("out/3.txt")
    r = project.farmer("plan", "--simulate")
    assert re.search(r"predicted makespan +\d+\.\d\d s", r.stdout), r


def test_a_new_task_is_guessed_from_the_projects_measured_computations(project):
    project.farmfile(
        """
        [task.slow]
        foreach = {n = ["1", "2", "3"]}
        outputs = ["out/{n}.txt"]
        cmd = "sleep 0.3; echo {n} > {outputs}"
        """
    )
    assert project.build().returncode == 0
    project.write("Farmfile", project.read("Farmfile") + """
[task.more]
foreach = {m = ["a", "b"]}
outputs = ["more/{m}.txt"]
cmd = "sleep 0.3; echo {m} > {outputs}"
""", dedent=False)
    r = project.farmer("plan", "--json")
    assert r.returncode == 0, r
    import json
    guesses = {t["id"]: t["estimate_s"] for t in json.loads(r.stdout)["to_run"]}
    assert set(guesses) == {"more/a.txt", "more/b.txt"}
    for seconds in guesses.values():  # `sleep`'s median, not the 1 s made up before
        assert 0.25 < seconds < 0.9, guesses
