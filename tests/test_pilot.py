"""The pilot and the forecast of a paid run: stratified, reused by the full run (nothing paid twice), and
an interval that covers what the run then costs, checked against a scripted provider with heavy-tailed
conversations and, for its coverage, against simulated runs."""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from llm_server import CLOCK, Conversations, ScriptedLLMServer

from heuresis.stages.pilot import forecast, pilot_plan

PRICES = {"input_per_mtok": 1.0, "output_per_mtok": 4.0}


def _heavy_tailed(prompt: str) -> list[dict]:
    """A conversation whose length and token counts are drawn from heavy-tailed laws, fixed by its prompt."""
    rng = random.Random(prompt)
    turns = min(30, 1 + int(rng.paretovariate(1.3)))
    steps = [{"tool_calls": [("view_graph", {})], "usage": (int(rng.lognormvariate(7.0, 0.6)),
                                                             int(rng.lognormvariate(4.0, 0.8)))}
             for _ in range(turns - 1)]
    return [*steps, {"tool_calls": [("submit", {"edges": ["X1 -> X2"]})], "usage": (int(rng.lognormvariate(7.0, 0.6)),
                                                                                   20)}]


def _paid_config(url: str) -> dict:
    return {"agents": {"paid": {"kind": "llm", "model": "openai/scripted-model", "api_base": f"{url}/v1",
                                "requires_key": False, "prices": PRICES, "max_run_usd": 5.0,
                                "retries": {"base_s": 0.01}}},
            "episodes": {"grids": {"paid": {"agents": ["paid"], "guided": [True, False], "prompt_level": [0, 1],
                                            "families": ["lg"]}},
                         "run": ["paid"]}}


def test_pilot_plan_is_stratified_and_nested(paper_config):
    """k per agent and budget setting, spread over the setting's conditions and families; a larger
    pilot holds the smaller one."""
    small, large = pilot_plan(paper_config, 3), pilot_plan(paper_config, 6)
    strata = {(e["agent"], e["budget"]) for e in large}
    assert strata == {(a, b) for a in ("gpt", "claude", "qwen") for b in ("standard", "tight", "generous")}
    for agent, budget in strata:
        mine = [e for e in large if (e["agent"], e["budget"]) == (agent, budget)]
        assert len(mine) == 6 and len({(e["condition_id"], e["family"]) for e in mine}) == 6   # 6 distinct cells
        assert [e for e in small if (e["agent"], e["budget"]) == (agent, budget)] == mine[:3]


def test_forecast_interval_covers_simulated_runs(paper_config):
    """200 simulated runs (log-normal episode costs, a mean per budget setting): the 90 % interval from
    a pilot of 8 per setting covers the run's total in at least 85 % of them; the point estimate is unbiased."""
    cfg = copy.deepcopy(paper_config)
    planned = pilot_plan(cfg, 10**6)                   # every planned LLM episode, by stratum
    rng = np.random.default_rng(1)
    means = {"standard": 0.2, "tight": 0.05, "generous": 0.8}
    hits, errors = 0, []
    for _ in range(200):
        costs = {id(e): float(rng.lognormal(np.log(means[e["budget"]]) - 0.18, 0.6)) for e in planned}
        actual = {a: sum(costs[id(e)] for e in planned if e["agent"] == a) for a in ("gpt",)}
        pilot = []
        for b in means:
            stratum = [e for e in planned if e["agent"] == "gpt" and e["budget"] == b]
            for e in [stratum[k] for k in rng.choice(len(stratum), 8, replace=False)]:
                pilot.append({**e, "status": "ok", "turns": 1, "requests": 1, "tokens_in": 1, "tokens_out": 1,
                              "cached_tokens": 0, "reasoning_tokens": 0, "cost": costs[id(e)]})
        row = next(r for r in forecast(cfg, pilot, {})
                   if r["agent"] == "gpt" and r["part"] == "total")
        hits += row["low_usd"] <= actual["gpt"] <= row["high_usd"]
        errors.append(row["forecast_usd"] / actual["gpt"] - 1)
    assert 0.85 <= hits / 200 <= 0.97, hits
    assert abs(np.mean(errors)) < 0.02


def test_the_small_sample_interval_is_welchs():
    """Two settings of weight 1: the interval's standard error and degrees of freedom are those of
    Welch's two-sample t test (scipy), its centre the sum of the means; one episode gives no interval."""
    from scipy import stats

    from heuresis.stages.pilot import total_interval

    a, b = [0.1, 0.4, 0.25], [1.0, 2.5, 0.7, 1.9, 1.2]
    welch = stats.ttest_ind(a, b, equal_var=False)
    se = (np.mean(a) - np.mean(b)) / welch.statistic
    half = stats.t.ppf(0.95, welch.df) * se
    lo, hi = total_interval([(1, a), (1, b)], 0.9)
    assert (lo, hi) == pytest.approx((np.mean(a) + np.mean(b) - half, np.mean(a) + np.mean(b) + half), rel=1e-12)
    assert total_interval([(10, [0.2, 0.2])]) == (2.0, 2.0) and total_interval([(3, [0.5])]) == (None, None)


@pytest.mark.slow
def test_pilot_then_full_run_pays_nothing_twice_and_lands_in_the_interval(tiny_run, tmp_path):
    """`heuresis forecast --pilot 4` on the tiny run with a scripted provider, then the full run: the
    pilot's episodes are replayed (no request is answered twice), the forecast is the pilot's mean."""
    from tinyflow import CONFIG, run_snakemake

    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import EPISODE_SCORES, FORECAST, PILOT

    responder = Conversations(_heavy_tailed)
    with ScriptedLLMServer(responder) as server:
        wd = tmp_path / "wf"
        shutil.copytree(tiny_run, wd, symlinks=True)
        (wd / "config" / "paid.yaml").write_text(json.dumps(_paid_config(server.url)))
        configs = [a for pair in zip(["--config"] * 3, [*CONFIG[1:], "config/paid.yaml"], strict=True) for a in pair]
        proc = subprocess.run([sys.executable, "-m", "heuresis.cli", "forecast", "--pilot", "4", "--cores", "2",
                               *configs], cwd=wd, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "LLM spend forecast from the pilot" in proc.stdout and "paid" in proc.stdout
        pilot_requests = sum(responder.counts.values())
        assert pilot_requests > 0
        run_snakemake(wd, "results/analysis/episode_scores.parquet", "--cores", "2", *CONFIG,
                      "config/paid.yaml", timeout=900)
    rows = read_table(wd / "results/pilot/k4/forecast.parquet", FORECAST).to_pylist()
    total = next(r for r in rows if r["agent"] == "paid" and r["part"] == "total")
    scores = read_table(wd / "results/analysis/episode_scores.parquet", EPISODE_SCORES).to_pandas()
    paid = scores[scores.agent == "paid"]
    assert len(paid) == total["episodes"] == 2 * 2 * 2 and total["pilot_episodes"] == 4
    # distinct episodes may send identical requests (instances are anonymous), so count per episode:
    # the provider answered each episode's conversation exactly once, the pilot's included
    transcripts = sorted((wd / "results/transcripts/paid").rglob("*.json"))
    assert len(transcripts) == len(paid)
    firsts = [re.sub(*CLOCK, next(m["content"] for m in json.loads(t.read_text())["messages"]
                                  if m["role"] == "user"))
              for t in transcripts]      # as the scripted server read them: the clock masked
    assert sum(responder.counts.values()) == sum(len(_heavy_tailed(f)) for f in firsts)
    # the pilot's episodes are the run's own, at the cost they were paid; the forecast is their mean
    # times the planned episodes (one budget setting here), inside its interval; whether a run's cost
    # falls inside the interval is a rate, measured by the simulation above and benchmarks/forecast_coverage.py
    pilot = read_table(wd / "results/pilot/k4/paid.parquet", PILOT).to_pandas()
    key = ["condition_id", "family", "split", "instance"]
    joined = pilot.merge(paid[[*key, "cost"]], on=key, suffixes=("_pilot", "_run"))
    assert len(joined) == 4 and np.allclose(joined.cost_pilot, joined.cost_run, rtol=1e-12)
    assert total["pilot_paid_usd"] == pytest.approx(pilot.cost.sum(), rel=1e-9)
    assert total["forecast_usd"] == pytest.approx(8 * pilot.cost.mean(), rel=1e-9)
    assert total["low_usd"] <= total["forecast_usd"] <= total["high_usd"]
    print(f"pilot forecast ${total['forecast_usd']:.4f} [{total['low_usd']:.4f}, {total['high_usd']:.4f}], "
          f"the run ${paid.cost.sum():.4f}")
