"""What runs and what does not (SPEC §2), plain output (§3), last-build.json (§4): whole
builds in-process with a fake executor (tests/fakes.py), except where the command line
itself is tested (the environment, --trace) or real times are (last-build.json's times
against its wall time)."""

import shutil

import pytest
from helpers import CHAIN, with_chain


@pytest.fixture
def chain(project):
    return with_chain(project)


def test_first_build_runs_everything(chain):
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.read("out/a.txt") == "alpha\n"
    assert chain.read("out/b.txt") == "alpha\nalpha\n"
    assert chain.read("out/c.txt") == "gamma\n"
    assert chain.statuses() == {"out/a.txt": "ran", "out/b.txt": "ran", "out/c.txt": "ran"}
    assert set(chain.reasons().values()) == {"never built"}
    s = r.summary()
    assert s == {"ran": 3, "up to date": 0, "cached": 0, "failed": 0, "interrupted": 0, "skipped": 0}, r
    assert "critical path" in r.summary_line(), r


def test_plain_output_one_line_per_finished_computation(chain):
    r = chain.build_in_process("-j", "1")
    assert r.returncode == 0, r
    lines = r.finished()
    assert {(s[2], s[3]) for s in lines} == {("a", "out/a.txt"), ("b", "out/b.txt"), ("c", "out/c.txt")}, r
    assert len(lines) == 3, r
    # as ninja on a dumb terminal: done counts this one, so the last line reads [3/3]
    assert [(s[0], s[1]) for s in lines] == [(1, 3), (2, 3), (3, 3)], r
    # b needs a: a finishes first.
    ids = [s[3] for s in lines]
    assert ids.index("out/a.txt") < ids.index("out/b.txt")


def test_done_counts_up_to_date_computations(chain):
    assert chain.build_in_process().returncode == 0
    chain.write("src/c.txt", "gamma 2\n")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert r.finished() == [(3, 3, "c", "out/c.txt")], r


def test_last_line_reads_total_when_a_rerun_cuts_off_its_consumer(chain):
    """a's command changes but writes the same bytes: b, found up to date once a finished,
    counts in a's line, the only one, which reads [3/3]."""
    assert chain.build_in_process().returncode == 0
    chain.write("Farmfile", CHAIN.replace("cp {inputs} {outputs}", "cp -- {inputs} {outputs}", 1))
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses() == {"out/a.txt": "ran", "out/b.txt": "up-to-date", "out/c.txt": "up-to-date"}
    assert r.finished() == [(3, 3, "a", "out/a.txt")], r


def test_second_build_runs_nothing(chain):
    assert chain.build_in_process().returncode == 0
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert r.finished() == [], r
    assert set(chain.statuses().values()) == {"up-to-date"}
    assert set(chain.reasons().values()) == {"up to date"}
    s = r.summary()
    assert s["ran"] == 0 and s["up to date"] == 3 and s["failed"] == 0 and s["skipped"] == 0, r
    lb = chain.last_build()
    assert lb["status"] == "ok"
    for t in lb["tasks"]:
        assert t["start_s"] is None and t["end_s"] is None and t["duration_s"] is None, t


def test_touch_rebuilds_nothing(chain):
    assert chain.build_in_process().returncode == 0
    for f in ["src/a.txt", "src/c.txt", "out/a.txt", "out/b.txt", "out/c.txt"]:
        chain.touch_later(f)
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert r.finished() == [], r
    assert set(chain.statuses().values()) == {"up-to-date"}


def test_rewrite_with_same_content_rebuilds_nothing(chain):
    assert chain.build_in_process().returncode == 0
    chain.remove("src/a.txt")
    chain.write("src/a.txt", "alpha\n")  # new inode, new times, same bytes
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert r.finished() == [], r


def test_edit_source_rebuilds_its_chain_only(chain):
    assert chain.build_in_process().returncode == 0
    chain.write("src/a.txt", "alpha, edited\n")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses() == {"out/a.txt": "ran", "out/b.txt": "ran", "out/c.txt": "up-to-date"}
    reasons = chain.reasons()
    assert reasons["out/a.txt"] == "input src/a.txt changed"
    assert reasons["out/b.txt"] == "input out/a.txt changed"
    assert chain.read("out/b.txt") == "alpha, edited\nalpha, edited\n"
    assert sorted(r.finished_ids()) == ["out/a.txt", "out/b.txt"], r
    s = r.summary()
    assert s["ran"] == 2 and s["up to date"] == 1, r


def test_early_cutoff(project):
    project.farmfile(
        """
        [task.a]
        inputs = ["src/x.txt"]
        outputs = ["out/a.txt"]
        cmd = "cp {inputs} {outputs}"

        [task.b]
        inputs = ["out/a.txt"]
        outputs = ["out/b.txt"]
        cmd = "grep -v '^#' {inputs} > {outputs}"

        [task.c]
        inputs = ["out/b.txt"]
        outputs = ["out/c.txt"]
        cmd = "tr a-z A-Z < {inputs} > {outputs} && echo ran >> c-runs.log"
        """
    )
    project.write("src/x.txt", "# a comment\ncode\n")
    assert project.build_in_process().returncode == 0
    assert project.read("out/c.txt") == "CODE\n"
    project.write("src/x.txt", "# another, longer comment\ncode\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/a.txt": "ran", "out/b.txt": "ran", "out/c.txt": "up-to-date"}, r
    assert project.reasons()["out/c.txt"] == "up to date"
    assert project.read("c-runs.log") == "ran\n"
    assert "out/c.txt" not in r.finished_ids(), r
    # and it stays settled
    r = project.build_in_process()
    assert r.finished() == [], r


def test_output_edited_by_hand_is_rebuilt(chain):
    assert chain.build_in_process().returncode == 0
    chain.write("out/a.txt", "vandalised, and longer\n")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses()["out/a.txt"] == "ran"
    assert chain.reasons()["out/a.txt"] == "output out/a.txt edited"
    assert chain.read("out/a.txt") == "alpha\n"
    # a's output came out identical to the previous good one: b is not rerun
    assert chain.statuses()["out/b.txt"] == "up-to-date"
    assert chain.statuses()["out/c.txt"] == "up-to-date"


def test_output_deleted_is_rebuilt(chain):
    assert chain.build_in_process().returncode == 0
    chain.remove("out/b.txt")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses() == {"out/a.txt": "up-to-date", "out/b.txt": "ran", "out/c.txt": "up-to-date"}
    assert chain.reasons()["out/b.txt"] == "output out/b.txt missing"
    assert chain.read("out/b.txt") == "alpha\nalpha\n"


def test_command_change_reruns(chain):
    assert chain.build_in_process().returncode == 0
    chain.farmfile(CHAIN.replace("cat {inputs} {inputs} > {outputs}", "cat {inputs} > {outputs}"))
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses() == {"out/a.txt": "up-to-date", "out/b.txt": "ran", "out/c.txt": "up-to-date"}
    assert chain.reasons()["out/b.txt"] == "command changed"
    assert chain.read("out/b.txt") == "alpha\n"


def test_vars_change_reruns_with_command_changed(project):
    ff = """
    [vars]
    greeting = "{word}"

    [task.hello]
    outputs = ["out/hello.txt"]
    cmd = "echo {greeting} > {outputs}"

    [task.other]
    outputs = ["out/other.txt"]
    cmd = "echo other > {outputs}"
    """
    project.farmfile(ff.replace("{word}", "hello"))
    assert project.build_in_process().returncode == 0
    assert project.read("out/hello.txt") == "hello\n"
    project.farmfile(ff.replace("{word}", "bonjour"))
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/hello.txt": "ran", "out/other.txt": "up-to-date"}
    assert project.reasons()["out/hello.txt"] == "command changed"
    assert project.read("out/hello.txt") == "bonjour\n"


def test_env_change_reruns(project):
    ff = """
    [task.e]
    outputs = ["out/e.txt"]
    env = {GREETING = "VALUE"}
    cmd = "printf '%s' \\"$GREETING\\" > {outputs}"
    """
    project.farmfile(ff.replace("VALUE", "one"))
    assert project.build_in_process().returncode == 0, project.read("Farmfile")
    assert project.read("out/e.txt") == "one"
    project.farmfile(ff.replace("VALUE", "two"))
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/e.txt": "ran"}
    assert project.read("out/e.txt") == "two"
    r = project.build_in_process()
    assert project.statuses() == {"out/e.txt": "up-to-date"}


def test_always_task_always_runs(project):
    project.farmfile(
        """
        [task.stamp]
        outputs = ["out/stamp.txt"]
        always = true
        cmd = "echo x >> runs.log; echo stamp > {outputs}"

        [task.steady]
        outputs = ["out/steady.txt"]
        cmd = "echo steady > {outputs}"
        """
    )
    assert project.build_in_process().returncode == 0
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/stamp.txt": "ran", "out/steady.txt": "up-to-date"}
    assert project.reasons()["out/stamp.txt"] == "always"
    assert project.read("runs.log") == "x\nx\n"


def test_task_without_outputs_is_up_to_date_second_time(project):
    project.farmfile(
        """
        [task.check]
        inputs = ["src/a.txt"]
        cmd = "test -s {inputs} && echo x >> check-runs.log"
        """
    )
    project.write("src/a.txt", "a\n")
    assert project.build_in_process().returncode == 0
    assert project.statuses() == {":check": "ran"}
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {":check": "up-to-date"}
    project.write("src/a.txt", "a, changed\n")
    project.build_in_process()
    assert project.statuses() == {":check": "ran"}
    assert project.reasons()[":check"] == "input src/a.txt changed"
    assert project.read("check-runs.log") == "x\nx\n"


def test_output_folders_are_created(project):
    project.farmfile(
        """
        [task.deep]
        outputs = ["deep/nested/folder/x.txt", "other/deeper/y.txt"]
        cmd = "echo x > deep/nested/folder/x.txt && echo y > other/deeper/y.txt"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("deep/nested/folder/x.txt") == "x\n"
    assert project.read("other/deeper/y.txt") == "y\n"
    assert project.statuses() == {"deep/nested/folder/x.txt": "ran"}


def test_id_is_first_declared_output(project):
    project.farmfile(
        """
        [task.two]
        outputs = ["out/z.txt", "out/a.txt"]
        cmd = "echo z > out/z.txt; echo a > out/a.txt"
        """
    )
    assert project.build_in_process().returncode == 0
    (t,) = project.last_build()["tasks"]
    assert t["id"] == "out/z.txt"
    assert t["task"] == "two"
    assert t["outputs"] == ["out/z.txt", "out/a.txt"]


def test_second_output_deleted_is_rebuilt(project):
    project.farmfile(
        """
        [task.two]
        outputs = ["out/z.txt", "out/a.txt"]
        cmd = "echo z > out/z.txt; echo a > out/a.txt"
        """
    )
    assert project.build_in_process().returncode == 0
    project.remove("out/a.txt")
    assert project.build_in_process().returncode == 0
    assert project.statuses() == {"out/z.txt": "ran"}
    assert project.reasons()["out/z.txt"] == "output out/a.txt missing"
    assert project.exists("out/a.txt")


def test_last_build_json_fields(chain):
    r = chain.build("-j", "2")
    assert r.returncode == 0, r
    lb = chain.last_build()
    for key in ["farmer_version", "started_at", "jobs", "status", "wall_s", "critical_path_s",
                "predicted_makespan_s", "tasks"]:
        assert key in lb, key
    assert lb["farmer_version"] == "0.1.0"
    assert lb["jobs"] == 2
    assert lb["status"] == "ok"
    assert lb["started_at"].endswith("Z")
    assert lb["wall_s"] > 0
    assert lb["critical_path_s"] <= lb["wall_s"] + 0.05
    for t in lb["tasks"]:
        for key in ["id", "task", "outputs", "status", "reason", "world", "start_s", "end_s",
                    "duration_s", "cpu_s", "max_rss_kb", "exit_code"]:
            assert key in t, (key, t)
        assert t["world"] is None
        assert t["exit_code"] == 0
        assert 0 <= t["start_s"] <= t["end_s"] <= lb["wall_s"] + 0.05, t
        assert abs(t["duration_s"] - (t["end_s"] - t["start_s"])) < 0.02, t
    tasks = chain.tasks()
    # b consumed a's output: it started after a ended
    assert tasks["out/b.txt"]["start_s"] >= tasks["out/a.txt"]["end_s"]


def test_removing_state_dir_is_safe(chain):
    assert chain.build_in_process().returncode == 0
    shutil.rmtree(chain.path(".farmer"))
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert set(chain.statuses()) == {"out/a.txt", "out/b.txt", "out/c.txt"}
    assert chain.read("out/b.txt") == "alpha\nalpha\n"
    r = chain.build_in_process()
    assert r.finished() == [], r


def test_failed_then_fixed_input_rebuilds(project):
    project.farmfile(
        """
        [task.t]
        inputs = ["src/n.txt"]
        outputs = ["out/t.txt"]
        cmd = "grep -q ok {inputs} && cp {inputs} {outputs}"
        """
    )
    project.write("src/n.txt", "bad\n")
    assert project.build_in_process().returncode == 1
    # a failed computation has no successful trace: it runs again
    r = project.build_in_process()
    assert r.returncode == 1, r
    assert project.statuses() == {"out/t.txt": "failed"}
    project.write("src/n.txt", "ok\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/t.txt": "ran"}
    assert project.read("out/t.txt") == "ok\n"


def _rewrite_keeping_mtime(project, rel, text):
    """Edit a file in place, same size, then put its old mtime back (like `cp -p` or a tar extract)."""
    p = project.path(rel)
    st = p.stat()
    assert len(text.encode()) == st.st_size
    with open(p, "r+") as f:
        f.write(text)
    import os
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = p.stat()
    assert (st2.st_mtime_ns, st2.st_size, st2.st_ino) == (st.st_mtime_ns, st.st_size, st.st_ino)


def test_same_size_edit_with_old_mtime_is_noticed(chain):
    assert chain.build_in_process().returncode == 0
    _rewrite_keeping_mtime(chain, "src/a.txt", "ALPHA\n")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses()["out/a.txt"] == "ran", r
    assert chain.reasons()["out/a.txt"] == "input src/a.txt changed"
    assert chain.read("out/b.txt") == "ALPHA\nALPHA\n"


def test_same_size_output_edit_with_old_mtime_is_noticed(chain):
    assert chain.build_in_process().returncode == 0
    _rewrite_keeping_mtime(chain, "out/c.txt", "GAMMA\n")
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses()["out/c.txt"] == "ran", r
    assert chain.reasons()["out/c.txt"] == "output out/c.txt edited"
    assert chain.read("out/c.txt") == "gamma\n"


def test_successful_command_output_is_logged(project):
    project.farmfile(
        """
        [task.noisy]
        outputs = ["out/n.txt"]
        cmd = "echo NOISY-STDOUT-LINE; echo NOISY-STDERR-LINE >&2; echo n > {outputs}"
        """
    )
    r = project.build_in_process()
    assert r.returncode == 0, r
    logs = list(project.path(".farmer/logs").rglob("*"))
    text = "".join(p.read_text(errors="replace") for p in logs if p.is_file())
    assert "NOISY-STDOUT-LINE" in text and "NOISY-STDERR-LINE" in text


def test_environment_is_inherited_and_extended(project):
    project.farmfile(
        """
        [task.e]
        outputs = ["out/e.txt"]
        env = {EXTRA = "extra-value"}
        cmd = "echo $INHERITED_MARK $EXTRA | tr a-z A-Z > {outputs}"
        """
    )
    r = project.build(env={"INHERITED_MARK": "from-parent"})
    assert r.returncode == 0, r
    assert project.read("out/e.txt") == "FROM-PARENT EXTRA-VALUE\n"


def test_trace_file_is_written(chain, tmp_path):
    trace = tmp_path / "trace.json"
    r = chain.build("--trace", trace)
    assert r.returncode == 0, r
    assert trace.exists() and trace.stat().st_size > 0


def test_foreach_over_outputs_of_foreach(project):
    project.farmfile(
        """
        [task.first]
        foreach = "src/{s}.txt"
        inputs = ["src/{s}.txt"]
        outputs = ["mid/{s}.mid"]
        cmd = "cp {inputs} {outputs}"

        [task.second]
        foreach = "mid/{s}.mid"
        inputs = ["mid/{s}.mid"]
        outputs = ["out/{s}.fin"]
        cmd = "cat {inputs} {inputs} > {outputs}"
        """
    )
    project.write("src/p.txt", "p\n")
    project.write("src/q.txt", "q\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert set(project.statuses()) == {"mid/p.mid", "mid/q.mid", "out/p.fin", "out/q.fin"}
    assert project.read("out/q.fin") == "q\nq\n"
    assert project.build_in_process().finished() == []


def test_unrelated_farmfile_edits_rerun_nothing(chain):
    assert chain.build_in_process().returncode == 0
    chain.farmfile(
        "# a comment at the top\n"
        + CHAIN.replace('[task.c]', '[vars]\nunused = "x"\n\n[task.c]')
        + """
[task.newcomer]
outputs = ["out/new.txt"]
cmd = "echo new > {outputs}"
"""
    )
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert chain.statuses() == {"out/a.txt": "up-to-date", "out/b.txt": "up-to-date",
                                "out/c.txt": "up-to-date", "out/new.txt": "ran"}


def test_scheduling_keys_do_not_change_the_fingerprint(chain):
    assert chain.build_in_process().returncode == 0
    changed = CHAIN.replace(
        'cmd = "cat {inputs} {inputs} > {outputs}"',
        'cmd = "cat {inputs} {inputs} > {outputs}"\ncost = 7\ncpus = 2\ntimeout = 100\npool = "p"',
    )
    chain.farmfile("[pools]\np = 1\n" + changed)
    r = chain.build_in_process()
    assert r.returncode == 0, r
    assert set(chain.statuses().values()) == {"up-to-date"}, r


def test_always_task_with_identical_output_does_not_rerun_consumers(project):
    project.farmfile(
        """
        [task.probe]
        outputs = ["out/probe.txt"]
        always = true
        cmd = "echo constant > {outputs}"

        [task.use]
        inputs = ["out/probe.txt"]
        outputs = ["out/use.txt"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    assert project.build_in_process().returncode == 0
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/probe.txt": "ran", "out/use.txt": "up-to-date"}


def test_unicode_paths(project):
    project.farmfile(
        """
        [task.u]
        foreach = "src/{n}.txt"
        inputs = ["src/{n}.txt"]
        outputs = ["out/{n}.copy"]
        cmd = "cp {inputs} {outputs}"
        """
    )
    project.write("src/héllo wörld.txt", "ü\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.read("out/héllo wörld.copy") == "ü\n"
    assert project.statuses() == {"out/héllo wörld.copy": "ran"}
    assert project.build_in_process().finished() == []


def test_source_edited_during_the_build_is_rebuilt_next_time(project):
    project.farmfile(
        """
        [task.a]
        inputs = ["src/x.txt"]
        outputs = ["out/a.txt"]
        cmd = "cat {inputs} > {outputs}; touch started; while [ ! -e go ]; do sleep 0.02; done"
        """
    )
    project.write("src/x.txt", "one\n")
    p = project.popen("build")
    assert project.wait_for("started"), "the command never started"
    project.write("src/x.txt", "two, edited while building\n")  # the user saves during the build
    project.write("go", "")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    assert project.read("out/a.txt") == "one\n"
    # out/a.txt was made from the old text: the next build must redo it
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/a.txt": "ran"}, r
    assert project.reasons()["out/a.txt"] == "input src/x.txt changed"
    assert project.read("out/a.txt") == "two, edited while building\n"


def test_many_computations_progress_lines(project):
    project.farmfile(
        """
        [task.many]
        foreach = {n = ["00","01","02","03","04","05","06","07","08","09","10","11","12","13","14","15","16","17","18","19","20","21","22","23","24","25","26","27","28","29","30","31","32","33","34","35","36","37","38","39"]}
        outputs = ["out/{n}.txt"]
        cmd = "echo {n} > {outputs}"

        [task.sum]
        inputs = ["@many"]
        outputs = ["out/sum.txt"]
        cmd = "cat {inputs} | wc -l > {outputs}"
        """
    )
    r = project.build("-j", "3")
    assert r.returncode == 0, r
    started = r.finished()
    assert len(started) == 41, r
    assert len({s[3] for s in started}) == 41
    assert {s[1] for s in started} == {41}
    assert [s[0] for s in started] == list(range(1, 42)), r
    assert started[-1][3] == "out/sum.txt", r
    assert project.read("out/sum.txt").strip() == "40"
    assert r.summary()["ran"] == 41
    lb = project.last_build()
    assert lb["wall_s"] >= max(t["end_s"] for t in lb["tasks"]) - 0.05
    assert project.build().finished() == []
