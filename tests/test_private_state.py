"""farmer's own folders and files (issue 11): `.farmer/` and `logs/` are made 0700 whatever
the umask, and neither they nor the files in them are reached through a symlink, so a link
planted there never sends a command's output, the state or a log onto another file."""

from __future__ import annotations

import os
import stat

from conftest import assert_error

FARMFILE = """\
    [task.say]
    inputs = ["in.txt"]
    outputs = ["out.txt"]
    cmd = "cat {inputs} > {outputs}; echo said"
    [task.hello]
    foreach = {n = ["1"]}
    world = "w"
    outputs = ["w{n}.txt"]
    python = "-c 'open(\\"w{n}.txt\\", \\"w\\").write(\\"w\\"); print(\\"from the world\\")'"
    [world.w]
    setup = ["import os"]
    """


def _umask_build(project, mask):
    old = os.umask(mask)
    try:
        return project.build()
    finally:
        os.umask(old)


def test_farmer_dirs_are_private_whatever_the_umask(project):
    project.farmfile(FARMFILE)
    project.write("in.txt", "x\n")
    r = _umask_build(project, 0)
    assert r.returncode == 0, r
    for rel in (".farmer", ".farmer/logs"):
        assert stat.S_IMODE(os.lstat(project.path(rel)).st_mode) == 0o700, rel
    assert stat.S_IMODE(os.lstat(project.path(".farmer/lock")).st_mode) & 0o077 == 0


def test_an_open_farmer_dir_from_an_older_farmer_is_narrowed(project):
    project.farmfile(FARMFILE)
    project.write("in.txt", "x\n")
    os.mkdir(project.path(".farmer"), 0o777)
    os.chmod(project.path(".farmer"), 0o777)
    assert project.build_in_process().returncode == 0
    assert stat.S_IMODE(os.lstat(project.path(".farmer")).st_mode) == 0o700


def test_planted_log_links_are_not_followed(project, tmp_path):
    project.farmfile(FARMFILE)
    project.write("in.txt", "x\n")
    assert project.build().returncode == 0
    victims = {}
    for log in ("out.txt.log", "w1.txt.log"):
        victim = tmp_path / f"victim-{log}"
        victim.write_text("precious\n")
        victims[log] = victim
        os.unlink(project.path(f".farmer/logs/{log}"))
        os.symlink(victim, project.path(f".farmer/logs/{log}"))
    project.write("in.txt", "y\n")
    os.unlink(project.path("w1.txt"))
    r = project.build()
    assert r.returncode == 0, r
    assert "said" in r.stdout and "from the world" in r.stdout
    for log, victim in victims.items():
        assert victim.read_text() == "precious\n"
        assert not os.path.islink(project.path(f".farmer/logs/{log}"))


def test_planted_state_db_link_is_not_followed(project, tmp_path):
    project.farmfile(FARMFILE)
    project.write("in.txt", "x\n")
    assert project.build_in_process().returncode == 0
    victim = tmp_path / "victim.db"
    victim.write_text("precious\n")
    os.unlink(project.path(".farmer/state.db"))
    os.symlink(victim, project.path(".farmer/state.db"))
    assert project.build_in_process().returncode == 0
    assert victim.read_text() == "precious\n"


def test_symlinked_farmer_dir_is_refused(project, tmp_path):
    project.farmfile(FARMFILE)
    project.write("in.txt", "x\n")
    away = tmp_path / "away"
    away.mkdir()
    os.symlink(away, project.path(".farmer"))
    r = project.build()
    assert_error(r, ".farmer", "symlink")
    assert list(away.iterdir()) == []
    r = project.farmer("clean")
    assert_error(r, ".farmer", "symlink")


def test_symlinked_logs_dir_is_refused(project, tmp_path):
    project.farmfile(FARMFILE)
    project.write("in.txt", "x\n")
    away = tmp_path / "away"
    away.mkdir()
    os.mkdir(project.path(".farmer"), 0o700)
    os.symlink(away, project.path(".farmer/logs"))
    r = project.build()
    assert_error(r, "logs", "symlink")
    assert list(away.iterdir()) == []
