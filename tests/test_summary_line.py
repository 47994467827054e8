"""The summary line (docs/cli.md, "The summary line"): every field always there, in one
order, interrupted computations counted apart from failed ones (issue 34)."""

from __future__ import annotations

import re

from farmer.report.lastbuild import Counts, summary_line, tally

LINE = re.compile(r"farmer:( FAILED| INTERRUPTED)? ran (\d+), up to date (\d+), cached (\d+), failed (\d+), "
                  r"interrupted (\d+), skipped (\d+) in \d+\.\d\d s; critical path \d+\.\d\d s")


def test_tally_counts_a_computation_failed_by_an_interrupt_as_interrupted():
    counts = tally(9, [("ran", "never built"), ("failed", "interrupted"), ("failed", "exit 1"),
                       ("failed", "interrupted"), ("skipped", "build stopped"), ("cached", "never built"),
                       ("up-to-date", "up to date")])
    assert (counts.ran, counts.up_to_date, counts.cached, counts.failed, counts.interrupted,
            counts.skipped) == (1, 3, 1, 1, 2, 1)


def test_the_line_has_every_field_in_order():
    line = summary_line(Counts(3, 1, 0, 0, 4, interrupted=2), 1.5, 0.25, "interrupted")
    assert line == ("farmer: INTERRUPTED ran 3, up to date 1, cached 0, failed 0, interrupted 2, "
                    "skipped 4 in 1.50 s; critical path 0.25 s")
    assert LINE.fullmatch(summary_line(Counts(), 0, 0, "ok"))


def test_builds_print_it(project):
    project.farmfile("""\
        [task.good]
        outputs = ["good.txt"]
        cmd = "echo good > {outputs}"
        [task.bad]
        outputs = ["bad.txt"]
        cmd = "exit 2"
        """)
    r = project.build("-k")
    assert r.returncode == 1, r
    m = LINE.fullmatch(r.summary_line())
    assert m and m.group(1) == " FAILED" and m.groups()[1:] == ("1", "0", "0", "1", "0", "0"), r
    project.farmfile("""\
        [task.good]
        outputs = ["good.txt"]
        cmd = "echo good > {outputs}"
        """)
    assert project.build().returncode == 0
    r = project.build()  # the no-op path prints it too
    m = LINE.fullmatch(r.summary_line())
    assert m and m.group(1) is None and m.groups()[1:] == ("0", "1", "0", "0", "0", "0"), r
    assert r.summary()["up to date"] == 1
