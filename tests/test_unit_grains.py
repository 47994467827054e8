"""Unit tests for farmer/files/digests.py: content digests behind a stat cache (SPEC §2: time
stamps never decide a rebuild; stat data only saves re-hashing)."""

from __future__ import annotations

import os
import time

import pytest

from farmer.files.digests import Digests, NotAFile, hash_file, hash_text, stat_key

OLD_NS = 1_000_000_000 * 1_000_000_000  # 2001-09-09: far from "racy"


def write(path, data: bytes, mtime_ns: int | None = None) -> str:
    path.write_bytes(data)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return str(path)


def settled_cache_entry(path: str, digest: str) -> dict:
    """A stat cache as a previous build would have left it for `path`."""
    return {path: (stat_key(os.stat(path)), digest)}


def test_digest_of_file(tmp_path):
    p = write(tmp_path / "a", b"hello")
    d = Digests({})
    digest = d.digest(p)
    assert isinstance(digest, str) and len(digest) == 32
    assert digest == hash_file(p)
    assert d.hashed == 1


def test_same_content_same_digest_different_content_different(tmp_path):
    a = write(tmp_path / "a", b"same bytes")
    b = write(tmp_path / "sub_b", b"same bytes", OLD_NS)
    c = write(tmp_path / "c", b"other bytes")
    d = Digests({})
    assert d.digest(a) == d.digest(b)
    assert d.digest(a) != d.digest(c)


def test_empty_and_large_files(tmp_path):
    empty = write(tmp_path / "e", b"")
    big = write(tmp_path / "big", os.urandom(3 << 20))
    d = Digests({})
    assert d.digest(empty) is not None
    assert d.digest(big) == hash_file(big)
    assert d.digest(empty) != d.digest(big)


def test_a_file_that_grew_since_its_stat_is_hashed_to_its_end(tmp_path):
    """The size a stat gave spares the read at the end of the file only when the first read
    returned exactly that: a file appended to since is read whole."""
    p = write(tmp_path / "grows", b"a" * 100)
    whole = hash_file(p)
    assert hash_file(p, 100) == whole
    with open(p, "ab") as f:
        f.write(b"b" * 50)
    grown = hash_file(p)
    assert grown != whole and hash_file(p, 100) == grown
    big = write(tmp_path / "big", os.urandom((1 << 20) + 7))
    assert hash_file(big, 1 << 20) == hash_file(big, (1 << 20) + 7) == hash_file(big)


def test_stat_cache_hit_does_not_reread(tmp_path):
    p = write(tmp_path / "a", b"content", OLD_NS)
    cache = settled_cache_entry(p, "digest-from-last-build")
    d = Digests(cache)
    assert d.digest(p) == "digest-from-last-build"  # trusted: the file was not read
    assert d.hashed == 0
    assert d.changed == {}


def test_stat_cache_round_trip_between_builds(tmp_path):
    p = write(tmp_path / "a", b"content", OLD_NS)
    time.sleep(0.12)  # let the ctime set by utime fall out of the racy window
    first = Digests({})
    digest = first.digest(p)
    assert first.hashed == 1
    assert p in first.changed
    second = Digests(first.entries())
    assert second.digest(p) == digest
    assert second.hashed == 0


def test_changed_size_is_rehashed(tmp_path):
    p = write(tmp_path / "a", b"content", OLD_NS)
    cache = settled_cache_entry(p, hash_file(p))
    write(tmp_path / "a", b"content, longer", OLD_NS)  # same mtime, other size
    d = Digests(cache)
    assert d.digest(p) == hash_file(p)
    assert d.digest(p) != cache_digest_of(b"content", tmp_path)
    assert d.hashed == 1
    assert p in d.changed


def cache_digest_of(data: bytes, tmp_path) -> str:
    q = tmp_path / "reference"
    q.write_bytes(data)
    return hash_file(str(q))


def test_changed_mtime_is_rehashed_same_digest(tmp_path):
    p = write(tmp_path / "a", b"content", OLD_NS)
    cache = settled_cache_entry(p, "stale-digest")
    os.utime(p, ns=(OLD_NS + 10**9, OLD_NS + 10**9))  # `touch`: same content
    d = Digests(cache)
    assert d.digest(p) == hash_file(p)  # the stale entry is not trusted
    assert d.hashed == 1


def test_changed_same_size_same_mtime_but_new_inode_is_rehashed(tmp_path):
    p = write(tmp_path / "a", b"AAAA", OLD_NS)
    cache = settled_cache_entry(p, hash_file(p))
    tmp = write(tmp_path / "a.new", b"BBBB", OLD_NS)
    os.replace(tmp, p)  # atomic replace: other inode, same size and mtime
    d = Digests(cache)
    assert d.digest(p) == hash_file(p) == cache_digest_of(b"BBBB", tmp_path)
    assert d.hashed == 1


def test_changed_ctime_only_is_rehashed(tmp_path):
    p = write(tmp_path / "a", b"content", OLD_NS)
    cache = settled_cache_entry(p, "stale-digest")
    time.sleep(0.01)
    os.chmod(p, 0o600)  # changes ctime only
    os.utime(p, ns=(OLD_NS, OLD_NS))
    assert stat_key(os.stat(p))[:3] == cache[p][0][:3]
    d = Digests(cache)
    assert d.digest(p) == hash_file(p)
    assert d.hashed == 1


def test_racy_fresh_file_is_rehashed_next_time(tmp_path):
    p = write(tmp_path / "a", b"v1")  # written just now: racy
    first = Digests({})
    digest = first.digest(p)
    assert first.hashed == 1
    assert first.entries()[p][0] != stat_key(os.stat(p))  # not trusted as it stands
    second = Digests(first.entries())
    assert second.digest(p) == digest
    assert second.hashed == 1


def test_racy_file_edited_within_same_tick_is_noticed(tmp_path):
    p = write(tmp_path / "a", b"v1")
    st = os.stat(p)
    first = Digests({})
    d1 = first.digest(p)
    # Same size, and the mtime forced back to what it was: only re-hashing can notice.
    write(tmp_path / "a", b"v2")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = Digests(first.entries())
    assert second.digest(p) != d1


def test_digest_taken_once_per_build_until_forgotten(tmp_path):
    p = write(tmp_path / "a", b"v1")
    d = Digests({})
    first = d.digest(p)
    write(tmp_path / "a", b"v2 longer")
    assert d.digest(p) == first  # one digest per build...
    assert d.hashed == 1
    d.forget(p)  # ...until a computation wrote the file
    assert d.digest(p) != first
    assert d.hashed == 2


def test_missing_file_is_none(tmp_path):
    d = Digests({})
    assert d.digest(str(tmp_path / "nope")) is None
    assert d.digest(str(tmp_path / "nope" / "deeper")) is None
    assert d.hashed == 0


def test_missing_file_drops_cache_entry(tmp_path):
    p = str(tmp_path / "gone")
    d = Digests({p: ((1, 2, 3, 4), "x")})
    assert d.digest(p) is None
    assert d.changed == {p: None}


def test_file_under_a_file_is_none(tmp_path):
    f = write(tmp_path / "f", b"x")
    assert Digests({}).digest(os.path.join(f, "child")) is None


def test_directory_is_not_a_file(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(NotAFile):
        Digests({}).digest(str(tmp_path / "dir"))


def test_dangling_symlink_is_missing(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "target-does-not-exist")
    assert Digests({}).digest(str(link)) is None


def test_symlink_to_file_digests_target_content(tmp_path):
    target = write(tmp_path / "t", b"payload")
    link = tmp_path / "link"
    link.symlink_to(target)
    d = Digests({})
    assert d.digest(str(link)) == d.digest(target)


def test_relative_paths_follow_cwd(tmp_path, monkeypatch):
    write(tmp_path / "rel.txt", b"x")
    monkeypatch.chdir(tmp_path)
    assert Digests({}).digest("rel.txt") == hash_file(str(tmp_path / "rel.txt"))


def test_hash_text_separates_parts():
    assert hash_text("ab", "c") != hash_text("a", "bc")
    assert hash_text("x") == hash_text("x")
    assert hash_text("a\udcff") != hash_text("a")  # surrogate-escaped bytes hash fine


def test_since_tells_a_changed_stat_from_a_racy_one_in_one_stat(tmp_path):
    old = write(tmp_path / "old", b"v1", OLD_NS)
    fresh = write(tmp_path / "fresh", b"v1")  # written just now: racy
    d = Digests(settled_cache_entry(old, "digest-from-last-build"))  # its stat vouches for it
    d.digest(old)
    d.digest(fresh)
    assert d.since(old) is False and not d.moved(old, strict=True)
    assert d.since(fresh) is None  # its stat cannot vouch for it: only its content can
    assert not d.moved(fresh) and d.moved(fresh, strict=True)
    write(tmp_path / "old", b"v2 longer", OLD_NS)
    assert d.since(old) is True and d.moved(old)
    assert d.since(str(tmp_path / "never-digested")) is False


def test_many_files_keep_their_stat_as_the_table_grows(tmp_path):
    """The stat table grows as files come (far past its first room): each file's stat and
    digest, as taken, stay what they were, and the stat cache written back has them all."""
    paths = [write(tmp_path / f"f{k}", f"{k}\n".encode(), OLD_NS + k) for k in range(1500)]
    time.sleep(0.15)  # their ctime out of the racy window (grains.RACY_NS)
    d = Digests({})
    digests = [d.digest(p) for p in paths]
    assert d.hashed == 1500 and d.slots() == 1500
    for k, p in enumerate(paths):
        assert d.seen(p) == stat_key(os.stat(p)) and d.seen(p)[0] == OLD_NS + k
        raw, digest, racy = d.taken(p)
        assert digest == digests[k] == hash_file(p) and not racy
        assert int.from_bytes(raw[:8], "little", signed=True) == OLD_NS + k
        assert d.since(p) is False
    assert d.total_size(paths) == sum(len(f"{k}\n") for k in range(1500))
    assert d.entries() == {p: (stat_key(os.stat(p)), digests[k]) for k, p in enumerate(paths)}
    again = Digests(d.entries())  # the next build: every stat vouches, nothing is read
    assert [again.digest(p) for p in paths] == digests and again.hashed == 0


def test_taken_before_tells_a_digest_taken_before_a_mark(tmp_path):
    """`puts` counts the stats put into slots; a digest taken before a run started (its
    mark) is given back, one taken after it, forgotten, or never taken is not, also as the
    table grows past its first room."""
    d = Digests({})
    early = [write(tmp_path / f"e{k}", b"e", OLD_NS) for k in range(300)]
    time.sleep(0.15)  # their ctime out of the racy window (grains.RACY_NS): their stat vouches
    for p in early:
        d.digest(p)
    mark = d.puts
    late = write(tmp_path / "late", b"l", OLD_NS)
    d.digest(late)
    assert all(d.taken_before(p, mark) == hash_file(p) for p in early)
    assert d.taken_before(late, mark) is None and d.taken_before(late, d.puts) == hash_file(late)
    d.forget(early[0])
    assert d.taken_before(early[0], mark) is None
    d.digest(early[0])  # its stat as its slot has it: still what was taken before the mark
    assert d.taken_before(early[0], mark) == hash_file(early[0])
    assert d.taken_before(str(tmp_path / "never"), d.puts) is None
