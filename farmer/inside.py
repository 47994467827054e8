"""What farmer itself writes and deletes (outputs' folders, a failed computation's outputs,
what `clean` removes) stays inside the project root, also through symlinks: checked when a
graph is made, and again before a build runs anything or `clean` removes anything, since a
graph read from the cache was checked against the symlinks of an earlier day."""

from __future__ import annotations

import os

from farmer.errors import TaskError

TYPE_CHECKING = False  # start-up rule (docs/performance.md): no typing on the build path
if TYPE_CHECKING:
    from farmer.graph import Computation


def check_inside(root: str | os.PathLike, comps: list[Computation]) -> None:
    """What farmer writes (outputs' folders, and their removal when a computation fails)
    stays inside the root, also through symlinks that exist now."""
    real_root = os.path.realpath(root)
    inside: dict[str, bool] = {}  # directory -> whether it resolves inside the root
    # directory -> names of the symlinks in it (one listing instead of an lstat per output;
    # None: it could not be listed, look at each output)
    links: dict[str, set[str] | None] = {}

    def dir_inside(parent: str) -> bool:
        ok = inside.get(parent)
        if ok is None:
            real = os.path.realpath(os.path.join(root, parent))
            ok = inside[parent] = real == real_root or real.startswith(real_root + os.sep)
        return ok

    def links_in(parent: str) -> set[str] | None:
        if parent not in links:
            try:
                with os.scandir(os.path.join(root, parent)) as entries:
                    links[parent] = {e.name for e in entries if e.is_symlink()}
            except (FileNotFoundError, NotADirectoryError):
                links[parent] = set()  # nothing there, so no symlink either
            except OSError:
                links[parent] = None
        return links[parent]

    def leaves(path: str) -> bool:
        parent, _, name = path.rpartition("/")  # os.path.dirname of a normalized path
        ok = dir_inside(parent)
        if ok:
            names = links_in(parent)
            if os.path.islink(os.path.join(root, path)) if names is None else name in names:
                real = os.path.realpath(os.path.join(root, path))
                ok = real.startswith(real_root + os.sep)
        return not ok

    paths = [p for comp in comps for p in comp.outputs]
    paths += [comp.depfile for comp in comps if comp.depfile]
    # Usually every directory written to resolves inside the root and holds no symlink: a
    # look at each directory proves it. Otherwise the paths are looked at in order.
    if all(dir_inside(d) and links_in(d) == set() for d in {p.rpartition("/")[0] for p in paths}):
        return
    for comp in comps:
        for path in comp.outputs + ([comp.depfile] if comp.depfile else []):
            if leaves(path):
                raise TaskError(f"task {comp.task!r}: output {path!r} leads outside the project "
                                "root through a symlink; declare a path inside the root", comp.task)
