"""Scoring an episode's graph (docs/design.md §5.1, §6), apart from the loop that produced it.

The loop (:mod:`heuresis.harness.loop`) never holds the truth; once an episode is over, its
submitted (or, unsubmitted, its working) graph is scored here against the instance's true DAG
and CPDAG, beside PC-KCI's output on the same instance.  The harness writes these numbers into
the ``episodes`` row and the analysis (:mod:`heuresis.stages.analysis.scores`) computes the same with
the same function from the recorded graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from heuresis.causal.graph import Graph
from heuresis.causal.metrics import GraphScores, score_graph

__all__ = ["EpisodeScores", "score_episode_graph"]


@dataclass(frozen=True)
class EpisodeScores:
    """The scores of an episode's graph and of PC-KCI's output on the same instance."""

    graph: GraphScores
    pc_kci: GraphScores

    def row(self) -> dict:
        """The score columns of the ``episodes`` table."""
        s = self.graph
        return {"f1": s.f1, "precision": s.precision, "recall": s.recall, "shd": s.shd, "nshd": s.nshd,
                "n_edges": s.n_edges, "pc_kci_f1": self.pc_kci.f1}


def score_episode_graph(true_dag: Graph, true_cpdag: Graph, graph: Graph, pc_kci_graph: Graph) -> EpisodeScores:
    """Score ``graph`` and PC-KCI's output against the truth with :func:`heuresis.causal.metrics.score_graph`."""
    return EpisodeScores(score_graph(true_dag, true_cpdag, graph), score_graph(true_dag, true_cpdag, pc_kci_graph))
