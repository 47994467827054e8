"""Parallelism, -j, pools, cpus, -l, and the order the scheduler starts things. Real
processes where real concurrency or the command line is the point (parallel runs, pools,
the default -j, -l); the rest in-process with a fake executor on a simulated clock, each
command lasting 1 s of it (tests/fakes.py)."""

import os

import pytest


def sleepers(n, pool=None, cpus=None, secs=0.3):
    out = []
    for i in range(n):
        out.append(f"[task.s{i}]")
        out.append(f'outputs = ["out/s{i}.txt"]')
        if pool:
            out.append(f'pool = "{pool}"')
        if cpus:
            out.append(f"cpus = {cpus}")
        out.append(f'cmd = "sleep {secs} && echo {i} > {{outputs}}"')
        out.append("")
    return "\n".join(out)


def intervals(project):
    return sorted((t["start_s"], t["end_s"], t["id"]) for t in project.last_build()["tasks"]
                  if t["status"] == "ran")


def assert_serial(ivs):
    for (s1, e1, a), (s2, e2, b) in zip(ivs, ivs[1:]):
        assert s2 >= e1 - 0.02, f"{a} [{s1}, {e1}] overlaps {b} [{s2}, {e2}]"


def test_independent_tasks_run_in_parallel(project):
    project.farmfile(sleepers(2))
    r = project.build("-j", "2")
    assert r.returncode == 0, r
    (s1, e1, _), (s2, e2, _) = intervals(project)
    assert s2 < e1, intervals(project)


def test_j1_serialises(project):
    project.farmfile(sleepers(3, secs=0.1))
    r = project.build_in_process("-j", "1")
    assert r.returncode == 0, r
    assert project.last_build()["jobs"] == 1
    ivs = intervals(project)
    assert len(ivs) == 3
    assert_serial(ivs)


def test_pool_of_one_never_overlaps(project):
    project.farmfile("[pools]\none = 1\n\n" + sleepers(2, pool="one") + """
[task.free]
outputs = ["out/free.txt"]
cmd = "sleep 0.3 && echo free > {outputs}"
""")
    r = project.build("-j", "3")
    assert r.returncode == 0, r
    t = project.tasks()
    pooled = sorted((t[i]["start_s"], t[i]["end_s"], i) for i in ["out/s0.txt", "out/s1.txt"])
    assert_serial(pooled)
    # the task outside the pool overlapped with the pool's tasks
    free = t["out/free.txt"]
    assert free["start_s"] < pooled[0][1]


def test_pool_of_two(project):
    project.farmfile("[pools]\ntwo = 2\n\n" + sleepers(3, pool="two"))
    r = project.build("-j", "3")
    assert r.returncode == 0, r
    ivs = intervals(project)
    # at no instant do three run at once
    starts = [s for s, _, _ in ivs]
    for s in starts:
        running = sum(1 for (a, b, _) in ivs if a <= s < b - 0.02)
        assert running <= 2, ivs
    # but two did run at once
    assert ivs[1][0] < ivs[0][1]


def test_cpus_occupy_slots(project):
    project.farmfile(sleepers(1, cpus=2) + "\n" + sleepers(1).replace("s0", "t0"))
    r = project.build_in_process("-j", "2")
    assert r.returncode == 0, r
    assert_serial(intervals(project))


def test_cpus_more_than_jobs_is_clamped(project):
    project.farmfile(sleepers(2, cpus=8, secs=0.05))
    r = project.build_in_process("-j", "2")
    assert r.returncode == 0, r
    assert set(project.statuses().values()) == {"ran"}
    assert_serial(intervals(project))


def test_default_jobs(project):
    project.farmfile(sleepers(1, secs=0))
    assert project.build().returncode == 0
    import math
    assert project.last_build()["jobs"] == math.ceil(1.25 * os.cpu_count())


def test_load_limit_still_completes(project):
    project.farmfile(sleepers(3, secs=0.05))
    r = project.build("-l", "0.0001", "-j", "3")
    assert r.returncode == 0, r
    assert set(project.statuses().values()) == {"ran"}


def test_highest_expected_latency_starts_first(project):
    project.farmfile(
        """
        [task.small]
        outputs = ["out/small.txt"]
        cost = 1
        cmd = "echo > {outputs}"

        [task.big]
        outputs = ["out/big.txt"]
        cost = 3
        cmd = "echo > {outputs}"

        [task.mid]
        outputs = ["out/mid.txt"]
        cost = 2
        cmd = "echo > {outputs}"
        """
    )
    r = project.build_in_process("-j", "1")
    assert r.returncode == 0, r
    assert [i for _, _, i in intervals(project)] == ["out/big.txt", "out/mid.txt", "out/small.txt"]
    assert r.finished_ids() == ["out/big.txt", "out/mid.txt", "out/small.txt"], r


def test_critical_path_beats_bigger_single_task(project):
    project.farmfile(
        """
        [task.head]
        outputs = ["out/head.txt"]
        cost = 1
        cmd = "echo > {outputs}"

        [task.tail]
        inputs = ["out/head.txt"]
        outputs = ["out/tail.txt"]
        cost = 5
        cmd = "cp {inputs} {outputs}"

        [task.lone]
        outputs = ["out/lone.txt"]
        cost = 3
        cmd = "echo > {outputs}"
        """
    )
    r = project.build_in_process("-j", "1")
    assert r.returncode == 0, r
    assert r.finished_ids()[0] == "out/head.txt", r
    lb = project.last_build()
    assert lb["predicted_makespan_s"] == pytest.approx(9, abs=0.5)
