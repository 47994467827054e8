"""The remote's settings from flags and environment, and a credential helper's reply: pure
functions, no server (farmer/remote/config.py, farmer/remote/credentials.py)."""

from __future__ import annotations

import time

import pytest

from farmer.remote.config import RemoteConfigError, resolve
from farmer.remote.credentials import CredentialError, CredentialHelper, parse_reply


def test_remote_names_cache_and_executor_and_each_can_be_named_apart():
    s = resolve(url="grpc://both:1", environ={})
    assert s.endpoint.url == "grpc://both:1" and s.endpoint.executor is None and not s.execute
    s = resolve(cache_url="grpc://cache:1", executor_url="grpc://exec:2", environ={})
    assert s.endpoint.url == "grpc://cache:1" and s.endpoint.executor == "grpc://exec:2" and s.execute
    s = resolve(executor_url="grpc://exec:2", environ={})  # an executor alone is the cache too
    assert s.endpoint.url == "grpc://exec:2" and s.endpoint.executor is None and s.execute
    s = resolve(environ={"FARMER_REMOTE_CACHE": "grpc://c:1", "FARMER_REMOTE_EXECUTOR": "grpc://e:1"})
    assert (s.endpoint.url, s.endpoint.executor) == ("grpc://c:1", "grpc://e:1")


def test_platform_and_salt_from_flags_then_environment_then_the_table():
    table = {"url": "grpc://x:1", "platform": {"OSFamily": "linux"}, "salt": "t"}
    s = resolve(table=table, environ={})
    assert s.platform == {"OSFamily": "linux"} and s.salt == "t"
    s = resolve(table=table, environ={"FARMER_REMOTE_PLATFORM": "OSFamily=linux,ISA=x86-64", "FARMER_REMOTE_SALT": "e"})
    assert s.platform == {"OSFamily": "linux", "ISA": "x86-64"} and s.salt == "e"
    s = resolve(table=table, platform=("container-image=docker://x",), salt="f", environ={"FARMER_REMOTE_SALT": "e"})
    assert s.platform == {"container-image": "docker://x"} and s.salt == "f"
    with pytest.raises(RemoteConfigError, match="NAME=VALUE"):
        resolve(url="grpc://x:1", platform=("linux",), environ={})


def test_tls_files_are_checked_before_the_build(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    s = resolve(url="grpcs://x", ca=str(ca), environ={})
    assert s.endpoint.ca == str(ca) and s.endpoint.secure
    with pytest.raises(RemoteConfigError, match="no such readable file"):
        resolve(url="grpcs://x", ca=str(tmp_path / "missing.pem"), environ={})
    with pytest.raises(RemoteConfigError, match="go together"):
        resolve(url="grpcs://x", cert=str(ca), environ={})
    with pytest.raises(RemoteConfigError, match="grpcs://"):
        resolve(url="grpc://x:1", ca=str(ca), environ={})


def test_strict_and_refresh_from_flags_or_environment():
    s = resolve(url="grpc://x:1", environ={"FARMER_REMOTE_STRICT": "1", "FARMER_REMOTE_REFRESH": "yes"})
    assert s.strict and s.refresh
    s = resolve(url="grpc://x:1", environ={})
    assert not s.strict and not s.refresh


def test_a_helper_reply_gives_headers_lower_cased_and_its_expiry():
    headers, expires = parse_reply(b'{"headers": {"Authorization": ["Bearer a", "Bearer b"], "X-Key": "k"},'
                                   b' "expires": "2030-01-01T00:00:00Z"}', "h")
    assert headers == (("authorization", "Bearer a"), ("authorization", "Bearer b"), ("x-key", "k"))
    assert 1893456000 - 120 < expires < 1893456000  # a minute early
    assert parse_reply(b'{"headers": {}}', "h")[1] == float("inf")


def test_a_bad_helper_reply_never_echoes_what_it_printed():
    with pytest.raises(CredentialError) as e:
        parse_reply(b"Bearer s3cr3t-token", "helper")
    assert "s3cr3t" not in str(e.value)


def test_a_helper_is_asked_once_until_its_headers_expire_or_are_refused(tmp_path):
    count = tmp_path / "runs"
    helper = tmp_path / "helper"
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))  # within the minute: expired
    helper.write_text(f"#!/bin/sh\ncat >/dev/null\necho x >> {count}\n"
                      f"echo '{{\"headers\": {{\"authorization\": [\"t\"]}}, \"expires\": \"$1-{soon}\"}}'"
                      .replace("$1-", ""))
    helper.chmod(0o755)
    h = CredentialHelper(str(helper), "grpcs://x")
    assert h.headers() == (("authorization", "t"),)
    h.headers()
    assert count.read_text().count("x") == 2  # it expires within a minute: asked again
    never = tmp_path / "never"
    never.write_text("#!/bin/sh\ncat >/dev/null\necho '{\"headers\": {\"authorization\": [\"t\"]}}'\n")
    never.chmod(0o755)
    h = CredentialHelper(str(never), "grpcs://x")
    h.headers(), h.headers()
    assert h.runs == 1
    h.headers(fresh=True)  # after UNAUTHENTICATED
    assert h.runs == 2


def test_a_failing_helper_is_a_credential_error(tmp_path):
    helper = tmp_path / "helper"
    helper.write_text("#!/bin/sh\necho 'token-in-stderr' >&2\nexit 3\n")
    helper.chmod(0o755)
    with pytest.raises(CredentialError, match="exited with 3") as e:
        CredentialHelper(str(helper), "grpcs://x").headers()
    assert "token-in-stderr" not in str(e.value)
