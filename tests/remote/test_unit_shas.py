"""The SHA-256 side table: a file is SHA-hashed once per content, and never paired with another content."""

from __future__ import annotations

import hashlib
import importlib.util
import os

import pytest

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)

from farmer.files.digests import hash_file  # noqa: E402
from farmer.remote.shas import Changed, Shas  # noqa: E402
from farmer.store.state import State  # noqa: E402


def test_digests_are_recorded_in_state_db_and_read_back(tmp_path):
    f = tmp_path / "a.c"
    f.write_bytes(b"int a;\n")
    f.chmod(0o755)
    state = State(tmp_path / ".farmer")
    shas = Shas(state.sha256)
    d, executable = shas.of(str(f), hash_file(str(f)))
    assert d.hash == hashlib.sha256(b"int a;\n").hexdigest() and d.size_bytes == 7 and executable
    state.save_sha256(shas.taken())
    state.close()
    again = State(tmp_path / ".farmer")
    assert again.sha256(hash_file(str(f))) == (d.hash, 7)
    assert Shas(again.sha256).of(str(f), hash_file(str(f)))[0] == d
    again.close()


def test_a_known_content_is_not_read_again(tmp_path):
    f = tmp_path / "a.c"
    f.write_bytes(b"one")
    digest = hash_file(str(f))
    shas = Shas(lambda d: ("0" * 64, 3) if d == digest else None)  # what state.db says
    assert shas.of(str(f), digest)[0].hash == "0" * 64
    assert shas.taken() == {}


def test_a_file_that_changed_since_farmer_digested_it_gets_no_sha(tmp_path):
    f = tmp_path / "a.c"
    f.write_bytes(b"before")
    before = hash_file(str(f))
    f.write_bytes(b"after!")
    shas = Shas(lambda d: None)
    with pytest.raises(Changed):
        shas.of(str(f), before)
    assert shas.taken() == {}
    with pytest.raises(Changed):
        shas.of(str(tmp_path / "gone"), before)
