"""The algorithm menu (docs/design.md §4.1): recovery on easy data, mappings, registry and parameters."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from heuresis.causal.algorithms import ALGORITHMS, Algorithm, AlgorithmResult, make_algorithm, register_algorithm
from heuresis.causal.algorithms.base import Param, is_prob
from heuresis.causal.algorithms.notears import break_cycles, find_cycle, notears_h
from heuresis.causal.graph import Graph, Relation, dag_to_cpdag, is_dag, topological_order

MENU = {"pc_fisherz", "pc_kci", "fci", "ges", "direct_lingam", "resit", "notears"}


def linear_sem(adj: np.ndarray, n: int, rng: np.random.Generator, noise: str = "gauss") -> np.ndarray:
    """Linear SEM over the DAG ``adj``, weights ±U[0.5, 2], unit-variance noise."""
    d = adj.shape[0]
    w = adj * rng.uniform(0.5, 2.0, size=adj.shape) * rng.choice([-1.0, 1.0], size=adj.shape)
    x = np.zeros((n, d))
    for j in topological_order(adj):
        e = rng.standard_normal(n) if noise == "gauss" else rng.uniform(-np.sqrt(3), np.sqrt(3), n)
        x[:, j] = x @ w[:, j] + e
    return x


def dag(d: int, edges) -> np.ndarray:
    a = np.zeros((d, d), dtype=int)
    for i, j in edges:
        a[i, j] = 1
    return a


def raw_config(*files: str) -> dict:
    """Config files merged without validation (only instance generation is needed here)."""
    from conftest import ROOT

    from heuresis.config import merge_configs

    cfg: dict = {}
    for f in files:
        cfg = merge_configs(cfg, yaml.safe_load((ROOT / f).read_text()))
    return cfg


# --- NOTEARS --------------------------------------------------------------------------------
def test_notears_recovers_linear_gaussian_equal_variance():
    rng = np.random.default_rng(1)
    true = dag(5, [(0, 1), (1, 2), (3, 2), (2, 4)])  # chain with a collider at 2 (3 -> 2)
    x = linear_sem(true, 1000, rng)
    res = make_algorithm("notears").run(x)
    assert res.graph.is_dag()
    np.testing.assert_array_equal(res.graph.skeleton(), Graph.from_dag(true).skeleton())
    np.testing.assert_array_equal(res.graph.directed_adjacency(), true)
    assert res.n_tests == 0 and res.runtime_s > 0
    assert abs(notears_h(np.array(res.details["weights"]))) < 1e-10
    assert abs(res.details["h_output"]) < 1e-10
    assert res.details["converged"] and res.details["h"] <= 1e-8


def test_notears_h_zero_iff_acyclic():
    w = np.array([[0, 1.5, 0], [0, 0, -0.7], [0, 0, 0]])
    assert abs(notears_h(w)) < 1e-12
    w[2, 0] = 0.4
    assert notears_h(w) > 1e-3


def test_cycle_breaking_removes_weakest_edge():
    w = np.zeros((4, 4))
    w[0, 1], w[1, 2], w[2, 0] = 1.0, -0.8, 0.35  # cycle 0->1->2->0, weakest 2->0
    w[2, 3], w[3, 2] = 0.9, -1.2  # 2-cycle, weakest 2->3
    assert find_cycle(w) is not None
    out, removed = break_cycles(w)
    assert is_dag(out != 0) and find_cycle(out) is None
    assert sorted((i, j) for i, j, _ in removed) == [(2, 0), (2, 3)]
    assert out[0, 1] == 1.0 and out[1, 2] == -0.8 and out[3, 2] == -1.2
    assert find_cycle(np.triu(np.ones((4, 4)), 1)) is None


def test_notears_output_is_dag_even_when_stopped_early():
    rng = np.random.default_rng(2)
    x = linear_sem(dag(4, [(0, 1), (1, 2), (2, 3), (0, 3)]), 300, rng)
    res = make_algorithm("notears", max_iter=1, w_threshold=0.0, lambda1=0.0).run(x)
    assert res.graph.is_dag()
    w = np.array(res.details["weights"])
    assert is_dag(w != 0) and abs(notears_h(w)) < 1e-10
    for i, j, _ in res.details["cycle_edges_removed"]:
        assert w[i, j] == 0


# --- DirectLiNGAM ----------------------------------------------------------------------------
def test_direct_lingam_recovers_uniform_noise_dag():
    rng = np.random.default_rng(3)
    true = dag(4, [(0, 1), (0, 2), (1, 3), (2, 3)])
    x = linear_sem(true, 1000, rng, noise="uniform")
    perm = np.array([2, 0, 3, 1])  # columns out of causal order: direction is not read off order
    res = make_algorithm("direct_lingam").run(x[:, perm])
    np.testing.assert_array_equal(res.graph.amat, Graph.from_dag(true).relabel(perm).amat)
    assert res.details["seed"] == 0


# --- GES -------------------------------------------------------------------------------------
def test_ges_returns_true_cpdag():
    rng = np.random.default_rng(4)
    true = dag(5, [(0, 2), (1, 2), (2, 3), (3, 4)])
    x = linear_sem(true, 2000, rng)
    res = make_algorithm("ges").run(x)
    assert res.graph == dag_to_cpdag(true)
    assert res.n_tests == 0
    true2 = dag(4, [(0, 1), (1, 2), (1, 3)])  # no v-structure: all undirected
    res2 = make_algorithm("ges").run(linear_sem(true2, 2000, rng))
    assert res2.graph == dag_to_cpdag(true2)


# --- FCI -------------------------------------------------------------------------------------
def test_fci_marks_map_to_undirected():
    from causallearn.graph.Edge import Edge
    from causallearn.graph.Endpoint import Endpoint
    from causallearn.graph.GeneralGraph import GeneralGraph
    from causallearn.graph.GraphNode import GraphNode

    nodes = [GraphNode(f"X{k + 1}") for k in range(5)]
    pag = GeneralGraph(nodes)
    pag.add_edge(Edge(nodes[0], nodes[1], Endpoint.CIRCLE, Endpoint.ARROW))  # X1 o-> X2
    pag.add_edge(Edge(nodes[1], nodes[2], Endpoint.ARROW, Endpoint.ARROW))  # X2 <-> X3
    pag.add_edge(Edge(nodes[2], nodes[3], Endpoint.CIRCLE, Endpoint.CIRCLE))  # X3 o-o X4
    pag.add_edge(Edge(nodes[3], nodes[4], Endpoint.TAIL, Endpoint.ARROW))  # X4 --> X5
    g = Graph.from_causallearn(pag)
    assert g.relation(0, 1) == Relation.UNDIRECTED
    assert g.relation(1, 2) == Relation.UNDIRECTED
    assert g.relation(2, 3) == Relation.UNDIRECTED
    assert g.relation(3, 4) == Relation.FORWARD
    assert g.n_edges() == 4


def test_fci_run_collider_and_counts_tests():
    rng = np.random.default_rng(5)
    true = dag(3, [(0, 2), (1, 2)])  # PAG: X1 o-> X3 <-o X2
    x = linear_sem(true, 1000, rng)
    res = make_algorithm("fci", alpha=0.01).run(x)
    pag = np.array(res.details["pag"])
    # causal-learn: pag[j, i] = 1 and pag[i, j] = 2 is i o-> j
    assert (pag[2, 0], pag[0, 2], pag[2, 1], pag[1, 2]) == (1, 2, 1, 2)
    assert res.graph.relation(0, 2) == Relation.UNDIRECTED
    assert res.graph.relation(1, 2) == Relation.UNDIRECTED
    assert res.graph.relation(0, 1) == Relation.NONE
    assert res.n_tests >= 3 and 0 < res.details["n_tests_computed"] <= res.n_tests


# --- RESIT -----------------------------------------------------------------------------------
CUBE, TANH = (lambda u: u ** 3), (lambda u: 2.0 * np.tanh(2.0 * u))


@pytest.mark.parametrize("f,regressor", [(CUBE, "spline"), (TANH, "spline"), (CUBE, "rf")],
                         ids=["cube-spline", "tanh-spline", "cube-rf"])
def test_resit_recovers_nonlinear_anm_direction(f, regressor):
    rng = np.random.default_rng(6)
    x1 = rng.standard_normal(300)
    x2 = f(x1) + 0.5 * rng.standard_normal(300)
    for cols, cause, effect in (((x1, x2), 0, 1), ((x2, x1), 1, 0)):
        res = make_algorithm("resit", regressor=regressor).run(np.column_stack(cols))
        assert res.graph.relation(cause, effect) == Relation.FORWARD, res.graph
        assert res.details["seed"] == 0


# --- registry and parameters -------------------------------------------------------------------
def test_menu_is_registered():
    assert MENU <= set(ALGORITHMS)
    for name, cls in ALGORITHMS.items():
        assert issubclass(cls, Algorithm) and cls.name == name


def test_unknown_algorithm_and_bad_parameters():
    with pytest.raises(ValueError, match=r"unknown algorithm 'pcx'; known: \[.*'notears'.*\]"):
        make_algorithm("pcx")
    with pytest.raises(ValueError, match=r"ges: unknown parameter 'alpha'"):
        make_algorithm("ges", alpha=0.05)
    with pytest.raises(ValueError, match=r"fci: parameter 'alpha' must be a float in \(0, 1\); got 1.5"):
        make_algorithm("fci", alpha=1.5)
    with pytest.raises(ValueError, match=r"notears: parameter 'lambda1' must be .*got -0.1"):
        make_algorithm("notears", lambda1=-0.1)
    with pytest.raises(ValueError, match=r"resit: parameter 'regressor' must be one of .*got 'svm'"):
        make_algorithm("resit", regressor="svm")
    with pytest.raises(ValueError, match=r"parameter 'seed'"):
        make_algorithm("direct_lingam", seed=True)
    with pytest.raises(ValueError, match=r"parameter 'alpha'"):
        make_algorithm("pc_kci", alpha="0.05")
    with pytest.raises(ValueError, match="2-D"):
        make_algorithm("ges").run(np.zeros(10))
    with pytest.raises(ValueError, match="NaN"):
        make_algorithm("ges").run(np.full((10, 2), np.nan))


def test_register_algorithm_decorator():
    @register_algorithm("_test_empty")
    class Empty(Algorithm):
        param_spec = {"alpha": Param(0.1, is_prob, "a float in (0, 1)")}

        def _run(self, data):
            return AlgorithmResult(graph=Graph.empty(data.shape[1]))

    try:
        algo = make_algorithm("_test_empty")
        assert algo.params == {"alpha": 0.1}
        res = algo.run(np.zeros((5, 3)))
        assert res.graph.d == 3 and res.details == {"algorithm": "_test_empty", "params": {"alpha": 0.1}}
        with pytest.raises(ValueError, match="registered twice"):
            register_algorithm("_test_empty")(type("Other", (Empty,), {}))
    finally:
        ALGORITHMS.pop("_test_empty", None)


def test_config_menu_constructs():
    cfg = raw_config("config/config.yaml")
    for name, params in cfg.get("references", {}).get("algorithms", {}).items():
        assert name in ALGORITHMS
        make_algorithm(name, **params)


@pytest.fixture(scope="module")
def quick_instance():
    from heuresis.stages.instances import generate_instance, instance_spec

    cfg = raw_config("config/config.yaml", "config/quick.yaml")
    return generate_instance(instance_spec(cfg, "mixed"), "mixed", "dev", 0)


@pytest.mark.parametrize("name", sorted(MENU))
def test_every_algorithm_runs_on_an_instance(name, quick_instance):
    if name.startswith("pc_"):
        pytest.importorskip("heuresis.causal.algorithms.pc")
        pytest.importorskip("heuresis.causal.ci")
    data = quick_instance.data
    n, d = data.shape
    assert (n, d) == (300, 6)
    res = make_algorithm(name).run(data)
    assert isinstance(res.graph, Graph) and res.graph.d == d
    assert res.graph.names == tuple(f"X{k + 1}" for k in range(d))
    assert res.runtime_s > 0
    assert res.details["algorithm"] == name
    json.dumps(res.to_dict())
    if name in ("pc_fisherz", "pc_kci", "fci"):
        assert res.n_tests > 0
    else:
        assert res.n_tests == 0
    if name.startswith("pc_"):
        assert res.pc is not None and res.n_tests == res.pc.n_tests
    if name in ("notears", "direct_lingam", "resit"):
        assert res.graph.is_dag()
    if name != "pc_kci":  # deterministic given the parameters
        again = make_algorithm(name).run(data)
        assert again.graph == res.graph and again.n_tests == res.n_tests
