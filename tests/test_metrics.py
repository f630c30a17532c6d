"""Scores against gadjid (SHD) and scikit-learn (F1)."""

import gadjid
import numpy as np
import pytest
from conftest import random_dag
from sklearn.metrics import f1_score, precision_score, recall_score

from heuresis.causal.graph import Graph, Relation, dag_to_cpdag
from heuresis.causal.metrics import adjacency_scores, nshd, score_graph, shd


@pytest.mark.parametrize("seed", range(3))
def test_shd_equals_gadjid_on_random_dags_and_cpdags(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        d = int(rng.integers(2, 12))
        a, b = random_dag(rng, d, rng.uniform(0.1, 0.6)), random_dag(rng, d, rng.uniform(0.1, 0.6))
        ga = dag_to_cpdag(a) if rng.random() < 0.5 else Graph.from_dag(a)
        gb = dag_to_cpdag(b) if rng.random() < 0.5 else Graph.from_dag(b)
        normalized, count = gadjid.shd(ga.to_gadjid(), gb.to_gadjid())
        assert shd(ga, gb) == count
        assert nshd(ga, gb) == pytest.approx(normalized, abs=1e-12)


def test_adjacency_scores_equal_sklearn_on_pair_vectors():
    rng = np.random.default_rng(1)
    for _ in range(200):
        d = int(rng.integers(3, 10))
        t, e = Graph.from_dag(random_dag(rng, d, 0.3)), Graph.from_dag(random_dag(rng, d, 0.4))
        iu = np.triu_indices(d, 1)
        yt, ye = t.skeleton()[iu], e.skeleton()[iu]
        if yt.sum() == 0 or ye.sum() == 0:
            continue
        s = adjacency_scores(t, e)
        assert s.f1 == pytest.approx(f1_score(yt, ye))
        assert s.precision == pytest.approx(precision_score(yt, ye))
        assert s.recall == pytest.approx(recall_score(yt, ye))


def test_empty_graph_conventions():
    t = Graph.from_dag(np.array([[0, 1], [0, 0]]))
    e = Graph.empty(2)
    s = adjacency_scores(t, e)
    assert (s.precision, s.recall, s.f1) == (1.0, 0.0, 0.0)
    assert adjacency_scores(e, e).f1 == 1.0
    complete = Graph.complete(2)
    assert adjacency_scores(t, complete).f1 == 1.0


def test_score_graph_completes_with_meek_before_shd():
    # truth X1 -> X2 <- X3, X2 -> X4: the CPDAG is the DAG (X2 -> X4 by R1)
    dag = np.zeros((4, 4), int); dag[0, 1] = dag[2, 1] = dag[1, 3] = 1
    est = Graph.empty(4)
    est.set(0, 1, Relation.FORWARD)
    est.set(2, 1, Relation.FORWARD)
    est.set(1, 3, Relation.UNDIRECTED)
    assert shd(dag_to_cpdag(dag), est) == 1          # uncompleted: X2 -- X4 differs
    s = score_graph(Graph.from_dag(dag), dag_to_cpdag(dag), est)
    assert s.f1 == 1.0 and s.shd == 0 and s.nshd == 0.0   # completion implies X2 -> X4
