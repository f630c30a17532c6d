"""Scripted repairs (Figure 8): AUC, F1 after restoration, dev-only thresholds, held-out classifier."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from heuresis.causal.graph import Graph
from heuresis.causal.metrics import adjacency_scores
from heuresis.stages import repairs

BOOT = {"resamples": 100, "seed": 3, "level": 0.95}


def synthetic_features(seed: int, families=("lg", "wild", "anm"), n_inst=6, pairs=8) -> pd.DataFrame:
    """Feature rows whose signals carry some information about the label, with confusion counts."""
    rng = np.random.default_rng(seed)
    rows = []
    for split in ("dev", "test"):
        for fam in families:
            for i in range(n_inst):
                wrong = rng.random(pairs) < 0.25
                tp, fp = int(rng.integers(4, 9)), int(rng.integers(0, 3))
                for k in range(pairs):
                    w = bool(wrong[k])
                    row = dict(family=fam, split=split, instance=i, is_pair=True, x=f"X{k}", y="X9", sepset=[],
                               level=int(rng.integers(0, 3)), grade="no evidence", wrong=w, pc_tp=tp, pc_fp=fp,
                               pc_fn=int(wrong.sum()) + 1)
                    for s in repairs.SIGNALS:
                        v = rng.normal(0.8 * w if repairs.DIRECTION[s] > 0 else -0.8 * w)
                        row[s] = float(np.round(v, 1))  # rounding makes ties, as counts do
                    rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(5))
def test_auc_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    y = rng.random(200) < 0.3
    s = np.round(rng.normal(size=200) + y, 1)  # with ties
    assert repairs.auc(s, y) == pytest.approx(roc_auc_score(y, s))
    assert np.isnan(repairs.auc(s, np.zeros(200, bool)))


def test_f1_after_equals_scoring_the_restored_graph():
    rng = np.random.default_rng(0)
    for _ in range(30):
        d = 7
        true = np.triu(rng.random((d, d)) < 0.35, 1).astype(np.int8)
        est = np.triu(rng.random((d, d)) < 0.35, 1).astype(np.int8)
        t, e = true | true.T, est | est.T
        deleted = [(i, j) for i in range(d) for j in range(i + 1, d) if not e[i, j]]
        pick = [p for p in deleted if rng.random() < 0.4]
        restored = est.copy()
        for i, j in pick:
            restored[i, j] = 1
        s0 = adjacency_scores(Graph.from_dag(true), Graph.from_dag(est))
        s1 = adjacency_scores(Graph.from_dag(true), Graph.from_dag(restored))
        a = sum(1 for i, j in pick if t[i, j])
        got = repairs.f1_after(s0.tp, s0.fp, s0.fn, a, len(pick) - a)
        assert float(got) == pytest.approx(s1.f1)


def test_threshold_maximises_dev_gain_by_brute_force():
    df = synthetic_features(1)
    dev = df[df["split"] == "dev"].reset_index(drop=True)
    s = repairs.oriented(dev, "stability")
    t = repairs.choose_threshold(s, dev)
    best = max([0.0] + [float(repairs.threshold_gain(s, dev, c).mean()) for c in np.unique(s)])
    got = 0.0 if np.isinf(t) else float(repairs.threshold_gain(s, dev, t).mean())
    assert got == pytest.approx(best)


def test_threshold_is_chosen_on_dev_only():
    df = synthetic_features(2)
    a = repairs.evaluate(df, BOOT, seed=0)
    changed = df.copy()
    test = changed["split"] == "test"
    rng = np.random.default_rng(9)
    for s in repairs.SIGNALS:
        changed.loc[test, s] = rng.normal(size=int(test.sum()))
    changed.loc[test, "wrong"] = rng.random(int(test.sum())) < 0.5
    b = repairs.evaluate(changed, BOOT, seed=0)
    assert np.array_equal(a["threshold"].to_numpy(), b["threshold"].to_numpy())
    assert not np.allclose(a["f1_change"].to_numpy(), b["f1_change"].to_numpy())
    # and changing dev does change the thresholds
    changed2 = df.copy()
    dev = changed2["split"] == "dev"
    changed2.loc[dev, "wrong"] = ~changed2.loc[dev, "wrong"].astype(bool)
    c = repairs.evaluate(changed2, BOOT, seed=0)
    assert not np.array_equal(a["threshold"].to_numpy(), c["threshold"].to_numpy())


def test_classifier_holds_the_family_out():
    df = synthetic_features(3)
    dev = df[df["split"] == "dev"].reset_index(drop=True)
    test = df[df["split"] == "test"].reset_index(drop=True)
    p = repairs.classifier_scores(dev, test, seed=0)
    noisy = dev.copy()
    own = noisy["family"] == "wild"
    noisy.loc[own, "wrong"] = ~noisy.loc[own, "wrong"].astype(bool)
    noisy.loc[own, list(repairs.SIGNALS)] = 0.0
    q = repairs.classifier_scores(noisy, test, seed=0)
    wild = (test["family"] == "wild").to_numpy()
    assert np.array_equal(p[wild], q[wild])  # wild's own dev rows never train wild's model
    assert not np.array_equal(p[~wild], q[~wild])


def test_oracle_row_restores_every_wrong_deletion():
    df = synthetic_features(4)
    out = repairs.evaluate(df, BOOT, seed=0).set_index("method")
    test = df[df["split"] == "test"]
    inst = test.groupby(["family", "instance"]).agg(tp=("pc_tp", "first"), fp=("pc_fp", "first"),
                                                     fn=("pc_fn", "first"), a=("wrong", "sum"))
    f1 = lambda tp, fp, fn: 2 * tp / (2 * tp + fp + fn)  # noqa: E731
    gain = f1(inst.tp + inst.a, inst.fp, inst.fn - inst.a) - f1(inst.tp, inst.fp, inst.fn)
    assert out.loc["oracle", "f1_change"] == pytest.approx(gain.mean())
    assert out.loc["oracle", "restored"] == int(test["wrong"].sum())


def test_alternative_sets():
    skel = np.zeros((5, 5), bool)
    for a, b in [(0, 2), (0, 3), (1, 3), (1, 4)]:
        skel[a, b] = skel[b, a] = True
    alts = repairs.alternative_sets(skel, 0, 1, (3,), max_set=2, max_alternatives=20)
    assert alts == [(), (2,), (4,), (2, 3), (3, 4)]
    assert repairs.alternative_sets(skel, 0, 1, (), max_set=1, max_alternatives=2) == [(2,), (3,)]


def test_figure8_built_by_the_tiny_workflow(tiny_run):
    from heuresis.stages.repairs import load_features

    feats = load_features(sorted((tiny_run / "results/repairs/features").rglob("*.parquet")))
    summary = pd.read_parquet(tiny_run / "results/repairs/figure8.parquet").set_index("method")
    test = feats[(feats["split"] == "test") & feats["is_pair"]]
    for s in repairs.SIGNALS:
        y = test["wrong"].astype(bool).to_numpy()
        if y.all() or not y.any():
            assert np.isnan(summary.loc[s, "auc"])
        else:
            expected = roc_auc_score(y, repairs.DIRECTION[s] * test[s].to_numpy(dtype=float))
            assert summary.loc[s, "auc"] == pytest.approx(expected)
    assert (tiny_run / "results/figures/figure8.png").stat().st_size > 1000


def test_classifier_config_errors_name_the_key(quick_config):
    from heuresis.config import ConfigError, merge_configs
    from heuresis.preflight import validate_config

    with pytest.raises(ConfigError, match=r"repairs.classifier.n_trees"):
        validate_config(merge_configs(quick_config, {"repairs": {"classifier": {"n_trees": 5}}}))
    with pytest.raises(ConfigError, match=r"repairs.subsample_fraction"):
        validate_config(merge_configs(quick_config, {"repairs": {"subsample_fraction": 0}}))
