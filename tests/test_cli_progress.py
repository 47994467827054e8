"""Plain lines (SPEC section 3) are printed as each computation finishes, not at the end:
a line is on stdout while the next computation still runs."""

from __future__ import annotations

import select
import time

FARMFILE = """
[task.first]
outputs = ["a.txt"]
cmd = "echo a > a.txt"

[task.second]
inputs = ["a.txt"]
outputs = ["b.txt"]
cmd = "for i in $(seq 300); do [ -e go ] && break; sleep 0.1; done; [ -e go ] && cp a.txt b.txt"
"""


def test_line_is_printed_while_the_next_computation_runs(project):
    project.farmfile(FARMFILE)
    p = project.popen("build", "-j", "1")
    seen, deadline = "", time.monotonic() + 25
    while "[1/2] first a.txt\n" not in seen and time.monotonic() < deadline:
        if select.select([p.stdout], [], [], 0.5)[0]:
            line = p.stdout.readline()
            if not line:
                break
            seen += line
    assert seen.startswith("[1/2] first a.txt\n"), seen  # second still waits for `go`
    assert p.poll() is None
    project.write("go", "")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, (out, err)
    assert out.startswith("[2/2] second b.txt\n"), out
