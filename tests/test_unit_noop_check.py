"""The no-op proof's stat check shared among forked children (farmer/statcheck.py,
`changed_in_parallel`): it finds exactly what a check in one process finds, a child that
cannot be started or fails leaves its part to the parent, and no child outlives it."""

import os
import time

import pytest

from farmer import noop, statcheck


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """300 files with their stat data as a proof records it; three CPUs and a low threshold,
    so the check forks two children even for so few files."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(statcheck, "_FILES_PER_PROCESS", 50)
    monkeypatch.setattr(statcheck.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    paths = []
    for n in range(300):
        path = f"d{n % 7}/f{n}.txt"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"{n}\n")
        paths.append(path)
    stats = statcheck.table(statcheck.stat_key(p) for p in paths)
    return paths, stats


def change_some(paths):
    """A file in each third changes: content and size, removed, replaced by another inode."""
    with open(paths[10], "a") as f:
        f.write("more\n")
    os.unlink(paths[150])
    os.rename(paths[298], paths[299])  # 299 is now another file, 298 is gone
    return {10, 150, 298, 299}


def test_children_find_what_one_process_finds(tree):
    paths, stats = tree
    assert statcheck.changed_in_parallel(paths, stats) == set()
    expected = change_some(paths)
    assert set(statcheck.changed(paths, stats, 0, len(paths))) == expected
    assert statcheck.changed_in_parallel(paths, stats) == expected


def test_too_few_files_or_cpus_are_checked_here(tree, monkeypatch):
    paths, stats = tree
    assert statcheck.changed_in_parallel(paths[:99], stats[:99 * statcheck.STAT_BYTES]) is None  # fewer than 2 × 50
    monkeypatch.setattr(statcheck.os, "sched_getaffinity", lambda pid: {0})
    assert statcheck.changed_in_parallel(paths, stats) is None
    change_some(paths)
    proof = noop.Proof(paths, stats, {}, "[]", 0)
    assert proof.check() == {10, 150, 298, 299}  # the check in one process


def test_a_child_that_cannot_start_leaves_its_part_to_the_parent(tree, monkeypatch):
    paths, stats = tree
    expected = change_some(paths)

    def no_fork(*args):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(statcheck, "_fork_checker", no_fork)
    assert statcheck.changed_in_parallel(paths, stats) == expected


@pytest.fixture
def started(monkeypatch):
    """The pids of the checker children forked from here on."""
    pids = []
    fork_checker = statcheck._fork_checker

    def recording(*args):
        pid, fd = fork_checker(*args)
        pids.append(pid)
        return pid, fd

    monkeypatch.setattr(statcheck, "_fork_checker", recording)
    return pids


def test_a_failing_child_leaves_its_part_to_the_parent(tree, monkeypatch, started):
    paths, stats = tree
    expected = change_some(paths)
    parent, check = os.getpid(), statcheck.changed

    def dying(paths, stats, lo, hi):
        if os.getpid() != parent:
            os._exit(3)  # the child dies before it says anything
        return check(paths, stats, lo, hi)

    monkeypatch.setattr(statcheck, "changed", dying)
    assert statcheck.changed_in_parallel(paths, stats) == expected
    assert len(started) == 2
    for pid in started:  # every child was reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_an_interrupted_check_kills_and_reaps_its_children(tree, monkeypatch, started):
    paths, stats = tree
    parent = os.getpid()

    def slow_children_interrupted_parent(paths, stats, lo, hi):
        if os.getpid() != parent:
            time.sleep(30)  # a child still at work when the parent is interrupted
        raise KeyboardInterrupt

    monkeypatch.setattr(statcheck, "changed", slow_children_interrupted_parent)
    with pytest.raises(KeyboardInterrupt):
        statcheck.changed_in_parallel(paths, stats)
    assert len(started) == 2
    for pid in started:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
