#!/usr/bin/env python3
"""Regenerate farmer/remote/protos/ (the REAPI v2, ByteStream and Bots API messages) from .proto sources.

usage: python tools/gen_remote_protos.py REMOTE_APIS_GIT GOOGLEAPIS_GIT
  REMOTE_APIS_GIT  a git directory (clone or bare mirror) of github.com/bazelbuild/remote-apis
  GOOGLEAPIS_GIT   a git directory of github.com/googleapis/googleapis
Needs grpcio-tools (its protoc and the well-known google/protobuf/*.proto). The .proto files are read
from each repository's HEAD with `git show`, copied to tools/remote-protos/ (so the generated code can be
checked against its sources), compiled with --python_out only (farmer binds the RPCs by method path, so
no *_pb2_grpc.py and no coupling to a grpcio version), and their imports rewritten under
farmer.remote.protos. The commit ids land in farmer/remote/protos/README.md.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(REPO, "farmer", "remote", "protos")
SOURCES = os.path.join(HERE, "remote-protos")
PKG = "farmer.remote.protos"

REMOTE_APIS = [
    "build/bazel/remote/execution/v2/remote_execution.proto",
    "build/bazel/semver/semver.proto",
]
GOOGLEAPIS = [
    "google/api/annotations.proto",
    "google/api/client.proto",
    "google/api/field_behavior.proto",
    "google/api/http.proto",
    "google/api/launch_stage.proto",
    "google/api/resource.proto",
    "google/bytestream/bytestream.proto",
    "google/longrunning/operations.proto",
    "google/rpc/code.proto",
    "google/rpc/error_details.proto",
    "google/rpc/status.proto",
    "google/devtools/remoteworkers/v1test2/bots.proto",
    "google/devtools/remoteworkers/v1test2/worker.proto",
]
TOP = ("build", "google.api", "google.bytestream", "google.longrunning", "google.rpc", "google.devtools")


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True,
                          text=True).stdout


def gitdir_of(path: str) -> str:
    return path if os.path.isdir(os.path.join(path, "objects")) else os.path.join(path, ".git")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    import grpc_tools
    from grpc_tools import protoc
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    commits = {}
    shutil.rmtree(SOURCES, ignore_errors=True)
    for name, gitdir, files in (("bazelbuild/remote-apis", gitdir_of(sys.argv[1]), REMOTE_APIS),
                                ("googleapis/googleapis", gitdir_of(sys.argv[2]), GOOGLEAPIS)):
        commits[name] = git(gitdir, "rev-parse", "HEAD").strip()
        for f in files:
            dest = os.path.join(SOURCES, f)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w") as fh:
                fh.write(git(gitdir, "show", f"HEAD:{f}"))
    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{SOURCES}", f"-I{include}", f"--python_out={tmp}", *REMOTE_APIS, *GOOGLEAPIS]
        if protoc.main(args) != 0:
            print("protoc failed", file=sys.stderr)
            return 1
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.copytree(tmp, OUT)
    top = "|".join(re.escape(t) for t in TOP)
    pattern = re.compile(rf"^(from|import) ({top})(\.| )", re.M)
    for dirpath, _dirs, files in os.walk(OUT):
        open(os.path.join(dirpath, "__init__.py"), "a").close()
        for f in files:
            if f.endswith("_pb2.py"):
                p = os.path.join(dirpath, f)
                with open(p) as fh:
                    text = fh.read()
                with open(p, "w") as fh:
                    fh.write(pattern.sub(rf"\1 {PKG}.\2\3", text))
    import google.protobuf
    with open(os.path.join(OUT, "README.md"), "w") as fh:
        fh.write("# Generated: do not edit\n\n"
                 "Made by `tools/gen_remote_protos.py` from the `.proto` files in `tools/remote-protos/`:\n\n")
        for name, commit in commits.items():
            fh.write(f"- github.com/{name} @ {commit}\n")
        fh.write(f"\nwith grpcio-tools {__import__('importlib.metadata').metadata.version('grpcio-tools')}"
                 f" (protobuf {google.protobuf.__version__}). Only messages are generated; farmer binds\n"
                 "the RPCs by method path (farmer/remote/rpc.py).\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
