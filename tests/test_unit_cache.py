"""The local cache alone (farmer/record/cache/): the key, the store, restores, eviction, damage and
two processes storing at once. The build's use of it is tested in test_cli_cache.py."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO
from helpers import computation

from farmer.files.digests import Digests, hash_bytes
from farmer.graph.graph import Computation
from farmer.manifest.spec import CacheSpec, parse_size
from farmer.record.cache.entry import INLINE_MAX, LINK_MODE, BadDigest, Entry
from farmer.record.cache.errors import CacheError
from farmer.record.cache.key import ActionDescription, Programs, command_words, describe, variant_key
from farmer.record.cache.restore import BadBlob, NotHere, restore_files
from farmer.record.cache.settings import DEFAULT_MAX_SIZE, resolve
from farmer.record.cache.store import LocalCache


def comp(action: str = "gcc -c a.c -o a.o", **fields) -> Computation:
    """a.o compiled from a.c by `action`, unless `fields` say otherwise."""
    return computation(0, action, **{"id": "a.o", "task": "objects", "inputs": ["a.c"], "outputs": ["a.o"], **fields})


def key_of(c: Computation, inputs=(("a.c", "d1"),), names=(), environ=None, digest_of=None) -> str:
    programs = Programs(digest_of or (lambda p: "prog-" + os.path.basename(p)))
    env = {"PATH": os.environ["PATH"]} if environ is None else environ
    return describe(c, None, list(inputs), list(names), programs, env).key()


# -- the key ---------------------------------------------------------------------------------

def test_command_words_are_the_programs_each_simple_command_runs():
    assert command_words("gcc -c a.c -o a.o") == ["gcc"]
    assert command_words("CC=1 FOO='a b' gcc -c a.c && ar rcs lib.a a.o | tee log") == ["gcc", "ar", "tee"]
    assert command_words("cd build && make -j2; echo done") == ["cd", "make", "echo"]
    assert command_words("if true; then cat x > y; fi") == ["true", "cat"]
    assert command_words("2>err.txt ./tool <in.txt >out.txt") == ["./tool"]
    assert command_words("'my tool' x # gcc") == ["my tool"]


def test_a_key_changes_with_what_the_computation_does_reads_and_runs():
    base = key_of(comp())
    assert key_of(comp()) == base
    assert key_of(comp("gcc -O2 -c a.c -o a.o")) != base  # the command
    assert key_of(comp(env={"X": "1"})) != base  # the task's env
    assert key_of(comp(), inputs=[("a.c", "d2")]) != base  # an input's content
    assert key_of(comp(), inputs=[("b.c", "d1")]) != base  # an input's path
    assert key_of(comp(outputs=["b.o"])) != base
    assert key_of(comp(), digest_of=lambda p: "another gcc") != base  # a compiler upgrade
    # an inherited variable counts only when [cache] env names it; unset is not empty
    environ = {"PATH": os.environ["PATH"], "LANG": "C"}
    assert key_of(comp(), environ=environ) == base
    named = key_of(comp(), names=["LANG"], environ=environ)
    assert named != base
    assert key_of(comp(), names=["LANG"], environ={**environ, "LANG": "fr_FR"}) != named
    assert key_of(comp(), names=["LANG"], environ={"PATH": environ["PATH"]}) != \
        key_of(comp(), names=["LANG"], environ={**environ, "LANG": ""})


def test_a_key_holds_no_absolute_path_nor_PATH_itself(tmp_path, monkeypatch):
    """Another checkout at another path, with the same compiler under another directory of
    PATH, has the same key."""
    keys = []
    for name in ("a", "b"):
        bin_dir = tmp_path / name / "bin"
        bin_dir.mkdir(parents=True)
        tool = bin_dir / "tool"
        tool.write_text("#!/bin/sh\necho same tool\n")
        tool.chmod(0o755)
        monkeypatch.chdir(tmp_path / name)
        digests = Digests({})
        programs = Programs(digests.digest)
        d = describe(comp("tool a.c > a.o"), None, [("a.c", "d1")], [], programs, {"PATH": str(bin_dir)})
        assert str(tmp_path) not in d.canonical().decode()
        keys.append(d.key())
    assert keys[0] == keys[1]


def test_the_description_is_a_plain_object_a_remote_cache_can_map():
    d = describe(comp(env={"B": "2", "A": "1"}), "worldfp", [("a.c", "d1")], [], Programs(lambda p: "x"),
                 {"PATH": "/usr/bin:/bin"})
    parts = dict(d.parts())
    assert parts["action"] == ["cmd", "gcc -c a.c -o a.o"]
    assert parts["env"] == ["A=1", "B=2"]
    assert parts["world"] == ["worldfp"]
    assert parts["inputs"] == ["a.c=d1"]
    assert isinstance(d, ActionDescription) and len(d.key()) == 32
    assert variant_key(d.key(), []) != variant_key(d.key(), [("a.h", "d")])


def test_sizes_and_settings():
    assert parse_size("5GiB") == 5 * 1024**3
    assert parse_size("500 MB") == 500_000_000
    assert parse_size("1.5k") == 1500
    assert parse_size("4096") == 4096
    assert parse_size("five") is None and parse_size("3 parsecs") is None and parse_size("") is None
    env = {"HOME": "/home/u"}
    off = resolve(None, "/p", environ=env)
    assert not off.enabled and off.dir == "/home/u/.cache/farmer" and off.max_size == DEFAULT_MAX_SIZE
    on = resolve(CacheSpec(1, dir="cache", max_size=10, env=["LANG"]), "/p", environ=env)
    assert on.enabled and on.dir == "/p/cache" and on.max_size == 10 and on.env == ["LANG"]
    assert resolve(None, "/p", environ={**env, "XDG_CACHE_HOME": "/x"}).dir == "/x/farmer"
    assert resolve(None, "/p", environ={**env, "FARMER_CACHE": "1", "FARMER_CACHE_DIR": "/f"}).dir == "/f"
    assert resolve(None, "/p", environ={**env, "FARMER_CACHE": "1"}).enabled
    assert not resolve(CacheSpec(1), "/p", environ={**env, "FARMER_CACHE": "0"}).enabled
    assert not resolve(CacheSpec(1), "/p", flag=False, environ={**env, "FARMER_CACHE": "1"}).enabled
    assert resolve(CacheSpec(1, dir="/d"), "/p", cache_dir="/cli", environ={**env, "FARMER_CACHE_DIR": "/e"}).dir == "/cli"


# -- the store ---------------------------------------------------------------------------------

def stored(cache: LocalCache, tmp_path, content: bytes, name: str = "out.bin", key1: str = "k1",
           discovered=(), mode: int = 0o644) -> Entry:
    src = tmp_path / name
    src.write_bytes(content)
    src.chmod(mode)
    digest = hash_bytes(content)
    added, size, got_mode, data = cache.put_file(str(src), digest)
    entry = Entry(variant_key(key1, list(discovered)), list(discovered), [(name, digest, size, got_mode)],
                  None, None, {} if data is None else {digest: data})
    cache.put_entries(cache.db, [(key1, entry)], added)
    return entry


@pytest.mark.parametrize("size", [100, INLINE_MAX + 1])  # kept in the entry, in a blob
def test_a_stored_file_comes_back_verified_with_its_mode(tmp_path, size, monkeypatch):
    cache = LocalCache(str(tmp_path / "c")).open()
    assert stat.S_IMODE(os.stat(cache.dir).st_mode) == 0o700
    content = b"#!/bin/sh\necho hi\n" + b"#" * size
    stored(cache, tmp_path, content, "tool", mode=0o755)
    entry, _ = cache.lookup("k1", lambda p: None)
    assert bool(entry.inline) == (size <= INLINE_MAX)
    monkeypatch.chdir(tmp_path)
    os.unlink("tool")
    restore_files(cache.blob_path, entry.outputs, entry.inline)
    assert (tmp_path / "tool").read_bytes() == content
    assert stat.S_IMODE(os.stat("tool").st_mode) == 0o755
    if not entry.inline:
        assert os.stat("tool").st_ino != os.stat(cache.blob_path(entry.outputs[0][1])).st_ino  # a copy
    assert cache.lookup("other", lambda p: None) is None


def test_discovered_variants_hit_only_when_every_listed_file_matches(tmp_path):
    cache = LocalCache(str(tmp_path / "c")).open()
    stored(cache, tmp_path, b"built with a.h v1", discovered=[("a.h", "v1")])
    stored(cache, tmp_path, b"built with a.h v2", discovered=[("a.h", "v2"), ("b.h", "x")])
    now = {"a.h": "v1", "b.h": "x"}
    assert cache.lookup("k1", now.get)[0].discovered == [("a.h", "v1")]
    now["a.h"] = "v2"
    assert cache.lookup("k1", now.get)[0].discovered == [("a.h", "v2"), ("b.h", "x")]
    now["b.h"] = "y"
    assert cache.lookup("k1", now.get) is None


def test_damaged_and_missing_blobs_are_refused(tmp_path, monkeypatch):
    cache = LocalCache(str(tmp_path / "c")).open()
    monkeypatch.chdir(tmp_path)
    small = stored(cache, tmp_path, b"small\n", key1="small")
    digest = small.outputs[0][1]
    with pytest.raises(BadBlob, match="other content"):
        restore_files(cache.blob_path, small.outputs, {digest: b"evil\n"})
    good = b"good content\n" * 2000
    entry = stored(cache, tmp_path, good)
    blob = cache.blob_path(entry.outputs[0][1])
    for damage, what in ((good[:5], "bytes"), (good.replace(b"good", b"evil"), "other content")):
        os.chmod(blob, 0o600)
        with open(blob, "wb") as f:
            f.write(damage)
        (tmp_path / "out.bin").write_bytes(b"previous\n")
        with pytest.raises(BadBlob, match=what):
            restore_files(cache.blob_path, entry.outputs, entry.inline)
        assert (tmp_path / "out.bin").read_bytes() == b"previous\n"  # untouched
        assert [p for p in os.listdir(tmp_path) if "cache-tmp" in p] == []
    os.unlink(blob)
    with pytest.raises(BadBlob, match="missing"):
        restore_files(cache.blob_path, entry.outputs, entry.inline)


def test_gc_evicts_the_least_recently_used_and_keeps_blobs_others_name(tmp_path):
    cache = LocalCache(str(tmp_path / "c")).open()
    for n in range(5):
        stored(cache, tmp_path, bytes([n]) * 20000, f"f{n}", key1=f"k{n}")
        cache.db.execute("UPDATE entry SET used_at=? WHERE key1=?", (1000.0 + n, f"k{n}"))
    shared = stored(cache, tmp_path, bytes([0]) * 20000, "f0", key1="k-shared")  # the blob of k0
    cache.db.execute("UPDATE entry SET used_at=? WHERE key1='k-shared'", (2000.0,))
    entry1, used = cache.lookup("k1", lambda p: None)
    cache.touch(cache.db, [(entry1.key, used)])  # k1 used now: the most recent
    small = stored(cache, tmp_path, b"kept in its entry\n", "small", key1="k-small")  # 18 bytes
    cache.db.execute("UPDATE entry SET used_at=? WHERE key1='k-small'", (999.0,))
    assert cache.stats() == (7, 100018)
    # oldest first: k-small, k0 (its blob stays: k-shared names it), k2, k3, k4; then 40000 fit
    result = cache.gc(50000)
    assert result.bytes == 40000 and result.removed == 5
    left = {row[0] for row in cache.db.execute("SELECT key1 FROM entry")}
    assert left == {"k1", "k-shared"}
    assert os.path.exists(cache.blob_path(shared.outputs[0][1]))
    assert cache.stats() == (2, 40000) and cache.recorded_bytes() == 40000
    assert small.inline
    cache.gc(0)
    assert cache.stats() == (0, 0)


def test_an_unusable_or_damaged_cache(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(CacheError, match="cannot use"):
        LocalCache(str(tmp_path / "file" / "cache")).open()
    db_dir = tmp_path / "c"
    db_dir.mkdir()
    os.chmod(db_dir, 0o755)
    (db_dir / "ac.db").write_bytes(b"this is not sqlite" * 100)
    cache = LocalCache(str(db_dir)).open()  # set aside, started afresh
    assert cache.stats() == (0, 0)
    assert any(n.startswith("ac.db.corrupt-") for n in os.listdir(db_dir))
    assert stat.S_IMODE(os.stat(db_dir).st_mode) == 0o755  # a folder farmer did not make keeps its mode


STORER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {repo!r})
    from farmer.record.cache.entry import Entry
    from farmer.record.cache.store import LocalCache
    from farmer.record.cache.key import variant_key
    from farmer.files.digests import hash_bytes
    cache = LocalCache(sys.argv[1], busy_timeout_s=30).open()
    who = sys.argv[2]
    os.makedirs(who, exist_ok=True)
    for n in range(60):
        # the odd ones: the same big blob from both; the even ones: each its own, small
        content = (b"shared %d\\n" % n) * 3000 if n % 2 else (b"%s %d\\n" % (who.encode(), n))
        path = os.path.join(who, "f%d" % n)
        with open(path, "wb") as f:
            f.write(content)
        digest = hash_bytes(content)
        fd = cache.shared_lock()
        added, size, mode, data = cache.put_file(path, digest)
        key1 = "k%d-%s" % (n, who if n % 2 == 0 else "same")
        e = Entry(variant_key(key1, []), [], [(path, digest, size, mode)], None, None,
                  dict() if data is None else dict([(digest, data)]))
        cache.put_entries(cache.db, [(key1, e)], added)
        os.close(fd)
""")


def test_two_processes_storing_at_once_share_one_consistent_cache(tmp_path, monkeypatch):
    script = tmp_path / "storer.py"
    script.write_text(STORER.format(repo=str(REPO)))
    where = str(tmp_path / "c")
    monkeypatch.chdir(tmp_path)
    procs = [subprocess.Popen([sys.executable, str(script), where, who]) for who in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    cache = LocalCache(where).open()
    entries, size = cache.stats()
    assert entries == 30 + 30 + 30  # each its own even ones, the odd ones shared by key
    for key1, in cache.db.execute("SELECT key1 FROM entry").fetchall():
        entry, _ = cache.lookup(key1, lambda p: None)
        digest = entry.outputs[0][1]
        if entry.inline:
            assert hash_bytes(entry.inline[digest]) == digest
        else:
            with open(cache.blob_path(digest), "rb") as f:
                assert hash_bytes(f.read()) == digest
    assert os.listdir(os.path.join(where, "tmp")) == []
    assert cache.recorded_bytes() >= size  # a blob two stored at once may count twice


# -- crafted and damaged entries -------------------------------------------------------------------

def rewrite(cache: LocalCache, change) -> None:
    """Apply `change(entry)` to every stored entry, written back as the cache writes one."""
    for key, data in cache.db.execute("SELECT key, data FROM entry").fetchall():
        entry = Entry.loads(key, data)
        change(entry)
        cache.db.execute("UPDATE entry SET data=? WHERE key=?", (entry.dumps(), key))


def restore_as_a_build_does(cache: LocalCache, key1: str) -> bool:
    """What a build does with a hit (farmer/record/cache/use.py): restore it, and drop it with the
    blobs found damaged when it does not verify. Whether it was a hit."""
    found = cache.lookup(key1, lambda p: None)
    if found is None:
        return False
    files = list(found[0].outputs)
    if found[0].log is not None:
        files.append(("build.log", found[0].log[0], found[0].log[1], 0o644))
    try:
        restore_files(cache.blob_path, files, found[0].inline)
    except BadBlob as e:
        cache.forget(found[0].key, e.damaged)
    return True


def test_a_crafted_digest_never_names_a_file_outside_the_cache(tmp_path, monkeypatch):
    """N3: `cas/` + digest[:2] + digest[2:] with digest `..` + an absolute path is that path: a
    restore found it "damaged" and unlinked it. A malformed entry is now dropped when it is
    loaded, and blob_path refuses anything but the hex the cache writes."""
    cache = LocalCache(str(tmp_path / "c")).open()
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    stored(cache, tmp_path, b"big\n" * INLINE_MAX)
    crafted = ".." + str(victim)

    def aim(entry: Entry) -> None:
        entry.outputs = [(p, crafted, size, mode) for p, _, size, mode in entry.outputs]

    rewrite(cache, aim)
    hit = restore_as_a_build_does(cache, "k1")
    assert victim.read_text() == "precious\n"
    assert not hit  # a miss, the entry dropped
    assert cache.stats()[0] == 0
    with pytest.raises(BadDigest):
        cache.blob_path(crafted)
    with pytest.raises(BadDigest):
        cache.blob_path("thin:" + "0" * 31 + "/")
    assert cache.blob_path("thin:" + "ab" * 16).endswith("/cas/ab/" + "ab" * 15)


def test_a_crafted_log_digest_is_refused_too(tmp_path, monkeypatch):
    cache = LocalCache(str(tmp_path / "c")).open()
    monkeypatch.chdir(tmp_path)
    stored(cache, tmp_path, b"small\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")

    def aim(entry: Entry) -> None:
        entry.log = (".." + str(victim), 50000)

    rewrite(cache, aim)
    hit = restore_as_a_build_does(cache, "k1")
    assert victim.read_text() == "precious\n"
    assert not hit
    assert cache.stats()[0] == 0


def test_a_row_holding_another_keys_data_is_no_hit(tmp_path):
    """A row whose data is another entry's (rows swapped by hand) would restore the other's
    bytes: each entry's data names its own key, checked against the row's."""
    cache = LocalCache(str(tmp_path / "c")).open()
    stored(cache, tmp_path, b"made from input one\n", key1="k-one")
    stored(cache, tmp_path, b"made from input two\n", key1="k-two")
    rows = dict(cache.db.execute("SELECT key1, data FROM entry").fetchall())
    cache.db.execute("UPDATE entry SET data=? WHERE key1='k-one'", (rows["k-two"],))
    assert cache.lookup("k-one", lambda p: None) is None
    assert cache.lookup("k-two", lambda p: None) is not None


def test_a_mode_with_setuid_bits_is_restored_without_them(tmp_path, monkeypatch):
    cache = LocalCache(str(tmp_path / "c")).open()
    monkeypatch.chdir(tmp_path)
    stored(cache, tmp_path, b"#!/bin/sh\n", "tool", mode=0o755)

    def setuid(entry: Entry) -> None:
        entry.outputs = [(p, d, size, 0o7777) for p, d, size, _ in entry.outputs]

    rewrite(cache, setuid)
    os.unlink("tool")
    assert restore_as_a_build_does(cache, "k1")
    assert stat.S_IMODE(os.stat("tool").st_mode) == 0o777


# -- symbolic links -----------------------------------------------------------------------------

def link_record(path: str, target: str) -> tuple[tuple[str, str, int, int], dict[str, bytes]]:
    data = target.encode()
    return (path, hash_bytes(data), len(data), LINK_MODE), {hash_bytes(data): data}


def file_record(path: str, content: bytes, mode: int = 0o644):
    return (path, hash_bytes(content), len(content), mode), {hash_bytes(content): content}


def test_links_are_restored_as_links_only_when_they_land_on_a_file_inside_the_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "data.txt").write_text("data\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    monkeypatch.chdir(root)

    def restore(*records) -> None:
        inline: dict[str, bytes] = {}
        for _, data in records:
            inline.update(data)
        restore_files(lambda d: "/nowhere", [r for r, _ in records], inline, str(root))

    # a chain inside the entry (libx.so -> libx.so.1 -> libx.so.1.0), and one to a source file
    restore(file_record("out/libx.so.1.0", b"\x7fELF"), link_record("out/libx.so.1", "libx.so.1.0"),
            link_record("out/libx.so", "libx.so.1"), link_record("out/data.txt", "../src/data.txt"))
    assert os.readlink("out/libx.so") == "libx.so.1" and os.readlink("out/libx.so.1") == "libx.so.1.0"
    assert open("out/libx.so", "rb").read() == b"\x7fELF"
    assert os.readlink("out/data.txt") == "../src/data.txt"
    # leading out of the root, to nothing, to a folder, in a loop: never made
    for target in ("../../outside.txt", str(tmp_path / "outside.txt"), "missing.txt", "..", "loop"):
        with pytest.raises(NotHere):
            restore(file_record("out/other", b"x\n"), link_record("out/loop", target))
        assert not os.path.lexists("out/loop") and not os.path.exists("out/other")
    assert sorted(os.listdir("out")) == ["data.txt", "libx.so", "libx.so.1", "libx.so.1.0"]  # no temporary left
    # an absolute link inside the root is made as it was written
    restore(link_record("out/abs", str(root / "src" / "data.txt")))
    assert os.readlink("out/abs") == str(root / "src" / "data.txt")


def test_a_link_kept_in_an_entry_is_verified_like_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    record, inline = link_record("out/l", "target")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "target").write_text("t\n")
    with pytest.raises(BadBlob, match="other content"):
        restore_files(lambda d: "/nowhere", [record], {record[1]: b"/etc/passwd"}, str(tmp_path))
    assert not os.path.lexists("out/l")
    restore_files(lambda d: "/nowhere", [record], inline, str(tmp_path))
    assert os.readlink("out/l") == "target"


# -- what is not a blob at a blob's path -------------------------------------------------------

@pytest.fixture
def no_hang():
    """A test that would block for ever fails after 20 s instead."""
    import signal

    def expire(*_):
        raise TimeoutError("blocked")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("kind", ["fifo", "directory", "link to another blob"])
def test_a_blob_path_that_is_no_file_is_a_damaged_blob(tmp_path, monkeypatch, no_hang, kind):
    """N5: a FIFO at a blob's path hung every build that restored it (a blocking open)."""
    cache = LocalCache(str(tmp_path / "c")).open()
    monkeypatch.chdir(tmp_path)
    entry = stored(cache, tmp_path, b"blob\n" * INLINE_MAX)
    other = stored(cache, tmp_path, b"other\n" * INLINE_MAX, key1="k2")
    blob = cache.blob_path(entry.outputs[0][1])
    os.unlink(blob)
    if kind == "fifo":
        os.mkfifo(blob)
    elif kind == "directory":
        os.makedirs(os.path.join(blob, "inside"))
    else:
        os.symlink(cache.blob_path(other.outputs[0][1]), blob)
    with pytest.raises(BadBlob, match="not a regular file") as e:
        restore_files(cache.blob_path, entry.outputs, entry.inline)
    assert restore_as_a_build_does(cache, "k1")  # a hit, which does not verify: dropped
    assert not os.path.lexists(blob) and cache.lookup("k1", lambda p: None) is None
    assert os.path.isfile(cache.blob_path(other.outputs[0][1]))
    assert e.value.damaged == [entry.outputs[0][1]]


def test_a_directory_in_a_blobs_way_does_not_stop_storing(tmp_path):
    """N5: a directory at the path a blob is stored to made every store fail ("Is a
    directory; storing nothing more this build"); it is replaced."""
    cache = LocalCache(str(tmp_path / "c")).open()
    content = b"stored\n" * INLINE_MAX
    blob = cache.blob_path(hash_bytes(content))
    os.makedirs(os.path.join(blob, "inside"))
    os.mkfifo(os.path.join(blob, "inside", "fifo"))
    stored(cache, tmp_path, content)
    with open(blob, "rb") as f:
        assert f.read() == content


# -- what killed restores leave ----------------------------------------------------------------------

def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_dead_restores_temporary_files_are_swept(tmp_path):
    """N6: kill -9 during a restore left `out/NAME.PID.cache-tmp` for ever."""
    from farmer.record.cache.leftovers import sweep

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = tmp_path / "out"
        out.mkdir()
        names = {"dead": f"a.txt.{dead_pid()}.cache-tmp", "live": f"b.txt.{live.pid}.cache-tmp",
                 "mine": f"c.txt.{os.getpid()}.cache-tmp", "not a pid": "d.txt.x1.cache-tmp",
                 "no name": f".{dead_pid()}.cache-tmp", "a group": "e.txt.0.cache-tmp",
                 "other": f"f.{dead_pid()}.tmp"}
        for name in names.values():
            (out / name).write_text("left\n")
        (out / f"g.txt.{dead_pid()}.cache-tmp").mkdir()  # not a restore's
        assert sweep(str(out)) == 1
        left = set(os.listdir(out))
        assert names["dead"] not in left
        assert left == set(names.values()) - {names["dead"]} | {n for n in left if n.startswith("g.txt")}
    finally:
        live.kill()
        live.wait()


# -- the cache's folder ----------------------------------------------------------------------------

def test_a_folder_farmer_makes_is_private_one_it_finds_keeps_its_mode(tmp_path):
    """N4: naming an existing folder as the cache made it 0700 (/tmp as root lost its 1777)."""
    old = os.umask(0o022)  # the folders below get the modes they ask for
    try:
        made = LocalCache(str(tmp_path / "new" / "cache")).open()
        assert stat.S_IMODE(os.stat(made.dir).st_mode) == 0o700
        empty = tmp_path / "empty"
        empty.mkdir(mode=0o755)
        cache = LocalCache(str(empty)).open()
        stored(cache, tmp_path, b"x" * (INLINE_MAX + 1))
        assert stat.S_IMODE(os.stat(empty).st_mode) == 0o755  # used as it is
        assert stat.S_IMODE(os.stat(empty / "ac.db").st_mode) == 0o600  # what it holds is private
        assert {stat.S_IMODE(os.stat(empty / d).st_mode) for d in ("cas", "tmp")} == {0o700}
        cache.close()
        os.chmod(empty, 0o750)  # a cache already: used, whatever its owner made its mode
        assert LocalCache(str(empty)).open().stats()[0] == 1
        assert stat.S_IMODE(os.stat(empty).st_mode) == 0o750
    finally:
        os.umask(old)


@pytest.mark.parametrize("kind", ["sticky, everyone's", "a home", "writable by all"])
def test_an_existing_folder_unfit_for_a_cache_is_refused_and_left_alone(tmp_path, kind):
    folder = tmp_path / "folder"
    folder.mkdir()
    if kind == "sticky, everyone's":
        os.chmod(folder, 0o1777)
    elif kind == "a home":
        (folder / ".bashrc").write_text("# mine\n")
        os.chmod(folder, 0o755)
    else:
        os.chmod(folder, 0o777)
    before = os.stat(folder).st_mode
    with pytest.raises(CacheError, match="every user may write|holds other files"):
        LocalCache(str(folder)).open()
    assert os.stat(folder).st_mode == before
    assert sorted(os.listdir(folder)) == ([".bashrc"] if kind == "a home" else [])


# -- a cache that cannot be written ----------------------------------------------------------------

def populated(tmp_path) -> tuple[LocalCache, Entry]:
    cache = LocalCache(str(tmp_path / "c")).open()
    entry = stored(cache, tmp_path, b"big\n" * INLINE_MAX)
    stored(cache, tmp_path, b"small\n", "small", key1="k-small")
    cache.close()
    return cache, entry


def test_a_cache_opened_read_only_is_read_and_never_written(tmp_path, monkeypatch):
    """N8: the read-only open (forced here; test_cli_cache.py has the real read-only folder,
    mount and full disk) reads entries and blobs and writes nothing, not even a drop."""
    _, entry = populated(tmp_path)
    monkeypatch.chdir(tmp_path)
    cache = LocalCache(str(tmp_path / "c"), read_only=True).open()
    assert cache.read_only
    assert restore_as_a_build_does(cache, "k1") and restore_as_a_build_does(cache, "k-small")
    assert (tmp_path / "out.bin").read_bytes() == b"big\n" * INLINE_MAX
    blob = cache.blob_path(entry.outputs[0][1])
    os.chmod(blob, 0o600)
    with open(blob, "r+b") as f:
        f.truncate(5)
    assert restore_as_a_build_does(cache, "k1")  # found damaged: a miss, but not dropped
    assert os.path.exists(blob) and cache.stats()[0] == 2
    with pytest.raises(CacheError, match="read-only"):
        cache.gc(0)
    with pytest.raises(CacheError, match="read-only"):
        cache.clear()


def test_a_cache_that_cannot_be_written_falls_back_to_reading(tmp_path, monkeypatch):
    """What SQLite says of a full disk (no room for the -shm): the cache is opened read-only,
    and says why. A fault hook stands for the disk: test_cli_cache.py fills a real one."""
    populated(tmp_path)

    def full(self):
        raise CacheError(f"cannot use {self.db_path}: disk I/O error")

    def locked(self):
        raise CacheError(f"cannot use {self.db_path}: database is locked")

    monkeypatch.setattr(LocalCache, "_open_writable", full)
    cache = LocalCache(str(tmp_path / "c")).open()
    assert cache.read_only.endswith("disk I/O error")
    assert cache.lookup("k1", lambda p: None) is not None
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CacheError, match="disk I/O error"):  # nothing to read
        LocalCache(str(empty)).open()
    monkeypatch.setattr(LocalCache, "_open_writable", locked)
    with pytest.raises(CacheError, match="locked"):  # another farmer's: not read as it lies
        LocalCache(str(tmp_path / "c")).open()


def test_a_fifo_at_a_stores_temporary_name_does_not_block_it(tmp_path, no_hang):
    """A store's temporary blob is named by pid, thread and a count: a FIFO found there (a
    killed farmer's pid reused, or planted) was opened for writing, which waits for a reader."""
    import threading

    cache = LocalCache(str(tmp_path / "c")).open()
    os.mkfifo(os.path.join(cache.tmp, f"{os.getpid()}-{threading.get_ident()}-1"))
    stored(cache, tmp_path, b"stored\n" * INLINE_MAX)
    assert os.listdir(cache.tmp) == []


def test_a_depfile_or_log_that_became_a_fifo_does_not_block_the_writer(tmp_path, no_hang):
    """The writer digests a run's depfile and log itself: a FIFO put at that path after the run
    would have blocked it, and the build's end that waits for it."""
    from farmer.files.digests import hash_file
    from farmer.record.cache.errors import Changed
    from farmer.record.cache.use import _digest_now

    for content in (b"out.o: a.h\n", b"!<thin>\n" + b"x" * 3000000):
        path = tmp_path / "f.d"
        path.write_bytes(content)
        assert _digest_now(str(path))[0] == hash_file(str(path))
    os.unlink(path)
    os.mkfifo(path)
    with pytest.raises(Changed):
        _digest_now(str(path))


def test_an_older_farmers_entries_are_misses_not_misreads(tmp_path):
    """Schema 3 (an entry's data holds its key; records may be links): a cache of schema 2 is
    set aside whole, and a row in the older layout is no entry."""
    import marshal

    cache = LocalCache(str(tmp_path / "c")).open()
    entry = stored(cache, tmp_path, b"x\n")
    old_layout = marshal.dumps((entry.discovered, entry.outputs, entry.depfile, entry.log, entry.inline))
    assert Entry.loads(entry.key, old_layout) is None
    cache.db.execute("UPDATE meta SET value='2' WHERE key='schema'")
    cache.close()
    reopened = LocalCache(str(tmp_path / "c")).open()
    assert reopened.stats()[0] == 0
    assert any(n.startswith("ac.db.corrupt-") for n in os.listdir(tmp_path / "c"))
