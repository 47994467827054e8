"""`farmer ninja` / `farmer-ninja`: ninja's command line and what ninja prints where scripts
read it (farmer/cli/ninja.py, farmer/report/ninja_status.py), and `farmer build`'s -v,
--quiet and -k N."""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, run_farmer

from farmer.cli import ninja as front
from farmer.report.ninja_status import format_status

# Three independent edges that fail (each after its own marker), and one that works.
MANIFEST = """\
rule sh
  command = $cmd
  description = SH $out
build ok.txt: sh
  cmd = echo ok > ok.txt
build bad1: sh
  cmd = touch ran-bad1; exit 3
build bad2: sh
  cmd = touch ran-bad2; exit 3
build bad3: sh
  cmd = touch ran-bad3; exit 3
build src.o: sh src.c
  cmd = cp src.c src.o
default ok.txt
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "build.ninja").write_text(MANIFEST)
    (tmp_path / "src.c").write_text("int x;\n")
    return tmp_path


def ninja_script(where: Path) -> Path:
    """An executable `farmer-ninja` running this checkout (as bin/farmer-ninja does once
    installed), for CMake's CMAKE_MAKE_PROGRAM and Meson's NINJA."""
    script = where / "farmer-ninja"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m farmer ninja \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def needs(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is not installed; .ci/run installs it")
        pytest.skip(f"needs {tool}")
    return path


# -- the command line ------------------------------------------------------------------

def test_flags_read_as_getopt_reads_them():
    args = front.parse(["-C", "out", "-j8", "all", "-k", "0", "-nv", "-l2.5", "--quiet", "-d", "explain",
                        "-f", "x.ninja", "lib.a"])
    assert (args.directory, args.jobs, args.keep_going, args.dry_run, args.verbose, args.load,
            args.quiet, args.explain, args.file, args.targets) == \
        ("out", 8, 0, True, True, 2.5, True, True, "x.ninja", ["all", "lib.a"])
    assert front.parse(["-j", "0"]).jobs == 4096  # 0: no limit
    tool = front.parse(["-C", "b", "-t", "compdb", "-x", "cc", "-v"])
    assert (tool.tool, tool.tool_args, tool.verbose) == ("compdb", ["-x", "cc", "-v"], False)
    assert front.parse(["--", "-odd"]).targets == ["-odd"]
    assert front.parse(["--version"]).done == front.NINJA_VERSION + "\n"


@pytest.mark.parametrize("argv, message", [
    (["-k", "x"], "-k parameter not numeric; did you mean -k 0?"),
    (["-j", "-1"], "invalid -j parameter"),
    (["-d", "nope"], "unknown debug setting 'nope'"),
    (["-w", "nope"], "unknown warning flag 'nope'"),
    (["-x"], "invalid option -- 'x'"),
    (["-j"], "option requires an argument -- 'j'"),
])
def test_what_ninja_refuses_is_refused(argv, message):
    with pytest.raises(front.Usage, match=re.escape(message)):
        front.parse(argv)


def test_status_format_fills_ninjas_placeholders():
    assert format_status("[%f/%t] ", 3, 10, 2, 1, 4.0) == "[2/10] "
    assert format_status("%s %r %u %p %% %e|", 3, 10, 2, 1, 4.0) == "3 1 7  20% % 4.000|"
    assert format_status("%w %o %q", 0, 0, 0, 0, 65.0) == "01:05 0.0 %q"


# -- builds ----------------------------------------------------------------------------

def test_version_and_usage_exit_as_ninja(tree):
    r = run_farmer(tree, "ninja", "--version")
    assert (r.returncode, r.stdout) == (0, front.NINJA_VERSION + "\n")
    r = run_farmer(tree, "ninja", "-h")
    assert r.returncode == 1 and "usage: farmer-ninja" in r.stderr
    r = run_farmer(tree, "ninja", "-f", "missing.ninja")
    assert (r.returncode, r.stderr) == (1, "ninja: error: loading 'missing.ninja': No such file or directory\n")
    r = run_farmer(tree, "ninja", "-w", "dupbuild=err")
    assert r.returncode == 0 and "ninja: warning: deprecated warning 'dupbuild'" in r.stderr


def test_the_installed_script_is_farmer_ninja(tree):
    import subprocess

    from conftest import farmer_env

    r = subprocess.run([sys.executable, str(REPO / "bin" / "farmer-ninja"), "--version"], cwd=tree,
                       capture_output=True, text=True, env=farmer_env(), check=False)
    assert (r.returncode, r.stdout) == (0, front.NINJA_VERSION + "\n")
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["script-files"]
    assert "bin/farmer-ninja" in scripts


def test_status_lines_then_no_work_to_do(tree):
    r = run_farmer(tree, "ninja", "-C", ".", env={"NINJA_STATUS": "<%f of %t> "})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["ninja: Entering directory `.'", "<1 of 1> SH ok.txt"]
    r = run_farmer(tree, "ninja")
    assert (r.returncode, r.stdout) == (0, "ninja: no work to do.\n")  # (the no-op path)
    r = run_farmer(tree, "ninja", "--quiet")
    assert (r.returncode, r.stdout) == (0, "")


def test_ninja_counts_what_it_runs(tree):
    assert run_farmer(tree, "ninja", "ok.txt", "src.o").returncode == 0
    (tree / "src.c").write_text("int changed;\n")
    r = run_farmer(tree, "ninja", "ok.txt", "src.o")
    assert r.stdout == "[1/1] SH src.o\n", r  # ninja's count: the edges to run, not the 2 targets


def test_verbose_prints_the_command_and_caret_names_the_object(tree):
    r = run_farmer(tree, "ninja", "-v", "src.c^")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[1/1] cp src.c src.o\n"


def test_a_failure_as_ninja_reports_it(tree):
    r = run_farmer(tree, "ninja", "-j1", "bad1")
    assert r.returncode == 1
    assert r.stdout.splitlines() == ["[1/1] SH bad1", "FAILED: bad1", "touch ran-bad1; exit 3",
                                     "ninja: build stopped: subcommand failed."]


@pytest.mark.parametrize("k, failures", [("1", 1), ("2", 2), ("0", 3)])
def test_k_n_stops_at_the_nth_failure(tree, k, failures):
    r = run_farmer(tree, "ninja", "-j1", "-k", k, "bad1", "bad2", "bad3")
    assert r.returncode == 1
    assert r.stdout.count("FAILED: ") == failures
    assert len(list(tree.glob("ran-bad*"))) == failures


def test_farmer_build_takes_k_n_verbose_and_quiet(tree):
    r = run_farmer(tree, "build", "-j1", "-k", "2", "bad1", "bad2", "bad3")
    assert r.returncode == 1 and r.stdout.count("FAILED: ") == 2
    r = run_farmer(tree, "build", "-k", "ok.txt", "src.o")  # a bare -k: no limit; the target after it stays one
    assert r.returncode == 0, r.stderr
    (tree / "src.c").write_text("int y;\n")
    r = run_farmer(tree, "build", "-v", "--explain", "src.o")  # (click's path)
    assert "[1/1] cp src.c src.o" in r.stdout.splitlines()
    (tree / "src.c").write_text("int z;\n")
    r = run_farmer(tree, "build", "--quiet", "src.o")
    assert not re.search(r"^\[\d+/\d+\]", r.stdout, re.MULTILINE) and "farmer: ran 1" in r.stdout


def test_farmer_build_in_a_build_directory_uses_its_build_ninja(tree):
    r = run_farmer(tree, "build")  # no Farmfile anywhere up: build.ninja here
    assert r.returncode == 0, r.stderr
    assert (tree / "ok.txt").read_text() == "ok\n"


# -- the tools, against ninja's own output ---------------------------------------------

TOOL_CALLS = ["targets", "targets all", "targets rule", "targets rule cc", "targets depth 2",
              "commands app", "commands -s app", "inputs app", "rules", "rules -d", "query main.o",
              "deps", "missingdeps", "compdb", "compdb -x cc", "graph app"]


@pytest.fixture
def c_tree(tmp_path: Path) -> Path:
    (tmp_path / "build.ninja").write_text(textwrap.dedent("""\
        rule cc
          command = cc -MD -MF $out.d -c $in -o $out
          depfile = $out.d
          deps = gcc
          description = CC $out
        rule gen
          command = echo '#define X 0' > $out
        rule link
          command = cc @$out.rsp -o $out
          rspfile = $out.rsp
          rspfile_content = $in
        build gen.h: gen
        build main.o: cc main.c
        build app: link main.o
        build all: phony app
        default app
        """))
    (tmp_path / "main.c").write_text('#include "gen.h"\nint main(void) { return X; }\n')
    return tmp_path


def test_tools_print_what_ninja_prints(c_tree):
    ninja = needs("ninja")
    needs("cc")
    import subprocess

    subprocess.run([ninja, "gen.h", "app"], cwd=c_tree, check=True, capture_output=True)
    for call in TOOL_CALLS:
        theirs = subprocess.run([ninja, "-t", *call.split()], cwd=c_tree, capture_output=True, text=True, check=False)
        ours = run_farmer(c_tree, "ninja", "-t", *call.split())
        if call.startswith("graph"):  # the same nodes and edges, named differently (ninja: addresses)
            def drawn(text: str) -> list[str]:
                return sorted(re.sub(r'"(0x[0-9a-f]+|[ne]\d+)"', "N", text).splitlines())

            assert drawn(ours.stdout) == drawn(theirs.stdout), call
            continue
        assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout), call
    missing = run_farmer(c_tree, "ninja", "-t", "missingdeps")
    assert missing.returncode == 3 and "Missing dep: main.o uses gen.h (generated by gen)" in missing.stdout


def test_clean_and_cleandead(c_tree):
    needs("cc")
    assert run_farmer(c_tree, "ninja", "app", "gen.h").returncode == 0
    r = run_farmer(c_tree, "ninja", "-t", "clean", "app")
    assert r.stdout == "Cleaning... 2 files.\n" and not (c_tree / "main.o").exists()
    assert run_farmer(c_tree, "ninja", "app").returncode == 0
    manifest = c_tree / "build.ninja"
    manifest.write_text(manifest.read_text().replace("build app: link main.o", "build app2: link main.o")
                        .replace("phony app", "phony app2").replace("default app", "default app2"))
    r = run_farmer(c_tree, "build", "-f", "build.ninja")
    assert r.returncode == 0, r.stderr
    r = run_farmer(c_tree, "clean", "--dead")
    assert r.returncode == 0, r.stderr
    assert not (c_tree / "app").exists() and (c_tree / "app2").exists()


# -- .ninja_log and .ninja_deps: one build directory, both tools ------------------------

def test_murmur64_is_ninjas_command_hash():
    from farmer.store.ninja_log import murmur64

    # ninja 1.11's .ninja_log lines for these commands
    assert murmur64(b"gcc -MD -MF main.o.d -c main.c -o main.o") == 0xB27F112906FA08AA
    assert murmur64(b"gcc main.o -o app") == 0xF14676D426CE47F1


@pytest.mark.parametrize("command, logged", [
    (":", 0xA2DA22321247804B), ("pwd", 0xE3992A528465D258), ("true", 0x90A52A5DCA2ED61),
    ("touch o5 #", 0x29209A8142902F98), ("gcc main.o -o app", 0x9C578ED074933C3),
    ("touch o49 #" + "x" * 38, 0x7BEC200E010688A7), ("touch o97 #" + "x" * 86, 0xB46D2DF7BD08683B),
    ("touch o145 #" + "x" * 133, 0xE2D693823669F2CB), ("touch o300 #" + "x" * 288, 0x8028038F0FD4786F),
])
def test_rapidhash_is_ninja_113s_command_hash(command, logged):
    from farmer.store.ninja_log import command_hash

    assert command_hash(7, command) == logged  # from ninja 1.13.2's .ninja_log v7


def test_deps_log_written_is_read_back(tmp_path):
    from farmer.store import ninja_log

    path = str(tmp_path / ".ninja_deps")
    ninja_log.append_deps(path, [("a.o", 5 << 33, ["a.c", "h.h"]), ("b.o", 7, ["b.c", "h.h"])])
    ninja_log.append_deps(path, [("a.o", 9, ["a.c"])])
    assert ninja_log.read_deps(path) == {"a.o": (9, ["a.c"]), "b.o": (7, ["b.c", "h.h"])}
    with open(path, "ab") as f:
        f.write(b"\x10\x00")  # a record cut short, as a killed ninja leaves it
    assert ninja_log.read_deps(path)["b.o"] == (7, ["b.c", "h.h"])


def _ran(result) -> int:
    return int(re.search(r"ran (\d+),", result.stdout).group(1))


@pytest.mark.parametrize("builddir", ["", "logs"])
def test_a_tree_ninja_built_is_adopted_and_ninja_continues_farmers(c_tree, builddir):
    import subprocess

    ninja = needs("ninja")
    needs("cc")
    if builddir:  # ninja keeps its logs in $builddir: so does farmer
        manifest = c_tree / "build.ninja"
        manifest.write_text(f"builddir = {builddir}\n" + manifest.read_text())
    run = lambda *a: subprocess.run([ninja, *a], cwd=c_tree, capture_output=True, text=True, check=True)
    run("gen.h", "app")
    first = run_farmer(c_tree, "build", "gen.h", "app")
    assert first.returncode == 0 and _ran(first) == 0, first.stdout  # nothing ninja built runs again
    (c_tree / "main.c").write_text('#include "gen.h"\nint main(void) { return X + 0; }\n')
    run("app")  # ninja rebuilds main.o and app
    r = run_farmer(c_tree, "build", "app")
    assert _ran(r) == 0, r.stdout
    (c_tree / "gen.h").write_text("#define X 0 /* by hand */\n")  # newer than what ninja built
    r = run_farmer(c_tree, "build", "app")
    # main.o, through its deps; the object is byte-identical, so the link is cut off
    assert _ran(r) == 1 and "CC main.o" in r.stdout, r.stdout
    # farmer's run is in ninja's logs: ninja does not recompile, and relinks by its mtime rule
    assert run("-d", "explain", "app").stdout.splitlines()[-1].endswith("app.rsp -o app")
    assert run("-d", "explain", "app").stdout == "ninja: no work to do.\n"
    assert "main.o: #deps" in run("-t", "deps", "main.o").stdout
    assert "main.o: #deps" in run_farmer(c_tree, "ninja", "-t", "deps", "main.o").stdout
    assert (c_tree / builddir / ".ninja_log").is_file()


def test_a_noop_farmer_ninja_imports_neither_click_nor_the_engine(tree):
    from helpers import HEAVY, PROFILE, imported

    assert run_farmer(tree, "ninja").returncode == 0
    time.sleep(0.15)  # past farmer's racy window: this build stamps the manifest, the next is quick
    assert run_farmer(tree, "ninja").stdout == "ninja: no work to do.\n"
    r = run_farmer(tree, "ninja", env=PROFILE)
    assert r.stdout == "ninja: no work to do.\n", r
    modules = imported(r)
    assert "farmer.cli.ninja" in modules and not HEAVY & modules, sorted(HEAVY & modules)


def test_a_log_ninja_rewrote_does_not_hide_a_change_farmer_sees(c_tree):
    """`ninja -t recompact` (CMake runs it at every configure) rewrites .ninja_log: every
    line looks new, but an edge farmer built and whose outputs are as farmer left them keeps
    farmer's judgement, by content. A source edited and dated back, which ninja cannot see,
    is still rebuilt."""
    import subprocess

    ninja = needs("ninja")
    needs("cc")
    assert run_farmer(c_tree, "build", "gen.h", "app").returncode == 0
    main_c = c_tree / "main.c"
    before = os.stat(c_tree / "main.o").st_mtime_ns - 10**9
    main_c.write_text('#include "gen.h"\nint main(void) { return X + 1; }\n')
    os.utime(main_c, ns=(before, before))  # older than main.o: ninja would not rebuild it
    subprocess.run([ninja, "-t", "recompact"], cwd=c_tree, check=True, capture_output=True)
    r = run_farmer(c_tree, "build", "app")
    assert r.returncode == 0 and _ran(r) == 2, r.stdout  # main.o and app, by content
    assert subprocess.run([str(c_tree / "app")], check=False).returncode == 1


def test_a_dry_run_prints_ninjas_status_lines_and_runs_nothing(c_tree, tmp_path_factory):
    import subprocess

    ninja = needs("ninja")
    twin = tmp_path_factory.mktemp("twin")
    shutil.copytree(c_tree, twin, dirs_exist_ok=True)
    env = {**os.environ, "NINJA_STATUS": "<%s/%t %r %u> "}
    for flags in ([], ["-v"]):
        theirs = subprocess.run([ninja, "-n", *flags, "gen.h", "app"], cwd=twin, env=env, capture_output=True,
                                text=True, check=True)
        ours = run_farmer(c_tree, "ninja", "-n", *flags, "gen.h", "app", env={"NINJA_STATUS": env["NINJA_STATUS"]})
        assert ours.returncode == 0 and ours.stdout == theirs.stdout, (ours, theirs.stdout)
    assert not (c_tree / "main.o").exists() and not (c_tree / "app").exists()
    assert run_farmer(c_tree, "ninja", "-n", "--quiet", "app").stdout == ""
    assert run_farmer(c_tree, "ninja", "gen.h").returncode == 0  # (main.o's command reads it: first)
    assert run_farmer(c_tree, "ninja", "app").returncode == 0
    r = run_farmer(c_tree, "ninja", "-n", "app")
    assert r.returncode == 0 and r.stdout == "ninja: no work to do.\n", r


def test_d_stats_prints_ninjas_table_and_keep_modes_keep_files(c_tree, tmp_path_factory):
    import subprocess

    ninja = needs("ninja")
    twin = tmp_path_factory.mktemp("twin")
    shutil.copytree(c_tree, twin, dirs_exist_ok=True)
    theirs = subprocess.run([ninja, "-d", "stats", "-n", "gen.h", "app"], cwd=twin, capture_output=True,
                            text=True, check=True).stdout
    assert run_farmer(c_tree, "ninja", "gen.h").returncode == 0  # (main.o's command reads it: first)
    r = run_farmer(c_tree, "ninja", "-d", "stats", "-d", "keepdepfile", "-d", "keeprsp", "app")
    assert r.returncode == 0, r
    head = next(line for line in theirs.splitlines() if line.startswith("metric"))
    table = r.stdout.splitlines()[2:]  # after the two status lines
    assert [c.strip() for c in table[0].split("\t")] == [c.strip() for c in head.split("\t")], (r.stdout, theirs)
    rows = {line.split("\t")[0].strip(): line.split("\t") for line in table[1:]}
    assert int(rows["command"][1]) == 2 and float(rows["farmer build"][3]) > 0, r.stdout
    assert (c_tree / "main.o.d").exists() and (c_tree / "app.rsp").exists()  # kept
    for path in ("main.o", "main.o.d", "app.rsp"):
        os.unlink(c_tree / path)
    assert run_farmer(c_tree, "ninja", "app").returncode == 0
    assert not (c_tree / "main.o.d").exists() and not (c_tree / "app.rsp").exists()  # ninja's default
