"""What a team leans on, against a real BuildGrid (tests/remote/conftest.py): symbolic-link outputs
kept as links by the remote cache and by remote execution, a queued action that no worker takes,
a server that freezes, a corrupt blob healed, bots that come back after the server dropped them,
and why a computation ran here under --remote-exec."""

from __future__ import annotations

import importlib.util
import os
import signal
import time

import pytest
from helpers import last_build_tasks, write_files

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)

# a library and the link to it, as CMake's cmake_symlink_library makes them
LINKS = """\
[remote]
salt = "{salt}"

[task.lib]
inputs = ["src.txt"]
outputs = ["libx.so.1.0"]
cmd = "cat src.txt > libx.so.1.0 && {{{{ [ -z \\"$RUNS\\" ] || echo lib >> \\"$RUNS\\"; }}}}"

[task.links]
inputs = ["libx.so.1.0"]
outputs = ["libx.so"]
cmd = "ln -sf libx.so.1.0 libx.so && {{{{ [ -z \\"$RUNS\\" ] || echo links >> \\"$RUNS\\"; }}}}"
"""


def links_project(path, salt: str, text: str = "lib\n") -> str:
    return str(write_files(path, {"Farmfile": LINKS.format(salt=salt), "src.txt": text}))


def test_a_link_output_comes_back_from_the_remote_cache_as_the_same_link(tmp_path, farmer, reapi, salt):
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    first = links_project(tmp_path / "a", salt)
    assert farmer(first, *remote).returncode == 0
    assert farmer.ran() == ["lib", "links"]
    second = links_project(tmp_path / "b", salt)
    r = farmer(second, *remote)
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == []
    assert "warning" not in r.stdout + r.stderr
    link = os.path.join(second, "libx.so")
    assert os.path.islink(link) and os.readlink(link) == "libx.so.1.0"
    assert open(link).read() == "lib\n"
    r = farmer(second, *remote)  # the restored link is recorded as the run's: a no-op
    assert r.returncode == 0 and farmer.ran() == [] and "up to date 2" in r.stdout, r.stdout


def test_a_link_made_on_a_worker_comes_back_as_a_link(tmp_path, farmer, reapi, salt):
    root = links_project(tmp_path / "a", salt, text=f"lib {salt}\n")
    r = farmer(root, "--remote", reapi.url, "--remote-exec", "-j", "1")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stdout + r.stderr
    assert farmer.ran() == []  # both ran on the workers
    assert {t["executor"] for t in last_build_tasks(root).values()} == {"remote"}
    link = os.path.join(root, "libx.so")
    assert os.path.islink(link) and os.readlink(link) == "libx.so.1.0"


@pytest.mark.slow  # a whole stack of its own (PostgreSQL, bgd, a bot)
def test_a_bot_the_server_dropped_registers_again(own_exec_stack, client_of, tmp_path):
    """A bot silent for longer than the server's bot session timeout (a server frozen that long, a
    network partition, the bot itself stopped) finds its session dropped ("Bot does not exist");
    it registers again and takes work."""
    from .test_remote_client import action_of

    stack = own_exec_stack(bots=1, bot_timeout_s=3)
    bot = stack.pids["bot-0"]
    until = time.monotonic() + 60
    while not stack.bot_sessions() and time.monotonic() < until:  # the bot registered
        time.sleep(0.2)
    os.kill(bot, signal.SIGSTOP)
    try:
        while stack.bot_sessions() and time.monotonic() < until:  # the server reaps the silent session
            time.sleep(0.5)
        assert stack.bot_sessions() == 0
    finally:
        os.kill(bot, signal.SIGCONT)
    client = client_of("", url=stack.url, timeout=20)
    digest = action_of(client, ["/bin/sh", "-c", "echo back > out.txt"], {}, ["out.txt"], tmp_path)
    response = client.execute(digest, 60)
    assert response.result.exit_code == 0, stack.bot_log(0)
    log = stack.bot_log(0)
    assert "Bot does not exist" in log and "registering again" in log, log


# for why a computation ran here: a plain compile-like step, one naming the root's absolute path,
# one with remote = false, and a python step
REASONS = """\
[remote]
salt = "{salt}"

[task.sent]
inputs = ["a.txt"]
outputs = ["out/sent.txt"]
cmd = "sleep 0.5; cat a.txt > out/sent.txt && {{{{ [ -z \\"$RUNS\\" ] || echo sent >> \\"$RUNS\\"; }}}}"

[task.pinned]
inputs = ["a.txt"]
outputs = ["out/pinned.txt"]
remote = false
cmd = "cat a.txt > out/pinned.txt"

[task.absolute]
inputs = ["a.txt"]
outputs = ["out/absolute.txt"]
cmd = "cat {root}/a.txt > out/absolute.txt"

[task.py]
inputs = ["a.txt", "copier.py"]
outputs = ["out/py.txt"]
python = "copier.py a.txt {{outputs}}"
"""


def reasons_project(path, salt: str) -> str:
    return str(write_files(path, {"Farmfile": REASONS.format(salt=salt, root=path), "a.txt": salt,
                                  "copier.py": "import shutil, sys\nshutil.copy(sys.argv[1], sys.argv[2])\n"}))


def test_every_step_run_here_says_why(tmp_path, farmer, reapi, salt):
    root = reasons_project(tmp_path / "p", salt)
    r = farmer(root, "--remote", reapi.url, "--remote-exec", "--explain", "-j", "1")
    assert r.returncode == 0, r.stderr
    tasks = last_build_tasks(root)
    assert tasks["out/sent.txt"]["executor"] == "remote" and "local_because" not in tasks["out/sent.txt"]
    assert tasks["out/pinned.txt"]["local_because"] == "remote = false"
    assert tasks["out/absolute.txt"]["local_because"] == f"absolute path {root} under the root"
    assert tasks["out/py.txt"]["local_because"] == "python task"
    said = r.stdout + r.stderr
    # one line each: why it was due, and why it ran here
    assert "farmer: explain: out/pinned.txt: never built; ran here, not remotely: remote = false" in said
    assert f"out/absolute.txt: never built; ran here, not remotely: absolute path {root} under the root" in said
    assert said.count("out/sent.txt") == 2, said  # its explain line and its [n/N] line


@pytest.mark.slow  # a whole stack of its own, without bots
def test_an_action_no_worker_takes_runs_here_after_the_remote_timeout(tmp_path, farmer, own_exec_stack, salt):
    stack = own_exec_stack(bots=0)  # every action stays queued
    root = reasons_project(tmp_path / "p", salt)
    t0 = time.monotonic()
    r = farmer(root, "--remote", stack.url, "--remote-exec", "--remote-timeout", "3", "--explain")
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert farmer.ran() == ["sent"]
    assert open(os.path.join(root, "out/sent.txt")).read() == salt
    task = last_build_tasks(root)["out/sent.txt"]
    assert task["executor"] == "local" and task["local_because"] == "remote queue timeout", task
    said = r.stdout + r.stderr
    assert said.count("farmer: warning") == 1 and "still queued after 3 s" in said, said
    assert "out/sent.txt: never built; ran here, not remotely: remote queue timeout" in said
    assert elapsed < 40, elapsed  # not the hour a queued action could wait (generous: a loaded machine)


# `slow` misses in a second checkout (b.txt differs) but writes what it wrote in the first, so
# `after` would be a hit: its lookup is the one a server frozen meanwhile leaves unanswered
FREEZE = """\
[remote]
salt = "{salt}"

[task.first]
inputs = ["a.txt"]
outputs = ["out/first"]
cmd = "cat a.txt > out/first"

[task.slow]
inputs = ["b.txt"]
outputs = ["out/slow"]
cmd = "sleep 3; echo same > out/slow"

[task.after]
inputs = ["out/slow"]
outputs = ["out/after"]
cmd = "cat out/slow > out/after && {{{{ [ -z \\"$RUNS\\" ] || echo after >> \\"$RUNS\\"; }}}}"
"""


@pytest.mark.slow  # fault injection: a server frozen with SIGSTOP, then the 2 s deadline waited out
def test_a_server_frozen_mid_build_costs_a_lookup_deadline_not_the_remote_timeout(tmp_path, farmer,
                                                                                   own_cache_server, salt):
    remote = ["--remote", own_cache_server.url]
    first = write_files(tmp_path / "a", {"Farmfile": FREEZE.format(salt=salt), "a.txt": "a", "b.txt": "1"})
    assert farmer(str(first), *remote).returncode == 0
    assert farmer.ran() == ["after"]
    second = write_files(tmp_path / "b", {"Farmfile": FREEZE.format(salt=salt), "a.txt": "a", "b.txt": "2"})
    p = farmer.start(str(second), *remote, "-j", "2")
    frozen = False
    try:
        for line in p.stdout:
            if "out/first" in line:  # restored; slow runs: freeze the server before `after` is looked up
                os.kill(own_cache_server.pid, signal.SIGSTOP)
                frozen, t0 = True, time.monotonic()
                break
        out, err = p.communicate(timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        if frozen:
            os.kill(own_cache_server.pid, signal.SIGCONT)
    assert p.returncode == 0, err
    assert farmer.ran() == ["after"]  # its lookup went unanswered: it ran here
    said = out + err
    assert said.count("farmer: warning") == 1 and "DEADLINE_EXCEEDED" in said, said
    # slow's 3 s, one lookup deadline (2 s), after's run; not the 30 s --remote-timeout, nor the
    # uploads' wait at the end (generous: a loaded machine)
    assert elapsed < 20, (elapsed, said)
    assert open(os.path.join(second, "out/after")).read() == "same\n"


# -- credentials ----------------------------------------------------------------------------------

PLAIN = """\
[task.one]
inputs = ["a.txt"]
outputs = ["out/one.txt"]
cmd = "cat a.txt > out/one.txt && {{ [ -z \\"$RUNS\\" ] || echo one >> \\"$RUNS\\"; }}"
"""


def plain_project(path, salt: str) -> str:
    return str(write_files(path, {"Farmfile": PLAIN, "a.txt": salt}))


def written_anywhere(root: str, secret: str) -> list[str]:
    """The files under `root` holding `secret`."""
    found = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                if secret.encode() in f.read():
                    found.append(path)
    return found


def test_tls_with_a_private_ca_mtls_and_a_token(tmp_path, farmer, tls_server, salt):
    token = tls_server.token()
    tls = ["--remote", tls_server.url, "--remote-ca", tls_server.ca, "--remote-cert", tls_server.cert,
           "--remote-key", tls_server.key, "--remote-salt", salt]
    first = plain_project(tmp_path / "a", salt)
    r = farmer(first, *tls, "--remote-header", f"authorization=Bearer {token}")
    assert r.returncode == 0 and "warning" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert farmer.ran() == ["one"]
    second = plain_project(tmp_path / "b", salt)
    r = farmer(second, *tls, "--remote-header", f"authorization=Bearer {token}")
    assert r.returncode == 0 and farmer.ran() == [], r.stdout + r.stderr
    assert last_build_tasks(second)["out/one.txt"]["cache"] == "remote"
    assert token not in r.stdout + r.stderr and not written_anywhere(second, token)


@pytest.mark.slow  # a whole TLS stack of its own (PostgreSQL, bgd, a bot)
def test_a_worker_over_tls_runs_an_action_of_a_tls_build(tmp_path, farmer, tls_exec_stack, salt):
    server = tls_exec_stack
    token = server.token()
    root = plain_project(tmp_path / "a", salt)
    r = farmer(root, "--remote", server.url, "--remote-exec", "--remote-ca", server.ca, "--remote-cert", server.cert,
               "--remote-key", server.key, "--remote-header", f"authorization=Bearer {token}",
               "--remote-salt", salt)
    assert r.returncode == 0 and "warning" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert farmer.ran() == []  # not here: the worker ran it
    task = last_build_tasks(root)["out/one.txt"]
    assert task["status"] == "ran" and task["executor"] == "remote" and "local_because" not in task, task
    with open(os.path.join(root, "out/one.txt")) as f:
        assert f.read() == salt


def test_a_tls_failure_is_one_warning_and_no_grpc_log_line(tmp_path, farmer, tls_server, salt):
    # no --remote-ca: the server's certificate is from a CA the system does not know; and an
    # environment that asks gRPC for its log lines (a CI image, a shell profile)
    r = farmer(plain_project(tmp_path / "a", salt), "--remote", tls_server.url,
               "--remote-header", f"authorization=Bearer {tls_server.token()}", env={"GRPC_VERBOSITY": "INFO"})
    assert r.returncode == 0 and farmer.ran() == ["one"]
    said = r.stdout + r.stderr
    assert said.count("farmer: warning") == 1, said
    lines = [line for line in said.splitlines() if line.strip()]
    assert all(line.startswith(("farmer", "[")) for line in lines), said  # nothing of gRPC's own
    assert "CERTIFICATE_VERIFY_FAILED" in said or "certificate" in said.lower(), said


def test_a_bad_token_is_named_an_authentication_error_and_strict_fails_the_build(tmp_path, farmer, tls_server,
                                                                                 salt):
    bad = "not-a-token-" + salt
    args = ["--remote", tls_server.url, "--remote-ca", tls_server.ca, "--remote-cert", tls_server.cert,
            "--remote-key", tls_server.key, "--remote-header", f"authorization=Bearer {bad}"]
    root = plain_project(tmp_path / "a", salt)
    r = farmer(root, *args)
    said = r.stdout + r.stderr
    assert r.returncode == 0 and "authentication error (UNAUTHENTICATED" in said and "unavailable" not in said, said
    r = farmer(root, *args, "--remote-strict")
    assert r.returncode == 0 and "up to date" in r.stdout  # nothing to run: the remote was not consulted
    os.unlink(os.path.join(root, "out/one.txt"))
    r = farmer(root, *args, "--remote-strict")
    said = r.stdout + r.stderr
    assert r.returncode == 1 and "farmer: error:" in said and "authentication error" in said, said
    assert os.path.exists(os.path.join(root, "out/one.txt"))  # the build itself went on: right outputs
    assert bad not in said and not written_anywhere(root, bad)


HELPER = """\
#!/bin/sh
# a credential helper: the request on stdin, the headers as JSON on stdout; counts its runs
cat > /dev/null
echo run >> {count}
printf '{{"headers": {{"Authorization": ["Bearer %s"]}}, "expires": "2999-01-01T00:00:00Z"}}' "$(cat {token})"
"""


def test_a_credential_helper_gives_the_token_which_is_never_written(tmp_path, farmer, tls_server, salt):
    token_file, count = tmp_path / "token", tmp_path / "helper-runs"
    token = tls_server.token()
    token_file.write_text(token)
    helper = tmp_path / "helper.sh"
    helper.write_text(HELPER.format(count=count, token=token_file))
    helper.chmod(0o755)
    args = ["--remote", tls_server.url, "--remote-ca", tls_server.ca, "--remote-cert", tls_server.cert,
            "--remote-key", tls_server.key, "--remote-credential-helper", str(helper), "--remote-salt", salt]
    first = plain_project(tmp_path / "a", salt)
    r = farmer(first, *args)
    assert r.returncode == 0 and "warning" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert farmer.ran() == ["one"]
    assert count.read_text().count("run") == 1  # asked once for the whole build
    second = plain_project(tmp_path / "b", salt)
    r = farmer(second, *args)
    assert r.returncode == 0 and farmer.ran() == [], r.stdout + r.stderr
    for root in (first, second):
        assert not written_anywhere(root, token)
    assert token not in r.stdout + r.stderr


def test_query_remote_shows_the_action_digest_and_what_came_of_the_lookup(tmp_path, farmer, reapi, salt):
    from conftest import run_farmer

    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance, "--remote-salt", salt]
    first = plain_project(tmp_path / "a", salt)
    assert farmer(first, *remote).returncode == 0 and farmer.ran() == ["one"]
    miss = last_build_tasks(first)["out/one.txt"]["remote_lookup"]
    assert miss["result"] == "miss" and len(miss["action"].split("/")[0]) == 64, miss
    second = plain_project(tmp_path / "b", salt)
    assert farmer(second, *remote).returncode == 0 and farmer.ran() == []
    hit = last_build_tasks(second)["out/one.txt"]["remote_lookup"]
    assert hit == {"action": miss["action"], "result": "hit"}  # the same key at another path
    q = run_farmer(second, "query", "--remote", "out/one.txt")
    assert q.returncode == 0 and f"remote action: {miss['action']}" in q.stdout and "remote lookup: hit" in q.stdout
    # another salt (a new generation): another key, and a miss
    os.unlink(os.path.join(second, "out/one.txt"))
    r = farmer(second, "--remote", reapi.url, "--remote-instance", reapi.cache_instance, "--remote-salt", salt + "2")
    assert r.returncode == 0 and farmer.ran() == ["one"]
    other = last_build_tasks(second)["out/one.txt"]["remote_lookup"]
    assert other["result"] == "miss" and other["action"] != miss["action"]


def test_remote_refresh_runs_and_uploads_over_what_was_there(tmp_path, farmer, reapi, salt):
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance, "--remote-salt", salt]
    assert farmer(plain_project(tmp_path / "a", salt), *remote).returncode == 0
    assert farmer.ran() == ["one"]
    refreshed = plain_project(tmp_path / "b", salt)
    r = farmer(refreshed, *remote, "--remote-refresh")
    assert r.returncode == 0 and farmer.ran() == ["one"]  # a hit was there: it ran anyway
    assert last_build_tasks(refreshed)["out/one.txt"]["remote_lookup"]["result"].startswith("not looked up")
    assert farmer(plain_project(tmp_path / "c", salt), *remote).returncode == 0
    assert farmer.ran() == []


def test_remote_refresh_ignores_local_cache_hits_too_so_their_results_are_uploaded(tmp_path, farmer, reapi, salt):
    local = ["--cache", "--cache-dir", str(tmp_path / "local-cache")]
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance, "--remote-salt", salt]
    assert farmer(plain_project(tmp_path / "a", salt), *local).returncode == 0  # in the local cache only
    assert farmer.ran() == ["one"]
    refreshed = plain_project(tmp_path / "b", salt)
    r = farmer(refreshed, *local, *remote, "--remote-refresh")
    assert r.returncode == 0 and farmer.ran() == ["one"], r.stdout + r.stderr  # the local hit ran anyway
    task = last_build_tasks(refreshed)["out/one.txt"]
    assert task["status"] == "ran" and task["remote_lookup"]["result"].startswith("not looked up"), task
    r = farmer(plain_project(tmp_path / "c", salt), *remote)  # no local cache: the remote has it now
    assert r.returncode == 0 and farmer.ran() == [], r.stdout + r.stderr
    r = farmer(plain_project(tmp_path / "d", salt), *local)  # and the local cache still does
    assert r.returncode == 0 and farmer.ran() == [], r.stdout + r.stderr


def test_platform_and_salt_flags_reach_the_workers_key_for_a_build_ninja(tmp_path, farmer, reapi, salt):
    ninja = ("rule copy\n  command = cp $in $out\nbuild out.txt: copy in.txt\n")
    root = str(write_files(tmp_path / "n", {"build.ninja": ninja, "in.txt": salt}))
    args = ["-f", "build.ninja", "--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    assert farmer(root, *args, "--remote-salt", salt).returncode == 0
    plain = last_build_tasks(root)["out.txt"]["remote_lookup"]["action"]
    os.unlink(os.path.join(root, "out.txt"))
    assert farmer(root, *args, "--remote-salt", salt, "--remote-platform", "OSFamily=linux").returncode == 0
    with_platform = last_build_tasks(root)["out.txt"]["remote_lookup"]
    assert with_platform["action"] != plain and with_platform["result"] == "miss"
    os.unlink(os.path.join(root, "out.txt"))
    r = farmer(root, *args, env={"FARMER_REMOTE_SALT": salt, "FARMER_REMOTE_PLATFORM": "OSFamily=linux"})
    assert r.returncode == 0
    assert last_build_tasks(root)["out.txt"]["remote_lookup"] == {"action": with_platform["action"], "result": "hit"}


def test_cache_and_executor_named_apart(tmp_path, farmer, reapi, own_cache_server, salt):
    port = reapi.url.rsplit(":", 1)[1]
    root = reasons_project(tmp_path / "p", salt)
    # the same BuildGrid under two names: the blobs go to one channel, Execute to the other
    r = farmer(root, "--remote-cache", reapi.url, "--remote-executor", f"grpc://localhost:{port}", "-j", "1")
    assert r.returncode == 0 and "warning" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert last_build_tasks(root)["out/sent.txt"]["executor"] == "remote"  # --remote-executor implies --remote-exec
    # an executor that does not execute (a cache-only server) is asked, not the cache
    other = reasons_project(tmp_path / "q", salt + "q")
    r = farmer(other, "--remote-cache", reapi.url, "--remote-executor", own_cache_server.url)
    said = r.stdout + r.stderr
    assert r.returncode == 0 and "does not execute" in said, said
    assert last_build_tasks(other)["out/sent.txt"]["executor"] == "local"
