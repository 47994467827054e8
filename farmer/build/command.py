"""What a command names and the ends of a build: `-C`, the Farmfile found upwards (or a
build.ninja here), the project loaded into its graph; the no-op of a build.ninja; what a build
that wrote last-build.json ends with. The flow of a build is build/workspace.py's
`Workspace.build`; how every command ends (exit statuses, signals) is farmer/cli/exit.py."""

from __future__ import annotations

import os
import time

from farmer.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.build.deferred import Deferred
    from farmer.files.lock import ProjectLock
    from farmer.graph.graph import Graph
    from farmer.manifest.spec import Spec


def enter(directory: str | None) -> None:
    """`-C DIR`: change to DIR before anything else."""
    if directory is not None:
        try:
            os.chdir(directory)
        except OSError as e:
            raise UsageError(f"-C {directory}: {e.strerror}") from None


NINJA_MANIFEST = "build.ninja"


def find_farmfile(farmfile: str, given: bool, ninja_here: bool = False) -> str:
    """The Farmfile's absolute path: `-f FILE` as given, else `Farmfile` in the current
    directory or the nearest parent that has one (SPEC §3, as git, cargo and just do).
    `ninja_here`: a build.ninja in the current directory, when it has no Farmfile, is the
    manifest (`named_manifest`)."""
    if given:
        return os.path.abspath(farmfile)
    start = here = os.getcwd()
    while True:
        path = os.path.join(here, farmfile)
        if os.path.exists(path):
            return path
        if ninja_here and here == start:
            manifest = os.path.join(here, NINJA_MANIFEST)
            if os.path.isfile(manifest):
                return manifest
        parent = os.path.dirname(here)
        if parent == here:
            raise UsageError(f"no {farmfile} in {start} nor in any directory above it (up to "
                             f"{here}); write one (farmer init starts one), cd into the project, or pass -f FILE")
        here = parent


def is_ninja(farmfile: str, ninja: bool) -> bool:
    return ninja or farmfile.endswith(".ninja")


def named_manifest(directory: str | None, farmfile: str, given: bool, ninja: bool) -> tuple[str, bool]:
    """`-C DIR` entered, the manifest a command names and whether it is named now (-f, or
    found: its absolute path). Without -f or --ninja: `Farmfile` here, else `build.ninja`
    here, else the nearest `Farmfile` above (docs/cli.md). A build.ninja here wins over a
    Farmfile above: in a CMake or Meson build folder inside a project that has a Farmfile,
    the manifest beside the user is the one they mean, as `ninja` there would build it."""
    enter(directory)
    if given or ninja:
        return farmfile, given
    return find_farmfile(farmfile, False, ninja_here=True), True


def load_project(directory: str | None, farmfile: str, write_cache: bool, ninja: bool = False,
                 farmfile_given: bool = True, base_dir: str | None = None,
                 deferred: Deferred | None = None) -> tuple[Spec, Graph]:
    """Read the Farmfile (or with `ninja`, a ninja manifest: docs/ninja.md) and traverse it;
    the project root becomes the working directory. `base_dir`: --base-dir (a manifest's).
    `deferred`: where the graph cache's write goes instead of being done now (a build's
    first commands need not wait for it)."""
    farmfile, farmfile_given = named_manifest(directory, farmfile, farmfile_given, ninja)
    if is_ninja(farmfile, ninja):
        from farmer.build import ninja as manifest

        return manifest.load(farmfile if farmfile_given else "build.ninja", write_cache, base_dir, deferred)
    from farmer.graph import load as project

    path = find_farmfile(farmfile, farmfile_given)
    if deferred is None or not write_cache:
        return project.load(path, write_cache)
    spec, graph, save = project.load_later(path)
    if save is not None:
        deferred.graph_cache = save
    return spec, graph


def interrupted_before_planning(lock: ProjectLock, started_at: float, jobs: int) -> None:
    """A signal while the graph was read, under the lock: last-build.json says interrupted
    (no computation was known yet), as SPEC §4 asks of every build that got the lock."""
    from farmer.files.atomic import write_atomically
    from farmer.report import lastbuild

    head = lastbuild.header(started_at, jobs, "interrupted", time.time() - started_at, 0.0, 0.0)
    try:
        write_atomically(os.path.join(lock.dir, "last-build.json"), lastbuild.document(head, [b"[]"]))
    except OSError:
        pass


def built(code: int, graph: Graph | None = None) -> int:
    """The end of a build that wrote last-build.json (the working directory is the project
    root): in GitHub Actions, its annotations and job summary (docs/ci.md). `graph`: the
    build's, for the summary's critical path (a no-op build has none to show)."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from farmer.report.pages.github import report_build

        report_build(os.path.join(os.getcwd(), ".farmer"), graph)
    return code


def ninja_noop(manifest: str, targets: list[str], slots: int, lock: ProjectLock | None,
                base_dir: str | None = None, ending: str = "summary", **served: object) -> int | None:
    """A no-op build of a ninja manifest finished without parsing it (its exit status), when
    neither it nor what regenerates it changed (farmer/store/ninja_stamp.py) and the no-op proof
    holds; None: the build goes the full way. `ending`: what it prints at its end
    (farmer/build/noop.py's `try_build`); `served`: a server's `check`, `reader` and `writer`
    for `try_build`."""
    from farmer.build import noop
    from farmer.files.lock import ProjectLock
    from farmer.store import ninja_stamp as ninjastamp

    root = os.path.dirname(manifest)
    farmer_dir = os.path.join(root, ".farmer")
    if not os.path.isfile(os.path.join(farmer_dir, ninjastamp.NAME)):
        return None
    os.chdir(root)
    own = lock is None
    if own:
        lock = ProjectLock(farmer_dir)
        lock.acquire()
    try:
        digest = ninjastamp.digest(farmer_dir, manifest)
        if digest and (base_dir or os.environ.get("FARMER_BASE_DIR") or "+" in digest):
            from farmer.graph import basedir  # the proof holds for the base directory it was taken with

            given, source = basedir.setting(base_dir)
            digest = basedir.tagged(digest, basedir.resolve(given, root, source))
        outcome = noop.try_build(manifest, targets, slots, digest, ending, **served) if digest else None
        return outcome if isinstance(outcome, int) else None
    finally:
        if own:  # the full path takes it again (regenerating runs builds of its own)
            lock.release()
