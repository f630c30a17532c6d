"""How often the pilot's 90 % forecast interval covers the run's cost, by pilot size.

The paper config's planned episodes of agent ``gpt`` get costs drawn from log-normal laws (mean
$0.05 tight, $0.20 standard, $0.80 generous; sigma 0.6), a fresh draw per simulated run. Each run
draws a pilot of K episodes per budget setting, forecasts the total with
:func:`heuresis.stages.pilot.forecast` and checks it against the run's actual total. Printed per
K: the share of runs the interval covered, the forecast's mean and median absolute relative
error, and the interval's median width relative to the total.

    PYTHONPATH=src python benchmarks/forecast_coverage.py --runs 200 --pilot 3 8 16
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from heuresis.preflight import load_config
from heuresis.stages.pilot import forecast, pilot_plan

ROOT = Path(__file__).resolve().parents[1]
MEANS = {"tight": 0.05, "standard": 0.2, "generous": 0.8}
SIGMA = 0.6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--pilot", type=int, nargs="+", default=[3, 8, 16])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    cfg = load_config(ROOT / "config/config.yaml")
    planned = [e for e in pilot_plan(cfg, 10**6) if e["agent"] == "gpt"]   # every planned episode
    for k in args.pilot:
        rng = np.random.default_rng(args.seed)
        hits, errors, widths = 0, [], []
        for _ in range(args.runs):
            costs = [float(rng.lognormal(np.log(MEANS[e["budget"]]) - SIGMA**2 / 2, SIGMA)) for e in planned]
            pilot = []
            for budget in MEANS:
                stratum = [i for i, e in enumerate(planned) if e["budget"] == budget]
                for i in rng.choice(stratum, k, replace=False):
                    pilot.append({**planned[i], "status": "ok", "turns": 1, "requests": 1, "tokens_in": 1,
                                  "tokens_out": 1, "cached_tokens": 0, "reasoning_tokens": 0, "cost": costs[i]})
            row = next(r for r in forecast(cfg, pilot, {})
                       if r["agent"] == "gpt" and r["part"] == "total")
            actual = sum(costs)
            hits += row["low_usd"] <= actual <= row["high_usd"]
            errors.append(row["forecast_usd"] / actual - 1)
            widths.append((row["high_usd"] - row["low_usd"]) / actual)
        print(json.dumps({"pilot_per_setting": k, "runs": args.runs, "covered": hits / args.runs,
                          "mean_error": round(float(np.mean(errors)), 4),
                          "median_abs_error": round(float(np.median(np.abs(errors))), 4),
                          "median_width": round(float(np.median(widths)), 4)}), flush=True)


if __name__ == "__main__":
    main()
