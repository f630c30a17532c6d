"""What a served view shows of a running workflow: the run's plan, its progress and its spend.

When a run starts (Snakemake's ``onstart``), :func:`write_plan` writes ``results/run/plan.json``
(:data:`~heuresis.artifacts.paths.RUN_PLAN`): the start time, every job about to run with its rule
and output files, and each LLM agent's run cap (``max_run_usd``). :func:`run_header` reads it with
the results folder as it is now:

* **jobs**: per rule, planned and done (a planned job is done when all its outputs exist);
* **agents**: per agent its episodes and plays so far, prompt and reply tokens and dollars (from
  their rows), the spend ledger's settled and reserved dollars (:class:`SpendLedger`) against
  the cap, and whether the run stopped it (a stop record);
* **failures** by kind: the status and termination of every episode and play that did not end ``ok``.

:func:`stamp` digests the folder's artifacts, journals and the plan (names, sizes, modification
times): a served page polls it (``live.json``) and redraws when it changes. Nothing is written
here but the plan.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from heuresis.agents.spend import RATES, STOPPED, LedgerError, SpendLedger, read_stop
from heuresis.artifacts.io import atomic_write_text
from heuresis.artifacts.paths import FIGURE, RESULTS, RUN_PLAN, SPEND, TABLE

__all__ = ["PLAN_VERSION", "finished_lines", "read_plan", "run_header", "stamp", "write_plan"]

PLAN_VERSION = 1


def _under(results: Path, template: str) -> Path:
    """A ``results/...`` path of the layout under the results folder ``results``."""
    return results / Path(template).relative_to(RESULTS)


def write_plan(path: str | Path, jobs: Iterable[tuple[str, Iterable[str]]], caps: Mapping[str, float | None]) -> Path:
    """Write the run's plan: ``jobs`` as (rule, output files), ``caps`` each LLM agent's ``max_run_usd``."""
    record = {"version": PLAN_VERSION, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "jobs": [{"rule": rule, "outputs": sorted(str(o) for o in outputs)} for rule, outputs in jobs],
              "caps": {a: (None if c is None else float(c)) for a, c in sorted(caps.items())}}
    return atomic_write_text(path, json.dumps(record, indent=1) + "\n")


def read_plan(results: str | Path) -> dict | None:
    """The plan of the run whose results folder is ``results``, or None when none was written or it does not read."""
    p = _under(Path(results), RUN_PLAN)
    try:
        plan = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return plan if isinstance(plan, dict) and plan.get("version") == PLAN_VERSION else None


def stamp(results: str | Path) -> str:
    """A digest of what the view reads: every Parquet file's and journal's name, size and time, and the plan."""
    results = Path(results)
    h = hashlib.sha256()
    files = [*results.rglob("*.parquet"), *_under(results, SPEND).rglob("*.jsonl"), _under(results, RUN_PLAN)]
    for p in sorted(files):
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p.relative_to(results)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _done(results: Path, outputs: list[str]) -> bool:
    base = results.parent      # outputs are named as the workflow names them: results/...
    return all((base / o).exists() for o in outputs)


def _failures(rows: Iterable[Mapping], what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        if r.get("status") != "ok":
            kind = f"{what} {r.get('status')}" + (f" ({r['termination']})" if r.get("termination") else "")
            out[kind] = out.get(kind, 0) + 1
    return out


def run_header(results: str | Path, episodes: Iterable[Mapping], plays: Iterable[Mapping]) -> dict:
    """The header of a run's view: jobs planned and done, per-agent totals and spend, failures by kind."""
    results = Path(results)
    episodes, plays = list(episodes), list(plays)
    plan = read_plan(results)
    jobs: dict[str, dict[str, int]] = {}
    for job in (plan or {}).get("jobs", []):
        counts = jobs.setdefault(job["rule"], {"planned": 0, "done": 0})
        counts["planned"] += 1
        counts["done"] += _done(results, job["outputs"])
    caps = (plan or {}).get("caps", {})
    spend = _under(results, SPEND)
    names = set(caps) | {r["agent"] for r in episodes} | {r["agent"] for r in plays}
    if spend.is_dir():
        names |= {p.name for p in spend.iterdir()     # a reset ledger is kept as NAME.reset-TIME
                  if p.is_dir() and p.name not in (RATES, STOPPED) and "." not in p.name}
    agents = []
    for name in sorted(names):
        mine = [r for r in episodes if r["agent"] == name] + [r for r in plays if r["agent"] == name]
        costs = [r.get("cost") for r in mine]
        row: dict[str, object] = {"agent": name, "episodes": sum(r["agent"] == name for r in episodes),
               "plays": sum(r["agent"] == name for r in plays),
               "tokens_in": sum(r.get("tokens_in") or 0 for r in mine),
               "tokens_out": sum(r.get("tokens_out") or 0 for r in mine),
               "cost": None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
               "cap": caps.get(name), "spent": None, "reserved": None, "stopped": read_stop(spend, name),
               "ledger_problem": None}
        if (spend / name).is_dir():
            try:
                totals = SpendLedger(spend, name, float("inf")).totals()
                row.update(spent=totals["spent"], reserved=totals["reserved"])
            except LedgerError as exc:      # shown on the page, as the jobs would stop on it
                row["ledger_problem"] = str(exc)
        agents.append(row)
    failures = {**_failures(episodes, "episode"), **_failures(plays, "play")}
    return {"started": (plan or {}).get("started"), "planned": plan is not None,
            "jobs": [{"rule": k, **v} for k, v in sorted(jobs.items())],
            "jobs_planned": sum(v["planned"] for v in jobs.values()), "jobs_done": sum(v["done"] for v in jobs.values()),
            "agents": agents, "failures": dict(sorted(failures.items()))}


def finished_lines(configfiles: Iterable[str | Path], base: str | Path = "config/config.yaml",
                   results: str | Path = RESULTS) -> list[str]:
    """What a finished run says last (Snakemake's ``onsuccess``): what was built, where, and how to look.

    ``configfiles``: the run's config files, the base config ``base`` first (left out of the
    commands shown, as Snakemake reads it by itself).
    """
    res = Path(results)
    tables = sorted({p.stem for p in _under(res, TABLE).parent.glob("*.md")})
    figures = sorted({p.stem for p in _under(res, FIGURE).parent.glob("*.png")})
    given = [str(_shown(f)) for f in configfiles if Path(f).resolve() != Path(base).resolve()]
    config = f" --configfile {' '.join(given)}" if given else ""
    named = [t for t in tables if t.startswith("table")] or tables
    example = f"{res}/tables/{named[0]}.md" if named else str(res)
    return [f"Finished: {len(tables)} tables in {res}/tables, {len(figures)} figures in {res}/figures;",
            f"  every artifact under {res}/ (docs/artifacts.md maps each path to its rule)",
            f"  browse episodes, plays and tables:  heuresis view {res}",
            f"  the report with every caption:      snakemake --report report.html{config}",
            f"  how a number was made:              heuresis provenance {example}"]


def _shown(path: str | Path) -> Path:
    """``path`` relative to the working folder when it lies under it."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return p
