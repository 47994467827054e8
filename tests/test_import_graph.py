"""No import circle among farmer's modules, counting every import: at module top, inside a
function and under `if TYPE_CHECKING:`."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "farmer"
def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
def import_graph() -> nx.DiGraph:
    paths = [p for p in PACKAGE.rglob("*.py") if "protos" not in p.parts]
    modules = {_module(p) for p in paths}
    graph = nx.DiGraph()
    for path in paths:
        here = _module(path)
        graph.add_node(here)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != here and name.startswith("farmer") and name != "farmer":
                    graph.add_edge(here, name)
    return graph
def test_no_import_circles():
    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert circles == [], f"import circles (lazy and type-only imports counted): {circles}"


# The packages from the bottom up, as the data flows: each imports only those before it
# (errors.py and __main__ stand apart). `startup` comes first: `files` loads xxhash through
# it. `store` (state.db, the proof) is read by `plan` and written by `record`; `run` sits
# under `plan`, whose prediction runs the real scheduler on a simulated clock.
LAYERS = ["startup", "files", "manifest", "graph", "store", "run", "plan", "record", "remote",
          "report", "build", "cli"]

# The imports that still go up, each with why it stays.
UPWARD = {
    ("farmer.files.confine", "farmer.graph.graph"): "for typing only: the check reads computations' outputs",
    ("farmer.files.lock", "farmer.run.worlds.sweep"):
        "the lock sweeps what a killed holder's worlds left, imported only when their mark is found",
    ("farmer.record.engine", "farmer.build.request"):
        "for typing only: the engines read the build's options, a BuildRequest",
    ("farmer.plan.session", "farmer.report.console"):
        "the session renders last-build.json's tasks beside the proof (to move with the Workspace)",
}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 2 else None


def test_lower_packages_never_import_higher_ones():
    graph = import_graph()
    assert {m.split(".")[1] for m in graph if len(m.split(".")) > 2} == set(LAYERS)
    upward = {(a, b) for a, b in graph.edges()
              if _layer(a) is not None and _layer(b) is not None and _layer(a) < _layer(b)}
    assert upward == set(UPWARD), f"imports up the layers {LAYERS}: {sorted(upward - set(UPWARD))}; " \
                                  f"listed but gone: {sorted(set(UPWARD) - upward)}"


def test_the_module_map_names_every_module():
    """docs/README.md's module map has a line for every file of farmer/ (generated protos
    aside), and names no file that is gone."""
    import re

    text = (PACKAGE.parent / "docs" / "README.md").read_text()
    table = text[text.index("## Module map"):]
    named = {name for row in re.findall(r"^\| (.*?) \|", table, re.M)
             for name in re.findall(r"`([\w/]+\.py)`", row)}
    files = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if "protos" not in p.parts and p.name != "__init__.py"}
    assert sorted(files - named) == [], "files missing from docs/README.md's module map"
    assert sorted(named - files) == [], "files named in docs/README.md's module map that are gone"
