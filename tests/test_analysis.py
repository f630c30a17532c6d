"""The analysis stage: bootstrap behaviour on simulated data, drill-down and trace attribution on
hand-made cases with known answers, and every analysis table recomputed from the Parquet inputs
of the tiny workflow run by short independent computations (not by calling the package)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tinyflow import ANALYSIS_FIGURES, ANALYSIS_TABLES

from heuresis.causal.bootstrap import bootstrap_mean, bootstrap_ratio, paired_bootstrap, unpaired_bootstrap
from heuresis.causal.graph import Graph, Relation
from heuresis.stages.analysis.scores import drill_down, merge_by_k, unsupported
from heuresis.stages.analysis.tables import merge_star, mutual_information


# --- bootstrap ------------------------------------------------------------------------------------
@pytest.mark.parametrize("draw", [lambda r, n: r.normal(0.3, 1.0, n), lambda r, n: r.exponential(0.3, n)],
                         ids=["normal", "exponential"])
def test_bootstrap_interval_covers_the_true_mean_at_about_the_nominal_rate(draw):
    rng = np.random.default_rng(0)
    trials, n = 400, 40
    hits = 0
    for t in range(trials):
        iv = bootstrap_mean(draw(rng, n), resamples=400, seed=t, level=0.95)
        hits += iv.lo <= 0.3 <= iv.hi
    # percentile intervals undercover slightly at n = 40 (about 0.93); 400 trials: sd ~ 0.012
    assert 0.89 <= hits / trials <= 0.98, hits / trials


def test_paired_interval_is_narrower_than_unpaired_on_correlated_data():
    rng = np.random.default_rng(1)
    instance = rng.normal(0, 1, 50)                  # per-instance difficulty shared by both methods
    a = instance + 0.1 + rng.normal(0, 0.1, 50)
    b = instance + rng.normal(0, 0.1, 50)
    paired = paired_bootstrap(a, b, resamples=2000, seed=2)
    unpaired = unpaired_bootstrap(a, b, resamples=2000, seed=2)
    assert paired.estimate == pytest.approx(unpaired.estimate)
    assert (paired.hi - paired.lo) < 0.3 * (unpaired.hi - unpaired.lo)
    assert paired.lo > 0 > unpaired.lo                # only the paired interval sees the +0.1 gain


def test_ratio_bootstrap_is_the_pooled_ratio_and_says_nan_without_a_denominator():
    iv = bootstrap_ratio([1, 0, 2], [2, 1, 2], resamples=500, seed=0)
    assert iv.estimate == pytest.approx(3 / 5)
    assert 0 <= iv.lo <= iv.estimate <= iv.hi <= 1
    assert math.isnan(bootstrap_ratio([0, 0], [0, 0]).estimate)


# --- drill-down and trace attribution on hand-made cases ----------------------------------------
def _g(d: int, edges: str) -> Graph:
    """Graph over X1..Xd from 'X1->X2, X2--X3' notation."""
    g = Graph.empty(d)
    for e in filter(None, (s.strip() for s in edges.split(","))):
        rel = Relation.FORWARD if "->" in e else Relation.UNDIRECTED
        x, y = e.replace("->", " ").replace("--", " ").split()
        g.set(int(x[1:]) - 1, int(y[1:]) - 1, rel)
    return g


def _deletions(pc: Graph, truth: Graph) -> list[dict]:
    """A deletion log for every pair PC-KCI left out, labelled by the true skeleton."""
    s, t = pc.skeleton(), truth.skeleton()
    return [{"x": f"X{i + 1}", "y": f"X{j + 1}", "wrong": bool(t[i, j])}
            for i in range(pc.d) for j in range(i + 1, pc.d) if not s[i, j]]


def test_drill_down_counts_on_a_hand_made_case():
    truth = _g(5, "X1->X2, X2->X3, X3->X4, X1->X5")
    pc = _g(5, "X1->X2, X2--X3, X4->X5")                       # missed X3-X4 and X1-X5; extra X4-X5
    log = _deletions(pc, truth)
    assert len(log) == 7 and sum(d["wrong"] for d in log) == 2
    # the agent restores X3-X4 (right), X1-X3 (harmful), drops X4-X5, re-orients X2-X3, keeps X1->X2
    agent = _g(5, "X1->X2, X2->X3, X3--X4, X1--X3")
    dd = drill_down(agent, pc, log)
    assert (dd.n_deleted, dd.n_wrong_deleted) == (7, 2)
    assert (dd.recovered, dd.harmful, dd.pc_edges_dropped, dd.reoriented) == (1, 1, 1, 1)
    assert dd.recovered_pairs == ((2, 3),)
    # PC-KCI's own output: nothing restored, dropped or re-oriented
    same = drill_down(pc, pc, log)
    assert (same.recovered, same.harmful, same.pc_edges_dropped, same.reoriented) == (0, 0, 0, 0)


def test_merge_by_k_and_unsupported_on_a_hand_made_case():
    truth = _g(4, "X1->X2, X2->X3, X3->X4, X1->X4")           # 4 true edges
    pc = _g(4, "X1--X2, X2--X3")                               # TP 2, FN 2: F1 = 4/6
    a = _g(4, "X3->X4, X1->X3")                                # proposes X3-X4 (true), X1-X3 (false)
    b = _g(4, "X3--X4, X1--X4")                                # X3-X4 (true), X1-X4 (true)
    c = _g(4, "X3--X4")
    f1 = merge_by_k(truth, pc, [a, b, c], k_max=4)
    # k=1: + X3-X4, X1-X3, X1-X4 -> TP 4, FP 1: 8/9; k=2,3: + X3-X4 -> TP 3, FN 1: 6/7; k=4: PC alone 4/6
    assert f1 == pytest.approx([8 / 9, 6 / 7, 6 / 7, 4 / 6])
    assert merge_by_k(truth, pc, [], k_max=2) == pytest.approx([4 / 6, 4 / 6])
    # the agent recovered X3-X4 (proposed by a, b, c) and X1-X4 (only b): with b not run, one unsupported
    recovered = [(2, 3), (0, 3)]
    assert unsupported(recovered, [pc, a, b, c]) == 0
    assert unsupported(recovered, [pc, a, c]) == 1
    assert unsupported(recovered, [pc]) == 2


def test_merge_star_chooses_k_in_hindsight():
    part = pd.DataFrame({"merge_f1": [[0.5, 0.9, 0.1], [0.7, 0.6, 0.1]]})
    k, values = merge_star(part)
    assert k == 2 and list(values) == [0.9, 0.6]            # mean 0.75 beats 0.6 at k = 1


def test_mutual_information_of_family_and_tool():
    determined = pd.DataFrame({"family": ["lg", "wild"], "tool_counts": ['{"a": 3}', '{"b": 3}']})
    assert mutual_information(determined) == pytest.approx(1.0)   # one bit: the tool names the family
    independent = pd.DataFrame({"family": ["lg", "wild"], "tool_counts": ['{"a": 2, "b": 1}', '{"a": 4, "b": 2}']})
    assert mutual_information(independent) == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(mutual_information(determined.iloc[:1]))


# --- every table recomputed from the tiny run's Parquet inputs -------------------------------------
def _read(p: Path) -> pd.DataFrame:
    return pd.read_parquet(p)


@pytest.fixture(scope="module")
def run(tiny_run) -> dict:
    """The tiny run's raw inputs (episodes, calls, PC-KCI references, headroom) read with pandas only."""
    res = tiny_run / "results"
    eps = pd.concat([_read(p) for p in sorted(res.glob("episodes/*/*/*/*/shard-*[0-9].parquet"))], ignore_index=True)
    calls = pd.concat([_read(p) for p in sorted(res.glob("episodes/*/*/*/*/shard-*.calls.parquet"))], ignore_index=True)
    refs = pd.concat([_read(p) for p in sorted(res.glob("references/pc_kci/*/*/shard-*.parquet"))], ignore_index=True)
    head = _read(res / "headroom/test_scores.parquet")
    tables = {t: _read(res / f"tables/{t}.parquet") for t in ANALYSIS_TABLES}
    return dict(root=tiny_run, eps=eps[eps["split"] == "test"], calls=calls, refs=refs, head=head, tables=tables)


def _edge_set(flat, d: int) -> set[tuple[int, int]]:
    a = np.asarray(flat).reshape(d, d)
    return {(i, j) for i in range(d) for j in range(i + 1, d) if a[i, j] or a[j, i]}


def _lines_to_set(lines) -> set[tuple[int, int]]:
    out = set()
    for ln in lines:
        x, y = ln.replace("->", " ").replace("--", " ").split()
        i, j = int(x[1:]) - 1, int(y[1:]) - 1
        out.add((min(i, j), max(i, j)))
    return out


def _f1(est: set, true: set) -> float:
    tp = len(est & true)
    return 2 * tp / (2 * tp + len(est - true) + len(true - est)) if (est or true) else 1.0


@pytest.fixture(scope="module")
def per_episode(run) -> pd.DataFrame:
    """Independent per-episode quantities from the raw tables (sets of pairs, no package code)."""
    eps, refs, head, calls = run["eps"], run["refs"], run["head"], run["calls"]
    refs = refs.set_index(["family", "split", "instance"])
    bca_f = head[head["method"] == "bca_f"].set_index(["family", "instance"])["f1"]
    truth_dir = run["root"] / "results/truth"
    truths = {}
    for p in truth_dir.glob("*/test/graphs.parquet"):
        for r in _read(p).itertuples():
            truths[(r.family, r.instance)] = _edge_set(r.dag, r.d)
    skeletons = {(r.family, p.parent.name, r.instance): _edge_set(r.dag, r.d)
                 for p in truth_dir.glob("*/*/graphs.parquet") for r in _read(p).itertuples()}
    rows = []
    for e in eps.itertuples():
        d = int(round(math.sqrt(len(e.graph))))
        g = _edge_set(e.graph, d)
        ref = refs.loc[(e.family, e.split, e.instance)]
        pc = _edge_set(ref["graph"], d)
        true = skeletons[(e.family, e.split, e.instance)]   # the hidden label is read from the truth, not the references
        logged = {_lines_to_set([f"{x['x']}--{x['y']}"]).pop() for x in ref["deletions"]}
        wrong, right = logged & true, logged - true
        mine = calls[(calls["episode_id"] == e.episode_id) & (calls["tool"] == "run_algorithm") & calls["ok"]]
        outs = {}
        for c in mine.sort_values(["turn", "index"]).itertuples():
            det = json.loads(c.details)
            outs.setdefault(det["algorithm"], _lines_to_set(det["edges"]))
        others = [s for a, s in outs.items() if a != "pc_kci"]
        truth = truths[(e.family, e.instance)]
        merge = []
        for k in range(1, 7):
            votes = {p for p in set().union(*others) if sum(p in s for s in others) >= k} if others else set()
            merge.append(_f1(pc | votes, truth))
        rows.append(dict(agent=e.agent, condition_id=e.condition_id, family=e.family, instance=e.instance,
                         guided=e.guided, toolbox=e.toolbox, finished=e.finished, f1=e.f1, pc_f1=e.pc_kci_f1,
                         delta_r=e.f1 - bca_f.loc[(e.family, e.instance)], recovered=len(g & wrong),
                         harmful=len(g & right), wrong=len(wrong), returns_pc=np.array_equal(e.graph, ref["graph"]),
                         wall=bool(e.exhausted), termination=e.termination, merge=merge,
                         unsupported=len({p for p in g & wrong if not any(p in s for s in outs.values())})))
    return pd.DataFrame(rows)


def _scoped(df: pd.DataFrame, agent: str, cond: str, family: str) -> pd.DataFrame:
    out = df[(df["agent"] == agent) & (df["condition_id"] == cond)]
    return out if family == "all" else out[out["family"] == family]


pytestmark_slow = pytest.mark.slow


@pytestmark_slow
def test_every_analysis_target_is_built(run):
    for t in ANALYSIS_TABLES:
        for ext in ("parquet", "md", "tex"):
            assert (run["root"] / f"results/tables/{t}.{ext}").stat().st_size > 0
    for f in ANALYSIS_FIGURES:
        for ext in ("pdf", "png"):
            assert (run["root"] / f"results/figures/{f}.{ext}").stat().st_size > 1000
    # the episodes of the tiny grids: every agent of the config appears
    assert set(run["tables"]["table6"]["agent"]) == {"shortcut", "merge", "evidence"}
    for t in ANALYSIS_TABLES:       # no table is empty for want of a condition
        assert "in this config" not in (run["root"] / f"results/tables/{t}.md").read_text()


@pytestmark_slow
def test_table6_f1_and_residual_gain_recomputed(run, per_episode):
    t6 = run["tables"]["table6"]
    assert len(t6) == len(per_episode.groupby(["agent", "condition_id"])) * 2      # lg and all
    for r in t6.itertuples():
        part = _scoped(per_episode, r.agent, r.condition_id, r.family)
        assert r.n == len(part)
        assert r.f1 == pytest.approx(part["f1"].mean())
        assert r.delta_r == pytest.approx(part["delta_r"].mean())
        assert r.delta_r_lo <= r.delta_r + 1e-12 and r.delta_r <= r.delta_r_hi + 1e-12
        assert r.truncation_rate == pytest.approx(1 - part["finished"].mean())
        fin = part[part["finished"]]
        if len(fin):
            assert r.f1_finished == pytest.approx(fin["f1"].mean())
        else:
            assert math.isnan(r.f1_finished) and r.note == "no finished episode"


@pytestmark_slow
def test_table4_merge_star_and_unsupp_recomputed(run, per_episode):
    for r in run["tables"]["table4"].itertuples():
        part = _scoped(per_episode, r.agent, r.condition_id, r.family)
        best = []
        for _, fam in part.groupby("family"):
            m = np.array(fam["merge"].tolist())
            best += list(m[:, int(np.argmax(m.mean(axis=0)))])
        assert r.merge_star == pytest.approx(np.mean(best))
        assert r.agent_minus_merge_star == pytest.approx(part["f1"].mean() - np.mean(best))
        assert r.recovered == part["recovered"].sum()
        assert r.recovered_unsupported == part["unsupported"].sum()
        if part["recovered"].sum():
            assert r.unsupp == pytest.approx(part["unsupported"].sum() / part["recovered"].sum())
        else:
            assert math.isnan(r.unsupp) and "no wrongly deleted edge restored" in r.note


@pytestmark_slow
def test_table7_gain_over_in_episode_pc_kci_recomputed(run, per_episode):
    for r in run["tables"]["table7"].itertuples():
        part = _scoped(per_episode, r.agent, r.condition_id, r.family)
        if part["guided"].all():    # the guided start is PC-KCI's reference output
            assert r.n_with_episode_pc == len(part)
            assert r.f1_gain == pytest.approx((part["f1"] - part["pc_f1"]).mean())


@pytestmark_slow
def test_table8_repairs_and_guided_minus_unguided_recomputed(run, per_episode):
    t8 = run["tables"]["table8"]
    assert t8["guided"].all()
    for r in t8.itertuples():
        part = _scoped(per_episode, r.agent, r.condition_id, r.family)
        assert r.recovered == part["recovered"].sum() and r.wrong_deleted == part["wrong"].sum()
        assert r.restored == (part["recovered"] + part["harmful"]).sum()
        if part["wrong"].sum():
            assert r.repair_recall == pytest.approx(part["recovered"].sum() / part["wrong"].sum())
        else:
            assert math.isnan(r.repair_recall)
        assert r.gain_over_pc_kci == pytest.approx((part["f1"] - part["pc_f1"]).mean())
        unguided = _scoped(per_episode, r.agent, r.condition_id.replace("-guided-", "-unguided-"), r.family)
        if len(unguided):
            both = part.merge(unguided, on=["family", "instance"], suffixes=("", "_u"))
            assert r.guided_minus_unguided == pytest.approx((both["f1"] - both["f1_u"]).mean())
        else:
            assert math.isnan(r.guided_minus_unguided) and "no unguided counterpart" in r.note
    # the minimal-toolbox grid gives the evidence agent's guided row a full - minimal number
    row = t8[(t8["agent"] == "evidence") & (t8["toolbox"] == "full") & (t8["family"] == "all")].iloc[0]
    full = _scoped(per_episode, "evidence", row.condition_id, "all")
    minimal = _scoped(per_episode, "evidence", row.condition_id.replace("full-", "minimal-", 1), "all")
    both = full.merge(minimal, on=["family", "instance"], suffixes=("", "_m"))
    assert len(both) and row.full_minus_minimal == pytest.approx((both["f1"] - both["f1_m"]).mean())


@pytestmark_slow
def test_tables_9_10_13_recomputed(run, per_episode):
    t9, t10, t13 = (run["tables"][t] for t in ("table9", "table10", "table13"))
    assert len({(r.prompt_level, r.target) for r in t9.itertuples()}) >= 2      # the prompt grid ran
    for r in t9.itertuples():
        part = _scoped(per_episode, r.agent, r.condition_id, "all")
        assert r.delta_r == pytest.approx(part["delta_r"].mean())
        assert r.returns_pc_output_rate == pytest.approx(part["returns_pc"].mean())
        assert r.wall_rate == pytest.approx(part["wall"].mean())
    for r in t10.itertuples():
        part = _scoped(per_episode, r.agent, r.condition_id, "all")
        assert r.wall_reached == part["wall"].sum()
        assert r.rescued == (part["wall"] & part["termination"].isin(["submitted_last_turn", "submitted_retry"])).sum()
        assert r.unsubmitted == (part["termination"] == "unsubmitted").sum()
    # the tiny run's one-turn budget stops the shortcut agent after its PC-KCI call: the wall is
    # reached in every episode; last turn none -> unsubmitted, once and retry -> rescued
    sweep = t10[t10["budget"] == "one_turn"].set_index("last_turn")
    assert sorted(sweep.index) == ["none", "once", "retry"] and (sweep["wall_reached"] == sweep["n"]).all()
    assert sweep.loc["none", "unsubmitted"] == sweep.loc["none", "n"] > 0 and sweep.loc["none", "rescued"] == 0
    for lt in ("once", "retry"):
        assert sweep.loc[lt, "rescued"] == sweep.loc[lt, "n"] and sweep.loc[lt, "unsubmitted"] == 0
    for r in t13.itertuples():
        part = _scoped(per_episode, r.agent, r.condition_id, "all")
        assert r.f1_all == pytest.approx(part["f1"].mean())
        fin = part[part["finished"]]
        assert (math.isnan(r.f1_finished) if fin.empty else r.f1_finished == pytest.approx(fin["f1"].mean()))


@pytestmark_slow
def test_table12_discloses_every_configured_result(run, quick_config):
    t12 = run["tables"]["table12"]
    eps = run["eps"]
    counts = eps.groupby(["agent", "condition_id"]).size()
    assert len(t12) == len(counts)                  # the tiny grids: every configured result ran
    for r in t12.itertuples():
        assert (r.model, r.provider) == ("—", "offline")
        assert r.episodes == counts[(r.agent, r.condition_id)]
        assert r.last_turn == r.condition_id.split("-")[5]
        budgets = {**quick_config["episodes"]["budgets"], "one_turn": {"test_units_factor": 1.0, "turns": 1,
                   "output_tokens_per_turn": 4000, "algorithm_calls": 10, "wall_seconds": 600}}
        assert json.loads(r.budget_limits) == budgets[r.budget]


def test_table12_shows_the_instances_each_family_runs(paper_config):
    """The paper config's sweeps run 16 of the 32 test instances: Table 12 says so per family."""
    from heuresis.harness.conditions import cell_records
    from heuresis.stages.analysis.tables import table12

    cells = cell_records(paper_config)
    scores = pd.DataFrame(columns=["agent", "condition_id", "model", "provider", "finished", "status", "family",
                                   "code_isolation"])
    numbers, _disp = table12(scores, cells, paper_config["agents"], paper_config["episodes"]["budgets"])
    assert len(numbers) == len(cells)
    by = numbers.set_index(["agent", "condition_id"])["families"]
    # level 1 of the prompt sweep: lg and wild, first 16; main's repeat 2: the four families, all 32
    assert by[("gpt", "full-unguided-p1-none-standard-once-r0")] == "lg (16), wild (16)"
    assert by[("gpt", "full-unguided-p0-none-standard-once-r2")] == "lg (32), anm (32), hetero (32), wild (32)"
    # shared by main (all 32 on six families) and the prompt sweep (16 on lg, wild): the union
    assert by[("gpt", "full-unguided-p0-none-standard-once-r0")] == ", ".join(
        f"{f} (32)" for f in ("lg", "anm", "hetero", "wild", "mixed", "gauntlet"))
    assert by[("evidence", "full-guided-p0-none-tight-none-r0")] == "lg (16), anm (16), hetero (16), wild (16)"


# --- infrastructure failures: left out of every number, counted per cell ------------------------------
GUIDED, UNGUIDED = "full-guided-p0-none-standard-once-r0", "full-unguided-p0-none-standard-once-r0"


@pytest.fixture(scope="module")
def flaky_scores(quick_config, tmp_path_factory):
    """Episode scores of the shortcut agent on 3 lg test instances, guided (instance 1 failed by an
    API error) and unguided (every episode failed)."""
    import infra_faults
    from conftest import small_lg_split

    from heuresis.stages.analysis.scores import load_episodes, score_episodes
    from heuresis.stages.episodes import run_episode_shard
    from heuresis.stages.instances import load_truth
    from heuresis.stages.references import load_references

    small = small_lg_split(quick_config, tmp_path_factory.mktemp("flaky"), 3)
    cfg, root = small["cfg"], small["root"]
    fail = {f"shortcut/{GUIDED}/lg/test/0001", *(f"shortcut/{UNGUIDED}/lg/test/{i:04d}" for i in range(3))}
    mp = pytest.MonkeyPatch()
    infra_faults.install(fail, None, mp.setattr)
    outs = []
    try:
        for cond in (GUIDED, UNGUIDED):
            out = root / "episodes" / cond / "shard-000.parquet"
            run_episode_shard("shortcut", {"kind": "shortcut"}, cond, "lg", "test", [0, 1, 2], data_dir=small["data"],
                              truth_dir=small["truth"], pc_kci_paths=[small["ref"]], episodes_cfg=cfg["episodes"],
                              menu=cfg["references"]["algorithms"], grades=cfg["grades"], seed=cfg["seed"], out=out,
                              calls_out=out.with_name("shard-000.calls.parquet"),
                              requests_out=out.with_name("shard-000.requests.parquet"),
                              transcripts_dir=root / "transcripts" / cond)
            outs.append(out)
    finally:
        mp.undo()
    eps, calls = load_episodes(outs)
    refs = load_references([small["ref"]])
    head = pd.DataFrame([dict(family="lg", instance=i, method=m, f1=0.25 + 0.1 * i) for i in range(3)
                         for m in ("bca_g", "bca_f")])
    scores = score_episodes(eps, calls, {("lg", "test"): load_truth(small["truth"])}, refs, head,
                            list(cfg["references"]["algorithms"]))
    return scores


def test_failed_episodes_are_counted_per_cell_and_left_out_of_every_number(flaky_scores):
    from heuresis.stages.analysis import figures, tables

    s = flaky_scores
    assert sorted(s[s.status == "failed"][["condition_id", "instance"]].itertuples(index=False, name=None)) == \
        [(GUIDED, 1), (UNGUIDED, 0), (UNGUIDED, 1), (UNGUIDED, 2)]
    ok = s[(s.status == "ok") & (s.condition_id == GUIDED)]
    boot = {"resamples": 100, "seed": 0, "level": 0.95}
    built = {name: getattr(tables, name)(s, ["lg"], boot, ["shortcut"])
             for name in ("table4", "table6", "table7", "table8", "table9", "table10", "table13")}
    for name, (numbers, display) in built.items():
        assert "n_failed" in numbers and tables.FAILED_COLUMN in display, name
        got = {(r.condition_id, r.family): (r.n, r.n_failed) for r in numbers.itertuples()}
        scopes = ["lg", "all"] if name in ("table4", "table6", "table7", "table8") else ["all"]
        # the guided result: 2 scored episodes, 1 failed; the unguided one: 0 scored, all 3 failed
        assert all(got[(GUIDED, f)] == (2, 1) for f in scopes), (name, got)
        if name == "table8":        # guided episodes only
            assert {c for c, _ in got} == {GUIDED}
        else:
            assert all(got[(UNGUIDED, f)] == (0, 3) for f in scopes), (name, got)
            row = numbers[numbers.condition_id == UNGUIDED].iloc[0]
            assert "every episode failed" in row.note
            shown = display.iloc[numbers.index[numbers.condition_id == UNGUIDED][0]]
            assert shown[tables.FAILED_COLUMN] == 3 and shown["episodes"] == 0
        assert list(display[tables.FAILED_COLUMN]) == list(numbers["n_failed"]), name
    t6 = built["table6"][0].set_index(["condition_id", "family"]).loc[(GUIDED, "lg")]
    assert t6.f1 == pytest.approx(ok.f1.mean()) and t6.delta_r == pytest.approx((ok.f1 - ok.bca_f_f1).mean())
    assert t6.truncation_rate == pytest.approx(1 - ok.finished.mean())
    t13 = built["table13"][0].set_index("condition_id").loc[GUIDED]
    assert t13.f1_all == pytest.approx(ok.f1.mean()) and t13.n_finished == int(ok.finished.sum())
    # Table 8: the unguided counterpart has no scored episode, so guided - unguided is not computed
    t8 = built["table8"][0].set_index(["condition_id", "family"]).loc[(GUIDED, "lg")]
    assert math.isnan(t8.guided_minus_unguided) and "no unguided counterpart" in t8.note
    # the same numbers as a table built from the scored episodes alone
    alone, alone_display = tables.table6(s[s.status == "ok"], ["lg"], boot, ["shortcut"])
    assert alone.f1.tolist() == built["table6"][0].f1.tolist()[: len(alone)] and (alone.n_failed == 0).all()
    assert tables.FAILED_COLUMN not in alone_display     # the column appears only when any episode failed

    n12, _d12 = tables.table12(s, [{"agent": "shortcut", "condition_id": c, "toolbox": "full", "guided": g,
                                   "prompt_level": 0, "target": "none", "budget": "standard", "last_turn": "once",
                                   "repeat": 0, "families": ["lg"], "split": "test"}
                                  for c, g in ((GUIDED, True), (UNGUIDED, False))],
                              {"shortcut": {"kind": "shortcut"}}, {})
    assert n12.set_index("condition_id")[["episodes", "n_failed"]].to_dict("index") == \
        {GUIDED: {"episodes": 2, "n_failed": 1}, UNGUIDED: {"episodes": 0, "n_failed": 3}}

    head = pd.DataFrame([dict(family="lg", instance=i, method=m, f1=0.25 + 0.1 * i) for i in range(3)
                         for m in ("bca_g", "bca_f", "oracle")])
    _, n6 = figures.figure6(s, head, ["lg"], boot, ["shortcut"])
    mine = n6[n6.agent == "shortcut"]
    assert set(mine.condition_id) == {GUIDED} and (mine.n == 2).all() and (mine.n_failed == 1).all()
    _, n7a = figures.figure7a(s, ["lg"], boot, ["shortcut"])
    assert (n7a.n_failed == 1).all() and len(n7a)
    _, n9 = figures.figure9(s, ["lg"], boot, ["shortcut"])
    assert n9.set_index("guided")[["n", "n_failed"]].to_dict("index") == {True: {"n": 2, "n_failed": 1}}


# --- the leaderboard and its bundle, on the tiny run --------------------------------------------------
def test_the_tiny_runs_leaderboard_ranks_its_results_with_their_episodes(run):
    """Every result of the run over all families, its F1 and Δ^r the means of its test episodes (pandas here)."""
    board = pd.read_parquet(run["root"] / "results/tables/leaderboard.parquet")
    ours = board[(board.block == "this run") & (board.family == "all")]
    eps = run["eps"][run["eps"].status != "failed"]
    want = eps.groupby(["agent", "condition_id"]).f1.mean()
    assert len(ours) == len(want) and ours["rank"].min() == 1
    for r in ours.itertuples():
        assert r.f1 == pytest.approx(want[(r.agent, r.condition_id)]) and r.n == len(
            eps[(eps.agent == r.agent) & (eps.condition_id == r.condition_id)])
    scores = pd.read_parquet(run["root"] / "results/analysis/episode_scores.parquet")
    scores = scores[(scores.split == "test") & (scores.status != "failed")]
    for r in ours.itertuples():     # the working graph's F1 after 10 turns (or its last), read from each curve
        curves = scores[(scores.agent == r.agent) & (scores.condition_id == r.condition_id)].f1_by_turn
        assert r.f1_at_10_turns == pytest.approx(np.mean([c[min(10, len(c) - 1)] for c in curves]))
        assert all(c[-1] == pytest.approx(f) for c, f in zip(curves, scores.loc[curves.index, "f1"]))
    assert (board.block == "published").sum() > 0 and board[board.block == "published"]["rank"].isna().all()
    assert (run["root"] / "results/figures/leaderboard_cost.png").stat().st_size > 0
    # a run smaller than the paper's says so where its headroom numbers are (tiny: 2 dev, 2 test per family)
    assert "Small run: the selection rests on 2 dev and the intervals on 2 test instances per family (the paper: " \
        "100 and 32)" in (run["root"] / "results/tables/table3.md").read_text()


def test_a_bundle_round_trip_verifies_and_a_tampered_graph_fails_naming_its_episode(run, tmp_path):
    import shutil

    from heuresis.artifacts.io import read_table, write_table
    from heuresis.artifacts.schemas import EPISODES
    from heuresis.stages.analysis.leaderboard import load_run
    from heuresis.stages.bundle import BundleMismatch, verify_bundle, write_bundle

    res = run["root"] / "results"
    bundle = write_bundle(res, tmp_path / "run.tar.gz", with_truth=True, log=lambda m: None)
    assert bundle.stat().st_mode & 0o077 == 0
    checked = verify_bundle(bundle, log=lambda m: None)
    shards = sorted(res.glob("episodes/*/*/*/*/shard-*[0-9].parquet"))
    assert checked.episodes == sum(len(pd.read_parquet(p)) for p in shards)
    # a board from the bundle is the board from the folder
    a, b = load_run(res), load_run(bundle)
    pd.testing.assert_frame_equal(a.scores, b.scores)
    with pytest.raises(BundleMismatch, match="holds no truth"):
        verify_bundle(write_bundle(res, tmp_path / "no-truth.tar.gz", log=lambda m: None), log=lambda m: None)
    # one submitted graph changed (its recorded F1 kept), the bundle rewritten with fresh digests: named
    copy = tmp_path / "copy"
    shutil.copytree(res, copy)
    shard = copy / shards[0].relative_to(res)
    table = read_table(shard, EPISODES)
    rows = table.to_pylist()
    d = int(math.isqrt(len(rows[0]["graph"])))
    g = np.asarray(rows[0]["graph"], dtype=np.int8).reshape(d, d)
    g[0, 1], g[1, 0] = (0, 0) if g[0, 1] or g[1, 0] else (1, 1)
    rows[0]["graph"] = g.ravel().tolist()
    import pyarrow as pa

    write_table(pa.Table.from_pylist(rows, schema=EPISODES.schema), shard, EPISODES, {})
    tampered = write_bundle(copy, tmp_path / "tampered.tar.gz", with_truth=True, log=lambda m: None)
    with pytest.raises(BundleMismatch, match=f"episode {rows[0]['episode_id']}: the graph in the episodes table"):
        verify_bundle(tampered, log=lambda m: None)
