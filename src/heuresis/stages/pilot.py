"""The pilot and the forecast of a paid run: what the run will really cost, measured before it runs.

The ceiling (:mod:`heuresis.preflight.spend`) prices every request as if it filled the model's
context window: a bound no run reaches, far above any bill.  The pilot runs a few of the run's
own LLM episodes and the forecast extrapolates what they cost to every episode the config plans.

* **The pilot** (:func:`pilot_plan`): per LLM agent and budget setting (the setting fixes the
  turns and the output cap, the largest drivers of an episode's cost), ``k`` of the planned
  episodes, spread over the setting's conditions and families: the stratum's (condition,
  family) cells are visited in turn, each giving its next instance in an order drawn from
  ``seed`` (:data:`PILOT_SEED`), so a larger pilot contains a smaller one.  They are the run's
  own episodes: same condition, instance and seed, their request logs where the episode jobs
  keep theirs (``results/transcripts/...``), so the full run replays them instead of paying
  for them again (:func:`run_pilot`).
* **The forecast** (:func:`forecast`): per agent, the planned episodes of each budget setting
  times the mean cost of its pilot episodes, summed over the settings; a ``level`` interval
  for that sum that allows for the pilot's small size (:func:`total_interval`: Student's t with
  Welch–Satterthwaite degrees of freedom over the settings' sample variances).  One row per agent
  and grid (the tables each grid feeds; a condition two grids share is counted in each) and one per agent in total (counted once),
  beside the ceiling and the agent's ``max_run_usd``, with what the pilot already paid and what
  is left to pay.  A pilot episode that failed is counted in the pilot table but not in the
  mean; the forecast says how many.  Game plays, judgements and leakage probes are not piloted:
  their rows give the ceiling only.

With ``k`` pilot episodes a setting's interval rests on ``k`` values; the t interval widens as
``k`` falls, and its coverage on simulated runs is measured (``benchmarks/forecast_coverage.py``,
docs/agents.md).  A setting needs at least two pilot episodes for an interval.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from heuresis.agents.llm import llm_agents_in_use
from heuresis.artifacts.io import atomic_write_text, read_table, write_table
from heuresis.artifacts.paths import EPISODE_TRANSCRIPTS, INSTANCES, PILOT_SHARD, REFERENCES, TRUTH_GRAPHS, shard
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.schemas import EPISODES, FORECAST, PILOT, REQUESTS
from heuresis.harness.conditions import expand_conditions
from heuresis.stages.episodes import episode_job_config, run_episode_shard
from heuresis.stages.references import reference_shards

__all__ = ["PILOT_SEED", "RECOMMENDED_PILOT", "forecast", "forecast_lines", "pc_kci_paths", "pilot_plan", "run_pilot",
           "total_interval", "write_forecast"]

#: Seed of the pilot's choice of instances (recorded in the pilot's provenance).
PILOT_SEED = 20261203
#: The pilot size the docs and ``check-config`` recommend: episodes per LLM agent and budget setting.
RECOMMENDED_PILOT = 8
#: The forecast interval's level.
LEVEL = 0.9


def _planned(config: Mapping) -> list[dict]:
    """Every planned LLM episode: agent, condition, budget, family, split, instance, the grids that plan it."""
    llm = llm_agents_in_use(config)
    eps = config["episodes"]
    grids_of: dict[tuple, list[str]] = {}
    for gname in eps["run"]:
        one = {**config, "episodes": {**eps, "run": [gname]}}
        for cell in expand_conditions(one):
            n = int(config["instances"][f"n_{cell.split}"])
            for f in cell.families:
                for i in cell.indices(f, n):
                    grids_of.setdefault((cell.condition.condition_id, cell.condition.agent, cell.split, f, i),
                                        []).append(gname)
    out = []
    for cell in expand_conditions(config):
        c = cell.condition
        if c.agent not in llm:
            continue
        n = int(config["instances"][f"n_{cell.split}"])
        for f in cell.families:
            for i in cell.indices(f, n):
                out.append({"agent": c.agent, "condition_id": c.condition_id, "budget": c.budget, "family": f,
                            "split": cell.split, "instance": int(i),
                            "grids": grids_of[(c.condition_id, c.agent, cell.split, f, i)]})
    return out


def _rank(seed: int, *parts) -> str:
    return hashlib.sha256(json.dumps([seed, *parts]).encode()).hexdigest()


def pilot_plan(config: Mapping, k: int, seed: int = PILOT_SEED) -> list[dict]:
    """The ``k`` pilot episodes of each LLM agent and budget setting (see the module docstring).

    Returns records ``{agent, condition_id, budget, family, split, instance, grids}``, by agent,
    setting and order of choice.
    """
    if k < 1:
        raise ValueError(f"a pilot needs at least one episode per agent and budget setting, not {k}")
    strata: dict[tuple[str, str], dict[tuple[str, str], list[dict]]] = {}
    for ep in _planned(config):
        strata.setdefault((ep["agent"], ep["budget"]), {}).setdefault((ep["condition_id"], ep["family"]), []).append(ep)
    chosen = []
    for (agent, budget), cells in sorted(strata.items()):
        queues = {key: sorted(eps, key=lambda e: _rank(seed, agent, e["condition_id"], e["family"], e["instance"]))
                  for key, eps in cells.items()}
        order = sorted(queues, key=lambda key: _rank(seed, agent, budget, *key))
        picked: list[dict] = []
        while len(picked) < k and any(queues.values()):
            for key in order:
                if queues[key] and len(picked) < k:
                    picked.append(queues[key].pop(0))
        chosen += picked
    return chosen


def run_pilot(agent: str, agent_spec: Mapping, plan: Sequence[Mapping], config: Mapping, k: int, *, out: str | Path,
              spend_dir: str | Path | None = None, salt: str | None = None, log=lambda m: None) -> Path:
    """Run ``agent``'s pilot episodes (:func:`pilot_plan`) and write one row per episode (:data:`PILOT`).

    Each episode runs as the episode job that plans it would run it, its request log in the
    job's transcripts folder: the full run replays it.  Its own tables go under the pilot's
    folder (``PILOT_SHARD``), so the full run's jobs are not marked done by the pilot.  Paths are
    the workflow's, relative to the working folder (as in every job).
    """
    from heuresis.artifacts.sealing import PUBLIC_SALT

    started = utc_now()
    rows = []
    for ep in plan:
        fields = {"agent": agent, "condition_id": ep["condition_id"], "family": ep["family"], "split": ep["split"]}
        out_shard = Path(PILOT_SHARD.format(k=k, **fields, index=f"{int(ep['instance']):04d}"))
        where = {"family": ep["family"], "split": ep["split"]}
        run_episode_shard(agent, agent_spec, ep["condition_id"], ep["family"], ep["split"], [int(ep["instance"])],
                          data_dir=INSTANCES.format(**where), truth_dir=Path(TRUTH_GRAPHS.format(**where)).parent,
                          pc_kci_paths=pc_kci_paths(config, ep["family"], ep["split"]),
                          episodes_cfg=episode_job_config(config, ep["condition_id"]),
                          menu=config["references"]["algorithms"], grades=config["grades"], seed=config["seed"],
                          out=out_shard, calls_out=out_shard.with_suffix(".calls.parquet"),
                          requests_out=out_shard.with_suffix(".requests.parquet"),
                          transcripts_dir=EPISODE_TRANSCRIPTS.format(**fields),
                          log=log, spend_dir=spend_dir, salt=PUBLIC_SALT if salt is None else salt)
        episode = read_table(out_shard, EPISODES).to_pylist()[0]
        requests = read_table(out_shard.with_suffix(".requests.parquet"), REQUESTS).to_pylist()
        rows.append(_pilot_row(ep, episode, requests))
    prov = provenance_record(stage="pilot", config={"agent": agent, "plan": list(map(dict, plan))},
                             seeds={"seed": config["seed"], "pilot_seed": PILOT_SEED}, inputs=[], started=started)
    table = pa.table({c: [r[c] for r in rows] for c in PILOT.schema.names}, schema=PILOT.schema)
    write_table(table, out, PILOT, {PROVENANCE_KEY: dumps(prov)})
    return Path(out)


def pc_kci_paths(config: Mapping, family: str, split: str) -> list[str]:
    """PC-KCI's reference Parquets of one family and split (a pilot episode's guided start and test budget)."""
    return [REFERENCES.format(algorithm="pc_kci", family=family, split=split, shard=shard(s))
            for s in reference_shards(config, split)]


def _sum(values) -> int | float | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def _pilot_row(ep: Mapping, episode: Mapping, requests: Sequence[Mapping]) -> dict:
    """One pilot episode: what its requests used and cost (those sent in any run of it, abandoned included)."""
    sent = [r for r in requests if not r["abandoned"]]
    return {"agent": ep["agent"], "condition_id": ep["condition_id"], "budget": ep["budget"],
            "family": ep["family"], "split": ep["split"], "instance": int(ep["instance"]),
            "grids": list(ep["grids"]), "status": episode["status"], "termination": episode["termination"],
            "turns": int(episode["turns"]), "requests": len(sent),
            "tokens_in": _sum(r["tokens_in"] for r in sent), "tokens_out": _sum(r["tokens_out"] for r in sent),
            "cached_tokens": _sum(r["cached_tokens"] or 0 for r in sent),
            "cache_write_tokens": _sum(r["cache_write_tokens"] or 0 for r in sent),
            "reasoning_tokens": _sum(r["reasoning_tokens"] or 0 for r in sent),
            "cost": _sum(r["cost"] for r in requests)}


def forecast(config: Mapping, pilot: Sequence[Mapping], ceilings: Mapping[tuple[str, str], float | None], *,
             level: float = LEVEL) -> list[dict]:
    """Rows of :data:`FORECAST` from the pilot's rows (:data:`PILOT`), see the module docstring.

    ``ceilings`` maps (agent, part) to the upper bound of its dollars (``heuresis.preflight.spend.ceilings``).
    """
    planned = _planned(config)
    caps = {a: spec.get("max_run_usd") for a, spec in llm_agents_in_use(config).items()}
    rows = []
    for agent in sorted({e["agent"] for e in planned}):
        mine = [e for e in planned if e["agent"] == agent]
        budgets = sorted({e["budget"] for e in mine})
        ok = {b: [p for p in pilot if p["agent"] == agent and p["budget"] == b and p["status"] == "ok"
                  and p["cost"] is not None] for b in budgets}
        parts = [(g, [e for e in mine if g in e["grids"]]) for g in config["episodes"]["run"]] + [("total", mine)]
        for part, eps in parts:
            if not eps:
                continue
            counts = {b: sum(e["budget"] == b for e in eps) for b in budgets}
            piloted = [p for p in pilot if p["agent"] == agent and (part == "total" or part in p["grids"])]
            known = all(ok[b] for b, n in counts.items() if n)
            point = sum(n * float(np.mean([p["cost"] for p in ok[b]])) for b, n in counts.items() if n) \
                if known else None
            lo, hi = total_interval([(n, [p["cost"] for p in ok[b]]) for b, n in counts.items() if n], level) \
                if known else (None, None)
            paid = float(sum(p["cost"] or 0.0 for p in piloted))
            per = [p for b in budgets for p in ok[b] if counts[b]]
            rows.append({
                "agent": agent, "part": part, "episodes": len(eps), "pilot_episodes": len(piloted),
                "pilot_failed": sum(p["status"] != "ok" for p in piloted),
                "mean_turns": _mean(p["turns"] for p in per), "mean_requests": _mean(p["requests"] for p in per),
                "mean_tokens_in": _mean(p["tokens_in"] for p in per),
                "mean_tokens_out": _mean(p["tokens_out"] for p in per),
                "mean_cached_tokens": _mean(p["cached_tokens"] for p in per),
                "mean_reasoning_tokens": _mean(p["reasoning_tokens"] for p in per),
                "forecast_usd": point, "low_usd": None if lo is None else float(lo),
                "high_usd": None if hi is None else float(hi), "level": level, "pilot_paid_usd": paid,
                "remaining_usd": None if point is None else max(point - paid, 0.0),
                "ceiling_usd": ceilings.get((agent, "episodes")) if part == "total" else None,
                "max_run_usd": None if caps.get(agent) is None else float(caps[agent]),  # type: ignore[arg-type]
            })
    for (agent, part), dollars in sorted(ceilings.items()):
        if part not in ("episodes", "total"):
            rows.append({**dict.fromkeys(FORECAST.schema.names), "agent": agent, "part": part, "episodes": 0,
                         "pilot_episodes": 0, "pilot_failed": 0, "level": level, "pilot_paid_usd": 0.0,
                         "ceiling_usd": dollars,
                         "max_run_usd": None if caps.get(agent) is None else float(caps[agent])})  # type: ignore[arg-type]
    return rows


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def total_interval(settings: Sequence[tuple[int, Sequence[float]]], level: float = LEVEL) -> tuple[float | None, float | None]:
    """A ``level`` interval for ``sum(n * mean(costs))`` over the settings ``(n planned, pilot costs)``.

    Student's t around the point forecast, with the standard error ``sqrt(sum(n**2 * s**2 / k))``
    (``s`` a setting's sample standard deviation over its ``k`` pilot costs) and the
    Welch–Satterthwaite degrees of freedom: wider than a bootstrap of the pilot's values, which
    with a few episodes sees only the spread they happened to have.  The lower end is at least 0.
    (None, None) when a setting has fewer than two pilot episodes.
    """
    from scipy import stats

    point, parts = 0.0, []
    for n, costs in settings:
        c = np.asarray(costs, dtype=float)
        if len(c) < 2:
            return None, None
        point += n * float(c.mean())
        parts.append((n**2 * float(c.var(ddof=1)) / len(c), len(c) - 1))
    var = sum(v for v, _ in parts)
    if var == 0:
        return point, point
    df = var**2 / sum(v**2 / k for v, k in parts if v > 0)
    half = float(stats.t.ppf((1 + level) / 2, df)) * var**0.5
    return max(point - half, 0.0), point + half


def _usd(x) -> str:
    return "-" if x is None else f"${x:,.2f}"


def forecast_lines(rows: Sequence[Mapping]) -> list[str]:
    """The forecast as text lines (``heuresis forecast``, ``check-config``, ``forecast.md``)."""
    out = [f"{'agent':<13} {'part':<16} {'episodes':>8} {'pilot':>5} {'per episode':>12} "
           f"{'forecast':>12} {'interval':>25} {'paid':>10} {'ceiling':>13} {'max_run_usd':>12}"]
    for r in rows:
        per = None if r["forecast_usd"] is None or not r["episodes"] else r["forecast_usd"] / r["episodes"]
        band = "-" if r["low_usd"] is None else f"{_usd(r['low_usd'])} - {_usd(r['high_usd'])}"
        out.append(f"{r['agent']:<13} {r['part']:<16} {r['episodes'] or '-':>8} {r['pilot_episodes'] or '-':>5} "
                   f"{_usd(per):>12} {_usd(r['forecast_usd']):>12} {band:>25} {_usd(r['pilot_paid_usd']):>10} "
                   f"{_usd(r['ceiling_usd']):>13} {_usd(r['max_run_usd']):>12}")
        if r["pilot_failed"]:
            out[-1] += f"  ({r['pilot_failed']} pilot episodes failed: not in the mean)"
    return out


def write_forecast(config: Mapping, pilot_paths: Sequence[str | Path], ceilings: Mapping[tuple[str, str], float | None],
                   out: str | Path, text_out: str | Path) -> Path:
    """Write the forecast (:data:`FORECAST`, and the same as a Markdown table) from the pilot's tables."""
    started = utc_now()
    pilot = [row for p in pilot_paths for row in read_table(p, PILOT).to_pylist()]
    rows = forecast(config, pilot, ceilings)
    prov = provenance_record(stage="forecast", config={"level": LEVEL, "interval": "t, Welch-Satterthwaite"},
                             seeds={"pilot_seed": PILOT_SEED}, inputs=list(map(Path, pilot_paths)), started=started)
    write_table(pa.table({c: [r[c] for r in rows] for c in FORECAST.schema.names}, schema=FORECAST.schema), out,
                FORECAST, {PROVENANCE_KEY: dumps(prov)})
    level = int(LEVEL * 100)
    atomic_write_text(text_out, "# Forecast of the run's LLM spend\n\n"
                      f"Per agent and grid: planned episodes x the mean cost of the pilot's episodes of each budget "
                      f"setting, with a {level} % interval (Student's t over the settings, for small pilots); the "
                      "ceiling prices every request at the full context window. Rows without a forecast were not "
                      "piloted (game plays, judgements, leakage).\n\n"
                      "```\n" + "\n".join(forecast_lines(rows)) + "\n```\n")
    return Path(out)
