"""The HTML report in a real headless Chromium (Debian's `chromium`; .ci/run installs it):
the page loads without console errors and fetches nothing, the rendered DOM shows the
computations, the timeline canvas is drawn, a screenshot is not blank; and a 10k-computation
build's page stays small."""

from __future__ import annotations

import json
import os
import shutil

import chromium
import pytest
from conftest import REPO

BINARY = chromium.find()
# CI installs it (.ci/run): there a missing browser fails the tests instead of skipping them.
pytestmark = pytest.mark.skipif(BINARY is None and os.environ.get("CI") != "true",
                                reason="needs chromium (apt-get install chromium)")

# non-white pixels of a canvas: what was drawn on it
DRAWN = """(function (id) {
  var c = document.getElementById(id); if (!c) return -1;
  var d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, n = 0;
  for (var i = 0; i < d.length; i += 4) if (d[i + 3] && (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240)) n++;
  return n; })"""


@pytest.fixture
def browser():
    assert BINARY is not None, "CI=true and no chromium: .ci/run installs it"
    b = chromium.Browser(BINARY)
    yield b
    b.close()


@pytest.fixture
def example(project):
    """The example project of the README, built from scratch with 3 slots."""
    shutil.copy(REPO / "Farmfile.example", project.path("Farmfile"))
    shutil.copytree(REPO / "example", project.path("example"))
    r = project.build("-j", "3")
    assert r.returncode == 0, r
    return project


def test_example_report_in_chromium(example, browser):
    r = example.farmer("report", "--html", "report.html")
    assert r.returncode == 0, r
    page = browser.load(str(example.path("report.html")), {
        "timeline": DRAWN + '("timeline")', "parallelism": DRAWN + '("parallelism")',
        "rows": 'document.querySelectorAll("#all-body tr").length'})
    assert page.errors == [], page.errors
    assert page.requests == [example.path("report.html").as_uri()], page.requests  # nothing fetched
    ids = [t["id"] for t in example.last_build()["tasks"]]
    assert len(ids) >= 6 and page.values["rows"] == len(ids)
    for cid in ids:
        assert cid in page.text, cid
    assert f"{len(ids)} of {len(ids)} computations" in page.text and "Critical path (" in page.text
    assert page.values["timeline"] > 2000 and page.values["parallelism"] > 2000, page.values
    width, height, colors = chromium.png_colors(page.screenshot)
    assert width == 1280 and height > 900 and colors > 500, (width, height, colors)


def test_failure_and_filter_in_chromium(project, browser):
    project.farmfile('[task.ok]\noutputs = ["a.txt"]\ncmd = "echo a > a.txt"\n'
                     '[task.bad]\noutputs = ["b.txt"]\ncmd = "echo the reason it broke; exit 7"\n')
    assert project.build("-k").returncode == 1
    assert project.farmer("report", "--html", "r.html").returncode == 0
    page = browser.load(str(project.path("r.html")), {
        "filtered": """(function () { var f = document.getElementById("all-filter");
            f.value = "b.txt"; f.dispatchEvent(new Event("input"));
            return document.getElementById("all-body").innerText; })()"""})
    assert page.errors == [], page.errors
    assert "Failures (1)" in page.text and "the reason it broke" in page.text and "exit 7" in page.text
    assert "b.txt" in page.values["filtered"] and "a.txt" not in page.values["filtered"], page.values


def test_ten_thousand_computations_stay_a_small_page(project, browser):
    """A last-build.json of 10k computations on 4 slots: the page draws them on canvases
    and pages the table; its DOM stays a few hundred elements."""
    tasks = []
    for k in range(10_000):
        start = (k // 4) * 0.01
        tasks.append({"id": f"out/{k}.o", "task": f"t{k % 40}", "outputs": [f"out/{k}.o"], "status": "ran",
                      "reason": "never built", "world": None, "start_s": start, "end_s": start + 0.009,
                      "duration_s": 0.009, "cpu_s": 0.008, "max_rss_kb": 2048, "exit_code": 0})
    doc = {"farmer_version": "0.1.0", "started_at": "2026-12-01T10:00:00Z", "jobs": 4, "status": "ok",
           "wall_s": 25.0, "critical_path_s": 0.009, "predicted_makespan_s": 30.0, "tasks": tasks}
    project.write(".farmer/last-build.json", json.dumps(doc))
    r = project.farmer("report", "--html", "big.html")  # no Farmfile: no critical path, said so
    assert r.returncode == 0, r
    page = browser.load(str(project.path("big.html")), {
        "elements": 'document.getElementsByTagName("*").length', "timeline": DRAWN + '("timeline")'})
    assert page.errors == [], page.errors
    assert "100 of 10000" not in page.text and "10000 of 10000 computations; page 1 of 100" in page.text
    assert page.values["elements"] < 3000, page.values
    assert "10 other tasks" in page.text  # the per-task table: the 30 with the most time, then the rest
    assert page.values["timeline"] > 10_000, page.values
