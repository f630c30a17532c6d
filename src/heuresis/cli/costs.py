"""What a run costs: ``check-config`` (the plan, its LLM bill, credentials, isolation), ``forecast`` and ``spend``."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from heuresis.agents.llm import CredentialsError, check_credentials, llm_agents_in_use
from heuresis.agents.spend import SpendLedger, clear_stop, read_stop
from heuresis.artifacts import paths as P
from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import PILOT
from heuresis.artifacts.sealing import disclosure
from heuresis.cli.options import config_of, files_of, with_config
from heuresis.harness.conditions import grid_plan
from heuresis.harness.sandbox import IsolationUnavailable, check_isolation
from heuresis.preflight.spend import ceilings, pilot_bound, spend_bounds
from heuresis.registry import MODEL_KINDS
from heuresis.stages.episodes import episode_jobs
from heuresis.stages.games.workflow import play_jobs, scenario_names
from heuresis.stages.instances import family_kinds
from heuresis.stages.pilot import LEVEL, RECOMMENDED_PILOT, forecast, forecast_lines


def episode_bill(cfg: dict) -> list[str]:
    """Return the episode lines of ``check-config``: per active grid its episodes and LLM requests, then totals.

    The LLM request count is an upper bound: per episode its budget's turns plus the last turn's
    requests (transport retries not counted).
    """
    rows = grid_plan(cfg)
    if not rows:
        return ["episodes: no active grid (episodes.run is empty)"]
    w = max(len(r["grid"]) for r in rows)
    out = ["episode grids (episodes.run): episodes planned, LLM episodes, LLM requests at most "
           "(turns + last turn per episode; transport retries not counted); 'new' excludes what an earlier grid "
           "already plans"]
    for r in rows:
        out.append(f"  {r['grid']:<{w}}  {r['episodes']:>6,} episodes  {r['llm_episodes']:>6,} LLM "
                   f"({r['new_llm_episodes']:>6,} new)  <= {r['llm_requests']:>7,} LLM requests "
                   f"({r['new_llm_requests']:>7,} new)")
    tot = sum(r["new_llm_episodes"] for r in rows)
    req = sum(r["new_llm_requests"] for r in rows)

    out.append(f"  total: {tot:,} LLM episodes, at most {req:,} LLM requests ({len(episode_jobs(cfg)):,} episode jobs)")
    return out


def _amount(value, dollars: bool = False) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if dollars else f"{value:,}"


def spend_lines(cfg: dict) -> list[str]:
    """Return the spend lines of ``check-config``: upper bounds per LLM agent and part of the run.

    Requests, input and output tokens and dollars (:func:`heuresis.preflight.spend.spend_bounds`).
    """
    rows = spend_bounds(cfg)
    if not rows:
        return ["LLM spend: no LLM agent in use"]
    w = max(len(r.agent) for r in rows)
    out = ["LLM spend at most (docs/agents.md, \"Running real models at scale\"): requests (failed attempts "
           "not counted), input tokens (each request at most the model's context window), output tokens (each "
           "request at most its cap), USD (litellm's price map or the agent's prices; cached input at the full "
           "rate)"]
    for r in rows:
        out.append(f"  {r.agent:<{w}}  {r.part:<12}  {r.requests:>8,} requests  {_amount(r.input_tokens):>15} in  "
                   f"{_amount(r.output_tokens):>12} out  {_amount(r.dollars, True):>12}")
    totals = [r for r in rows if r.part == "total"]
    dollars = None if any(r.dollars is None for r in totals) else sum(r.dollars for r in totals)  # type: ignore[misc]
    out.append(f"  all LLM agents: at most {sum(r.requests for r in totals):,} model requests and "
               f"{_amount(dollars, True)}")
    return out + cap_lines(cfg, totals)


def cap_lines(cfg: dict, totals) -> list[str]:
    """The bound under each agent's ``max_run_usd`` (the run stops an agent there).

    And a warning per paid agent without one.
    """
    llm = {name: spec for name, spec in cfg["agents"].items() if spec.get("kind") in MODEL_KINDS}
    bounds: list[float | None] = []
    out: list[str] = []
    for r in totals:
        cap = llm.get(r.agent, {}).get("max_run_usd")
        bound = (None if r.dollars is None else r.dollars) if cap is None else (
            float(cap) if r.dollars is None else min(float(cap), r.dollars))
        bounds.append(bound)
        out.append(f"  {r.agent:<14} {_amount(bound, True):>12}  " + (f"(max_run_usd ${float(cap):,.2f})" if cap is not None
                                                                 else "(no max_run_usd: the ceiling above)"))
        if cap is None and (r.dollars is None or r.dollars > 0):
            out.append(f"  WARNING: agent {r.agent!r} has no max_run_usd: nothing but the ceiling above "
                       f"({_amount(r.dollars, True)}) bounds what it spends (set agents.{r.agent}.max_run_usd)")
    known = [b for b in bounds if b is not None]
    total = sum(known) if len(known) == len(bounds) else None
    return ["LLM spend under the run caps (each agent stops at its max_run_usd, docs/agents.md):", *out,
            f"  all LLM agents: at most {_amount(total, True)}"]


def pilot_forecast(cfg: dict, results: str | Path = "results") -> tuple[int, list[dict]] | None:
    """The forecast of the largest pilot under ``results/pilot`` against ``cfg``'s plan; None: no pilot yet."""
    runs = sorted((int(d.name[1:]), d) for d in Path(results, "pilot").glob("k*") if d.name[1:].isdigit()
                  and any(d.glob("*.parquet")))
    if not runs:
        return None
    k, folder = runs[-1]
    rows = [r for path in sorted(folder.glob("*.parquet")) if path.name != "forecast.parquet"
            for r in read_table(path, PILOT).to_pylist()]
    return k, forecast(cfg, rows, ceilings(cfg))


def forecast_text(cfg: dict, results: str | Path = "results") -> list[str]:
    """The forecast lines of ``check-config`` and ``heuresis forecast`` (or how to get a forecast)."""
    found = pilot_forecast(cfg, results)
    if found is None:
        k = RECOMMENDED_PILOT
        bound = pilot_bound(cfg, k)
        total = None if any(v is None for v in bound.values()) else sum(bound.values())  # type: ignore[arg-type]
        each = ", ".join(f"{a} {_amount(v, True)}" for a, v in sorted(bound.items()))
        return [f"LLM spend forecast: no pilot yet (heuresis forecast --pilot {k} runs {k} of the run's own episodes "
                "per LLM agent and budget setting, which the full run then replays, and forecasts the rest; it costs "
                f"at most {_amount(total, True)}: {each}; each agent's pilot also stops at its max_run_usd)"]
    k, rows = found
    return [f"LLM spend forecast from the pilot under {results}/pilot/k{k} ({k} episodes per agent and budget "
            f"setting; interval {int(LEVEL * 100)} %, bootstrap over pilot episodes; per episode, forecast, interval, "
            "paid by the pilot, the ceiling above, the cap):", *("  " + line for line in forecast_lines(rows))]


def cmd_forecast(args: argparse.Namespace) -> int:
    """Run the pilot (``--pilot K``) through the workflow, then print the forecast of the run's LLM spend."""
    cfg = config_of(args)
    if args.pilot:
        files = [f for f in files_of(args) if Path(f).resolve() != Path("config/config.yaml").resolve()]
        cmd = ["snakemake", P.FORECAST_TEXT.format(k=args.pilot), "--cores", str(args.cores),
               *(["--configfile", *files] if files else []), *[a for a in args.snakemake if a != "--"]]
        print("running the pilot: " + " ".join(cmd), file=sys.stderr)
        rc = subprocess.run(cmd, check=False).returncode
        if rc != 0:
            print(f"heuresis forecast: the pilot's workflow failed (exit {rc}); what it paid is kept and replayed",
                  file=sys.stderr)
            return rc
    for line in forecast_text(cfg, args.results):
        print(line)
    return 0


def cmd_spend(args: argparse.Namespace) -> int:
    """Show the run's spend per LLM agent (ledger and stop records); reset a ledger or resume a stopped agent."""
    cfg = config_of(args)
    folder = Path(args.results, "spend")
    agents = llm_agents_in_use(cfg)
    for name in args.reset or []:
        ledger = folder / name
        if ledger.is_dir():
            archived = folder / f"{name}.reset-{time.strftime('%Y%m%dT%H%M%S')}"
            ledger.rename(archived)
            print(f"{name}: ledger moved to {archived} (kept; the run's spend starts again from $0)")
    for name in args.resume or []:
        print(f"{name}: " + ("stop record removed; its jobs send requests again" if clear_stop(folder, name)
                             else "was not stopped"))
    print(f"run spend under {folder} (spent: settled at the actual cost; reserved: in flight, or of unknown cost)")
    for name, spec in sorted(agents.items()):
        cap = spec.get("max_run_usd")
        t = SpendLedger(folder, name, float(cap) if cap is not None else float("inf")).totals()
        stop = read_stop(folder, name)
        print(f"  {name:<14} spent ${t['spent']:,.4f}  reserved ${t['reserved']:,.4f}  "
              + (f"cap ${float(cap):,.2f} (${float(cap) - t['spent'] - t['reserved']:,.4f} left)" if cap is not None
                 else "no cap (max_run_usd not set)")
              + (f"  STOPPED: {stop}" if stop else ""))
    return 0


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate a configuration and print what it plans, its LLM credentials and code-tool isolation.

    Returns 1 when a credential is missing or the required isolation is unavailable, else 0.
    """
    files = files_of(args)
    cfg = config_of(args)
    print(f"config files merged, in order: {', '.join(files)}")
    fams = ", ".join(f"{name} ({family_kinds(f)})" for name, f in cfg["families"].items())
    print(f"config OK: d={cfg['instances']['d']}, n={cfg['instances']['n']}, "
          f"{cfg['instances']['n_dev']} dev + {cfg['instances']['n_test']} test instances per family")
    print(f"families: {fams}")
    for line in episode_bill(cfg):
        print(line)

    g = cfg["games"]
    print(f"games: {len(scenario_names(cfg))} scenarios, agents {', '.join(g['agents'])}, modes "
          f"{', '.join(g['modes'])}, {g['plays']} plays per LLM agent and {g['baseline_plays']} per offline agent "
          f"({len(play_jobs(cfg))} play jobs), judges "
          f"{', '.join(g['judges']) or 'none (the rubric says: no judge configured)'}")

    sec = disclosure(cfg)
    print(f"secrets: salt {sec['salt']}; test split {_test_split_text(cfg, sec)}")

    llm = llm_agents_in_use(cfg)
    if llm:
        print("LLM agents in use: " + ", ".join(f"{a} ({s['model']})" for a, s in llm.items()))
        for line in spend_lines(cfg):
            print(line)
        for line in forecast_text(cfg):
            print(line)
        uncapped = [a for a, spec in llm.items() if spec.get("max_run_usd") is None and spec.get("requires_key", True)]
        if uncapped:
            print("warning: no spend cap (max_run_usd) for " + ", ".join(uncapped) + ": nothing bounds what these "
                  "agents spend over the run")
    try:
        check_credentials(cfg)
    except CredentialsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    try:
        print(f"code tool isolation: {check_isolation(cfg)} "
              f"(episodes.code_tool.isolation = {cfg['episodes']['code_tool'].get('isolation', 'required')})")
    except IsolationUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _test_split_text(cfg: dict, sec: Mapping) -> str:
    """How the config's test split is sealed (``sec``: :func:`heuresis.artifacts.sealing.disclosure`)."""
    record = cfg["secrets"]["commitment_file"]
    if sec["test_seed"] == "public":
        return "public (from seed; tables labelled UNSEALED)"
    if not sec["commitment"]:
        return (f"sealed, but its seed is not available ({cfg['secrets']['test_seed_env']} not set): the workflow "
                "refuses to build the test split")
    if not sec.get("committed"):
        return (f"sealed, commitment {sec['commitment']}, but no matching commitment record ({record}; heuresis "
                "seal commit writes it): the workflow refuses to build the test split")
    return f"sealed, commitment {sec['commitment']}, recorded {sec['committed']} in {record}"


def add_commands(sub) -> None:
    """Add this group's commands to the ``heuresis`` parser's subcommands ``sub``."""
    sp = with_config(sub.add_parser("check-config", help="validate a configuration"))
    sp.set_defaults(func=cmd_check_config)

    sp = with_config(sub.add_parser(
        "forecast", help="run a pilot of the run's own LLM episodes and forecast what the whole run will cost",
        description="With --pilot K, build results/pilot/kK/forecast.md through Snakemake: K of the planned "
                    "episodes per LLM agent and budget setting (their request logs where the run's jobs keep "
                    "theirs, so the full run replays them), then the planned episodes times the pilot's mean "
                    "cost per setting, with a bootstrap interval. Without it, print the forecast of the largest "
                    "pilot found. See docs/agents.md."))
    sp.add_argument("--pilot", type=int, metavar="K", help="pilot episodes per LLM agent and budget setting")
    sp.add_argument("--cores", type=int, default=1, help="cores for the pilot's workflow (default 1)")
    sp.add_argument("--results", default="results", help="results folder (default: results)")
    sp.add_argument("snakemake", nargs=argparse.REMAINDER, help="further snakemake arguments, after --")
    sp.set_defaults(func=cmd_forecast)

    sp = with_config(sub.add_parser("spend", help="the run's LLM spend per agent; reset a ledger, resume a stopped agent"))
    sp.add_argument("--results", default="results", help="results folder (default: results)")
    sp.add_argument("--reset", action="append", metavar="AGENT",
                    help="start AGENT's run ledger again from $0 (the old one is kept beside it)")
    sp.add_argument("--resume", action="append", metavar="AGENT",
                    help="remove AGENT's stop record (left by a fatal provider error) once its cause is fixed")
    sp.set_defaults(func=cmd_spend)
