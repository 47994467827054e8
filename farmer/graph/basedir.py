"""The base directory (`--base-dir`, `FARMER_BASE_DIR`): absolute paths under it, in a
build.ninja's compile and link commands, made relative to the build directory (ccache's
`base_dir`, recc's `RECC_PROJECT_ROOT`; docs/remote.md, "Absolute paths in CMake manifests").

CMake writes `cc -I/home/me/proj/include -c /home/me/proj/src/a.c`: the checkout's path is in
the command, so two checkouts never share a cache entry, and no worker has those files. With a
base directory `/home/me/proj` and the build directory `/home/me/proj/build`, that command is
rewritten, when the manifest is read, into `cc -I../include -c ../src/a.c`, and the source it
names is the input `../src/a.c`. The rewritten command is the one that is keyed *and* the one
that runs, here and on a worker: what it writes (`__FILE__`, debug line tables) names the
relative paths, the same in every checkout, so an object restored into another checkout is the
object that checkout would have compiled. (A key of the relative form over a run of the
absolute one would hand a checkout objects naming another's directory.)

What is rewritten is chosen so that a rewrite never changes what a command means:

* only commands whose every program is a C/C++ compiler driver (`cc`, `gcc`, `c++`, `clang++`,
  `x86_64-linux-gnu-gcc-12`...), `ar`, `ranlib`, `ld`, `:`, or `cmake -E` copying, making or
  removing files, and that have no `cd` but a leading `cd BUILD_DIR &&` (CMake's custom
  commands): a relative path means the same only to a program that does not change directory,
  and only these are known not to embed a path they are given in what they write for later use;
* only a word that starts with the base path (a source, `-o PATH`, `-I PATH`), or an option
  that takes a path glued to it (`-I`, `-isystem`, `-iquote`, `-idirafter`, `-L`, `-MF`,
  `-MT`, `-o`, `-include`, `@FILE`...); never `-Wl,...` nor the word after `-Xlinker` or
  `-rpath` (a run-time library path must stay absolute), never `-DNAME=/path` (a program that
  reads a file at that path later would look for it relative to where it runs); in
  `-f...-prefix-map=OLD=NEW` (OLD is matched against absolute paths) only an OLD that is the
  build directory, which becomes `"$PWD"`: the shell gives it the directory the compiler runs in,
  here or on a worker;
* a path is under the base when it is the base or starts with it and `/` (`/x/src` is not
  under `/x/sr`): the base as given, or its real path (symlinks resolved). The relative path
  climbs from the build directory's real path to the deepest directory it shares with the path
  (no higher than the base), then follows the rest as written (`..` in it kept), so the kernel
  walks the same directories as for the absolute one, and the path does not depend on how far
  above the checkout the base is.

A command that is not rewritten keeps its absolute paths: it is keyed with them (shared only
between checkouts at one path) and runs locally, never a wrong output.
"""

from __future__ import annotations

import os

from farmer.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Graph

ENV = "FARMER_BASE_DIR"
AUTO = "auto"

# Programs whose relative path arguments mean what the absolute ones did.
_COMPILER = r"(?:[\w.+-]+-)?(?:cc|c\+\+|gcc|g\+\+|clang|clang\+\+|cpp)(?:-[\d.]+)?"
_TOOLS = {"ar", "ranlib", "ld", "ld.bfd", "ld.gold", "ld.lld", "gcc-ar", "gcc-ranlib", "llvm-ar", "llvm-ranlib",
          "ccache", ":", "true"}
_DIR_CHANGERS = {"cd", "pushd", "popd"}
# `cmake -E` commands that only copy, make or remove the files they are given (not
# create_symlink: a relative link target means another file than an absolute one).
_CMAKE_FILE_COMMANDS = {"copy", "copy_if_different", "copy_directory", "make_directory", "rm", "remove",
                        "remove_directory", "touch", "touch_nocreate", "rename"}
# Options that take a path glued to them, longest first (-isystem before -I is by case: -i...).
_GLUED = ("-iwithprefixbefore", "-iwithprefix", "-idirafter", "-isystem", "-iprefix", "-imacros", "-include",
          "-iquote", "-MF", "-MT", "-MQ", "-I", "-L", "-F", "-B", "-o", "@")
# Words after which the next word is not a path to rewrite (it is a run-time library path).
_NOT_AFTER = {"-Xlinker", "-rpath", "-R"}
_END = set(" \t\n'\";&|()<>")  # what may follow a path's last character
_SPACE = set(" \t\n;&|()<>")  # what separates words


class BaseDir:
    """A base directory for a build directory: `given` as the user wrote it (absolute, no
    trailing `/`), `real` its real path, `workdir` the build directory's real path relative to
    `real` ("" when they are one)."""

    __slots__ = ("given", "real", "workdir")

    def __init__(self, given: str, real: str, workdir: str) -> None:
        self.given, self.real, self.workdir = given, real, workdir

    def __repr__(self) -> str:
        return f"BaseDir({self.given!r}, real={self.real!r}, workdir={self.workdir!r})"

    def tag(self) -> str:
        """What distinguishes this base directory's rewrite from another's (for the no-op proof)."""
        return f"{self.given}\0{self.real}\0{self.workdir}"

    def _prefixes(self) -> list[str]:
        return sorted({self.given, self.real}, key=len, reverse=True)

    def _match(self, text: str, i: int) -> tuple[int, str] | None:
        """At text[i], a path under the base: (where its rewritten part ends, its replacement)."""
        for prefix in self._prefixes():
            if not text.startswith(prefix, i):
                continue
            j = i + len(prefix)
            if j < len(text) and text[j] != "/" and text[j] not in _END:
                continue  # /x/srcfoo is not under /x/src
            # The directories it shares with the build directory's path are not climbed out
            # of and back into: the build directory's path is real (no symlink in it), so
            # `../lib` from /x/src/build is /x/src/lib as surely as ../../src/lib is.
            parts = self.workdir.split("/") if self.workdir else []
            shared = 0
            for part in parts:
                k = j + 1 + len(part)
                if not (text.startswith("/" + part, j) and (k == len(text) or text[k] == "/" or text[k] in _END)):
                    break
                j, shared = k, shared + 1
            return j, "/".join([".."] * (len(parts) - shared)) or "."
        return None

    def relative(self, path: str) -> str:
        """A normalised path, absolute under the base, as a path from the build directory
        (normalised: `../src/a.c`, `gen/x.h`); any other path as it is."""
        if not path.startswith("/"):
            return path
        found = self._match(path, 0)
        if found is None:
            return path
        end, replacement = found
        return os.path.normpath(replacement + path[end:])

    def root_path(self, path: str) -> str | None:
        """Where `path` (relative to the build directory, or absolute) is in an input root
        rooted at the base (normalised, relative to it); None when it is outside the base."""
        if path.startswith("/"):
            for prefix in self._prefixes():
                if path == prefix or path.startswith(prefix + "/"):
                    rest = os.path.normpath(path[len(prefix) + 1:] or ".")
                    return None if _climbs(rest) or rest == "." else rest
            return None
        rest = os.path.normpath(os.path.join(self.workdir, path) if self.workdir else path)
        return None if _climbs(rest) or rest == "." else rest

    def names_base(self, command: str) -> bool:
        """Whether the command still names the base (or the build directory) by an absolute path."""
        return any(p in command for p in self._prefixes())

    def rewrite(self, command: str) -> str:
        """The command with the paths under the base that it may rewrite made relative (the
        module's docstring says which); the command itself when it may not be rewritten."""
        if not self.names_base(command) or not rewritable(command, self):
            return command
        out: list[str] = []
        i, n = 0, len(command)
        previous = ""  # the previous word, to skip the one after -Xlinker/-rpath
        while i < n:
            if command[i] in _SPACE:
                out.append(command[i])
                i += 1
                continue
            start = i
            while i < n and command[i] not in _SPACE:  # one word (quotes only at its ends matter here)
                if command[i] == "\\" and i + 1 < n:
                    i += 1
                i += 1
            word = command[start:i]
            if previous not in _NOT_AFTER:
                word = self._rewrite_word(word)
            out.append(word)
            previous = command[start:i].strip("'\"")
        return "".join(out)

    def _rewrite_word(self, word: str) -> str:
        if word.startswith(_PREFIX_MAPS):
            return self._rewrite_prefix_map(word)
        head = 0
        while head < len(word) and word[head] in "'\"":
            head += 1
        found = self._match(word, head) if word.startswith("/", head) else None
        if found is None:
            for option in _GLUED:
                if word.startswith(option, head):
                    at = head + len(option)
                    while at < len(word) and word[at] in "'\"":
                        at += 1
                    if word.startswith("/", at):
                        found = self._match(word, at)
                        head = at
                    break
        if found is None:
            return word
        end, replacement = found
        return word[:head] + replacement + word[end:]


    def _rewrite_prefix_map(self, word: str) -> str:
        """`-ffile-prefix-map=OLD=NEW` with OLD the build directory: OLD becomes `"$PWD"`,
        which the shell makes the directory the compiler runs in (here or on a worker), the one
        the option has to match (the compiler compares it with absolute paths: a relative OLD
        would match nothing); any other OLD is left as written."""
        option, _, rest = word.partition("=")
        old, sep, new = rest.partition("=")
        if not sep:
            return word
        found = self._match(old, 0) if old.startswith("/") else None
        if found is None or found[0] != len(old) or found[1] != ".":
            return word
        return f'{option}="$PWD"={new}'


_PREFIX_MAPS = ("-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=")


def _climbs(path: str) -> bool:
    return path == ".." or path.startswith("../")


def rewritable(command: str, base: BaseDir | None = None) -> bool:
    """Whether every program the command runs is one whose relative path arguments mean what
    its absolute ones did (a compiler, an archiver, a linker, `cmake -E` copying or removing
    files), and it changes no directory (a leading `cd` into the build directory itself, as
    CMake writes its custom commands, changes none)."""
    commands = simple_commands(command)
    if commands and commands[0][:1] == ["cd"] and base is not None and len(commands[0]) == 2 \
            and base.relative(commands[0][1]) == ".":
        commands = commands[1:]
    if not commands:
        return False
    for words in commands:
        name = words[0].rsplit("/", 1)[-1]
        if name == "cmake":
            if words[1:2] != ["-E"] or len(words) < 3 or words[2] not in _CMAKE_FILE_COMMANDS:
                return False
        elif name in _DIR_CHANGERS or not (name in _TOOLS or compiler_name(name)):
            return False
    return True


def compiler_name(name: str) -> bool:
    """Whether a program's file name is a C/C++ compiler driver's (`cc`, `gcc-12`, `clang++`...)."""
    import re

    return re.fullmatch(_COMPILER, name) is not None


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command of a shell line (assignments before it and the files
    of redirections left out, quotes removed), in order."""
    from farmer.files.shellwords import REDIRECTS, tokens

    out: list[list[str]] = []
    words: list[str] = []
    redirect = False
    for token, is_operator in tokens(command):
        if is_operator:
            if token in REDIRECTS:
                redirect = True
                continue
            if words:
                out.append(words)
            words = []
            continue
        if redirect:
            redirect = False
            continue
        eq = token.find("=")
        if not words and eq > 0 and token[:eq].replace("_", "a").isalnum() and not token[0].isdigit():
            continue  # NAME=value before the command
        words.append(token)
    if words:
        out.append(words)
    return out


def resolve(setting: str | None, cwd: str, source: str = "--base-dir") -> BaseDir | None:
    """The base directory of the build directory `cwd` for a setting (`--base-dir`, else
    FARMER_BASE_DIR): None for none (or ""); UsageError for one that cannot be used."""
    if not setting:
        return None
    if setting == AUTO:
        setting = cmake_base(cwd, source)
    if not setting.startswith("/"):
        raise UsageError(f"{source} {setting}: not an absolute path; name the directory that holds "
                         f"the sources and the build directory, e.g. {source} $HOME/proj, or auto")
    given = setting.rstrip("/") or "/"
    if given == "/":
        raise UsageError(f"{source} /: the base directory cannot be / (system headers would be "
                         "rewritten too); name the project's directory")
    real = os.path.realpath(given)
    if not os.path.isdir(real):
        raise UsageError(f"{source} {setting}: no such directory")
    here = os.path.realpath(cwd)
    if here != real and not here.startswith(real + "/"):
        raise UsageError(f"{source} {setting}: the build directory {cwd} is not under it; name a "
                         "directory that holds both the sources and the build directory")
    return BaseDir(given, real, "" if here == real else here[len(real) + 1:])


def cmake_base(cwd: str, source: str = "--base-dir") -> str:
    """`auto`: the deepest directory holding the CMake build directory `cwd` and its source
    directory (CMakeCache.txt's CMAKE_HOME_DIRECTORY)."""
    home = build = None
    try:
        with open(os.path.join(cwd, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    home = line.split("=", 1)[1].rstrip("\n")
                elif line.startswith("CMAKE_CACHEFILE_DIR:"):
                    build = line.split("=", 1)[1].rstrip("\n")
    except OSError:
        raise UsageError(f"{source} auto: no CMakeCache.txt in {cwd} (not a CMake build directory); "
                         f"name the base directory") from None
    if not home or not home.startswith("/"):
        raise UsageError(f"{source} auto: {cwd}/CMakeCache.txt has no CMAKE_HOME_DIRECTORY; name the base directory")
    return os.path.commonpath([home, build if build and build.startswith("/") else cwd])


def setting(flag: str | None, environ=os.environ) -> tuple[str | None, str]:
    """The base directory setting and where it came from: --base-dir, else FARMER_BASE_DIR."""
    if flag is not None:
        return flag, "--base-dir"
    return environ.get(ENV) or None, ENV


def rebase(graph: Graph, base: BaseDir) -> int:
    """Rewrite the graph's commands (and recompute their action fingerprints), and name the
    source files under the base (inputs no computation makes) by their relative paths, so the
    inputs in a key are the checkout's layout, not its place. The number of commands rewritten."""
    from farmer.graph.graph import action_fingerprint

    produced = graph.producer
    names: dict[str, str] = {}
    rewritten = 0
    for comp in graph.computations:
        if comp.inputs:
            comp.inputs = [_renamed(p, base, produced, names) for p in comp.inputs]
        if comp.kind != "cmd" or not comp.action or (comp.ninja is not None and comp.ninja.generator):
            continue
        action = base.rewrite(comp.action)
        # CMake names a custom command's outputs twice, `version.h | /abs/build/version.h`:
        # one file, kept under its relative name (the absolute one still finds its producer)
        outputs = [o for o in comp.outputs if not (o.startswith("/") and base.relative(o) in comp.outputs)]
        if action != comp.action or outputs != comp.outputs:
            comp.action, comp.outputs = action, outputs
            comp.fingerprint = action_fingerprint(comp)
            rewritten += 1
    return rewritten


def _renamed(path: str, base: BaseDir, produced: dict[str, int], names: dict[str, str]) -> str:
    if not path.startswith("/") or path in produced:
        return path
    name = names.get(path)
    if name is None:
        name = names[path] = base.relative(path)
    return name


def tagged(digest: str, base: BaseDir | None) -> str:
    """A manifest's digest with the base directory setting in it: a no-op proof taken with one
    setting is not one for another (the commands differ). `tagged(tagged(d, a), b)` is
    `tagged(d, b)`: the stamp of the last build holds the digest with that build's setting."""
    digest = digest.split("+", 1)[0]
    if base is None:
        return digest
    from farmer.files.digests import hash_text

    return f"{digest}+{hash_text('base-dir', base.tag())[:16]}"
