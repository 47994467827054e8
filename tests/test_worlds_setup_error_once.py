"""A world's setup error is printed once, then one line per task that could not run (issue
16 item 3); each task's log still holds the traceback."""


def test_setup_traceback_once_then_a_line_per_task(project):
    project.farmfile(
        """
        [world.base]
        setup = ["X = 1"]

        [world.data]
        parent = "base"
        setup = ["import json", "raise ValueError('no data file: data/' + 'table.json')"]

        [world.below]
        parent = "data"

        [task.analysis]
        foreach = {n = ["1", "2", "3", "4", "5", "6"]}
        world = "data"
        outputs = ["out/{n}.txt"]
        python = "-c pass"

        [task.deeper]
        world = "below"
        outputs = ["out/deeper.txt"]
        python = "-c pass"

        [task.fine]
        world = "base"
        outputs = ["out/fine.txt"]
        python = "-c 'open(\\"out/fine.txt\\", \\"w\\").write(str(X))'"
        """
    )
    r = project.build("-k")
    assert r.returncode == 1, r
    out = r.stdout + r.stderr
    assert out.count("Traceback (most recent call last)") == 1, r
    assert out.count("no data file: data/table.json") == 1, r
    failed = [l for l in out.splitlines() if l.startswith("FAILED: ")]
    assert len(failed) == 7, r
    assert all("world data setup failed" in l for l in failed), r
    assert project.read("out/fine.txt") == "1"
    for cid in ["out/1.txt", "out/deeper.txt"]:
        log = project.read(".farmer/logs/" + cid.replace("/", "%2F") + ".log")
        assert "no data file: data/table.json" in log, log
