"""A computation's REAPI Action (farmer/remote/action.py): the remote key is canonical, covers what
the local key covers, and never the project's absolute path."""

from __future__ import annotations

import importlib.util
import os

import pytest

if (importlib.util.find_spec("google") is None or importlib.util.find_spec("google.protobuf") is None) and os.environ.get("CI") != "true":
    pytest.skip("protobuf is not installed (pip install -e '.[remote]')", allow_module_level=True)

from farmer.remote import action as actions  # noqa: E402
from farmer.remote.action import FileDigest  # noqa: E402
from farmer.remote.client import digest_of  # noqa: E402
from farmer.remote.config import RemoteConfigError, resolve  # noqa: E402

PARTS = [("format", ["farmer-cache-v1"]), ("world", [""]), ("programs", ["cc=abc"]), ("platform", ["linux", "x86_64"])]


def fd(path: str, data: bytes = b"x", executable: bool = False) -> FileDigest:
    return FileDigest(path, digest_of(data), executable)


def make(**changes):
    args = dict(kind="cmd", line="cc -c src/a.c -o build/a.o", env={"B": "2", "A": "1"}, inherited=[("LANG", "C")],
                outputs=["build/a.o"], depfile="build/a.d", other_parts=PARTS,
                inputs=[fd("src/a.c", b"int a;"), fd("src/a.h", b"#pragma once")], sources={})
    args.update(changes)
    return actions.build_action(**args)


def test_the_command_is_sh_c_with_sorted_env_and_sorted_outputs():
    a = make()
    assert list(a.command.arguments) == ["/bin/sh", "-c", "cc -c src/a.c -o build/a.o"]
    names = [v.name for v in a.command.environment_variables]
    assert names == sorted(names) and {"A", "B", "LANG", "PATH", actions.KEY_ENV} <= set(names)
    assert list(a.command.output_paths) == ["build/a.d", "build/a.o"]


def test_the_digest_is_stable_and_the_order_of_inputs_does_not_matter():
    assert make().digest == make().digest
    assert make(inputs=[fd("src/a.h", b"#pragma once"), fd("src/a.c", b"int a;")]).digest == make().digest


@pytest.mark.parametrize("change", [
    dict(line="cc -O2 -c src/a.c -o build/a.o"),
    dict(env={"A": "1", "B": "3"}),
    dict(inherited=[("LANG", "fr_FR")]),
    dict(inherited=[("LANG", None)]),
    dict(outputs=["build/a.o", "build/b.o"]),
    dict(depfile=None),
    dict(other_parts=[*PARTS[:2], ("programs", ["cc=def"]), PARTS[3]]),
    dict(inputs=[fd("src/a.c", b"int b;"), fd("src/a.h", b"#pragma once")]),
    dict(inputs=[fd("src/a.c", b"int a;", executable=True), fd("src/a.h", b"#pragma once")]),
    dict(inputs=[fd("src/a.c", b"int a;"), fd("/usr/include/stdio.h", b"v2")]),
    dict(salt="poisoned-2026"),
    dict(platform={"OSFamily": "linux"}),
    dict(timeout_s=30),
    dict(kind="python"),
])
def test_every_part_of_the_key_changes_the_digest(change):
    assert make(**change).digest != make().digest


def test_files_outside_the_root_are_keyed_not_sent():
    a = make(inputs=[fd("src/a.c"), fd("/usr/include/stdio.h"), fd("../shared/x.h")])
    assert a.root.paths == {"src/a.c"}
    assert make(inputs=[fd("src/a.c"), fd("/usr/include/stdio.h", b"other")]).digest != \
        make(inputs=[fd("src/a.c"), fd("/usr/include/stdio.h")]).digest


def test_no_absolute_project_path_enters_the_action(tmp_path):
    a = make(sources={"src/a.c": str(tmp_path / "one" / "src/a.c")})
    b = make(sources={"src/a.c": str(tmp_path / "two" / "src/a.c")})
    assert a.digest == b.digest
    assert str(tmp_path).encode() not in b"".join(bl.data or b"" for bl in a.blobs)


def test_variants_round_trip_newest_first_and_bounded():
    v = [[fd(f"h{i}.h", bytes([i]))] for i in range(12)]
    merged = []
    for variant in v:
        merged = actions.merged_variants(merged, variant)
    decoded = actions.decode_variants(actions.encode_variants(merged))
    assert len(decoded) == actions.VARIANTS_KEPT and decoded[0] == v[-1] and decoded == merged[:actions.VARIANTS_KEPT]
    assert actions.merged_variants(merged, v[-1])[0] == v[-1]
    assert actions.decode_variants(b"not json") == [] and actions.decode_variants(b'[["x"]]') == []


def test_settings_precedence_cli_then_environment_then_farmfile():
    table = {"url": "grpc://farmfile:1", "instance": "t", "upload": False, "execute": True, "jobs": 4,
             "platform": {"OSFamily": "linux"}}
    s = resolve(table=table, environ={})
    assert (s.endpoint.target, s.endpoint.instance, s.upload, s.execute, s.jobs) == ("farmfile:1", "t", False, True, 4)
    s = resolve(table=table, environ={"FARMER_REMOTE": "grpc://env:2", "FARMER_REMOTE_UPLOAD": "1",
                                      "FARMER_REMOTE_INSTANCE": "e", "FARMER_REMOTE_HEADERS": "a=1,b=2"})
    assert (s.endpoint.target, s.endpoint.instance, s.upload, s.endpoint.headers) == ("env:2", "e", True,
                                                                                      (("a", "1"), ("b", "2")))
    s = resolve("grpc://cli:3", "c", ("x=y",), execute=False, upload=False, timeout=5, table=table,
                environ={"FARMER_REMOTE": "grpc://env:2"})
    assert (s.endpoint.target, s.endpoint.instance, s.execute, s.upload, s.endpoint.timeout) == ("cli:3", "c", False, False, 5)
    assert resolve(environ={}) is None
    for bad in ({"FARMER_REMOTE": "http://x"}, {"FARMER_REMOTE": "grpc://x:1", "FARMER_REMOTE_UPLOAD": "maybe"},
                {"FARMER_REMOTE": "grpc://x:1", "FARMER_REMOTE_TIMEOUT": "soon"}):
        with pytest.raises(RemoteConfigError):
            resolve(environ=bad)


def test_with_a_base_directory_the_input_root_is_the_base_and_the_command_runs_in_the_build_dir():
    from farmer.graph.basedir import BaseDir
    from farmer.remote.merkle import flatten

    def cmake(base: BaseDir):
        return make(line="cc -I../include -c ../src/a.c -o CMakeFiles/a.o", outputs=["CMakeFiles/a.o"],
                    depfile="CMakeFiles/a.o.d", base=base,
                    inputs=[fd("../src/a.c", b"int a;"), fd("../include/a.h", b"#pragma once"),
                            fd("gen/v.h", b"#define V 1"), fd("/usr/include/stdio.h", b"stdio")])

    a = cmake(BaseDir("/home/me/proj", "/home/me/proj", "build"))
    assert a.command.working_directory == "build"
    assert list(a.command.output_paths) == ["CMakeFiles/a.o", "CMakeFiles/a.o.d"]  # relative to it
    assert sorted(a.root.paths) == ["build/gen/v.h", "include/a.h", "src/a.c"]  # not /usr/include: the platform's
    directories = {}
    for blob in a.root.blobs:
        if blob.data is not None:  # a Directory (files are read from their paths)
            directories[blob.digest.hash] = actions.re.Directory.FromString(blob.data)
    assert "build" in [n.name for n in directories[a.root.digest.hash].directories]
    assert sorted(p for p, _ in flatten(a.root.digest, directories)) == sorted(a.root.paths)
    # another checkout elsewhere with the same layout under its base: the same Action
    b = cmake(BaseDir("/srv/ci/work/proj-2", "/srv/ci/work/proj-2", "build"))
    assert b.digest == a.digest
    assert cmake(BaseDir("/home/me", "/home/me", "proj/build")).digest != a.digest  # another layout
    assert make().command.working_directory == ""  # without one: the project root, as before
