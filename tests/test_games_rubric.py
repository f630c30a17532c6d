"""The rubric's criteria and the judge-independent analyses of the games track (docs/games.md §5),
each table checked against an independent computation on hand-made plays and judgements."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from heuresis.causal.bootstrap import bootstrap_mean, unpaired_bootstrap
from heuresis.config.settings import Bootstrap
from heuresis.stages.games.analysis import (
    NO_JUDGE,
    bias_control_table,
    criteria_table,
    failure_modes_table,
    survival_tier,
    trap_fall,
    trap_fall_table,
)
from heuresis.stages.games.judge import CRITERIA, icc

BOOT = Bootstrap(resamples=300, level=0.9, seed=5)
PATTERN = [{"of": ["antenna"], "at_least": 4}]
REFS = {"s_bias": {"family": "antenna", "trap_pattern": PATTERN, "control": "s_ctrl"},
        "s_ctrl": {"family": "antenna", "trap_pattern": PATTERN, "control": None}}


def _plays():
    rows = []
    rng = np.random.default_rng(0)
    for scn in REFS:
        for agent in ("a1", "a2"):
            for r in range(6):
                ant = int(rng.integers(0, 8))
                sub = not (agent == "a2" and r == 5)
                s = float(rng.uniform(0.4, 0.9)) if sub else 0.0
                rows.append({"play_id": f"{agent}/tools/{scn}/r{r}", "agent": agent, "mode": "tools", "scenario": scn,
                             "family": "antenna", "status": "ok", "submitted": sub,
                             "design": json.dumps({"antenna": ant, "engine": 3}) if sub else "null",
                             "survival": s, "threshold": 0.75, "won": s >= 0.75})
    rows.append({**rows[0], "play_id": "a1/tools/s_bias/r9", "status": "failed", "design": json.dumps({"antenna": 8})})
    return pd.DataFrame(rows)


def _judgements(plays):
    rng = np.random.default_rng(1)
    rows = []
    for pid in plays[plays.status == "ok"].play_id:
        base = {c: float(rng.integers(0, m + 1)) for c, m in CRITERIA.items()}
        for j in ("j1", "j2"):
            sc = {c: float(np.clip(v + (j == "j2") * rng.integers(-1, 2), 0, CRITERIA[c])) for c, v in base.items()}
            rows.append({"judge": j, "play_id": pid, "agent": pid.split("/")[0], "mode": "tools", "status": "ok", **sc,
                         "cr": sc["cr1"] + sc["cr2"] + sc["cr3"], "total": sum(sc.values()),
                         "failure_mode": "none" if sc["cr2"] >= 2 else "correlational_reading"})
    rows.append({"judge": "j1", "play_id": "a1/tools/s_bias/r0", "agent": "a1", "mode": "tools", "status": "unparsed",
                 **dict.fromkeys(CRITERIA), "cr": None, "total": None, "failure_mode": None})
    return pd.DataFrame(rows)


def test_survival_tiers():
    assert survival_tier({"submitted": True, "survival": 0.75, "threshold": 0.75}) == "won"
    assert survival_tier({"submitted": True, "survival": 0.66, "threshold": 0.75}) == "close"
    assert survival_tier({"submitted": True, "survival": 0.64, "threshold": 0.75}) == "far"
    assert survival_tier({"submitted": False, "survival": 0.0, "threshold": 0.75}) == "unsubmitted"


def test_criteria_table_mean_shares_and_icc_per_criterion():
    plays, jd = _plays(), None
    jd = _judgements(plays)
    num, disp = criteria_table(plays, jd, ["j1", "j2"], BOOT)
    ok = jd[jd.status == "ok"]
    per_play = ok.groupby("play_id")[[*CRITERIA, "cr", "total"]].mean()
    for c in [*CRITERIA, "cr", "total"]:
        row = num[(num.agent == "a1") & (num.criterion == c)].iloc[0]
        ids = plays[(plays.agent == "a1") & (plays.status == "ok")].play_id
        v = per_play.reindex(ids)[c].to_numpy()
        assert row.plays == len(v) == 12 and row["mean"] == pytest.approx(v.mean())
        assert row.share_positive == pytest.approx((v > 0).mean()) and row.share_zero == pytest.approx((v == 0).mean())
        iv = bootstrap_mean(v, **BOOT.kwargs())
        assert (row.mean_lo, row.mean_hi) == (iv.lo, iv.hi)
        wide = ok[ok.play_id.isin(ids)].pivot(index="play_id", columns="judge", values=c)[["j1", "j2"]].dropna()
        assert row.icc2k == pytest.approx(icc(wide.to_numpy())["ICC2_k"]) and row.icc_plays == len(wide)
    pooled = num[(num.agent == "all") & (num.criterion == "cr1")].iloc[0]
    assert pooled.plays == 24                    # every play but the failed one (the unsubmitted one is judged too)
    assert "ICC" in disp.iloc[0]["CR1 (0-4)"] and set(disp.Agent) == {"a1", "a2", "all"}
    num, disp = criteria_table(plays, None, [], BOOT)
    assert NO_JUDGE in disp.to_string()


def test_failure_modes_from_the_judges_labels():
    plays = _plays()
    jd = _judgements(plays)
    num, _disp = failure_modes_table(plays, jd, ["j1", "j2"])
    ok = jd[(jd.status == "ok") & (jd.agent == "a2")]
    row = num[(num.agent == "a2") & (num.failure_mode == "correlational_reading")].iloc[0]
    assert row.judgements == len(ok) and row["count"] == (ok.failure_mode == "correlational_reading").sum()
    shares = num[num.agent == "a2"].share.sum()
    assert shares == pytest.approx(1.0)
    assert NO_JUDGE in failure_modes_table(plays, None, [])[1].to_string()


def test_trap_fall_and_bias_control_against_hand_counts():
    plays = _plays()
    tf = trap_fall(plays, REFS)
    assert all((v is None) == (not s) for v, s in zip(tf, plays.submitted))
    assert all(v == (json.loads(d)["antenna"] >= 4) for v, d in zip(tf, plays.design) if v is not None)
    num, _ = trap_fall_table(plays, REFS, BOOT)
    ok = plays[plays.status == "ok"]
    for _, row in num.iterrows():
        sub = ok[(ok.scenario == row.scenario) & (ok.agent == row.agent) & ok.submitted]
        falls = np.array([json.loads(d)["antenna"] >= 4 for d in sub.design], float)
        assert row.submitted == len(sub) and row.trap_fall == pytest.approx(falls.mean())
        assert (row.trap_fall_lo, row.trap_fall_hi) == tuple(getattr(bootstrap_mean(falls, **BOOT.kwargs()), k)
                                                              for k in ("lo", "hi"))
    assert num[(num.scenario == "s_bias") & (num.agent == "a1")].plays.iloc[0] == 6    # the failed play left out
    bc, disp = bias_control_table(plays, REFS, BOOT)
    assert set(bc.scenario) == {"s_bias"} and set(bc.control) == {"s_ctrl"} and len(bc) == 2
    row = bc[bc.agent == "a2"].iloc[0]
    a, b = ok[(ok.scenario == "s_bias") & (ok.agent == "a2")], ok[(ok.scenario == "s_ctrl") & (ok.agent == "a2")]
    assert row.survival == pytest.approx(a.survival.mean()) and row.control_survival == pytest.approx(b.survival.mean())
    d = unpaired_bootstrap(a.survival.to_numpy(), b.survival.to_numpy(), **BOOT.kwargs())
    assert (row.survival_diff, row.survival_diff_lo, row.survival_diff_hi) == pytest.approx((d.estimate, d.lo, d.hi))
    fa = np.array([json.loads(x)["antenna"] >= 4 for x, s in zip(a.design, a.submitted) if s], float)
    fb = np.array([json.loads(x)["antenna"] >= 4 for x, s in zip(b.design, b.submitted) if s], float)
    assert row.trap_fall == pytest.approx(fa.mean()) and row.trap_fall_diff == pytest.approx(fa.mean() - fb.mean())
    assert "Trap-fall difference" in disp.columns


def test_the_rubric_is_declared_once_and_every_statement_of_it_agrees():
    """The judge's prompt, its parser, the judgements table, the viewer's labels and docs/games.md all
    state the rubric of heuresis.causal.games.rubric: a filled-in answer in the prompt's own format
    parses to the scores given; the viewer labels each column as the docs name it."""
    import re

    from conftest import ROOT

    from heuresis.artifacts.schemas import GAME_JUDGEMENTS
    from heuresis.causal.games.rubric import RUBRIC, RUBRIC_MAX, label
    from heuresis.harness.prompts import template
    from heuresis.stages.games.judge import FAILURE_MODES, parse_scores
    from heuresis.view.pages import judge_criteria

    prompt = template("game_judge").template
    assert f"Rubric ({RUBRIC_MAX} points)" in prompt and RUBRIC_MAX == 16
    raw = (ROOT / "src/heuresis/data/prompts/game_judge.txt").read_text()
    assert not any(c.instruction in raw for c in RUBRIC)     # the file states no criterion itself
    fmt = prompt.split("Answer with one JSON object and nothing else:\n", 1)[1].strip()
    given = {c.column: c.max - 1 for c in RUBRIC}
    answer = fmt.replace('"<label>"', json.dumps(sorted(FAILURE_MODES)[0]))
    for c in RUBRIC:
        answer = answer.replace(f'"score": <0-{c.max}>, "reason": "<one line>"', f'"score": {given[c.column]}, '
                                f'"reason": "because {c.code}"', 1)
    parsed = parse_scores(answer)
    assert {c.column: parsed[c.column] for c in RUBRIC} == given
    assert all(parsed[f"{c.column}_reason"] == f"because {c.code}" for c in RUBRIC)
    row = {**given, **{f"{c.column}_reason": "r" for c in RUBRIC}}
    shown, _ = judge_criteria(row, GAME_JUDGEMENTS.schema, GAME_JUDGEMENTS.doc)
    labels = {s["column"]: s["label"] for s in shown}
    assert [labels[c.column] for c in RUBRIC] == [label(c) for c in RUBRIC]
    docs = " ".join((ROOT / "docs/games.md").read_text().split())
    rubric_line = re.search(r"causal reasoning (CR1 .*?data usage \(0–1\))", docs)
    assert rubric_line, "docs/games.md states the rubric as 'causal reasoning CR1 ... data usage (0–1)'"
    assert [m.group(0) for m in re.finditer(r"[A-Z]{2}\d? [a-z ]+ \(0–\d\)", rubric_line[1])] == [label(c) for c in RUBRIC]
