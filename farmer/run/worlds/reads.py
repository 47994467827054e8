"""What a Python step reads, recorded inside its own interpreter (standard library only: the
driver loads this file by path, without the farmer package).

farmer runs Python steps in its driver, so it can see what they use, as a depfile shows what
a compile used. Two sources, both cheap:

- an audit hook (PEP 578) sees every `open` event: `open()`, `io.open`, `os.open`, pathlib's
  reads, `io.open_code`. A hook cannot be removed, so it is installed once per interpreter
  and collects only while a set-up or a step is active (`Reads.begin` ... `Reads.end`);
  otherwise it returns at once;
- the modules a step imported, each by its source file: `sys.modules` at its end, less what
  its world's set-up had imported already (`Reads.snapshot`), found by the names the
  `import` events gave (a walk of every module, in a fork of a world, would copy the pages
  of each), by all its keys when the count says a module came another way.

What is kept (`Reads.end`): existing regular files, made absolute against the working
directory of the open, except the interpreter's own (under `sys.base_prefix` or
`sys.base_exec_prefix`, but for a site-packages or dist-packages folder there: third-party
packages count), /proc, /sys, /dev, farmer's own folder (`.farmer/` in the project root), and
bytecode caches (a module counts by its source). A file the step opened for writing is its
product, not an input: it is reported apart (`wrote`), inside the project root only, for
farmer's warning about undeclared outputs. Paths inside the root are made relative to it.

The file farmer reads back (`dump`, `load`): a JSON object
  {"read": [PATH...], "wrote": [PATH...], "setup": [[WORLD, BEGAN_NS, [PATH...] | null]...]}
where `setup` lists what each world of the step's chain read while it set up (root world
first) and when that set-up began (the wall clock, ns). A world process writes each set-up's
list once, before its first task (`ship`: `worlds/WORLD.reads` beside the logs), and its
tasks then name it with null: a setup that imports numpy reads 500 files, which fifty tasks
need not each write and farmer read.

Not seen: files read by processes the step starts (subprocesses, multiprocessing workers),
files a C extension opens without Python's `open`, files opened relative to a directory
descriptor (`dir_fd`), and a step that ends with `os._exit` reports nothing.
"""

from __future__ import annotations

import json
import os
import stat
import sys

_SKIPPED = ("/proc/", "/sys/", "/dev/")
_PACKAGES = ("/site-packages/", "/dist-packages/")


class Reads:
    """The recording of one interpreter (and of the processes forked from it)."""

    __slots__ = ("_own", "active", "imported", "kept", "opened", "root", "setups", "shipped", "snapshot")

    def __init__(self, root: str) -> None:
        self.active = False
        self.imported: list[str] = []  # the modules `import` events named since `begin`
        self.opened: list[tuple[object, int]] = []  # (path as opened, made absolute, flags)
        self.root = os.path.abspath(root)
        self.snapshot: frozenset[str] = frozenset(sys.modules)  # modules a step does not count
        self.setups: list[list] = []  # [world, began_ns, paths] of the chain, root world first
        self.shipped = 0  # how many of `setups` are written for farmer (`ship`)
        self.kept: list[list] = []  # what set-ups collected, never freed (`end`)
        prefixes = {os.path.abspath(p) + os.sep for p in (sys.base_prefix, sys.base_exec_prefix) if p}
        self._own = (tuple(prefixes), os.path.join(self.root, ".farmer") + os.sep)

    def install(self) -> None:
        """The audit hook, once per interpreter; forks inherit it (and this object)."""
        getcwd, isabs, fspath = os.getcwd, os.path.isabs, os.fspath
        me = self

        def hook(event: str, args: tuple) -> None:
            if event == "import":
                if me.active and isinstance(args[0], str):
                    me.imported.append(args[0])
            elif event == "open" and me.active:
                path = args[0]
                if isinstance(path, int) or path is None:
                    return  # a descriptor: its file was opened (and seen) by path before
                try:
                    path = fspath(path)
                    if isinstance(path, bytes):
                        path = os.fsdecode(path)
                    if not isabs(path):
                        path = os.path.join(getcwd(), path)
                except (TypeError, ValueError, OSError):
                    return
                me.opened.append((path, args[2] if isinstance(args[2], int) else 0))

        sys.addaudithook(hook)

    def begin(self) -> None:
        """A set-up or a step starts: collect from now on."""
        self.opened.clear()
        self.imported = []
        self.active = True

    def end(self, keep: bool = False) -> tuple[list[str], list[str]]:
        """Stop collecting: (files read, files written inside the root), each once, in the
        order first seen; modules imported since `snapshot` count as read. `keep`, for a
        set-up: what it collected is kept, not freed. Freed, it would leave holes among the
        modules the set-up loaded, which every fork's first allocations fill, copying a page
        each (about 400 pages a task after a set-up that imports numpy)."""
        self.active = False
        written: dict[str, None] = {}
        read: dict[str, None] = {}
        for path, flags in self.opened:
            path = os.path.normpath(path)
            if flags & (os.O_WRONLY | os.O_RDWR):
                written[path] = None
            else:
                read[path] = None
        if keep:
            self.kept.append(self.opened)
            self.opened = []
        else:
            self.opened.clear()
        modules, snapshot = sys.modules, self.snapshot
        # The modules the `import` events named, unless the count says more came another
        # way (importlib.import_module raises none): in a fork of a world, walking every
        # module would touch (and so copy) the memory of each.
        new = {name for name in self.imported if name in modules and name not in snapshot}
        if len(modules) != len(snapshot) + len(new):
            new = modules.keys() - snapshot
        for name in new:
            source = getattr(modules.get(name), "__file__", None)
            if isinstance(source, str):
                read[os.path.normpath(os.path.abspath(source))] = None
        kept_read = [p for p in (self._kept(p) for p in read if p not in written) if p is not None]
        kept_written = [p for p in (self._kept(p) for p in written) if p is not None and not p.startswith("/")]
        return kept_read, kept_written

    def _kept(self, path: str) -> str | None:
        """`path` as recorded (relative inside the root), or None when it is not recorded."""
        prefixes, farmer_dir = self._own
        if path.startswith(_SKIPPED) or path.startswith(farmer_dir) or "/__pycache__/" in path:
            return None
        if path.startswith(prefixes) and not any(p in path for p in _PACKAGES):
            return None  # the interpreter's own: its standard library, its headers
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
        except (OSError, ValueError):
            return None
        return path.removeprefix(self.root + os.sep)

    def ship(self, logs: str) -> None:
        """Write each set-up's list not written yet to `logs`/worlds/WORLD.reads, which the
        steps' records then name (a world process, before it starts a step)."""
        for world, began_ns, paths in self.setups[self.shipped:]:
            dump_setup(os.path.join(logs, "worlds", world + ".reads"), world, began_ns, paths)
        self.shipped = len(self.setups)

    def setup_refs(self) -> list[list]:
        """`setups` as a step's record holds them: the lists `ship` wrote as null."""
        return [[w, t, None if k < self.shipped else paths] for k, (w, t, paths) in enumerate(self.setups)]

    def set_up(self, world: str, began_ns: int, paths: list[str]) -> None:
        """World `world`'s set-up, which began at `began_ns`, read `paths`: its modules are
        the world's from now on, not its steps'."""
        self.setups.append([world, began_ns, paths])
        self.snapshot = frozenset(sys.modules)


def dump(path: str, read: list[str], wrote: list[str], setups: list[list]) -> None:
    """Write what a step read where farmer looks for it; a failure to is no failure of the
    step (farmer then knows nothing of its reads)."""
    _write(path, {"read": read, "wrote": wrote, "setup": setups})


def dump_setup(path: str, world: str, began_ns: int, paths: list[str]) -> None:
    _write(path, {"world": world, "began": began_ns, "read": paths})


def _write(path: str, data: dict) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, separators=(",", ":"))


def load_setup(path: str, world: str, began_ns: int) -> list[str] | None:
    """What `ship` wrote at `path` for world `world`'s set-up that began at `began_ns`;
    None when there is none, or it is another set-up's (the world was set up again)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data["world"] != world or data["began"] != began_ns:
            return None
        return [str(p) for p in data["read"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(path: str) -> tuple[list[str], list[str], list[tuple[str, int, list[str] | None]]] | None:
    """What `dump` wrote at `path` (read, wrote, set-ups: None for a list `ship` wrote),
    removing the file; None when there is none or it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    try:
        read = [str(p) for p in data["read"]]
        wrote = [str(p) for p in data["wrote"]]
        setups = [(str(w), int(t), None if paths is None else [str(p) for p in paths])
                  for w, t, paths in data["setup"]]
    except (KeyError, TypeError, ValueError):
        return None
    return read, wrote, setups
