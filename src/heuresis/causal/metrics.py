"""Scores of a graph against the truth (docs/design.md §1, §6).

The primary score is adjacency F1 of the skeleton; the secondary score is SHD, normalized by
d(d-1)/2 as in the ``gadjid`` package, computed after Meek completion of the submitted graph.

Conventions for empty sets (docs/design.md §1): precision is 1 when nothing is predicted,
recall is 1 when the truth has no edge, and F1 = 2TP / (2TP + FP + FN) is 1 when both graphs
are empty and 0 when exactly one of them is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from heuresis.causal.graph import Graph, meek_closure

__all__ = ["AdjacencyScores", "GraphScores", "adjacency_scores", "nshd", "score_graph", "shd"]


def _skeleton(g: Graph | np.ndarray) -> np.ndarray:
    if isinstance(g, Graph):
        return g.skeleton()
    a = np.asarray(g) != 0
    return a | a.T


@dataclass(frozen=True)
class AdjacencyScores:
    """Skeleton comparison of an estimate with the truth: pair counts and their rates.

    ``tp``, ``fp``, ``fn`` count unordered pairs (adjacent in both, only in the estimate, only in
    the truth); precision, recall and F1 are 1.0 when their denominator is 0.
    """

    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float


def adjacency_scores(true: Graph | np.ndarray, est: Graph | np.ndarray) -> AdjacencyScores:
    """Adjacency precision, recall and F1 of ``est``'s skeleton against ``true``'s."""
    t, e = _skeleton(true), _skeleton(est)
    if t.shape != e.shape:
        raise ValueError(f"graphs over different node counts: {t.shape[0]} and {e.shape[0]}")
    iu = np.triu_indices(t.shape[0], 1)
    t, e = t[iu], e[iu]
    tp = int(np.sum(t & e))
    fp = int(np.sum(~t & e))
    fn = int(np.sum(t & ~e))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    denom = 2 * tp + fp + fn
    f1 = 2 * tp / denom if denom else 1.0
    return AdjacencyScores(tp, fp, fn, precision, recall, f1)


def shd(true: Graph, est: Graph) -> int:
    """Structural Hamming distance: the number of pairs whose relation differs.

    A pair counts once whether it is missing, extra, or present with another orientation
    (undirected vs directed, or reversed) — the convention of ``gadjid.shd``.
    """
    if true.d != est.d:
        raise ValueError(f"graphs over different node counts: {true.d} and {est.d}")
    a, b = true.amat, est.amat
    differs = (a != b) | (a.T != b.T)
    return int(np.triu(differs, 1).sum())


def nshd(true: Graph, est: Graph) -> float:
    """SHD divided by the number of pairs d(d-1)/2."""
    pairs = true.d * (true.d - 1) / 2
    return shd(true, est) / pairs if pairs else 0.0


@dataclass(frozen=True)
class GraphScores:
    """All per-graph scores of docs/design.md §6 (SHD against the true CPDAG after Meek completion)."""

    f1: float
    precision: float
    recall: float
    tp: int
    fp: int
    fn: int
    shd: int
    nshd: float
    n_edges: int

    def as_dict(self) -> dict:
        """Return the scores as a plain dict (the columns of a scores row)."""
        return asdict(self)


def score_graph(true_dag: Graph, true_cpdag: Graph, est: Graph) -> GraphScores:
    """Score an estimated graph: adjacency scores vs the DAG skeleton, SHD vs the CPDAG.

    The estimate is first completed with Meek's rules R1-R4, so an agent is not penalised for an
    orientation that its own claims already imply.
    """
    adj = adjacency_scores(true_dag, est)
    completed = meek_closure(est)
    s = shd(true_cpdag, completed)
    return GraphScores(adj.f1, adj.precision, adj.recall, adj.tp, adj.fp, adj.fn, s,
                       nshd(true_cpdag, completed), est.n_edges())
