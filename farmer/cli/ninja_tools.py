"""`farmer ninja -t TOOL`: ninja's tools, read from the manifest as ninja reads it (explicit,
implicit and order-only inputs apart, rules by name), printed in ninja's formats so that what
reads them (clangd's compile_commands.json, CMake's and Meson's calls at configure time,
scripts) reads farmer's the same. Each tool is a function of the parsed manifest and its
arguments; docs/ninja.md lists them."""

from __future__ import annotations

import json
import os
import sys

from farmer.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.manifest.ninja_parser import Edge, Manifest


class ToolError(Exception):
    """A tool's error: `ninja: error: MESSAGE`, exit 1."""


class Graph:
    """The manifest as the tools ask it: each path's producing edge, the edges that take it
    as an input, and commands evaluated as ninja evaluates them."""

    __slots__ = ("manifest", "edges", "producer", "consumers")

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.edges = manifest.edges
        self.producer = manifest.producer
        self.consumers: dict[str, list[int]] = {}
        for i, edge in enumerate(self.edges):
            for path in edge.ins:
                self.consumers.setdefault(path, []).append(i)

    def lookup(self, edge: Edge, var: str, escape: bool = True) -> str:
        from farmer.graph.ninja_edges import _EdgeEnv

        if edge.is_phony:
            return ""
        return _EdgeEnv(edge, escape).lookup(var)

    def command(self, edge: Edge, with_rspfile: bool = False) -> str:
        """`command`, and with `with_rspfile` `;rspfile=CONTENT` after it when the edge has
        one (what ninja's log hashes)."""
        command = self.lookup(edge, "command")
        if with_rspfile:
            content = self.lookup(edge, "rspfile_content")
            if content:
                command += ";rspfile=" + content
        return command

    def log(self, name: str) -> str:
        """Where ninja keeps its log `name` (.ninja_log, .ninja_deps): in `$builddir` when the
        manifest sets one."""
        scope = self.edges[0].scope if self.edges else None
        while scope is not None and scope.parent is not None:
            scope = scope.parent
        where = scope.vars.get("builddir", "") if scope is not None else ""
        return os.path.join(where, name) if where else name

    def roots(self) -> list[str]:
        """The outputs no edge takes as an input, in manifest order (ninja's root nodes)."""
        roots = [out for edge in self.edges for out in edge.outs if out not in self.consumers]
        if self.edges and not roots:
            raise ToolError("could not determine root nodes of build graph")
        return roots

    def targets(self, names: list[str]) -> list[str]:
        """Targets as ninja takes them (a path, `path^`); none: the defaults, else the roots."""
        from farmer.manifest.ninja_parser import canonical

        if not names:
            if self.manifest.has_default:
                return list(self.manifest.defaults)
            return self.roots()
        out = []
        for name in names:
            caret = name.endswith("^")
            path = canonical(name[:-1] if caret else name)
            if caret:
                users = self.consumers.get(path)
                if not users:
                    raise ToolError(f"'{path}' has no out edge")
                path = self.edges[users[0]].outs[0]
            elif path not in self.producer and path not in self.consumers:
                raise ToolError(f"unknown target '{path}'")
            out.append(path)
        return out


def _load(manifest_file: str) -> Graph:
    from farmer.build.ninja import absolute
    from farmer.manifest.ninja_parser import parse_manifest

    path = absolute(manifest_file)
    if not os.path.isfile(path):
        raise ToolError(f"loading '{manifest_file}': No such file or directory")
    return Graph(parse_manifest(path))


def _flags(args: list[str], letters: str, usage: str) -> tuple[set[str], list[str]]:
    """A tool's own short flags (getopt's way, flags first); -h or an unknown one: its usage."""
    flags: set[str] = set()
    rest = list(args)
    while rest and rest[0].startswith("-") and rest[0] != "-":
        arg = rest.pop(0)
        if arg == "--":
            break
        for c in arg[1:]:
            if c not in letters or c == "h":
                sys.stdout.write(usage)
                raise SystemExit(1)
            flags.add(c)
    return flags, rest


# -- the tools -------------------------------------------------------------------------

def tool_compdb(g: Graph, args: list[str]) -> int:
    """compile_commands.json: an object per edge with inputs, of the rules named (all without)."""
    flags, rules = _flags(args, "hx", "usage: ninja -t compdb [options] [rules]\n\noptions:\n"
                                      "  -x     expand @rspfile style response file invocations\n")
    directory = os.getcwd()
    objects = []
    for edge in g.edges:
        if not edge.ins or (rules and edge.rule.name not in rules):
            continue
        command = g.command(edge)
        if "x" in flags:
            command = _expand_rspfile(g, edge, command)
        objects.append("\n  {\n    \"directory\": " + _json(directory) + ",\n    \"command\": " + _json(command)
                       + ",\n    \"file\": " + _json(edge.ins[0]) + ",\n    \"output\": " + _json(edge.outs[0])
                       + "\n  }")
    sys.stdout.write("[" + ",".join(objects) + "\n]\n")
    return 0


def _json(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _expand_rspfile(g: Graph, edge: Edge, command: str) -> str:
    """`@rspfile` (or `-f rspfile`, `--option-file=rspfile`) in a command replaced by the
    file's content on one line, as compdb -x does."""
    rspfile = g.lookup(edge, "rspfile", escape=False)
    if not rspfile:
        return command
    at = command.find(rspfile)
    if at <= 0:
        return command
    content = g.lookup(edge, "rspfile_content").replace("\n", " ")
    for lead in ("@", "-f ", "--option-file="):
        if command[:at].endswith(lead):
            return command[:at - len(lead)] + content + command[at + len(rspfile):]
    return command


def tool_targets(g: Graph, args: list[str]) -> int:
    """targets [depth N | rule [R] | all]."""
    mode = args[0] if args else "depth"
    if mode == "all":
        for edge in g.edges:
            for out in edge.outs:
                print(f"{out}: {edge.rule.name}")
        return 0
    if mode == "rule":
        rule = args[1] if len(args) > 1 else ""
        if not rule:  # the source files: inputs nobody makes
            for edge in g.edges:
                for path in edge.ins:
                    if path not in g.producer:
                        print(path)
            return 0
        for out in sorted({out for edge in g.edges if edge.rule.name == rule for out in edge.outs}):
            print(out)
        return 0
    if mode != "depth":
        raise ToolError(f"unknown target tool mode '{mode}'")
    try:
        depth = int(args[1]) if len(args) > 1 else 1
    except ValueError:
        depth = 0
    lines: list[str] = []

    def walk(paths: list[str], depth: int, indent: int) -> None:
        for path in paths:
            i = g.producer.get(path)
            if i is None:
                lines.append("  " * indent + path)
                continue
            edge = g.edges[i]
            lines.append(f"{'  ' * indent}{path}: {edge.rule.name}")
            if depth > 1 or depth <= 0:
                walk(edge.ins, depth - 1, indent + 1)

    walk(g.roots(), depth, 0)
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def tool_commands(g: Graph, args: list[str]) -> int:
    """The commands that build the targets, inputs first (-s: only the targets' own)."""
    flags, names = _flags(args, "hs", "usage: ninja -t commands [options] [targets]\n\noptions:\n"
                                      "  -s     only print the final command to build [target], "
                                      "not the whole chain\n")
    seen: set[int] = set()
    out: list[str] = []

    def visit(i: int | None) -> None:
        if i is None or i in seen:
            return
        seen.add(i)
        edge = g.edges[i]
        if "s" not in flags:
            for path in edge.ins:
                visit(g.producer.get(path))
        if not edge.is_phony:
            out.append(g.command(edge))

    for target in g.targets(names):
        visit(g.producer.get(target))
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


def tool_inputs(g: Graph, args: list[str]) -> int:
    """Every input the targets need, transitively (sorted, each once)."""
    _, names = _flags(args, "h", "Usage '-t inputs [options] [targets]\n\nList all inputs used for a set "
                                 "of targets.\n")
    from farmer.manifest.ninja_parser import shell_escape

    seen: set[int] = set()
    found: set[str] = set()

    def visit(i: int | None) -> None:
        if i is None or i in seen:
            return
        seen.add(i)
        edge = g.edges[i]
        for path in edge.ins:
            visit(g.producer.get(path))
        if not edge.is_phony:
            found.update(shell_escape(p) for p in edge.ins)

    for target in g.targets(names):
        visit(g.producer.get(target))
    sys.stdout.write("".join(p + "\n" for p in sorted(found)))
    return 0


def _top_rules(g: Graph) -> dict:
    scope = g.edges[0].scope if g.edges else None
    while scope is not None and scope.parent is not None:
        scope = scope.parent
    rules = dict(scope.rules) if scope is not None else {}
    rules.setdefault("phony", None)
    return rules


def tool_rules(g: Graph, args: list[str]) -> int:
    """The rules, by name (-d: with their descriptions as written)."""
    flags, _ = _flags(args, "hd", "usage: ninja -t rules [options]\n\noptions:\n"
                                  "  -d     also print the description of the rule\n"
                                  "  -h     print this message\n")
    for name, rule in sorted(_top_rules(g).items()):
        line = name
        if "d" in flags and rule is not None and "description" in rule.bindings:
            line += ": " + _unparse(rule.bindings["description"])
        print(line)
    return 0


def _unparse(parts: list[str]) -> str:
    """An evaluated string as written: literal text and `${name}` in turn."""
    return "".join(part if k % 2 == 0 else "${" + part + "}" for k, part in enumerate(parts))


def tool_query(g: Graph, args: list[str]) -> int:
    """Each target's edge (rule, inputs marked | and ||, validations) and what uses it."""
    if not args:
        raise ToolError("expected a target to query")
    lines: list[str] = []
    for path in g.targets(args):
        lines.append(f"{path}:")
        i = g.producer.get(path)
        if i is not None:
            edge = g.edges[i]
            lines.append(f"  input: {edge.rule.name}")
            for k, p in enumerate(edge.ins):
                mark = "" if k < edge.explicit_ins else "| " if k < edge.explicit_ins + edge.implicit_ins else "|| "
                lines.append(f"    {mark}{p}")
            if edge.validations:
                lines.append("  validations:")
                lines.extend(f"    {p}" for p in edge.validations)
        lines.append("  outputs:")
        for j in g.consumers.get(path, ()):
            lines.extend(f"    {out}" for out in g.edges[j].outs)
        validated = [e for e in g.edges if path in e.validations]
        if validated:
            lines.append("  validation for:")
            lines.extend(f"    {out}" for e in validated for out in e.outs)
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def tool_graph(g: Graph, args: list[str]) -> int:
    """Graphviz dot of the targets' graph, as ninja draws it (a box per file, an ellipse per
    edge with several inputs or outputs)."""
    nodes: dict[str, int] = {}
    lines = ["digraph ninja {", 'rankdir="LR"', "node [fontsize=10, shape=box, height=0.25]",
             "edge [fontsize=10]"]
    seen: set[int] = set()

    def node(path: str) -> str:
        if path not in nodes:
            nodes[path] = len(nodes)
            lines.append(f'"n{nodes[path]}" [label={_json(path)}]')
        return f'"n{nodes[path]}"'

    def visit(path: str) -> None:
        target = node(path)
        i = g.producer.get(path)
        if i is None or i in seen:
            return
        seen.add(i)
        edge = g.edges[i]
        order_only = edge.explicit_ins + edge.implicit_ins  # where the order-only inputs start
        if len(edge.ins) == 1 and len(edge.outs) == 1:
            lines.append(f'{node(edge.ins[0])} -> {target} [label=" {edge.rule.name}"]')
        else:
            lines.append(f'"e{i}" [label="{edge.rule.name}", shape=ellipse]')
            lines.extend(f'"e{i}" -> {node(out)}' for out in edge.outs)
            for k, p in enumerate(edge.ins):
                dotted = " style=dotted" if k >= order_only else ""
                lines.append(f'{node(p)} -> "e{i}" [arrowhead=none{dotted}]')
        for p in edge.ins:
            visit(p)

    for target in g.targets(args):
        visit(target)
    lines.append("}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def tool_deps(g: Graph, args: list[str]) -> int:
    """What the deps log knows of each target (all it knows without targets)."""
    from farmer.store import ninja_log

    known = ninja_log.read_deps(g.log(ninja_log.DEPS))
    paths = g.targets(args) if args else [p for p in known if p in g.producer]
    lines: list[str] = []
    for path in paths:
        deps = known.get(path)
        if deps is None:
            lines.append(f"{path}: deps not found")
            continue
        mtime, inputs = deps
        try:
            now = os.stat(path).st_mtime_ns
        except OSError:
            now = 0
        lines.append(f"{path}: #deps {len(inputs)}, deps mtime {mtime} ({'STALE' if not now or now > mtime else 'VALID'})")
        lines.extend(f"    {p}" for p in inputs)
        lines.append("")
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def tool_missingdeps(g: Graph, args: list[str]) -> int:
    """Depfile inputs made by an edge that the reading edge does not reach through the
    manifest: built alone or early in a clean directory, it could read a missing or stale
    file. Exit 3 when there are any."""
    from farmer.build.ninja_logs import depfile_inputs
    from farmer.store import ninja_log

    known = ninja_log.read_deps(g.log(ninja_log.DEPS))
    seen: set[str] = set()
    reach: dict[tuple[int, int], bool] = {}
    report: list[str] = []
    missing_rules: list[set[str]] = []
    generated: set[str] = set()
    rules_used: set[str] = set()

    def reaches(source: int, to: int) -> bool:
        key = (source, to)
        if key not in reach:
            reach[key] = False  # (a cycle is no path)
            reach[key] = any(p == source or (p is not None and reaches(source, p))
                             for p in (g.producer.get(q) for q in g.edges[to].ins))
        return reach[key]

    def visit(path: str) -> None:
        i = g.producer.get(path)
        if i is None or path in seen:
            return
        seen.add(path)
        edge = g.edges[i]
        for p in edge.ins:
            visit(p)
        if g.lookup(edge, "deps", escape=False):
            deps = known.get(path, (0, []))[1]
        else:
            depfile = g.lookup(edge, "depfile", escape=False)
            deps = (depfile_inputs(depfile) or []) if depfile else []
        if "build.ninja" in deps:
            return
        makers = {g.producer[d] for d in deps if d in g.producer}
        names: set[str] = set()
        for m in sorted(makers):
            if not reaches(m, i):
                for d in deps:
                    if g.producer.get(d) == m:
                        report.append(f"Missing dep: {path} uses {d} (generated by {g.edges[m].rule.name})")
                        generated.add(d)
                        rules_used.add(g.edges[m].rule.name)
                        names.add(g.edges[m].rule.name)
        if names:
            missing_rules.append(names)

    for target in g.targets(args):
        visit(target)
    report.append(f"Processed {len(seen)} nodes.")
    if missing_rules:
        report.append(f"Error: There are {sum(len(n) for n in missing_rules)} missing dependency paths.")
        report.append(f"{len(missing_rules)} targets had depfile dependencies on {len(generated)} distinct "
                      f"generated inputs (from {len(rules_used)} rules)  without a non-depfile dep path to "
                      "the generator.")
        report.append("There might be build flakiness if any of the targets listed above are built alone, "
                      "or not late enough, in a clean output directory.")
    else:
        report.append("No missing dependencies on generated files found.")
    sys.stdout.write("".join(line + "\n" for line in report))
    return 3 if missing_rules else 0


def _remove(path: str) -> int:
    """1 when `path` was there and is gone (a directory too: CMake's custom targets)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
        return 1
    except FileNotFoundError:
        return 0
    except OSError as e:
        sys.stderr.write(f"ninja: error: remove({path}): {e.strerror}\n")
        return 0


def tool_clean(g: Graph, args: list[str]) -> int:
    """Remove the outputs of every edge but the generators' (-g: those too), of the targets
    and what they need, or (-r) of the rules named; depfiles and response files with them."""
    flags, names = _flags(args, "hgr", "usage: ninja -t clean [options] [targets]\n\noptions:\n"
                                      "  -g     also clean files marked as ninja generator output\n"
                                      "  -r     interpret targets as a list of rules to clean instead\n")
    if "r" in flags and not names:
        raise ToolError("expected a rule to clean")
    chosen: list[int] = []
    if "r" in flags:
        rules = set(names)
        known = _top_rules(g)
        for name in names:
            if name not in known:
                raise ToolError(f"unknown rule '{name}'")
        chosen = [i for i, e in enumerate(g.edges) if e.rule.name in rules]
    elif names:
        seen: set[int] = set()
        stack = [g.producer[t] for t in g.targets(names) if t in g.producer]
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            chosen.append(i)
            stack.extend(g.producer[p] for p in g.edges[i].ins if p in g.producer)
    else:
        chosen = [i for i, e in enumerate(g.edges)
                  if "g" in flags or not g.lookup(e, "generator", escape=False)]
    count = 0
    done: set[str] = set()
    for i in chosen:
        edge = g.edges[i]
        if edge.is_phony:
            continue
        files = list(edge.outs)
        for var in ("depfile", "rspfile"):
            extra = g.lookup(edge, var, escape=False)
            if extra:
                files.append(extra)
        for path in files:
            if path not in done:
                done.add(path)
                count += _remove(path)
    print(f"Cleaning... {count} files.")
    return 0


def clean_dead(g: Graph) -> int:
    """Remove the files the build log names that the manifest no longer does (the outputs of
    edges since removed); the number removed."""
    from farmer.store import ninja_log

    _, entries = ninja_log.read_log(g.log(ninja_log.LOG))
    count = 0
    for path in entries:
        if path in g.producer or path in g.consumers:
            continue
        count += _remove(path)
    return count


def tool_cleandead(g: Graph, args: list[str]) -> int:
    print(f"Cleaning... {clean_dead(g)} files.")
    return 0


def tool_recompact(g: Graph, args: list[str]) -> int:
    """The build log rewritten with one line per output, the latest, of outputs the manifest
    still names."""
    from farmer.store import ninja_log

    ninja_log.recompact(g.log(ninja_log.LOG), keep=lambda p: p in g.producer or p in g.consumers)
    return 0


def tool_restat(g: Graph, args: list[str]) -> int:
    """The build log's recorded mtimes made the files' own (of the outputs named, or all)."""
    from farmer.store import ninja_log

    ninja_log.restat(g.log(ninja_log.LOG), set(args) if args else None)
    return 0


TOOLS: dict[str, tuple[Callable[[Graph, list[str]], int] | None, str]] = {
    "clean": (tool_clean, "clean built files"),
    "cleandead": (tool_cleandead, "clean built files that are no longer produced by the manifest"),
    "commands": (tool_commands, "list all commands required to rebuild given targets"),
    "compdb": (tool_compdb, "dump JSON compilation database to stdout"),
    "deps": (tool_deps, "show dependencies stored in the deps log"),
    "graph": (tool_graph, "output graphviz dot file for targets"),
    "inputs": (tool_inputs, "list all inputs required to rebuild given targets"),
    "missingdeps": (tool_missingdeps, "check deps log dependencies on generated files"),
    "query": (tool_query, "show inputs/outputs for a path"),
    "recompact": (tool_recompact, "recompacts ninja-internal data structures"),
    "restat": (tool_restat, "restats all outputs in the build log"),
    "rules": (tool_rules, "list all rules"),
    "targets": (tool_targets, "list targets by their rule or depth in the DAG"),
}


def run_tool(name: str, manifest_file: str, args: list[str]) -> int:
    """`-t NAME ARGS` on the manifest `manifest_file` (in the working directory): the exit
    status ninja's tool would give."""
    if name == "list":
        sys.stdout.write("farmer-ninja subtools:\n" + "".join(f"{n:>11}  {help}\n" for n, (_, help) in TOOLS.items()))
        return 0
    tool = TOOLS.get(name)
    if tool is None:
        sys.stderr.write(f"ninja: error: unknown tool '{name}'\n")
        return 1
    try:
        g = _load(manifest_file)
        os.chdir(g.manifest.root)
        return tool[0](g, args)
    except (ToolError, UsageError) as e:
        sys.stderr.write(f"ninja: error: {e}\n")
        return 1
