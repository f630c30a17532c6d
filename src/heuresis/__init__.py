"""Heuresis: a benchmark for LLM agents that do causal discovery from data alone.

Modules, one per concept: ``config`` (loading and validation), ``graph`` (graph type,
d-separation, CPDAG, Meek rules), ``metrics`` (adjacency F1, SHD), ``mechanisms`` (the
registered mechanism kinds), ``instances`` (instance generation and readers), ``schemas``
(Parquet artifact schemas and atomic IO), ``provenance``.
"""

from heuresis.graph import Graph, Relation, d_separated, dag_to_cpdag, meek_closure
from heuresis.metrics import adjacency_scores, nshd, score_graph, shd

__version__ = "0.1.0"

__all__ = [
    "Graph",
    "Relation",
    "__version__",
    "adjacency_scores",
    "d_separated",
    "dag_to_cpdag",
    "meek_closure",
    "nshd",
    "score_graph",
    "shd",
]
