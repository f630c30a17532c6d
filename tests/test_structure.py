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
                                   "stages.games.workflow"])
def test_each_stage_checks_its_own_config_section(stage):
    """Validation collects each stage's ``config_errors``; it imports no other part of a stage.

    A stage package's ``config_errors`` may be defined in one of its modules and re-exported.
    """
    from heuresis.preflight.validation import STAGE_CHECKS

    assert any(m == f"heuresis.{stage}" or m.startswith(f"heuresis.{stage}.") for m in {c.__module__ for c in STAGE_CHECKS})
    graph = import_graph()
    assert graph.edges["heuresis.preflight.validation", f"heuresis.{stage}"]["names"] in ([], ["config_errors"])


def test_config_loading_depends_on_no_other_module():
    """Every stage imports heuresis.config.loading; it imports nothing of the package."""
    assert not list(import_graph().successors("heuresis.config.loading"))


def package_layers(doc: str | None = None) -> list[list[str]]:
    """The layers of the package docstring, lowest first: each bullet's ````names```` before its dash.

    The folder list is the layer map: a bullet is one layer, and the names it lists before " — "
    are the folders and top-level modules in it.
    """
    import re

    import heuresis

    text = heuresis.__doc__ if doc is None else doc
    bullets = re.findall(r"^\* (.*?) — ", text or "", re.M)
    return [re.findall(r"``(\w+)``", b) for b in bullets]


def layer_of(module: str, layers: list[list[str]] | None = None, graph: nx.DiGraph | None = None) -> int:
    """The layer of a module: the layer whose bullet names its top-level folder or module.

    The package itself (``heuresis``: its docstring and its re-exports) takes the highest layer of
    what it imports.
    """
    layers = package_layers() if layers is None else layers
    parts = module.split(".")
    if len(parts) == 1:
        graph = import_graph() if graph is None else graph
        return max((layer_of(b, layers) for b in graph.successors(module)), default=0)
    for i, names in enumerate(layers):
        if parts[1] in names:
            return i
    raise KeyError(f"{module}: its folder {parts[1]!r} is in no layer of the package docstring's list")


def test_the_docstring_names_every_folder_in_exactly_one_layer():
    layers = package_layers()
    listed = [n for names in layers for n in names]
    tops = sorted(p.stem for p in PACKAGE.iterdir() if (p.suffix == ".py" and p.stem != "__init__")
                  or (p.is_dir() and (p / "__init__.py").exists()))
    assert len(layers) >= 8 and sorted(listed) == tops, (listed, tops)   # each named once, none missing


def test_the_layers_are_ordered_and_name_every_module():
    graph = import_graph()
    modules = [m for m in graph.nodes if m != "heuresis"]
    assert len(modules) > 80
    assert {layer_of(m, graph=graph) for m in modules} == set(range(len(package_layers())))   # no empty layer
    assert layer_of("heuresis.harness.protocol") < layer_of("heuresis.agents.llm") < layer_of("heuresis.stages.episodes")
    game = ["heuresis.causal.games.causalgame", "heuresis.harness.game_tools", "heuresis.agents.players",
            "heuresis.stages.games.play"]
    assert [layer_of(m) for m in game] == sorted(layer_of(m) for m in game) and len({layer_of(m) for m in game}) == 4


def climbing_imports(graph: nx.DiGraph, layers: list[list[str]] | None = None) -> list[str]:
    """Each import from a module to a module of a higher layer, described."""
    layers = package_layers() if layers is None else layers
    out = []
    for a, b in graph.edges:
        la, lb = layer_of(a, layers, graph), layer_of(b, layers, graph)
        if lb > la:
            out.append(f"{a} (layer {'/'.join(layers[la])}, line {graph.edges[a, b]['lines'][0]}) imports {b} "
                       f"(layer {'/'.join(layers[lb])})")
    return out


def test_no_import_climbs_to_a_higher_layer():
    climbing = climbing_imports(import_graph())
    assert not climbing, climbing


def test_the_layer_check_catches_a_climbing_import(tmp_path):
    """A stand-in package whose causal module imports a stage: the check names it, from its docstring."""
    pkg = tmp_path / "heuresis"
    for sub in ("causal", "stages"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    doc = "Layers:\n\n* ``causal`` — graphs;\n* ``stages`` — the workflow.\n"
    (pkg / "__init__.py").write_text(f'"""{doc}"""\n')
    (pkg / "stages" / "headroom.py").write_text("from heuresis.causal.graph import Y\nX = 1\n")
    (pkg / "causal" / "graph.py").write_text("from heuresis.stages.headroom import X\nY = 2\n")
    layers = package_layers(doc)
    assert layers == [["causal"], ["stages"]]
    climbing = climbing_imports(import_graph(pkg), layers)
    assert len(climbing) == 1 and climbing[0].startswith("heuresis.causal.graph (layer causal, line 1) imports "
                                                         "heuresis.stages.headroom"), climbing


def test_the_harness_is_handed_its_agent():
    """No harness module builds an agent: the episodes stage makes it and hands it to ``run_episode``."""
    graph = import_graph()
    builds = [(a, b) for a, b in graph.edges if a.startswith("heuresis.harness")
              and "make_agent" in graph.edges[a, b]["names"]]
    assert not builds, builds
    assert "make_agent" in graph.edges["heuresis.stages.episodes", "heuresis.agents"]["names"]


#: What resolves an agent's kind: above the agents layer it comes from ``heuresis.agents``, whose import
#: registers every built-in kind (the protocol's registry alone holds only the kinds imported so far).
RESOLVERS = {"AGENTS", "make_agent", "agent_class", "check_agent", "agent_origin"}


def test_code_above_the_agents_resolves_kinds_through_the_agents_package():
    graph = import_graph()
    direct = [(a, sorted(RESOLVERS & set(graph.edges[a, b]["names"]))) for a, b in graph.edges
              if b == "heuresis.harness.protocol" and not a.startswith(("heuresis.harness", "heuresis.agents"))
              and RESOLVERS & set(graph.edges[a, b]["names"])]
    assert not direct, direct


@pytest.mark.parametrize("module", ["heuresis.stages.leakage", "heuresis.stages.episodes",
                                    "heuresis.stages.games.play", "heuresis.stages.games.workflow"])
def test_a_stage_imported_alone_knows_every_built_in_kind(module):
    """A rule's script imports one stage module in a fresh interpreter: every built-in kind is known there."""
    import json
    import subprocess
    import sys

    code = (f"import json, {module}\n"
            "from heuresis.harness.protocol import AGENTS\n"
            "print(json.dumps(sorted(AGENTS)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    kinds = set(json.loads(out))
    assert {"llm", "shortcut", "merge", "evidence", "external", "game_random", "game_mechanism"} <= kinds, kinds


#: Modules of an optional extra that src/ may import, each with its distribution and extra. They are
#: imported only inside a function (the code path that needs the extra), never when a module loads.
EXTRA_IMPORTS = {"llama_cpp": ("llama-cpp-python", "local"), "inspect_ai": ("inspect-ai", "inspect")}


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


def test_every_command_runs_a_function_of_its_own_group():
    """Each module of ``heuresis.cli`` adds its commands, and each command runs a function of that module."""
    import argparse

    from heuresis import cli

    def leaves(action) -> dict:
        out = {}
        for name, parser in action.choices.items():
            inner = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            out.update(leaves(inner[0]) if inner else {name: parser})
        return out

    seen = []
    for group in cli.GROUPS:
        sub = argparse.ArgumentParser().add_subparsers()
        group.add_commands(sub)
        commands = leaves(sub)
        assert commands, group.__name__
        for name, parser in commands.items():
            func = parser.get_default("func")
            assert func is not None and func.__module__ == group.__name__, (name, func)
        seen += commands
    top = leaves(next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)))
    assert sorted(seen) == sorted(top) and len(top) == 20
