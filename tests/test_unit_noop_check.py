"""The no-op proof's stat check shared among forked children (farmer/store/proof_check.py,
`changed_in_parallel`): it finds exactly what a check in one process finds, a child that
cannot be started or fails leaves its part to the parent, and no child outlives it."""

import os
import select
import time

import pytest

from farmer.files import stattable
from farmer.store import proof as noop
from farmer.store import proof_check as statcheck


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
    stats = stattable.table(stattable.stat_key_of(p) for p in paths)
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
    assert statcheck.changed_in_parallel(paths[:99], stats[:99 * stattable.STAT_BYTES]) is None  # fewer than 2 × 50
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


def test_an_interrupted_check_kills_and_reaps_its_children(tree, small_chunks, monkeypatch, started):
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


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 10 files: 30 of the tree's 300."""
    monkeypatch.setattr(statcheck, "_CHUNK", 10)


def test_a_child_waiting_for_a_cpu_leaves_its_chunks_to_the_parent(tree, small_chunks, monkeypatch):
    paths, stats = tree
    expected = change_some(paths)
    gate_r, gate_w = os.pipe()
    parent, check, collect = os.getpid(), statcheck.changed, statcheck._collect
    by_parent = []

    def gated(paths, stats, lo, hi):
        if os.getpid() == parent:
            by_parent.append(lo)
        else:
            os.read(gate_r, 1)  # as if not scheduled until the parent has taken every chunk
        return check(paths, stats, lo, hi)

    def collect_opened(pid, fd, **kwargs):
        os.write(gate_w, b"xx")
        return collect(pid, fd, **kwargs)

    monkeypatch.setattr(statcheck, "changed", gated)
    monkeypatch.setattr(statcheck, "_collect", collect_opened)
    try:
        assert statcheck.changed_in_parallel(paths, stats) == expected
    finally:
        os.close(gate_r)
        os.close(gate_w)
    assert len(by_parent) >= 28  # the two children took one chunk each at most


def test_meanwhile_is_called_when_the_parent_sees_a_change_and_never_when_none_did(tree, small_chunks,
                                                                                    monkeypatch):
    paths, stats = tree
    calls = []
    assert statcheck.changed_in_parallel(paths, stats, lambda: calls.append(1)) == set()
    assert calls == []
    for path in paths:  # whichever chunks the parent takes, it sees a change
        with open(path, "a") as f:
            f.write("more\n")
    go_r, go_w = os.pipe()
    parent, check = os.getpid(), statcheck.changed

    def parent_first(paths, stats, lo, hi):
        if os.getpid() == parent:
            os.write(go_w, b"x")
        else:
            select.select([go_r], [], [], 30)  # not before the parent has a chunk of its own
        return check(paths, stats, lo, hi)

    monkeypatch.setattr(statcheck, "changed", parent_first)
    try:
        assert statcheck.changed_in_parallel(paths, stats, lambda: calls.append(1)) == set(range(300))
    finally:
        os.close(go_r)
        os.close(go_w)
    assert calls == [1]


def test_a_change_only_a_child_sees_is_told_to_the_parent(tree, small_chunks, monkeypatch):
    paths, stats = tree
    with open(paths[295], "a") as f:  # in the last chunk
        f.write("more\n")
    go_r, go_w = os.pipe()
    parent, check, fork_checker = os.getpid(), statcheck.changed, statcheck._fork_checker
    answers, calls, by_parent = [], [], []

    def forked(*args):
        pid, fd = fork_checker(*args)
        answers.append(fd)
        return pid, fd

    def children_take_the_rest(paths, stats, lo, hi):
        if os.getpid() != parent:
            select.select([go_r], [], [], 30)  # not before the parent has its first chunk
        elif not by_parent:
            os.write(go_w, b"x")
            waiting = set(answers)
            while waiting and (ready := select.select(list(waiting), [], [], 30)[0]):
                waiting -= set(ready)  # each child has answered, so the queue is empty
        if os.getpid() == parent:
            by_parent.append(lo)
        return check(paths, stats, lo, hi)

    monkeypatch.setattr(statcheck, "_fork_checker", forked)
    monkeypatch.setattr(statcheck, "changed", children_take_the_rest)
    try:
        assert statcheck.changed_in_parallel(paths, stats, lambda: calls.append(1)) == {295}
    finally:
        os.close(go_r)
        os.close(go_w)
    assert by_parent[0] < 30 and len(by_parent) == 1  # the children checked every other chunk
    assert calls == [1]


def test_children_that_answered_are_reaped_later_or_when_the_proof_goes(tree, started):
    paths, stats = tree
    expected = change_some(paths)
    exiting = []
    assert statcheck.changed_in_parallel(paths, stats, None, exiting) == expected
    assert set(exiting) <= set(started) and len(started) == 2
    statcheck.reap(exiting)
    assert exiting == []
    proof = noop.Proof(paths, stats, {}, "[]", 0)
    assert proof.check() == expected
    assert len(started) == 4
    del proof
    for pid in started:  # every child was reaped, by `reap` or as the proof went
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
