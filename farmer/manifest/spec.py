"""What a Farmfile declares (`Spec`, its tasks and worlds), and reading its bytes.

Apart from farmfile.py, which parses and validates the TOML: a build from the graph cache
needs these classes but never parses, so it does not import the parser (its regexes,
template.py, tomllib). Paths are plain strings (os.path), not pathlib's, which a build does
not import (with re, enum, urllib.parse and ipaddress, a few milliseconds).
"""

from __future__ import annotations

import os
import stat

from farmer.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class Lines(Protocol):  # farmfile._Lines: where each table of a Farmfile is written
        def table(self, *path: str) -> int | None: ...


# The env of a task that sets none: one dict, never changed (a dict each weighed on a large
# Farmfile's parse: see bench/results/issue17-passes.md#memory-of-a-100k-clean-build).
NO_ENV: dict[str, str] = {}
_new = object.__new__


class TaskSpec:
    __slots__ = ("name", "_line", "inputs", "outputs", "cmd", "python", "world", "foreach",
                 "depfile", "env", "cost", "cpus", "pool", "timeout", "always", "cache", "remote",
                 "plain")

    def __init__(self, name: str, line: int | Lines | None, inputs: list[str] | None = None,
                 outputs: list[str] | None = None, cmd: str | None = None,
                 python: str | None = None, world: str | None = None,
                 foreach: str | dict[str, list[str]] | None = None, depfile: str | None = None,
                 env: dict[str, str] | None = None, cost: float | None = None, cpus: int = 1,
                 pool: str | None = None, timeout: float | None = None, always: bool = False,
                 cache: bool = True, remote: bool = True, plain: bool = False) -> None:
        self.name, self._line = name, line
        self.inputs = [] if inputs is None else inputs
        self.outputs = [] if outputs is None else outputs
        self.cmd, self.python, self.world, self.foreach, self.depfile = cmd, python, world, foreach, depfile
        self.env = NO_ENV if env is None else env
        self.cost, self.cpus, self.pool, self.timeout = cost, cpus, pool, timeout
        self.always, self.cache, self.remote = always, cache, remote
        # Read from a table of only inputs, outputs and a cmd (or neither: an alias), none
        # with a brace: every other field is its default, and it has one computation, its
        # texts as written (farmfile._tasks; traversal._literal_computation).
        self.plain = plain

    @classmethod
    def plain_table(cls, name: str, line: int | Lines | None, inputs: list[str], outputs: list[str],
                    cmd: str | None) -> TaskSpec:
        """`TaskSpec(name, line, inputs, outputs, cmd, plain=True)`, made without __init__'s
        parameters (a generated Farmfile's parse makes 100 000 of these)."""
        task = _new(cls)
        task.name, task._line, task.inputs, task.outputs, task.cmd = name, line, inputs, outputs, cmd
        task.python = task.world = task.foreach = task.depfile = None
        task.env = NO_ENV
        task.cost, task.cpus, task.pool, task.timeout = None, 1, None, None
        task.always, task.cache, task.remote, task.plain = False, True, True, True
        return task

    @property
    def line(self) -> int | None:
        """The line of its `[task.NAME]` header. Given as the Farmfile's line index, it is
        looked up when first asked for (an error or a warning names it): a parse need not
        number the lines of every header."""
        line = self._line
        if line is not None and line.__class__ is not int:
            line = self._line = line.table("task", self.name)  # type: ignore[union-attr]
        return line  # type: ignore[return-value]


class WorldSpec:
    # In this order: the graph cache stores a world as the tuple of its fields.
    __slots__ = ("name", "line", "setup", "parent", "inputs", "env")

    def __init__(self, name: str, line: int | None, setup: list[str] | None = None,
                 parent: str | None = None, inputs: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.name, self.line = name, line
        self.setup = [] if setup is None else setup
        self.parent = parent
        self.inputs = [] if inputs is None else inputs
        self.env = {} if env is None else env


class CacheSpec:
    """`[cache]` (SPEC §5): its presence turns the local output cache on (farmer/record/cache/)."""

    # In this order: the graph cache stores it as the tuple of its fields.
    __slots__ = ("line", "dir", "max_size", "env")

    def __init__(self, line: int | None, dir: str | None = None, max_size: int | None = None,
                 env: list[str] | None = None) -> None:
        self.line = line
        self.dir = dir  # as written ("~" unexpanded, relative to the project root)
        self.max_size = max_size  # bytes
        self.env = [] if env is None else env  # inherited variables that are part of every key


# The units of a size as `[cache] max_size` and `farmer cache gc --max-size` take it.
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "ki": 1024, "m": 1000**2,
          "mb": 1000**2, "mib": 1024**2, "mi": 1024**2, "g": 1000**3, "gb": 1000**3,
          "gib": 1024**3, "gi": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4,
          "ti": 1024**4}


def parse_size(text: str) -> int | None:
    """Bytes in `text` ("5GiB", "500 MB", "1.5G", "4096"), or None when it is not a size.
    Decimal units (k, MB, G) are powers of 1000, binary ones (KiB, Mi) of 1024."""
    text = text.strip()
    end = len(text)
    while end and not (text[end - 1].isdigit() or text[end - 1] == "."):
        end -= 1
    number, unit = text[:end].strip(), text[end:].strip().lower()
    if unit not in _UNITS or not number or not all(c.isdigit() or c == "." for c in number):
        return None
    try:
        size = int(float(number) * _UNITS[unit])
    except ValueError:
        return None
    return size if size > 0 else None


class RemoteSpec:
    """`[remote]` (SPEC §5): a REAPI server for the remote cache and remote execution
    (farmer/remote/; docs/remote.md). Flags and FARMER_REMOTE* override each key."""

    # In this order: the graph cache stores it as the tuple of its fields.
    __slots__ = ("line", "url", "instance", "execute", "upload", "jobs", "platform", "salt", "path", "timeout")

    def __init__(self, line: int | None, url: str | None = None, instance: str = "", execute: bool = False,
                 upload: bool = True, jobs: int = 8, platform: dict[str, str] | None = None, salt: str = "",
                 path: str | None = None, timeout: float | None = None) -> None:
        self.line, self.url, self.instance, self.execute, self.upload = line, url, instance, execute, upload
        self.jobs, self.platform, self.salt, self.path, self.timeout = jobs, platform or {}, salt, path, timeout

    def table(self) -> dict:
        """The keys written in the Farmfile, as farmer.remote.config.resolve takes them."""
        return {k: getattr(self, k) for k in self.__slots__[1:] if getattr(self, k) is not None}


class Spec:
    __slots__ = ("path", "root", "default", "vars", "pools", "worlds", "tasks", "default_line",
                 "digest", "cache", "remote", "check_deps")

    def __init__(
        self,
        path: str | os.PathLike,  # the Farmfile; kept as a str
        root: str | os.PathLike,  # the project root: the Farmfile's directory; kept as a str
        default: list[str] | None,
        vars: dict[str, str],
        pools: dict[str, int],
        worlds: dict[str, WorldSpec],
        tasks: dict[str, TaskSpec],
        default_line: int | None = None,  # where `default` is written, for errors after traversal
        digest: str = "",  # of the Farmfile's bytes: what caches built from this spec are keyed by
        cache: CacheSpec | None = None,  # `[cache]`, when the Farmfile has one
        remote: RemoteSpec | None = None,  # `[remote]`, when the Farmfile has one
        check_deps: str | None = None,  # `[farmer] check_deps`: "warn", "strict"; None: off
    ) -> None:
        self.path, self.root = os.fspath(path), os.fspath(root)
        self.default, self.vars = default, vars
        self.pools, self.worlds, self.tasks = pools, worlds, tasks
        self.default_line, self.digest, self.cache = default_line, digest, cache
        self.remote = remote
        self.check_deps = check_deps


def read(path: str | os.PathLike) -> bytes:
    """The Farmfile's bytes."""
    try:
        # Non-blocking: a FIFO in the Farmfile's place must not hang farmer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(
            f"{path}: no such Farmfile; check the -f path, or write one (farmer init starts one)"
        ) from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: not a regular file; a Farmfile is a TOML text file")
        try:
            return f.read()
        except OSError as e:
            raise UsageError(f"{path}: cannot read: {e.strerror}") from None
