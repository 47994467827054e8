"""ninja's dyndep files (ninja >= 1.10): what a build statement learns once another edge has
written the file its `dyndep = FILE` names.

    ninja_dyndep_version = 1
    build OUT | IMPLICIT_OUTS: dyndep | IMPLICIT_INS
      restat = 1

Each statement names one build statement by an output (`OUT`, which must be one of its
outputs), and adds implicit outputs and implicit inputs to it; `restat = 1` turns restat on.
CMake writes one per target for Fortran modules (and for C++20 modules), Meson one per
Fortran target. `apply` folds what they say into a parsed manifest, which is then made into
a graph like any other (farmer/build/ninja_dyndep.py decides when each is read).
"""

from __future__ import annotations

from farmer.errors import UsageError
from farmer.manifest import ninja_lexer as lx
from farmer.manifest.ninja_lexer import Lexer, evaluate, is_empty
from farmer.manifest.ninja_parser import canonical

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.manifest.ninja_parser import Manifest


class Binding:
    """What one dyndep statement adds to the build statement that makes `output`."""

    __slots__ = ("output", "implicit_outs", "implicit_ins", "restat", "where")

    def __init__(self, output: str, implicit_outs: list[str], implicit_ins: list[str],
                 restat: bool, where: str) -> None:
        self.output, self.implicit_outs, self.implicit_ins = output, implicit_outs, implicit_ins
        self.restat, self.where = restat, where


def _no_variables(name: str) -> str:
    return ""


def parse(name: str, text: str) -> list[Binding]:
    """The statements of the dyndep file `name` (for errors) with content `text`."""
    lexer = Lexer(name, text)
    bindings: list[Binding] = []
    version_seen = False
    while True:
        kind, _ = lexer.read_token()
        if kind == lx.EOF:
            break
        if kind == lx.NEWLINE:
            continue
        if kind == lx.IDENT and not version_seen:
            lexer.unread()
            start = lexer.last
            key = lexer.read_ident()
            lexer.expect(lx.EQUALS)
            value = evaluate(lexer.read_value(), _no_variables)
            if key != "ninja_dyndep_version":
                raise lexer.error("expected 'ninja_dyndep_version = ...'", start)
            if value not in ("1", "1.0"):
                raise lexer.error(f"unsupported 'ninja_dyndep_version = {value}'", start)
            version_seen = True
            continue
        if not version_seen:
            raise lexer.error("expected 'ninja_dyndep_version = ...'")
        if kind != lx.BUILD:
            raise lexer.error(f"unexpected {lx.describe(kind)}")
        bindings.append(_statement(lexer))
    if not version_seen:
        raise UsageError(f"{name}: expected 'ninja_dyndep_version = ...'")
    return bindings


def _paths(lexer: Lexer) -> list[str]:
    out = []
    while True:
        value = lexer.read_path()
        if is_empty(value):
            return out
        out.append(canonical(evaluate(value, _no_variables)))


def _statement(lexer: Lexer) -> Binding:
    start = lexer.last
    where = f"{lexer.filename}:{lexer.line_of(start)}"
    outs = _paths(lexer)
    if len(outs) != 1:
        raise lexer.error("expected exactly one explicit output", start)
    implicit_outs = _paths(lexer) if lexer.peek(lx.PIPE) else []
    lexer.expect(lx.COLON)
    if lexer.read_ident() != "dyndep":
        raise lexer.error("expected build command name 'dyndep'", start)
    if _paths(lexer):
        raise lexer.error("explicit inputs not expected", start)
    implicit_ins = _paths(lexer) if lexer.peek(lx.PIPE) else []
    if lexer.peek(lx.PIPE2):
        raise lexer.error("order-only inputs not expected", start)
    lexer.expect(lx.NEWLINE)
    restat = False
    while lexer.peek(lx.INDENT):
        key = lexer.read_ident()
        lexer.expect(lx.EQUALS)
        value = evaluate(lexer.read_value(), _no_variables)
        if key != "restat":
            raise lexer.error(f"binding is not 'restat': {key}", start)
        restat = bool(value)
    return Binding(outs[0], implicit_outs, implicit_ins, restat, where)


def apply(manifest: Manifest, bindings: list[Binding]) -> set[int]:
    """Add what `bindings` (one dyndep file's) say to the manifest's edges (that each edge
    names that file is the caller's check); returns the indexes of the edges whose
    restat they turn on. Errors as ninja words them."""
    restat: set[int] = set()
    producer = manifest.producer
    for b in bindings:
        i = producer.get(b.output)
        if i is None:
            raise UsageError(f"{b.where}: no build statement exists for '{b.output}'")
        edge = manifest.edges[i]
        for p in b.implicit_outs:
            other = producer.get(p)
            if other is not None and other != i:
                raise UsageError(f"{b.where}: multiple rules generate {p}")
            if other is None:
                producer[p] = i
                edge.outs.append(p)
                manifest.nodes.add(p)
        at = edge.explicit_ins + edge.implicit_ins
        new = [p for p in b.implicit_ins if p not in edge.ins]
        edge.ins[at:at] = new
        edge.implicit_ins += len(new)
        manifest.nodes.update(new)
        if b.restat:
            restat.add(i)
    return restat
