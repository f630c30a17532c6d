"""Graph primitives against independent implementations (networkx, causal-learn)."""

import networkx as nx
import numpy as np
import pytest
from causallearn.graph.Dag import Dag
from causallearn.graph.GraphNode import GraphNode
from causallearn.utils.DAG2CPDAG import dag2cpdag
from conftest import random_dag

from heuresis.causal.graph import (
    Graph,
    Relation,
    d_separated,
    d_separated_bayes_ball,
    dag_to_cpdag,
    is_dag,
    meek_closure,
    topological_order,
)


def _cl_dag(adj):
    nodes = [GraphNode(f"X{i + 1}") for i in range(adj.shape[0])]
    g = Dag(nodes)
    for i, j in zip(*np.nonzero(adj)):
        g.add_directed_edge(nodes[i], nodes[j])
    return g


@pytest.mark.parametrize("seed", range(4))
def test_d_separation_two_implementations_agree_with_networkx(seed):
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(60):
        d = int(rng.integers(3, 10))
        adj = random_dag(rng, d, rng.uniform(0.15, 0.6))
        g = nx.DiGraph()
        g.add_nodes_from(range(d))
        g.add_edges_from((int(i), int(j)) for i, j in zip(*np.nonzero(adj)))
        for _ in range(15):
            x, y = (int(v) for v in rng.choice(d, 2, replace=False))
            z = [k for k in range(d) if k not in (x, y) and rng.random() < 0.35]
            expected = nx.is_d_separator(g, {x}, {y}, set(z))
            assert d_separated(adj, [x], [y], z) == expected
            assert d_separated_bayes_ball(adj, [x], [y], z) == expected
            checked += 1
    assert checked == 900


def test_d_separation_textbook_cases():
    chain = np.zeros((3, 3), int); chain[0, 1] = chain[1, 2] = 1
    collider = np.zeros((3, 3), int); collider[0, 1] = collider[2, 1] = 1
    assert not d_separated(chain, [0], [2]) and d_separated(chain, [0], [2], [1])
    assert d_separated(collider, [0], [2]) and not d_separated(collider, [0], [2], [1])
    with pytest.raises(ValueError, match="overlap"):
        d_separated(chain, [0], [0])


def test_cpdag_equals_causallearn_dag2cpdag():
    rng = np.random.default_rng(7)
    for _ in range(300):
        d = int(rng.integers(2, 9))
        adj = random_dag(rng, d, rng.uniform(0.1, 0.7))
        ours = dag_to_cpdag(adj)
        theirs = Graph.from_causallearn(dag2cpdag(_cl_dag(adj)))
        assert ours == theirs, (adj, ours, theirs)


def test_causallearn_round_trip_and_mark_mapping():
    rng = np.random.default_rng(3)
    for _ in range(50):
        g = dag_to_cpdag(random_dag(rng, 7, 0.4))
        assert Graph.from_causallearn(g.to_causallearn()) == g
    # FCI marks: o-> and <-> become undirected; tail-arrow stays directed
    m = np.zeros((3, 3), int)
    m[0, 1], m[1, 0] = 2, 1     # X1 o-> X2 (circle at X1, arrow at X2)
    m[1, 2], m[2, 1] = 1, 1     # X2 <-> X3
    g = Graph.from_causallearn(m)
    assert g.relation(0, 1) == Relation.UNDIRECTED and g.relation(1, 2) == Relation.UNDIRECTED
    m2 = np.zeros((2, 2), int); m2[0, 1], m2[1, 0] = -1, 1    # X1 -> X2
    assert Graph.from_causallearn(m2).relation(0, 1) == Relation.FORWARD


def test_relations_and_conversions():
    g = Graph.empty(4)
    g.set(0, 1, Relation.FORWARD)
    g.set(2, 1, Relation.FORWARD)
    g.set(2, 3, Relation.UNDIRECTED)
    assert g.relation(1, 0) == Relation.BACKWARD
    assert g.to_lines() == ["X1 -> X2", "X3 -> X2", "X3 -- X4"]
    gad = g.to_gadjid()
    assert gad[0, 1] == 1 and gad[2, 1] == 1 and gad[2, 3] == 2 and gad[3, 2] == 0
    g.set(0, 1, Relation.NONE)
    assert g.n_edges() == 2
    with pytest.raises(ValueError, match="itself"):
        g.set(1, 1, Relation.FORWARD)
    with pytest.raises(ValueError, match="0 or 1"):
        Graph(np.array([[0, 2], [0, 0]]))


def _consistent_with(g: Graph, adj: np.ndarray) -> bool:
    directed = g.directed_adjacency()
    return bool(np.all(adj[directed.astype(bool)] == 1))


def test_meek_completion_of_partial_orientations_stays_in_the_equivalence_class():
    """Orienting CPDAG edges as in the true DAG, Meek's rules only add true orientations,
    and fully orienting the DAG's own edges reproduces the DAG."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        d = int(rng.integers(3, 9))
        adj = random_dag(rng, d, rng.uniform(0.2, 0.7))
        g = dag_to_cpdag(adj)
        for i, j, rel in g.pairs():
            if rel == Relation.UNDIRECTED and rng.random() < 0.4:
                g.set(i, j, Relation.FORWARD if adj[i, j] else Relation.BACKWARD)
        done = meek_closure(g)
        assert _consistent_with(done, adj)
        assert np.array_equal(done.skeleton(), (adj | adj.T).astype(bool))
        assert meek_closure(Graph.from_dag(adj)) == Graph.from_dag(adj)


def test_meek_rules_textbook_examples():
    # R1: 0 -> 1 -- 2, 0 and 2 non-adjacent  =>  1 -> 2
    g = Graph.empty(3); g.set(0, 1, Relation.FORWARD); g.set(1, 2, Relation.UNDIRECTED)
    assert meek_closure(g).relation(1, 2) == Relation.FORWARD
    # R2: 0 -> 1 -> 2, 0 -- 2  =>  0 -> 2
    g = Graph.empty(3); g.set(0, 1, Relation.FORWARD); g.set(1, 2, Relation.FORWARD); g.set(0, 2, Relation.UNDIRECTED)
    assert meek_closure(g).relation(0, 2) == Relation.FORWARD
    # R3: 0 -- 1, 0 -- 2, 0 -- 3, 2 -> 1 <- 3, 2 and 3 non-adjacent  =>  0 -> 1
    g = Graph.empty(4)
    for k in (1, 2, 3):
        g.set(0, k, Relation.UNDIRECTED)
    g.set(2, 1, Relation.FORWARD); g.set(3, 1, Relation.FORWARD)
    out = meek_closure(g, rules=(3,))
    assert out.relation(0, 1) == Relation.FORWARD and out.relation(0, 2) == Relation.UNDIRECTED
    # R4: 0 -- 1, 0 -- 2, 2 -> 3 -> 1, 0 adj 3, 2 and 1 non-adjacent  =>  0 -> 1
    g = Graph.empty(4)
    g.set(0, 1, Relation.UNDIRECTED); g.set(0, 2, Relation.UNDIRECTED); g.set(0, 3, Relation.UNDIRECTED)
    g.set(2, 3, Relation.FORWARD); g.set(3, 1, Relation.FORWARD)
    assert meek_closure(g, rules=(4,)).relation(0, 1) == Relation.FORWARD
    assert meek_closure(g, rules=(1,)).relation(0, 1) == Relation.UNDIRECTED


def test_topological_order_and_cycle_detection():
    rng = np.random.default_rng(5)
    adj = random_dag(rng, 8, 0.5)
    order = topological_order(adj)
    pos = {k: t for t, k in enumerate(order)}
    assert all(pos[i] < pos[j] for i, j in zip(*np.nonzero(adj)))
    cyc = np.zeros((3, 3), int); cyc[0, 1] = cyc[1, 2] = cyc[2, 0] = 1
    assert not is_dag(cyc) and topological_order(cyc) is None
    with pytest.raises(ValueError, match="cycle"):
        dag_to_cpdag(cyc)
