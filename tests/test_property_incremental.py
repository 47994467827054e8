"""Property: incremental builds are correct and minimal (SPEC §2).

Random DAGs of cat-style tasks (some lossy: `sort -u`, `head -c 3`, `wc -l`, `tr -d x`) and
random sequences of edits, same-byte rewrites, touches and deletions of sources and outputs,
each step followed by a whole `farmer build -j 2`: in this process with the fake executor
(tests/fakes.py, which runs what it does not fake in /bin/sh), or, for the slow examples and
the glob case always run, by the command line. After every build:

* the files in out/ equal a from-scratch evaluation of the commands (pure Python model);
* the set of computations with status `ran` in last-build.json is exactly the set whose own
  output was deleted or edited, or some input's *content* changed since its last successful
  run (for an input made by another task: that task's output actually changed — early
  cutoff); a touch or a same-byte rewrite runs nothing;
* with a needed source deleted, the build stops with a graph error naming it (exit 2) and
  changes nothing.

Mutations happen immediately after each build, with no sleeps, on purpose: many keep the
size and inode (swap a<->b in place), some even put the old mtime back, so only the content
digest (and ctime) can tell; a file hashed moments after it was written must still be
re-checked next time (the stat cache's racy-entry rule).

`test_model_commands_match_shell` checks the pure-Python meaning of each command against
/bin/sh itself, so a failure of the main property is farmer's, not the model's.

The default test runs a modest number of examples; `-m slow` runs many more.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import Project, Result, run_farmer
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from prop_helpers import CONTENT, KINDS, Model, Scenario, apply_mutation, out_path, scenarios, src_path

from farmer.errors import UsageError


def in_process(root: str) -> tuple[Result, str | None]:
    """`farmer build -j 2` in this process, with the fake executor (tests/fakes.py): the
    result, and the message of the graph error that stopped it before it began, if any."""
    try:
        return Project(Path(root)).build_in_process("-j", "2"), None
    except UsageError as e:
        return Result(subprocess.CompletedProcess(["build"], 2, "", ""), ["build"], 0.0), str(e)


def by_the_command_line(root: str) -> tuple[Result, str | None]:
    """`farmer build -j 2` in a process of its own, its commands run for real."""
    r = run_farmer(root, "build", "-j", "2")
    return r, (r.stderr if r.returncode == 2 else None)


def run_scenario(scn: Scenario, build=in_process) -> None:
    note(f"Farmfile:\n{scn.farmfile()}")
    root = tempfile.mkdtemp(prefix="farmer-prop-")
    try:
        _run(scn, root, build)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(scn: Scenario, root: str, build) -> None:
    Path(root, "Farmfile").write_text(scn.farmfile())
    model = Model(scn.tasks, {i: None for i in range(len(scn.sources))})
    for i, text in enumerate(scn.sources):
        apply_mutation(root, model, ("edit_src", i, text))
    history: list[str] = [f"initial sources: {dict((src_path(i), t) for i, t in enumerate(scn.sources))}"]

    # Build 0 is the first (full) build; then one build per step.
    for n, mutations in enumerate(((),) + scn.steps):
        for m in mutations:
            desc = apply_mutation(root, model, m)
            if desc:
                history.append(f"  {desc}")
                event(m[0])
        history.append(f"build {n}")
        before_trace = dict(model.trace)
        expected_ran = model.build()
        _events(scn, model, before_trace, expected_ran)
        cp, error = build(root)
        where = "\n".join(history) + f"\n--- stdout ---\n{cp.stdout}--- stderr ---\n{cp.stderr}"

        if expected_ran is None:  # a needed source is missing: a graph error, nothing changes
            missing = model.missing_sources()
            assert cp.returncode == 2 and error is not None, where
            assert any(p in error for p in missing), f"{error}\n{where}"
            _check_outputs(root, model, where, scratch=False)
            continue

        assert cp.returncode == 0, where
        last = json.loads(Path(root, ".farmer/last-build.json").read_text())
        assert last["status"] == "ok", where
        statuses = {t["id"]: t["status"] for t in last["tasks"]}
        reasons = {t["id"]: t["reason"] for t in last["tasks"]}
        where += f"\n--- statuses ---\n{statuses}\n--- reasons ---\n{reasons}"
        assert set(statuses) == {out_path(k) for k in range(len(scn.tasks))}, where
        assert set(statuses.values()) <= {"ran", "up-to-date"}, where
        ran = {i for i, s in statuses.items() if s == "ran"}
        assert ran == expected_ran, (
            f"ran {sorted(ran)} but expected {sorted(expected_ran)}; "
            f"extra {sorted(ran - expected_ran)}, missing {sorted(expected_ran - ran)}\n{where}")
        for i, s in statuses.items():
            r = reasons[i]
            if s == "up-to-date":
                assert r == "up to date", where
            else:
                assert r == "never built" or r.startswith(("input ", "output ")), where
        if n == 0:
            assert set(reasons.values()) == {"never built"}, where
        _check_outputs(root, model, where, scratch=True)


def _events(scn: Scenario, model: Model, before: dict, ran: set[str] | None) -> None:
    if ran is None:
        event("build stopped: a needed source is missing")
        return
    for k, t in enumerate(scn.tasks):
        if k in before and out_path(k) not in ran and any(
                what == "task" and out_path(j) in ran for what, j in t.inputs):
            event("early cutoff: a producer ran, its consumer stayed up to date")
            return


def _check_outputs(root: str, model: Model, where: str, scratch: bool) -> None:
    """out/ holds what the model says; after a successful build, that is the from-scratch
    result."""
    expected = model.from_scratch() if scratch else None
    for k in range(len(model.tasks)):
        p = Path(root, out_path(k))
        actual = p.read_text() if p.exists() else None
        assert actual == model.out.get(k), f"{out_path(k)}: {actual!r} != model {model.out.get(k)!r}\n{where}"
        if expected is not None:
            assert actual == expected[k], (
                f"{out_path(k)}: {actual!r} != from-scratch {expected[k]!r}\n{where}")


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), ins=st.lists(CONTENT, min_size=1, max_size=3))
def test_model_commands_match_shell(kind, ins):
    """The model's meaning of each command is what the shell computes (a from-scratch run)."""
    cmd, meaning = KINDS[kind]
    with tempfile.TemporaryDirectory(prefix="farmer-prop-sh-") as d:
        paths = []
        for n, text in enumerate(ins):
            Path(d, f"i{n}").write_text(text)
            paths.append(f"i{n}")
        line = cmd.replace("{inputs}", " ".join(paths)).replace("{outputs}", "out")
        cp = subprocess.run(["/bin/sh", "-c", line], cwd=d, capture_output=True, text=True, timeout=30)
        assert cp.returncode == 0, cp.stderr
        assert Path(d, "out").read_text() == meaning(tuple(ins)), line


_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=25, **_COMMON)
@given(scn=scenarios())
def test_incremental_builds_match_scratch_and_are_minimal(scn):
    run_scenario(scn)


@settings(max_examples=200, **_COMMON)
@given(scn=scenarios(max_sources=5, max_tasks=8, max_steps=6))
def _many(scn):
    run_scenario(scn, build=by_the_command_line)


@pytest.mark.slow
def test_incremental_builds_match_scratch_and_are_minimal_many():
    """Many more (and bigger) examples, each build by the command line with its commands run
    for real; runs only when selected with `-m slow`."""
    _many()


# -- foreach next to a glob: sources that come and go ----------------------------------
#
# `each` makes gout/N.txt from every gsrc/N.txt (a foreach over sources), `twice` makes
# gtwice/N.txt from every gout/N.txt (a foreach over another task's outputs), and `joined`
# cats gout/*.txt (a glob over them). Sources are added, edited and deleted between
# builds: after each build gout/ and gtwice/ hold exactly what a clean build makes (no
# stale file left for the glob or the foreach to match), and what ran is exactly what a
# new or changed source makes run.

GLOB_FARMFILE = """\
[task.each]
foreach = "gsrc/{n}.txt"
inputs = ["gsrc/{n}.txt"]
outputs = ["gout/{n}.txt"]
cmd = "tr -d x < {inputs} > {outputs}"

[task.twice]
foreach = "gout/{n}.txt"
inputs = ["gout/{n}.txt"]
outputs = ["gtwice/{n}.txt"]
cmd = "cat {inputs} {inputs} > {outputs}"

[task.joined]
inputs = ["gout/*.txt"]
outputs = ["joined.txt"]
cmd = "cat {inputs} > {outputs}"
"""

NAMES = st.sampled_from(["a", "b", "c", "d"])
GLOB_STEP = st.lists(st.one_of(st.tuples(st.just("write"), NAMES, CONTENT),
                               st.tuples(st.just("delete"), NAMES)), min_size=1, max_size=3)


def _expected(sources: dict[str, str]) -> dict[str, str]:
    files = {}
    for n, text in sources.items():
        files[f"gout/{n}.txt"] = text.replace("x", "")
        files[f"gtwice/{n}.txt"] = 2 * text.replace("x", "")
    files["joined.txt"] = "".join(files[f"gout/{n}.txt"] for n in sorted(sources))
    return files


def _files_on_disk(root: str) -> dict[str, str]:
    found = {}
    for folder in ("gout", "gtwice"):
        for p in sorted(Path(root, folder).glob("*")) if Path(root, folder).is_dir() else ():
            found[f"{folder}/{p.name}"] = p.read_text()
    if Path(root, "joined.txt").exists():
        found["joined.txt"] = Path(root, "joined.txt").read_text()
    return found


def run_glob_scenario(first: dict[str, str], steps: list[list[tuple]], record=event, build=in_process) -> None:
    root = tempfile.mkdtemp(prefix="farmer-prop-glob-")
    try:
        Path(root, "Farmfile").write_text(GLOB_FARMFILE)
        Path(root, "gsrc").mkdir()
        sources: dict[str, str] = {}
        history = []
        before: dict[str, str] = {}
        before_src: dict[str, str] = {}
        for n, mutations in enumerate([[("write", k, v) for k, v in first.items()]] + steps):
            for m in mutations:
                path = Path(root, "gsrc", f"{m[1]}.txt")
                if m[0] == "write":
                    _write(str(path), m[2])
                    sources[m[1]] = m[2]
                    history.append(f"  write gsrc/{m[1]}.txt = {m[2]!r}")
                elif m[1] in sources:
                    path.unlink()
                    del sources[m[1]]
                    history.append(f"  delete gsrc/{m[1]}.txt")
                    record("a foreach-matched source deleted next to a glob")
            history.append(f"build {n}")
            cp, _ = build(root)
            where = "\n".join(history) + f"\n--- stdout ---\n{cp.stdout}--- stderr ---\n{cp.stderr}"
            assert cp.returncode == 0, where
            expected = _expected(sources)
            assert _files_on_disk(root) == expected, where
            last = json.loads(Path(root, ".farmer/last-build.json").read_text())
            ran = {t["id"] for t in last["tasks"] if t["status"] == "ran"}
            # A new or changed source runs its `each`; a changed gout file runs what reads it
            # (early cutoff: the same bytes run nothing more); another set of matches runs
            # the glob's task.
            should = {f"gout/{k}.txt" for k, text in sources.items() if before_src.get(k) != text}
            should |= {p for p, text in expected.items() if p.startswith("gtwice/")
                       and before.get("gout/" + p[len("gtwice/"):]) != expected["gout/" + p[len("gtwice/"):]]}
            if sorted(sources) != sorted(before_src) or any(
                    before.get(p) != text for p, text in expected.items() if p.startswith("gout/")):
                should.add("joined.txt")
            assert ran == should, f"ran {sorted(ran)}, expected {sorted(should)}\n{where}"
            before, before_src = expected, dict(sources)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


@settings(max_examples=8, **_COMMON)
@given(first=st.dictionaries(NAMES, CONTENT, min_size=1), steps=st.lists(GLOB_STEP, min_size=1, max_size=4))
def test_foreach_and_glob_over_sources_that_come_and_go(first, steps):
    run_glob_scenario(first, steps)


def test_deleting_a_foreach_source_next_to_a_glob():
    """The case the random test found ("stale file matched by foreach/glob"), always run, by
    the command line with its commands run for real."""
    run_glob_scenario({"a": "a\n", "b": "b\n"}, [[("delete", "b")], [("write", "b", "b\n")]],
                      record=lambda _: None, build=by_the_command_line)
