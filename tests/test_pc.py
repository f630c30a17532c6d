"""PC-stable with deletion log (heuresis.causal.algorithms.pc) and strength grades (heuresis.causal.grades)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from heuresis.causal.algorithms.pc import (
    CIRecord,
    Deletion,
    DSeparationOracle,
    PCResult,
    label_deletions,
    oracle_repair,
    orient,
    pc,
)
from heuresis.causal.grades import DEFAULT_GRADES, strength_grade, validate_grades
from heuresis.causal.graph import Graph, Relation, dag_to_cpdag


class CLAdapter:
    """causal-learn's CIT behind the duck-typed interface pc() relies on."""

    def __init__(self, data, method="fisherz", cit=None):
        from causallearn.utils.cit import CIT

        self.cit = cit if cit is not None else CIT(data, method)
        self.name = method
        self.n_tests = 0

    def pvalue(self, x, y, S=()):
        self.n_tests += 1
        return float(self.cit(x, y, list(S)))


def random_dag(rng, d, p):
    order = rng.permutation(d)
    adj = np.zeros((d, d), dtype=np.int8)
    for a in range(d):
        for b in range(a + 1, d):
            if rng.random() < p:
                adj[order[a], order[b]] = 1
    return adj


def _config():
    from heuresis.preflight import load_config

    return load_config("config/config.yaml", "config/quick.yaml")


def _instances(d, n, per_family, families=None):
    from heuresis.stages.instances import generate_instance, instance_spec

    cfg = _config()
    cfg["instances"]["d"], cfg["instances"]["n"] = d, n
    for fam in families or list(cfg["families"]):
        spec = instance_spec(cfg, fam)
        for i in range(per_family):
            yield fam, i, generate_instance(spec, fam, "dev", i)


def _causallearn_pc(data, cit):
    """causal-learn's pc_alg (stable=True, uc_rule=0, uc_priority=2) on a given CIT object."""
    from causallearn.utils.PCUtils import Meek, SkeletonDiscovery, UCSepset

    cg = SkeletonDiscovery.skeleton_discovery(data, 0.05, cit, True, show_progress=False)
    return Meek.meek(UCSepset.uc_sepset(cg, 2))


def _compare_with_causallearn(result: PCResult, cg, d, tag):
    cl_graph = Graph.from_causallearn(cg.G)
    assert np.array_equal(cl_graph.skeleton(), result.skeleton.skeleton()), f"{tag}: skeletons differ"
    for a in range(d):
        for b in range(a + 1, d):
            stored = cg.sepset[a, b]
            if (a, b) in result.sepsets:
                assert stored is not None, f"{tag}: causal-learn has no sepset for deleted pair {(a, b)}"
                union = {int(v) for S in stored for v in S}
                assert union == set(result.sepsets[(a, b)]), (
                    f"{tag}: sepset of {(a, b)}: ours {result.sepsets[(a, b)]}, causal-learn {stored}")
            else:
                assert stored is None, f"{tag}: causal-learn has sepset {stored} for kept pair {(a, b)}"
    return cl_graph == result.graph


# --- oracle PC ------------------------------------------------------------------------------
def test_oracle_pc_recovers_true_cpdag():
    rng = np.random.default_rng(7)
    n_graphs = 0
    for d in range(3, 10):
        for p in (0.1, 0.25, 0.4, 0.6):
            for _ in range(8):
                dag = random_dag(rng, d, p)
                oracle = DSeparationOracle(dag)
                res = pc(np.zeros((1, d)), oracle)
                truth = dag_to_cpdag(dag)
                assert np.array_equal(res.skeleton.skeleton(), truth.skeleton())
                assert res.graph == truth, f"d={d}, p={p}: {res.graph} vs {truth}"
                assert res.n_tests == len(res.tests) == oracle.n_tests
                assert label_deletions(res.deletions, dag) == [False] * len(res.deletions)
                assert all(dl.pvalue == 1.0 and dl.test == "dsep" for dl in res.deletions)
                n_graphs += 1
    assert n_graphs >= 200


def test_log_structure_and_level_order():
    rng = np.random.default_rng(3)
    dag = random_dag(rng, 8, 0.4)
    res = pc(np.zeros((1, 8)), DSeparationOracle(dag), orient=False)
    assert res.graph == res.skeleton
    levels = [t.level for t in res.tests]
    assert levels == sorted(levels) and all(t.level == len(t.sepset) for t in res.tests)
    assert [dl.level for dl in res.deletions] == sorted(dl.level for dl in res.deletions)
    assert len({dl.pair for dl in res.deletions}) == len(res.deletions)  # a deletion is final
    assert {dl.pair for dl in res.deletions} == set(res.sepsets)
    skel = res.skeleton.skeleton()
    for dl in res.deletions:
        assert not skel[dl.x, dl.y]
        assert dl.sepset in res.separating_sets[dl.pair]
        assert set(dl.sepset) <= set(res.sepsets[dl.pair])
        assert dl.x < dl.y
        assert (CIRecord(dl.x, dl.y, dl.sepset, dl.pvalue, dl.level) in res.tests
                or CIRecord(dl.y, dl.x, dl.sepset, dl.pvalue, dl.level) in res.tests)
    assert np.triu(skel, 1).sum() + len(res.deletions) == 8 * 7 // 2


# --- agreement with causal-learn --------------------------------------------------------------
def test_fisherz_matches_causallearn_on_every_family():
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    agree = total = 0
    diff = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fam, i, inst in _instances(d=8, n=300, per_family=4):
            X = inst.data
            cg = cl_pc(X, 0.05, "fisherz", stable=True, uc_rule=0, uc_priority=2, show_progress=False)
            ci = CLAdapter(X, "fisherz")
            res = pc(X, ci)
            assert res.n_tests == ci.n_tests
            assert all(dl.test == "fisherz" and dl.pvalue > 0.05 for dl in res.deletions)
            same = _compare_with_causallearn(res, cg, X.shape[1], f"{fam}#{i}")
            agree += same
            total += 1
            if not same:
                diff.append(f"{fam}#{i}")
    assert total >= 6 * 4
    assert agree / total >= 0.9, f"CPDAG agreement {agree}/{total}; differing: {diff}"


def test_kci_matches_causallearn():
    from causallearn.utils.cit import CIT

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agree = total = 0
        for fam, i, inst in _instances(d=5, n=120, per_family=1, families=["mixed", "hetero", "gauntlet"]):
            X = inst.data
            cit = CIT(X, "kci")  # shared: causal-learn's run is answered from the same cache
            res = pc(X, CLAdapter(X, "kci", cit=cit))
            cg = _causallearn_pc(X, cit)
            agree += _compare_with_causallearn(res, cg, X.shape[1], f"kci {fam}#{i}")
            total += 1
            assert all(dl.test == "kci" for dl in res.deletions)
    assert agree == total, f"KCI CPDAG agreement {agree}/{total}"


# --- truth labels and the oracle repair ----------------------------------------------------------
class OverriddenOracle(DSeparationOracle):
    """d-separation oracle whose answers for some queries {(x, y, S): p} are overridden."""

    name = "table"

    def __init__(self, dag, overrides):
        super().__init__(dag)
        self.overrides = {(min(x, y), max(x, y), tuple(sorted(S))): p for (x, y, S), p in overrides.items()}

    def pvalue(self, x, y, S=()):
        key = (min(x, y), max(x, y), tuple(sorted(S)))
        if key in self.overrides:
            self.n_tests += 1
            return self.overrides[key]
        return super().pvalue(x, y, S)


def test_label_and_oracle_repair_hand_example():
    # truth 0 -> 1 -> 2, 0 -> 3; the test wrongly finds 0 _||_ 1 (p = 0.1), otherwise exact.
    dag = np.zeros((4, 4), dtype=np.int8)
    dag[0, 1] = dag[1, 2] = dag[0, 3] = 1
    res = pc(np.zeros((1, 4)), OverriddenOracle(dag, {(0, 1, ()): 0.1}))
    # level 0 deletes 0-1.  Level 1 (adj 0:{2,3} 1:{2,3} 2:{0,1,3} 3:{0,1,2}): from node 2's
    # side 0 _||_ 2 | 1 and 2 _||_ 3 | 0 (also | 1); from node 3's side 1 _||_ 3 | 0.
    assert [(dl.pair, dl.sepset, dl.level) for dl in res.deletions] == [
        ((0, 1), (), 0), ((0, 2), (1,), 1), ((2, 3), (0,), 1), ((1, 3), (0,), 1)]
    assert res.deletions[0] == Deletion(0, 1, (), "table", 0.1, 0, "no evidence (borderline)")
    assert res.deletions[1].grade == "no evidence"
    assert res.sepsets == {(0, 1): (), (0, 2): (1,), (2, 3): (0, 1), (1, 3): (0,)}
    assert res.separating_sets[(2, 3)] == [(0,), (1,)]
    assert res.graph == Graph.from_edges(4, [(0, 3, Relation.UNDIRECTED), (1, 2, Relation.UNDIRECTED)])
    assert label_deletions(res.deletions, dag) == [True, False, False, False]
    repaired = oracle_repair(res, dag)
    assert repaired == Graph.from_edges(4, [(0, 3, Relation.UNDIRECTED), (1, 2, Relation.UNDIRECTED),
                                            (0, 1, Relation.UNDIRECTED)])
    assert res.graph.n_edges() == 2  # input unchanged
    assert oracle_repair(res, Graph.from_dag(dag)) == repaired  # a Graph works as the truth too


def test_orientation_prioritises_existing_colliders():
    # skeleton 1 - 2 - 0 - 3 with empty separating sets: both 2 -> 0 <- 3 and 0 -> 2 <- 1 are
    # colliders by the sepset rule; they conflict on 0 - 2.  Triples are visited by middle node
    # ascending (causal-learn's order), so 2 -> 0 <- 3 is oriented first and the second collider,
    # which would reverse 2 -> 0, is skipped ("prioritise existing colliders"); R1 finds nothing.
    skel = Graph.from_edges(4, [(0, 2, Relation.UNDIRECTED), (1, 2, Relation.UNDIRECTED),
                                (0, 3, Relation.UNDIRECTED)])
    sepsets = {(0, 1): (), (2, 3): (), (1, 3): ()}
    g = orient(skel, sepsets)
    assert g == Graph.from_edges(4, [(2, 0, Relation.FORWARD), (3, 0, Relation.FORWARD),
                                     (1, 2, Relation.UNDIRECTED)])
    # cross-check with causal-learn's own UC_sepset + Meek on the same skeleton and sepsets
    from causallearn.graph.GraphClass import CausalGraph
    from causallearn.utils.PCUtils import Meek, UCSepset

    cg = CausalGraph(4)
    for a, b in [(0, 1), (1, 3), (2, 3)]:
        cg.G.remove_edge(cg.G.get_edge(cg.G.nodes[a], cg.G.nodes[b]))
        cg.sepset[a, b] = cg.sepset[b, a] = [()]
    assert Graph.from_causallearn(Meek.meek(UCSepset.uc_sepset(cg, 2)).G) == g


def test_oracle_repair_restores_exactly_the_wrong_deletions():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n_wrong = 0
        for _fam, _i, inst in _instances(d=8, n=300, per_family=2):
            res = pc(inst.data, CLAdapter(inst.data, "fisherz"))
            labels = label_deletions(res.deletions, inst.dag)
            truth_skel = (inst.dag | inst.dag.T) != 0
            assert labels == [bool(truth_skel[dl.x, dl.y]) for dl in res.deletions]
            wrong = {dl.pair for dl, w in zip(res.deletions, labels) if w}
            n_wrong += len(wrong)
            rep = oracle_repair(res, inst.dag)
            expected = res.skeleton.skeleton().copy()
            for a, b in wrong:
                expected[a, b] = expected[b, a] = True
            assert np.array_equal(rep.skeleton(), expected)
            for a, b, rel in rep.pairs():
                assert rel == (Relation.UNDIRECTED if (a, b) in wrong else res.graph.relation(a, b))
            # after the repair every truly adjacent pair is adjacent (PC kept or the oracle restored it)
            assert not np.any(truth_skel & ~rep.skeleton())
    assert n_wrong > 0  # the check is not vacuous


# --- grades -------------------------------------------------------------------------------------
def test_grade_boundaries():
    g = strength_grade
    assert g(0.0) == g(0.001) == "strong dependence"
    assert g(0.0010001) == g(0.01) == "moderate dependence"
    assert g(0.0100001) == g(0.05) == "weak dependence"
    assert g(0.0500001) == g(0.2) == "no evidence (borderline)"
    assert g(0.2000001) == g(1.0) == "no evidence"
    assert g(1.0 + 1e-12) == "no evidence"
    assert g(np.float64(0.5)) == "no evidence"
    assert validate_grades(DEFAULT_GRADES) == tuple(DEFAULT_GRADES)
    custom = [[0.05, "dependent"], [1.0, "independent"]]  # YAML gives lists
    assert g(0.05, custom) == "dependent" and g(0.06, custom) == "independent"


@pytest.mark.parametrize("grades, fragment", [
    ([], "non-empty"),
    ("abc", "non-empty"),
    ([(0.01, "a"), (0.01, "b"), (1.0, "c")], "0.01"),
    ([(0.05, "a"), (0.01, "b"), (1.0, "c")], "0.01"),
    ([(0.05, "a"), (0.5, "b")], "0.5"),
    ([(0.05, "a"), ("x", "b")], "'x'"),
    ([(-0.1, "a"), (1.0, "b")], "-0.1"),
    ([(0.05, ""), (1.0, "b")], "''"),
    ([(0.05, "a", 3), (1.0, "b")], "(0.05, 'a', 3)"),
    ([(float("nan"), "a"), (1.0, "b")], "nan"),
])
def test_grade_table_errors(grades, fragment):
    with pytest.raises(ValueError) as err:
        validate_grades(grades)
    assert fragment in str(err.value)
    with pytest.raises(ValueError):
        strength_grade(0.5, grades)


@pytest.mark.parametrize("p", [-0.01, 1.01, float("nan"), "0.5", None])
def test_grade_pvalue_errors(p):
    with pytest.raises(ValueError) as err:
        strength_grade(p)
    assert repr(p) in str(err.value)


def test_pc_argument_errors():
    ci = DSeparationOracle(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="alpha"):
        pc(np.zeros((1, 3)), ci, alpha=1.5)
    with pytest.raises(ValueError, match="2-D"):
        pc(np.zeros(3), ci)
    with pytest.raises(ValueError, match="upper_p_bound"):
        pc(np.zeros((1, 3)), ci, grades=[(0.5, "a"), (0.4, "b")])
