"""The leaderboard of the observational track: agents ranked with honest ties, cost beside score.

One row per result (an agent under one condition; the conditions of ``leaderboard.conditions``,
else every condition with test episodes) and scope (each family, then ``all``):

* **score**: adjacency F1, Δ^s (against BCA_g) and Δ^r (against BCA_f), each with its 95% paired
  bootstrap interval over instances (the analysis tables' intervals), and the share of the oracle's
  headroom the agent captured, ``Σ Δ^r / Σ (oracle − BCA_f)`` over its instances (instances resampled);
* **episodes**: results, finished, truncated (no submission of the agent's own), failed (an API or
  harness error: not scored, counted), mean turns, tokens (prompt + completion) and dollars per
  episode and in total (recorded cost; "unknown" when some price is), integrity events per episode;
* **rank and ties**: within a scope every two results are compared on the instances both have, by
  a two-sided paired sign-flip permutation test of the mean per-instance F1 difference (exact
  over all 2^n sign patterns up to :data:`~heuresis.causal.ties.EXACT_MAX` instances, else ``leaderboard.permutations``
  random ones with the bootstrap seed), with Holm's correction over the scope's pairs at
  ``leaderboard.alpha``.  A result's rank is one plus the number of results significantly better
  than it, so results no test separates share a rank; ``tied_with`` lists the results it is not
  separated from.  (Δ^r differences equal F1 differences on shared instances: BCA_f is the
  instance's own.)

Published rows (the paper's Table 13, :func:`heuresis.targets.published.load_published_table13`) follow in a block of their
own, never ranked with a run's rows: they were measured on the paper's instances, whose data
digests a run cannot check against its own.

:func:`load_run` and :func:`merge_runs` read several results folders into one board: an instance
whose data digest differs between folders, a headroom score that differs, or one agent ×
condition × instance recorded twice with different scores is refused with an error naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from heuresis.artifacts.report import format_interval
from heuresis.causal.bootstrap import Interval, bootstrap_mean, bootstrap_ratio
from heuresis.causal.ties import significance_ranks
from heuresis.config.loading import schema_default
from heuresis.config.settings import Bootstrap
from heuresis.harness.conditions import condition_label
from heuresis.stages.analysis.tables import (
    CONDITION_FIELDS,
    GLOBAL,
    integrity_summary,
    results_of,
    scopes_of,
    split_failed,
    test_episodes,
)

__all__ = [
    "RunData",
    "leaderboard",
    "load_run",
    "merge_runs",
]

NA = float("nan")
#: Below this mean oracle gain over BCA_f (F1) the share of headroom captured is not reported: a ratio of near-zero sums.
MIN_HEADROOM = 0.01
PUBLISHED_NOTE = ("published on the paper's instances; not ranked with this run's rows (the paper's instance "
                  "digests are not published, so no instance of this run can be shown to be one of them)")


# --- several runs, one board --------------------------------------------------------------------
@dataclass
class RunData:
    """What a board is built from: episode scores, headroom test scores, instance digests, their folders."""

    scores: pd.DataFrame
    headroom: pd.DataFrame
    instances: pd.DataFrame          # family, split, instance, data_sha256, folder
    folders: tuple[str, ...]


def load_run(results: str | Path) -> RunData:
    """Read a results folder (or a bundle of one): its episode scores, headroom test scores and instance indexes.

    A missing file raises FileNotFoundError naming it and the rule that builds it.
    """
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import EPISODE_SCORES, HEADROOM_SCORES, INSTANCE_INDEX

    root = Path(results)
    if root.is_file():      # a bundle (heuresis bundle): its results folder, checked against its manifest
        from heuresis.stages.bundle import extracted

        with extracted(root) as folder:
            run = load_run(folder)
        return RunData(run.scores, run.headroom, run.instances.assign(folder=str(root)), (str(root),))
    need = {root / "analysis" / "episode_scores.parquet": "episode_scores",
            root / "headroom" / "test_scores.parquet": "headroom"}
    for path, rule in need.items():
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found; build it first (snakemake {rule}) or name a results folder")
    scores = read_table(root / "analysis" / "episode_scores.parquet", EPISODE_SCORES).to_pandas()
    headroom = read_table(root / "headroom" / "test_scores.parquet", HEADROOM_SCORES).to_pandas()
    frames = [read_table(p, INSTANCE_INDEX).to_pandas()[["family", "split", "instance", "data_sha256"]]
              .assign(generator=_generator_version(p)) for p in sorted((root / "instances").glob("*/*/index.parquet"))]
    instances = (pd.concat(frames, ignore_index=True) if frames else
                 pd.DataFrame(columns=["family", "split", "instance", "data_sha256", "generator"]))
    return RunData(scores, headroom, instances.assign(folder=str(root)), (str(root),))


def _generator_version(index: Path) -> str:
    """The generator version an instance index records in its provenance (``unrecorded`` before it was)."""
    import pyarrow.parquet as pq

    from heuresis.artifacts.provenance import PROVENANCE_KEY

    raw = (pq.read_schema(index).metadata or {}).get(PROVENANCE_KEY.encode())
    config = json.loads(raw).get("config") if raw else None
    version = config.get("generator") if isinstance(config, Mapping) else None
    return "unrecorded" if version is None else str(version)


def merge_runs(runs: Sequence[RunData]) -> RunData:
    """One board's data from several runs; refuses, naming it, what would compare unlike with unlike.

    Raises ValueError for instance generator versions that differ between folders, an instance
    whose data digest differs between two folders, a headroom
    score (method, family, instance) that differs, or an agent × condition × instance recorded
    twice with different scores (the same row twice is kept once).
    """
    if not runs:
        raise ValueError("no results folder to build a leaderboard from")
    inst = pd.concat([r.instances for r in runs], ignore_index=True)
    if "generator" in inst and inst["generator"].nunique() > 1:
        versions = inst.groupby("generator")["folder"].agg(lambda f: sorted(set(f))).to_dict()
        raise ValueError("the instance generator's versions differ between the folders: "
                         + "; ".join(f"version {v} in {', '.join(f)}" for v, f in sorted(versions.items()))
                         + " (results of different versions are never ranked together)")
    for (fam, split, i), g in inst.groupby(["family", "split", "instance"]):
        if g["data_sha256"].nunique() > 1:
            raise ValueError(f"instance {fam}/{split}/{int(i):04d} differs between {' and '.join(g['folder'])} "
                             "(data digests differ: another instance config, seed or generator version); "
                             "agents are compared only on the same instances")
    heads = pd.concat([r.headroom.assign(_folder=f) for r in runs for f in r.folders[:1]], ignore_index=True)
    for (fam, i, method), g in heads.groupby(["family", "instance", "method"]):
        if g["f1"].round(12).nunique(dropna=False) > 1:
            raise ValueError(f"headroom score {method} on {fam}/test/{int(i):04d} differs between "
                             f"{' and '.join(g['_folder'])} (another reference config or code version)")
    heads = heads.drop_duplicates(["family", "instance", "method"]).drop(columns="_folder")
    scores = pd.concat([r.scores.assign(_folder=r.folders[0]) for r in runs], ignore_index=True)
    keys = ["agent", "condition_id", "family", "split", "instance"]
    kept = []
    for _, g in scores.groupby(keys, sort=False):
        if len(g) > 1:
            first = g.drop(columns="_folder").iloc[0]
            for k in range(1, len(g)):
                other = g.drop(columns="_folder").iloc[k]
                if not _same_row(first, other):
                    raise ValueError(f"episode {first['episode_id']} is in {g['_folder'].iloc[0]} and "
                                     f"{g['_folder'].iloc[k]} with different scores; keep one of them "
                                     "(the same agent, condition and instance is counted once)")
        kept.append(g.iloc[[0]])
    merged = pd.concat(kept, ignore_index=True).drop(columns="_folder") if kept else runs[0].scores.iloc[:0]
    return RunData(merged, heads.reset_index(drop=True), inst.drop_duplicates(["family", "split", "instance"]),
                   tuple(f for r in runs for f in r.folders))


def _same_row(a: pd.Series, b: pd.Series) -> bool:
    return json.dumps(a.to_dict(), default=_plain, sort_keys=True) == json.dumps(b.to_dict(), default=_plain,
                                                                                 sort_keys=True)


def _plain(v):
    return v.tolist() if hasattr(v, "tolist") else str(v)


# --- the board -----------------------------------------------------------------------------------
def _iv(values, boot: Bootstrap) -> Interval | None:
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return bootstrap_mean(v, **boot.kwargs()) if len(v) else None


def _cols(iv: Interval | None, name: str) -> dict:
    if iv is None:
        return {name: NA, f"{name}_lo": NA, f"{name}_hi": NA}
    return {name: iv.estimate, f"{name}_lo": iv.lo, f"{name}_hi": iv.hi}


def _money(x: float) -> str:
    return "unknown" if x is None or (isinstance(x, float) and math.isnan(x)) else f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def _oracle_gap(headroom: pd.DataFrame) -> dict[tuple[str, int], float]:
    h = headroom[headroom["method"].isin(["oracle", "bca_f"])].pivot_table(index=["family", "instance"],
                                                                           columns="method", values="f1")
    if not {"oracle", "bca_f"} <= set(h.columns):
        return {}
    return {(f, int(i)): float(v) for (f, i), v in (h["oracle"] - h["bca_f"]).items()}


def leaderboard(scores: pd.DataFrame, headroom: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping,
                agents: Sequence[str] = (), settings: Mapping | None = None, published: Mapping | None = None):
    """Build the board: ``(numbers, display)`` (module docstring); ``published`` adds its block."""
    boot = Bootstrap.coerce(boot)
    settings = dict(settings or {})
    alpha = float(settings.get("alpha", schema_default("leaderboard", "alpha")))
    permutations = int(settings.get("permutations", schema_default("leaderboard", "permutations")))
    chosen = list(settings.get("conditions") or [])
    test = test_episodes(scores)
    if chosen:
        test = test[test["condition_id"].isin(chosen)]
    ok, failed = split_failed(test)
    gap = _oracle_gap(headroom)
    rows = []
    for agent, cond in results_of(test, agents):
        part_all = test[(test["agent"] == agent) & (test["condition_id"] == cond)]
        for scope in scopes_of(part_all, families):
            sel = part_all if scope == GLOBAL else part_all[part_all["family"] == scope]
            part = ok[ok.index.isin(sel.index)].sort_values(["family", "instance"])
            n_failed = int(failed.index.isin(sel.index).sum())
            rows.append(_row(agent, cond, scope, sel.iloc[0], part, n_failed, gap, boot, settings))
    numbers = pd.DataFrame(rows)
    if numbers.empty:
        numbers = pd.DataFrame(columns=["block", "rank", "agent", "condition_id", "family", "note"])
    else:
        numbers = _ranked(numbers, ok, alpha, permutations, boot.seed)
    numbers.insert(0, "block", "this run")
    if published:
        numbers = pd.concat([numbers, _published_rows(published)], ignore_index=True)
    return numbers, _display(numbers, float(settings.get("at_usd", 0.05)))


def _mean(values) -> float:
    v = np.asarray([x for x in values if x is not None and not pd.isna(x)], dtype=float)
    return float(v.mean()) if len(v) else NA


def _at_spend(curve, usd, budget: float) -> float:
    """The working graph's F1 at the last turn whose spend is within ``budget`` (NaN: the spend is unknown)."""
    if usd is None or not len(curve) or (isinstance(usd, float) and math.isnan(usd)):
        return NA
    within = [k for k, u in enumerate(list(usd)[:len(curve)]) if u <= budget + 1e-12]
    return float(curve[within[-1]]) if within else NA


def _area(curves) -> float:
    """Mean over episodes of the mean F1 over turns 0..L (L the longest episode's; a shorter one keeps its last F1)."""
    curves = [c for c in curves if len(c)]
    if not curves:
        return NA
    length = max(len(c) for c in curves)
    return float(np.mean([np.mean(list(c) + [c[-1]] * (length - len(c))) for c in curves]))


def _row(agent: str, cond: str, scope: str, first: pd.Series, part: pd.DataFrame, n_failed: int,
         gap: Mapping[tuple[str, int], float], boot: Bootstrap, settings: Mapping) -> dict:
    n = len(part)
    cost = part["cost"].to_numpy(float) if n else np.array([])
    priced = bool(n) and not np.isnan(cost).any()
    gaps = np.array([gap.get((f, int(i)), NA) for f, i in zip(part["family"], part["instance"])])
    share = None
    if n and not np.isnan(gaps).any() and gaps.mean() >= MIN_HEADROOM:
        share = bootstrap_ratio(part["delta_r"].to_numpy(float), gaps, **boot.kwargs())
    tokens = (part["tokens_in"].fillna(0) + part["tokens_out"].fillna(0)).to_numpy(float) if n else np.array([])
    offline = bool(n) and part["model"].isna().all()
    events, per = integrity_summary(part)
    at_t, at_u = int(settings.get("at_turns", 10)), float(settings.get("at_usd", 0.05))
    curves = [list(c) for c in part["f1_by_turn"]] if n and "f1_by_turn" in part else []
    spent = list(part["usd_by_turn"]) if n and "usd_by_turn" in part else []
    notes = [t for t, c in (("every episode failed (API or harness error)", n == 0 and n_failed > 0),
                            ("offline agent: no tokens or cost", offline),
                            ("some episode's price is unknown: cost unknown", n > 0 and not priced and not offline),
                            (f"headroom captured: n/a, the oracle gains less than {MIN_HEADROOM} F1 over BCA_f here",
                             n > 0 and share is None and not np.isnan(gaps).any())) if c]
    return {"agent": agent, "condition_id": cond, "condition": condition_label(first), "family": scope,
            **{f: first[f] for f in CONDITION_FIELDS},
            "offline": offline, "n": n, "n_finished": int(part["finished"].sum()) if n else 0,
            "n_truncated": int((~part["finished"].astype(bool)).sum()) if n else 0, "n_failed": n_failed,
            **_cols(_iv(part["f1"], boot), "f1"), **_cols(_iv(part["delta_s"], boot), "delta_s"),
            **_cols(_iv(part["delta_r"], boot), "delta_r"), **_cols(share, "headroom_share"),
            "turns_mean": float(part["turns"].mean()) if n else NA,
            "tokens_per_episode": NA if offline or not n else float(tokens.mean()),
            "tokens_total": NA if offline or not n else float(tokens.sum()),
            **_cols(_iv(cost, boot) if priced and not offline else None, "usd_per_episode"),
            "usd_total": float(cost.sum()) if priced and not offline else NA,
            "integrity_per_episode": events / n if n else NA, "integrity_counts": json.dumps(per),
            f"f1_at_{at_t}_turns": _mean([c[min(at_t, len(c) - 1)] for c in curves if len(c)]),
            "f1_at_usd": _mean([_at_spend(c, u, at_u) for c, u in zip(curves, spent)]),
            "f1_area": _area(curves),
            "note": "; ".join(notes)}


def _ranked(numbers: pd.DataFrame, ok: pd.DataFrame, alpha: float, permutations: int, seed: int) -> pd.DataFrame:
    """Add rank, tied_with and the test's description per scope; sort each scope by rank, then Δ^r."""
    out = []
    scopes = [GLOBAL, *[f for f in dict.fromkeys(numbers["family"]) if f != GLOBAL]]   # the overall ranking first
    for scope in scopes:
        block = numbers[numbers["family"] == scope]
        if block.empty:
            continue
        f1 = {}
        for r in block.itertuples():
            eps = ok[(ok["agent"] == r.agent) & (ok["condition_id"] == r.condition_id)]
            if scope != GLOBAL:
                eps = eps[eps["family"] == scope]
            if len(eps):
                f1[f"{r.agent} | {r.condition_id}"] = eps.set_index(["family", "instance"])["f1"].astype(float)
        rank, tied, pairs = significance_ranks(f1, alpha, permutations, seed)
        keyed = [f"{a} | {c}" for a, c in zip(block["agent"], block["condition_id"])]
        block = block.assign(rank=[rank.get(k, np.nan) for k in keyed],
                             tied_with=[json.dumps(sorted(tied.get(k, []))) for k in keyed],
                             pairs_compared=len(pairs))
        out.append(block.sort_values(["rank", "delta_r"], ascending=[True, False], na_position="last"))
    ranked = pd.concat(out, ignore_index=True)
    cols = ["rank", *[c for c in ranked.columns if c != "rank"]]
    return ranked[cols]


def _published_rows(published: Mapping) -> pd.DataFrame:
    n = int(published.get("instances_per_family") or 0)
    rows = [{"block": "published", "rank": NA, "agent": r["model"], "condition_id": "",
             "condition": f"the paper's main condition ({r['settings']}), last turn {r['last_turn']}, repeat {r['repeat']}",
             "family": r["family"], "repeat": int(r["repeat"]), "last_turn": r["last_turn"], "n": n or NA,
             "n_finished": int(r["finished"]), "f1": float(r["f1_all"]), "delta_r": float(r["dr_all"]),
             "delta_r_lo": float(r["dr_all_lo"]), "delta_r_hi": float(r["dr_all_hi"]),
             "wall": int(r["wall"]), "rescued": int(r["rescued"]), "note": PUBLISHED_NOTE,
             "source": published["source"]} for r in published["rows"]]
    return pd.DataFrame(rows)


def _interval_text(r: Mapping, name: str, signed: bool = False, percent: bool = False) -> str:
    v = r.get(name)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    lo, hi = r.get(f"{name}_lo"), r.get(f"{name}_hi")
    iv = Interval(float(v), float(lo), float(hi), 1, 0, 0, 0.95) if lo is not None and hi is not None and \
        not pd.isna(lo) else None
    if iv is None:
        return f"{v:+.3f}" if signed else f"{v:.3f}"
    return format_interval(iv, signed=signed, percent=percent)


def _tied_text(tied: Sequence[str], ranked: bool, shown: int = 3) -> str:
    """The results a row is tied with: up to ``shown`` named, then how many more (all of them in the numbers)."""
    if not tied:
        return "—" if ranked else ""
    head = ", ".join(tied[:shown])
    return head if len(tied) <= shown else f"{head} and {len(tied) - shown} more"


def _plain_num(v) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):.3f}"


def _display(numbers: pd.DataFrame, at_usd: float) -> pd.DataFrame:
    rows = []
    for r in numbers.to_dict("records"):
        published = r.get("block") == "published"
        if "f1" not in r:      # the "no episodes" placeholder
            rows.append({"block": r.get("block", ""), "rank": "", "agent": "", "condition": "", "family": "",
                         "F1": r.get("note", "")})
            continue
        ranked = not published and not pd.isna(r.get("rank"))
        tied = json.loads(r["tied_with"]) if isinstance(r.get("tied_with"), str) else []
        rows.append({
            "block": r["block"], "rank": (f"{int(r['rank'])}" if ranked else "—"),
            "agent": r["agent"], "condition": r.get("condition", ""), "family": r["family"],
            "F1": _interval_text(r, "f1"), "Δ^s": _interval_text(r, "delta_s", signed=True),
            "Δ^r": _interval_text(r, "delta_r", signed=True),
            "headroom captured": _interval_text(r, "headroom_share", percent=True),
            "episodes": (f"{int(r['n'])}" if not pd.isna(r.get("n")) else "") ,
            "finished / truncated / failed": (f"{int(r['n_finished'])} / {int(r['n_truncated'])} / {int(r['n_failed'])}"
                                             if not published else f"{int(r['n_finished'])} finished"),
            "turns": "" if pd.isna(r.get("turns_mean")) else f"{r['turns_mean']:.1f}",
            "tokens / episode": "" if pd.isna(r.get("tokens_per_episode")) else f"{r['tokens_per_episode']:,.0f}",
            "$ / episode": "" if published else "— (offline)" if r.get("offline") else _money(r.get("usd_per_episode")),
            "$ total": "" if published else "— (offline)" if r.get("offline") else _money(r.get("usd_total")),
            "integrity events / episode": "" if pd.isna(r.get("integrity_per_episode")) else
            f"{r['integrity_per_episode']:.2f}",
            **{f"F1 at {k.split('_')[2]} turns": _plain_num(r.get(k)) for k in r if k.startswith("f1_at_") and
               k.endswith("_turns")},
            f"F1 at ${at_usd:g}": _plain_num(r.get("f1_at_usd")), "F1 area (turns)": _plain_num(r.get("f1_area")),
            "tied with": _tied_text(tied, ranked),
            "note": r.get("note", "") or ""})
    return pd.DataFrame(rows)


# --- cost against score --------------------------------------------------------------------------
def pareto_front(cost: Sequence[float], score: Sequence[float]) -> list[bool]:
    """Whether each point is on the cost–score Pareto frontier.

    A point is on it when no other point is as cheap and better, or cheaper and as good.
    """
    c, s = np.asarray(cost, dtype=float), np.asarray(score, dtype=float)
    return [not bool(np.any((c <= c[k]) & (s >= s[k]) & ((c < c[k]) | (s > s[k])))) for k in range(len(c))]


def cost_figure(board: pd.DataFrame):
    """Δ^r against dollars per episode (both with their intervals) over all families, the frontier marked.

    Results without a known price (offline agents, unpriced models) are drawn apart, in a strip at the
    left, at their Δ^r.  Returns ``(fig, numbers)``.
    """
    from heuresis.artifacts.report import pyplot

    plt = pyplot()
    rows = board[(board["block"] == "this run") & (board["family"] == GLOBAL)] if "block" in board else board.iloc[:0]
    rows = rows[rows["delta_r"].notna()] if "delta_r" in rows else rows
    fig, (ax0, ax) = plt.subplots(1, 2, figsize=(8.5, 4.2), width_ratios=[1, 4], sharey=True)
    priced = rows[rows["usd_per_episode"].notna()] if len(rows) else rows
    unpriced = rows[rows["usd_per_episode"].isna()] if len(rows) else rows
    front = pareto_front(priced["usd_per_episode"], priced["delta_r"]) if len(priced) else []
    for r, on in zip(priced.to_dict("records"), front):
        ax.errorbar(r["usd_per_episode"], r["delta_r"],
                    xerr=[[r["usd_per_episode"] - r["usd_per_episode_lo"]], [r["usd_per_episode_hi"] - r["usd_per_episode"]]],
                    yerr=[[r["delta_r"] - r["delta_r_lo"]], [r["delta_r_hi"] - r["delta_r"]]],
                    fmt="o" if on else "s", color="#c44e52" if on else "#4c72b0", capsize=3)
        ax.annotate(r["agent"], (r["usd_per_episode"], r["delta_r"]), fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
    if len(priced):
        p = priced.assign(front=front).sort_values("usd_per_episode")
        p = p[p["front"]]
        ax.plot(p["usd_per_episode"], p["delta_r"], "--", color="#c44e52", lw=1, label="Pareto frontier")
        ax.legend(fontsize=7, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no result with a known price", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("$ per episode (recorded cost, 95% interval)")
    for k, r in enumerate(unpriced.to_dict("records")):
        ax0.errorbar(k, r["delta_r"], yerr=[[r["delta_r"] - r["delta_r_lo"]], [r["delta_r_hi"] - r["delta_r"]]],
                     fmt="o", color="#8c8c8c", capsize=3)
        ax0.annotate(r["agent"], (k, r["delta_r"]), fontsize=7, xytext=(3, 3), textcoords="offset points",
                     rotation=30)
    ax0.set_xticks([])
    ax0.set_xlim(-0.8, max(len(unpriced), 1) - 0.2)
    ax0.set_xlabel("no price")
    ax0.set_ylabel("Δ^r over all families (95% interval)")
    for a in (ax0, ax):
        a.axhline(0, color="#999", lw=0.6)
    fig.suptitle("Cost against score", fontsize=10)
    fig.tight_layout()
    cols = ["agent", "condition_id", "delta_r", "delta_r_lo", "delta_r_hi", "usd_per_episode", "usd_per_episode_lo",
            "usd_per_episode_hi"]
    if not len(rows):
        return fig, pd.DataFrame(columns=[*cols, "pareto"])
    numbers = pd.concat([priced, unpriced])[cols].assign(pareto=[*map(bool, front), *[False] * len(unpriced)])
    return fig, numbers.reset_index(drop=True)


# --- how the score grows with spend --------------------------------------------------------------
def spend_figure(scores: pd.DataFrame, agents: Sequence[str] = (), conditions: Sequence[str] = ()):
    """Per result, the working graph's F1 against turns and against tokens spent (test episodes that are results).

    Turns: the mean over episodes with a 95% band (mean ± 1.96 standard errors over instances; an
    episode that ended keeps its last F1). Tokens: each episode's curve against its own cumulative
    tokens, averaged on a shared grid.  Returns ``(fig, numbers)``: the plotted means per result and turn.
    """
    from heuresis.artifacts.report import pyplot

    plt = pyplot()
    ok, _ = split_failed(test_episodes(scores))
    if conditions:
        ok = ok[ok["condition_id"].isin(list(conditions))]
    fig, (ax_t, ax_k) = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
    rows = []
    for k, (agent, cond) in enumerate(results_of(ok, agents)[:10]):
        part = ok[(ok["agent"] == agent) & (ok["condition_id"] == cond)]
        curves = [list(c) for c in part["f1_by_turn"] if len(c)]
        if not curves:
            continue
        length = max(len(c) for c in curves)
        m = np.array([c + [c[-1]] * (length - len(c)) for c in curves])
        mean = m.mean(axis=0)
        half = 1.96 * m.std(axis=0, ddof=1) / np.sqrt(len(m)) if len(m) > 1 else np.zeros(length)
        colour = f"C{k}"
        label = f"{agent} · {cond}"
        ax_t.plot(range(length), mean, color=colour, label=label)
        ax_t.fill_between(range(length), mean - half, mean + half, color=colour, alpha=0.15)
        tokens = [list(t) for t in part["tokens_by_turn"] if len(t)]
        if tokens and max(t[-1] for t in tokens) > 0:
            grid = np.linspace(0, max(t[-1] for t in tokens), 50)
            at = [np.interp(grid, t, c, right=c[-1]) for t, c in zip(tokens, curves)]
            ax_k.plot(grid, np.mean(at, axis=0), color=colour)
        rows += [{"agent": agent, "condition_id": cond, "turn": t, "f1_mean": float(mean[t]),
                  "f1_lo": float(mean[t] - half[t]), "f1_hi": float(mean[t] + half[t]), "episodes": len(m)}
                 for t in range(length)]
    if not rows:
        ax_t.text(0.5, 0.5, "no test episodes", ha="center", va="center", transform=ax_t.transAxes)
    else:
        ax_t.legend(fontsize=6, loc="lower right")
    if not ax_k.lines:
        ax_k.text(0.5, 0.5, "no tokens recorded (offline agents)", ha="center", va="center", transform=ax_k.transAxes,
                  fontsize=8)
    ax_t.set_xlabel("turn")
    ax_t.set_ylabel("F1 of the working graph")
    ax_k.set_xlabel("tokens spent (prompt + completion)")
    fig.suptitle("How the score grows with spend", fontsize=10)
    fig.tight_layout()
    return fig, pd.DataFrame(rows, columns=["agent", "condition_id", "turn", "f1_mean", "f1_lo", "f1_hi", "episodes"])
