"""Instance generation (docs/design.md §3) against closed forms and statistical expectations."""

import copy
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from heuresis.causal.graph import dag_to_cpdag, topological_order
from heuresis.causal.mechanisms import MECHANISMS
from heuresis.preflight import validate_config
from heuresis.stages.instances import (
    generate_instance,
    instance_seed,
    instance_spec,
    load_data,
    load_truth,
    sample_dag,
    var_sortability,
    write_split,
)


# --- graph priors ---------------------------------------------------------------------------
@pytest.mark.parametrize("d,k", [(10, 2.0), (8, 3.0), (15, 2.0)])
def test_er_expected_edge_count(d, k):
    """ER: the edge count is Binomial(d(d-1)/2, k/(d-1)); its mean is k d / 2."""
    rng = np.random.default_rng(0)
    draws = 3000
    counts = np.array([sample_dag(rng, d, "er", k, "random")[0].sum() for _ in range(draws)])
    pairs, p = d * (d - 1) / 2, k / (d - 1)
    mean, se = pairs * p, np.sqrt(pairs * p * (1 - p) / draws)
    assert abs(counts.mean() - mean) < 4 * se, (counts.mean(), mean, se)
    assert counts.var() == pytest.approx(pairs * p * (1 - p), rel=0.1)


@pytest.mark.parametrize("d,k", [(10, 2.0), (10, 4.0), (9, 3.0)])
def test_ba_edge_count(d, k):
    """BA: node t of the order attaches to min(m_t, t) nodes, m_t = floor(k/2) + Bernoulli(frac)."""
    rng = np.random.default_rng(1)
    draws = 2000
    counts = np.array([sample_dag(rng, d, "ba", k, "attachment")[0].sum() for _ in range(draws)])
    half = k / 2
    lo, frac = int(np.floor(half)), half - np.floor(half)
    expected = sum((1 - frac) * min(lo, t) + frac * min(lo + 1, t) for t in range(1, d))
    if frac == 0:
        assert np.all(counts == expected)
    else:
        assert abs(counts.mean() - expected) < 4 * counts.std() / np.sqrt(draws)


def test_ba_prefers_high_degree_nodes():
    """Preferential attachment: the earliest nodes of the order end with the highest degree."""
    rng = np.random.default_rng(2)
    d = 12
    deg_first, deg_last_half = [], []
    for _ in range(1500):
        adj, order = sample_dag(rng, d, "ba", 2.0, "attachment")
        deg = (adj + adj.T).sum(axis=0)
        deg_first.append(deg[order[1]])
        deg_last_half.append(deg[order[d // 2:]].mean())
    assert np.mean(deg_first) > 1.5 * np.mean(deg_last_half)


def test_ba_random_orientation_keeps_the_skeleton_and_draws_the_causal_order_uniformly():
    """``ba_orientation: random``: the attachment reading's skeleton (the same draws), oriented along a
    second uniformly random order; ``attachment`` gives out-trees (no collider), ``random`` colliders."""
    d, draws = 6, 3000
    firsts, colliders = Counter(), {"attachment": 0, "random": 0}
    for seed in range(draws):
        tree, _ = sample_dag(np.random.default_rng(seed), d, "ba", 2.0, "attachment")
        adj, order = sample_dag(np.random.default_rng(seed), d, "ba", 2.0, "random")
        assert np.array_equal(adj | adj.T, tree | tree.T)
        assert all(order.tolist().index(i) < order.tolist().index(j) for i, j in zip(*np.nonzero(adj)))
        firsts[int(order[0])] += 1
        colliders["attachment"] += int((tree.sum(axis=0) >= 2).any())
        colliders["random"] += int((adj.sum(axis=0) >= 2).any())
    assert stats.chisquare([firsts[k] for k in range(d)]).pvalue > 1e-3
    assert colliders["attachment"] == 0 and colliders["random"] > draws / 2, colliders
    with pytest.raises(ValueError, match="unknown BA orientation 'sideways'"):
        sample_dag(np.random.default_rng(0), d, "ba", 2.0, "sideways")


def test_dags_are_acyclic_over_a_uniform_order():
    rng = np.random.default_rng(3)
    firsts = Counter()
    for _ in range(1200):
        adj, order = sample_dag(rng, 6, "er", 2.0, "random")
        assert topological_order(adj) is not None
        assert all(order.tolist().index(i) < order.tolist().index(j) for i, j in zip(*np.nonzero(adj)))
        firsts[int(order[0])] += 1
    assert stats.chisquare([firsts[k] for k in range(6)]).pvalue > 1e-3


# --- mechanisms -----------------------------------------------------------------------------
def _constants(cfg, kind):
    return cfg["mechanisms"][kind]


def test_every_kind_in_the_spec_is_registered():
    assert set(MECHANISMS) == {"linear", "mlp", "mlp_hetero", "piecewise", "sigmoid", "sigmoid_hetero", "quadratic",
                               "abs", "fourier", "linear_t3"}


def test_linear_t3_residuals_are_heavy_tailed(paper_config):
    rng = np.random.default_rng(4)
    u = rng.standard_normal((40000, 2))
    _, noise_t, _ = MECHANISMS["linear_t3"].fn(rng, u, 1.0, _constants(paper_config, "linear_t3"))
    _, noise_g, _ = MECHANISMS["linear"].fn(rng, u, 1.0, _constants(paper_config, "linear"))
    assert np.var(noise_t) == pytest.approx(1.0, abs=0.15)        # scaled to unit variance
    assert stats.kurtosis(noise_t) > 3.0                           # t(3): infinite excess kurtosis
    assert abs(stats.kurtosis(noise_g)) < 0.2
    assert stats.jarque_bera(noise_t).pvalue < 1e-10


def _residual_variance_ratio(x, signal, z, bins=5):
    """Residual variance in the top vs bottom quantile bins of z (1 for homoscedastic noise)."""
    resid = x - signal
    edges = np.quantile(z, np.linspace(0, 1, bins + 1))
    idx = np.clip(np.searchsorted(edges, z, side="right") - 1, 0, bins - 1)
    v = np.array([resid[idx == b].var() for b in range(bins)])
    return v.max() / v.min()


@pytest.mark.parametrize("kind", ["mlp_hetero", "sigmoid_hetero"])
def test_hetero_kinds_have_parent_dependent_residual_variance(paper_config, kind):
    ratios = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        u = rng.standard_normal((4000, 1))
        signal, noise, _ = MECHANISMS[kind].fn(rng, u, None, _constants(paper_config, kind))
        ratios.append(_residual_variance_ratio(signal + noise, signal, u[:, 0]))
    homo = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        u = rng.standard_normal((4000, 1))
        signal, noise, _ = MECHANISMS["mlp"].fn(rng, u, 1.0, _constants(paper_config, "mlp"))
        homo.append(_residual_variance_ratio(signal + noise, signal, u[:, 0]))
    assert np.median(ratios) > 2.0
    assert np.median(homo) < 1.3


@pytest.mark.parametrize("kind", ["quadratic", "abs"])
def test_non_monotone_kinds_have_no_linear_correlation_with_a_symmetric_input(paper_config, kind):
    rng = np.random.default_rng(5)
    u = rng.standard_normal((50000, 1))
    signal, noise, _ = MECHANISMS[kind].fn(rng, u, 0.3, _constants(paper_config, kind))
    x = signal + noise
    assert abs(np.corrcoef(x, u[:, 0])[0, 1]) < 0.02
    assert abs(np.corrcoef(x, np.abs(u[:, 0]))[0, 1]) > 0.5      # yet strongly dependent


def test_linear_weights_and_noise_scale(paper_config):
    rng = np.random.default_rng(6)
    u = rng.standard_normal((20000, 3))
    signal, noise, params = MECHANISMS["linear"].fn(rng, u, 0.7, _constants(paper_config, "linear"))
    w = np.asarray(params["w"])
    coef, *_ = np.linalg.lstsq(u, signal + noise, rcond=None)
    assert np.allclose(coef, w, atol=0.03)
    assert np.all((np.abs(w) >= 0.5) & (np.abs(w) <= 2.0))
    assert np.std(signal + noise - u @ coef) == pytest.approx(0.7, rel=0.03)


def test_piecewise_slopes_are_independently_signed(paper_config):
    signs = Counter()
    for seed in range(400):
        rng = np.random.default_rng(seed)
        _, _, params = MECHANISMS["piecewise"].fn(rng, rng.standard_normal((10, 1)), 0.2,
                                                  _constants(paper_config, "piecewise"))
        signs[tuple(np.sign(params["slopes"]))] += 1
    assert len(signs) == 4 and stats.chisquare(list(signs.values())).pvalue > 1e-3


def test_family_draws_kinds_in_its_proportions(paper_config):
    cfg = copy.deepcopy(paper_config)
    cfg["families"]["skewed"] = {"root_noise": [1.0, 1.0],
                                 "kinds": {"sigmoid": {"weight": 3, "noise": [0.2, 0.3]},
                                           "abs": {"weight": 1, "noise": [0.2, 0.3]}}}
    cfg = validate_config(cfg)
    counts = Counter()
    spec = instance_spec(cfg, "skewed")
    for i in range(300):
        for node in generate_instance(spec, "skewed", "dev", i).nodes:
            if node["kind"] != "root":
                counts[node["kind"]] += 1
    total = counts["sigmoid"] + counts["abs"]
    assert stats.binomtest(counts["sigmoid"], total, 0.75).pvalue > 1e-3
    wild = Counter()
    spec = instance_spec(paper_config, "wild")
    for i in range(200):
        for node in generate_instance(spec, "wild", "dev", i).nodes:
            if node["kind"] != "root":
                wild[node["kind"]] += 1
    kinds = list(paper_config["families"]["wild"]["kinds"])
    assert set(wild) == set(kinds)
    assert stats.chisquare([wild[k] for k in kinds]).pvalue > 1e-3


# --- instances --------------------------------------------------------------------------------
def test_instances_standardized_anonymous_and_not_var_sortable(paper_config):
    """After standardization var-sortability is at chance (0.5); before it is well above for lg."""
    raw, std = [], []
    for family in paper_config["families"]:
        spec = instance_spec(paper_config, family)
        for i in range(30):
            inst = generate_instance(spec, family, "dev", i)
            assert np.allclose(inst.data.mean(axis=0), 0, atol=1e-12)
            assert np.allclose(inst.data.std(axis=0), 1, atol=1e-12)
            assert inst.data.shape == (600, 10)
            if inst.dag.any():
                std.append(var_sortability(inst.data, inst.dag))
                if family == "lg":
                    raw.append(inst.var_sortability_raw)
    assert abs(np.mean(std) - 0.5) < 0.02
    assert np.mean(raw) > 0.75      # the shortcut that standardization removes


def test_columns_are_renamed_in_a_fresh_random_order(paper_config):
    spec = instance_spec(paper_config, "lg")
    ranks = Counter(generate_instance(spec, "lg", "dev", i).nodes[0]["causal_rank"] for i in range(500))
    assert stats.chisquare([ranks[r] for r in range(10)]).pvalue > 1e-3


def test_truth_is_consistent(paper_config):
    spec = instance_spec(paper_config, "mixed")
    inst = generate_instance(spec, "mixed", "test", 3)
    names = inst.names
    for k, node in enumerate(inst.nodes):
        assert node["node"] == names[k]
        assert sorted(node["parents"]) == sorted(names[p] for p in np.flatnonzero(inst.dag[:, k]))
        assert (node["kind"] == "root") == (len(node["parents"]) == 0)
    pos = {n: t for t, n in enumerate(inst.causal_order)}
    assert all(pos[names[i]] < pos[names[j]] for i, j in zip(*np.nonzero(inst.dag)))


def test_seeds_disjoint_between_splits_and_stable_across_families():
    a = instance_seed(1, "lg", "dev", 0).generate_state(4)
    b = instance_seed(1, "lg", "test", 0).generate_state(4)
    c = instance_seed(1, "anm", "dev", 0).generate_state(4)
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="unknown split 'train'"):
        instance_seed(1, "lg", "train", 0)


def _write(cfg, family, split, n, tmp):
    write_split(instance_spec(cfg, family), family, split, n, tmp / "instances" / family / split,
                tmp / "truth" / family / split)


def test_same_seed_gives_byte_identical_data_and_growth_changes_nothing(paper_config, tmp_path):
    cfg = copy.deepcopy(paper_config)
    cfg["instances"].update(n=200, d=6)
    _write(cfg, "wild", "dev", 3, tmp_path / "a")
    _write(cfg, "wild", "dev", 3, tmp_path / "b")
    # a grown config: a new family and more instances
    grown = copy.deepcopy(cfg)
    grown["families"] = {"extra": {"root_noise": [1.0, 1.0], "kinds": {"abs": {"weight": 1, "noise": [0.1, 0.2]}}},
                         **cfg["families"]}
    grown = validate_config(grown)
    _write(grown, "wild", "dev", 5, tmp_path / "c")
    for i in range(3):
        rel = Path("instances/wild/dev") / f"{i:04d}" / "data.parquet"
        a, b, c = ((tmp_path / r / rel).read_bytes() for r in "abc")
        assert a == b == c
    ta = pq.read_table(tmp_path / "a/truth/wild/dev/graphs.parquet").to_pylist()
    tc = pq.read_table(tmp_path / "c/truth/wild/dev/graphs.parquet").to_pylist()[:3]
    assert ta == tc
    # dev and test never share data
    _write(cfg, "wild", "test", 3, tmp_path / "a")
    assert not np.allclose(load_data(tmp_path / "a/instances/wild/dev", 0),
                           load_data(tmp_path / "a/instances/wild/test", 0))


def test_data_files_carry_nothing_but_the_columns(paper_config, tmp_path):
    cfg = copy.deepcopy(paper_config)
    cfg["instances"].update(n=100, d=5)
    _write(cfg, "gauntlet", "test", 2, tmp_path)
    path = tmp_path / "instances/gauntlet/test/0001/data.parquet"
    schema = pq.read_schema(path)
    assert schema.names == ["X1", "X2", "X3", "X4", "X5"]
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    assert set(meta) == {"heuresis.schema", "heuresis.schema_version"}
    truth = load_truth(tmp_path / "truth/gauntlet/test")
    assert truth[1].cpdag == dag_to_cpdag(truth[1].dag.amat)
    prov = json.loads(pq.read_schema(tmp_path / "truth/gauntlet/test/graphs.parquet").metadata[b"heuresis.provenance"])
    assert prov["stage"] == "instances" and prov["seeds"]["entropy"] == cfg["seed"] and len(prov["config_digest"]) == 64


# --- the real-data family ------------------------------------------------------------------
def test_a_real_data_family_is_checked_at_start(paper_config, monkeypatch):
    """A `source` family gets the default transform; mixing it with simulation keys, a row count above
    the source's, or a missing package is refused naming the key."""
    import importlib.metadata

    from heuresis.causal import realdata
    from heuresis.config.loading import ConfigError

    cfg = copy.deepcopy(paper_config)
    cfg["families"]["sachs"] = {"source": "sachs"}
    assert validate_config(cfg)["families"]["sachs"] == {"source": "sachs", "transform": "log"}
    assert "transform" not in validate_config(cfg)["families"]["lg"]
    bad = copy.deepcopy(cfg)
    bad["families"]["sachs"]["kinds"] = {"linear": {"weight": 1, "noise": [0.5, 1.0]}}
    with pytest.raises(ConfigError, match=r"families\.sachs: a real-data family \(source 'sachs'\) takes no kinds"):
        validate_config(bad)
    bad = copy.deepcopy(cfg)
    bad["instances"]["n"] = 7467
    with pytest.raises(ConfigError, match=r"instances\.n: 7467 exceeds the 7466 rows of family 'sachs'"):
        validate_config(bad)

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    realdata._load.cache_clear()
    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    try:
        with pytest.raises(ConfigError, match=r"families\.sachs\.source: real-data source 'sachs' needs the "
                                              r"package cdt \(pip install 'heuresis\[real\]'\)"):
            validate_config(cfg)
    finally:
        realdata._load.cache_clear()
