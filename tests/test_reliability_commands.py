"""Reliability: commands that misbehave (issue 5, "Faulty commands").

A command may delete its own input, write outside its declared outputs, produce a
directory or a dangling symlink where a file was declared, never exit, print megabytes, or
change a source while it runs. Each test shows what farmer guarantees then: a clear failure
where the result cannot be trusted, nothing wrong recorded as up to date, every process it
started gone, and farmer itself responsive. See docs/reliability.md.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import assert_error, wait_no_process, wait_no_process_in


def warnings_of(r) -> list[str]:
    return [l for l in r.output.splitlines() if l.startswith("farmer: warning:")]


# ------------------------------------------------------------ changed sources --

def test_source_edited_while_its_consumer_runs(project):
    """The classic race: the user saves a file while the build reads it. The computation
    read the old content, so it must not be recorded as up to date with the new one."""
    project.write("src.txt", "old\n")
    project.farmfile(
        """
        [task.copy]
        inputs = ["src.txt"]
        outputs = ["out/copy.txt"]
        cmd = "cat {inputs} > {outputs}; touch started; while [ ! -e go ]; do sleep 0.02; done"
        """
    )
    p = project.popen("build")
    try:
        assert project.wait_for("started"), "the command never started"
        time.sleep(0.05)
        project.write("src.txt", "new content\n")
        time.sleep(0.3)  # the edit is not "racy" (fresh) when farmer looks at it again
        project.write("go", "")
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, (out, err)
    assert project.read("out/copy.txt") == "old\n"  # what the command saw
    said = [l for l in (out + err).splitlines() if l.startswith("farmer: warning:")]
    assert said == ["farmer: warning: input src.txt changed while out/copy.txt ran; "
                    "it will run again next build"], (out, err)

    r = project.build("--explain")
    assert r.returncode == 0, r
    assert project.statuses() == {"out/copy.txt": "ran"}
    assert "out/copy.txt: input src.txt changed" in r.stdout, r
    assert warnings_of(r) == [], r
    assert project.read("out/copy.txt") == "new content\n"
    r = project.build()
    assert r.summary()["up to date"] == 1 and r.summary()["ran"] == 0, r


def test_command_changes_its_own_source(project):
    """A command that appends to its input: farmer says so, and the trace keeps the digest
    from before the run, so the next build reruns it. A consumer that starts after the
    change records the new content and is not rerun needlessly."""
    project.write("src.txt", "a\n")
    project.write("flag", "")
    project.farmfile(
        """
        [task.grow]
        inputs = ["src.txt"]
        outputs = ["out/grow.txt", "out/order.txt"]
        cmd = "cat src.txt > out/grow.txt; echo x > out/order.txt; if [ -e flag ]; then echo b >> src.txt; rm flag; sleep 0.25; fi"

        [task.reader]
        inputs = ["src.txt", "out/order.txt"]
        outputs = ["out/reader.txt"]
        cmd = "cat src.txt > {outputs}"
        """
    )
    r = project.build("-j", "1")
    assert r.returncode == 0, r
    assert warnings_of(r) == ["farmer: warning: input src.txt changed while out/grow.txt ran; "
                              "it will run again next build"], r
    assert project.read("out/reader.txt") == "a\nb\n"
    r = project.build("-j", "1", "--explain")
    assert r.returncode == 0, r
    assert project.statuses() == {"out/grow.txt": "ran", "out/reader.txt": "up-to-date"}, r
    assert project.reasons()["out/grow.txt"] == "input src.txt changed"
    assert warnings_of(r) == [], r
    assert project.read("out/grow.txt") == "a\nb\n"
    r = project.build()
    assert r.summary()["ran"] == 0, r


def test_source_edited_and_put_back_while_its_consumer_runs(project):
    """AAAA, then BBBB while the command reads it, then AAAA again before it ends: the
    content after the run equals the one before, but the command read BBBB. The input's
    stat data changed during the run (Bazel's ctime guard): no trace holds, it runs again."""
    project.write("src/in.txt", "AAAA\n")
    project.farmfile(
        """
        [task.copy]
        inputs = ["src/in.txt"]
        outputs = ["out/copy.txt"]
        cmd = "touch started; while [ ! -e go1 ]; do sleep 0.02; done; cat {inputs} > {outputs}; touch read; while [ ! -e go2 ]; do sleep 0.02; done"
        """
    )
    p = project.popen("build")
    try:
        assert project.wait_for("started"), "the command never started"
        project.write("src/in.txt", "BBBB\n")
        project.write("go1", "")
        assert project.wait_for("read"), "the command never read its input"
        project.write("src/in.txt", "AAAA\n")
        time.sleep(0.3)  # not "racy" any more: only its stat data can tell
        project.write("go2", "")
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, (out, err)
    assert project.read("out/copy.txt") == "BBBB\n"  # what the command read
    assert "farmer: warning: input src/in.txt changed while out/copy.txt ran; it will run " \
           "again next build" in out + err, (out, err)
    r = project.build("--explain")
    assert r.returncode == 0 and project.statuses() == {"out/copy.txt": "ran"}, r
    assert "out/copy.txt: input src/in.txt changed" in r.stdout, r
    assert project.read("out/copy.txt") == "AAAA\n"
    r = project.build()
    assert r.summary()["ran"] == 0, r


def test_rewrite_between_builds_with_identical_content_is_not_a_change(project):
    """Only content counts: an input rewritten byte for byte (new inode, new time stamps)
    between builds changes nothing, and farmer says nothing."""
    project.write("src.txt", "same\n")
    project.farmfile(
        """
        [task.t]
        inputs = ["src.txt"]
        outputs = ["out/t.txt"]
        cmd = "cat {inputs} > {outputs}"
        """
    )
    r = project.build()
    assert r.returncode == 0 and warnings_of(r) == [], r
    os.unlink(project.path("src.txt"))
    project.write("src.txt", "same\n")
    r = project.build()
    assert r.summary()["ran"] == 0 and warnings_of(r) == [], r


def test_command_that_rewrites_its_input_byte_for_byte_is_never_up_to_date(project):
    """While it ran, its input's stat data changed: whatever the content, what it read is
    not known, so it is never recorded as up to date (it warns and runs every build)."""
    project.write("src.txt", "same\n")
    project.farmfile(
        """
        [task.t]
        inputs = ["src.txt"]
        outputs = ["out/t.txt"]
        cmd = "cat {inputs} > {outputs}; cp src.txt tmp && mv tmp src.txt"
        """
    )
    for _ in range(2):
        r = project.build()
        assert r.returncode == 0 and r.summary()["ran"] == 1, r
        assert len(warnings_of(r)) == 1 and "input src.txt changed while" in warnings_of(r)[0], r


# ------------------------------------------------------------- bad commands --

def test_command_deletes_its_own_input(project):
    project.write("src.txt", "data\n")
    project.farmfile(
        """
        [task.gen]
        inputs = ["src.txt"]
        outputs = ["out/mid.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.eat]
        inputs = ["out/mid.txt"]
        outputs = ["out/eat.txt"]
        cmd = "cat {inputs} > {outputs} && rm {inputs}"
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    assert warnings_of(r) == ["farmer: warning: input out/mid.txt changed while out/eat.txt ran; "
                              "it will run again next build"], r
    assert not project.exists("out/mid.txt")
    # The deleted output is rebuilt. Its consumer's input changed while it ran (it deleted
    # it), so no trace of that run holds: the consumer runs again too.
    r = project.build("--explain")
    assert r.returncode == 0, r
    assert project.statuses() == {"out/mid.txt": "ran", "out/eat.txt": "ran"}, r
    assert project.reasons()["out/eat.txt"] == "input out/mid.txt changed"
    assert project.reasons()["out/mid.txt"] == "output out/mid.txt missing"
    assert project.read("out/eat.txt") == "data\n" and not project.exists("out/mid.txt")  # eaten again

    # A source the command deletes: the next build names it as missing (exit 2).
    project.farmfile(
        """
        [task.eat]
        inputs = ["src.txt"]
        outputs = ["out/eat2.txt"]
        cmd = "cat {inputs} > {outputs} && rm {inputs}"
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    assert "input src.txt changed while out/eat2.txt ran" in r.stdout, r
    assert_error(project.build(), "missing input", "src.txt")


def test_command_writes_outside_its_declared_outputs(project):
    """farmer does not sandbox commands. A stray write to an undeclared file is ignored
    (never deleted, never tracked); a write over another computation's declared output is
    seen at the next build as an edited output and repaired."""
    project.farmfile(
        """
        [task.other]
        outputs = ["out/other.txt"]
        cmd = "echo good > {outputs}"

        [task.mid]
        inputs = ["out/other.txt"]
        outputs = ["out/mid.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.rogue]
        inputs = ["out/mid.txt"]
        outputs = ["out/rogue.txt"]
        cmd = "echo r > {outputs}; echo stray > stray.txt; echo clobbered > out/other.txt"
        """
    )
    r = project.build()
    assert r.returncode == 0, r
    assert project.read("stray.txt") == "stray\n"
    assert project.read("out/other.txt") == "clobbered\n"
    r = project.build("--explain")
    assert r.returncode == 0, r
    # Only the clobbered output is rebuilt; it comes out as before, so nothing downstream runs.
    assert project.statuses() == {"out/other.txt": "ran", "out/mid.txt": "up-to-date",
                                  "out/rogue.txt": "up-to-date"}, r
    assert project.reasons()["out/other.txt"] == "output out/other.txt edited"
    assert project.read("out/other.txt") == "good\n"
    assert project.read("stray.txt") == "stray\n"


def test_output_is_a_directory(project):
    project.farmfile(
        """
        [task.d]
        outputs = ["out/d"]
        cmd = "mkdir -p {outputs}"
        """
    )
    r = project.build()
    assert r.returncode == 1, r
    t = project.tasks()["out/d"]
    assert t["status"] == "failed"
    assert t["reason"] == "declared output out/d is not a file"
    assert "FAILED: d out/d (declared output out/d is not a file)" in r.stdout, r
    assert "Traceback" not in r.output
    r = project.build()  # never recorded as up to date
    assert r.returncode == 1 and project.tasks()["out/d"]["status"] == "failed", r


def test_output_is_a_dangling_symlink(project):
    project.farmfile(
        """
        [task.l]
        outputs = ["out/l"]
        cmd = "ln -s nowhere {outputs}"
        """
    )
    r = project.build()
    assert r.returncode == 1, r
    t = project.tasks()["out/l"]
    assert t["status"] == "failed"
    assert t["reason"] == "declared output out/l missing"
    assert "FAILED: l out/l" in r.stdout, r
    assert not os.path.lexists(project.path("out/l")), "the failed output was left behind"
    r = project.build()
    assert r.returncode == 1 and project.tasks()["out/l"]["status"] == "failed", r


@pytest.mark.parametrize("how", ["option", "farmfile"])
def test_command_that_never_exits_is_timed_out(project, how):
    sleep = project.unique_sleep(60)
    extra = "timeout = 0.5" if how == "farmfile" else ""
    project.farmfile(
        f"""
        [task.ok]
        outputs = ["out/ok.txt"]
        cmd = "echo ok > {{outputs}}"

        [task.hang]
        outputs = ["out/hang.txt"]
        {extra}
        cmd = "trap '' TERM INT HUP; echo partial > {{outputs}}; ({sleep}) & {sleep}"
        """
    )
    args = ["-k"] + (["--timeout", "0.5"] if how == "option" else [])
    r = project.build(*args, timeout=30)
    assert r.returncode == 1, r
    assert r.elapsed < 10, r
    t = project.tasks()
    assert t["out/hang.txt"]["status"] == "failed"
    assert t["out/hang.txt"]["reason"] == "timeout after 0.5 s"
    assert t["out/ok.txt"]["status"] == "ran"
    assert not project.exists("out/hang.txt")  # the partial output is removed
    assert wait_no_process(sleep) == [], "the timed-out command (or its child) survived"
    assert wait_no_process_in(project) == []


def test_megabytes_of_output(project):
    """The log keeps everything; the terminal gets only a tail."""
    project.farmfile(
        """
        [task.loud]
        outputs = ["out/loud.txt"]
        cmd = "seq 1 1000000; echo done > {outputs}"

        [task.loudfail]
        outputs = ["out/loudfail.txt"]
        cmd = "seq 1 1000000; exit 3"
        """
    )
    expected = sum(len(str(i)) + 1 for i in range(1, 1_000_001))
    r = project.build("-k")
    assert r.returncode == 1, r
    logs = project.path(".farmer/logs")
    assert (logs / "out%2Floud.txt.log").stat().st_size == expected
    assert (logs / "out%2Floudfail.txt.log").stat().st_size == expected
    assert len(r.stdout) < 400_000, len(r.stdout)
    assert "\n1000000\n" in r.stdout  # the tails end with the last lines
    assert "bytes cut; see" in r.stdout
    assert project.tasks()["out/loudfail.txt"]["reason"] == "exit 3"


def test_farmer_stays_responsive_while_a_command_floods_its_log(project):
    sleep = project.unique_sleep(30)
    project.farmfile(
        f"""
        [task.flood]
        outputs = ["out/flood.txt"]
        cmd = "touch started; for i in $(seq 1 100); do seq 1 100000; done; {sleep}"
        """
    )
    p = project.popen("build")
    assert project.wait_for("started")
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 130, (out[-2000:], err)
    assert time.monotonic() - t0 < 2.0
    assert wait_no_process(sleep) == []
    assert len(out) < 400_000
    assert project.tasks()["out/flood.txt"]["reason"] == "interrupted"


def test_depfile_that_is_a_fifo_does_not_hang_farmer(project):
    """Reading a FIFO would block for ever: farmer reads only regular depfiles."""
    project.farmfile(
        """
        [task.f]
        outputs = ["out/f.txt"]
        depfile = "out/f.d"
        cmd = "echo f > {outputs}; rm -f {depfile}; mkfifo {depfile}"
        """
    )
    r = project.build(timeout=20)
    assert r.returncode == 0, r
    assert "farmer: warning: out/f.d: not a regular file; no inputs discovered" in r.stdout, r
