"""The Farmfile's [remote] table and `remote` task key (SPEC §5): validated like every table, kept in the
graph cache, and a `remote = false` task's computations say so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from farmer.errors import UsageError
from farmer.manifest import farmfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOOD = """\
[remote]
url = "grpc://127.0.0.1:50051"
instance = "main"
execute = true
upload = false
jobs = 4
platform = { OSFamily = "linux" }
salt = "2026-12"
timeout = 10

[task.a]
outputs = ["a"]
cmd = "touch a"
remote = false
"""


def parse(text: str, tmp_path):
    path = tmp_path / "Farmfile"
    path.write_text(text)
    return farmfile.parse_text(str(path), path.read_bytes())


def test_every_key_is_read(tmp_path):
    spec = parse(GOOD, tmp_path)
    r = spec.remote
    assert (r.url, r.instance, r.execute, r.upload, r.jobs, r.platform, r.salt, r.timeout) == (
        "grpc://127.0.0.1:50051", "main", True, False, 4, {"OSFamily": "linux"}, "2026-12", 10)
    assert spec.tasks["a"].remote is False
    assert r.table()["jobs"] == 4 and "path" not in r.table()


@pytest.mark.parametrize("body, words", [
    ('[remote]\nurl = "http://x"\n', "grpc://"),
    ('[remote]\nurl = "grpc://x:1"\njobs = 0\n', "jobs"),
    ('[remote]\nurl = "grpc://x:1"\nexecute = "yes"\n', "true or false"),
    ('[remote]\nurl = "grpc://x:1"\nurls = "grpc://y:1"\n', "urls"),
    ('[remote]\nurl = "grpc://x:1"\nplatform = "linux"\n', "platform"),
    ('[task.a]\noutputs = ["a"]\ncmd = "touch a"\nremote = 1\n', "remote"),
])
def test_bad_values_are_one_line_errors_with_the_line(tmp_path, body, words):
    with pytest.raises(UsageError) as e:
        parse(body, tmp_path)
    assert words in str(e.value) and "Farmfile:" in str(e.value)


def test_the_table_survives_the_graph_cache(tmp_path):
    (tmp_path / "Farmfile").write_text(GOOD)
    code = ("import sys; from farmer.graph.load import load\n"
            "spec, g = load(sys.argv[1], write_cache=True)\n"
            "print(spec.remote.table() if spec.remote else None, g.computations[0].remote)\n")
    env = {**os.environ, "PYTHONPATH": REPO}
    runs = [subprocess.run([sys.executable, "-c", code, str(tmp_path / "Farmfile")], capture_output=True,
                           text=True, env=env, check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and "'jobs': 4" in runs[0] and runs[0].strip().endswith("False")
    assert os.path.exists(tmp_path / ".farmer" / "graph.cache")
