"""The package's import structure, read from the source with ``ast``: no cycle, no private import.

The graph has one node per module of ``src/heuresis`` (a package is its ``__init__``) and an
edge for every ``import`` and ``from ... import`` of another module of the package, wherever it
stands: at module level, inside a function (a deferred import still makes a cycle, only a later
one) or under ``if TYPE_CHECKING``. ``from a import b`` is an edge to ``a.b`` when ``b`` is a
module, else to ``a``. Python runs a package's ``__init__`` before its submodules, but that
implicit step is not an edge (every package that re-exports its submodules would be a cycle);
what an import names is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest
from conftest import ROOT

PACKAGE = ROOT / "src" / "heuresis"


def _modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package) for every ``.py`` file under ``package``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _imports(name: str, path: Path, is_package: bool, modules) -> list[tuple[str, str, int]]:
    """(imported module, imported name or "", line) for each import of a package module in ``path``."""

    def known(target: str) -> str | None:   # the longest prefix that is a module of the package
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    here = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(t, "", node.lineno) for a in node.names if (t := known(a.name))]
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: from . import x, from ..y import z
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for a in node.names:
                sub = f"{source}.{a.name}"
                target = sub if sub in modules else known(source)
                if target:
                    out.append((target, "" if target == sub else a.name, node.lineno))
    return [(t, n, line) for t, n, line in out if t != name]


def import_graph(package: Path = PACKAGE) -> nx.DiGraph:
    """The package's import graph; each edge keeps the lines and names of its imports."""
    modules = _modules(package)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, (path, is_package) in modules.items():
        for target, imported, line in _imports(name, path, is_package, modules):
            if not graph.has_edge(name, target):
                graph.add_edge(name, target, lines=[], names=[])
            graph.edges[name, target]["lines"].append(line)
            if imported:
                graph.edges[name, target]["names"].append(imported)
    return graph


def _describe(graph: nx.DiGraph, cycle: list[str]) -> str:
    steps = [f"{a} (line {graph.edges[a, b]['lines'][0]}) -> {b}" for a, b in zip(cycle, [*cycle[1:], cycle[0]])]
    return "; ".join(steps)


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """The graph builder finds module-level, function-level, relative and submodule imports."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")
    (pkg / "b.py").write_text("from pkg import sub\nimport pkg.c\n\ndef g():\n    pass\n")
    (pkg / "c.py").write_text("from .sub.d import _hidden\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "d.py").write_text("from ..a import f\n_hidden = 1\n")
    graph = import_graph(pkg)
    assert set(graph.edges) == {("pkg.a", "pkg.b"), ("pkg.b", "pkg.sub"), ("pkg.b", "pkg.c"),
                                ("pkg.c", "pkg.sub.d"), ("pkg.sub.d", "pkg.a")}
    assert graph.edges["pkg.c", "pkg.sub.d"]["names"] == ["_hidden"]
    assert [sorted(c) for c in nx.simple_cycles(graph)] == [["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d"]]


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert graph.number_of_nodes() > 50 and graph.number_of_edges() > 100   # the real package was read
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"{len(cycles)} import cycles, e.g. " + _describe(graph, min(cycles, key=len))


def test_no_module_imports_a_private_name_of_another():
    graph = import_graph()
    private = [f"{a} imports {n} from {b} (line {graph.edges[a, b]['lines'][0]})" for a, b in graph.edges
               for n in graph.edges[a, b]["names"] if n.startswith("_") and not n.startswith("__")]
    assert not private, private


@pytest.mark.parametrize("stage", [*(f"stages.{s}" for s in ("instances", "references", "headroom", "verification",
                                                              "episodes", "leakage", "saturation", "repairs")),
                                   "games.workflow"])
def test_each_stage_checks_its_own_config_section(stage):
    """Validation collects each stage's ``config_errors``; it imports no other part of a stage.

    A stage package's ``config_errors`` may be defined in one of its modules and re-exported.
    """
    from heuresis.config.validation import STAGE_CHECKS

    assert any(m == f"heuresis.{stage}" or m.startswith(f"heuresis.{stage}.") for m in {c.__module__ for c in STAGE_CHECKS})
    graph = import_graph()
    assert graph.edges["heuresis.config.validation", f"heuresis.{stage}"]["names"] in ([], ["config_errors"])


def test_config_loading_depends_on_no_other_module():
    """Every stage imports heuresis.config.loading; it imports nothing of the package."""
    assert not list(import_graph().successors("heuresis.config.loading"))


# The package's layers, lowest first: a module may import its own layer and the layers below it,
# never one above. The agent protocol (the classes and the registry an agent plugs into) sits
# below the harness, which drives an agent it is handed; the agent implementations sit above it.
# The games track spans the layers: its simulation core (the hidden SCMs, scenarios, the game
# itself) is a causal building block, its tools extend the harness's, its offline players are
# agents, and its plays, judgements and tables are a stage.
GAMES_CORE = ["heuresis.games.scm", "heuresis.games.design", "heuresis.games.causalgame", "heuresis.games.scenario",
              "heuresis.games.reading", "heuresis.games.references", "heuresis.games.game"]
LAYERS = {
    "base": ["heuresis.registry", "heuresis.config.loading", "heuresis.config.settings"],
    "causal": ["heuresis.causal", *GAMES_CORE],
    "artifacts": ["heuresis.artifacts"],
    "agent protocol": ["heuresis.agents.base", "heuresis.agents.spec"],
    "harness": ["heuresis.harness", "heuresis.games.tools"],
    "agents": ["heuresis.agents", "heuresis.games.agents"],
    "stages": ["heuresis.stages", "heuresis.games", "heuresis.view"],
    "targets": ["heuresis.targets"],
    "config": ["heuresis.config"],
    "application": ["heuresis.cli", "heuresis.local_server"],
}


def layer_of(module: str) -> int:
    """The layer of a module: the longest prefix listed in LAYERS wins (agents.base before agents)."""
    if module == "heuresis":   # the package itself: __version__ and the causal layer's re-exports
        return list(LAYERS).index("causal")
    best, rank = "", -1
    for i, prefixes in enumerate(LAYERS.values()):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, i
    if rank < 0:
        raise KeyError(f"{module} is in no layer of LAYERS (tests/test_structure.py)")
    return rank


def test_the_layers_are_ordered_and_name_every_module():
    graph = import_graph()
    modules = [m for m in graph.nodes if m != "heuresis"]   # the package's docstring and re-exports: the map
    assert len(modules) > 80
    assert {layer_of(m) for m in modules} == set(range(len(LAYERS)))   # every layer holds a module
    assert layer_of("heuresis.agents.base") < layer_of("heuresis.harness.loop") < layer_of("heuresis.agents.llm")


def test_no_import_climbs_to_a_higher_layer():
    graph = import_graph()
    names = list(LAYERS)
    climbing = [f"{a} ({names[layer_of(a)]}, line {graph.edges[a, b]['lines'][0]}) imports {b} ({names[layer_of(b)]})"
                for a, b in graph.edges if a != "heuresis" and layer_of(b) > layer_of(a)]
    assert not climbing, climbing


def test_the_layer_check_catches_a_climbing_import(tmp_path):
    """A stand-in package whose causal module imports a stage: the check names it."""
    pkg = tmp_path / "heuresis"
    for sub in ("causal", "stages"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "stages" / "headroom.py").write_text("X = 1\n")
    (pkg / "causal" / "graph.py").write_text("from heuresis.stages.headroom import X\n")
    graph = import_graph(pkg)
    edges = [(a, b) for a, b in graph.edges if layer_of(b) > layer_of(a)]
    assert edges == [("heuresis.causal.graph", "heuresis.stages.headroom")]


def test_the_package_docstring_names_every_subpackage_and_top_level_module():
    import heuresis

    tops = {p.stem for p in PACKAGE.iterdir() if (p.suffix == ".py" and p.stem != "__init__")
            or (p.is_dir() and (p / "__init__.py").exists())}
    missing = sorted(t for t in tops if f"``{t}``" not in (heuresis.__doc__ or ""))
    assert not missing, f"the package docstring (the map) does not name: {missing}"


def test_the_harness_is_handed_its_agent():
    """No harness module builds an agent: the episodes stage makes it and hands it to ``run_episode``."""
    graph = import_graph()
    builds = [(a, b) for a, b in graph.edges if a.startswith("heuresis.harness")
              and "make_agent" in graph.edges[a, b]["names"]]
    assert not builds, builds
    assert "make_agent" in graph.edges["heuresis.stages.episodes", "heuresis.agents.base"]["names"]


#: Modules of an optional extra that src/ may import, each with its distribution and extra. They are
#: imported only inside a function (the code path that needs the extra), never when a module loads.
EXTRA_IMPORTS = {"llama_cpp": ("llama-cpp-python", "local")}


def _requirement_names(reqs) -> set[str]:
    import re

    return {re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\[ ]", r.strip(), maxsplit=1)[0]).lower() for r in reqs}


def test_every_third_party_import_is_a_runtime_dependency_or_a_lazy_extra():
    """What a plain install lacks is never imported when a module loads; every other import is declared."""
    import re
    import sys
    import tomllib
    from importlib.metadata import packages_distributions

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = _requirement_names(project["dependencies"])
    extras = {name: _requirement_names(reqs) for name, reqs in project["optional-dependencies"].items()}
    dists = packages_distributions()
    undeclared, eager = [], []
    for path in sorted((ROOT / "src" / "heuresis").rglob("*.py")):
        tree = ast.parse(path.read_text())
        in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - {"heuresis", *sys.stdlib_module_names}:
                where = f"{path.relative_to(ROOT)}:{node.lineno} imports {top}"
                if top in EXTRA_IMPORTS:
                    dist, extra = EXTRA_IMPORTS[top]
                    assert dist in extras[extra], f"{dist} is not in the [{extra}] extra"
                    if id(node) not in in_function:
                        eager.append(where)
                    continue
                found = {re.sub(r"[-_.]+", "-", d).lower() for d in dists.get(top, [])}
                if not found & runtime:
                    undeclared.append(f"{where} ({sorted(found) or 'not installed'})")
    assert not undeclared, undeclared
    assert not eager, eager
