"""What farmer itself writes and deletes (outputs' folders, a failed computation's outputs,
what `clean` removes) stays inside the project root, also through symlinks: checked when a
graph is made, and again before a build runs anything or `clean` removes anything, since a
graph read from the cache was checked against the symlinks of an earlier day."""

from __future__ import annotations

import os

from farmer.errors import TaskError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation


# Below this many outputs in one folder an lstat each is cheaper than listing the folder
# (one change in a 10k build: 9 lstat calls instead of a scandir of 10 000 entries).
_LISTING_PAYS = 64


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

    def no_link_among(parent: str, paths: list[str]) -> bool:
        if not dir_inside(parent):
            return False
        if len(paths) < _LISTING_PAYS:  # a few outputs of a big folder (an incremental build)
            return not any(os.path.islink(os.path.join(root, p)) for p in paths)
        return links_in(parent) == set()

    by_dir: dict[str, list[str]] = {}
    for comp in comps:
        for p in comp.outputs:
            by_dir.setdefault(p.rpartition("/")[0], []).append(p)
        if comp.depfile:
            by_dir.setdefault(comp.depfile.rpartition("/")[0], []).append(comp.depfile)
    # Usually every directory written to resolves inside the root and holds no symlink: a
    # look at each directory proves it. Otherwise the paths are looked at in order.
    if all(no_link_among(d, ps) for d, ps in by_dir.items()):
        return
    for comp in comps:
        for path in comp.outputs + ([comp.depfile] if comp.depfile else []):
            if leaves(path):
                raise TaskError(f"task {comp.task!r}: output {path!r} leads outside the project "
                                "root through a symlink; declare a path inside the root", comp.task)
