"""Property: incremental builds are correct and minimal (SPEC §2).

Random DAGs of cat-style tasks (some lossy: `sort -u`, `head -c 3`, `wc -l`, `tr -d x`) and
random sequences of edits, same-byte rewrites, touches and deletions of sources and outputs,
each step followed by a real `farmer build`. After every build:

* the files in out/ equal a from-scratch evaluation of the commands (pure Python model);
* the set of computations with status `ran` in last-build.json is exactly the set whose own
  output was deleted or edited, or some input's *content* changed since its last successful
  run (for an input made by another task: that task's output actually changed — early
  cutoff); a touch or a same-byte rewrite runs nothing;
* with a needed source deleted, the build stops with exit 2 and changes nothing.

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
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, note, settings

from hypothesis import strategies as st
from prop_helpers import (CONTENT, KINDS, Model, Scenario, apply_mutation, out_path, scenarios,
                          src_path)

REPO = Path(__file__).resolve().parent.parent


def _env() -> dict:
    env = dict(os.environ)
    pp = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + pp if pp else "")
    env.pop("FARMER_JOBS", None)
    return env


def farmer_build(root: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "farmer", "build", "-j", "2"], cwd=root, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60, env=_env())


def run_scenario(scn: Scenario) -> None:
    note(f"Farmfile:\n{scn.farmfile()}")
    root = tempfile.mkdtemp(prefix="farmer-prop-")
    try:
        _run(scn, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(scn: Scenario, root: str) -> None:
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
        cp = farmer_build(root)
        where = "\n".join(history) + f"\n--- stdout ---\n{cp.stdout}--- stderr ---\n{cp.stderr}"

        if expected_ran is None:  # a needed source is missing: a graph error, nothing changes
            missing = model.missing_sources()
            assert cp.returncode == 2, where
            assert any(p in cp.stderr for p in missing), where
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
    run_scenario(scn)


@pytest.mark.slow
def test_incremental_builds_match_scratch_and_are_minimal_many():
    """Many more (and bigger) examples; runs only when selected with `-m slow`."""
    _many()
