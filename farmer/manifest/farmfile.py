"""Read a Farmfile (TOML) into a validated `Spec` (SPEC §1).

Every problem is a `UsageError` with one line: `FILE:LINE: what is wrong; what to do`.
TOML itself gives no positions for values, so lines are found by scanning the text for the
table header and the key (`_Lines`), which is exact for the ordinary one-key-per-line style.
"""

from __future__ import annotations

import os

from farmer.errors import TaskError, UsageError
from farmer.manifest import template
from farmer.manifest.spec import CacheSpec, RemoteSpec, Spec, TaskSpec, WorldSpec, parse_size, read  # noqa: F401 - farmfile.Spec etc. as before

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Iterable, Iterator

TASK_KEYS = {
    "inputs", "outputs", "cmd", "python", "world", "foreach", "depfile", "env", "cost",
    "cpus", "pool", "timeout", "always", "cache", "remote",
}
WORLD_KEYS = {"setup", "parent", "inputs", "env"}
TOP_KEYS = {"farmer", "vars", "pools", "world", "task", "cache", "remote"}
FARMER_KEYS = {"default", "check_deps"}
CACHE_KEYS = {"dir", "max_size", "env"}
REMOTE_KEYS = {"url", "instance", "execute", "upload", "jobs", "platform", "salt", "path", "timeout"}
_MAX_SECONDS = 1e9  # cost and timeout: finite, and small enough for any timer

# Start-up rule (docs/performance.md): the plain forms of names, headers and keys, which are
# what Farmfiles are written with, are read by string methods; these patterns (and `re`)
# only where a line is not of those forms.
_HEADER = r"^\s*\[([^\[\]]+)\]\s*(?:#.*)?$"
_DOTTED = r""""[^"]*"|'[^']*'|[^.\s"']+"""  # parts of a dotted TOML key
_KEY = r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_\-]+))\s*="""
_BARE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"  # a bare key's characters
_BARE_DOTTED = (_BARE + ".").encode()  # a task or world name's too
_NAME_LINES = _BARE_DOTTED + b"\n"  # names a line each (`are_names`)
# What str.isspace() (and so the patterns' \s) takes for blank, but the line break itself.
_BLANKS = "\t\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" \
          "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _pattern(source: str) -> re.Pattern[str]:
    import re

    return re.compile(source)  # re keeps what it compiled


def _only(text: str, allowed: bytes) -> bool:
    """Whether every character of `text` is one of the ASCII characters `allowed`."""
    return text.isascii() and not text.encode("ascii").translate(None, allowed)


def _header_path(line: str) -> tuple[str, ...] | None:
    """The table path `[a."b".c]` declares, its parts unquoted; () for a header with no key
    (`[ ]`, invalid TOML); None when the line is no table header."""
    inner = line.strip()
    if not inner.startswith("["):
        return None
    inner = inner[1:-1] if inner.endswith("]") else ""
    if inner and _only(inner, _BARE_DOTTED):  # [task.NAME]
        parts = inner.split(".")
        if "" not in parts:
            return tuple(parts)
    m = _pattern(_HEADER).match(line)
    if not m:
        return None
    return tuple(_unquoted(q) for q in _pattern(_DOTTED).findall(m.group(1)))


def _unquoted(part: str) -> str:
    """A header's key part as TOML reads it: a basic string's escapes (`"a\\nb"`) decoded,
    so that the name a task has is the name its line is indexed under."""
    if part.startswith('"') and "\\" in part:
        import tomllib  # rare: an escape in a table's name

        try:
            return tomllib.loads("k = " + part)["k"]
        except tomllib.TOMLDecodeError:
            pass  # invalid: the parser reports it, with its line
    return part.strip("\"'")


def is_name(name: str) -> bool:
    """A task, world or wildcard name: letters, digits, '_', '.' and '-', not starting with
    '.' or '-'."""
    return name[:1] not in _NOT_FIRST and _only(name, _BARE_DOTTED)


def are_names(names: list[str]) -> bool:
    """Whether `is_name` holds for each of `names` (a Farmfile's 1 000 task names): one look
    at them, each between two line breaks (no break in a name: one break more than names),
    none empty or starting with '.' or '-' (no break followed by a break, '.' or '-')."""
    joined = "\n" + "\n".join(names) + "\n"
    return (not names or joined.count("\n") == len(names) + 1 and _only(joined, _NAME_LINES)
            and "\n\n" not in joined and "\n." not in joined and "\n-" not in joined)


def _key_name(line: str) -> str | None:
    """The key a line `key = ...` sets, unquoted, or None when it sets none (or a dotted one)."""
    rest = line.lstrip()
    if not rest.startswith(("\"", "'")):
        bare = rest[: len(rest) - len(rest.lstrip(_BARE))]
        return bare if bare and rest[len(bare):].lstrip().startswith("=") else None
    m = _pattern(_KEY).match(line)
    return None if m is None else next(g for g in m.groups() if g is not None)


def _bracket_lines(text: str) -> list[int]:
    """The offsets of the lines of `text` (broken at "\\n" only) that start with `[` after
    blanks (what str.isspace takes, but the line break), in order; found by str.find at C
    speed."""
    starts = []
    at = text.find("\n[")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n[", at + 2)
    for blank in _BLANKS if not text.isascii() else " \t\x1f":
        if blank not in text:
            continue
        at = text.find("\n" + blank)
        while at >= 0:
            end = text.find("\n", at + 1)
            if text[at + 1:end if end >= 0 else len(text)].lstrip().startswith("["):
                starts.append(at + 1)
            at = text.find("\n" + blank, at + 2)
    end = text.find("\n")
    if text[:end if end >= 0 else len(text)].lstrip().startswith("["):
        starts.append(0)
    starts.sort()
    return starts


# Line breaks other than "\n" and "\r\n" that str.splitlines() also breaks at.
_ODD_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
_TABLES = {name: name for name in ("task", "world", "vars", "pools", "farmer")}


class _Lines:
    """Finds the line of a table header or of a key inside a table. Lines are numbered as
    str.splitlines() numbers them; only the lines that start with `[` are indexed (`headers`,
    and `brackets`: each as its header's path, or () when it is not a plain header, with its
    offset, for tomlparse.stream), the others only when a key is looked for: a list of every
    line of a large Farmfile would be held through its parse (see
    bench/results/issue17-passes.md#memory-of-a-100k-clean-build). The index is made when first
    asked for: a Farmfile without mistakes asks only for the lines of a few tables (a task's
    line is looked up when an error or a warning names it: `TaskSpec.line`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._headers: dict[tuple[str, ...], int] | None = None
        self._offsets: dict[int, int] = {}  # a header's line number -> its offset
        self._brackets: list[tuple[tuple[str, ...], int]] | None = None
        self._lines: list[str] | None = None

    @property
    def headers(self) -> dict[tuple[str, ...], int]:
        if self._headers is None:
            self._index()
        return self._headers  # type: ignore[return-value]

    @property
    def brackets(self) -> list[tuple[tuple[str, ...], int]] | None:
        """None: the text has line breaks other than "\n" and "\r\n" (never streamed)."""
        if self._headers is None:
            self._index()
        return self._brackets

    def _index(self) -> None:
        text = self.text
        self._headers = {}
        if any(b in text for b in _ODD_BREAKS) or text.count("\r") != text.count("\r\n"):
            self._lines = text.splitlines()  # numbered the long way
            for number, line in enumerate(self._lines, 1):
                self._header(line, number, 0)
            return
        self._brackets = brackets = []
        number, at = 1, 0
        for start in _bracket_lines(text):
            number += text.count("\n", at, start)
            at = start
            end = text.find("\n", start)
            line = text[start:end] if end >= 0 else text[start:]
            parts = self._header(line[:-1] if line.endswith("\r") else line, number, at)
            brackets.append((parts if "\\" not in line else (), at))

    def _header(self, line: str, number: int, offset: int) -> tuple[str, ...]:
        parts = _header_path(line)
        if not parts:
            return ()
        # One string for the `task` of every [task.NAME]: 100 000 of them are kept a while.
        parts = (_TABLES.get(parts[0], parts[0]), *parts[1:])
        if parts not in self._headers:
            self._headers[parts] = number
            self._offsets[number] = offset
        return parts

    def _after(self, start: int):
        """(number, line) of each line after line `start` (0: every line)."""
        if self._headers is None:
            self._index()
        if self._lines is not None:
            yield from enumerate(self._lines[start:], start + 1)
            return
        text = self.text
        at, number = 0, 1
        if start:  # a header's line: skip it
            at = text.find("\n", self._offsets[start])
            at, number = (len(text) if at < 0 else at + 1), start + 1
        while at < len(text):
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            line = text[at:end]
            yield number, line[:-1] if line.endswith("\r") else line
            at, number = end + 1, number + 1

    def table(self, *path: str) -> int | None:
        return self.headers.get(path)

    def task_line(self, name: str) -> int | None | _Lines:
        """What a TaskSpec keeps for its line: the line of `[task.NAME]` where the index is
        made already (a streamed Farmfile's), so that the index and the text go with the
        parse (TaskSpecs holding them kept them through traversal: see
        bench/results/issue17-passes.md#memory-of-a-100k-clean-build); else
        this index, which TaskSpec.line asks when a line is needed."""
        return self if self._headers is None else self._headers.get(("task", name))

    def key(self, table: tuple[str, ...], key: str) -> int | None:
        if not table:
            # A top-level key is usually a table header: `[key]` or `[key.sub]`.
            found = [n for parts, n in self.headers.items() if parts[0] == key]
            if found:
                return min(found)
        start = self.headers.get(table, 0) if table else 0
        for number, line in self._after(start):
            if (not table or number > start + 1) and _header_path(line) is not None:
                break
            if _key_name(line) == key:
                return number
        return self.headers.get(table) if table else None


class _Reader:
    def __init__(self, path: str | os.PathLike, text: str, lines: _Lines | None = None) -> None:
        self.file = os.path.basename(path)
        self.where = _Lines(text) if lines is None else lines
        self.vars: dict[str, str] = {}  # [vars], once read: what a command's {NAME} inserts
        self.bare: set[tuple[str, bool]] = set()  # commands whose placeholders all stand bare

    def fail(self, line: int | None, message: str) -> UsageError:
        at = f"{self.file}:{line}" if line else self.file
        return UsageError(f"{at}: {message}")

    # -- typed getters: each names the table and key in its error ------------------------

    def strings(self, table: tuple[str, ...], key: str, value: object) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(
                self.where.key(table, key),
                f"{'.'.join(table)}.{key} must be a list of strings, like [\"a\", \"b\"]",
            )
        return list(value)

    def string(self, table: tuple[str, ...], key: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.fail(self.where.key(table, key), f"{'.'.join(table)}.{key} must be a string")
        return value

    def table(self, table: tuple[str, ...], key: str, value: object) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.fail(
                self.where.key(table, key), f"{'.'.join(table)}.{key} must be a table of strings"
            )
        out = {}
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                sub = table + (key,)  # written as its own [task.NAME.env] table?
                line = self.where.key(sub, k) if self.where.table(*sub) else self.where.key(table, key)
                raise self.fail(line, f"{'.'.join(table)}.{key}.{k} must be a string or a number")
            out[k] = str(v)
        return out

    def environment(self, table: tuple[str, ...], key: str, value: object) -> dict[str, str]:
        """A table of environment variables: names as the operating system takes them."""
        env = self.table(table, key, value)
        for name in env:
            if not name or "=" in name:
                sub = table + (key,)
                line = self.where.key(sub, name) if self.where.table(*sub) else self.where.key(table, key)
                raise self.fail(line, f"{'.'.join(table)}.{key}: {name!r} is not an environment "
                                      "variable name; give it a non-empty name without '='")
        return env

    def number(self, table: tuple[str, ...], key: str, value: object, minimum: float,
               integer: bool = False) -> float:
        kind = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or value < minimum:
            what = "an integer" if integer else "a number"
            raise self.fail(
                self.where.key(table, key),
                f"{'.'.join(table)}.{key} must be {what} of at least {minimum}",
            )
        if not integer and not (-_MAX_SECONDS <= value <= _MAX_SECONDS):  # nan, inf
            raise self.fail(
                self.where.key(table, key),
                f"{'.'.join(table)}.{key} must be a finite number of at most {_MAX_SECONDS:g}",
            )
        return value

    def boolean(self, table: tuple[str, ...], key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.fail(self.where.key(table, key), f"{'.'.join(table)}.{key} must be true or false")
        return value

    def known_keys(self, table: tuple[str, ...], data: dict, allowed: set[str]) -> None:
        for key in data:
            if key not in allowed:
                import difflib  # only for the error

                where = f"in [{'.'.join(table)}]" if table else "at the top level"
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.fail(
                    self.where.key(table, key),
                    f"unknown key {key!r} {where}; {hint}allowed: {', '.join(sorted(allowed))}",
                )

    def name(self, kind: str, name: str) -> str:
        if not is_name(name):
            raise self.fail(
                self.where.table(kind, name),
                f"{kind} name {name!r} may only use letters, digits, '_', '.' and '-'",
            )
        return name

    def templates(self, table: tuple[str, ...], key: str, texts: list[str]) -> None:
        for text in texts:
            try:
                template.parse(text)
            except template.TemplateError as e:
                raise self.fail(self.where.key(table, key), f"{'.'.join(table)}.{key}: {e}") from None


def locate(error: UsageError, path: str | os.PathLike) -> UsageError:
    """`error` with `FILE:LINE:` of its task's table in front, when it is a TaskError whose
    table the Farmfile at `path` has (read again: a graph from the cache has no lines)."""
    if not isinstance(error, TaskError) or error.located:
        return error
    try:
        line = _Lines(read(path).decode("utf-8", "replace")).table(error.kind, error.task)
    except UsageError:
        line = None
    located = TaskError(f"{os.path.basename(path)}:{line}: {error}" if line else str(error),
                        error.task, error.kind)
    located.located = True
    return located


def load(path: str | os.PathLike) -> Spec:
    """Read and validate the Farmfile at `path`."""
    return parse_text(path, read(path))


def parse_text(path: str | os.PathLike, raw: bytes) -> Spec:
    """Validate a Farmfile's bytes; `path` names it in errors."""
    name = os.path.basename(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{name}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    from farmer.manifest import tomlparse  # here: a build from the graph cache never parses TOML

    lines = _Lines(text)
    # (The line index is made for a text large enough to be streamed; a smaller one's only
    # if an error or a warning needs a line.)
    streamed = tomlparse.stream(text, lines.brackets) if len(text) >= tomlparse.STREAM_FROM else None
    if streamed is not None:
        try:
            return parse(path, text, streamed.rest, lines, streamed.tasks())
        except (UsageError, tomlparse.NotStreamable):
            pass  # read whole below, so that what is reported first is what it was
    try:
        data = tomlparse.loads(text)
    except RecursionError:
        raise UsageError(f"{name}: invalid TOML: arrays or tables nested too deeply") from None
    except ValueError as e:  # tomllib.TOMLDecodeError
        raise UsageError(_toml_error(name, text, str(e))) from None
    return parse(path, text, data, lines)


def _toml_error(name: str, text: str, error: str) -> str:
    """tomllib's message, with its line, in words a reader of the Farmfile knows."""
    import re

    m = re.search(r"\(at line (\d+), column (\d+)\)", error)
    message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", error).replace("\n", " ")
    line = m.group(1) if m else None
    if m and message in ("Illegal character '\\n'", "Found invalid character '\\n'"):
        # The line ended inside a one-line string.
        message = ("a string is not closed on this line; close its quote, or use \"\"\" for "
                   "text over several lines")
    elif message == "Unterminated string":
        line = _unclosed_multiline(text)
        message = "a multi-line string (\"\"\" or \'\'\') is never closed; close it"
    return f"{name}:{line}: invalid TOML: {message}" if line else f"{name}: invalid TOML: {message}"


def _unclosed_multiline(text: str) -> int | None:
    """The line where the multi-line string that is never closed opens."""
    import re

    opened = None
    for number, line in enumerate(text.splitlines(), 1):
        for quote in re.findall(r'\"\"\"|\'\'\'', line):
            if opened is None:
                opened = (quote, number)
            elif opened[0] == quote:
                opened = None
    return opened[1] if opened else None


def _no_nul(r: _Reader, text: str, data: dict) -> None:
    """No string can carry a NUL character to a path, a command line or the environment."""
    if "\\u0000" not in text and "\\U00000000" not in text:
        return  # TOML lets a NUL in only by these escapes (a raw one is invalid TOML)
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else k, v) for k, v in value.items())
            bad = next((f"{where}.{k}" if where else k for k in value if "\0" in k), None)
        elif isinstance(value, list):
            stack.extend((where, v) for v in value)
            bad = None
        else:
            bad = where if isinstance(value, str) and "\0" in value else None
        if bad is not None:
            line = next((n for n, l in enumerate(text.splitlines(), 1)
                         if "\\u0000" in l or "\\U00000000" in l), None)
            raise r.fail(line, f"{bad!r} contains a NUL character (\\u0000); remove it")


def parse(path: str | os.PathLike, text: str, data: dict, lines: _Lines | None = None,
          task_tables: Iterator[tuple[str, object]] | None = None) -> Spec:
    """The Spec of the TOML document `data` (the text `text`, whose `lines` may be known);
    `task_tables`: the task tables, when they are not in `data` (tomlparse.stream)."""
    r = _Reader(path, text, lines)
    _no_nul(r, text, data)
    r.known_keys((), data, TOP_KEYS)
    for key in TOP_KEYS:
        if key in data and not isinstance(data[key], dict):
            raise r.fail(r.where.key((), key), f"{key} must be a table: [{key}]")

    farmer = data.get("farmer", {})
    r.known_keys(("farmer",), farmer, FARMER_KEYS)
    default = r.strings(("farmer",), "default", farmer["default"]) if "default" in farmer else None
    check_deps = _check_deps(r, farmer["check_deps"]) if "check_deps" in farmer else None

    variables = {}
    for name, value in data.get("vars", {}).items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise r.fail(r.where.key(("vars",), name), f"vars.{name} must be a string or a number")
        variables[name] = str(value)
    r.vars = variables
    pools: dict[str, int] = {}
    for name, size in data.get("pools", {}).items():
        pools[name] = int(r.number(("pools",), name, size, 1, integer=True))

    worlds: dict[str, WorldSpec] = {}
    for name, body in data.get("world", {}).items():
        worlds[name] = _world(r, r.name("world", name), body)
    for world in worlds.values():
        if world.parent is not None and world.parent not in worlds:
            raise r.fail(
                r.where.key(("world", world.name), "parent"),
                f"world {world.name!r} has unknown parent {world.parent!r}; "
                f"declare [world.{world.parent}]",
            )
    _check_world_tree(r, worlds)

    if task_tables is None:
        tables = data.get("task", {})
        tasks = _tasks(r, tables.items(), pools, worlds, tables.__class__ is dict and are_names(list(tables)))
    else:
        tasks = _tasks(r, task_tables, pools, worlds)

    cache = _cache(r, data["cache"]) if "cache" in data else None
    remote = _remote(r, data["remote"]) if "remote" in data else None
    return Spec(path=path, root=os.path.dirname(path) or ".", default=default, vars=variables,
                pools=pools, worlds=worlds, tasks=tasks,
                default_line=r.where.key(("farmer",), "default") if default is not None else None,
                cache=cache, remote=remote, check_deps=check_deps)


def _check_deps(r: _Reader, value: object) -> str | None:
    """`[farmer] check_deps`: true (warn), false, or "strict" (docs/up-to-date.md)."""
    if value is True or value == "strict":
        return "warn" if value is True else "strict"
    if value is False:
        return None
    raise r.fail(r.where.key(("farmer",), "check_deps"),
                 f"farmer.check_deps must be true, false or \"strict\", not {value!r}")


def _cache(r: _Reader, body: dict) -> CacheSpec:
    """`[cache]`: where the local output cache lives, its size limit, the inherited
    environment variables that are part of every key (SPEC §5)."""
    table = ("cache",)
    r.known_keys(table, body, CACHE_KEYS)
    cache = CacheSpec(line=r.where.table("cache"))
    if "dir" in body:
        cache.dir = r.string(table, "dir", body["dir"])
        if not cache.dir:
            raise r.fail(r.where.key(table, "dir"), "cache.dir must not be empty; name a directory")
    if "max_size" in body:
        value = body["max_size"]
        size = None
        if isinstance(value, str):
            size = parse_size(value)
        elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
            size = value
        if size is None:
            raise r.fail(r.where.key(table, "max_size"),
                         f"cache.max_size {value!r} is not a size; write e.g. \"5GiB\", \"500MB\" or bytes")
        cache.max_size = size
    if "env" in body:
        cache.env = r.strings(table, "env", body["env"])
        for name in cache.env:
            if not name or "=" in name:
                raise r.fail(r.where.key(table, "env"), f"cache.env: {name!r} is not an environment "
                                                        "variable name; give it a non-empty name without '='")
    return cache


def _remote(r: _Reader, body: object) -> RemoteSpec:
    """`[remote]`: the REAPI server, what to do with it, what goes into every Action (SPEC §5)."""
    table = ("remote",)
    if not isinstance(body, dict):
        raise r.fail(r.where.key((), "remote"), "remote must be a table: [remote] with url = \"grpc://HOST:PORT\"")
    r.known_keys(table, body, REMOTE_KEYS)
    remote = RemoteSpec(line=r.where.table("remote"))
    for key in ("url", "instance", "salt", "path"):
        if key in body:
            setattr(remote, key, r.string(table, key, body[key]))
    if remote.url is not None and not remote.url.startswith(("grpc://", "grpcs://")):
        raise r.fail(r.where.key(table, "url"), f"remote.url {remote.url!r} is not grpc://HOST:PORT or grpcs://HOST[:PORT]")
    for key in ("execute", "upload"):
        if key in body:
            setattr(remote, key, r.boolean(table, key, body[key]))
    if "jobs" in body:
        remote.jobs = int(r.number(table, "jobs", body["jobs"], 1, integer=True))
    if "timeout" in body:
        remote.timeout = r.number(table, "timeout", body["timeout"], 0.001)
    if "platform" in body:
        remote.platform = r.table(table, "platform", body["platform"])
    return remote


def _world(r: _Reader, name: str, body: object) -> WorldSpec:
    table = ("world", name)
    if not isinstance(body, dict):
        raise r.fail(r.where.key(("world",), name), f"world.{name} must be a table: [world.{name}]")
    r.known_keys(table, body, WORLD_KEYS)
    world = WorldSpec(name=name, line=r.where.table(*table))
    if "setup" in body:
        world.setup = r.strings(table, "setup", body["setup"])
    if "parent" in body:
        world.parent = r.string(table, "parent", body["parent"])
    if "inputs" in body:
        world.inputs = r.strings(table, "inputs", body["inputs"])
        r.templates(table, "inputs", world.inputs)
    if "env" in body:
        world.env = r.environment(table, "env", body["env"])
    return world


def _check_world_tree(r: _Reader, worlds: dict[str, WorldSpec]) -> None:
    for world in worlds.values():
        seen = [world.name]
        parent = world.parent
        while parent is not None:
            if parent in seen:
                chain = " -> ".join(seen + [parent])
                raise r.fail(world.line, f"worlds form a cycle: {chain}; a world's parent must not descend from it")
            seen.append(parent)
            parent = worlds[parent].parent


_PLAIN_TASK_KEYS = {"inputs", "outputs", "cmd"}


def _tasks(r: _Reader, tables: Iterable[tuple[str, object]], pools: dict[str, int],
           worlds: dict[str, WorldSpec], named: bool = False) -> dict[str, TaskSpec]:
    """Each task table's TaskSpec, in the Farmfile's order. A table of only inputs, outputs
    and a cmd, all strings without a brace, under a valid name (what a generator writing out
    each step makes) passes `_task`'s checks by this loop's few tests, inline (a Farmfile
    may have 100 000 of them): a plain TaskSpec. Any other table goes through `_task`,
    which words what is wrong with it. `named`: every table's name is known to be valid
    (`are_names`)."""
    tasks: dict[str, TaskSpec] = {}
    task_line = r.where.task_line
    plain_keys = _PLAIN_TASK_KEYS
    plain = TaskSpec.plain_table
    for name, body in tables:
        if body.__class__ is dict and body.keys() <= plain_keys and (named or is_name(name)):
            inputs, outputs, cmd = body.get("inputs"), body.get("outputs"), body.get("cmd")
            if (inputs.__class__ is list or inputs is None) and (outputs.__class__ is list or outputs is None) \
                    and (cmd.__class__ is str or cmd is None and not outputs):  # an alias has no outputs
                try:
                    texts = "".join(inputs or ()) + "".join(outputs or ()) + (cmd or "")
                except TypeError:  # not only strings
                    texts = "{"
                if "{" not in texts and "}" not in texts:  # no template to parse
                    # (toml_rs's lists: nothing else holds them)
                    tasks[name] = plain(name, task_line(name), inputs or [], outputs or [], cmd)
                    continue
        tasks[name] = _task(r, r.name("task", name), body, pools, worlds)
    return tasks


_NOT_FIRST = ("", ".", "-")  # what a name may not start with (`is_name`)


def _task(r: _Reader, name: str, body: object, pools: dict[str, int],
          worlds: dict[str, WorldSpec]) -> TaskSpec:
    table = ("task", name)
    if not isinstance(body, dict):
        raise r.fail(r.where.key(("task",), name), f"task.{name} must be a table: [task.{name}]")
    r.known_keys(table, body, TASK_KEYS)
    t = TaskSpec(name=name, line=r.where.task_line(name))
    for key in ("inputs", "outputs"):
        if key in body:
            setattr(t, key, r.strings(table, key, body[key]))
            r.templates(table, key, getattr(t, key))
    for key in ("cmd", "python", "world", "depfile", "pool"):
        if key in body:
            setattr(t, key, r.string(table, key, body[key]))
    for key in ("cmd", "python", "depfile"):
        if getattr(t, key) is not None:
            r.templates(table, key, [getattr(t, key)])
    if "env" in body:
        t.env = r.environment(table, "env", body["env"])
        r.templates(table, "env", list(t.env.values()))
    if "cost" in body:
        t.cost = float(r.number(table, "cost", body["cost"], 0))
    if "cpus" in body:
        t.cpus = int(r.number(table, "cpus", body["cpus"], 1, integer=True))
    if "timeout" in body:
        t.timeout = float(r.number(table, "timeout", body["timeout"], 0))
        if t.timeout <= 0:
            raise r.fail(r.where.key(table, "timeout"), f"task.{name}.timeout must be above 0 seconds")
    for key in ("always", "cache", "remote"):
        if key in body:
            setattr(t, key, r.boolean(table, key, body[key]))
    if "foreach" in body:
        t.foreach = _foreach(r, table, body["foreach"])

    if t.cmd is not None and t.python is not None:
        raise r.fail(t.line, f"task {name!r} has both cmd and python; keep one of them")
    if t.world is not None:
        if t.python is None:
            raise r.fail(r.where.key(table, "world"), f"task {name!r} has a world but no python line; worlds run python tasks")
        if t.world not in worlds:
            raise r.fail(r.where.key(table, "world"), f"task {name!r} uses unknown world {t.world!r}; declare [world.{t.world}]")
    if t.pool is not None and t.pool not in pools:
        raise r.fail(r.where.key(table, "pool"), f"task {name!r} uses unknown pool {t.pool!r}; declare it under [pools]")
    if t.cmd is None and t.python is None:
        if t.outputs:
            raise r.fail(t.line, f"task {name!r} declares outputs but has no cmd or python to make them")
        if t.depfile is not None:
            raise r.fail(r.where.key(table, "depfile"), f"task {name!r} has a depfile but no cmd or python")
    _placeholders_bare(r, table, t)
    return t


def _placeholders_bare(r: _Reader, table: tuple[str, ...], t: TaskSpec) -> None:
    """Every name farmer shell-quotes in the task's cmd or python line stands where the
    shell (shlex.split for a python line) takes farmer's quotes as quotes: bare. Inside the
    author's '...' farmer's quotes would end the author's and a file's name could run as
    shell code; inside "..." they would be plain characters, and `$(...)` in a name would
    run. The result is never what the author meant, so it is refused before anything runs
    (docs/farmfile.md, "Write them bare")."""
    key = "cmd" if t.cmd is not None else "python"
    text = t.cmd if t.cmd is not None else t.python
    if text is None or "{" not in text:
        return
    pieces, refs = _command_pieces(text, t.foreach, r.vars)
    if not refs:
        return
    shell = key == "cmd"
    command = "".join(pieces)
    if (command, shell) in r.bare:  # 100 000 generated tasks may share one command
        return
    from farmer.manifest import shellscan  # only for a command that substitutes a name

    for ref, place in zip(refs, shellscan.contexts(command, _MARK, shell)):
        if place:
            raise r.fail(r.where.key(table, key), f"task {t.name!r}: {_misplaced(ref, place, key)}")
    r.bare.add((command, shell))


_MARK = "\0"  # a placeholder in a command as the scanner reads it (no Farmfile string has a NUL)


def _command_pieces(text: str, foreach: str | dict[str, list[str]] | None,
                    variables: dict[str, str]) -> tuple[list[str], list[template.Ref]]:
    """`text` as the shell will read it, with `_MARK` for each name farmer quotes, and those
    names. A var is inserted as rendering inserts it: its quotes count. So is a wildcard
    whose every value is written in a foreach table and needs no quotes: farmer inserts it
    as it is, as the author wrote it (a name that is no var is an error when rendered)."""
    if foreach is None:
        wildcards, quoted = frozenset(), frozenset()
    elif isinstance(foreach, str):
        wildcards = quoted = template.names(foreach)
    else:
        wildcards = foreach.keys()
        quoted = {k for k, values in foreach.items()
                  if any(template.shell_quote(v) != v for v in values)}
    pieces: list[str] = []
    refs: list[template.Ref] = []
    for part in template.parse(text):
        if isinstance(part, str):
            pieces.append(part.replace(_MARK, " "))
        elif part.index is None and part.name in wildcards and part.name not in quoted:
            pieces.append("x")  # stands for any of its values: none has a character the shell reads
        elif part.index is None and part.name in wildcards or part.name in template.FILE_KEYS:
            pieces.append(_MARK)
            refs.append(part)
        elif part.index is None:
            pieces.append(variables.get(part.name, ""))
    return pieces, refs


def _misplaced(ref: template.Ref, place: str, key: str) -> str:
    """What is wrong with a name farmer quotes that does not stand bare, and the fix."""
    from farmer.manifest import shellscan

    name = _ref_text(ref)
    if place == shellscan.BACKSLASH:
        return f"{name} right after a backslash in {key}; remove the backslash, farmer quotes it"
    if place == shellscan.DOLLAR:
        hint = f" (for the shell's variable write ${{{name}}})" if ref.index is None else ""
        return f"{name} right after '$' in {key}; write it bare, farmer quotes it{hint}"
    if place == shellscan.BACKTICK:
        return f"{name} inside `...` in {key}; write $(...) instead, with {name} bare in it: farmer quotes it"
    if place in (shellscan.HEREDOC, shellscan.ARITHMETIC):
        return (f"{name} inside {place} in {key}; set a variable to it, bare (v={name}; ...), "
                "and use $v there: farmer quotes it")
    if key == "python":
        return f"{name} inside quotes ({place}) in python; write it bare, as an argument of its own: farmer quotes it"
    return f"{name} inside quotes ({place}) in {key}; write it bare, farmer quotes it"


def _ref_text(ref: template.Ref) -> str:
    """`{name}`, `{name[i]}` or `{name[a:b]}`, as written."""
    if ref.index is None:
        return f"{{{ref.name}}}"
    if isinstance(ref.index, tuple):
        start, stop = ("" if i is None else str(i) for i in ref.index)
        return f"{{{ref.name}[{start}:{stop}]}}"
    return f"{{{ref.name}[{ref.index}]}}"


def _foreach(r: _Reader, table: tuple[str, ...], value: object) -> str | dict[str, list[str]]:
    line = r.where.key(table, "foreach")
    if isinstance(value, str):
        try:
            refs = template.parse(value)
        except template.TemplateError as e:
            raise r.fail(line, f"{'.'.join(table)}.foreach: {e}") from None
        wildcards = [p for p in refs if isinstance(p, template.Ref)]
        if not wildcards:
            raise r.fail(line, f"{'.'.join(table)}.foreach has no {{wildcard}}; write e.g. \"src/{{stem}}.c\"")
        for ref in wildcards:
            if ref.index is not None or ref.name in template.FILE_KEYS:
                raise r.fail(line, f"{'.'.join(table)}.foreach: {{{ref.name}}} cannot be a wildcard name")
        return value
    if isinstance(value, dict) and value:
        out = {}
        for k, v in value.items():
            if not is_name(k) or k in template.FILE_KEYS:
                raise r.fail(line, f"{'.'.join(table)}.foreach: {k!r} cannot be a wildcard name")
            out[k] = r.strings(table, "foreach", v)
        return out
    raise r.fail(line, f"{'.'.join(table)}.foreach must be a pattern string or a table of lists")
