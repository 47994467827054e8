"""The reports' pure parts: slots worked out from start and end times, where a
compiler's message points, GitHub's escaping, log tails."""

from __future__ import annotations

import pytest

from farmer.report.pages import github, model


def entries(*spans):
    return [model.Entry({"id": f"c{k}", "task": "t", "status": "ran", "start_s": s, "end_s": e})
            for k, (s, e) in enumerate(spans)]


def test_lanes_reuse_the_lowest_free_slot():
    es = entries((0, 2), (0, 1), (1, 3), (2, 4), (0.5, 0.6))
    assert model.assign_lanes(es) == 3
    assert [e.lane for e in es] == [1, 0, 0, 1, 2]  # (0, 1) first: it ends first


def test_lanes_leave_untimed_entries_alone():
    es = entries((0, 1)) + [model.Entry({"id": "u", "status": "up-to-date", "start_s": None, "end_s": None})]
    assert model.assign_lanes(es) == 1
    assert es[1].lane is None and not es[1].timed


def test_location_of_compiler_messages(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.c").write_text("x\n")
    out = "make: something\nsrc/a.c:12:7: error: expected ';'\nsrc/a.c:1:1: note: other\n"
    assert github.location(out) == ("src/a.c", 12, 7)
    assert github.location("src/a.c:3: warning: no column\n") == ("src/a.c", 3, None)
    assert github.location(f"{tmp_path}/src/a.c:4:2: error\n") == ("src/a.c", 4, 2)  # absolute, inside
    assert github.location("/usr/include/stdio.h:4:2: error\n") is None  # outside the project
    assert github.location("missing.c:4:2: error\n") is None  # no such file
    assert github.location("Traceback: 12:30:01 at noon\n") is None


def test_workflow_command_escaping(tmp_path):
    build = model.LastBuild(str(tmp_path), {}, [])
    e = model.Entry({"id": "a,b:c", "task": "t", "status": "failed", "reason": "exit 1"})
    line = github.annotation(build, e)
    assert line == "::error title=farmer%3A t a%2Cb%3Ac failed::t a,b:c: exit 1"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a,b:c.log").write_text("100% done\r\nnext\n")
    assert github.annotation(build, e).endswith("::t a,b:c: exit 1%0A100%25 done%0Anext")


def test_log_tail_keeps_the_last_lines_whole(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {k}\n" for k in range(100_000)))
    tail = model.log_tail(str(log)).splitlines()
    assert len(tail) == model.TAIL_LINES and tail[-1] == "line 99999" and tail[0] == f"line {100_000 - model.TAIL_LINES}"
    assert model.log_tail(str(tmp_path / "none.log")) == ""


def test_seconds():
    assert [model.seconds(x) for x in (None, 0.0123, 3.14159, 250.4, True)] == ["–", "0.012 s", "3.14 s", "250 s", "–"]


@pytest.mark.parametrize("count", [0, 1, 999, 1000, 1001, 2503])
def test_last_build_tasks_rendered_in_parts_are_the_whole_rendered(count):
    """last-build.json's tasks are made a thousand at a time (memory at 100k), byte for byte
    what rendering them all at once gives."""
    from farmer.graph.graph import Computation
    from farmer.report import console as report
    from farmer.run.scheduler import Settled

    comps = [Computation(i, f"out/é{i}.txt", 't"x', outputs=[f"out/{i}"]) for i in range(count)]
    settled = {i: Settled("ran", "never built") for i in range(0, count, 3)}
    selected = list(range(count))
    whole = report.last_build_tasks(comps, selected, settled, {})
    assert b"".join(report.last_build_json(comps, selected, settled, {})) == \
        report.compact_json(whole).encode()
    assert report.last_build_json_each(comps, selected, settled, {}) == report.compact_json_each(whole)


def test_a_remote_error_that_failed_the_build_shows_in_every_report(tmp_path):
    import xml.etree.ElementTree as ET

    from farmer.report.pages import html, junit, markdown

    said = "remote cache unavailable (UNAVAILABLE: <down> & out) (--remote-strict)"
    head = {"status": "failed", "remote_error": said, "started_at": "2026-12-07T22:00:00Z", "wall_s": 1.0}
    build = model.LastBuild(str(tmp_path), head, entries((0, 1)))
    root = ET.fromstring(junit.render(build))
    assert root.get("failures") == "1" and root.get("tests") == "2"
    failure = root.find("testsuite[@name='remote']/testcase/failure")
    assert failure is not None and failure.get("message") == said
    assert ("**Remote error:** remote cache unavailable (UNAVAILABLE: &lt;down&gt; &amp; out) (--remote-strict)"
            in markdown.render(build))
    assert "The build failed on a remote error: remote cache unavailable (UNAVAILABLE: &lt;down&gt; &amp; out)" \
        in html.render(build)
    fine = model.LastBuild(str(tmp_path), {"status": "ok"}, entries((0, 1)))
    assert "remote" not in junit.render(fine) and "Remote error" not in markdown.render(fine)
