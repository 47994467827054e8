"""`farmer build --remote ...` end to end against a real BuildGrid: a second checkout elsewhere restores
everything, read-only mode, --remote-exec on the workers, a server killed mid-build, a dead server,
headers never written anywhere, and no grpc import when nothing has to run."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time

import pytest
from conftest import start_farmer
from helpers import PROFILE, c_program, imported, last_build_tasks, write_files

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)

# Each command counts its local runs in $RUNS (the `farmer` fixture's ran())
FARMFILE = """\
[remote]
salt = "{salt}"

[task.objects]
foreach = "src/{{stem}}.c"
inputs = ["src/{{stem}}.c", "src/util.h"]
outputs = ["build/{{stem}}.o"]
cmd = "cc -c {{inputs[0]}} -o {{outputs}} && {{{{ [ -z \\"$RUNS\\" ] || echo {{stem}} >> \\"$RUNS\\"; }}}}"

[task.app]
inputs = ["@objects"]
outputs = ["build/app"]
cmd = "cc {{inputs}} -o {{outputs}} && {{{{ [ -z \\"$RUNS\\" ] || echo app >> \\"$RUNS\\"; }}}}"
"""


def checkout(path, salt: str, tag: str = "") -> str:
    return str(write_files(path, {"Farmfile": FARMFILE.format(salt=salt), **c_program(tag)}))


def test_a_second_checkout_at_another_path_restores_everything(tmp_path, farmer, reapi, salt):
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    first = checkout(tmp_path / "one", salt)
    r = farmer(first, *remote)
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == ["app", "main", "util"]
    second = checkout(tmp_path / "elsewhere" / "two", salt)
    r = farmer(second, *remote, "--explain")
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == []  # nothing ran: everything came from the remote
    assert "warning" not in r.stdout + r.stderr
    assert subprocess.run([os.path.join(second, "build/app")], capture_output=True, text=True).stdout == "42\n"
    for cid, t in last_build_tasks(second).items():
        assert t["status"] == "cached" and t["cache"] == "remote" and t["executor"] is None, t
    said = r.stdout + r.stderr  # one line each: why it was due, and where it came from
    assert said.count("farmer: explain:") == 3 and said.count("never built; restored from the remote cache") == 3, said
    r = farmer(second, *remote)  # restored with traces: a no-op
    assert r.returncode == 0 and farmer.ran() == [] and "up to date 3" in r.stdout


def test_read_only_mode_uploads_nothing(tmp_path, farmer, reapi, salt):
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance, "--no-remote-upload"]
    assert farmer(checkout(tmp_path / "one", salt), *remote).returncode == 0
    assert farmer.ran() == ["app", "main", "util"]
    assert farmer(checkout(tmp_path / "two", salt), *remote).returncode == 0
    assert farmer.ran() == ["app", "main", "util"]  # the first uploaded nothing


def test_remote_exec_compiles_and_links_on_the_workers(tmp_path, farmer, reapi, salt):
    root = checkout(tmp_path / "one", salt, tag=salt)
    r = farmer(root, "--remote", reapi.url, "--remote-exec", "-j", "1")
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == []  # none ran here
    assert subprocess.run([os.path.join(root, "build/app")], capture_output=True, text=True).stdout == "42\n"
    assert {t["executor"] for t in last_build_tasks(root).values()} == {"remote"}
    assert "warning" not in r.stdout + r.stderr
    import sqlite3  # remote durations are kept apart from local ones (the latency model's history)
    db = sqlite3.connect(os.path.join(root, ".farmer", "state.db"))
    ids = {row[0] for row in db.execute("SELECT id FROM history")}
    db.close()
    assert ids == {"remote:build/main.o", "remote:build/util.o", "remote:build/app"}


def test_remote_false_runs_locally_but_is_cached(tmp_path, farmer, reapi, salt):
    root = checkout(tmp_path / "one", salt, tag=salt)
    text = open(os.path.join(root, "Farmfile")).read().replace(
        '[task.app]\ninputs = ["@objects"]', '[task.app]\nremote = false\ninputs = ["@objects"]')
    open(os.path.join(root, "Farmfile"), "w").write(text)
    r = farmer(root, "--remote", reapi.url, "--remote-exec")
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == ["app"]
    assert last_build_tasks(root)["build/app"]["executor"] == "local"


def test_a_server_killed_mid_build_is_one_warning_and_a_good_build(tmp_path, farmer, own_cache_server, salt):
    root = checkout(tmp_path / "one", salt)
    with open(os.path.join(root, "Farmfile"), "a") as f:  # something slow after the first runs
        f.write('\n[task.slow]\ninputs = ["build/app"]\noutputs = ["build/slow"]\n'
                'cmd = "sleep 2 && cp build/app build/slow"\n'
                '\n[task.last]\ninputs = ["build/slow"]\noutputs = ["build/last"]\ncmd = "cp build/slow build/last"\n')
    p = farmer.start(root, "--remote", own_cache_server.url)
    for line in p.stdout:
        if "build/app" in line:
            own_cache_server.kill()  # while slow runs
            break
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert (out + err).count("farmer: warning") <= 1, out + err
    assert open(os.path.join(root, "build/last"), "rb").read() == open(os.path.join(root, "build/app"), "rb").read()


def test_a_dead_server_costs_one_warning_and_no_wait(tmp_path, farmer, salt):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = checkout(tmp_path / "one", salt)
    secret = "s3cr3t-" + salt
    r = farmer(root, "--remote", f"grpc://127.0.0.1:{port}", "--remote-header", f"authorization=Bearer {secret}")
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == ["app", "main", "util"]
    said = r.stdout + r.stderr
    assert said.count("farmer: warning") == 1 and "unavailable" in said
    assert r.elapsed < 30  # generous: a loaded machine; the wait itself is the refused connect (~1 ms)
    for dirpath, _, files in os.walk(os.path.join(root, ".farmer")):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                assert secret.encode() not in f.read(), name
    assert secret not in r.stdout + r.stderr


def test_bad_remote_flags_are_usage_errors(tmp_path, farmer, salt):
    root = checkout(tmp_path / "one", salt)
    for args, words in ((["--remote", "http://x:1"], "grpc://"), (["--remote", "grpc://x:1", "--remote-header", "token"], "NAME=VALUE"),
                        (["--remote", "grpc://x:1", "--remote-timeout", "0"], "--remote-timeout")):
        r = farmer(root, *args)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = farmer(root, env={"FARMER_REMOTE": "ftp://x"})
    assert r.returncode == 2 and "grpc://" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_no_grpc_import_when_nothing_has_to_run(tmp_path, farmer, reapi, salt):
    root = checkout(tmp_path / "one", salt)
    with open(os.path.join(root, "Farmfile")) as f:
        text = f.read()
    with open(os.path.join(root, "Farmfile"), "w") as f:
        f.write(text.replace("[remote]\n", f'[remote]\nurl = "{reapi.url}"\ninstance = "{reapi.cache_instance}"\n'))
    assert farmer(root).returncode == 0
    for what in ("no-op", "up to date"):
        if what == "up to date":  # without the no-op proof: the full up-to-date check
            for name in ("noop.snapshot", "noop.stats"):
                if os.path.exists(os.path.join(root, ".farmer", name)):
                    os.remove(os.path.join(root, ".farmer", name))
        r = farmer(root, env=PROFILE)
        assert r.returncode == 0 and "up to date 3" in r.stdout, (what, r.stdout, r.stderr[-2000:])
        assert not {m for m in imported(r) if m == "grpc" or m.startswith(("grpc.", "google.protobuf", "farmer.remote.client"))}, what


def test_ctrl_c_during_remote_execution_stops_at_once_and_leaves_nothing_half_written(tmp_path, farmer, reapi, salt):
    import signal

    root = checkout(tmp_path / "one", salt)
    with open(os.path.join(root, "Farmfile"), "a") as f:
        f.write('\n[task.slow]\ninputs = ["src/util.h"]\noutputs = ["build/slow"]\ncmd = "sleep 8 && cp src/util.h build/slow"\n')
    p = start_farmer(root, "build", "build/slow", "--remote", reapi.url, "--remote-exec")
    time.sleep(2.5)  # the action is on a worker by now
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    assert time.monotonic() - t0 < 15
    assert not os.path.exists(os.path.join(root, "build/slow"))
    left = [f for _, _, files in os.walk(root) for f in files if "remote-tmp" in f]
    assert not left
    assert last_build_tasks(root)["build/slow"]["status"] == "failed"


NINJA = """\
rule cc
  command = cc -MD -MF $out.d -c $in -o $out
  depfile = $out.d
  deps = gcc
rule link
  command = cc $in -o $out
build build/main.o: cc src/main.c
build build/util.o: cc src/util.c
build build/app: link build/main.o build/util.o
"""


def test_a_restored_deps_gcc_edge_still_tracks_its_headers(tmp_path, farmer, reapi, salt):
    remote = ["-f", "build.ninja", "--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    roots = []
    for name in ("one", "two"):
        root = tmp_path / name
        write_files(root, c_program(salt))  # bytes of this test's own
        (root / "build.ninja").write_text(NINJA)
        roots.append(str(root))
    assert farmer(roots[0], *remote).returncode == 0
    r = farmer(roots[1], *remote)
    assert r.returncode == 0 and {t["status"] for t in last_build_tasks(roots[1]).values()} == {"cached"}, r.stdout
    with open(os.path.join(roots[1], "src", "util.h"), "a") as f:
        f.write("int thrice(int);\n")  # a header only the depfile names
    r = farmer(roots[1], *remote, "--explain")
    assert r.returncode == 0
    ran = {cid for cid, t in last_build_tasks(roots[1]).items() if t["status"] in ("ran", "cached")}
    assert {"build/main.o", "build/util.o"} <= ran, r.stdout
