"""`farmer serve` (docs/serve.md): commands answered by a resident farmer print, exit and write
as without one; a server that is dead, stopped, of another farmer or another user is never
waited for; Ctrl-C stops a client's build and not the server; nothing is left running."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
from conftest import run_farmer, start_farmer
from helpers import HEAVY, imported, SRC_CHAIN as CHAIN

from farmer.cli import client
from farmer.cli import serve as command
from farmer.cli import server



def _server_pid(project) -> int | None:
    try:
        first = project.read(".farmer/lock").split()
    except OSError:
        return None
    return int(first[0]) if len(first) >= 2 and first[1] in ("serve", "watch") else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive (the daemon's parent is init, which reaps it)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.fixture
def served(project):
    """The project with a server started; stopped (or killed) at the end, whatever happened."""
    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    r = run_farmer(project.root, "serve", "--idle", "5m")
    assert r.returncode == 0, r
    pid = _server_pid(project)
    assert pid is not None and _alive(pid), r
    project.server_pid = pid
    try:
        yield project
    finally:
        for pid in {pid, _server_pid(project)} - {None}:
            if _alive(pid):
                os.kill(pid, signal.SIGCONT)
        run_farmer(project.root, "serve", "--stop", timeout=30)
        for pid in {pid, _server_pid(project)} - {None}:
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"the server {pid} outlived serve --stop")


def _served_commands(project) -> int:
    r = run_farmer(project.root, "serve", "--status")
    assert r.returncode == 0, r
    return int(r.stdout.split(" commands")[0].rsplit(" ", 1)[1])


def test_a_build_through_the_server_prints_writes_and_exits_as_one_without(served):
    r = served.build()
    assert r.returncode == 0, r
    assert r.finished_ids() == ["out/a.txt", "out/b.txt"]
    assert r.summary()["ran"] == 2
    assert served.read("out/b.txt") == "one\none\n"
    assert served.last_build()["status"] == "ok"
    assert _served_commands(served) == 1  # the server ran it
    r = served.build()
    assert r.returncode == 0 and r.summary()["up to date"] == 2, r
    status = run_farmer(served.root, "serve", "--status")
    assert status.returncode == 0
    assert f"pid {served.server_pid}" in status.stdout
    assert "the graph of Farmfile (2 computations)" in status.stdout and "memory (RSS):" in status.stdout


def test_an_edited_farmfile_and_a_deleted_output_are_picked_up(served):
    assert served.build().summary()["ran"] == 2
    served.farmfile(CHAIN.replace("out/a.txt out/a.txt", "out/a.txt out/a.txt out/a.txt"))
    r = served.build()
    assert r.summary()["ran"] == 1, r
    assert served.read("out/b.txt") == "one\none\none\n"
    os.unlink(served.path("out/a.txt"))
    r = served.build()
    assert r.finished_ids() == ["out/a.txt"], r  # b's input came back the same: early cutoff
    assert served.read("out/a.txt") == "one\n"
    served.write("src.txt", "two\n")
    assert served.build().summary()["ran"] == 2
    assert served.read("out/b.txt") == "two\ntwo\ntwo\n"
    assert _served_commands(served) == 4


def test_exit_statuses_and_errors_are_those_of_a_farmer_without_a_server(served):
    served.farmfile(CHAIN + '\n[task.bad]\noutputs = ["bad.txt"]\ncmd = "exit 7"\n')
    r = served.build("bad")
    assert r.returncode == 1, r
    assert "FAILED: bad bad.txt (exit 7)" in r.stdout + r.stderr
    served.farmfile("[task.a\n")
    r = served.build()
    assert r.returncode == 2, r
    assert r.stderr.startswith("farmer: error: ") and r.stderr.count("\n") == 1, r
    assert "Traceback" not in r.stderr
    assert _served_commands(served) == 2
    run_farmer(served.root, "serve", "--stop")
    alone = served.build()  # the same words without the server
    assert (alone.returncode, alone.stderr) == (r.returncode, r.stderr)


def test_plan_query_and_graph_answered_by_the_server_print_what_they_print_without(served):
    assert served.build().returncode == 0
    served.write("src.txt", "two\n")
    commands = [("plan",), ("query", "out/b.txt"), ("graph", "--format", "json"), ("graph",)]
    through = [run_farmer(served.root, *c) for c in commands]
    assert _served_commands(served) == 1 + len(commands)
    run_farmer(served.root, "serve", "--stop")
    alone = [run_farmer(served.root, *c) for c in commands]
    for a, b in zip(through, alone):
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
    assert "input src.txt changed" in through[0].stdout


def test_a_server_killed_with_sigkill_leaves_nothing_in_the_way(served):
    os.kill(served.server_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(served.server_pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.path.exists(client.socket_path(str(served.root)))  # left behind, refusing
    r = served.build()
    assert r.returncode == 0 and r.summary()["ran"] == 2, r  # in its own process
    assert r.elapsed < 10
    status = run_farmer(served.root, "serve", "--status")
    assert status.returncode == 1 and "none runs" in status.stdout, status
    assert not os.path.exists(client.socket_path(str(served.root)))  # the stale socket removed
    again = run_farmer(served.root, "serve")
    assert again.returncode == 0, again
    assert served.build().summary()["up to date"] == 2


def test_a_stopped_server_is_not_waited_for(served):
    assert served.build().returncode == 0
    os.kill(served.server_pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        r = served.build()
        waited = time.monotonic() - t0
        assert r.returncode == 3, r  # it holds the lock: exit 3, naming it
        assert f"`farmer serve` (pid {served.server_pid})" in r.stderr, r
        assert waited < 1.0 + 4.0, waited  # the hello's second, and two interpreters' start
        q = run_farmer(served.root, "query", "out/a.txt")  # no lock needed: runs here
        assert q.returncode == 0 and "task: a" in q.stdout, q
    finally:
        os.kill(served.server_pid, signal.SIGCONT)
    assert served.build().returncode == 0  # served again


def test_a_second_server_refuses(served):
    r = run_farmer(served.root, "serve")
    assert r.returncode == 3, r
    assert r.stderr.count("\n") == 1 and str(served.server_pid) in r.stderr, r
    assert _alive(served.server_pid)


def test_ctrl_c_stops_the_clients_build_and_not_the_server(served):
    served.farmfile(CHAIN + '\n[task.slow]\noutputs = ["slow.txt"]\ncmd = "sleep 31.25 && touch slow.txt"\n')
    build = start_farmer(served.root, "build", "slow")
    try:
        deadline = time.monotonic() + 20
        while not _sleeping() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _sleeping(), "the slow command never started"
        build.send_signal(signal.SIGINT)
        out, err = build.communicate(timeout=20)
    finally:
        if build.poll() is None:
            build.kill()
            build.wait()
    assert build.returncode == 130, (out, err)
    deadline = time.monotonic() + 10
    while _sleeping() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _sleeping()  # its command was killed
    assert served.last_build()["status"] == "interrupted"
    assert _alive(served.server_pid)
    r = served.build("a")
    assert r.returncode == 0, r  # and the server goes on


def _sleeping() -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read() == b"sleep\x0031.25\x00":
                        return True
            except OSError:
                pass
    return False


def test_a_client_through_the_server_imports_nothing_heavy(served):
    """The client's budget: built-in modules and its own; without the site module, whose
    .pth files (an editable install's finder) would import what farmer does not."""
    from test_import_diet import NOT_ON_AN_INCREMENTAL_BUILD, build_without_site

    assert served.build().returncode == 0
    r = build_without_site(served)
    assert r.returncode == 0 and r.summary()["up to date"] == 2, r
    assert _served_commands(served) == 2  # the server answered it
    modules = imported(r)
    assert "farmer.cli.client" in modules
    assert not (HEAVY | NOT_ON_AN_INCREMENTAL_BUILD) & modules, sorted((HEAVY | NOT_ON_AN_INCREMENTAL_BUILD) & modules)
    farmer_modules = {m for m in modules if m.startswith("farmer")}
    assert farmer_modules <= {"farmer", "farmer.__main__", "farmer.cli", "farmer.cli.client", "farmer.cli.quick", "farmer.startup",
                              "farmer.startup.cheap"}, sorted(farmer_modules)
    assert not {"socket", "selectors", "zlib", "farmer.store.proof"} & modules, sorted(modules)


def test_idle_limit_ends_the_server_and_bad_durations_are_usage_errors(project):
    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    bad = run_farmer(project.root, "serve", "--idle", "soon")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--idle soon" in bad.stderr, bad
    r = run_farmer(project.root, "serve", "--idle", "1s")
    assert r.returncode == 0, r
    pid = _server_pid(project)
    try:
        deadline = time.monotonic() + 15
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert not os.path.exists(client.socket_path(str(project.root)))
    stop = run_farmer(project.root, "serve", "--stop")
    assert stop.returncode == 0 and "none runs" in stop.stdout


def test_durations():
    assert command.parse_duration("90s") == 90
    assert command.parse_duration("30m") == 1800
    assert command.parse_duration("3h") == 10800
    assert command.parse_duration("2.5") == 2.5
    for bad in ("", "0", "-5m", "3d", "h", "inf", "nan"):
        with pytest.raises(command.UsageError):
            command.parse_duration(bad)


def test_only_the_same_user_is_talked_to(monkeypatch, tmp_path):
    assert client.peer_allowed(1000, 1000)
    assert not client.peer_allowed(0, 1000) and not client.peer_allowed(1001, 1000)
    # A server asked by a connection whose peer is (as far as it can tell) another user
    # says nothing and closes it.
    srv = server.Server(str(tmp_path), 60, lambda argv, served: 0)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with mine, theirs:
        theirs.sendall(b"%s run %s\n" % (client.MAGIC, client.identity().encode()))
        monkeypatch.setattr(server.os, "getuid", lambda: os.geteuid() + 1)
        srv.answer(mine)
        mine.shutdown(socket.SHUT_RDWR)
        assert theirs.recv(100) == b""
        monkeypatch.undo()
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with mine, theirs:  # the same user is answered
        theirs.sendall(b"%s stop %s\n" % (client.MAGIC, client.identity().encode()))
        srv.answer(mine)
        assert theirs.recv(100) == b"ok %d\n" % os.getpid()
    assert srv.stopping


def test_a_server_of_another_farmer_is_not_used(project):
    """A server that says it is another farmer: the command runs here."""
    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    os.makedirs(project.path(".farmer"), mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(client.socket_path(str(project.root)))
    listener.listen(4)
    heard: list[bytes] = []

    def other_farmer() -> None:
        conn, _ = listener.accept()
        with conn:
            heard.append(conn.recv(4096))
            conn.sendall(b"other 1 9.9.9\n")
            conn.settimeout(5)
            heard.append(conn.recv(4096))  # what the client says next: nothing, it closes

    thread = threading.Thread(target=other_farmer)
    thread.start()
    try:
        r = project.build()
    finally:
        thread.join(10)
        listener.close()
    assert r.returncode == 0 and r.summary()["ran"] == 2, r
    assert heard[0].startswith(client.MAGIC + b" run ") and heard[1] == b"", heard


def test_the_client_finds_the_project_as_the_command_does(tmp_path):
    root = tmp_path / "p"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "Farmfile").write_text("")
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "build.ninja").write_text("")
    real = os.path.realpath(root)
    assert client.command_project(["build"], str(root / "sub" / "deeper")) == real
    assert client.command_project(["build", "-j", "2", "x"], str(root / "sub")) == real
    assert client.command_project(["query", "-C", "sub", "x"], str(root)) == real
    assert client.command_project(["build", "-f", "other/Farmfile"], str(root)) == os.path.join(real, "other")
    assert client.command_project(["plan", "--json"], str(tmp_path / "n")) == os.path.realpath(tmp_path / "n")
    assert client.command_project(["build", "--trace=t.json", "-k"], str(root)) == real
    for argv in (["clean"], ["build", "--help"], ["build", "-kj2"], ["build", "--frobnicate"], ["build", "-C"]):
        assert client.command_project(argv, str(root)) is None, argv
    assert client.command_project(["build"], str(tmp_path)) is None  # no Farmfile up to /
    long_root = "/" + "x" * 120
    assert client.socket_path(long_root).startswith(client.runtime_dir())
    assert client.socket_path(str(root)) == os.path.join(str(root), ".farmer", "serve.sock")


def test_a_no_op_is_decided_from_the_kernels_events_and_a_change_from_a_full_check(served):
    assert served.build().summary()["ran"] == 2
    assert served.build().summary()["up to date"] == 2
    served.write("src.txt", "two\n")  # saved right before the build: the kernel queued it already
    assert served.build().summary()["ran"] == 2
    assert served.read("out/b.txt") == "two\ntwo\n"
    assert served.build().summary()["up to date"] == 2
    status = run_farmer(served.root, "serve", "--status").stdout
    assert "2 no-ops from the kernel's events, 2 builds that checked every file" in status, status


def test_a_watcher_that_lost_events_makes_the_next_build_check_every_file(project, monkeypatch):
    """The kernel's queue overflowed (an event the watcher reads as such): the events it
    dropped are not needed, every file is checked."""
    from farmer.build.request import BuildRequest
    from farmer.cli import app
    from farmer.files import inotify

    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    monkeypatch.chdir(project.root)
    srv = server.Server(str(project.root), 60, app.run_served)
    srv.open()
    try:
        served = server.Served(srv.workspace, srv.watcher, srv.checker)
        assert served.build(BuildRequest([], jobs=1)) == 0
        assert served.build(BuildRequest([], jobs=1)) == 0
        assert srv.checker.noops == 1
        project.write("src.txt", "two\n")
        srv.watcher.drain()
        srv.watcher.clear()  # its events dropped, as an overflowing queue drops them
        read, write = os.pipe()
        os.write(write, (-1).to_bytes(4, "little", signed=True) + inotify.IN_Q_OVERFLOW.to_bytes(4, "little")
                 + bytes(8))
        real, srv.watcher.fd = srv.watcher.fd, read
        os.set_blocking(read, False)
        srv.watcher.drain()
        srv.watcher.fd = real
        os.close(read)
        os.close(write)
        assert srv.watcher.lost
        assert served.build(BuildRequest([], jobs=1)) == 0
        assert project.read("out/b.txt") == "two\ntwo\n"
        assert (srv.checker.noops, srv.checker.full) == (1, 2)
        assert not srv.watcher.lost  # watched anew
        project.write("src.txt", "three\n")
        assert served.build(BuildRequest([], jobs=1)) == 0
        assert project.read("out/b.txt") == "three\nthree\n"
    finally:
        srv.close()


def test_what_the_watcher_cannot_vouch_for_is_always_checked(tmp_path, monkeypatch):
    from farmer.build.watched import below, unwatched

    monkeypatch.chdir(tmp_path)
    os.makedirs("src/sub")
    for name in ("src/a", "src/b", "src/sub/c", "top"):
        with open(name, "w") as f:
            f.write(name)
    os.link("src/b", "linked")
    os.symlink("a", "src/s")
    paths = ["src/a", "src/b", "src/sub/c", "top", "linked", "src/s", "/etc/hostname", "gone/x", "src/missing"]
    # src/b and linked are one file with two names; src/s a symlink; /etc outside; gone unwatched
    assert unwatched(paths, {"", "src", "src/sub"}) == [1, 4, 5, 6, 7]
    ordered = sorted(paths)
    assert below(ordered, "src") == ["src/a", "src/b", "src/missing", "src/s", "src/sub/c"]
    assert below(ordered, "src/sub") == ["src/sub/c"]
    assert below(ordered, "") == ordered
    assert below(ordered, "sr") == []


def test_warm_worlds_are_set_up_again_under_another_environment(served):
    """A world's set-up may read the environment: a command from a shell whose variables
    differ does not get the worlds another one set up."""
    served.farmfile("""
        [world.w]
        setup = ["import os", "WHO = os environ"]
    """.replace("os environ", "os.environ.get('WHO', '')") + """
        [task.greet]
        world = "w"
        inputs = ["greet.py"]
        outputs = ["out/greet.txt"]
        python = "greet.py {outputs}"
    """)
    served.write("greet.py", "import sys\nfrom __main__ import WHO\nopen(sys.argv[1], 'w').write(WHO + ' 1\\n')\n")
    r = served.build(env={"WHO": "ada"})
    assert r.returncode == 0, r
    assert served.read("out/greet.txt") == "ada 1\n"
    served.write("greet.py", served.read("greet.py").replace("' 1", "' 2"))
    assert served.build(env={"WHO": "ada"}).returncode == 0
    assert served.read("out/greet.txt") == "ada 2\n"  # (the warm world)
    served.write("greet.py", served.read("greet.py").replace("' 2", "' 3"))
    assert served.build(env={"WHO": "grace"}).returncode == 0
    assert served.read("out/greet.txt") == "grace 3\n"


def test_the_live_view_is_drawn_on_the_callers_terminal(served):
    """The client hands its terminal over: the server's build sees a terminal and draws its
    live view there, as a build of its own would."""
    import pty

    served.farmfile(CHAIN.replace('cmd = "cat src.txt', 'cmd = "sleep 0.5; cat src.txt'))
    master, slave = pty.openpty()
    try:
        build = start_farmer(served.root, "build", env={"TERM": "xterm"}, stdout=slave, stderr=slave, text=False)
        os.close(slave)
        slave = -1
        seen = b""
        deadline = time.monotonic() + 30
        while True:
            import select

            if not select.select([master], [], [], max(0.0, deadline - time.monotonic()))[0]:
                pytest.fail(f"the terminal was held open after the build: {seen[-300:]!r}")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert build.wait(30) == 0
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert b"\x1b[?25l" in seen, seen[:300]  # the live view hides the cursor while it draws
    assert b"ran 2" in seen, seen[-300:]
    assert _served_commands(served) == 1


def test_a_change_made_before_the_server_started_is_seen_by_its_first_build(project):
    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    assert project.build().summary()["ran"] == 2  # in its own process: the proof written
    project.write("src.txt", "two\n")  # no server watches yet
    r = run_farmer(project.root, "serve", "--idle", "5m")
    assert r.returncode == 0, r
    pid = _server_pid(project)
    try:
        r = project.build()
        assert r.returncode == 0 and r.summary()["ran"] == 2, r
        assert project.read("out/b.txt") == "two\ntwo\n"
        assert project.build().summary()["up to date"] == 2
        assert "1 no-ops from the kernel's events, 1 builds that checked every file" in \
            run_farmer(project.root, "serve", "--status").stdout
    finally:
        run_farmer(project.root, "serve", "--stop")
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_project_too_deep_for_a_socket_address_is_served_from_the_runtime_folder(tmp_path):
    from conftest import Project

    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    root = tmp_path / ("d" * 60) / ("e" * 60)
    root.mkdir(parents=True)
    project = Project(root)
    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    r = run_farmer(root, "serve", env=env)
    assert r.returncode == 0, r
    pid = _server_pid(project)
    try:
        assert [p.name.endswith(".sock") for p in runtime.iterdir()] == [True]
        assert run_farmer(root, "build", env=env).summary()["ran"] == 2
        status = run_farmer(root, "serve", "--status", env=env)
        assert status.returncode == 0 and "1 commands" in status.stdout, status
    finally:
        assert run_farmer(root, "serve", "--stop", env=env).returncode == 0
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert list(runtime.iterdir()) == []


def test_a_client_with_a_closed_stdout_is_served_as_a_farmer_of_its_own_runs(served):
    """A closed stdout is handed over as /dev/null: the build runs, its output goes nowhere,
    as a farmer of its own writing to a closed stdout (tests/test_cli_closed_stdout.py)."""
    import subprocess

    from conftest import farmer_command, farmer_env

    cp = subprocess.run(farmer_command("build"), cwd=served.root, env=farmer_env(), stdin=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True, timeout=60, preexec_fn=lambda: os.close(1))
    assert cp.returncode == 0 and cp.stderr == "", cp
    assert served.read("out/b.txt") == "one\none\n"
    assert _served_commands(served) == 1


def test_every_option_of_farmer_build_is_served(served):
    """The client reads `farmer build`'s own options table: an option added there (here -v,
    ninja's verbose lines) is answered by the server, not refused beside it with exit 3."""
    assert served.build().returncode == 0
    before = _served_commands(served)
    r = served.build("-v", "--quiet", "-k", "0")
    assert r.returncode == 0 and r.summary()["up to date"] == 2, r
    assert _served_commands(served) == before + 1


def test_a_servers_no_ops_reuse_the_proof_and_write_last_build_json_as_a_farmer_alone(project, monkeypatch):
    """The proof is read once while its files stay; last-build.json, staged ahead between
    no-ops, holds the same bytes a farmer alone writes (but for the time fields), with the
    mode the client's umask gives it."""
    import json

    from farmer.build import watched
    from farmer.build.request import BuildRequest
    from farmer.cli import app

    project.farmfile(CHAIN)
    project.write("src.txt", "one\n")
    assert project.build().returncode == 0
    assert project.build("-j", "1").summary()["up to date"] == 2
    alone = json.loads(project.read(".farmer/last-build.json"))
    reads = []
    real_read = watched.read
    monkeypatch.setattr(watched, "read", lambda *a: reads.append(a) or real_read(*a))
    monkeypatch.chdir(project.root)
    srv = server.Server(str(project.root), 60, app.run_served)
    srv.open()
    old_umask = os.umask(0o027)
    try:
        def noop() -> dict:
            served = server.Served(srv.workspace, srv.watcher, srv.checker)
            assert served.build(BuildRequest([], jobs=1)) == 0
            served.done()
            return json.loads(project.read(".farmer/last-build.json"))

        noop()  # the server's first build checks every file
        for _ in range(3):
            got = noop()
            assert got["tasks"] == alone["tasks"] and got["status"] == "ok"
            assert {k for k in got if got[k] != alone[k]} <= {"started_at", "wall_s"}
        assert srv.checker.noops == 3 and len(reads) == 1
        assert os.stat(project.root / ".farmer/last-build.json").st_mode & 0o777 == 0o640
        assert not [n for n in os.listdir(project.root / ".farmer") if n.endswith(".tmp")]
        project.write("src.txt", "two\n")
        assert noop()["tasks"][0]["status"] == "ran"
        assert project.read("out/b.txt") == "two\ntwo\n"
        assert noop()["tasks"][0]["status"] == "up-to-date"
        assert len(reads) == 2  # the build wrote a new proof: read again
    finally:
        os.umask(old_umask)
        srv.close()


def _overflow(watcher) -> None:
    """The kernel's queue-overflow event, read by the watcher as it reads the kernel's."""
    from farmer.files import inotify

    read, write = os.pipe()
    os.write(write, (-1).to_bytes(4, "little", signed=True) + inotify.IN_Q_OVERFLOW.to_bytes(4, "little") + bytes(8))
    real, watcher.fd = watcher.fd, read
    os.set_blocking(read, False)
    try:
        watcher.drain()
    finally:
        watcher.fd = real
        os.close(read)
        os.close(write)


def test_a_build_ninja_no_op_through_the_server_watches_the_sources_outside_its_folder(tmp_path, monkeypatch):
    """A CMake-like layout: the build folder's manifest reads sources beside it. Their
    folders are watched once the proof names them: an edit there is rebuilt, a no-op is
    decided from the events, and a lost event makes the next build check every file."""
    from farmer.build.request import BuildRequest
    from farmer.cli import app

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("one\n")
    build = tmp_path / "build"
    build.mkdir()
    (build / "build.ninja").write_text("rule cat\n  command = cat $in > $out\n"
                                       "build out.txt: cat ../src/a.txt\ndefault out.txt\n")
    time.sleep(0.15)  # a manifest written just now cannot vouch for itself by its stat (ninja_stamp.py)
    monkeypatch.chdir(build)
    srv = server.Server(str(build), 60, app.run_served)
    srv.open()

    def run() -> int:
        served = server.Served(srv.workspace, srv.watcher, srv.checker)
        try:
            return served.build(BuildRequest([], jobs=1, farmfile_given=False))
        finally:
            served.done()
            os.chdir(build)

    try:
        assert run() == 0 and (build / "out.txt").read_text() == "one\n"
        assert run() == 0
        assert run() == 0
        assert (srv.checker.noops, srv.checker.full) == (2, 1)  # (its first build checked every file)
        assert "../src" in srv.watcher.outside_watched
        assert srv.checker._unwatched == []  # ../src/a.txt: vouched for by the events
        (tmp_path / "src" / "a.txt").write_text("two\n")
        assert run() == 0 and (build / "out.txt").read_text() == "two\n"
        assert (srv.checker.noops, srv.checker.full) == (2, 2)
        assert run() == 0 and srv.checker.noops == 3
        (tmp_path / "src" / "a.txt").write_text("three\n")
        srv.watcher.drain()
        srv.watcher.clear()  # its events dropped, as an overflowing queue drops them
        _overflow(srv.watcher)
        assert srv.watcher.lost
        assert run() == 0 and (build / "out.txt").read_text() == "three\n"
        assert (srv.checker.noops, srv.checker.full) == (3, 3)
        assert run() == 0 and srv.checker.noops == 4  # watched anew
        (tmp_path / "src" / "a.txt").write_text("four\n")
        assert run() == 0 and (build / "out.txt").read_text() == "four\n"
        os.rename(tmp_path / "src", tmp_path / "old")  # a folder on the way moved
        (tmp_path / "src").mkdir()
        (tmp_path / "src" / "a.txt").write_text("five\n")
        assert run() == 0 and (build / "out.txt").read_text() == "five\n"
    finally:
        srv.close()


def test_the_way_to_a_folder_outside_names_every_folder_and_link_it_goes_through(tmp_path):
    from farmer.files.inotify import Watcher, passage

    (tmp_path / "real" / "d").mkdir(parents=True)
    os.symlink("real", tmp_path / "link")
    steps = passage(str(tmp_path / "link" / "d"))
    assert (str(tmp_path), "link") in steps and (str(tmp_path), "real") in steps
    assert steps[-1] == (str(tmp_path / "real"), "d")
    assert passage(str(tmp_path / "real" / ".." / "real" / "d"))[-1] == (str(tmp_path / "real"), "d")
    assert passage(str(tmp_path / "missing")) is None
    (tmp_path / "tree").mkdir()
    watcher = Watcher(str(tmp_path / "tree"))
    try:
        assert watcher.watch_outside(["../real/d", "../missing"]) == {"../real/d"}
        assert watcher.watch_outside(["../real"], limit=1) == set()  # past the limit: not watched
        (tmp_path / "real" / "d" / "x").write_text("x")
        watcher.drain()
        assert "../real/d/x" in watcher.dirty and not watcher.lost
    finally:
        watcher.close()


def test_last_build_json_staged_ahead_holds_the_bytes_of_one_written_whole(tmp_path, monkeypatch):
    from farmer.files.atomic import FileRange, OpenFile
    from farmer.report import lastbuild

    (tmp_path / "entries").write_bytes(b'xx[{"id": "a"},{"id": "b"}]yy')
    entries = [FileRange(OpenFile.open(tmp_path / "entries"), 2, 25)]
    whole = []
    real = lastbuild.write
    monkeypatch.setattr(lastbuild, "write", lambda *a: whole.append(a) or real(*a))
    ahead = lastbuild.Ahead()
    path = tmp_path / lastbuild.NAME

    def head(wall: float) -> dict:
        return lastbuild.header(1_800_000_000, 2, "ok", wall, 0.0, 0.0)

    ahead.write(str(tmp_path), head(0.0012), entries)  # nothing staged yet: written whole
    expected = path.read_bytes()
    assert len(whole) == 1 and expected.endswith(b'"tasks":[{"id": "a"},{"id": "b"}]}\n')
    ahead.stage()
    path.unlink()
    ahead.write(str(tmp_path), head(0.0012), entries)  # the header's length as staged: no copy
    assert len(whole) == 1 and path.read_bytes() == expected
    ahead.stage()
    ahead.write(str(tmp_path), head(0.25), entries)  # another length: written whole
    assert len(whole) == 2 and path.read_bytes() == expected.replace(b"0.0012", b"0.25")
    ahead.stage()
    ahead.drop()
    assert sorted(os.listdir(tmp_path)) == ["entries", lastbuild.NAME]
