"""Which files a command opened, created, renamed and removed, as strace saw them
(`farmer build --check-deps`, docs/up-to-date.md#checking-what-commands-touch).

A command to check runs as `strace -DD -f ... -o TRACE -- /bin/sh -c CMD` (`traced_argv`): every
process it starts is followed, only the calls that name files are stopped for (strace's
`--seccomp-bpf` lets the others through at full speed), and each file descriptor is printed
with the path it stands for (`-y`), so that a call relative to a directory (`openat` with
`AT_FDCWD` or a folder's descriptor) comes with that directory, and an open that succeeded
with the file it opened, symlinks resolved. `parse` reads such a trace into `Access`es in the
order they happened; the working directory of each process is followed too (`chdir`,
`fchdir`, inherited across `clone`/`fork`/`vfork`) for the calls that take a bare path
(`unlink`, `rename`, `execve`), and for an older strace that does not print a directory
for `AT_FDCWD`.

Pure functions but `find`, `require`, `usable` and `written`, which look at this machine:
the reading is testable on captured lines alone. Why strace and not a preload library, Landlock or seccomp's user
notifications: docs/performance.md#checking-what-commands-touch.
"""

from __future__ import annotations

import errno
import os

READ, WRITE, REMOVE = "read", "write", "remove"

# The calls a trace stops for: those that open, create, rename or remove a file, change a
# working directory or start a process (whose working directory is its parent's).
SYSCALLS = ("open", "openat", "openat2", "creat", "execve", "execveat", "truncate",
            "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
            "unlink", "unlinkat", "chdir", "fchdir", "clone", "clone3", "fork", "vfork")

INSTALL_HINT = "apt-get install strace"


class Access:
    """One file a traced process touched: `kind` READ (opened for reading, or executed),
    WRITE (opened for writing, created, truncated, renamed or linked into place) or REMOVE
    (unlinked, or renamed away); `path` absolute and normalized, as the process named it
    (symlinks resolved where strace printed the file a descriptor stands for)."""

    __slots__ = ("kind", "path")

    def __init__(self, kind: str, path: str) -> None:
        self.kind, self.path = kind, path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Access) and (self.kind, self.path) == (other.kind, other.path)

    def __hash__(self) -> int:
        return hash((self.kind, self.path))

    def __repr__(self) -> str:
        return f"Access({self.kind!r}, {self.path!r})"


def find(path_var: str | None = None) -> str | None:
    """Where strace is on PATH (`path_var`: that variable's value; None: this process's),
    or None."""
    for folder in (os.environ.get("PATH", "") if path_var is None else path_var).split(os.pathsep):
        candidate = os.path.join(folder or ".", "strace")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def require(asked: str = "--check-deps") -> str:
    """Where strace is; a usage error when it is missing or cannot trace here, saying what
    `asked` for it."""
    from farmer.errors import UsageError

    found = find()
    if found is None:
        raise UsageError(f"{asked} needs strace: {INSTALL_HINT}")
    why = usable(found)
    if why is not None:
        raise UsageError(f"{asked}: {found} cannot trace commands here: {why}")
    return found


def usable(strace: str) -> str | None:
    """Why `strace` cannot trace a command on this machine (ptrace forbidden, as in some
    containers; a strace too old for `--seccomp-bpf`), or None when it can: one short run."""
    import subprocess  # only with --check-deps

    try:
        done = subprocess.run([*traced_argv(strace, ["/bin/true"], os.devnull)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return said[-1] if said else f"exit {done.returncode}"
    return None


def traced_argv(strace: str, argv: list[str], trace_file: str) -> list[str]:
    """`argv` run under `strace`, its trace written to `trace_file`. The process started
    becomes the command itself (`-DD`: strace traces it from a grandchild in a process group
    of its own), so farmer waits for the command, not for strace, which would wait for
    whatever the command left running in the background; farmer then kills that group as
    for any command, and strace ends once nothing it traces is left (`written`). It
    prints nothing of its own but errors (`-qq`, no signals)."""
    return [strace, "-DD", "-f", "-qq", "--seccomp-bpf", "-y", "-e", "signal=none",
            "-e", "trace=" + ",".join(SYSCALLS), "-o", trace_file, "--", *argv]


def written(trace_file: str) -> bool:
    """Whether strace is done with `trace_file`: no process has it open for writing (it
    ended once the command and all it left had ended). Asked with a read lease, which the
    kernel grants only on a file that no one has open for writing; True too when the file
    is missing (nothing to wait for) or leases are not to be had there."""
    import fcntl

    try:
        fd = os.open(trace_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return True
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True
    except OSError as e:
        return e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK)
    finally:
        os.close(fd)


# -- reading a trace ----------------------------------------------------------------------------

_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "\\": 92, '"': 34,
            "'": 39, "<": 60, ">": 62}
_OCTAL = "01234567"
_HEX = "0123456789abcdefABCDEF"


def unquote(text: str) -> str:
    """strace's C-style escapes (`\\n`, `\\"`, `\\303\\251`, `\\x41`, `\\76` in a `<path>`)
    undone; the bytes read back as a path (`os.fsdecode`)."""
    if "\\" not in text:
        return text
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 == n:
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        c = text[i + 1]
        if c in _OCTAL:
            j = i + 1
            while j < n and j < i + 4 and text[j] in _OCTAL:
                j += 1
            out.append(int(text[i + 1:j], 8) & 0xFF)
            i = j
        elif c == "x" and i + 3 < n + 1 and text[i + 2:i + 4] and all(h in _HEX for h in text[i + 2:i + 4]):
            out.append(int(text[i + 2:i + 4], 16))
            i += 4
        else:
            out.append(_ESCAPES.get(c, ord(c) if c.isascii() else 63))
            i += 2
    return os.fsdecode(bytes(out))


def split_call(text: str) -> tuple[str, list[str], str] | None:
    """`name(arg, arg, ...) = result` -> (name, the arguments as printed, the result); None
    for anything else (a signal, an exit, a line cut short). Commas, parentheses and
    brackets inside quoted strings, `<path>`s, arrays and structures are part of their
    argument."""
    open_at = text.find("(")
    if open_at <= 0 or not text[:open_at].isidentifier():
        return None
    args: list[str] = []
    depth, start, i, n = 0, open_at + 1, open_at + 1, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "<" and i > start and text[i - 1] not in " ,":  # a descriptor's `<path>`
            while i < n and text[i] != ">":
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                last = text[start:i].strip()
                if last or args:
                    args.append(last)
                rest = text[i + 1:].lstrip()
                if not rest.startswith("="):
                    return None
                return text[:open_at], args, rest[1:].strip()
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return None


def _string(arg: str) -> str | None:
    """A quoted string argument's text; None when it is not one (NULL, an address)."""
    if len(arg) >= 2 and arg[0] == '"':
        end = arg.rfind('"')
        if end > 0:
            return unquote(arg[1:end])
    return None


def _fd_path(arg: str) -> str | None:
    """The path strace printed for a descriptor, `3</a/b>` or `AT_FDCWD</a>`; None without."""
    at = arg.find("<")
    if at <= 0 or not arg.endswith(">"):
        return None
    return unquote(arg[at + 1:-1])


def _result(result: str) -> tuple[int | None, str | None]:
    """A call's result: (its value, or None when it failed or is not a number; the path of
    the descriptor it returned, if printed: `3</a/b>`)."""
    end = 0
    while end < len(result) and result[end] not in " <":
        end += 1
    try:
        value = int(result[:end], 0)
    except ValueError:
        return None, None
    if value < 0:
        return None, None
    path = None
    if result[end:end + 1] == "<":
        i = end + 1
        while i < len(result) and result[i] != ">":
            i += 2 if result[i] == "\\" else 1
        path = unquote(result[end + 1:i])
    return value, path


class Reader:
    """A trace read line by line (`feed`), into `accesses`. `cwd`: the working directory of
    the first process, which the others inherit until told otherwise; `within`: the path
    prefixes (each ending in "/") of the accesses to keep (None: all)."""

    __slots__ = ("accesses", "cwd", "within", "_cwds", "_pending")

    def __init__(self, cwd: str, within: tuple[str, ...] | None = None) -> None:
        self.accesses: list[Access] = []
        self.cwd = cwd
        self.within = within
        self._cwds: dict[str, str] = {}  # pid -> working directory, where it differs from `cwd`'s
        self._pending: dict[str, str] = {}  # pid -> a call's first half (`<unfinished ...>`)

    def _elsewhere(self, pid: str, text: str) -> bool:
        """Whether `text`, a whole `openat(AT_FDCWD<DIR>, ...)` line, opened nothing within
        the prefixes kept, read without splitting its arguments: most of a compile's trace is
        the system's headers and libraries, looked for (failing) and opened (outside)."""
        eq = text.find(") = ")
        if eq < 0 or text.find(") = ", eq + 4) >= 0:
            return False
        if pid not in self._cwds:  # (a process whose start was not seen: where it is)
            gt = text.find(">, ", 16)
            if gt < 0:
                return False
            self._cwds[pid] = unquote(text[16:gt])
        result = text[eq + 4:]
        if result[:1] == "-":
            return True  # failed
        lt, end = result.find("<"), result.rfind(">")
        return 0 < lt < end and not unquote(result[lt + 1:end]).startswith(self.within)  # type: ignore[arg-type]

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        pid, _, text = line.partition(" ")
        if not pid.isdigit():  # a trace of one process: no pid column
            pid, text = "", line
        text = text.lstrip()
        if self.within is not None and text.startswith("openat(AT_FDCWD<") and self._elsewhere(pid, text):
            return
        if text.endswith("<unfinished ...>"):
            self._pending[pid] = text[:-len("<unfinished ...>")].rstrip()
            return
        if text.startswith("<..."):
            first = self._pending.pop(pid, None)
            close = text.find(" resumed>")
            if first is None or close < 0:
                return
            rest = text[close + len(" resumed>"):]
            text = first + (rest if first.endswith("(") or rest.startswith(")") else ", " + rest.lstrip(", "))
        call = split_call(text)
        if call is not None:
            self._call(pid, *call)

    def _dir_of(self, pid: str, fd_arg: str | None) -> str:
        """The directory a path relative to `fd_arg` (a dirfd as printed; None: the working
        directory) is relative to."""
        if fd_arg is not None:
            path = _fd_path(fd_arg)
            if path is not None:
                if fd_arg.startswith("AT_FDCWD"):
                    self._cwds[pid] = path  # strace just said where it is
                return path
        return self._cwds.get(pid, self.cwd)

    def _path(self, pid: str, fd_arg: str | None, arg: str) -> str | None:
        name = _string(arg)
        if name is None:
            return None
        return os.path.normpath(os.path.join(self._dir_of(pid, fd_arg), name))

    def _add(self, kind: str, path: str | None) -> None:
        if path is not None and (self.within is None or path.startswith(self.within)):
            self.accesses.append(Access(kind, path))

    def _call(self, pid: str, name: str, args: list[str], result: str) -> None:
        if args and args[0].startswith("AT_FDCWD<"):  # where it is, whatever the call did
            self._dir_of(pid, args[0])
        value, returned = _result(result)
        if value is None:
            return  # failed (ENOENT and the like) or never returned: touched nothing
        if name in ("open", "openat", "openat2", "creat"):
            at = 1 if name in ("openat", "openat2") else 0
            if len(args) <= at:
                return
            flags = "O_WRONLY|O_CREAT|O_TRUNC" if name == "creat" else (args[at + 1] if len(args) > at + 1 else "")
            if "O_DIRECTORY" in flags or "O_PATH" in flags:
                return
            path = os.path.normpath(returned) if returned and returned.startswith("/") else \
                self._path(pid, args[0] if at else None, args[at])
            if path is None:
                return
            writes = "O_WRONLY" in flags or "O_RDWR" in flags or "O_CREAT" in flags or "O_TRUNC" in flags
            if not writes or "O_RDWR" in flags and "O_TRUNC" not in flags and "O_EXCL" not in flags:
                self._add(READ, path)  # (read and written in place: both; O_EXCL made it new)
            if writes:
                self._add(WRITE, path)
        elif name in ("execve", "execveat"):
            if name == "execveat":
                self._add(READ, self._path(pid, args[0], args[1]) if len(args) > 1 else None)
            elif args:
                self._add(READ, self._path(pid, None, args[0]))
        elif name in ("rename", "renameat", "renameat2"):
            if name == "rename" and len(args) >= 2:
                old, new = self._path(pid, None, args[0]), self._path(pid, None, args[1])
            elif len(args) >= 4:
                old, new = self._path(pid, args[0], args[1]), self._path(pid, args[2], args[3])
            else:
                return
            if len(args) > 4 and "RENAME_EXCHANGE" in args[4]:
                self._add(WRITE, old)
            else:
                self._add(REMOVE, old)
            self._add(WRITE, new)
        elif name in ("link", "symlink"):
            if len(args) >= 2:
                self._add(WRITE, self._path(pid, None, args[1]))
        elif name == "linkat":
            if len(args) >= 4:
                self._add(WRITE, self._path(pid, args[2], args[3]))
        elif name == "symlinkat":
            if len(args) >= 3:
                self._add(WRITE, self._path(pid, args[1], args[2]))
        elif name == "truncate":
            if args:
                self._add(WRITE, self._path(pid, None, args[0]))
        elif name == "unlink":
            if args:
                self._add(REMOVE, self._path(pid, None, args[0]))
        elif name == "unlinkat":
            if len(args) >= 2 and not (len(args) > 2 and "AT_REMOVEDIR" in args[2]):
                self._add(REMOVE, self._path(pid, args[0], args[1]))
        elif name == "chdir":
            if args:
                path = self._path(pid, None, args[0])
                if path is not None:
                    self._cwds[pid] = path
        elif name == "fchdir":
            if args:
                path = _fd_path(args[0])
                if path is not None:
                    self._cwds[pid] = path
        elif name in ("clone", "clone3", "fork", "vfork") and value > 0:
            # the parent's half: the child starts where the parent is
            self._cwds[str(value)] = self._cwds.get(pid, self.cwd)


def parse(lines, cwd: str, within: tuple[str, ...] | None = None) -> list[Access]:
    """The accesses of a trace's `lines` (strace -f -y's), in order; `cwd`: the working
    directory the traced command started in; `within`: the prefixes (each ending in "/") of
    the paths to keep (None: all)."""
    reader = Reader(cwd, within)
    for line in lines:
        reader.feed(line)
    return reader.accesses


def touched(accesses: list[Access]) -> tuple[list[str], list[str]]:
    """What a run read and wrote, by its accesses in order: (the files it read before it
    wrote, renamed or removed them itself: what it read that was there before it, in the
    order first read; every file it wrote, created or renamed into place, sorted). A file it
    wrote and then read is its own, not an input; whether a file written is still there at
    the end (a temporary file is not an output) is the caller's to look."""
    first: dict[str, str] = {}
    written: set[str] = set()
    for access in accesses:
        first.setdefault(access.path, access.kind)
        if access.kind == WRITE:
            written.add(access.path)
    return [p for p, kind in first.items() if kind == READ], sorted(written)
