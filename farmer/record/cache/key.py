"""The cache key: what a computation is looked up and stored by (SPEC §5).

A computation is keyed by its **action description**, a canonical list of everything the
up-to-date rule (§2) compares, plus what §2 leaves to the user but a shared cache cannot:

| part | what | why |
| --- | --- | --- |
| format | `farmer-cache-v1` | a new format disowns every older entry |
| action | kind (`cmd`/`python`), the expanded command or python line, the task's `env`, the declared outputs, the depfile path, a ninja rspfile's path and content | §2's action fingerprint |
| world | the world fingerprint (parent, setup lines, world inputs' digests, world env, Python version) | §2 |
| inputs | every declared input's path (relative to the project root) and content digest, in declared order | §2 |
| inherited env | the value of each variable named in `[cache] env` (unset and empty differ) | commands see the whole environment; only these are keyed |
| programs | for a `cmd`, the first word of each simple command (`gcc` in `FOO=1 gcc -c a.c && ar ...`, and `ar`) resolved on the `PATH` the command gets, with the digest of that file (shell builtins as `builtin`, unknown ones as `missing`); for a `python` task, the interpreter's digest | a compiler upgrade is a miss (ccache's compiler_check) |
| platform | `sys.platform`, the machine (`x86_64`), and for python tasks the Python version, `reads` and the module search path (`import_roots`) | outputs of one OS or ISA are not another's; a python entry names what the step read, found where this environment finds its imports |

Never in it: the absolute project path (a Farmfile's paths are relative to its root and its
commands run there, so another checkout elsewhere has the same key), `PATH` itself (what it
selects is keyed, by digest), time stamps, `cost`/`cpus`/`pool`/`timeout`, undeclared
inputs, variables not named in `[cache] env`.

**Discovered inputs: the two-level key** (ccache's direct mode): a depfile's, and the files a
python step imported or opened (and its world's set-up did). The description
above, with declared inputs only, gives the first-level key (`ActionDescription.key`). It
names the entries of recent *variants*: each holds the discovered paths with the digests
they had when it was stored, and its own key (`variant_key`) digests the first-level key and
that list. A lookup is a hit only for a variant whose every listed file has that digest now.
A computation with neither has one variant, with an empty list.

A remote cache maps the same description onto a REAPI Action (SHA-256) from
`ActionDescription.parts()`, or digests `canonical()` with its own hash.
"""

from __future__ import annotations

import os
import sys

from xxhash import xxh3_128_hexdigest

from farmer.files.shellwords import REDIRECTS, tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Computation

FORMAT = "farmer-cache-v1"

# Words in command position that are no program on PATH: the shell's keywords and the
# builtins POSIX requires or every sh has.
_KEYWORDS = {"if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until", "do",
             "done", "in", "!", "{", "}", "time", "function"}
_BUILTINS = {"cd", "export", "set", "unset", "exit", "return", "eval", "exec", "source", ".",
             ":", "true", "false", "test", "[", "echo", "printf", "read", "shift", "trap",
             "umask", "wait", "alias", "type", "command", "builtin", "local", "readonly",
             "getopts", "hash", "ulimit", "pwd", "kill", "break", "continue", "times"}


class ActionDescription:
    """Everything a computation's cache key is made of (see the module's docstring)."""

    __slots__ = ("kind", "action", "env", "outputs", "depfile", "rspfile", "rspfile_content",
                 "world", "inputs", "inherited", "programs", "platform", "workdir")

    def __init__(self, kind: str, action: str, env: dict[str, str], outputs: list[str],
                 depfile: str | None, rspfile: str | None, rspfile_content: str | None,
                 world: str | None, inputs: list[tuple[str, str]],
                 inherited: list[tuple[str, str | None]], programs: list[tuple[str, str]],
                 platform: list[str], workdir: str | None = None) -> None:
        self.kind, self.action, self.env, self.outputs = kind, action, env, outputs
        self.depfile, self.rspfile, self.rspfile_content = depfile, rspfile, rspfile_content
        self.world = world  # the world fingerprint, for a task that runs in a world
        self.inputs = inputs  # declared inputs: (path, digest), in declared order
        self.inherited = inherited  # `[cache] env`: (name, value or None when unset)
        self.programs = programs  # (word as written, digest | "builtin" | "missing")
        self.platform = platform
        self.workdir = workdir  # the directory debug information names (see debug_workdir)

    def parts(self) -> list[tuple[str, list[str]]]:
        """The description as labelled lists of strings, in a fixed order."""
        return [
            ("format", [FORMAT]),
            ("action", [self.kind, self.action]),
            ("env", [f"{k}={v}" for k, v in sorted(self.env.items())]),
            ("outputs", list(self.outputs)),
            ("depfile", [self.depfile or ""]),
            ("rspfile", [self.rspfile, self.rspfile_content or ""] if self.rspfile else []),
            ("world", [self.world or ""]),
            ("inherited", [name if value is None else f"{name}={value}" for name, value in self.inherited]),
            ("programs", [f"{word}={digest}" for word, digest in self.programs]),
            ("platform", list(self.platform)),
            ("inputs", [f"{path}={digest}" for path, digest in self.inputs]),
            *([("workdir", [self.workdir])] if self.workdir is not None else []),
        ]

    def canonical(self) -> bytes:
        """The bytes the key digests: each label and list, NUL-separated, a count before
        each list (so no two descriptions give the same bytes)."""
        out: list[str] = []
        for label, values in self.parts():
            out.append(f"{label}:{len(values)}")
            out.extend(values)
        return "\0".join(out).encode("utf-8", "surrogateescape")

    def key(self) -> str:
        """The first-level key (xxh3-128 of `canonical()`)."""
        return xxh3_128_hexdigest(self.canonical())


def variant_key(key1: str, discovered: list[tuple[str, str]]) -> str:
    """The key of one variant: the first-level key and the discovered inputs' digests."""
    text = "\0".join([key1, *(f"{path}={digest}" for path, digest in discovered)])
    return xxh3_128_hexdigest(text.encode("utf-8", "surrogateescape"))


def uncacheable(comp: Computation) -> str | None:
    """Why `comp` is never restored nor stored, or None when it may be."""
    if comp.kind is None or not comp.outputs:
        return "it has no outputs"
    if comp.always:
        return "always = true"
    if not comp.cache:
        return "cache = false"
    if comp.ninja is not None and comp.ninja.generator:
        return "it regenerates the manifest"
    return None  # (a run with an output missing, which ninja allows, is not stored)


def describe(comp: Computation, world: str | None, inputs: list[tuple[str, str]],
             inherited_names: list[str], programs: Programs,
             environ: dict[str, str] | os._Environ = os.environ) -> ActionDescription:
    """The description of `comp` about to run with `inputs` (declared, with digests)."""
    platform = [sys.platform, os.uname().machine]
    if comp.kind == "python":
        # "reads": its entries name what the step read (run/worlds/reads.py); entries of
        # farmers that did not record it name nothing, and are no hit for this one.
        platform += [sys.version, "reads", *import_roots(os.getcwd())]
        used = [("python3", programs.interpreter())]
    else:
        path = comp.env.get("PATH", environ.get("PATH", os.defpath))
        used = [(word, programs.digest(word, path)) for word in command_words(comp.action or "")]
    inherited = [(name, environ.get(name)) for name in inherited_names]
    edge = comp.ninja
    rspfile, rspfile_content = (None, None) if edge is None else (edge.rspfile, edge.rspfile_content)
    workdir = debug_workdir(comp.action, os.getcwd()) if comp.kind == "cmd" and comp.action else None
    return ActionDescription(comp.kind or "", comp.action or "", comp.env, comp.outputs,
                             comp.depfile, rspfile, rspfile_content, world, inputs,
                             inherited, used, platform, workdir)


def import_roots(root: str) -> list[str]:
    """Where a python step's imports are looked up besides its own folder: farmer's module
    search path (the steps run with farmer's interpreter and environment: `PYTHONPATH`, the
    standard library, site-packages) but its first entry, farmer's own folder; an entry
    inside `root` relative to it. An entry names the files an import finds: a variant lists
    a module it read by its path, and two virtual environments of one machine hold two
    versions of a package at two paths that both exist."""
    inside = root.rstrip(os.sep) + os.sep
    return [os.path.relpath(p, root) if p.startswith(inside) else p for p in sys.path[1:] if p]


_PREFIX_MAPS = ("-fdebug-prefix-map=", "-ffile-prefix-map=")
_PWD = {"$PWD", "${PWD}", "$(pwd)", "`pwd`"}  # (quotes are gone from a token: "$PWD" is $PWD)


def debug_workdir(command: str, cwd: str) -> str | None:
    """The working directory as the debug information a compile writes names it, when it writes
    any (a `-g` option whose last is not `-g0`): `cwd`, or what the last `-fdebug-prefix-map=`
    or `-ffile-prefix-map=` whose OLD holds `cwd` (`$PWD` is `cwd`) maps it to; None without -g.

    Such an output names the directory it was compiled in (DW_AT_comp_dir), which no path in
    the command shows: keyed, an object compiled in one checkout is never restored into another
    that would name its own directory (ccache's hash_dir). `-ffile-prefix-map=$PWD=.` maps it
    away, and the key then holds `.`: every checkout shares the object."""
    if "-g" not in command:
        return None
    debug, mapped = False, cwd
    for token, is_operator in tokens(command):
        if is_operator:
            continue
        if token == "-g0":
            debug = False
        elif token == "-g" or token in ("-g1", "-g2", "-g3") or token.startswith(("-ggdb", "-gdwarf", "-gstabs")):
            debug = True
        elif token.startswith(_PREFIX_MAPS):
            old, sep, new = token.split("=", 1)[1].partition("=")
            old = cwd if old in _PWD else old.rstrip("/") or "/"
            if sep and (cwd == old or cwd.startswith(old + "/") or old == "/"):
                mapped = new + cwd[len(old):]
    return mapped if debug else None


class Programs:
    """Programs resolved on PATH and digested, each once per build."""

    __slots__ = ("_digest_of", "_known")

    def __init__(self, digest_of: Callable[[str], str | None]) -> None:
        self._digest_of = digest_of  # a file's content digest, None when it is missing
        self._known: dict[tuple[str, str], str] = {}

    def digest(self, word: str, path: str) -> str:
        known = self._known.get((word, path))
        if known is None:
            known = self._known[(word, path)] = self._resolve(word, path)
        return known

    def interpreter(self) -> str:
        return self.digest(sys.executable, "")

    def _resolve(self, word: str, path: str) -> str:
        if word in _BUILTINS:
            return "builtin"
        if "$" in word or "`" in word or "*" in word:
            return "dynamic"  # known only when the shell expands it
        if "/" in word:
            candidates = [word]
        else:
            candidates = [os.path.join(d or ".", word) for d in path.split(os.pathsep)]
        for candidate in candidates:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                try:
                    digest = self._digest_of(candidate)
                except Exception:  # not a regular file after all, unreadable: not keyed by content
                    digest = None
                return digest or "unreadable"
        return "missing"


def command_words(command: str) -> list[str]:
    """The first word of each simple command in a shell command line, in order, without
    repeats: what the shell looks up on PATH (assignments, keywords and redirections
    skipped). Quoting is honoured; expansions are not performed."""
    words: list[str] = []
    expect, redirect = True, False
    for token, is_operator in tokens(command):
        if is_operator:
            if token in REDIRECTS:
                redirect = True
            else:
                expect = True
            continue
        if redirect:  # the file a redirection names
            redirect = False
            continue
        if not expect:
            continue
        if token in _KEYWORDS:
            continue
        eq = token.find("=")
        if eq > 0 and (token[:eq].replace("_", "a").isalnum() and not token[0].isdigit()):
            continue  # NAME=value before the command
        expect = False
        if token not in words:
            words.append(token)
    return words
