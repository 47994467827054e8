"""The local output cache in whole builds (SPEC §5, docs/cache.md): hits and misses, depfile
variants, a second checkout, worlds, what is never cached, eviction, damage and an unusable
cache, two farmers at once. Every test's cache is the temporary one the autouse
`private_cache` fixture names in FARMER_CACHE_DIR. Builds whose decisions alone are checked
run in-process with the fake executor (tests/fakes.py); the command line runs the rest: its
flags and environment, a build that must not hang, a compile whose header is edited just
before the next build (in-process, the build starts within farmer's racy window and does
not store it), builds by a user whom file modes bind."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time

import pytest
from conftest import Project
from helpers import can_drop_dac, drop_dac, mounted_tmpfs

COPY = """
[cache]

[task.copy]
foreach = "src/{name}.txt"
inputs = ["src/{name}.txt"]
outputs = ["out/{name}.txt"]
cmd = "cat {inputs} > {outputs}"

[task.join]
inputs = ["@copy"]
outputs = ["out/all.txt"]
cmd = "cat {inputs} > {outputs} && echo joined"
"""


def copy_project(project: Project) -> Project:
    project.farmfile(COPY)
    for name in "abc":
        project.write(f"src/{name}.txt", f"{name}\n")
    return project


def statuses(project: Project) -> set[str]:
    return set(project.statuses().values())


def clean(project: Project) -> None:
    assert project.farmer("clean").returncode == 0
    assert not project.exists("out/all.txt")


def entries(cache_dir, immutable: bool = False) -> int:
    """The entries in the cache; `immutable`: in a cache no one can write, which SQLite
    then reads without its -shm (a read-only mount, a full disk)."""
    path = os.path.join(cache_dir, "ac.db")
    db = sqlite3.connect(f"file:{path}?immutable=1", uri=True) if immutable else sqlite3.connect(path)
    try:
        return db.execute("SELECT COUNT(*) FROM entry").fetchone()[0]
    finally:
        db.close()


def blobs(cache_dir) -> list[str]:
    cas = os.path.join(cache_dir, "cas")
    return [os.path.join(cas, d, f) for d in sorted(os.listdir(cas)) for f in sorted(os.listdir(os.path.join(cas, d)))]


# -- hits and misses ------------------------------------------------------------------------

def test_a_clean_build_is_restored_and_then_a_no_op(project, private_cache):
    copy_project(project)
    first = project.build_in_process()
    assert first.returncode == 0 and first.summary()["ran"] == 4, first
    assert stat.S_IMODE(os.stat(private_cache).st_mode) == 0o700
    assert entries(private_cache) == 4
    clean(project)
    r = project.build_in_process("--explain")
    assert r.returncode == 0, r
    assert r.summary() == {"ran": 0, "up to date": 0, "cached": 4, "failed": 0, "interrupted": 0, "skipped": 0}, r
    assert project.read("out/all.txt") == "a\nb\nc\n"
    assert "restored from the local cache" in r.stdout
    tasks = project.tasks()
    assert {t["status"] for t in tasks.values()} == {"cached"}
    assert {t["cache"] for t in tasks.values()} == {"local"}
    assert {t["executor"] for t in tasks.values()} == {None}
    assert tasks["out/all.txt"]["reason"] == "never built"
    assert "joined" in project.read(".farmer/logs/out%2Fall.txt.log")  # its log is back too
    again = project.build_in_process()  # a trace as if it had run: nothing to do
    assert again.summary()["ran"] == 0 and again.summary()["cached"] == 0, again
    assert statuses(project) == {"up-to-date"}


def test_an_edit_misses_and_putting_it_back_hits(project):
    copy_project(project)
    assert project.build_in_process().returncode == 0
    project.write("src/b.txt", "b, edited\n")
    r = project.build_in_process()
    assert r.summary()["ran"] == 2 and r.summary()["cached"] == 0, r  # b, then all
    assert project.tasks()["out/b.txt"]["executor"] == "local"
    project.write("src/b.txt", "b\n")
    r = project.build_in_process()
    assert r.summary()["cached"] == 2 and r.summary()["ran"] == 0, r
    assert project.read("out/all.txt") == "a\nb\nc\n"


def test_early_cutoff_holds_after_a_restore(project):
    """A restored output identical to the one on disk does not rerun its consumers."""
    project.farmfile("""
        [cache]
        [task.first]
        inputs = ["in.txt"]
        outputs = ["out/first.txt"]
        cmd = "cut -c1 in.txt > out/first.txt"
        [task.second]
        inputs = ["out/first.txt"]
        outputs = ["out/second.txt"]
        cmd = "cat out/first.txt out/first.txt > out/second.txt"
    """)
    project.write("in.txt", "ab\n")
    assert project.build_in_process().returncode == 0
    project.write("in.txt", "ac\n")
    assert project.build_in_process().summary()["ran"] == 1  # first ran, came out the same: cutoff
    project.write("in.txt", "ab\n")
    r = project.build_in_process()
    assert r.summary() == {"ran": 0, "up to date": 1, "cached": 1, "failed": 0, "interrupted": 0, "skipped": 0}, r


def test_the_executable_bit_comes_back(project):
    project.farmfile("""
        [cache]
        [task.tool]
        inputs = ["tool.sh"]
        outputs = ["bin/tool"]
        cmd = "cp tool.sh bin/tool && chmod 755 bin/tool"
        [task.use]
        inputs = ["bin/tool"]
        outputs = ["out.txt"]
        cmd = "./bin/tool > out.txt"
    """)
    project.write("tool.sh", "#!/bin/sh\necho made by the tool\n")
    assert project.build_in_process().returncode == 0
    clean(project)
    r = project.build_in_process()
    assert r.summary()["cached"] == 2, r
    assert os.access(project.path("bin/tool"), os.X_OK)
    assert subprocess.run([str(project.path("bin/tool"))], capture_output=True, text=True).stdout == "made by the tool\n"


def test_a_second_checkout_elsewhere_hits(project, tmp_path):
    copy_project(project)
    assert project.build_in_process().returncode == 0
    other = Project(tmp_path / "somewhere" / "else" / "checkout")
    shutil.copytree(project.root, other.root, ignore=shutil.ignore_patterns(".farmer", "out"))
    r = other.build()
    assert r.returncode == 0 and r.summary()["cached"] == 4 and r.summary()["ran"] == 0, r
    assert other.read("out/all.txt") == "a\nb\nc\n"


def test_depfile_variants(project):
    """The two-level key: a header edit misses; each header version hits its own variant."""
    project.farmfile("""
        [cache]
        [task.objects]
        foreach = "src/{stem}.c"
        inputs = ["src/{stem}.c"]
        outputs = ["build/{stem}.o"]
        depfile = "build/{stem}.d"
        cmd = "gcc -MD -MF {depfile} -c {inputs} -o {outputs}"
    """)
    project.write("src/a.c", '#include "a.h"\nint a(void) { return A; }\n')
    project.write("src/a.h", "#define A 1\n")
    assert project.build().summary()["ran"] == 1
    one = project.path("build/a.o").read_bytes()
    project.write("src/a.h", "#define A 2\n")
    r = project.build()
    assert r.summary()["ran"] == 1 and r.summary()["cached"] == 0, r
    two = project.path("build/a.o").read_bytes()
    assert one != two
    project.write("src/a.h", "#define A 1\n")
    r = project.build()
    assert r.summary()["cached"] == 1, r
    assert project.path("build/a.o").read_bytes() == one
    assert "a.h" in project.read("build/a.d")  # the depfile came back with it
    project.write("src/a.h", "#define A 2\n")  # the second variant, still there
    r = project.build()
    assert r.summary()["cached"] == 1, r
    assert project.path("build/a.o").read_bytes() == two
    assert project.build().summary()["cached"] == 0  # the restored trace names the header


def test_the_program_and_listed_variables_are_keyed(project):
    project.farmfile("""
        [cache]
        env = ["GREETING"]
        [task.greet]
        inputs = ["in.txt"]
        outputs = ["out.txt"]
        cmd = "tool in.txt > out.txt"
    """)
    project.write("in.txt", "x\n")
    project.write("bin/tool", '#!/bin/sh\necho "v1 $GREETING"\n')
    project.path("bin/tool").chmod(0o755)
    env = {"PATH": f"{project.root / 'bin'}:{os.environ['PATH']}", "GREETING": "hello"}
    assert project.build(env=env).summary()["ran"] == 1
    clean(project)
    assert project.build(env={**env, "UNLISTED": "1"}).summary()["cached"] == 1
    clean(project)
    r = project.build(env={**env, "GREETING": "bonjour"})
    assert r.summary()["ran"] == 1 and project.read("out.txt") == "v1 bonjour\n", r
    project.write("bin/tool", '#!/bin/sh\necho "v2 $GREETING"\n')  # a tool upgrade
    clean(project)
    r = project.build(env=env)
    assert r.summary()["ran"] == 1 and project.read("out.txt") == "v2 hello\n", r


def test_world_tasks_are_cached_by_the_world_fingerprint(project):
    project.farmfile("""
        [cache]
        [world.w]
        setup = ["FACTOR = 2"]
        [task.scale]
        world = "w"
        inputs = ["scale.py", "n.txt"]
        outputs = ["out/n.txt"]
        python = "scale.py"
    """)
    project.write("scale.py", "open('out/n.txt', 'w').write(str(FACTOR * int(open('n.txt').read())))\n")
    project.write("n.txt", "21")
    assert project.build_in_process().summary()["ran"] == 1
    clean(project)
    r = project.build_in_process()
    assert r.summary()["cached"] == 1 and project.read("out/n.txt") == "42", r
    project.farmfile(project.read("Farmfile").replace("FACTOR = 2", "FACTOR = 3"))
    clean(project)
    r = project.build_in_process()
    assert r.summary()["ran"] == 1 and project.read("out/n.txt") == "63", r


# -- never cached -----------------------------------------------------------------------------

def test_cache_false_always_failures_and_changed_inputs_are_never_stored(project, private_cache):
    project.farmfile("""
        [cache]
        [task.volatile]
        inputs = ["in.txt"]
        outputs = ["out/volatile.txt"]
        cache = false
        cmd = "cp in.txt out/volatile.txt"
        [task.every]
        inputs = ["in.txt"]
        outputs = ["out/every.txt"]
        always = true
        cmd = "cp in.txt out/every.txt"
        [task.racy]
        inputs = ["racy.txt"]
        outputs = ["out/racy.txt"]
        cmd = "cp racy.txt out/racy.txt && echo more >> racy.txt"
        [task.broken]
        inputs = ["in.txt"]
        outputs = ["out/broken.txt"]
        cmd = "cp in.txt out/broken.txt && exit 3"
        [task.all]
        inputs = ["out/volatile.txt", "out/every.txt"]
    """)
    project.write("in.txt", "x\n")
    project.write("racy.txt", "r\n")
    r = project.build_in_process("-k")
    assert r.returncode == 1 and "racy.txt changed while" in r.output, r
    assert entries(private_cache) == 0
    clean(project)
    project.write("racy.txt", "r\n")
    r = project.build_in_process("-k")
    assert project.statuses() == {"out/volatile.txt": "ran", "out/every.txt": "ran", "out/racy.txt": "ran",
                                  "out/broken.txt": "failed", ":all": "up-to-date"}, r


def test_no_cache_and_the_environment_switch(project, private_cache):
    copy_project(project)
    assert project.build("--no-cache").summary()["ran"] == 4
    assert not os.path.exists(private_cache)
    project.farmfile(COPY.replace("[cache]", ""))
    assert project.build(env={"FARMER_CACHE": "1"}).summary()["ran"] == 0  # up to date
    clean(project)
    assert project.build(env={"FARMER_CACHE": "1"}).summary()["ran"] == 4
    clean(project)
    assert project.build("--cache").summary()["cached"] == 4
    clean(project)
    assert project.build(env={"FARMER_CACHE": "0"}).summary()["ran"] == 4
    where = project.root / "elsewhere"
    clean(project)
    assert project.build("--cache", "--cache-dir", where).summary()["ran"] == 4
    assert entries(where) == 4


# -- size, eviction, the commands ---------------------------------------------------------------

def test_stats_gc_clear_and_the_size_limit(project, private_cache):
    project.farmfile("""
        [cache]
        max_size = "250KB"
        [task.big]
        foreach = {n = ["1", "2", "3", "4"]}
        inputs = ["in.txt"]
        outputs = ["out/big-{n}.bin"]
        cmd = "head -c 100000 /dev/urandom > {outputs}"
    """)
    project.write("in.txt", "x\n")
    r = project.build()
    assert r.returncode == 0, r
    # 400 kB stored, over the limit: the build evicted the oldest down to 90 % of it
    r = project.farmer("cache", "stats")
    assert r.returncode == 0, r
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines())
    assert lines["cache"] == str(private_cache) and lines["enabled here"] == "on"
    assert int(lines["entries"]) == 2 and int(lines["bytes"].split()[0]) == 200000, r.stdout
    assert lines["limit"].startswith("250000 ")
    r = project.farmer("cache", "gc", "--max-size", "150k")
    assert r.returncode == 0 and "evicted 1 entries" in r.stdout, r
    assert entries(private_cache) == 1 and len(blobs(private_cache)) == 1
    assert "--max-size 'lots'" in project.farmer("cache", "gc", "--max-size", "lots").stderr
    r = project.farmer("cache", "clear")
    assert r.returncode == 0 and "1 entries removed" in r.stdout, r
    assert entries(private_cache) == 0 and blobs(private_cache) == []


# -- damage and an unusable cache ----------------------------------------------------------------

def damage_inline(cache_dir) -> None:
    """Change one byte of every file kept inside an entry (the entry still reads)."""
    from farmer.record.cache.entry import Entry

    db = sqlite3.connect(os.path.join(cache_dir, "ac.db"), isolation_level=None)
    try:
        for key, data in db.execute("SELECT key, data FROM entry").fetchall():
            entry = Entry.loads(key, data)
            entry.inline = {d: bytes([b[0] ^ 1]) + b[1:] for d, b in entry.inline.items()}
            db.execute("UPDATE entry SET data=? WHERE key=?", (entry.dumps(), key))
    finally:
        db.close()


@pytest.mark.parametrize("size", ["small", "big"])  # kept in the entry, in a blob
def test_a_damaged_or_missing_blob_is_a_miss_with_one_warning(project, private_cache, size):
    copy_project(project)
    if size == "big":
        for name in "abc":
            project.write(f"src/{name}.txt", f"{name}\n" * 20000)
    expected = project.read("src/a.txt") + project.read("src/b.txt") + project.read("src/c.txt")
    assert project.build_in_process().returncode == 0
    if size == "small":
        damage_inline(private_cache)
    else:
        for blob in blobs(private_cache):
            os.chmod(blob, 0o600)
            with open(blob, "r+b") as f:
                f.truncate(5)
    clean(project)
    r = project.build_in_process()
    assert r.returncode == 0 and r.summary()["ran"] == 4, r
    assert r.output.count("warning: cache") == 1, r
    assert project.read("out/all.txt") == expected
    clean(project)
    assert project.build_in_process().summary()["cached"] == 4  # stored afresh
    if size == "big":
        for blob in blobs(private_cache):
            os.unlink(blob)
        clean(project)
        r = project.build_in_process()
        assert r.returncode == 0 and r.summary()["ran"] == 4 and r.output.count("warning: cache") == 1, r
        assert project.read("out/all.txt") == expected


def test_an_unwritable_cache_is_one_warning(project, tmp_path):
    copy_project(project)
    (tmp_path / "a-file").write_text("in the cache's way\n")
    r = project.build(env={"FARMER_CACHE_DIR": str(tmp_path / "a-file" / "cache")})
    assert r.returncode == 0 and r.summary()["ran"] == 4, r
    warnings = [line for line in r.output.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "a-file" in warnings[0], r
    assert project.read("out/all.txt") == "a\nb\nc\n"


def test_a_locked_cache_is_one_warning(project, private_cache):
    copy_project(project)
    assert project.build_in_process().returncode == 0
    clean(project)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('PRAGMA locking_mode=EXCLUSIVE'); db.execute('BEGIN EXCLUSIVE')\n"
        "db.execute('DELETE FROM meta WHERE key=\"nothing\"')\n"
        "print('held', flush=True); time.sleep(60)\n"), os.path.join(private_cache, "ac.db")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        r = project.build_in_process()
        assert r.returncode == 0 and r.summary()["ran"] == 4, r
        assert r.output.count("warning: cache") == 1, r
    finally:
        holder.kill()
        holder.wait()
    assert project.read("out/all.txt") == "a\nb\nc\n"


def test_a_full_cache_disk_skips_storing_with_one_warning(project, tmp_path):
    with mounted_tmpfs(tmp_path / "tiny", "256k") as mnt:
        project.farmfile("""
            [cache]
            [task.big]
            foreach = {n = ["1", "2", "3"]}
            inputs = ["in.txt"]
            outputs = ["out/big-{n}.bin"]
            cmd = "head -c 200000 /dev/zero > {outputs}"
        """)
        project.write("in.txt", "x\n")
        r = project.build("-j", "1", env={"FARMER_CACHE_DIR": str(mnt / "cache")})
        assert r.returncode == 0 and r.summary()["ran"] == 3, r
        assert r.output.count("warning: cache") == 1 and "no room" in r.output, r
        assert all(project.path(f"out/big-{n}.bin").stat().st_size == 200000 for n in "123")


# -- two farmers at once -----------------------------------------------------------------------

def test_two_checkouts_building_at_once_share_the_cache(tmp_path):
    checkouts = []
    for name in ("one", "two"):
        p = Project(tmp_path / name)
        p.root.mkdir()
        p.farmfile(COPY.replace('foreach = "src/{name}.txt"', 'foreach = "src/{name}.txt"\ncost = 0.05'))
        for k in range(30):
            p.write(f"src/f{k}.txt", f"file {k}\n")
        checkouts.append(p)
    procs = [p.popen("build", "-j", "2") for p in checkouts]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        assert "warning" not in out + err
    third = Project(tmp_path / "three")
    shutil.copytree(checkouts[0].root, third.root, ignore=shutil.ignore_patterns(".farmer", "out"))
    r = third.build()
    assert r.returncode == 0 and r.summary()["cached"] == 31, r
    assert third.read("out/all.txt") == "".join(f"file {k}\n" for k in sorted(range(30), key=str))


def test_a_ninja_edge_with_deps_gcc_keeps_its_header_after_a_restore(project):
    """ninja removes a `deps = gcc` depfile once read: a restore writes one from the stored
    variant, so the restored trace still names the header."""
    project.write("build.ninja", """
        rule cc
          command = gcc -MD -MF $out.d -c $in -o $out
          depfile = $out.d
          deps = gcc
        build a.o: cc a.c
    """)
    project.write("a.c", '#include "a.h"\nint a(void) { return A; }\n')
    project.write("a.h", "#define A 1\n")
    assert project.build("--cache", "-f", "build.ninja").summary()["ran"] == 1
    shutil.rmtree(project.path(".farmer"))
    project.remove("a.o")
    r = project.build("--cache", "-f", "build.ninja")
    assert r.summary()["cached"] == 1 and not project.exists("a.o.d"), r
    project.write("a.h", "#define A 2\n")
    r = project.build("--cache", "-f", "build.ninja")
    assert r.summary()["ran"] == 1, r


def test_a_bad_farmer_cache_value_is_a_usage_error(project):
    from conftest import assert_error

    copy_project(project)
    assert_error(project.build(env={"FARMER_CACHE": "maybe"}), "FARMER_CACHE='maybe'", "FARMER_CACHE=1")
    assert not project.exists(".farmer/last-build.json")


@pytest.mark.parametrize("which", ["output", "log"])
def test_a_crafted_entry_deletes_nothing_outside_the_cache(project, private_cache, tmp_path, which):
    """N3 as the fault harness did it: an entry's digest rewritten in ac.db to `..` and an
    absolute path made a restore call that file a damaged blob and unlink it."""
    from farmer.record.cache.entry import Entry

    project.farmfile("""
        [cache]
        [task.big]
        inputs = ["in.txt"]
        outputs = ["out/big.bin"]
        cmd = "head -c 50000 /dev/zero > out/big.bin && yes | head -c 40000"
    """)
    project.write("in.txt", "x\n")
    assert project.build_in_process().returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    db = sqlite3.connect(os.path.join(private_cache, "ac.db"), isolation_level=None)
    try:
        (key, data), = db.execute("SELECT key, data FROM entry").fetchall()
        entry = Entry.loads(key, data)
        if which == "output":
            entry.outputs = [(p, ".." + str(victim), size, mode) for p, _, size, mode in entry.outputs]
        else:
            entry.log = (".." + str(victim), entry.log[1])
        db.execute("UPDATE entry SET data=? WHERE key=?", (entry.dumps(), key))
    finally:
        db.close()
    clean(project)
    r = project.build_in_process()
    assert victim.read_text() == "precious\n"
    assert r.returncode == 0 and r.summary()["ran"] == 1, r
    assert r.output.count("warning: cache") == 1 and "damaged entry" in r.output, r
    assert project.path("out/big.bin").stat().st_size == 50000
    clean(project)
    assert project.build_in_process().summary()["cached"] == 1  # stored afresh


# -- symbolic links --------------------------------------------------------------------------------

def test_an_output_that_is_a_symlink_comes_back_as_the_same_link(project):
    project.farmfile("""
        [cache]
        [task.lib]
        inputs = ["in.txt"]
        outputs = ["out/libx.so.1.0", "out/libx.so", "out/data.txt"]
        cmd = "cat in.txt > out/libx.so.1.0 && ln -s libx.so.1.0 out/libx.so && ln -s ../src/data.txt out/data.txt"
        [task.use]
        inputs = ["out/libx.so"]
        outputs = ["out/use.txt"]
        cmd = "cat out/libx.so > out/use.txt"
    """)
    project.write("in.txt", "v1\n")
    project.write("src/data.txt", "data\n")
    assert project.build_in_process().summary()["ran"] == 2
    clean(project)
    r = project.build_in_process()
    assert r.returncode == 0 and r.summary()["cached"] == 2, r
    assert os.readlink(project.path("out/libx.so")) == "libx.so.1.0"
    assert os.readlink(project.path("out/data.txt")) == "../src/data.txt"
    assert not project.path("out/libx.so.1.0").is_symlink() and project.read("out/use.txt") == "v1\n"
    assert [n for n in os.listdir(project.path("out")) if "cache-tmp" in n] == []
    assert project.build_in_process().summary() == {"ran": 0, "up to date": 2, "cached": 0, "failed": 0, "interrupted": 0,
                                         "skipped": 0}
    project.write("src/data.txt", "data, edited\n")  # the link's target is not the cache's to keep
    assert project.read("out/data.txt") == "data, edited\n"


def test_an_output_linking_out_of_the_root_is_not_stored(project, private_cache, tmp_path):
    """farmer refuses an output that leads out of the root through a symlink (exit 2, next
    build): the cache neither keeps such a link nor a copy of what it leads to."""
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    project.farmfile(f"""
        [cache]
        [task.away]
        inputs = ["in.txt"]
        outputs = ["out/away.txt"]
        cmd = "ln -sf {outside} out/away.txt"
    """)
    project.write("in.txt", "x\n")
    assert project.build().summary()["ran"] == 1
    assert entries(private_cache) == 0
    project.remove("out/away.txt")
    r = project.build()
    assert r.summary()["ran"] == 1 and r.summary()["cached"] == 0, r
    assert os.readlink(project.path("out/away.txt")) == str(outside)
    project.write("in.txt", "y\n")
    assert project.build().returncode == 2  # as without a cache
    assert outside.read_text() == "outside\n"


def test_a_fifo_at_a_blobs_path_is_one_warning_not_a_hang(project, private_cache):
    """N5: a restore opened the FIFO and waited for a writer for ever."""
    copy_project(project)
    for name in "abc":
        project.write(f"src/{name}.txt", f"{name}\n" * 20000)
    assert project.build().returncode == 0
    for blob in blobs(private_cache):
        os.unlink(blob)
        os.mkfifo(blob)
    clean(project)
    r = project.build(timeout=30)
    assert r.returncode == 0 and r.summary()["ran"] == 4, r
    assert r.output.count("warning: cache") == 1 and "not a regular file" in r.output, r
    assert all(stat.S_ISREG(os.lstat(blob).st_mode) for blob in blobs(private_cache))  # stored again
    clean(project)
    assert project.build(timeout=30).summary()["cached"] == 4


def test_a_killed_restores_temporary_files_are_removed(project):
    """N6: a restore killed with SIGKILL leaves `out/NAME.PID.cache-tmp`; the next restore
    beside it and `farmer clean` remove those of dead processes, never a live one's."""
    copy_project(project)
    assert project.build().returncode == 0
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        clean(project)
        dead_tmp = project.write(f"out/a.txt.{child.pid}.cache-tmp", "half of a\n")
        live_tmp = project.write(f"out/b.txt.{live.pid}.cache-tmp", "being written\n")
        r = project.build()
        assert r.summary()["cached"] == 4, r
        assert not dead_tmp.exists() and live_tmp.exists()
        dead_tmp.write_text("half of a\n")
        assert project.farmer("clean", "copy").returncode == 0
        assert not dead_tmp.exists() and live_tmp.exists()
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("how", ["[cache] dir", "--cache-dir"])
def test_the_project_root_named_as_the_cache_is_refused_not_narrowed(project, how):
    """N4: `[cache] dir = "."` made the project root 0700 and put ac.db, cas/ and tmp/ in it."""
    copy_project(project)
    os.chmod(project.root, 0o755)
    args = []
    if how == "[cache] dir":
        project.farmfile(COPY.replace("[cache]", '[cache]\ndir = "."'))
    else:
        args = ["--cache-dir", "."]
    r = project.build(*args, env={"FARMER_CACHE_DIR": ""})
    assert r.returncode == 0 and r.summary()["ran"] == 4, r
    warnings = [line for line in r.output.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "holds other files" in warnings[0] and "building without it" in warnings[0], r
    assert stat.S_IMODE(os.stat(project.root).st_mode) == 0o755
    assert not {"ac.db", "cas", "tmp", "gc.lock"} & set(os.listdir(project.root))


# -- a cache that cannot be written ----------------------------------------------------------------

def build_unprivileged(project: Project, *args: str, env: dict | None = None):
    """`farmer build ARGS` by a user whom file modes bind. Tests may run as root, whom a
    folder's mode 0555 does not stop: then farmer runs without the capabilities that let
    root write anywhere (helpers.drop_dac), so that mode is real."""
    if not can_drop_dac():
        pytest.skip("running as root without CAP_SETPCAP: a folder's mode cannot stop root")
    return project.build(*args, env=env, preexec_fn=drop_dac)


def read_only_tree(top) -> None:
    for folder, dirs, files in os.walk(top):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
        os.chmod(folder, 0o555)


def writable_tree(top) -> None:
    for folder, dirs, files in os.walk(top):
        os.chmod(folder, 0o700)


def assert_restored_read_only(project: Project, r, cache_dir) -> None:
    assert r.returncode == 0 and r.summary()["cached"] == 4 and r.summary()["ran"] == 0, r
    warnings = [line for line in r.output.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "read-only, storing nothing" in warnings[0], r
    assert project.read("out/all.txt") == "a\nb\nc\n"
    assert entries(cache_dir, immutable=True) == 4


def test_a_read_only_cache_folder_is_still_read(project, private_cache):
    """N8: a populated cache the user may not write was not read at all ("unable to open
    database file"); now lookups go on, nothing is stored, one warning."""
    copy_project(project)
    assert project.build_in_process().returncode == 0
    clean(project)
    read_only_tree(private_cache)
    try:
        r = build_unprivileged(project)
        assert_restored_read_only(project, r, private_cache)
        project.write("src/a.txt", "a, edited\n")
        r = build_unprivileged(project)
        assert r.returncode == 0 and r.summary()["ran"] == 2, r  # ran; not stored
    finally:
        writable_tree(private_cache)
    assert entries(private_cache) == 4


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs (root and CAP_SYS_ADMIN only), unmounted after the test."""
    with mounted_tmpfs(tmp_path / "disk", "512k") as mnt:
        yield mnt


@pytest.mark.parametrize("how", ["mounted read-only", "disk full"])
def test_a_cache_on_a_read_only_or_full_disk_is_still_read(project, small_disk, how):
    """N8: a populated cache on a read-only mount was not read ("unable to open database
    file"), nor on a full disk ("disk I/O error": WAL needs room for its -shm)."""
    cache_dir = small_disk / "cache"
    env = {"FARMER_CACHE_DIR": str(cache_dir)}
    copy_project(project)
    assert project.build(env=env).returncode == 0
    clean(project)
    if how == "mounted read-only":
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    else:
        fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 512):
                pass
        except OSError:  # full
            pass
        finally:
            os.close(fd)
    r = project.build(env=env)
    assert_restored_read_only(project, r, cache_dir)
