"""Reliability: interrupts (issue 5). SIGINT, SIGTERM and SIGHUP during a build.

Guarantees tested here: every process group farmer started is killed (no process with the
test's unique `sleep` marker is left in /proc), farmer exits within 2 s with 128 + the
signal number, last-build.json says `interrupted`, the killed computations are `failed` with
reason `interrupted`, the traces of finished computations are kept (the next build does not
rerun them), and nothing half-written is taken as up to date. A second (and third...) SIGINT
while farmer shuts down still ends it promptly and cleanly. Interrupts at random points of a
build (seeded) always leave a state from which the next build is correct.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time

import pytest
from conftest import HarnessCounts, pids_matching, wait_no_process, wait_no_process_in
from helpers import CRASH_FARMFILE, crash_expected_outputs, read_outputs, state_integrity


def parallel_farmfile(project, sleep: str) -> None:
    """Three sleepers and a half-writer run in parallel, once a quick task has finished."""
    project.write("src.txt", "source\n")
    project.farmfile(
        f"""
        [task.quick]
        inputs = ["src.txt"]
        outputs = ["out/quick.txt"]
        cmd = "cp {{inputs}} {{outputs}}"

        [task.sleepers]
        foreach = {{k = ["1", "2", "3"]}}
        inputs = ["out/quick.txt"]
        outputs = ["out/sleep-{{k}}.txt"]
        cmd = "touch started-{{k}}; if [ -e block ]; then {sleep}; fi; echo {{k}} > {{outputs}}"

        [task.half]
        inputs = ["out/quick.txt", "src.txt"]
        outputs = ["out/half.txt"]
        cmd = "echo first-half > {{outputs}}; touch started-half; if [ -e block ]; then {sleep}; fi; cat src.txt >> {{outputs}}"
        """
    )


def start_blocked(project, *args) -> subprocess.Popen:
    project.write("block", "")
    for name in ("started-1", "started-2", "started-3", "started-half"):
        if project.exists(name):
            project.remove(name)
    p = project.popen("build", "-j", "4", *args)
    for name in ("started-1", "started-2", "started-3", "started-half"):
        if not project.wait_for(name, timeout=20):
            p.kill()
            out, err = p.communicate(timeout=10)
            pytest.fail(f"{name} never appeared; rc={p.returncode}\n{out}\n{err}")
    return p


def stop(p: subprocess.Popen, sig: int, repeat: int = 1, gap: float = 0.0) -> tuple[str, str, float]:
    t0 = time.monotonic()
    for i in range(repeat):
        if p.poll() is not None:
            break
        p.send_signal(sig)
        if gap:
            time.sleep(gap)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"farmer did not stop within 10 s of the signal\n{out}\n{err}")
    return out, err, time.monotonic() - t0


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_interrupt_kills_everything_and_keeps_finished_work(project, sig, code):
    sleep = project.unique_sleep(30)
    parallel_farmfile(project, sleep)
    p = start_blocked(project)
    assert len(pids_matching(sleep)) >= 4  # each sleep, and the shell around it
    out, err, elapsed = stop(p, sig)
    assert p.returncode == code, (p.returncode, out, err)
    assert elapsed < 2.0, elapsed
    assert "Traceback" not in err and "Traceback" not in out, err
    assert wait_no_process(sleep, timeout=1) == [], "a process group survived the interrupt"
    assert wait_no_process_in(project, timeout=1) == []
    lb = project.last_build()
    assert lb["status"] == "interrupted"
    t = project.tasks()
    assert t["out/quick.txt"]["status"] == "ran"
    for out_id in ("out/sleep-1.txt", "out/sleep-2.txt", "out/sleep-3.txt", "out/half.txt"):
        assert (t[out_id]["status"], t[out_id]["reason"]) == ("failed", "interrupted"), t[out_id]
    assert not project.exists("out/half.txt"), "a half-written output was left behind"
    assert state_integrity(project.root) == "ok"

    project.remove("block")
    r = project.build("--explain")
    assert r.returncode == 0, r
    s = project.statuses()
    assert s["out/quick.txt"] == "up-to-date"  # its trace was kept
    assert all(s[i] == "ran" for i in s if i != "out/quick.txt"), s
    assert project.read("out/half.txt") == "first-half\nsource\n"


def test_half_written_output_with_an_older_trace(project):
    """The hard case: a computation that was built before is interrupted while rewriting its
    output, and its input is then put back as it was when the old trace was made. The old
    trace must not make the half-written (or deleted) output look up to date."""
    sleep = project.unique_sleep(30)
    parallel_farmfile(project, sleep)
    r = project.build("-j", "4")
    assert r.returncode == 0, r
    assert project.read("out/half.txt") == "first-half\nsource\n"
    project.write("src.txt", "changed\n")
    p = start_blocked(project)
    out, err, _ = stop(p, signal.SIGINT)
    assert p.returncode == 130, (out, err)
    project.write("src.txt", "source\n")  # as in the old trace
    project.remove("block")
    r = project.build("--explain")
    assert r.returncode == 0, r
    assert project.statuses()["out/half.txt"] == "ran", r
    assert project.read("out/half.txt") == "first-half\nsource\n"


@pytest.mark.parametrize("gap", [0.0, 0.005, 0.03], ids=["burst", "5ms", "30ms"])
def test_second_sigint_while_shutting_down(project, gap):
    sleep = project.unique_sleep(30)
    parallel_farmfile(project, sleep)
    p = start_blocked(project)
    out, err, elapsed = stop(p, signal.SIGINT, repeat=4, gap=gap)
    assert p.returncode == 130, (p.returncode, out, err)
    assert elapsed < 2.0, elapsed
    assert "Traceback" not in err and "Traceback" not in out, err
    assert wait_no_process(sleep, timeout=1) == []
    assert wait_no_process_in(project, timeout=1) == []
    lb = project.path(".farmer/last-build.json")
    if lb.exists():
        assert json.loads(lb.read_text())["status"] == "interrupted"
    assert state_integrity(project.root) == "ok"
    project.remove("block")
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("out/half.txt") == "first-half\nsource\n"


def test_sigterm_then_sigint_while_shutting_down(project):
    sleep = project.unique_sleep(30)
    parallel_farmfile(project, sleep)
    p = start_blocked(project)
    p.send_signal(signal.SIGTERM)
    p.send_signal(signal.SIGINT)
    out, err, elapsed = stop(p, signal.SIGINT)
    assert p.returncode in (130, 143), (p.returncode, out, err)
    assert elapsed < 2.0
    assert "Traceback" not in err, err
    assert wait_no_process(sleep, timeout=1) == []


def test_interrupt_while_planning_a_big_graph(project):
    """While farmer plans 20k computations (it holds the lock, nothing runs yet), SIGINT
    still ends it at once, cleanly, and releases the lock."""
    project.write("in.txt", "x\n")
    values = ", ".join(f'"{i}"' for i in range(20_000))
    project.farmfile(
        f"""
        [task.many]
        foreach = {{n = [{values}]}}
        inputs = ["in.txt"]
        outputs = ["out/{{n}}.txt"]
        cmd = "cp {{inputs}} {{outputs}}"
        """
    )
    p = project.popen("build")
    wait_for_lock(project, p)
    out, err, elapsed = stop(p, signal.SIGINT)
    assert p.returncode == 130, (p.returncode, out, err)
    assert elapsed < 2.0
    assert "Traceback" not in err, err
    assert wait_no_process_in(project, timeout=1) == []
    r = project.farmer("build", "-n")
    assert r.returncode == 0, r


def wait_for_lock(project, p: subprocess.Popen, timeout: float = 30) -> None:
    """Until farmer holds the project's lock (its startup, Python's included, is over)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        try:
            if project.read(".farmer/lock").strip() == str(p.pid):
                return
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        time.sleep(0.005)


def run_random_interrupts(project, seed: int, points: int, counts: HarnessCounts) -> None:
    rng = random.Random(seed)
    root = project.root
    sources = {f"s{i}.txt": f"{rng.choice(['ab', 'cd', 'ef'])}\n" * rng.randint(1, 3) for i in range(8)}
    for name, text in sources.items():
        project.write(f"src/{name}", text, dedent=False)
    project.farmfile(CRASH_FARMFILE)
    r = project.build("-j", "3")
    assert r.returncode == 0, r
    span = r.elapsed
    for k in range(points):
        name = rng.choice(sorted(sources))
        sources[name] += rng.choice(["gh\n", "ij\n"])
        project.write(f"src/{name}", sources[name], dedent=False)
        if rng.random() < 0.3:
            project.farmer("clean")
        sig = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
        lb_path = project.path(".farmer/last-build.json")
        lb_before = lb_path.read_bytes() if lb_path.exists() else None
        p = project.popen("build", "-j", "3")
        wait_for_lock(project, p)
        time.sleep(rng.uniform(0, span))
        out, err, elapsed = stop(p, sig)
        counts.add("interrupts", "signals at random points")
        assert p.returncode in (0, 128 + sig), (k, sig, p.returncode, out, err)
        assert elapsed < 2.0, (k, elapsed)
        assert "Traceback" not in err, err
        assert wait_no_process_in(project, timeout=1) == []
        if p.returncode == 128 + sig and lb_path.read_bytes() != lb_before:
            # (a signal before anything ran, while planning, leaves last-build.json as it was)
            assert project.last_build()["status"] == "interrupted", (k, sig, out, err)
        assert state_integrity(root) == "ok"
        r = project.build("-j", "3")
        assert r.returncode == 0, r
        assert read_outputs(root) == crash_expected_outputs(sources), k


def test_interrupts_at_random_points(project, harness_counts):
    run_random_interrupts(project, seed=3, points=3, counts=harness_counts)


@pytest.mark.slow
def test_interrupts_at_random_points_many(project, harness_counts):
    run_random_interrupts(project, seed=17, points=20, counts=harness_counts)


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_interrupt_kills_worlds(project, sig, code):
    """World processes (a parent world, its forked child world and the tasks forked from
    them) go with the build, and a finished world task keeps its trace."""
    secs = project.unique_sleep(30).split()[1]
    project.farmfile(
        f"""
        [world.base]
        setup = ["import os, time"]

        [world.child]
        parent = "base"
        setup = ["X = 1"]

        [task.done]
        world = "base"
        outputs = ["out/done.txt"]
        python = '''-c "open('out/done.txt', 'w').write('done')"'''

        [task.long]
        foreach = {{k = ["1", "2"]}}
        world = "child"
        inputs = ["out/done.txt"]
        outputs = ["out/long-{{k}}.txt"]
        python = '''-c "open('started-{{k}}', 'w').close(); time.sleep({secs}); open('out/long-{{k}}.txt', 'w').write('l')"'''
        """
    )
    p = project.popen("build", "-j", "3")
    try:
        for k in "12":
            assert project.wait_for(f"started-{k}", timeout=30), "world tasks never started"
        out, err, elapsed = stop(p, sig)
        assert p.returncode == code, (p.returncode, out, err)
        assert elapsed < 2.0, elapsed
        assert "Traceback" not in err, err
        assert wait_no_process_in(project, timeout=1) == [], "a world outlived the interrupted build"
        t = project.tasks()
        assert t["out/done.txt"]["status"] == "ran"
        assert all(t[f"out/long-{k}.txt"]["reason"] == "interrupted" for k in "12"), t
    finally:
        if p.poll() is None:
            p.kill()
    project.farmfile(project.read("Farmfile").replace(f"time.sleep({secs})", "time.sleep(0)"))
    r = project.build()
    assert r.returncode == 0, r
    assert project.statuses()["out/done.txt"] == "up-to-date"


def test_a_signal_while_stopping_is_stuck_stops_at_once():
    """If stopping does not end (farmer blocked somewhere), a signal more than half a second
    after the first raises out of whatever blocks; one sooner is absorbed by the graceful stop."""
    from types import SimpleNamespace

    from farmer.build.hooks import _STUCK_S, BuildHooks

    hooks = SimpleNamespace(signal=None, _signal_at=0.0)
    BuildHooks.on_signal(hooks, signal.SIGTERM, None)
    assert hooks.signal == signal.SIGTERM
    BuildHooks.on_signal(hooks, signal.SIGINT, None)  # at once: absorbed
    assert hooks.signal == signal.SIGTERM
    hooks._signal_at -= _STUCK_S + 0.1
    with pytest.raises(KeyboardInterrupt) as stop:
        BuildHooks.on_signal(hooks, signal.SIGHUP, None)
    assert stop.value.signum == signal.SIGHUP
