"""`farmer report` (SPEC section 6): the markdown summary, JUnit XML, the HTML page's
contents, GitHub Actions annotations and job summary. The page in a real browser:
tests/test_report_browser.py."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

# A compiler-like failure: gcc's `path:line:col: error:` on stderr, then exit 1.
FARMFILE = """
[task.gen]
foreach = {n = ["1", "2", "3"]}
inputs = ["src/{n}.txt"]
outputs = ["out/{n}.txt"]
cmd = "cp {inputs} {outputs}"

[task.sum]
inputs = ["@gen"]
outputs = ["out/sum.txt"]
cmd = "cat {inputs} > {outputs}"

[task.compile]
inputs = ["src/bad.c"]
outputs = ["out/bad.o"]
cmd = "echo 'compiling bad.c'; echo 'src/bad.c:3:5: error: expected ; before }}' >&2; exit 1"

[task.link]
inputs = ["out/bad.o"]
outputs = ["out/app"]
cmd = "cp {inputs} {outputs}"
"""


@pytest.fixture
def failed(project):
    """A -k build (in-process, with the fake executor): gen and sum ran, compile failed, link
    skipped."""
    project.farmfile(FARMFILE)
    for n in "123":
        project.write(f"src/{n}.txt", f"{n}\n")
    project.write("src/bad.c", "int main() {\n  return 0\n    }\n")
    r = project.build_in_process("-k")
    assert r.returncode == 1, r
    return project


def test_markdown_summary(failed):
    r = failed.farmer("report", "--markdown")
    assert r.returncode == 0, r
    md = r.stdout
    assert md.startswith("## farmer build FAILED"), md
    # counts: ran 4 (3 gen, sum), failed 1, skipped 1
    assert re.search(r"^\| 4 \| 0 \| 0 \| 1 \| 1 \| [\d.]+ s \|", md, re.M), md
    assert "### Failures (1)" in md and "compile out/bad.o</code>: exit 1" in md, md
    assert "src/bad.c:3:5: error: expected ; before }" in md, md  # the log's tail
    assert "### Slowest steps" in md and "`out/sum.txt`" in md, md
    assert "**Critical path:**" in md, md
    assert failed.farmer("report").stdout == md  # the default


def test_junit_one_case_per_computation_that_ran_or_failed(failed):
    r = failed.farmer("report", "--junit", "junit.xml")
    assert r.returncode == 0, r
    root = ET.parse(failed.path("junit.xml")).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "5" and root.get("failures") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"out/1.txt", "out/2.txt", "out/3.txt", "out/sum.txt", "out/bad.o"}
    assert cases["out/sum.txt"].get("classname") == "sum"
    assert float(cases["out/sum.txt"].get("time")) >= 0
    failure = cases["out/bad.o"].find("failure")
    assert failure is not None and failure.get("message") == "exit 1", ET.tostring(cases["out/bad.o"])
    assert "src/bad.c:3:5: error" in failure.text and "compiling bad.c" in failure.text
    assert all(c.find("failure") is None for n, c in cases.items() if n != "out/bad.o")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["gen"].get("tests") == "3" and suites["compile"].get("failures") == "1"


def test_junit_escapes_what_xml_cannot_hold(project):
    project.farmfile('[task.t]\noutputs = ["out/a&<b>.txt"]\n'
                     'cmd = "printf \'bell\\\\007 & <tag> \\\\033[31mred\\\\n\'; exit 3"\n')
    assert project.build_in_process().returncode == 1
    r = project.farmer("report", "--junit", "j.xml")
    assert r.returncode == 0, r
    case = ET.parse(project.path("j.xml")).getroot().find(".//testcase")
    assert case.get("name") == "out/a&<b>.txt"
    text = case.find("failure").text
    assert "bell\\x07 & <tag> \\x1b[31mred" in text, text


def test_html_page_is_self_contained_and_names_everything(failed):
    r = failed.farmer("report", "--html", "report.html")
    assert r.returncode == 0, r
    page = failed.read("report.html")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page fetches something"
    assert "<link" not in page and "@import" not in page
    assert "Failures (1)" in page and "src/bad.c:3:5: error: expected ; before }" in page
    assert "Critical path (" in page
    data = json.loads(re.search(r'<script type="application/json" id="farmer-data">(.*?)</script>', page, re.S)[1])
    rows = {c[0]: c for c in data["computations"]}
    assert set(rows) == {"out/1.txt", "out/2.txt", "out/3.txt", "out/sum.txt", "out/bad.o", "out/app"}
    assert rows["out/app"][2] == "skipped" and rows["out/app"][4] is None  # no times
    assert rows["out/sum.txt"][8] == 1  # on the critical path: the gen it needs, then it
    lanes = {c[6] for c in rows.values() if c[6] is not None}
    assert lanes and min(lanes) == 0 and max(lanes) < data["jobs"]


def test_prediction_beside_the_real_times(project):
    """The second build's prediction comes from the first one's measured times: the page
    and the summary show both for what ran."""
    project.farmfile('[task.t]\ninputs = ["in.txt"]\noutputs = ["out.txt"]\ncmd = "sleep 0.2; cp in.txt out.txt"\n')
    project.write("in.txt", "1\n")
    assert project.build().returncode == 0
    project.write("in.txt", "2\n")
    assert project.build().returncode == 0
    md = project.farmer("report").stdout
    row = next(l for l in md.splitlines() if l.startswith("| `out.txt`"))
    predicted = float(row.split("|")[-2].strip().split()[0])
    assert 0.15 < predicted < 2, row  # the first build's 0.2 s, not the 1 s default
    page = project.farmer("report", "--html", "r.html") and project.read("r.html")
    assert "Prediction and real times" in page and "predicted to take" in page


def test_cache_and_executor_fields_are_shown_when_present(project):
    """The output cache's fields (SPEC section 5) as a cache build writes them."""
    project.farmfile('[task.t]\noutputs = ["a.txt"]\ncmd = "echo a > a.txt"\n')
    assert project.build_in_process().returncode == 0
    doc = project.last_build()
    doc["tasks"] = [dict(doc["tasks"][0], status="cached", reason="never built", cache="remote", executor=None),
                    dict(doc["tasks"][0], id="b.txt", outputs=["b.txt"], cache="local", status="cached"),
                    dict(doc["tasks"][0], id="c.txt", outputs=["c.txt"], executor="remote")]
    project.write(".farmer/last-build.json", json.dumps(doc))
    page = project.farmer("report", "--html", "r.html") and project.read("r.html")
    assert "1 local, 1 remote" in page
    data = json.loads(re.search(r'id="farmer-data">(.*?)</script>', page, re.S)[1])
    assert {c[0]: c[9] for c in data["computations"]} == {"a.txt": "remote", "b.txt": "local", "c.txt": "remote"}
    md = project.farmer("report").stdout
    assert re.search(r"^\| 1 \| 0 \| 2 \| 0 \| 0 \|", md, re.M), md


def test_report_of_a_build_restored_from_the_output_cache(project, tmp_path):
    env = {"FARMER_CACHE": "1", "FARMER_CACHE_DIR": str(tmp_path / "cache")}
    project.farmfile(FARMFILE.split("[task.compile]")[0])
    for n in "123":
        project.write(f"src/{n}.txt", f"{n}\n")
    assert project.build(env=env).returncode == 0
    assert project.farmer("clean").returncode == 0
    r = project.build(env=env)
    assert r.returncode == 0 and r.summary()["cached"] == 4, r
    page = project.farmer("report", "--html", "r.html") and project.read("r.html")
    assert "4 local, 0 remote" in page
    md = project.farmer("report").stdout
    assert re.search(r"^\| 0 \| 0 \| 4 \| 0 \| 0 \|", md, re.M), md
    assert "Critical path" not in md, md  # nothing ran: a restore is no step of a chain
    r = project.farmer("report", "--junit", "j.xml")
    assert ET.parse(project.path("j.xml")).getroot().get("tests") == "0"


def test_without_a_last_build_one_line_error(project):
    project.farmfile('[task.t]\noutputs = ["a.txt"]\ncmd = "echo a > a.txt"\n')
    r = project.farmer("report", "--html", "r.html")
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1 and "last-build.json" in r.stderr and "farmer build" in r.stderr, r
    assert not project.exists("r.html")
    project.write(".farmer/last-build.json", '{"tasks": [')
    r = project.farmer("report")
    assert r.returncode == 2 and "cannot be read" in r.stderr and "Traceback" not in r.stderr, r


def test_report_after_the_farmfile_broke(failed):
    """The last build is still reported; what needs the graph is left out, and said so."""
    failed.write("Farmfile", "[task.broken\n")
    r = failed.farmer("report")
    assert r.returncode == 0, r
    assert "## farmer build FAILED" in r.stdout and "no critical path nor predictions" in r.stdout, r


def test_report_changes_nothing_in_the_project(failed):
    """A report reads: .farmer/ (state, logs, last-build.json) is left as it was."""
    def snapshot():
        return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in failed.path(".farmer").rglob("*") if p.is_file()}

    before = snapshot()
    r = failed.farmer("report", "--html", "sub/r.html", "--junit", "j.xml", "--markdown")
    assert r.returncode == 0, r
    assert failed.exists("sub/r.html") and failed.exists("j.xml") and "## farmer build" in r.stdout
    assert snapshot() == before


# -- GitHub Actions -------------------------------------------------------------------

def test_github_actions_annotations_and_step_summary(failed, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    failed.write("src/bad.c", "int main() {\n  return 1\n    }\n")  # runs again
    r = failed.build("-k", env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 1, r
    errors = [l for l in r.stdout.splitlines() if l.startswith("::error")]
    assert len(errors) == 1, r
    assert errors[0].startswith("::error file=src/bad.c,line=3,col=5,title=farmer%3A compile out/bad.o failed::"), errors
    assert "compile out/bad.o: exit 1%0A" in errors[0] and "expected ; before }" in errors[0]
    text = summary.read_text()
    assert text.startswith("earlier step\n## farmer build FAILED"), text  # appended
    assert "### Failures (1)" in text
    assert "**Critical path:** `out/bad.o`" in text, text  # what ran: the compile alone


def test_github_annotation_without_a_location(project):
    project.farmfile('[task.t]\noutputs = ["a.txt"]\ncmd = "echo no location here; exit 4"\n')
    r = project.build(env={"GITHUB_ACTIONS": "true"})
    assert r.returncode == 1
    errors = [l for l in r.stdout.splitlines() if l.startswith("::error")]
    assert errors == ["::error title=farmer%3A t a.txt failed::t a.txt: exit 4%0Ano location here"], r


def test_no_annotations_outside_actions_nor_on_success(failed, tmp_path):
    summary = tmp_path / "summary.md"
    r = failed.build("-k", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert "::error" not in r.output and not summary.exists(), r
    failed.write("Farmfile", FARMFILE.replace("exit 1", "touch out/bad.o"))
    r = failed.build(env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 0 and "::error" not in r.output, r
    assert summary.read_text().startswith("## farmer build succeeded")
    r = failed.build(env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})  # a no-op
    assert r.returncode == 0 and summary.read_text().count("## farmer build succeeded") == 2, r
