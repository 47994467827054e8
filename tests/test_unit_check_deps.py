"""`--check-deps` without running anything: strace's lines read into accesses
(farmer/run/tracer/strace.py), the accesses judged against what a computation declares
(farmer/record/checkdeps.py), the option as the command line and the Farmfile give it.
The lines below are as strace 6.1 prints them (`-f -y -qq --seccomp-bpf`)."""

from __future__ import annotations

import os
import textwrap

import pytest
from helpers import computation

from farmer.errors import UsageError
from farmer.record.checkdeps import CheckDepsEngine, Root, block, judge
from farmer.run.executors.base import Outcome, Restored
from farmer.run.tracer import strace
from farmer.run.tracer.strace import READ, REMOVE, WRITE, Access, parse, touched, unquote

R = "/proj"


def accesses(text: str, cwd: str = R) -> list[Access]:
    return parse(textwrap.dedent(text).strip().splitlines(), cwd)


def test_opens_are_reads_or_writes_by_their_flags_at_the_path_strace_resolved():
    got = accesses("""
        100 openat(AT_FDCWD</proj>, "a.txt", O_RDONLY) = 3</proj/a.txt>
        100 openat(AT_FDCWD</proj>, "b.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</proj/b.txt>
        100 openat(AT_FDCWD</proj>, "link", O_RDONLY|O_CLOEXEC) = 3</proj/real/target>
        100 openat(AT_FDCWD</proj>, "lib.a", O_RDWR) = 4</proj/lib.a>
        100 open("/proj/old.txt", O_RDONLY) = 5</proj/old.txt>
        100 creat("made.txt", 0644) = 6</proj/made.txt>
    """)
    assert got == [Access(READ, "/proj/a.txt"), Access(WRITE, "/proj/b.txt"),
                   Access(READ, "/proj/real/target"),
                   Access(READ, "/proj/lib.a"), Access(WRITE, "/proj/lib.a"),  # updated in place: both
                   Access(READ, "/proj/old.txt"), Access(WRITE, "/proj/made.txt")]


def test_failed_calls_directories_and_signals_touch_nothing():
    assert accesses("""
        100 openat(AT_FDCWD</proj>, "nofile", O_RDONLY) = -1 ENOENT (No such file or directory)
        100 openat(AT_FDCWD</proj>, ".", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3</proj>
        100 openat(AT_FDCWD</proj>, "x", O_PATH) = 3</proj/x>
        100 unlink("gone") = -1 ENOENT (No such file or directory)
        100 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=101} ---
        100 +++ exited with 0 +++
        100 openat(AT_FDCWD</proj>, "cut sh
    """) == []


def test_relative_paths_resolve_against_the_process_directory_and_a_directory_descriptor():
    got = accesses("""
        100 openat(AT_FDCWD</proj/sub>, "../a.txt", O_RDONLY) = 3
        100 openat(7</proj/dir>, "b.txt", O_RDONLY) = 3
        100 renameat2(AT_FDCWD</proj/d>, "t", 7</proj/e>, "u", RENAME_NOREPLACE) = 0
        100 unlinkat(AT_FDCWD</proj/d>, "v", 0) = 0
        100 unlinkat(AT_FDCWD</proj/d>, "w", AT_REMOVEDIR) = 0
    """)
    assert got == [Access(READ, "/proj/a.txt"), Access(READ, "/proj/dir/b.txt"),
                   Access(REMOVE, "/proj/d/t"), Access(WRITE, "/proj/e/u"), Access(REMOVE, "/proj/d/v")]


def test_bare_paths_follow_each_process_directory_through_chdir_fchdir_and_clone():
    # An older strace prints AT_FDCWD without the directory: the working directory is followed.
    got = accesses("""
        100 chdir("sub") = 0
        100 unlink("a") = 0
        100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, child_tidptr=0x7f) = 101
        101 rename("b", "c") = 0
        100 fchdir(3</proj/other>) = 0
        100 unlink("d") = 0
        101 openat(AT_FDCWD, "e", O_WRONLY|O_CREAT, 0644) = 3
        102 unlink("f") = 0
        101 execve("./tool", ["./tool"], 0x55 /* 3 vars */) = 0
    """)
    assert got == [Access(REMOVE, "/proj/sub/a"), Access(REMOVE, "/proj/sub/b"), Access(WRITE, "/proj/sub/c"),
                   Access(REMOVE, "/proj/other/d"), Access(WRITE, "/proj/sub/e"),
                   Access(REMOVE, "/proj/f"),  # a process never seen starts where the command did
                   Access(READ, "/proj/sub/tool")]


def test_a_directory_strace_prints_for_at_fdcwd_is_that_process_directory_from_then_on():
    got = accesses("""
        100 openat(AT_FDCWD</proj/w>, "/dev/tty", O_RDWR) = -1 ENXIO (No such device or address)
        100 rename("x", "y") = 0
    """)
    assert got == [Access(REMOVE, "/proj/w/x"), Access(WRITE, "/proj/w/y")]


def test_only_accesses_within_the_prefixes_asked_for_are_kept_and_the_shortcut_keeps_cwds():
    lines = textwrap.dedent("""
        100 openat(AT_FDCWD</proj/sub>, "/usr/include/stdio.h", O_RDONLY|O_NOCTTY) = 3</usr/include/stdio.h>
        100 openat(AT_FDCWD</proj/sub>, "gen.h", O_RDONLY|O_NOCTTY) = -1 ENOENT (No such file or directory)
        100 openat(AT_FDCWD</proj/sub>, "../gen.h", O_RDONLY|O_NOCTTY) = 3</proj/gen.h>
        100 unlink("tmp.o") = 0
        100 openat(AT_FDCWD</proj/sub>, "/tmp/cc1.s", O_RDWR|O_CREAT|O_EXCL, 0600) = 4</tmp/cc1.s>
        100 openat(AT_FDCWD</projects>, "x", O_RDONLY) = 3</projects/x>
    """).strip().splitlines()
    assert parse(lines, R, ("/proj/",)) == [Access(READ, "/proj/gen.h"), Access(REMOVE, "/proj/sub/tmp.o")]
    assert len(parse(lines, R)) == 5


def test_calls_cut_by_another_process_are_joined():
    got = accesses("""
        100 vfork( <unfinished ...>
        101 execve("/usr/bin/cat", ["cat", "a.txt"], 0x55 /* 35 vars */ <unfinished ...>
        100 <... vfork resumed>) = 101
        101 <... execve resumed>) = 0
        101 openat(AT_FDCWD</proj>, "a.txt", O_RDONLY <unfinished ...>
        100 openat(AT_FDCWD</proj>, "b.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</proj/b.txt>
        101 <... openat resumed>) = 3</proj/a.txt>
        100 renameat(AT_FDCWD</proj>, "b.txt" <unfinished ...>
        100 <... renameat resumed>, AT_FDCWD</proj>, "c.txt") = 0
    """)
    assert got == [Access(READ, "/usr/bin/cat"), Access(WRITE, "/proj/b.txt"), Access(READ, "/proj/a.txt"),
                   Access(REMOVE, "/proj/b.txt"), Access(WRITE, "/proj/c.txt")]


def test_names_with_quotes_commas_brackets_and_other_bytes_are_read_back():
    got = accesses(r"""
        100 openat(AT_FDCWD</proj/we\76ird, dir>, "f\"\303\251\n(n), [x]", O_RDONLY) = 3</proj/we\76ird, dir/f\"\303\251\n(n), [x]>
        100 rename("a\\b", "\x41") = 0
        100 openat(AT_FDCWD</proj>, "\377", O_WRONLY|O_CREAT, 0644) = 3</proj/\377>
    """)
    assert got == [Access(READ, '/proj/we>ird, dir/f"é\n(n), [x]'),
                   Access(REMOVE, "/proj/we>ird, dir/a\\b"), Access(WRITE, "/proj/we>ird, dir/A"),
                   Access(WRITE, "/proj/" + os.fsdecode(b"\xff"))]
    assert unquote(r"plain") == "plain" and unquote(r"\t\1") == "\t\x01"


def test_what_a_run_read_is_what_it_read_before_writing_it_and_every_write_is_listed():
    reads, writes = touched([
        Access(READ, "/p/in"), Access(WRITE, "/p/tmp"), Access(READ, "/p/tmp"),
        Access(REMOVE, "/p/tmp"), Access(WRITE, "/p/out.tmp"), Access(REMOVE, "/p/out.tmp"),
        Access(WRITE, "/p/out"), Access(READ, "/p/in"), Access(READ, "/p/other"),
    ])
    assert reads == ["/p/in", "/p/other"]
    assert writes == ["/p/out", "/p/out.tmp", "/p/tmp"]  # which are still there: the judge looks


def test_the_traced_argv_runs_the_command_with_its_trace_to_a_file():
    argv = strace.traced_argv("/usr/bin/strace", ["/bin/sh", "-c", "make x"], "/t/1.trace")
    assert argv[0] == "/usr/bin/strace" and argv[-4:] == ["--", "/bin/sh", "-c", "make x"]
    assert argv[argv.index("-o") + 1] == "/t/1.trace" and "-f" in argv and "-y" in argv


def test_without_strace_on_path_the_option_is_a_usage_error_naming_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert strace.find() is None
    with pytest.raises(UsageError, match=r"^--check-deps needs strace: apt-get install strace$"):
        strace.require()


# -- judging ---------------------------------------------------------------------------------


def judged(comp, reads, writes, files=(), producers=None, ancestors=(), inputs=None, outputs=None,
           root="/proj"):
    producers = producers or {}
    return judge(comp, reads, writes, Root(root), comp.inputs if inputs is None else inputs,
                 comp.outputs if outputs is None else outputs, producers.get, lambda: set(ancestors),
                 lambda p: p in files or not files)


def test_undeclared_reads_and_writes_inside_the_root_are_found_and_nothing_else():
    comp = computation(2, id="out.txt", task="use", inputs=["in.txt", "./lib/../x.txt"], outputs=["out.txt"])
    reads = ["/proj/in.txt", "/proj/x.txt", "/proj/extra.txt", "/usr/include/stdio.h", "/proj/.farmer/state.db",
             "/proj/pkg/__pycache__/m.cpython-311.pyc", "/proj/out.txt", "/projector/y"]
    writes = ["/proj/out.txt", "/proj/side.txt", "/proj/tmp.txt", "/tmp/cc1.s"]
    files = {"/proj/extra.txt", "/proj/side.txt"}  # tmp.txt is gone: a temporary file
    got = judged(comp, reads, writes, files=files)
    assert [(f.kind, f.path) for f in got] == [("input", "extra.txt"), ("output", "side.txt")]


def test_a_read_of_another_computation_output_names_it_and_says_whether_anything_orders_them():
    comp = computation(5, id="report.txt", task="report", inputs=[], outputs=["report.txt"])
    gen, table = computation(1, id="gen.h", task="gen"), computation(3, id="table.txt", task="tables")
    got = judged(comp, ["/proj/gen.h", "/proj/table.txt"], [],
                 producers={"gen.h": gen, "table.txt": table}, ancestors={3, 4})
    assert [f.line() for f in got] == [
        "  undeclared input gen.h (an output of gen gen.h: nothing orders them)",
        "  undeclared input table.txt (an output of tables table.txt: ordered only through other steps)"]
    assert got[0].reason() == "undeclared input gen.h"
    text = block(comp, got)
    assert text.splitlines()[0] == "farmer: warning: report report.txt touched files it does not declare (--check-deps):"


def test_a_file_its_depfile_lists_is_declared_unless_another_computation_makes_it_in_a_race():
    comp = computation(4, id="a.o", task="cc", inputs=["a.c"], outputs=["a.o"])
    gen, made = computation(1, id="gen.h", task="gen"), computation(2, id="made.h", task="gen")
    reads = ["/proj/a.c", "/proj/local.h", "/proj/gen.h", "/proj/made.h"]
    got = judge(comp, reads, [], Root("/proj"), comp.inputs, comp.outputs,
                {"gen.h": gen, "made.h": made}.get, lambda: {2}, lambda p: True,
                discovered=["local.h", "gen.h", "made.h"])
    assert [f.line() for f in got] == ["  undeclared input gen.h (an output of gen gen.h: nothing orders them)"]


def test_declared_through_a_symlink_or_an_absolute_path_is_declared(tmp_path):
    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    (root / "data" / "real.txt").write_text("x")
    (root / "alias.txt").symlink_to("data/real.txt")
    comp = computation(0, id="o", inputs=["alias.txt", str(root / "abs.txt")], outputs=["o"])
    real = os.path.realpath(root)
    got = judged(comp, [f"{real}/data/real.txt", f"{real}/abs.txt"], [], root=str(root))
    assert got == []


def test_directories_are_never_findings():
    comp = computation(0, id="o", inputs=[], outputs=["o"])
    assert judged(comp, ["/proj/dir"], ["/proj/dir2"], files={"/proj/other"}) == []


def _engine(tmp_path, mode, comps, producer=None):
    return CheckDepsEngine(mode, "/usr/bin/strace", str(tmp_path), comps, (producer or {}).get,
                           str(tmp_path / "root"), print)


def _trace(engine, index, lines):
    with open(engine.trace_file(index), "w") as f:
        f.write(textwrap.dedent(lines).strip() + "\n")


def test_strict_fails_the_run_with_the_first_finding_and_an_undeclared_read_is_not_cacheable(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    (root / "extra.txt").write_text("x")
    (root / "side.txt").write_text("y")
    monkeypatch.chdir(root)
    comps = [computation(0, id="out.txt", inputs=[], outputs=["out.txt"])]
    for mode, ok in (("warn", True), ("strict", False)):
        engine = _engine(tmp_path, mode, comps)
        _trace(engine, 0, f"""
            9 openat(AT_FDCWD<{root}>, "extra.txt", O_RDONLY) = 3<{root}/extra.txt>
            9 openat(AT_FDCWD<{root}>, "side.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{root}/side.txt>
        """)
        outcome = Outcome(0, True, None, 0, 0.0, 1.0)
        said = engine.check(outcome)
        assert said is not None and "undeclared input extra.txt" in said and "undeclared output side.txt" in said
        assert outcome.ok is ok and outcome.uncacheable is not None
        assert outcome.reason == (None if ok else "undeclared input extra.txt")
        assert not os.path.exists(engine.trace_file(0))  # read once, then removed


def test_a_write_alone_is_cacheable_and_a_restore_or_an_untraced_run_is_not_judged(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    (root / "side.txt").write_text("y")
    monkeypatch.chdir(root)
    comps = [computation(0, id="o", outputs=["o"]), computation(1, id="p", outputs=["p"])]
    engine = _engine(tmp_path, "strict", comps)
    _trace(engine, 0, f'9 openat(AT_FDCWD<{root}>, "side.txt", O_WRONLY|O_CREAT, 0666) = 3<{root}/side.txt>')
    outcome = Outcome(0, True, None, 0, 0.0, 1.0)
    assert "undeclared output side.txt" in engine.check(outcome)
    assert outcome.uncacheable is None and outcome.reason == "undeclared output side.txt"
    restored = Outcome(0, True, None, 0, 0.0, 0.0)
    restored.origin = Restored("local cache")
    assert engine.check(restored) is None and restored.ok
    assert engine.check(Outcome(1, True, None, 0, 0.0, 1.0)) is None  # no trace: not traced here


# -- the option --------------------------------------------------------------------------------


def test_the_bare_option_never_takes_the_next_word_as_its_value():
    from farmer.cli.app import cli
    from farmer.cli.quick import choices_attached

    assert choices_attached(["--check-deps", "all", "--", "--check-deps"]) == \
        ["--check-deps=warn", "all", "--", "--check-deps"]
    ctx = cli.commands["build"].make_context("build", ["--check-deps", "all"])
    assert ctx.params["check_deps"] == "warn" and list(ctx.params["targets"]) == ["all"]
    ctx = cli.commands["watch"].make_context("watch", ["--check-deps=strict"])
    assert ctx.params["check_deps"] == "strict"
    assert cli.commands["build"].make_context("build", []).params["check_deps"] is None


@pytest.mark.parametrize(("value", "mode"), [("true", "warn"), ('"strict"', "strict"), ("false", None)])
def test_the_farmfile_key_sets_the_mode(tmp_path, value, mode):
    from farmer.manifest.farmfile import load

    path = tmp_path / "Farmfile"
    path.write_text(f'[farmer]\ncheck_deps = {value}\n\n[task.a]\noutputs = ["a"]\ncmd = "touch a"\n')
    assert load(path).check_deps == mode


def test_a_bad_farmfile_value_is_an_error_naming_the_line(tmp_path):
    from farmer.manifest.farmfile import load

    path = tmp_path / "Farmfile"
    path.write_text('[farmer]\ndefault = ["a"]\ncheck_deps = "yes"\n\n[task.a]\noutputs = ["a"]\ncmd = "touch a"\n')
    with pytest.raises(UsageError, match=r"Farmfile:3: farmer.check_deps must be true, false or \"strict\""):
        load(path)


def test_the_graph_cache_keeps_the_mode(tmp_path):
    from farmer.graph import cache
    from farmer.graph.traversal import traverse
    from farmer.manifest.farmfile import load

    path = tmp_path / "Farmfile"
    text = b'[farmer]\ncheck_deps = "strict"\n\n[task.a]\noutputs = ["a"]\ncmd = "touch a"\n'
    path.write_bytes(text)
    spec = load(path)
    cache.save(tmp_path, path, text, spec, traverse(spec))
    loaded = cache.load(tmp_path, path, text)
    assert loaded is not None and loaded[0].check_deps == "strict"


def test_commands_are_wrapped_but_python_tasks_and_a_manifest_generator_are_not(tmp_path):
    from farmer.graph.graph import NinjaEdge

    comps = [computation(0, action="cc -c a.c"), computation(1, action="x.py", kind="python"),
             computation(2, action="cmake --regenerate-during-build", ninja=NinjaEdge(generator=True))]
    wrap = _engine(tmp_path, "warn", comps).command_wrapper(None)
    argv = ["/bin/sh", "-c", "cc -c a.c"]
    assert wrap(comps[0], argv)[0] == "/usr/bin/strace" and wrap(comps[0], argv)[-3:] == argv
    assert wrap(comps[1], ["python3", "x.py"]) == ["python3", "x.py"]
    assert wrap(comps[2], argv) == argv


class _Finished:
    """An executor whose runs have all ended: `wait` hands back `outcomes` once."""

    load, selector = None, None

    def __init__(self, outcomes):
        self.outcomes = outcomes

    def wait(self, timeout):
        done, self.outcomes = self.outcomes, []
        return done

    def running(self):
        return len(self.outcomes)


def test_an_outcome_waits_until_strace_has_written_its_trace_without_holding_the_build(tmp_path, monkeypatch):
    from farmer.record.checkdeps import CheckingExecutor

    root = tmp_path / "root"
    root.mkdir()
    (root / "extra.txt").write_text("x")
    monkeypatch.chdir(root)
    said = []
    engine = CheckDepsEngine("warn", "/usr/bin/strace", str(tmp_path), [computation(0, id="o", outputs=["o"])],
                             {}.get, str(root), said.append)
    writer = open(engine.trace_file(0), "w")  # noqa: SIM115  strace, still writing
    layer = CheckingExecutor(_Finished([Outcome(0, True, None, 0, 0.0, 1.0)]), engine)
    assert layer.wait(None) == [] and layer.running() == 1
    writer.write(f'9 openat(AT_FDCWD<{root}>, "extra.txt", O_RDONLY) = 3<{root}/extra.txt>\n')
    writer.close()
    [outcome] = layer.wait(None)
    assert outcome.uncacheable is not None and layer.running() == 0
    layer.wait(0)  # the warning comes after the line the hooks print for the run
    assert said and "undeclared input extra.txt" in said[0]
