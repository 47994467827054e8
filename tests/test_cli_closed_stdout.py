"""A closed stdout does not stop a build (issue 16 item 9): `farmer build | head -1` drops
what follows, finishes every computation, writes last-build.json and exits with the build's
own status."""

import subprocess

import pytest

FARMFILE = """
[task.t]
foreach = {n = ["1", "2", "3", "4", "5", "6"]}
outputs = ["out/{n}.txt"]
cmd = "sleep 0.2; echo {n} > {outputs}; echo noise from {n}"

[task.last]
inputs = ["@t"]
outputs = ["out/all.txt"]
cmd = "cat {inputs} > {outputs} EXIT"
"""


@pytest.mark.parametrize("failing, code", [(False, 0), (True, 1)])
@pytest.mark.parametrize("both", [False, True])  # 2>&1 | head -1: stderr's reader gone too
def test_build_through_a_pipe_closed_after_one_line(project, failing, code, both):
    project.farmfile(FARMFILE.replace("EXIT", "; exit 1" if failing else ""))
    p = project.popen("build", "-j2", stderr=subprocess.STDOUT if both else subprocess.PIPE, text=False)
    first = p.stdout.readline()
    p.stdout.close()  # as head -1 does
    err = b"" if both else p.stderr.read()
    assert p.wait(timeout=60) == code, (first, err)
    assert first.startswith(b"[1/7] "), first
    assert b"Broken pipe" not in err and b"Traceback" not in err, err
    for n in range(1, 7):
        assert project.read(f"out/{n}.txt") == f"{n}\n"
    tasks = project.statuses()
    assert len(tasks) == 7 and tasks["out/all.txt"] == ("failed" if failing else "ran")
