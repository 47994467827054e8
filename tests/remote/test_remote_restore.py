"""Restores from the remote many at once (farmer/remote/lookups.py, restorer.py) against a real
BuildGrid: every file verified and right, a server killed while restores are in flight, remote hits
kept in the local cache, and read-only mode with both caches."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess

import pytest
from conftest import run_farmer, start_farmer
from helpers import last_build_tasks, write_files

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)


N = 120  # enough computations that many are looked up and restored at once

FARMFILE = """\
[remote]
salt = "{salt}"

[task.copy]
foreach = "src/{{stem}}.txt"
inputs = ["src/{{stem}}.txt"]
outputs = ["out/{{stem}}.txt"]
cmd = "cat {{inputs}} > {{outputs}} && echo copied {{stem}} && {{{{ [ -z \\"$RUNS\\" ] || echo {{stem}} >> \\"$RUNS\\"; }}}}"

[task.big]
inputs = ["src/s0.txt"]
outputs = ["out/big.bin", "out/tool.sh"]
cmd = "yes {salt} | head -c 3000000 > out/big.bin && printf '#!/bin/sh\\\\necho hi\\\\n' > out/tool.sh && chmod +x out/tool.sh"

[task.all]
inputs = ["@copy", "out/big.bin"]
outputs = ["out/all.txt"]
cmd = "cat {{inputs}} | sha256sum > {{outputs}}"
"""


def checkout(path, salt: str) -> str:
    sources = {f"src/s{i}.txt": f"source {i} {salt}\n" * (1 + i % 7) for i in range(N)}
    return str(write_files(path, {"Farmfile": FARMFILE.format(salt=salt), **sources}))


def outputs(root: str) -> dict[str, tuple[str, bool]]:
    """Every file under out/: its SHA-256 and executable bit."""
    out = {}
    for name in sorted(os.listdir(os.path.join(root, "out"))):
        path = os.path.join(root, "out", name)
        with open(path, "rb") as f:
            out[name] = (hashlib.sha256(f.read()).hexdigest(), os.access(path, os.X_OK))
    return out


def leftovers(root: str) -> list[str]:
    return [f for _, _, files in os.walk(root) for f in files if "remote-tmp" in f]


def test_many_restores_at_once_are_all_verified_and_right(tmp_path, farmer, reapi, salt):
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    first = checkout(tmp_path / "one", salt)
    r = farmer(first, *remote)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stdout + r.stderr  # every upload ended, none cancelled at the build's end
    assert len(farmer.ran()) == N
    second = checkout(tmp_path / "elsewhere" / "two", salt)
    r = farmer(second, *remote)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stdout + r.stderr
    assert farmer.ran() == []  # nothing ran here
    statuses = last_build_tasks(second)
    assert len(statuses) == N + 2
    assert all(t["status"] == "cached" and t["cache"] == "remote" for t in statuses.values()), statuses
    assert outputs(second) == outputs(first)  # the 3 MB one came by ByteStream, the script kept its x bit
    assert subprocess.run([os.path.join(second, "out", "tool.sh")], capture_output=True, text=True).stdout == "hi\n"
    log = os.path.join(second, ".farmer", "logs")  # each computation's own output came back with it
    said = [open(os.path.join(log, f)).read() for f in os.listdir(log)]
    assert sorted(s for s in said if s.startswith("copied")) == sorted(f"copied s{i}\n" for i in range(N))
    assert not leftovers(second)
    r = farmer(second, *remote)  # every restore got its trace: a no-op
    assert r.returncode == 0 and f"up to date {N + 2}" in r.stdout, r.stdout


def test_a_server_killed_during_restores_leaves_whole_files_and_the_build_goes_on(tmp_path, farmer, own_cache_server, salt):
    first = checkout(tmp_path / "one", salt)
    assert farmer(first, "--remote", own_cache_server.url).returncode == 0
    farmer.ran()
    second = checkout(tmp_path / "two", salt)
    # -j 2 whatever the machine's CPUs: a few lookups in flight at the kill, so most run here
    p = farmer.start(second, "-j", "2", "--remote", own_cache_server.url)
    for line in p.stdout:
        if line.startswith("["):  # the first restore is in; more are in flight
            own_cache_server.kill()
            break
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err
    said = out + err
    assert said.count("farmer: warning") <= 1, said
    assert outputs(second) == outputs(first)
    statuses = {t["status"] for t in last_build_tasks(second).values()}
    assert statuses <= {"cached", "ran"} and "ran" in statuses, statuses
    ran_here = sorted(os.path.basename(i)[:-4] for i, t in last_build_tasks(second).items()
                      if t["status"] == "ran" and i.startswith("out/s"))
    assert sorted(farmer.ran()) == ran_here  # what was not restored ran here, once
    assert len(ran_here) >= N // 2
    assert not leftovers(second)
    r = farmer(second)  # the state is whole: everything is up to date
    assert r.returncode == 0 and f"up to date {N + 2}" in r.stdout, r.stdout


def test_strict_fails_a_build_whose_server_died_and_last_build_and_reports_say_why(tmp_path, farmer,
                                                                                   own_cache_server, salt):
    first = checkout(tmp_path / "one", salt)
    assert farmer(first, "--remote", own_cache_server.url).returncode == 0
    farmer.ran()
    second = checkout(tmp_path / "two", salt)
    p = farmer.start(second, "-j", "2", "--remote", own_cache_server.url, "--remote-strict")
    for line in p.stdout:
        if line.startswith("["):  # the first restore is in; more are in flight
            own_cache_server.kill()
            break
    out, err = p.communicate(timeout=180)
    assert p.returncode == 1, out + err
    assert "farmer: error:" in err and "(--remote-strict)" in err, err
    assert outputs(second) == outputs(first)  # the outputs are right all the same
    with open(os.path.join(second, ".farmer", "last-build.json")) as f:
        last = json.load(f)
    assert last["status"] == "failed"
    assert "(--remote-strict)" in last["remote_error"] and "unavailable" in last["remote_error"], last["remote_error"]
    assert {t["status"] for t in last["tasks"]} <= {"cached", "ran"}  # no computation failed
    junit = tmp_path / "junit.xml"
    assert run_farmer(second, "report", "--junit", str(junit)).returncode == 0
    xml = junit.read_text()
    assert '<testsuite name="remote" tests="1" failures="1"' in xml and "unavailable" in xml, xml
    markdown = run_farmer(second, "report", "--markdown").stdout
    assert "## farmer build FAILED" in markdown and "**Remote error:**" in markdown, markdown
    r = farmer(second)  # without --remote: nothing left to do, the outputs were right
    assert r.returncode == 0 and f"up to date {N + 2}" in r.stdout, r.stdout + r.stderr


def test_a_remote_hit_lands_in_the_local_cache(tmp_path, farmer, own_cache_server, salt):
    first = checkout(tmp_path / "one", salt)
    assert farmer(first, "--remote", own_cache_server.url).returncode == 0
    farmer.ran()
    local = ["--cache", "--cache-dir", str(tmp_path / "local-cache"), "--remote", own_cache_server.url]
    second = checkout(tmp_path / "two", salt)
    r = farmer(second, *local)
    assert r.returncode == 0, r.stderr
    assert {t["cache"] for t in last_build_tasks(second).values()} == {"remote"}
    own_cache_server.kill()  # no network from here on
    third = checkout(tmp_path / "three", salt)
    r = farmer(third, *local)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stdout + r.stderr  # the server was never asked
    assert farmer.ran() == []
    assert all(t["status"] == "cached" and t["cache"] == "local" for t in last_build_tasks(third).values()), last_build_tasks(third)
    assert outputs(third) == outputs(first)


def test_read_only_with_a_local_cache_keeps_runs_locally_and_uploads_nothing(tmp_path, farmer, reapi, client_of, salt):
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    read_only = [*remote, "--no-remote-upload", "--cache", "--cache-dir", str(tmp_path / "local-cache")]
    first = checkout(tmp_path / "one", salt)
    r = farmer(first, *read_only)
    assert r.returncode == 0, r.stderr
    assert len(farmer.ran()) == N and {t["status"] for t in last_build_tasks(first).values()} == {"ran"}
    from farmer.remote.client import digest_of

    client = client_of(reapi.cache_instance)
    with open(os.path.join(first, "out", "big.bin"), "rb") as f:
        big = digest_of(f.read())  # made of the salt: no other test has these bytes
    assert client.find_missing([big]) == [big]  # never uploaded
    second = checkout(tmp_path / "two", salt)
    r = farmer(second, *remote, "--cache", "--cache-dir", str(tmp_path / "other-cache"))
    assert r.returncode == 0, r.stderr
    assert {t["status"] for t in last_build_tasks(second).values()} == {"ran"}  # nothing on the server to restore
    assert len(farmer.ran()) == N
    third = checkout(tmp_path / "three", salt)
    r = farmer(third, *read_only)  # but the first's local cache has everything
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == [] and {t["cache"] for t in last_build_tasks(third).values()} == {"local"}
    assert outputs(third) == outputs(first)


def test_ctrl_c_while_restores_hang_stops_at_once_and_leaves_nothing_half_written(tmp_path, farmer, own_cache_server, salt):
    import signal
    import time

    first = checkout(tmp_path / "one", salt)
    assert farmer(first, "--remote", own_cache_server.url).returncode == 0
    second = checkout(tmp_path / "two", salt)
    # -j 64: more lookups in flight than a call_many keeps going at once (client.MANY_AT_ONCE), so
    # a cancelled call makes room for the next, which must be cancelled as it starts (whatever
    # the machine's CPUs: the default -j follows them)
    build = ["build", "-j", "64", "--remote", own_cache_server.url]
    p = start_farmer(second, *build)
    try:
        for line in p.stdout:
            if line.startswith("["):  # restores are in flight: the server stops answering
                os.kill(own_cache_server.pid, signal.SIGSTOP)
                break
        time.sleep(1)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        stopped_in = time.monotonic() - t0
    finally:
        os.kill(own_cache_server.pid, signal.SIGCONT)
    assert p.returncode == 130, out + err
    assert stopped_in < 10  # not the 30 s deadline of the calls in flight
    assert "Traceback" not in err
    assert not leftovers(second)
    r = farmer(second, "--remote", own_cache_server.url)  # the state is whole: the rest is restored or run
    assert r.returncode == 0, r.stderr
    assert outputs(second) == outputs(first)
