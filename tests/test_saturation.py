"""Figure 1b's pipeline on a tiny setting, checked against independent recomputations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats
from sklearn.metrics import f1_score

from heuresis.causal.networks import load_network
from heuresis.config import ConfigError, merge_configs
from heuresis.config.settings import Bootstrap
from heuresis.preflight import validate_config
from heuresis.stages.saturation import load_saturation, run_network, saturation_settings, saturation_summary, simulate


@pytest.fixture(scope="module")
def settings(quick_config):
    cfg = merge_configs(quick_config, {"saturation": {"n": 150, "datasets": 2,
                                                      "algorithms": ["pc_fisherz", "pc_kci"]}})
    return saturation_settings(validate_config(cfg))


@pytest.fixture(scope="module")
def table(settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("sat") / "asia.parquet"
    run_network("asia", settings, out)
    return load_saturation([out])


def _skeleton_upper(flat, d):
    m = np.asarray(flat).reshape(d, d) != 0
    m = m | m.T
    return m[np.triu_indices(d, 1)]


def test_rows_and_anonymized_truth(table):
    net = load_network("asia")
    assert sorted(table["method"].unique()) == ["oracle", "pc_fisherz", "pc_kci"]
    assert len(table) == 2 * 3 and (table["status"] == "ok").all()
    for r in table.itertuples():
        perm = np.asarray(r.permutation)
        assert sorted(perm) == list(range(net.d))
        dag = np.asarray(r.dag).reshape(net.d, net.d)
        assert np.array_equal(dag, np.asarray(net.adjacency)[np.ix_(perm, perm)])
    # the two datasets are anonymized by different permutations
    assert table.groupby("dataset")["permutation"].first().map(tuple).nunique() == 2


def test_f1_recomputed_with_sklearn(table):
    for r in table.itertuples():
        truth, est = _skeleton_upper(r.dag, r.d), _skeleton_upper(r.graph, r.d)
        assert r.f1 == pytest.approx(f1_score(truth, est, zero_division=1.0))


def test_oracle_is_pc_kci_plus_every_missed_true_edge(table):
    for _k, part in table.groupby("dataset"):
        pc, oracle = (part[part["method"] == m].iloc[0] for m in ("pc_kci", "oracle"))
        d = int(pc["d"])
        expected = _skeleton_upper(pc["graph"], d) | _skeleton_upper(pc["dag"], d)
        assert np.array_equal(_skeleton_upper(oracle["graph"], d), expected)
        assert oracle["recall"] == 1.0
        missed = int((_skeleton_upper(pc["dag"], d) & ~_skeleton_upper(pc["graph"], d)).sum())
        assert pc["n_wrong_deletions"] == missed


def test_pc_fisherz_skeleton_equals_causallearn(table, settings):
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    for k, part in table.groupby("dataset"):
        data, dag, _ = simulate("asia", int(k), n=settings["n"], seed=settings["seed"], family=settings["family"],
                                mechanisms=settings["mechanisms"])
        row = part[part["method"] == "pc_fisherz"].iloc[0]
        assert np.array_equal(np.asarray(row["dag"]).reshape(dag.shape), dag)
        cg = cl_pc(data, 0.05, "fisherz", stable=True, show_progress=False)
        g = cg.G.graph
        cl_skel = (g != 0) | (g.T != 0)
        assert np.array_equal(_skeleton_upper(row["graph"], row["d"]), cl_skel[np.triu_indices(dag.shape[0], 1)])


def test_data_linear_gaussian_standardized_deterministic(settings):
    data, dag, perm = simulate("sachs", 0, n=5000, seed=settings["seed"], family=settings["family"],
                               mechanisms=settings["mechanisms"])
    assert np.allclose(data.mean(axis=0), 0, atol=1e-9) and np.allclose(data.std(axis=0), 1)
    assert np.all(np.abs(stats.kurtosis(data, axis=0)) < 0.3)  # linear combinations of Gaussians
    # every non-root is a linear function of its parents plus independent noise: its OLS residual
    # (the noise) is uncorrelated with every root, a non-descendant of every node
    roots = np.flatnonzero(dag.sum(axis=0) == 0)
    for j in np.flatnonzero(dag.sum(axis=0) > 0):
        pa = np.flatnonzero(dag[:, j])
        coef, *_ = np.linalg.lstsq(data[:, pa], data[:, j], rcond=None)
        resid = data[:, j] - data[:, pa] @ coef
        for r in roots:
            assert abs(np.corrcoef(resid, data[:, r])[0, 1]) < 0.06
    again, _, perm2 = simulate("sachs", 0, n=5000, seed=settings["seed"], family=settings["family"],
                               mechanisms=settings["mechanisms"])
    assert np.array_equal(data, again) and np.array_equal(perm, perm2)


def test_summary_means(table):
    s = saturation_summary(table, ["asia"], ["pc_fisherz", "oracle"], {"resamples": 200, "seed": 1, "level": 0.95})
    for r in s.itertuples():
        assert r.f1 == pytest.approx(table[table["method"] == r.method]["f1"].mean())
        assert r.f1_lo <= r.f1 <= r.f1_hi


def test_config_errors_name_the_key(quick_config):
    bad = merge_configs(quick_config, {"saturation": {"family": "nope", "algorithms": ["pc_kci", "magic"]}})
    with pytest.raises(ConfigError) as err:
        validate_config(bad)
    assert "saturation.family" in str(err.value) and "saturation.algorithms" in str(err.value)
    with pytest.raises(ConfigError, match="saturation.networks"):
        validate_config(merge_configs(quick_config, {"saturation": {"networks": ["hailfinder"]}}))


def test_figure1b_built_by_the_tiny_workflow(tiny_run):
    for ext in ("pdf", "png"):
        assert (tiny_run / f"results/figures/figure1b.{ext}").stat().st_size > 1000
    df = load_saturation(sorted((tiny_run / "results/saturation").glob("*.parquet")))
    assert set(df["network"]) == {"cancer", "asia"} and set(df["method"]) == {"pc_fisherz", "pc_kci", "ges", "oracle"}
    tab = pq.read_table(tiny_run / "results/tables/figure1b.parquet").to_pandas().set_index("network")
    for net in ("cancer", "asia"):
        mean = {m: df[(df.network == net) & (df.method == m)]["f1"].mean() for m in ("pc_kci", "ges", "oracle")}
        gain = mean["oracle"] - mean["pc_kci"]
        got = tab.loc[net, "ges_share_of_oracle_gain"]
        assert (gain <= 0 and np.isnan(got)) or got == pytest.approx((mean["ges"] - mean["pc_kci"]) / gain)
    assert "GES share of oracle" in (tiny_run / "results/tables/figure1b.md").read_text()


def test_ges_share_of_oracle_gain():
    from heuresis.stages.saturation import figure1b_table, oracle_gain_share

    # mean F1 per network and method (docs/stages.md's paper-scale Figure 1b numbers for insurance, cancer)
    f1 = {"insurance": {"pc_fisherz": 0.56, "pc_kci": 0.54, "ges": 0.68, "oracle": 0.94},
          "cancer": {"pc_fisherz": 0.90, "pc_kci": 0.82, "ges": 0.99, "oracle": 0.96},
          "flat": {"pc_fisherz": 0.9, "pc_kci": 0.9, "ges": 0.8, "oracle": 0.9}}
    summary = pd.DataFrame([dict(network=n, method=m, d=5, n_arcs=4, datasets=10, failed=0, f1=v, f1_lo=v, f1_hi=v)
                            for n, ms in f1.items() for m, v in ms.items()])
    share = oracle_gain_share(summary, "ges")
    assert share["insurance"] == pytest.approx((0.68 - 0.54) / (0.94 - 0.54))   # 35%
    assert share["cancer"] == pytest.approx((0.99 - 0.82) / (0.96 - 0.82)) and share["cancer"] > 1
    assert np.isnan(share["flat"])                                                 # the oracle gains nothing
    assert oracle_gain_share(summary, "pc_fisherz")["insurance"] == pytest.approx(0.02 / 0.40)
    numbers, display = figure1b_table(summary, list(f1), ["pc_fisherz", "pc_kci", "ges", "oracle"])
    assert list(numbers["network"]) == list(f1)
    assert numbers.set_index("network").loc["insurance", "f1_ges"] == 0.68
    col = "GES share of oracle − PC-KCI"
    assert list(display[col]) == ["35%", "121%", "n/a"]


def test_figure1b_table_on_small_data(table):
    from heuresis.stages.saturation import figure1b_table

    s = saturation_summary(table, ["asia"], ["pc_fisherz", "pc_kci", "oracle"],
                           Bootstrap(resamples=50, level=0.95, seed=1))
    numbers, _ = figure1b_table(s, ["asia"], ["pc_fisherz", "pc_kci", "oracle"], share_of="pc_fisherz")
    mean = {m: table[table["method"] == m]["f1"].mean() for m in ("pc_fisherz", "pc_kci", "oracle")}
    expect = (mean["pc_fisherz"] - mean["pc_kci"]) / (mean["oracle"] - mean["pc_kci"]) \
        if mean["oracle"] > mean["pc_kci"] else np.nan
    got = numbers["pc_fisherz_share_of_oracle_gain"].iloc[0]
    assert (np.isnan(expect) and np.isnan(got)) or got == pytest.approx(expect)
