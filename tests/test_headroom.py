"""Reference sweeps, BCA selection, the oracle, floors, bootstrap and the paper targets."""

import copy
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from heuresis.artifacts.io import Checkpoint
from heuresis.causal.algorithms.router import holm_adjust
from heuresis.causal.bootstrap import bootstrap_mean, paired_bootstrap
from heuresis.config.settings import Bootstrap
from heuresis.stages import headroom_targets as targets
from heuresis.stages.headroom import build_headroom, select_bca
from heuresis.stages.instances import instance_spec, write_split
from heuresis.stages.references import graph_of, load_references, run_shard, shard_indices, shards


# --- bootstrap -------------------------------------------------------------------------------
def test_bootstrap_matches_scipy_percentile_interval():
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 1.0, size=150)
    ours = bootstrap_mean(x, resamples=4000, seed=1)
    ref = stats.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", random_state=2).confidence_interval
    width = ref.high - ref.low
    assert ours.estimate == pytest.approx(x.mean())
    assert abs(ours.lo - ref.low) < 0.1 * width and abs(ours.hi - ref.high) < 0.1 * width
    # and the normal approximation mean +- 1.96 sd / sqrt(n)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert (ours.hi - ours.lo) / 2 == pytest.approx(half, rel=0.1)


def test_paired_bootstrap_keeps_the_pairing():
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 80)
    a, b = base + 0.05, base          # constant paired difference: a zero-width interval
    iv = paired_bootstrap(a, b, resamples=500, seed=3)
    assert iv.lo == pytest.approx(0.05) and iv.hi == pytest.approx(0.05)
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_mean([0.1, np.nan])
    with pytest.raises(ValueError, match="equal shapes"):
        paired_bootstrap([1, 2], [1])
    noisy = a + rng.normal(0, 0.05, 80)
    first = paired_bootstrap(noisy, b, resamples=500, seed=3)
    assert first == paired_bootstrap(noisy, b, resamples=500, seed=3)      # seeded: reproducible
    assert first != paired_bootstrap(noisy, b, resamples=500, seed=4)
    assert first.lo < first.estimate < first.hi


def test_holm_equals_statsmodels():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(2)
    for _ in range(50):
        p = rng.uniform(0, 0.2, size=int(rng.integers(1, 15)))
        assert np.allclose(holm_adjust(p), multipletests(p, method="holm")[1])


def test_distance_correlation_equals_dcor():
    dcor = pytest.importorskip("dcor")
    from heuresis.causal.algorithms.router import distance_correlation

    rng = np.random.default_rng(5)
    for _ in range(20):
        x = rng.normal(size=int(rng.integers(10, 300)))
        y = rng.choice([np.sin(3 * x), x ** 2, rng.normal(size=len(x)), 2 * x])
        y = y + 0.1 * rng.normal(size=len(x))
        assert distance_correlation(x, y) == pytest.approx(dcor.distance_correlation(x, y, method="naive"), abs=1e-12)
    assert distance_correlation(np.ones(5), np.arange(5.0)) == 0.0


# --- shards and checkpoints ----------------------------------------------------------------
def test_shards_cover_every_instance_once():
    for n, size in [(100, 25), (32, 25), (7, 10), (1, 1)]:
        got = [i for s in shards(n, size) for i in shard_indices(s, n, size)]
        assert got == list(range(n))
    with pytest.raises(ValueError, match="shard 4 is out of range"):
        shard_indices(4, 100, 25)


def test_checkpoint_resumes_and_ignores_stale_parts(tmp_path):
    art = tmp_path / "x.parquet"
    c = Checkpoint(art, key="k1")
    c.save(3, {"v": 1})
    assert 3 in Checkpoint(art, key="k1") and 3 not in Checkpoint(art, key="k2")
    c.clear()
    assert not (tmp_path / "x.parquet.parts").exists()


# --- a small real sweep ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep(quick_config, tmp_path_factory):
    """pc_fisherz (as the PC of the oracle), ges and notears on two families' dev and test."""
    cfg = copy.deepcopy(quick_config)
    cfg["instances"].update(d=6, n=300)
    root = tmp_path_factory.mktemp("sweep")
    families = ["lg", "gauntlet"]
    menu = {"pc_fisherz": {"alpha": 0.05}, "ges": {}, "notears": {"lambda1": 0.1, "w_threshold": 0.3}}
    paths = []
    for fam in families:
        for split, n in (("dev", 4), ("test", 5)):
            data, truth = root / "instances" / fam / split, root / "truth" / fam / split
            write_split(instance_spec(cfg, fam), fam, split, n, data, truth)
            for algo, params in menu.items():
                out = root / "references" / algo / fam / split / "shard-000.parquet"
                run_shard(algo, params, fam, split, list(range(n)), data, truth, out, grades=cfg["grades"])
                paths.append(out)
    return dict(root=root, paths=paths, families=families, menu=list(menu), cfg=cfg)


def test_reference_rows_have_scores_and_a_labelled_deletion_log(sweep):
    refs = load_references(sweep["paths"])
    assert len(refs) == 2 * (4 + 5) * 3 and set(refs["status"]) == {"ok"}
    pc = refs[refs["algorithm"] == "pc_fisherz"]
    for row in pc.itertuples():
        g = graph_of(row._asdict())
        for dl in row.deletions:
            i, j = int(dl["x"][1:]) - 1, int(dl["y"][1:]) - 1
            assert not g.skeleton()[i, j]                 # a deleted pair stays deleted
            assert dl["pvalue"] > 0.05 and dl["grade"].startswith("no evidence")
        assert row.n_tests > 0
    assert (refs[refs["algorithm"] != "pc_fisherz"]["deletions"].isna()).all()


def test_oracle_restores_exactly_the_wrong_deletions(sweep):
    refs = load_references(sweep["paths"])
    truth_dirs = {f: sweep["root"] / "truth" / f / "test" for f in sweep["families"]}
    _, scores = build_headroom(sweep["paths"], truth_dirs, sweep["menu"], [], random_restorations=5, seed=1,
                               pc_algorithm="pc_fisherz")
    test = refs[(refs["split"] == "test") & (refs["algorithm"] == "pc_fisherz")]
    from heuresis.stages.instances import load_truth
    for row in test.itertuples():
        truth = load_truth(truth_dirs[row.family])[row.instance]
        pc_skel = graph_of(row._asdict()).skeleton()
        true_skel = truth.dag.skeleton()
        assert all("wrong" not in d for d in row.deletions)           # the label lives with the truth only
        wrong = {(int(d["x"][1:]) - 1, int(d["y"][1:]) - 1) for d in row.deletions
                 if true_skel[int(d["x"][1:]) - 1, int(d["y"][1:]) - 1]}
        assert all(true_skel[i, j] for i, j in wrong)
        s = scores[(scores.family == row.family) & (scores.instance == row.instance)].set_index("method")
        # oracle recall = recall of pc + restored true edges; precision never drops
        tp_pc = (np.triu(pc_skel & true_skel, 1)).sum()
        expected_recall = (tp_pc + len(wrong)) / max(np.triu(true_skel, 1).sum(), 1)
        assert s.loc["oracle", "recall"] == pytest.approx(expected_recall)
        assert s.loc["oracle", "f1"] >= s.loc["pc_fisherz", "f1"] - 1e-12
        assert s.loc["oracle", "n_wrong_deletions"] == len(wrong)
        assert s.loc["empty", "f1"] == 0.0
        if not wrong:
            assert s.loc["random_restoration", "f1"] == pytest.approx(s.loc["pc_fisherz", "f1"])


def test_bca_selection_uses_dev_only(sweep):
    refs = load_references(sweep["paths"])
    sel = select_bca(refs, sweep["menu"])
    # rewrite every test score so that the worst dev algorithm looks perfect on test
    worst = sel[sel.scope == "all"].sort_values("dev_f1")["algorithm"].iloc[0]
    tampered = refs.copy()
    tampered.loc[(tampered.split == "test") & (tampered.algorithm == worst), "f1"] = 1.0
    tampered.loc[(tampered.split == "test") & (tampered.algorithm != worst), "f1"] = 0.0
    assert select_bca(tampered, sweep["menu"]).equals(sel)
    best = sel[(sel.scope == "all")].sort_values("dev_f1", ascending=False)["algorithm"].iloc[0]
    assert sel[(sel.scope == "all") & sel.chosen]["algorithm"].item() == best
    dev_mean = refs[(refs.split == "dev") & (refs.algorithm == best)]["f1"].mean()
    assert sel[(sel.scope == "all") & (sel.algorithm == best)]["dev_f1"].item() == pytest.approx(dev_mean)


def test_tables_and_figure(sweep, tmp_path):
    from heuresis.artifacts.report import save_figure, write_paper_table

    truth_dirs = {f: sweep["root"] / "truth" / f / "test" for f in sweep["families"]}
    selection, scores = build_headroom(sweep["paths"], truth_dirs, sweep["menu"], [], random_restorations=5,
                                       seed=1, pc_algorithm="pc_fisherz")
    scores.loc[scores.method == "pc_fisherz", "method"] = "pc_kci"   # the tables read PC-KCI rows
    fams = {f: sweep["cfg"]["families"][f] for f in sweep["families"]}
    boot = {"resamples": 200, "seed": 1, "level": 0.95}
    n2, _d2 = targets.table2(scores, fams, boot)
    assert list(n2["family"]) == ["lg", "gauntlet", "all"]
    n3, d3 = targets.table3(scores, selection, list(fams), boot, ["cdfm", "tabcausal"])
    fm = n3[n3.kind == "foundation_model"]
    assert len(fm) == 2 and fm["note"].str.contains("checkpoint not available offline").all()
    assert "not run" in d3["router Δ^r"].iloc[0]
    assert targets.FAILED_RUNS not in d3 and (n3[["bca_f_n_failed", "oracle_n_failed"]] == 0).all().all()
    for fam in ["lg", "gauntlet"]:
        r = n3.set_index("row").loc[fam]
        assert r.h_s == pytest.approx(r.f1_bca_f - scores[(scores.family == fam) & (scores.method == "bca_g")].f1.mean())
        assert r.h_r == pytest.approx(r.f1_oracle - r.f1_bca_f)
        assert r.h_r_lo <= r.h_r <= r.h_r_hi
    n11, d11 = targets.table11(scores, list(fams), boot)
    write_paper_table(n11, d11, tmp_path / "table11", caption="floors", provenance={"stage": "test"})
    assert (tmp_path / "table11.md").read_text().count("\n") >= 5
    assert "\\begin{tabular}" in (tmp_path / "table11.tex").read_text()
    assert json.loads(pq.read_schema(tmp_path / "table11.parquet").metadata[b"heuresis.provenance"])["stage"] == "test"
    fig, numbers = targets.figure1c(scores, list(fams), boot)
    save_figure(fig, tmp_path / "figure1c", provenance={"stage": "test"})
    assert (tmp_path / "figure1c.pdf").stat().st_size > 1000 and (tmp_path / "figure1c.png").stat().st_size > 1000
    assert set(numbers["method"]) == {"bca_g", "bca_f", "oracle"}


# --- failed reference runs ---------------------------------------------------------------------
CRASH = {("ges", "dev"): {0, 1, 2}, ("ges", "test"): {1}, ("pc_fisherz", "test"): {3}}


@pytest.fixture(scope="module")
def crashing_sweep(quick_config, tmp_path_factory):
    """pc_fisherz and ges on lg dev and test (4 each, d = 5), each crashing on the instances in CRASH."""
    import heuresis.causal.algorithms as algorithms
    from heuresis.stages.instances import load_data

    cfg = copy.deepcopy(quick_config)
    cfg["instances"].update(d=5, n=200)
    root = tmp_path_factory.mktemp("crashing")
    real = algorithms.make_algorithm
    paths = []
    for split in ("dev", "test"):
        data, truth = root / "instances/lg" / split, root / "truth/lg" / split
        write_split(instance_spec(cfg, "lg"), "lg", split, 4, data, truth)
        for algo, params in (("pc_fisherz", {"alpha": 0.05}), ("ges", {})):
            crash_on = [load_data(data, i) for i in CRASH.get((algo, split), ())]

            class Crashing:
                def __init__(self, inner):
                    self.inner = inner

                def run(self, x):
                    if any(x.shape == c.shape and np.array_equal(x, c) for c in crash_on):
                        raise FloatingPointError("scripted crash")
                    return self.inner.run(x)

            algorithms.make_algorithm = lambda name, **kw: Crashing(real(name, **kw))
            try:
                out = root / "references" / algo / "lg" / split / "shard-000.parquet"
                run_shard(algo, params, "lg", split, [0, 1, 2, 3], data, truth, out, grades=cfg["grades"])
            finally:
                algorithms.make_algorithm = real
            paths.append(out)
    return dict(root=root, paths=paths, cfg=cfg)


def test_a_crashed_reference_run_is_recorded_failed_and_empty(crashing_sweep):
    refs = load_references(crashing_sweep["paths"])
    got = {(r.algorithm, r.split, r.instance) for r in refs.itertuples() if r.status == "failed"}
    assert got == {(a, s, i) for (a, s), ii in CRASH.items() for i in ii}
    bad = refs[refs.status == "failed"]
    assert bad["error"].str.contains("FloatingPointError: scripted crash").all()
    assert all(not any(g) for g in bad["graph"]) and (bad["f1"] == 0).all() and (bad["n_edges"] == 0).all()


def test_bca_selection_counts_failures_and_scores_them_as_the_empty_graph(crashing_sweep, tmp_path):
    from heuresis.stages.headroom import BCA_FAILURE_RULE, BCA_RULE_KEY, load_selection, write_headroom

    refs = load_references(crashing_sweep["paths"])
    truth_dirs = {"lg": crashing_sweep["root"] / "truth/lg/test"}
    selection, scores = build_headroom(crashing_sweep["paths"], truth_dirs, ["pc_fisherz", "ges"], [],
                                       random_restorations=3, seed=1, pc_algorithm="pc_fisherz")
    dev = refs[refs.split == "dev"]
    # the rule, computed independently: a crash scores the empty graph's F1, which is 0 (no true positive)
    expected = {a: sum(0.0 if r.status == "failed" else r.f1 for r in g.itertuples()) / 4
                for a, g in dev.groupby("algorithm")}
    for scope in ("lg", "all"):
        sel = selection[selection.scope == scope].set_index("algorithm")
        assert sel.loc["ges", "dev_n_failed"] == 3 and sel.loc["pc_fisherz", "dev_n_failed"] == 0
        for a, v in expected.items():
            assert sel.loc[a, "dev_f1"] == pytest.approx(v) and sel.loc[a, "dev_n"] == 4
        best = max(["pc_fisherz", "ges"], key=lambda a: (expected[a], a == "pc_fisherz"))
        assert sel.index[sel.chosen].tolist() == [best]
    write_headroom(selection, scores, tmp_path / "sel.parquet", tmp_path / "scores.parquet", {})
    assert load_selection(tmp_path / "sel.parquet")["dev_n_failed"].tolist() == selection["dev_n_failed"].tolist()
    assert pq.read_schema(tmp_path / "sel.parquet").metadata[BCA_RULE_KEY.encode()].decode() == BCA_FAILURE_RULE
    # every test-score row says whether the run behind it failed: the oracle and random restoration
    # inherit PC's failure, and a failed PC run has no deletion counts (unknown, not 0)
    chosen = selection[selection.chosen & (selection.scope == "lg")]["algorithm"].item()
    test_failed = {a: ii for (a, s), ii in CRASH.items() if s == "test"}
    for r in scores.itertuples():
        behind = {"oracle": "pc_fisherz", "random_restoration": "pc_fisherz", "bca_g": chosen,
                  "bca_f": chosen}.get(r.method, r.method)
        assert r.failed == (r.instance in test_failed.get(behind, ())), (r.method, r.instance)
        if r.failed:
            assert r.f1 == 0.0
    pc3 = scores[(scores.instance == 3) & scores.method.isin(["pc_fisherz", "oracle", "random_restoration"])]
    assert pc3["n_wrong_deletions"].isna().all() and pc3["n_deletions"].isna().all()


def test_tables_2_3_11_and_figure_1c_show_failed_counts(crashing_sweep):
    truth_dirs = {"lg": crashing_sweep["root"] / "truth/lg/test"}
    selection, scores = build_headroom(crashing_sweep["paths"], truth_dirs, ["pc_fisherz", "ges"], [],
                                       random_restorations=3, seed=1, pc_algorithm="pc_fisherz")
    scores.loc[scores.method == "pc_fisherz", "method"] = "pc_kci"
    refs = load_references(crashing_sweep["paths"])
    fams = {"lg": crashing_sweep["cfg"]["families"]["lg"]}
    boot = {"resamples": 100, "seed": 1, "level": 0.95}
    chosen = selection[selection.chosen & (selection.scope == "lg")]["algorithm"].item()
    n_chosen_test = len(CRASH.get((chosen, "test"), ()))
    n_chosen_dev = len(CRASH.get((chosen, "dev"), ()))

    n2, d2 = targets.table2(scores, fams, boot)
    lg = n2.set_index("family").loc["lg"]
    ok_pc = refs[(refs.algorithm == "pc_fisherz") & (refs.split == "test") & (refs.status == "ok")]
    assert lg.n_failed == 1 and lg.n_instances == 4
    from heuresis.stages.instances import load_truth
    from heuresis.stages.references import labelled_log

    dags = {t.instance_id: t.dag for t in load_truth(truth_dirs["lg"]).values()}
    assert lg.wrong_deletions_mean == pytest.approx(np.mean([sum(d["wrong"] for d in labelled_log(r.deletions,
                                                                                               dags[r.instance_id]))
                                                             for r in ok_pc.itertuples()]))
    assert "PC-KCI failed on 1" in d2.set_index("family").loc["lg", "test instances"]

    n3, d3 = targets.table3(scores, selection, ["lg"], boot)
    r3, s3 = n3.set_index("row").loc["lg"], d3.set_index("family").loc["lg"]
    assert r3.bca_f_n_failed == n_chosen_test and r3.oracle_n_failed == 1 and r3.chosen_dev_n_failed == n_chosen_dev
    assert s3["F1(oracle)"].endswith("(1 failed)")
    assert s3["F1(BCA_f)"].endswith(f"({n_chosen_test} failed)") == bool(n_chosen_test)
    assert "oracle 1" in s3["failed test runs (scored as the empty graph)"]
    assert "empty graph" in r3.note

    n11, d11 = targets.table11(scores, ["lg"], boot)
    r11, s11 = n11.set_index("family").loc["lg"], d11.set_index("family").loc["lg"]
    assert (r11.pc_kci_n_failed, r11.oracle_n_failed, r11.random_restoration_n_failed,
            r11.empty_n_failed) == (1, 1, 1, 0)
    assert s11["PC-KCI"].endswith("(1 failed)") and "failed" not in s11["empty"]

    _, numbers = targets.figure1c(scores, ["lg"], boot)
    got = numbers.set_index(["family", "method"])["n_failed"].to_dict()
    assert got[("lg", "oracle")] == 1 and got[("lg", "bca_f")] == n_chosen_test


# --- the router's screen and its routing share (docs/design.md §4.4) ------------------------------------------
def test_router_screen_as_specified():
    """Steps 1-2 recomputed: Fisher-z PC's deletions, dCor (the dcor package) - |r| on the fixed
    300-row subsample, gap >= 0.15 flags, share >= tau = 0.2 of the deletions routes to KCI."""
    dcor = pytest.importorskip("dcor")
    from heuresis.causal.algorithms import make_algorithm
    from heuresis.causal.algorithms.pc import pc
    from heuresis.causal.ci import make_ci_test

    rng = np.random.default_rng(11)
    n = 600
    x1 = rng.normal(size=n)
    nonlinear = np.column_stack([x1, x1 ** 2 + 0.2 * rng.normal(size=n), np.abs(x1) + 0.2 * rng.normal(size=n),
                                 np.cos(2 * x1) + 0.2 * rng.normal(size=n), rng.normal(size=n)])
    linear = np.cumsum(rng.normal(size=(n, 5)), axis=1)
    router = make_algorithm("router", alpha=0.05, gap=0.15, tau=0.2, subsample=300, seed=0)
    for data, expect in ((nonlinear, "kci"), (linear, "fisherz")):
        data = (data - data.mean(0)) / data.std(0)
        fz = pc(data, make_ci_test("fisherz", data), 0.05)
        rows = np.sort(np.random.default_rng(0).choice(n, size=300, replace=False))
        gaps = [dcor.distance_correlation(data[rows, d.x], data[rows, d.y], method="naive")
                - abs(stats.pearsonr(data[rows, d.x], data[rows, d.y])[0]) for d in fz.deletions]
        share = np.mean(np.array(gaps) >= 0.15) if gaps else 0.0
        branch = "kci" if gaps and share >= 0.2 else "fisherz"
        scr = router.screen(data)
        assert scr["gaps"] == pytest.approx(gaps, abs=1e-9)
        assert scr["flagged_share"] == pytest.approx(share) and scr["branch"] == branch == expect
        res = router.run(data)
        assert res.details["branch"] == branch and res.details["flagged_share"] == pytest.approx(share)


def test_router_routing_share_in_scores_and_table3(sweep):
    import json as _json

    paths = list(sweep["paths"])
    for fam in sweep["families"]:
        data, truth = sweep["root"] / "instances" / fam / "test", sweep["root"] / "truth" / fam / "test"
        out = sweep["root"] / "references" / "router" / fam / "test" / "shard-000.parquet"
        run_shard("router", {"alpha": 0.05, "gap": 0.15, "tau": 0.2, "subsample": 300, "seed": 0}, fam, "test",
                  list(range(5)), data, truth, out, grades=sweep["cfg"]["grades"])
        paths.append(out)
    truth_dirs = {f: sweep["root"] / "truth" / f / "test" for f in sweep["families"]}
    selection, scores = build_headroom(paths, truth_dirs, sweep["menu"], ["router"], random_restorations=2,
                                       seed=1, pc_algorithm="pc_fisherz")
    refs = load_references(paths)
    routers = refs[refs.algorithm == "router"].set_index(["family", "instance"])
    rs = scores[scores.method == "router"]
    assert len(rs) == 10
    for r in rs.itertuples():
        branch = _json.loads(routers.loc[(r.family, r.instance), "details"])["branch"]
        assert r.routed_to_kci == (1.0 if branch == "kci" else 0.0)
    assert scores[scores.method != "router"]["routed_to_kci"].isna().all()
    scores.loc[scores.method == "pc_fisherz", "method"] = "pc_kci"
    fams = {f: sweep["cfg"]["families"][f] for f in sweep["families"]}
    n3, d3 = targets.table3(scores, selection, list(fams), Bootstrap(resamples=50, level=0.95, seed=1))
    by = n3.set_index("row")
    for fam in sweep["families"]:
        assert by.loc[fam, "router_kci_share"] == pytest.approx(rs[rs.family == fam].routed_to_kci.mean())
    assert by.loc["all", "router_kci_share"] == pytest.approx(rs.routed_to_kci.mean())
    assert d3["router → KCI"].str.endswith("%").all()
