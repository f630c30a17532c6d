"""The leaderboard: ties against a permutation test written here, several runs into one board, published rows.

Independent truths: a sign-flip test enumerated with ``itertools.product`` and Holm's correction
written out (not the module's vectorised ones), constructed agents whose order is known (an exact
copy, a clearly better one), the published data file's own rows, and the board of one merged run.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from heuresis.artifacts.io import write_table
from heuresis.artifacts.provenance import PROVENANCE_KEY
from heuresis.artifacts.schemas import EPISODE_SCORES, HEADROOM_SCORES, INSTANCE_INDEX
from heuresis.causal.ties import holm, sign_flip_p
from heuresis.stages.analysis.leaderboard import leaderboard, load_run, merge_runs, pareto_front
from heuresis.targets.published import load_published_table13

BOOT = {"resamples": 200, "seed": 7, "level": 0.95}
COND = "full-guided-p1-none-standard-once-r0"


def _default(t: pa.DataType):
    if pa.types.is_string(t):
        return ""
    if pa.types.is_boolean(t):
        return False
    if pa.types.is_integer(t):
        return 0
    if pa.types.is_list(t):
        return []
    return float("nan")


def _episode(agent: str, family: str, instance: int, f1: float, cost: float | None = 0.01, **extra) -> dict:
    row = {f.name: _default(f.type) for f in EPISODE_SCORES.schema}
    row.update(episode_id=f"{agent}/{COND}/{family}/test/{instance:04d}", agent=agent, agent_kind="llm", model="m",
               provider="p", toolbox="full", guided=True, prompt_level=1, target="none", budget="standard",
               last_turn="once", repeat=0, condition_id=COND, family=family, split="test", instance=instance,
               status="ok", finished=True, termination="submitted", tokens_out=100, tokens_in=1000, turns=4,
               cost=cost, f1=f1, bca_g_f1=0.5, bca_f_f1=0.6, delta_s=f1 - 0.5, delta_r=f1 - 0.6,
               integrity_counts="{}", tool_counts="{}")
    row.update(extra)
    return row


def _headroom(families, n) -> pd.DataFrame:
    rows = []
    for fam in families:
        for i in range(n):
            for method, f1 in (("bca_f", 0.6), ("bca_g", 0.5), ("oracle", 0.8)):
                row = {f.name: _default(f.type) for f in HEADROOM_SCORES.schema}
                row.update(family=fam, instance=i, method=method, algorithm="pc_kci", failed=False, f1=f1)
                rows.append(row)
    return pd.DataFrame(rows)


def _scores(agents: dict[str, np.ndarray], families=("lg", "wild")) -> pd.DataFrame:
    rows = [_episode(a, fam, i, float(v[i])) for a, v in agents.items() for fam in families for i in range(len(v))]
    return pd.DataFrame(rows)


# --- the test and the correction ----------------------------------------------------------------
def _p_enumerated(d) -> float:
    obs = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d))) >= obs - 1e-9 for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


def _holm_written_out(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


@pytest.mark.parametrize("seed", range(4))
def test_the_sign_flip_test_and_holm_equal_their_definitions(seed):
    rng = np.random.default_rng(seed)
    d = rng.normal(0.05 * seed, 0.1, size=10).round(3)
    assert sign_flip_p(d, 1000, 0) == pytest.approx(_p_enumerated(d))
    p = rng.uniform(size=7).tolist()
    assert holm(p) == pytest.approx(_holm_written_out(p))


def test_ties_an_exact_copy_and_separates_a_clearly_better_agent():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.55, 0.75, size=12)
    scores = _scores({"a": base, "copy": base.copy(), "better": np.minimum(base + 0.2, 1.0)})
    numbers, display = leaderboard(scores, _headroom(("lg", "wild"), 12), ["lg", "wild"], BOOT, ["a", "copy", "better"])
    board = numbers[(numbers.block == "this run") & (numbers.family == "all")].set_index("agent")
    assert board.loc["better", "rank"] == 1 and board.loc["a", "rank"] == 2 and board.loc["copy", "rank"] == 2
    assert json.loads(board.loc["a", "tied_with"]) == [f"copy | {COND}"]
    assert json.loads(board.loc["better", "tied_with"]) == []
    # the test behind the ranks, recomputed here: 24 paired instances (beyond exact enumeration: random patterns)
    assert board.loc["better", "delta_r"] == pytest.approx(float(np.mean(np.minimum(base + 0.2, 1.0))) - 0.6)
    # the oracle's headroom is 0.2 on every instance: the share captured is mean Δ^r / 0.2
    assert board.loc["a", "headroom_share"] == pytest.approx((base.mean() - 0.6) / 0.2)
    assert board.loc["a", "usd_total"] == pytest.approx(0.24) and board.loc["a", "turns_mean"] == 4
    assert set(display["rank"][display.family == "all"]) == {"1", "2"}


def test_a_failed_episode_is_counted_not_scored():
    scores = _scores({"a": np.full(4, 0.7)}, families=("lg",))
    scores.loc[0, ["status", "f1"]] = ["failed", 0.0]
    numbers, display = leaderboard(scores, _headroom(("lg",), 4), ["lg"], BOOT)
    row = numbers[(numbers.block == "this run") & (numbers.family == "all")].iloc[0]
    assert (row.n, row.n_failed, row.f1) == (3, 1, pytest.approx(0.7))
    assert "3 / 0 / 1" in set(display["finished / truncated / failed"])


def test_the_published_rows_come_from_the_data_file_with_their_source():
    pub = load_published_table13()
    assert "Table 13" in pub["source"] and "2610.22846" in pub["source"]
    assert {r["model"] for r in pub["rows"]} == {"GPT-6.1 Sol", "Claude Opus 5.5", "Qwen 3.8 Flash"}
    first = pub["rows"][0]
    assert (first["family"], first["repeat"], first["f1_all"], first["dr_all_lo"]) == ("lg", 1, 0.978, 0.019)
    numbers, display = leaderboard(_scores({"a": np.full(3, 0.7)}, ("lg",)), _headroom(("lg",), 3), ["lg"], BOOT,
                                   published=pub)
    block = numbers[numbers.block == "published"]
    assert len(block) == len(pub["rows"]) and block["rank"].isna().all()
    assert set(display[display.block == "published"]["rank"]) == {"—"}


def test_pareto_front():
    assert pareto_front([1, 2, 3, 2], [0.1, 0.3, 0.2, 0.3]) == [True, True, False, True]


# --- several runs -------------------------------------------------------------------------------
def _write_run(root, scores: pd.DataFrame, headroom: pd.DataFrame, digests: dict, generator: int = 1):
    write_table(pa.Table.from_pylist(scores.to_dict("records"), schema=EPISODE_SCORES.schema),
                root / "analysis/episode_scores.parquet", EPISODE_SCORES, {})
    write_table(pa.Table.from_pylist(headroom.to_dict("records"), schema=HEADROOM_SCORES.schema),
                root / "headroom/test_scores.parquet", HEADROOM_SCORES, {})
    for fam in sorted(set(scores.family)):
        rows = [{"family": fam, "split": "test", "instance": i, "instance_id": f"{fam}/test/{i:04d}", "path": "x",
                 "n": 10, "d": 3, "data_sha256": digests.get((fam, i), f"sha-{fam}-{i}")}
                for i in sorted(set(scores[scores.family == fam].instance))]
        write_table(pa.Table.from_pylist(rows, schema=INSTANCE_INDEX.schema), root / f"instances/{fam}/test/index.parquet",
                    INSTANCE_INDEX, {PROVENANCE_KEY: json.dumps({"config": {"generator": generator}})})
    return root


def test_two_folders_make_the_board_of_one_merged_run(tmp_path):
    rng = np.random.default_rng(3)
    all_scores = _scores({"a": rng.uniform(0.5, 0.9, 6), "b": rng.uniform(0.5, 0.9, 6)})
    heads = _headroom(("lg", "wild"), 6)
    one = load_run(_write_run(tmp_path / "one", all_scores, heads, {}))
    first = all_scores[all_scores.agent == "a"]
    second = all_scores[all_scores.agent == "b"]
    two = merge_runs([load_run(_write_run(tmp_path / "r1", first, heads, {})),
                      load_run(_write_run(tmp_path / "r2", pd.concat([second, first.iloc[:2]]), heads, {}))])
    want = leaderboard(one.scores, one.headroom, ["lg", "wild"], BOOT)[0]
    got = leaderboard(two.scores, two.headroom, ["lg", "wild"], BOOT)[0]
    pd.testing.assert_frame_equal(want.reset_index(drop=True), got.reset_index(drop=True))

    # an instance whose data differ: refused, named
    bad = load_run(_write_run(tmp_path / "r3", second, heads, {("wild", 2): "another"}))
    with pytest.raises(ValueError, match=r"instance wild/test/0002 differs between .*r1 and .*r3"):
        merge_runs([load_run(tmp_path / "r1"), bad])
    # the same instances from another generator version: refused, naming the versions
    with pytest.raises(ValueError, match=r"versions differ between the folders: version 1 in .*r1; version 2 in .*r5"):
        merge_runs([load_run(tmp_path / "r1"), load_run(_write_run(tmp_path / "r5", second, heads, {}, generator=2))])
    # the same episode twice with another score: refused, named
    changed = first.copy()
    changed.loc[changed.index[0], "f1"] = 0.01
    with pytest.raises(ValueError, match="episode a/.*/lg/test/0000 is in"):
        merge_runs([load_run(tmp_path / "r1"), load_run(_write_run(tmp_path / "r4", changed, heads, {}))])
