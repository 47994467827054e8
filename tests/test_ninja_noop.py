"""The no-op of a build.ninja project without the engine (farmer/store/ninja_stamp.py): taken only
while neither the manifest files nor what regenerates the manifest changed, and never in
the way of a build that has something to do. (The builds that check what ran run
in-process, with the fake executor; the no-ops whose imports are counted, by the command
line.)"""

from __future__ import annotations

import os
import signal
import time

from helpers import HEAVY, PROFILE, imported

NINJA = ("-f", "build.ninja")
RACY_S = 0.15  # past farmer's racy window (grains.RACY_NS): stat data vouches for a file

CONFIGURE = """\
    cat > build.ninja <<EOF
    include rules.ninja
    build build.ninja: gen configure.sh
    build out/a.txt: cat a.txt
    build out/b.txt: cat out/a.txt b.txt
    default out/b.txt
    EOF
    """
RULES = "rule gen\n  command = sh configure.sh\n  generator = 1\nrule cat\n  command = cat $in > $out\n"


def settled(project):
    """A project built, then built once more past the racy window: that build stamps it."""
    project.write("configure.sh", CONFIGURE)
    project.write("rules.ninja", RULES)
    project.write("a.txt", "a\n")
    project.write("b.txt", "b\n")
    assert os.system(f"cd {project.root} && sh configure.sh") == 0
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and r.finished_lines() == ["cat out/a.txt", "cat out/b.txt"], r
    time.sleep(RACY_S)
    assert project.build_in_process(*NINJA).finished_lines() == []
    assert project.exists(".farmer/ninja.stamp")
    return project


def fast_noop(project) -> bool:
    r = project.build(*NINJA, env=PROFILE)
    assert r.returncode == 0 and r.finished_lines() == [] and r.summary()["up to date"] == 2, r
    return not ({"farmer.build.ninja", "farmer.manifest.ninja_parser"} | HEAVY) & imported(r)


def test_a_noop_neither_parses_the_manifest_nor_imports_the_engine(project):
    settled(project)
    assert fast_noop(project)
    assert project.last_build()["status"] == "ok"
    assert [t["status"] for t in project.last_build()["tasks"]] == ["up-to-date"] * 2


def test_an_edited_input_is_rebuilt(project):
    settled(project)
    project.write("b.txt", "B\n")
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["cat out/b.txt"] and project.read("out/b.txt") == "a\nB\n", r


def test_a_build_right_after_outputs_were_written_is_a_fast_noop(project):
    """Outputs written within the racy window are vouched for by their content, also where
    their digest covers their mtime (an edge without restat: uptodate.timed_outputs), so
    the builds right after a build that ran something need neither the manifest nor the
    engine; an output edited by hand is still rebuilt."""
    settled(project)
    project.write("b.txt", "B\n")
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["cat out/b.txt"], r
    assert fast_noop(project)  # at once: out/b.txt was written a few milliseconds ago
    assert fast_noop(project)
    project.write("out/b.txt", "tampered\n")
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["cat out/b.txt"] and project.read("out/b.txt") == "a\nB\n", r


def test_an_edited_regeneration_input_remakes_the_manifest(project):
    """The no-op proof covers the default targets only; the manifest's own edge is not one."""
    settled(project)
    project.write("configure.sh", CONFIGURE.replace("cat $in", "cat $in $in") + "# edited\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0, r
    assert r.finished_lines() == ["gen build.ninja"], r  # the commands are in rules.ninja: the same
    project.write("rules.ninja", RULES.replace("cat $in >", "cat $in $in >"))
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["cat out/a.txt", "cat out/b.txt"] and project.read("out/a.txt") == "a\na\n", r


def test_an_edited_included_manifest_is_read(project):
    settled(project)
    project.write("rules.ninja", RULES.replace("cat $in >", "cat $in $in >"))
    r = project.build_in_process(*NINJA)
    assert r.finished_lines() == ["cat out/a.txt", "cat out/b.txt"], r


def test_a_removed_output_is_rebuilt_and_a_failed_build_is_no_proof(project):
    settled(project)
    os.unlink(project.path("out/a.txt"))
    r = project.build_in_process(*NINJA)  # as ninja: what consumes a remade output runs too
    assert r.finished_lines() == ["cat out/a.txt", "cat out/b.txt"], r
    project.write("b.txt", "B\n")
    os.unlink(project.path("a.txt"))
    assert project.build(*NINJA).returncode != 0
    project.write("a.txt", "a\n")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and r.finished_lines() == ["cat out/b.txt"], r


def test_a_build_stopped_once_stamped_leaves_no_proof(project):
    """The stamp is written once the first commands have started, not at the end: a build
    stopped after that leaves it with no proof beside it, and the next build does what was
    left before a no-op goes without the engine."""
    settled(project)
    sleep = project.unique_sleep(30)
    project.write("rules.ninja", RULES.replace("command = cat", f"command = if test -e block; then {sleep}; fi; cat"))
    project.write("block", "")
    time.sleep(RACY_S)  # the manifest files past the racy window: the build stamps them
    os.unlink(project.path(".farmer/ninja.stamp"))
    p = project.popen("build", *NINJA)
    assert project.wait_for(".farmer/ninja.stamp", proc=p)  # while out/a.txt's command sleeps
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 130, (out, err)
    assert not project.exists(".farmer/noop.stats")  # no proof: the stamp vouches for nothing
    project.remove("block")
    r = project.build_in_process(*NINJA)
    assert r.returncode == 0 and len(r.finished_lines()) == 2 and project.read("out/b.txt") == "a\nb\n", r
    time.sleep(RACY_S)
    assert project.build_in_process(*NINJA).finished_lines() == []  # (its outputs just written: the full way)
    time.sleep(RACY_S)
    assert fast_noop(project)
