"""What a Python step read is part of its remote key: a second checkout whose installed package
or helper module differs runs the step instead of restoring an output made with the first's,
and one whose files are the same restores it (with what it read, still tracked)."""

from __future__ import annotations

import importlib.util
import os

import pytest
from conftest import REPO
from helpers import last_build_tasks, write_files

if importlib.util.find_spec("grpc") is None and os.environ.get("CI") != "true":
    pytest.skip("grpcio is not installed (pip install -e '.[remote]')", allow_module_level=True)

FARMFILE = """\
[remote]
salt = "{salt}"

[world.w]
setup = ["import setupmod"]

[task.version]
outputs = ["out/version.txt"]
world = "w"
python = "-c 'import sys, teamlib; from helpers import SCALE; open(sys.argv[1], \\"w\\").write(f\\"{{{{teamlib.VERSION}}}} {{{{SCALE}}}} {{{{setupmod.K}}}}\\")' {{outputs}}"
"""


def checkout(root, salt: str, site, scale: int = 1, k: int = 1) -> tuple[str, dict]:
    """A project, and the environment that puts `site` (a folder outside the root with its
    own `teamlib`) on PYTHONPATH."""
    project = write_files(root, {"Farmfile": FARMFILE.format(salt=salt), "helpers.py": f"SCALE = {scale}\n",
                                 "setupmod.py": f"K = {k}\n"})
    return str(project), {"PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}


def site_of(path, version: str):
    return write_files(path, {"teamlib/__init__.py": f"VERSION = {version!r}\n"})


def test_a_checkout_with_another_package_or_module_runs_the_step(tmp_path, farmer, reapi, salt):
    remote = ["--remote", reapi.url, "--remote-instance", reapi.cache_instance]
    site = site_of(tmp_path / "site-1.0", "1.0")
    first, env = checkout(tmp_path / "one", salt, site)
    assert farmer(first, *remote, env=env).returncode == 0
    same, env = checkout(tmp_path / "same", salt, site)  # another checkout, the same environment
    r = farmer(same, *remote, env=env)
    assert r.returncode == 0, r.stderr
    assert last_build_tasks(same)["out/version.txt"]["status"] == "cached"
    other_site = site_of(tmp_path / "site-2.0", "2.0")  # another environment: teamlib 2.0
    for where, version, scale, k in [("pkg", "2.0", 1, 1), ("helper", "1.0", 2, 1), ("setup", "1.0", 1, 2)]:
        other, env = checkout(tmp_path / where, salt, other_site if version == "2.0" else site, scale, k)
        r = farmer(other, *remote, env=env)
        assert r.returncode == 0, r.stderr
        assert last_build_tasks(other)["out/version.txt"]["status"] == "ran", where
        with open(os.path.join(other, "out/version.txt")) as f:
            assert f.read() == f"{version} {scale} {k}"
