"""The ninja manifest parser: statements, scopes, rules, pools and build edges.

Semantics follow ninja's manual (and ninja 1.11 where the manual is silent):

* A top-level `name = value` is evaluated at once in the file's scope. `include` reads a
  file into the current scope; `subninja` reads it into a child scope, whose variables and
  rules shadow the parent's without changing them.
* A rule's variables are kept unevaluated and evaluated per build edge, late (after the
  whole manifest is read), in the edge's environment: `$in`, `$out`, `$in_newline`, then
  the edge's own bindings, then the rule's, then the file scopes outwards.
* A build edge's own bindings are evaluated at once in the file scope (so one binding
  does not see another), and its paths in the edge's scope.
* Paths are canonicalised like ninja: `.` components and doubled slashes go, `x/..`
  folds; every path is relative to the directory of the top manifest (ninja's working
  directory), in included files too.
"""

from __future__ import annotations

import os
import time

from farmer.errors import UsageError
from farmer.files.digests import stat_key, xxhash  # xxhash's extension module (farmer/startup/extension.py)
from farmer.manifest import ninja_lexer as lx
from farmer.manifest.ninja_lexer import EvalString, Lexer, evaluate, is_empty

SUPPORTED_VERSION = (1, 11)
RULE_KEYS = {"command", "depfile", "dyndep", "description", "deps", "generator", "pool",
             "restat", "rspfile", "rspfile_content", "msvc_deps_prefix"}
_MAX_INCLUDE_DEPTH = 64


class Scope:
    """A file scope: variables, rules and the enclosing scope (for subninja)."""

    __slots__ = ("vars", "rules", "parent")

    def __init__(self, parent: Scope | None = None) -> None:
        self.vars: dict[str, str] = {}
        self.rules: dict[str, Rule] = {}
        self.parent = parent

    def lookup(self, name: str) -> str:
        scope: Scope | None = self
        while scope is not None:
            value = scope.vars.get(name)
            if value is not None:
                return value
            scope = scope.parent
        return ""

    def rule(self, name: str) -> Rule | None:
        scope: Scope | None = self
        while scope is not None:
            rule = scope.rules.get(name)
            if rule is not None:
                return rule
            scope = scope.parent
        return None


class Rule:
    __slots__ = ("name", "bindings")

    def __init__(self, name: str, bindings: dict[str, EvalString]) -> None:
        self.name = name
        self.bindings = bindings


PHONY = Rule("phony", {})


class Edge:
    __slots__ = ("rule", "outs", "explicit_outs", "ins", "explicit_ins", "implicit_ins",
                 "validations", "scope", "lexer", "pos")

    def __init__(self, rule: Rule, outs: list[str], explicit_outs: int, ins: list[str],
                 explicit_ins: int, implicit_ins: int, validations: list[str], scope: Scope,
                 lexer: Lexer, pos: int) -> None:
        self.rule = rule
        self.outs = outs  # canonical; explicit outputs first, then implicit ones
        self.explicit_outs = explicit_outs
        self.ins = ins  # explicit, then implicit, then order-only inputs
        self.explicit_ins = explicit_ins
        self.implicit_ins = implicit_ins
        self.validations = validations
        self.scope = scope  # the edge's own bindings (or the file scope when it has none)
        self.lexer = lexer  # of the file it is in, and where in it: for `where`, made when needed
        self.pos = pos

    @property
    def where(self) -> str:
        """FILE:LINE of the build statement."""
        return f"{self.lexer.filename}:{self.lexer.line_of(self.pos)}"

    @property
    def order_only(self) -> list[str]:
        return self.ins[self.explicit_ins + self.implicit_ins:]

    @property
    def is_phony(self) -> bool:
        return self.rule is PHONY


class Manifest:
    __slots__ = ("path", "root", "edges", "producer", "nodes", "pools", "defaults",
                 "has_default", "files", "digest", "names", "stats", "warnings")

    def __init__(self, path: str, root: str) -> None:
        self.path = path  # the top manifest, absolute
        self.root = root  # its directory: where commands run and paths start
        self.edges: list[Edge] = []
        self.producer: dict[str, int] = {}  # path -> edge index
        self.nodes: set[str] = set()  # every path any statement named
        self.pools: dict[str, int] = {}
        self.defaults: list[str] = []
        self.has_default = False
        self.files: list[str] = []  # every manifest file read, in order
        self.digest = ""  # of every manifest file's name and bytes, in the order read
        self.names: set[str] = set()  # every variable name bound anywhere
        self.stats: list[tuple[str, tuple, int]] = []  # (path, stat, when), per file
        self.warnings: list[str] = []


def canonical(path: str) -> str:
    """A path as ninja canonicalises it: no `.` components, no doubled slashes, `x/..`
    folded (lexically, as ninja does); `""` stays empty (callers report it)."""
    if "//" not in path and "/." not in path and not path.startswith(".") and not path.endswith("/"):
        return path
    if not path:
        return path
    norm = os.path.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm


_SHELL_SAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-./"


def shell_escape(path: str) -> str:
    """A path as ninja puts it in a command: as is when every character is known to be safe
    for /bin/sh, else in single quotes."""
    if not path.strip(_SHELL_SAFE):
        return path
    return "'" + path.replace("'", "'\\''") + "'"


def _parse_version(text: str) -> tuple[int, int]:
    parts = text.split(".")
    nums = []
    for p in parts[:2]:
        digits = ""
        for c in p:
            if not c.isdigit():
                break
            digits += c
        nums.append(int(digits) if digits else 0)
    while len(nums) < 2:
        nums.append(0)
    return nums[0], nums[1]


class Parser:
    def __init__(self, manifest: Manifest) -> None:
        self.m = manifest
        self._stack: list[str] = []
        self._hash = xxhash.xxh3_128()

    # -- files ----------------------------------------------------------------------------

    def load(self, name: str, scope: Scope, parent: Lexer | None = None) -> None:
        path = os.path.join(self.m.root, name)  # (`name` itself when absolute)
        if len(self._stack) >= _MAX_INCLUDE_DEPTH or name in self._stack:
            raise parent.error(f"include cycle: {' -> '.join(self._stack + [name])}")
        try:
            st = os.stat(path)  # before reading: a change after it shows in the next stat
            taken = time.time_ns()
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            reason = e.strerror or str(e)
            if parent is None:
                raise UsageError(f"{name}: cannot read the ninja manifest: {reason}") from None
            raise parent.error(f"loading '{name}': {reason}") from None
        self.m.files.append(name)
        self.m.stats.append((path, stat_key(st), taken))
        self._hash.update(name.encode("utf-8", "surrogateescape") + b"\0")
        self._hash.update(raw)
        self._hash.update(b"\0")
        self._stack.append(name)
        try:
            lexer = Lexer(name, raw.decode("utf-8", "surrogateescape"))
            self.parse(lexer, scope)
            lexer.marks = b""  # the edges keep their lexer for line numbers, not its marks
        finally:
            self._stack.pop()

    def parse(self, lexer: Lexer, scope: Scope) -> None:
        while True:
            kind, _ = lexer.read_token()
            if kind == lx.BUILD:
                self._edge(lexer, scope)
            elif kind == lx.RULE:
                self._rule(lexer, scope)
            elif kind == lx.IDENT:
                lexer.unread()
                start = lexer.last
                name, value = self._let(lexer)
                text = evaluate(value, scope.lookup)
                if name == "ninja_required_version":
                    self._check_version(lexer, text, start)
                scope.vars[name] = text
                self.m.names.add(name)
            elif kind == lx.NEWLINE:
                pass
            elif kind == lx.EOF:
                return
            elif kind == lx.DEFAULT:
                self._default(lexer, scope)
            elif kind == lx.POOL:
                self._pool(lexer, scope)
            elif kind == lx.INCLUDE or kind == lx.SUBNINJA:
                self._include(lexer, scope, kind == lx.SUBNINJA)
            else:
                raise lexer.error(f"unexpected {lx.describe(kind)}")

    def _check_version(self, lexer: Lexer, text: str, pos: int) -> None:
        need = _parse_version(text)
        have = SUPPORTED_VERSION
        if need[0] > have[0] or (need[0] == have[0] and need[1] > have[1]):
            raise lexer.error(
                f"ninja_required_version {text} is newer than the ninja language farmer reads "
                f"({have[0]}.{have[1]})", pos)

    def _let(self, lexer: Lexer) -> tuple[str, EvalString]:
        name = lexer.read_ident()
        if name is None:
            raise lexer.error("expected variable name")
        lexer.expect(lx.EQUALS)
        return name, lexer.read_value()

    # -- statements -----------------------------------------------------------------------

    def _rule(self, lexer: Lexer, scope: Scope) -> None:
        name = lexer.read_ident()
        if name is None:
            raise lexer.error("expected rule name")
        lexer.expect(lx.NEWLINE)
        if name in scope.rules:
            raise lexer.error(f"duplicate rule '{name}'")
        bindings: dict[str, EvalString] = {}
        while lexer.peek(lx.INDENT):
            key, value = self._let(lexer)
            if key not in RULE_KEYS:
                raise lexer.error(f"unexpected variable '{key}'")
            bindings[key] = value
        self.m.names.update(bindings)
        if is_empty(bindings.get("rspfile", [""])) != is_empty(bindings.get("rspfile_content", [""])):
            raise lexer.error("rspfile and rspfile_content need to be both specified")
        if is_empty(bindings.get("command", [""])):
            raise lexer.error("expected 'command =' line")
        scope.rules[name] = Rule(name, bindings)

    def _pool(self, lexer: Lexer, scope: Scope) -> None:
        name = lexer.read_ident()
        if name is None:
            raise lexer.error("expected pool name")
        lexer.expect(lx.NEWLINE)
        if name in self.m.pools:
            raise lexer.error(f"duplicate pool '{name}'")
        depth = -1
        while lexer.peek(lx.INDENT):
            key, value = self._let(lexer)
            if key != "depth":
                raise lexer.error(f"unexpected variable '{key}'")
            text = evaluate(value, scope.lookup).strip()
            try:
                depth = int(text)
            except ValueError:
                raise lexer.error(f"invalid pool depth '{text}'") from None
            if depth < 0:
                raise lexer.error("invalid pool depth")
        if depth < 0:
            raise lexer.error("expected 'depth =' line")
        self.m.pools[name] = depth

    def _default(self, lexer: Lexer, scope: Scope) -> None:
        value = lexer.read_path()
        if is_empty(value):
            raise lexer.error("expected target name")
        while True:
            path = canonical(evaluate(value, scope.lookup))
            if not path:
                raise lexer.error("empty path")
            if path not in self.m.nodes:
                raise lexer.error(f"unknown target '{path}'")
            self.m.defaults.append(path)
            value = lexer.read_path()
            if is_empty(value):
                break
        self.m.has_default = True
        lexer.expect(lx.NEWLINE)

    def _include(self, lexer: Lexer, scope: Scope, new_scope: bool) -> None:
        value = lexer.read_path()
        name = evaluate(value, scope.lookup)
        if not name:
            raise lexer.error("expected path")
        # Read the rest of the line first: an error in it belongs to this file.
        lexer.expect(lx.NEWLINE)
        self.load(name, Scope(scope) if new_scope else scope, lexer)

    def _paths(self, lexer: Lexer, into: list[EvalString]) -> int:
        n = 0
        while True:
            value = lexer.read_path()
            if is_empty(value):
                return n
            into.append(value)
            n += 1

    def _edge(self, lexer: Lexer, scope: Scope) -> None:
        start = lexer.last
        outs: list[EvalString] = []
        explicit_outs = self._paths(lexer, outs)
        if lexer.peek(lx.PIPE):
            self._paths(lexer, outs)
        if not outs:
            raise lexer.error("expected path")
        lexer.expect(lx.COLON)
        rule_name = lexer.read_ident()
        if rule_name is None:
            raise lexer.error("expected build command name")
        rule = scope.rule(rule_name)
        if rule is None:
            raise lexer.error(f"unknown build rule '{rule_name}'")
        ins: list[EvalString] = []
        explicit_ins = self._paths(lexer, ins)
        implicit_ins = 0
        if lexer.peek(lx.PIPE):
            implicit_ins = self._paths(lexer, ins)
        if lexer.peek(lx.PIPE2):
            self._paths(lexer, ins)
        validations: list[EvalString] = []
        if lexer.peek(lx.PIPEAT):
            self._paths(lexer, validations)
        lexer.expect(lx.NEWLINE)

        edge_scope = scope
        if lexer.peek(lx.INDENT):
            # Bindings are evaluated in the file scope: one does not see another.
            edge_scope = Scope(scope)
            while True:
                key, value = self._let(lexer)
                edge_scope.vars[key] = evaluate(value, scope.lookup)
                self.m.names.add(key)
                if not lexer.peek(lx.INDENT):
                    break

        m = self.m
        lookup = edge_scope.lookup
        edge_index = len(m.edges)

        def paths(values: list[EvalString]) -> list[str]:
            out = []
            for v in values:
                p = canonical(evaluate(v, lookup))
                if not p:
                    raise lexer.error("empty path", start)
                out.append(p)
            return out

        out_paths = paths(outs)
        in_paths = paths(ins)
        valid_paths = paths(validations)
        seen: set[str] = set()
        for p in out_paths:
            if p in m.producer or p in seen:
                raise lexer.error(f"multiple rules generate {p}", start)
            seen.add(p)
        if rule is PHONY and len(out_paths) == 1 and implicit_ins == 0 and out_paths[0] in in_paths:
            # CMake 2.8.12/3.0 wrote `build a: phony ... a ...`; ninja drops the self-reference.
            me = out_paths[0]
            m.warnings.append(f"{lexer.filename}:{lexer.line_of(start)}: phony target '{me}' "
                              "names itself as an input; ignoring")
            explicit_ins -= in_paths[:explicit_ins].count(me)
            in_paths = [p for p in in_paths if p != me]
        for p in out_paths:
            m.producer[p] = edge_index
        m.nodes.update(out_paths)
        m.nodes.update(in_paths)
        m.nodes.update(valid_paths)
        m.edges.append(Edge(rule, out_paths, explicit_outs, in_paths, explicit_ins, implicit_ins,
                            valid_paths, edge_scope, lexer, start))


def parse_manifest(path: str) -> Manifest:
    """Read the manifest at `path` (absolute, as `farmer.build.ninja.absolute` makes it, and what
    it includes) into edges, pools and defaults."""
    manifest = Manifest(path=path, root=os.path.dirname(path))
    top = Scope()
    top.rules["phony"] = PHONY
    parser = Parser(manifest)
    parser.load(os.path.basename(path), top)
    manifest.digest = parser._hash.hexdigest()
    return manifest
