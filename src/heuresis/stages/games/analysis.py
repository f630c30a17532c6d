"""Scoring of the games track (docs/games.md §5): the tables and figures of ``rules/games.smk``.

* :func:`summary` — per scenario x agent x mode (and per family, scenario ``all``): survival,
  win rate, gap to the optimum, and rubric score, each a mean with a percentile bootstrap
  interval over the plays that did not fail (:func:`heuresis.causal.bootstrap.bootstrap_mean`; a play
  ``failed`` by an API or harness error is counted in ``failed``, shown beside the plays and
  never scored); the rubric of a play is the
  mean total over the judges that scored it.  With no judge configured the rubric columns are
  null and the tables say "no judge configured" (never zeros).
* :func:`family_table` — one table per family; :func:`references_table` — optima, thresholds,
  trap and standard designs; :func:`judges_table` — each judge's mean per criterion and the
  agreement ICC(2,k) per criterion.
* :func:`criteria_table` — per agent x mode and criterion (CR1, CR2, CR3, ED, RQ, DU, CR, total):
  mean over plays, share of plays with credit (> 0), share of zeros, ICC(2,k) across judges;
  :func:`failure_modes_table` — the judges' failure-mode labels per agent x mode;
  :func:`criteria_tiers_figure` — criteria by survival tier (:func:`survival_tier`);
  :func:`survival_cr_figure` — survival against causal reasoning per play, by tier.
* Judge-independent: :func:`trap_fall_table` — per scenario x agent x mode the share of submitted
  designs that follow the scenario's trap pattern; :func:`bias_control_table` — each biased
  scenario beside its control (``control:`` in the scenario file): survival and trap-fall rate of
  both and their difference, with bootstrap intervals.
* :func:`path_summary` — configuration-path statistics per agent x mode: distance of the k-th
  deployed design to the optimum, lock-in share, drift of the submission from the best observed
  design, share of submissions equal to the best observed design.
* :func:`survival_rubric_figure`, :func:`paths_figure`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from heuresis.artifacts.report import format_interval, pyplot
from heuresis.causal.bootstrap import bootstrap_mean, unpaired_bootstrap
from heuresis.causal.games.design import ABLATION_SEP
from heuresis.causal.games.rubric import CAUSAL, RUBRIC_MAX
from heuresis.causal.games.scenario import follows_pattern, pattern_text
from heuresis.config.settings import Bootstrap
from heuresis.stages.games.judge import CRITERIA, CRITERION_NAMES, FAILURE_MODES, icc

__all__ = [
    "GAMES_BUILDERS",
    "LEADERBOARD_VIEWS",
    "NO_JUDGE",
    "SCORES",
    "TIERS",
    "GamesInputs",
    "GamesResult",
    "bias_control_table",
    "compute_target",
    "criteria_table",
    "criteria_tiers_figure",
    "failure_modes_table",
    "family_table",
    "judges_table",
    "path_summary",
    "paths_figure",
    "protocols_table",
    "references_table",
    "rubric_per_play",
    "scores_of",
    "split_caption",
    "summary",
    "survival_cr_figure",
    "survival_rubric_figure",
    "survival_tier",
    "trap_fall",
    "trap_fall_table",
]

NO_JUDGE = "no judge configured"
#: Score columns of a judgement and their maxima: the six criteria, causal reasoning (CR1-CR3) and the total.
SCORES = {**CRITERIA, "cr": sum(CRITERIA[c] for c in CAUSAL), "total": RUBRIC_MAX}
#: Survival tiers of a play (:func:`survival_tier`), best first.
TIERS = ("won", "close", "far", "unsubmitted")
#: Width of the ``close`` tier below the threshold (survival rate).
TIER_WIDTH = 0.10


def scores_of(judgements: pd.DataFrame | None) -> dict[str, float]:
    """The score columns of a judgements table, with their maxima: read from the columns it has.

    The rubric's criteria, CR and the total that are columns of the table, in the rubric's order
    (:data:`SCORES`); then any other criterion the judges scored (a column with a
    ``<name>_reason`` column beside it), its maximum the highest score a judge gave it. No
    table: the rubric's.
    """
    if judgements is None:
        return dict(SCORES)
    cols = set(judgements.columns)
    out = {k: float(v) if isinstance(v, float) else v for k, v in SCORES.items() if k in cols}
    for c in judgements.columns:
        if c not in SCORES and f"{c}_reason" in cols:
            top = pd.to_numeric(judgements[c], errors="coerce").max()
            out[c] = float(top) if pd.notna(top) else float("nan")
    return out


def rubric_per_play(judgements: pd.DataFrame) -> pd.DataFrame:
    """Per play: mean over the judges that scored it of each score column (:func:`scores_of`)."""
    cols = list(scores_of(judgements))
    if judgements is None or judgements.empty:
        return pd.DataFrame(columns=["play_id", *cols, "judges_scored"])
    ok = judgements[judgements.status.isin(["ok", "no_report"])]
    g = ok.groupby("play_id")
    out = g[cols].mean()
    out["judges_scored"] = g.size()
    return out.reset_index()


def survival_tier(play: Mapping) -> str:
    """``won`` (survival >= threshold), ``close`` (within :data:`TIER_WIDTH` below), ``far`` or ``unsubmitted``."""
    if not bool(play["submitted"]):
        return "unsubmitted"
    if play["survival"] >= play["threshold"]:
        return "won"
    return "close" if play["survival"] >= play["threshold"] - TIER_WIDTH else "far"


def _has_design(submitted, design) -> bool:
    """A play submitted a design (its ``submitted`` flag and a design that is not null)."""
    return bool(submitted) and design not in (None, "null")


def trap_fall(plays: pd.DataFrame, refs: Mapping[str, Mapping]) -> pd.Series:
    """Per play: the submitted design follows its scenario's trap pattern (True/False; None unsubmitted)."""
    out = []
    for _, p in plays.iterrows():
        design = json.loads(p.design) if _has_design(p.submitted, p.design) else None
        out.append(None if design is None else follows_pattern(refs[p.scenario]["trap_pattern"], design))
    return pd.Series(out, index=plays.index, dtype=object)


def summary(plays: pd.DataFrame, judgements: pd.DataFrame | None, judges: Sequence[str], boot: Bootstrap) -> pd.DataFrame:
    """Per family x scenario x agent x mode (scenario ``all``: the family's plays pooled)."""
    kw = boot.kwargs()
    rub = rubric_per_play(judgements).set_index("play_id") if judges else None
    rows = []
    keys = ["family", "scenario", "agent", "mode"]
    pooled = plays.assign(scenario="all")
    for (fam, scn, agent, mode), df in pd.concat([plays, pooled]).groupby(keys, sort=True):
        n_failed = int((df.status == "failed").sum())
        df = df[df.status != "failed"]    # a failed play (API or harness error) is not a result: counted, not scored
        row = {"family": fam, "scenario": scn, "agent": agent, "mode": mode, "plays": len(df) + n_failed,
               "failed": n_failed, "submitted": int(df.submitted.sum())}
        for col, vals in (("survival", df.survival), ("win_rate", df.won.astype(float)), ("gap", df.gap)):
            iv = bootstrap_mean(vals.to_numpy(float), **kw)
            row.update({col: iv.estimate, f"{col}_lo": iv.lo, f"{col}_hi": iv.hi})
        if rub is not None:
            r = rub.reindex(df.play_id)["total"].dropna().to_numpy(float)
            iv = bootstrap_mean(r, **kw)
            row.update(rubric=iv.estimate, rubric_lo=iv.lo, rubric_hi=iv.hi, rubric_plays=len(r))
        else:
            row.update(rubric=None, rubric_lo=None, rubric_hi=None, rubric_plays=0)
        # the panel that judged these plays (judges of the player's own model family never do)
        if judges and judgements is not None and "judge" in judgements and len(judgements):
            panel = sorted(set(judgements.loc[judgements.play_id.isin(df.play_id), "judge"]))
            row["judges"] = ", ".join(panel) if panel else NO_JUDGE
        else:
            row["judges"] = ", ".join(judges) if judges else NO_JUDGE
        rows.append(row)
    return pd.DataFrame(rows)


def family_table(summ: pd.DataFrame, family: str, judges: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(numbers, display) of one family: every scenario x agent x mode, then the pooled rows."""
    df = summ[summ.family == family].copy()
    df["_pooled"] = df.scenario == "all"
    df = df.sort_values(["_pooled", "scenario", "agent", "mode"]).drop(columns="_pooled").reset_index(drop=True)

    def intervals(col: str, digits: int = 3) -> list[str]:
        return [format_interval(m, lo, hi, digits=digits) for m, lo, hi in zip(df[col], df[f"{col}_lo"], df[f"{col}_hi"])]

    disp = pd.DataFrame({
        "Scenario": df.scenario.replace({"all": f"all {family}"}), "Agent": df.agent, "Mode": df["mode"],
        "Plays": [f"{p} ({f} failed, not scored)" if f else str(p) for p, f in zip(df.plays, df.failed)],
        "Survival": intervals("survival"), "Win rate": intervals("win_rate", 2), "Gap to optimum": intervals("gap"),
        f"Rubric (0-{RUBRIC_MAX})": intervals("rubric", 1) if judges else [NO_JUDGE] * len(df),
    })
    return df, disp


def references_table(refs: Mapping[str, Mapping]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Optimum [interval], trap and standard survival, threshold, and the designs, per scenario.

    Each scenario also shows its exact optimum, trap and standard survival and the DEF step of the
    lattice its optimum is exact over, and the best design over the full integer lattice (every
    integer DEF: the agent's action space) with its exact survival, marked ``exact`` when it is the
    integer lattice's optimum, else followed by the upper bound on every integer design (blank for
    references computed without it); its fleet columns are the lattice optimum's design flown on
    fresh fleets.
    """
    def short(d):
        return ", ".join(k if isinstance(v, bool) else f"{k} {v}" if isinstance(v, str) else f"{k} {int(v)}"
                     for k, v in d.items() if v)

    def exact(v):
        return "" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.4f}"

    def integer(r):
        v = r.get("integer_optimum")
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return ""
        return f"{v:.4f} (exact)" if r.get("integer_exact") else f"{v:.4f} (bound {r['integer_bound']:.4f})"

    rows = [dict(r) for _, r in sorted(refs.items())]
    num = pd.DataFrame(rows)
    for k in ("optimum_design", "trap_design", "standard_design", "strategies", "integer_design"):
        num[k] = [None if d is None else json.dumps(d, sort_keys=True) for d in num[k]]
    disp = pd.DataFrame({
        "Scenario": [r["scenario"] for r in rows], "Split": [r.get("split", "dev") for r in rows],
        "Bias": [r["bias"] for r in rows],
        "Optimum [95% CI]": [format_interval(r["optimum"], r["optimum_lo"], r["optimum_hi"]) for r in rows],
        "Threshold": [f"{r['threshold']:.3f}" for r in rows],
        "Trap": ["—" if pd.isna(r["trap"]) else f"{r['trap']:.3f}" for r in rows],
        "Standard": [f"{r['standard']:.3f}" for r in rows],
        "Exact optimum": [exact(r.get("optimum_exact")) for r in rows],
        "Exact trap": [exact(r.get("trap_exact")) for r in rows],
        "Exact standard": [exact(r.get("standard_exact")) for r in rows],
        "Lattice": [f"DEF step {int(r['lattice_step'])}" if r.get("lattice_step") else "" for r in rows],
        "Optimum design": [short(r["optimum_design"]) for r in rows],
        "Integer optimum": [integer(r) for r in rows],
        "Integer design": [short(r["integer_design"]) if r.get("integer_design") else "" for r in rows],
        "Trap design": [short(r["trap_design"]) if r["trap_design"] else "none" for r in rows],
    })
    return num, disp


def expectations_table(refs: Mapping[str, Mapping]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each strategy a CausalGame scenario file names: its published Stage-2 survival beside ours.

    Ours is the strategy's exact Stage-2 survival (:mod:`heuresis.causal.games.exact`) and the mean
    over the references' fresh Stage-2 fleets (95% interval over fleets); ``inside`` is whether
    the exact survival lies in the published range (or the range a listed divergence gives).
    """
    rows = [{"scenario": scn, **{k: v for k, v in st.items() if k != "design"},
             "design": json.dumps(st["design"], sort_keys=True), "expected_lo": st["expected"][0],
             "expected_hi": st["expected"][1]}
            for scn, ref in sorted(refs.items()) for st in ref.get("strategies") or []]
    num = pd.DataFrame(rows, columns=["scenario", "strategy", "design", "published", "expected_lo", "expected_hi",
                                      "over_budget", "exact", "survival", "survival_lo", "survival_hi", "inside",
                                      "divergence"])
    disp = pd.DataFrame({
        "Scenario": num.scenario, "Strategy": num.strategy,
        "Published": [f"{p} [{lo:.2f}, {hi:.2f}]" for p, lo, hi in zip(num.published, num.expected_lo,
                                                                         num.expected_hi)],
        "Ours, exact": [f"{x:.4f}" for x in num.exact],
        "Ours, fleets [95% CI]": [format_interval(m, lo, hi) for m, lo, hi in zip(num.survival, num.survival_lo,
                                                                                   num.survival_hi)],
        "Inside": [("yes, in the listed divergence's range" if div else "yes") if ok else "no"
                   for ok, div in zip(num.inside, num.divergence)],
        "Over budget": ["yes" if b else "" for b in num.over_budget],
    })
    return num, disp


#: The leaderboard's two views of an unsubmitted play: this track's (scored 0) and CausalGame's (unscored, N/A).
LEADERBOARD_VIEWS = ("all plays", "submitted only")
NA = float("nan")


def leaderboard_table(plays: pd.DataFrame, judgements: pd.DataFrame | None, judges: Sequence[str],
                      boot: Bootstrap, published: Mapping | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per player (agent x mode) over every scenario: survival, win rate, the causal-reasoning score, cost; ranks with ties.

    Two views per player: ``all plays`` (an unsubmitted play scores survival 0, not won: this
    track's rule) and ``submitted only`` (an unsubmitted play is left out, as CausalGame records
    it N/A). A failed play (an API or harness error) is counted and scored in neither. Intervals
    are bootstrap intervals over plays; CR (CR1-CR3) and the rubric total are means over the panel
    that judged each play; tokens and dollars are per play (recorded; unknown when a price is).
    Ranks: in the ``all plays`` view, two players are compared on the plays they share (scenario and
    repeat: the same seed for every agent) by a paired sign-flip permutation test of the survival
    difference, Holm-corrected over the pairs at 0.05 (:func:`heuresis.causal.ties.significance_ranks`);
    a player's rank is one plus the players significantly better, so players no test separates share
    it.  ``published`` (CausalGame's leaderboard) adds its rows in a block of their own, not ranked:
    they are CausalGame's scenarios and trials, not this run's plays.
    """
    from heuresis.causal.ties import significance_ranks
    from heuresis.config.loading import schema_default

    kw = boot.kwargs()
    rub = rubric_per_play(judgements).set_index("play_id") if judges and judgements is not None else None
    rows = []
    paired: dict[str, pd.Series] = {}
    for (agent, mode), df in plays.groupby(["agent", "mode"], sort=True):
        failed = int((df.status == "failed").sum())
        ok = df[df.status != "failed"]
        unit = ok["repeat"] if "repeat" in ok else ok.groupby("scenario").cumcount()   # the same seed for every agent
        paired[f"{agent} | {mode}"] = pd.Series(ok["survival"].to_numpy(float),
                                                index=pd.MultiIndex.from_arrays([ok["scenario"], unit]))
        for view in LEADERBOARD_VIEWS:
            d = ok if view == LEADERBOARD_VIEWS[0] else ok[ok.submitted.astype(bool)]
            row = {"block": "this run", "agent": agent, "mode": mode, "view": view, "plays": len(d), "failed": failed,
                   "unsubmitted": int((~ok.submitted.astype(bool)).sum()), "scenarios": int(d.scenario.nunique())}
            for col, vals in (("survival", d.survival), ("win_rate", d.won.astype(float))):
                iv = bootstrap_mean(vals.to_numpy(float), **kw)
                row.update({col: iv.estimate, f"{col}_lo": iv.lo, f"{col}_hi": iv.hi})
            for col in ("cr", "total"):
                r = (rub.reindex(d.play_id)[col].dropna().to_numpy(float) if rub is not None and col in rub
                     else np.array([]))
                iv = bootstrap_mean(r, **kw)
                row.update({col: iv.estimate, f"{col}_lo": iv.lo, f"{col}_hi": iv.hi, f"{col}_plays": len(r)})
            cost = d["cost"].to_numpy(float) if "cost" in d else np.array([])
            priced = len(cost) > 0 and not np.isnan(cost).any()
            tokens = sum((d[c].fillna(0).to_numpy(float) for c in ("tokens_in", "tokens_out") if c in d),
                         np.zeros(len(d)))
            row.update({"tokens_per_play": float(tokens.mean()) if len(tokens) and tokens.any() else NA,
                        "usd_per_play": float(cost.mean()) if priced else NA,
                        "usd_total": float(cost.sum()) if priced else NA})
            rows.append(row)
    num = pd.DataFrame(rows)
    if num.empty:
        return num, pd.DataFrame({"Rank": [], "Agent": []})
    rank, tied, _ = significance_ranks(paired, schema_default("leaderboard", "alpha"),
                                       schema_default("leaderboard", "permutations"), int(boot.seed))
    keys = [f"{a} | {m}" for a, m in zip(num.agent, num["mode"])]
    num["rank"] = [rank[k] for k in keys]
    num["tied_with"] = [json.dumps(sorted(tied[k])) for k in keys]
    num = _by_rank_then_survival(num)

    def cells(frame, col, digits=3):
        return [format_interval(m, lo, hi, digits=digits) if not pd.isna(m) else "—"
                for m, lo, hi in zip(frame[col], frame[f"{col}_lo"], frame[f"{col}_hi"])]

    def money(v):
        return "unknown" if pd.isna(v) else f"${v:,.4f}"

    disp = pd.DataFrame({
        "Rank": num["rank"].astype(str), "Agent": num.agent, "Mode": num["mode"], "View": num.view,
        "Plays": [f"{p} ({u} unsubmitted, {f} failed)" if v == LEADERBOARD_VIEWS[0] else str(p)
                  for p, u, f, v in zip(num.plays, num.unsubmitted, num.failed, num.view)],
        "Survival": cells(num, "survival"), "Win rate": cells(num, "win_rate", 2),
        f"CR (0-{SCORES['cr']:g})": cells(num, "cr", 1) if judges else [NO_JUDGE] * len(num),
        f"Rubric (0-{RUBRIC_MAX})": cells(num, "total", 1) if judges else [NO_JUDGE] * len(num),
        "Tokens / play": ["—" if pd.isna(t) else f"{t:,.0f}" for t in num.tokens_per_play],
        "$ / play": [money(v) for v in num.usd_per_play],
        "Tied with": [", ".join(json.loads(t)) or "—" for t in num.tied_with],
    })
    if published:
        pub = published_leaderboard_rows(published)
        num = pd.concat([num, pub], ignore_index=True)
        disp = pd.concat([disp, pd.DataFrame({
            "Rank": "—", "Agent": pub.agent, "Mode": pub["mode"], "View": pub.view, "Plays": pub.plays_text,
            "Survival": [format_interval(m, lo, hi) if not pd.isna(lo) else
                         (f"{m:.3f}" if not pd.isna(m) else t) for m, lo, hi, t in
                         zip(pub.survival, pub.survival_lo, pub.survival_hi, pub.plays_text)],
            "Win rate": "—", f"CR (0-{SCORES['cr']:g})": "—", f"Rubric (0-{RUBRIC_MAX})": "—", "Tokens / play": "—",
            "$ / play": "—", "Tied with": ""})], ignore_index=True)
    return num, disp


def _by_rank_then_survival(num: pd.DataFrame) -> pd.DataFrame:
    """Players by rank, then by survival in the ``all plays`` view; each player's two views together."""
    first = num[num.view == LEADERBOARD_VIEWS[0]].sort_values(["rank", "survival"], ascending=[True, False])
    order = {(a, m): k for k, (a, m) in enumerate(zip(first.agent, first["mode"]))}
    key = [order[(a, m)] * 2 + (v != LEADERBOARD_VIEWS[0]) for a, m, v in zip(num.agent, num["mode"], num.view)]
    return num.assign(_k=key).sort_values("_k").drop(columns="_k").reset_index(drop=True)


def published_leaderboard_rows(published: Mapping) -> pd.DataFrame:
    """CausalGame's published rows as leaderboard rows (block ``published``, never ranked)."""
    rows = []
    for r in published["rows"]:
        baseline = r["kind"] == "baseline"
        text = (f"{r['trials']} trials per scenario" if r.get("trials") else
                f"published as a range {r['range_lo']:.2f}-{r['range_hi']:.2f}" if r.get("range_lo") is not None else
                "published as an average only")
        rows.append({"block": "published", "agent": r["model"], "mode": "baseline" if baseline else r.get("mode", ""),
                     "view": "published (CausalGame)", "survival": NA if r.get("survival") is None else float(r["survival"]),
                     "survival_lo": NA if r.get("lo") is None else float(r["lo"]),
                     "survival_hi": NA if r.get("hi") is None else float(r["hi"]), "plays_text": text,
                     "source": published["source"]})
    return pd.DataFrame(rows)


def _head(k: str, top: float) -> str:
    """Column heading of a score with maximum ``top``: ``CR1 (0-4)``, ``CR (0-11)``, ``Total (0-16)``."""
    return f"{'Total' if k == 'total' else k.upper()} (0-{top:g})"


def judges_table(judgements: pd.DataFrame | None, judges: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per judge: plays scored, unparsed/failed answers, mean of each criterion; then ICC(2,k) per criterion."""
    if not judges:
        num = pd.DataFrame([{"judge": NO_JUDGE, "item": None, "value": None}])
        return num, pd.DataFrame({"Judge": [NO_JUDGE], "Result": ["games.judges is empty: no rubric, no ICC"]})
    scores = scores_of(judgements)
    rows, disp = [], []
    for j in judges:
        d = judgements[judgements.judge == j]  # type: ignore[index, union-attr]
        ok = d[d.status.isin(["ok", "no_report"])]
        rec = {"judge": j, "plays": len(d), "scored": len(ok), "unparsed": int((d.status == "unparsed").sum()),
               "play_failed": int((d.status == "play_failed").sum()),
               "failed": int((d.status == "failed").sum()), **{k: float(ok[k].mean()) if len(ok) else None
                                                                 for k in scores}}
        rows.append(rec)
        disp.append({"Judge": j, "Plays": str(rec["plays"]) + (f" ({rec['play_failed']} failed plays, not judged)"
                                                             if rec["play_failed"] else ""),
                     "Unparsed / failed": f"{rec['unparsed']} / {rec['failed']}",
                     **{_head(k, top): "n/a" if rec[k] is None else f"{rec[k]:.2f}" for k, top in scores.items()}})
    num = pd.DataFrame(rows)
    # agreement: plays scored by every judge (reports only: a missing report scores 0 for all by rule)
    asked = judgements[judgements.status != "no_report"]  # type: ignore[index, union-attr]
    icc_row = {"judge": f"ICC(2,{len(judges)})"}
    disp_row = {"Judge": f"ICC(2,{len(judges)}) across judges", "Plays": "", "Unparsed / failed": ""}
    for k, top in scores.items():
        wide = asked.pivot_table(index="play_id", columns="judge", values=k, aggfunc="first")
        wide = wide.reindex(columns=list(judges)).dropna()
        val, n = float("nan"), len(wide)
        if len(judges) >= 2 and n >= 2:
            val = icc(wide.to_numpy(float))["ICC2_k"]
        icc_row[k] = val  # type: ignore[assignment]
        disp_row[_head(k, top)] = (f"{val:.2f} (n={n})" if np.isfinite(val)
                                                      else ("n/a (one judge)" if len(judges) < 2 else f"n/a (n={n})"))
    disp_row["Plays"] = str(len(asked.play_id.unique()))
    num = pd.concat([num, pd.DataFrame([icc_row])], ignore_index=True)
    return num, pd.DataFrame([*disp, disp_row])


def _icc2k(judgements: pd.DataFrame, judges: Sequence[str], col: str, play_ids=None) -> tuple[float, int]:
    """ICC(2,k) of one score over the plays every judge scored (reports only), and that number of plays."""
    asked = judgements[judgements.status == "ok"]
    if play_ids is not None:
        asked = asked[asked.play_id.isin(set(play_ids))]
    wide = asked.pivot_table(index="play_id", columns="judge", values=col, aggfunc="first")
    wide = wide.reindex(columns=list(judges)).dropna()
    if len(judges) < 2 or len(wide) < 2:
        return float("nan"), len(wide)
    return icc(wide.to_numpy(float))["ICC2_k"], len(wide)


def _scored(plays: pd.DataFrame) -> pd.DataFrame:
    """The plays that did not fail (a failed play is counted elsewhere, never scored)."""
    return plays[plays.status != "failed"] if "status" in plays else plays


def criteria_table(plays: pd.DataFrame, judgements: pd.DataFrame | None, judges: Sequence[str],
                   boot: Bootstrap) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per agent x mode (and ``all`` pooled) and criterion: mean, share > 0, share = 0, ICC(2,k), over judged plays.

    A play's score is the mean over the judges that scored it; share > 0 counts plays with any
    credit from that mean, share = 0 plays every judge gave 0.  ICC(2,k) is over the plays every
    judge scored from a report (a play without a report is 0 by rule, not a judgement).
    """
    if not judges:
        num = pd.DataFrame([{"agent": NO_JUDGE, "mode": None, "criterion": None}])
        return num, pd.DataFrame({"Agent": [NO_JUDGE], "Result": ["games.judges is empty: no criteria, no ICC"]})
    plays = _scored(plays)
    rub = rubric_per_play(judgements).set_index("play_id")
    groups = [((a, m), df) for (a, m), df in plays.groupby(["agent", "mode"], sort=True)]
    groups.append((("all", "all"), plays))
    rows, disp = [], []
    for (agent, mode), df in groups:
        sc = rub.reindex(df.play_id).dropna(subset=["total"])
        drow = {"Agent": agent, "Mode": mode, "Plays judged": str(len(sc))}
        for k, top in scores_of(judgements).items():
            v = sc[k].to_numpy(float)
            iv = bootstrap_mean(v, **boot.kwargs())
            val, n_icc = _icc2k(judgements, judges, k, df.play_id)
            rec = {"agent": agent, "mode": mode, "criterion": k, "max": top, "plays": len(v), "mean": iv.estimate,
                   "mean_lo": iv.lo, "mean_hi": iv.hi, "share_positive": float((v > 0).mean()) if len(v) else np.nan,
                   "share_zero": float((v == 0).mean()) if len(v) else np.nan, "icc2k": val, "icc_plays": n_icc}
            rows.append(rec)
            icc_txt = f"{val:.2f}" if np.isfinite(val) else "n/a"
            drow[_head(k, top)] = (f"{format_interval(iv.estimate, iv.lo, iv.hi, digits=2)}; >0 {rec['share_positive']:.0%}, "
                              f"=0 {rec['share_zero']:.0%}; ICC {icc_txt}" if len(v) else "n/a")
        disp.append(drow)
    return pd.DataFrame(rows), pd.DataFrame(disp)


def protocols_table(plays: pd.DataFrame, judgements: pd.DataFrame, judges: Sequence[str],
                    boot: Bootstrap) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per agent x mode (and ``all``) and protocol view: CR and rubric total over judged plays, with intervals.

    ``committed`` grades the report written before the outcome, ``as_published`` the debrief after
    it (CausalGame's mission report and four questions); a play with nothing to grade in a view
    scores 0 there (``no_report``). Per view: plays scored, plays with a text (a report, or an
    answered debrief), failed judgements; the paired difference of the totals over the plays
    scored in both views.
    """
    if not judges:
        num = pd.DataFrame([{"agent": NO_JUDGE, "mode": None, "protocol": None}])
        return num, pd.DataFrame({"Agent": [NO_JUDGE], "Result": ["games.judges is empty: no view is judged"]})
    plays = _scored(plays)
    views = sorted(set(judgements.protocol), key=lambda v: (v != "committed", v)) if len(judgements) else []
    per = {v: rubric_per_play(judgements[judgements.protocol == v]).set_index("play_id") for v in views}
    groups = [((a, m), df) for (a, m), df in plays.groupby(["agent", "mode"], sort=True)]
    groups.append((("all", "all"), plays))
    rows, disp = [], []
    for (agent, mode), df in groups:
        for view in views:
            sc = per[view].reindex(df.play_id).dropna(subset=["total"])
            jv = judgements[(judgements.protocol == view) & judgements.play_id.isin(df.play_id)]
            texts = int((df.report.fillna("").str.strip() != "").sum() if view == "committed"
                        else (df.debrief_status == "ok").sum())
            rec = {"agent": agent, "mode": mode, "protocol": view, "plays": len(df), "scored": len(sc), "texts": texts,
                   "failed": int((jv.status == "failed").sum())}
            for k in ("cr", "total"):
                iv = bootstrap_mean(sc[k].to_numpy(float), **boot.kwargs())
                rec.update({k: iv.estimate, f"{k}_lo": iv.lo, f"{k}_hi": iv.hi})
            if view != "committed" and "committed" in per:
                both = per["committed"].reindex(sc.index).dropna(subset=["total"])
                d = sc.loc[both.index, "total"].to_numpy(float) - both["total"].to_numpy(float)
                iv = bootstrap_mean(d, **boot.kwargs())
                rec.update(total_minus_committed=iv.estimate, total_minus_committed_lo=iv.lo,
                           total_minus_committed_hi=iv.hi)
            rows.append(rec)
            diff = (format_interval(rec["total_minus_committed"], rec["total_minus_committed_lo"],
                                    rec["total_minus_committed_hi"], digits=2) if "total_minus_committed" in rec else "")
            disp.append({"Agent": agent, "Mode": mode, "View": view, "Plays": str(len(df)),
                         "With a text": str(texts), "Scored": str(len(sc)), "Failed": str(rec["failed"]),
                         "CR (0-11)": format_interval(rec["cr"], rec["cr_lo"], rec["cr_hi"], digits=2) if len(sc) else "n/a",
                         "Total (0-16)": (format_interval(rec["total"], rec["total_lo"], rec["total_hi"], digits=2)
                                          if len(sc) else "n/a"),
                         "Total minus committed": diff})
    return pd.DataFrame(rows), pd.DataFrame(disp)


def failure_modes_table(plays: pd.DataFrame, judgements: pd.DataFrame | None,
                        judges: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per agent x mode (and ``all``): the judges' failure-mode labels, count and share of the judgements that gave one."""
    if not judges:
        num = pd.DataFrame([{"agent": NO_JUDGE, "mode": None, "failure_mode": None}])
        return num, pd.DataFrame({"Agent": [NO_JUDGE], "Result": ["games.judges is empty: no failure modes"]})
    labels = [*FAILURE_MODES, "no_report"]
    ids = set(_scored(plays).play_id)
    j = judgements[judgements.status.isin(["ok", "no_report"]) & judgements.play_id.isin(ids)]  # type: ignore[index, union-attr]
    groups = [((a, m), df) for (a, m), df in j.groupby(["agent", "mode"], sort=True)]
    groups.append((("all", "all"), j))
    rows, disp = [], []
    for (agent, mode), df in groups:
        counts = df.failure_mode.value_counts()
        n = len(df)
        drow = {"Agent": agent, "Mode": mode, "Judgements": str(n)}
        for lab in labels:
            c = int(counts.get(lab, 0))
            rows.append({"agent": agent, "mode": mode, "failure_mode": lab, "judgements": n, "count": c,
                         "share": c / n if n else np.nan})
            drow[lab] = f"{c / n:.0%} ({c})" if n else "n/a"
        disp.append(drow)
    return pd.DataFrame(rows), pd.DataFrame(disp)


def trap_fall_table(plays: pd.DataFrame, refs: Mapping[str, Mapping],
                    boot: Bootstrap) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per scenario x agent x mode: share of submitted designs following the scenario's trap pattern, with its interval.

    A scenario without a trap (``trap_pattern`` None) has no rate (NaN) and the pattern ``no trap``.
    """
    plays = _scored(plays).copy()
    plays["trap_fall"] = trap_fall(plays, refs)
    rows = []
    for (scn, agent, mode), df in plays.groupby(["scenario", "agent", "mode"], sort=True):
        tf = df.trap_fall.dropna().astype(float).to_numpy()
        iv = bootstrap_mean(tf, **boot.kwargs())
        sv = bootstrap_mean(df.survival.to_numpy(float), **boot.kwargs())
        rows.append({"scenario": scn, "family": refs[scn]["family"], "agent": agent, "mode": mode, "plays": len(df),
                     "submitted": sum(map(_has_design, df.submitted, df.design)),
                     "trap_pattern": pattern_text(refs[scn]["trap_pattern"]),
                     "trap_fall": iv.estimate, "trap_fall_lo": iv.lo, "trap_fall_hi": iv.hi,
                     "survival": sv.estimate, "survival_lo": sv.lo, "survival_hi": sv.hi})
    num = pd.DataFrame(rows)
    if num.empty:
        return num, pd.DataFrame({"Scenario": [], "Agent": []})
    disp = pd.DataFrame({
        "Scenario": num.scenario, "Trap pattern": num.trap_pattern, "Agent": num.agent, "Mode": num["mode"],
        "Submitted / plays": [f"{s} / {p}" for s, p in zip(num.submitted, num.plays)],
        "Trap-fall rate": [format_interval(m, lo, hi, digits=2) for m, lo, hi in
                           zip(num.trap_fall, num.trap_fall_lo, num.trap_fall_hi)],
        "Survival": [format_interval(m, lo, hi) for m, lo, hi in zip(num.survival, num.survival_lo, num.survival_hi)],
    })
    return num, disp


def bias_control_table(plays: pd.DataFrame, refs: Mapping[str, Mapping],
                       boot: Bootstrap) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each biased scenario beside its control, per agent x mode: survival and trap-fall rate, and biased minus control.

    The two sides are different plays (their draws are the scenarios' own), so the difference's
    interval resamples them independently (:func:`heuresis.causal.bootstrap.unpaired_bootstrap`).  A
    trap-fall rate is over submitted plays; the control is judged by the biased scenario's pattern
    (the same design space and trap).
    """
    pairs = [(scn, ref["control"]) for scn, ref in sorted(refs.items()) if ref.get("control") in refs]
    num = _paired(plays, refs, pairs, boot)
    if num.empty:
        return num, pd.DataFrame({"Scenario": [], "Control": []})
    num = num.rename(columns={"other": "control", "other_plays": "control_plays",
                              **{c: c.replace("other_", "control_") for c in num.columns if c.startswith("other_")}})
    disp = pd.DataFrame({
        "Scenario": num.scenario, "Control": num.control, "Agent": num.agent, "Mode": num["mode"],
        "Plays": [f"{p} / {c}" for p, c in zip(num.plays, num.control_plays)],
        "Survival": _cells(num, "survival"), "Control survival": _cells(num, "control_survival"),
        "Difference": _cells(num, "survival_diff"),
        "Trap-fall": _cells(num, "trap_fall", 2), "Control trap-fall": _cells(num, "control_trap_fall", 2),
        "Trap-fall difference": _cells(num, "trap_fall_diff", 2),
    })
    return num, disp


def ablations_table(plays: pd.DataFrame, refs: Mapping[str, Mapping], judgements: pd.DataFrame | None,
                    judges: Sequence[str], boot: Bootstrap) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each ablation (``NAME~DISCLOSURE``) beside its scenario, per agent x mode: survival, trap-fall and CR2.

    What one of this track's extra disclosures changes: the ablation's plays minus the scenario's,
    with unpaired bootstrap intervals (the sides are different plays); the trap-fall rate by the
    scenario's pattern, CR2 (trap avoidance, from the panel that judged each play) where judges are
    configured.
    """
    pairs = [(scn, ref["ablation_of"]) for scn, ref in sorted(refs.items()) if ref.get("ablation_of") in refs]
    cr2 = rubric_per_play(judgements).set_index("play_id")["cr2"] if judges and judgements is not None \
        and "cr2" in judgements else None
    num = _paired(plays, refs, pairs, boot, cr2)
    if num.empty:
        return num, pd.DataFrame({"Ablation": [], "Scenario": []})
    num = num.rename(columns={"other": "base", "other_plays": "base_plays",
                              **{c: c.replace("other_", "base_") for c in num.columns if c.startswith("other_")}})
    num.insert(1, "disclosure", [s.split(ABLATION_SEP, 1)[1] for s in num.scenario])
    disp = pd.DataFrame({
        "Disclosure": num.disclosure, "Scenario": num.base, "Agent": num.agent, "Mode": num["mode"],
        "Plays": [f"{p} / {c}" for p, c in zip(num.plays, num.base_plays)],
        "Survival": _cells(num, "survival"), "Without it": _cells(num, "base_survival"),
        "Survival difference": _cells(num, "survival_diff"),
        "Trap-fall": _cells(num, "trap_fall", 2), "Without it ": _cells(num, "base_trap_fall", 2),
        "Trap-fall difference": _cells(num, "trap_fall_diff", 2),
        "CR2 difference": _cells(num, "cr2_diff", 2) if cr2 is not None else [NO_JUDGE] * len(num),
    })
    return num, disp


def _cells(num: pd.DataFrame, col: str, digits: int = 3) -> list[str]:
    """``mean [lo, hi]`` of ``col`` per row (its ``_lo``/``_hi`` columns); a dash where nothing was measured."""
    return [format_interval(m, lo, hi, digits=digits) if not pd.isna(m) else "—"
            for m, lo, hi in zip(num[col], num[f"{col}_lo"], num[f"{col}_hi"])]


def _paired(plays: pd.DataFrame, refs: Mapping[str, Mapping], pairs: Sequence[tuple[str, str]], boot: Bootstrap,
            cr2: pd.Series | None = None) -> pd.DataFrame:
    """Per (scenario, other) pair and agent x mode: survival, trap-fall (and CR2) of both sides and their difference."""
    plays = _scored(plays).copy()
    rows = []
    for scn, other in pairs:
        pat = refs[scn]["trap_pattern"]
        for (agent, mode), df in plays[plays.scenario.isin([scn, other])].groupby(["agent", "mode"], sort=True):
            a, b = df[df.scenario == scn], df[df.scenario == other]
            if a.empty or b.empty:
                continue
            rec = {"scenario": scn, "other": other, "family": refs[scn]["family"], "agent": agent, "mode": mode,
                   "plays": len(a), "other_plays": len(b)}
            cols = [("survival", a.survival.to_numpy(float), b.survival.to_numpy(float)),
                    ("trap_fall", _falls(a, pat), _falls(b, pat))]
            if cr2 is not None:
                cols.append(("cr2", cr2.reindex(a.play_id).dropna().to_numpy(float),
                             cr2.reindex(b.play_id).dropna().to_numpy(float)))
            for col, x, y in cols:
                for side, v in ((col, x), (f"other_{col}", y)):
                    iv = bootstrap_mean(v, **boot.kwargs())
                    rec.update({side: iv.estimate, f"{side}_lo": iv.lo, f"{side}_hi": iv.hi})
                d = unpaired_bootstrap(x, y, **boot.kwargs())
                rec.update({f"{col}_diff": d.estimate, f"{col}_diff_lo": d.lo, f"{col}_diff_hi": d.hi})
            rows.append(rec)
    return pd.DataFrame(rows)


def _falls(df: pd.DataFrame, pattern) -> np.ndarray:
    """0/1 per submitted play of ``df``: its design follows ``pattern`` (none for a scenario without a trap)."""
    if pattern is None:
        return np.array([], dtype=float)
    out = [follows_pattern(pattern, json.loads(d)) for d, sub in zip(df.design, df.submitted)
           if _has_design(sub, d)]
    return np.array(out, dtype=float)


def _vec(design: Mapping, keys: Sequence[str]) -> np.ndarray:
    return np.array([float(design.get(k, 0)) for k in keys])


def path_summary(plays: pd.DataFrame, refs: Mapping[str, Mapping]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per agent x mode statistics, per agent x mode x deployment-index distance to the optimum)."""
    stats, steps = [], []
    for (agent, mode), df in plays.groupby(["agent", "mode"], sort=True):
        bad = df["status"].eq("failed") if "status" in df else pd.Series(False, index=df.index)
        n_failed, df = int(bad.sum()), df[~bad]    # failed plays (API or harness error): counted, not scored
        for _, p in df.iterrows():
            opt = refs[p.scenario]["optimum_design"]
            keys = [k for k, v in opt.items() if not isinstance(v, str)]   # DEF and fitted equipment; choices left out
            for k, d in enumerate(json.loads(p.designs_deployed or "[]")):
                steps.append({"agent": agent, "mode": mode, "deployment": k + 1,
                              "distance": float(np.abs(_vec(d, keys) - _vec(opt, keys)).sum())})
        sub = df[df.submitted.astype(bool)]
        best = sub.submitted_is_best_observed.dropna().astype(float)
        stats.append({"agent": agent, "mode": mode, "plays": len(df), "failed": n_failed,
                      "distinct_designs": float(df.distinct_designs.mean()),
                      "lock_in_share": float(df.lock_in_share.dropna().mean()) if df.lock_in_share.notna().any()
                      else np.nan,
                      "drift_from_best": float(sub.drift_from_best.dropna().mean()) if len(sub) else np.nan,
                      "submitted_is_best_observed": float(best.mean()) if len(best) else np.nan})
    st = pd.DataFrame(steps, columns=["agent", "mode", "deployment", "distance"])
    per_step = (st.groupby(["agent", "mode", "deployment"]).distance.agg(["mean", "count"]).reset_index()
                if len(st) else pd.DataFrame(columns=["agent", "mode", "deployment", "mean", "count"]))
    return pd.DataFrame(stats), per_step


def _plt():
    plt = pyplot()

    return plt


def _label(agent: str, mode: str) -> str:
    return agent if mode == "agentic" else f"{agent} ({mode})"


def survival_rubric_figure(summ: pd.DataFrame, judges: Sequence[str]):
    """Plot Stage-2 survival against the rubric score per agent, pooled over each family's plays.

    Without a judge, survival per agent and a note that no judge is configured.
    """
    plt = _plt()
    pooled = summ[summ.scenario == "all"]
    fams = sorted(pooled.family.unique())
    markers = dict(zip(fams, "osD^v<>"))
    agents = sorted({(a, m) for a, m in zip(pooled.agent, pooled["mode"])})
    colors = {am: plt.cm.tab10(k % 10) for k, am in enumerate(agents)}
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    if judges:
        for _, r in pooled.iterrows():
            c = colors[(r.agent, r["mode"])]
            ax.errorbar(r.rubric, r.survival, xerr=[[r.rubric - r.rubric_lo], [r.rubric_hi - r.rubric]],
                        yerr=[[r.survival - r.survival_lo], [r.survival_hi - r.survival]], fmt=markers[r.family],
                        color=c, capsize=2, ms=6)
        ax.set_xlabel(f"report rubric score (0-{RUBRIC_MAX}; mean of {len(judges)} judge(s))")
        ax.set_xlim(-0.5, RUBRIC_MAX + 0.5)
    else:
        x = {am: k for k, am in enumerate(agents)}
        for _, r in pooled.iterrows():
            off = (fams.index(r.family) - (len(fams) - 1) / 2) * 0.18
            ax.errorbar(x[(r.agent, r["mode"])] + off, r.survival,
                        yerr=[[r.survival - r.survival_lo], [r.survival_hi - r.survival]], fmt=markers[r.family],
                        color=colors[(r.agent, r["mode"])], capsize=2, ms=6)
        ax.set_xticks(range(len(agents)), [_label(*am) for am in agents], rotation=20, ha="right")
        ax.text(0.5, 0.04, f"rubric score: {NO_JUDGE} (games.judges is empty)", transform=ax.transAxes,
                ha="center", va="bottom", fontsize=10, color="#a00000",
                bbox=dict(facecolor="white", edgecolor="#a00000", boxstyle="round"))
    ax.set_ylabel("Stage-2 survival (mean over plays, 95% CI)")
    ax.set_ylim(0, 1)
    handles = [plt.Line2D([], [], marker=markers[f], ls="", color="#555555", label=f) for f in fams]
    if judges:
        handles += [plt.Line2D([], [], marker="o", ls="", color=colors[am], label=_label(*am)) for am in agents]
    ax.legend(handles=handles, frameon=False, fontsize=8, loc="upper left", ncol=2)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def _tiered(plays: pd.DataFrame, judgements: pd.DataFrame | None) -> pd.DataFrame:
    """The judged plays with their tier and their judge-mean scores."""
    plays = _scored(plays).copy()
    plays["tier"] = [survival_tier(p) for _, p in plays.iterrows()]
    rub = rubric_per_play(judgements)
    return plays.merge(rub, on="play_id", how="inner").dropna(subset=["total"])


def _no_judge_note(ax, plt) -> None:
    ax.text(0.5, 0.5, f"criteria: {NO_JUDGE}\n(games.judges is empty)", transform=ax.transAxes, ha="center",
            va="center", fontsize=11, color="#a00000", bbox=dict(facecolor="white", edgecolor="#a00000",
                                                                  boxstyle="round"))


def criteria_tiers_figure(plays: pd.DataFrame, judgements: pd.DataFrame | None, judges: Sequence[str],
                          boot: Bootstrap):
    """Plot each criterion's mean (as a share of its maximum) per survival tier, with bootstrap intervals."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.6, 3.8))
    numbers = []
    if judges:
        df = _tiered(plays, judgements)
        tiers = [t for t in TIERS if (df.tier == t).any()]
        maxima = {c: top for c, top in scores_of(judgements).items() if c not in ("cr", "total")}
        crit = list(maxima)
        width = 0.8 / max(len(tiers), 1)
        colors = dict(zip(TIERS, ["#1b7837", "#a6dba0", "#c2a5cf", "#762a83"]))
        for k, t in enumerate(tiers):
            sub = df[df.tier == t]
            means, los, his = [], [], []
            for c in crit:
                iv = bootstrap_mean(sub[c].to_numpy(float) / maxima[c], **boot.kwargs())
                means.append(iv.estimate)
                los.append(iv.estimate - iv.lo)
                his.append(iv.hi - iv.estimate)
                numbers.append({"tier": t, "criterion": c, "plays": len(sub), "mean_share": iv.estimate,
                                "lo": iv.lo, "hi": iv.hi})
            x = np.arange(len(crit)) + (k - (len(tiers) - 1) / 2) * width
            ax.bar(x, means, width, yerr=[los, his], capsize=2, color=colors[t], label=f"{t} (n={len(sub)})")
        ax.set_xticks(range(len(crit)), [f"{c.upper()}\n{CRITERION_NAMES.get(c, c)}" for c in crit], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.legend(frameon=False, fontsize=8, title="survival tier", title_fontsize=8)
    else:
        _no_judge_note(ax, plt)
        ax.set_xticks([])
    ax.set_ylabel("mean score / criterion maximum")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig, numbers


def survival_cr_figure(plays: pd.DataFrame, judgements: pd.DataFrame | None, judges: Sequence[str]):
    """Plot each judged play's Stage-2 survival against its causal-reasoning score (CR1+CR2+CR3), coloured by tier."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    numbers = []
    if judges:
        df = _tiered(plays, judgements)
        colors = dict(zip(TIERS, ["#1b7837", "#5aae61", "#9970ab", "#762a83"]))
        for t in TIERS:
            sub = df[df.tier == t]
            if len(sub):
                ax.scatter(sub.cr, sub.survival, s=16, alpha=0.75, color=colors[t], label=f"{t} (n={len(sub)})")
        numbers = df[["play_id", "agent", "mode", "scenario", "tier", "cr", "survival"]].to_dict("records")
        ax.set_xlim(-0.5, SCORES["cr"] + 0.5)
        ax.legend(frameon=False, fontsize=8, title="survival tier", title_fontsize=8)
    else:
        _no_judge_note(ax, plt)
    ax.set_xlabel(f"causal reasoning CR1+CR2+CR3 (0-{SCORES['cr']}; mean over judges)")
    ax.set_ylabel("Stage-2 survival")
    ax.set_ylim(0, 1)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig, numbers


def paths_figure(stats: pd.DataFrame, per_step: pd.DataFrame):
    """Plot the configuration paths: the distance of the k-th deployed design to the optimum, and lock-in per agent.

    Per agent the other panels show the lock-in share, the drift of the submission from the best
    observed design, and the share of submissions equal to the best observed design.
    """
    plt = _plt()
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), gridspec_kw={"width_ratios": [2, 1, 1, 1]})
    agents = [(a, m) for a, m in zip(stats.agent, stats["mode"])]
    colors = {am: plt.cm.tab10(k % 10) for k, am in enumerate(agents)}
    ax = axes[0]
    for am in agents:
        s = per_step[(per_step.agent == am[0]) & (per_step["mode"] == am[1])]
        ax.plot(s.deployment, s["mean"], marker="o", ms=3, color=colors[am], label=_label(*am))
    ax.set_xlabel("deployment (Stage 1)")
    ax.set_ylabel("L1 distance to the optimum\n(DEF points; mean over plays)")
    ax.legend(frameon=False, fontsize=7)
    labels = [_label(*am) for am in agents]
    for ax, col, title in ((axes[1], "lock_in_share", "lock-in: DEF share of\nthe most-armoured component"),
                           (axes[2], "drift_from_best", "drift of the submission from\nthe best observed design (L1)"),
                           (axes[3], "submitted_is_best_observed", "submission = best\nobserved design (share)")):
        ax.bar(range(len(agents)), stats[col].to_numpy(float), color=[colors[am] for am in agents])
        ax.set_xticks(range(len(agents)), labels, rotation=35, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
    for ax in axes:
        ax.spines[["top", "right"]].set_visible(False)
    axes[1].set_ylim(0, 1)
    axes[3].set_ylim(0, 1)
    fig.tight_layout()
    return fig


# --- targets (rules/games.smk) -------------------------------------------------------------------------


def split_caption(refs: Mapping[str, Mapping], secrets: Mapping | None) -> str:
    """The sentence every games table ends with: the public scenarios only, or its test variants and how the seed is held.

    The seed's sentence is the causal tables' (:func:`~heuresis.artifacts.sealing.disclosure_caption`,
    without the salt's, which no game uses).
    """
    from heuresis.artifacts.sealing import disclosure_caption

    tests = sorted(name for name, r in refs.items() if r.get("split") == "test")
    if not tests:
        return "Games: the public scenario files only (the development set; games.test_variants draws none)."
    seed = {k: v for k, v in (secrets or {"test_seed": "public"}).items() if k != "salt"}
    return f"Games test variants ({len(tests)}: {', '.join(tests)}) drawn from the test seed. {disclosure_caption(seed)}"


def load_inputs(references: Sequence, plays: Sequence, judgements: Sequence):
    """Read the games artifacts the analysis needs.

    Parameters
    ----------
    references : sequence of path
        ``game_references`` artifacts (one per scenario).
    plays, judgements : sequence of path
        ``game_plays`` and ``game_judgements`` artifacts; an empty sequence gives an empty frame.

    Returns
    -------
    tuple
        ``(references, plays, judgements)``: the references by scenario as
        :func:`~heuresis.stages.games.workflow.load_references` returns them, and the plays and
        judgements concatenated as DataFrames.
    """
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import GAME_JUDGEMENTS, GAME_PLAYS
    from heuresis.stages.games.workflow import load_references

    refs = load_references(references)
    p = pd.concat([read_table(x, GAME_PLAYS).to_pandas() for x in plays], ignore_index=True) if plays else \
        pd.DataFrame(columns=GAME_PLAYS.schema.names)
    j = pd.concat([read_table(x, GAME_JUDGEMENTS).to_pandas() for x in judgements], ignore_index=True) \
        if judgements else pd.DataFrame(columns=GAME_JUDGEMENTS.schema.names)
    return refs, p, j


@dataclass
class GamesResult:
    """One games target computed: a table (``numbers``, ``display``) or a figure (``fig``, ``numbers``).

    ``note`` follows the target's caption (this run's facts, then :func:`split_caption`); ``split``
    is that sentence alone, which the provenance records as ``games_split``; ``log`` is the job's line.
    """

    kind: str
    numbers: object
    display: pd.DataFrame | None
    fig: object
    note: str
    split: str
    log: str
    bootstrap: dict        # the bootstrap settings used (level, resamples, seed)


@dataclass
class GamesInputs:
    """What every games target is computed from: the run's references, plays, judgements and settings."""

    target: str
    refs: dict
    plays: pd.DataFrame
    judged: pd.DataFrame        # the committed view's judgements (the default)
    every_view: pd.DataFrame    # every protocol's judgements (games_protocols)
    judges: list[str]
    bootstrap: Bootstrap
    label: str                  # split_caption: whether the scenarios include sealed test variants
    published: Mapping | None

    @property
    def facts(self) -> str:
        """The interval level and resamples, for the caption's note."""
        return f"{float(self.bootstrap.level):.0%} intervals, {int(self.bootstrap.resamples)} resamples."

    def no_judge(self, what: str = "") -> str:
        """The note that no judge is configured (empty when one is); ``what`` names what lacks its scores."""
        if self.judges:
            return ""
        return f" {what + ': ' if what else ''}{NO_JUDGE} (games.judges is empty)."

    def table(self, num: pd.DataFrame, disp: pd.DataFrame, extra: str, log: str) -> GamesResult:
        """The target as a table, its note being ``extra`` then the split sentence."""
        return GamesResult("table", num, disp, None, f"{extra.strip()} {self.label}".strip(), self.label,
                           f"{self.target}: {log}", self.bootstrap.as_dict())

    def figure(self, fig, numbers, log: str) -> GamesResult:
        """The target as a figure with the numbers it plots."""
        return GamesResult("figure", numbers, None, fig, self.label, self.label, f"{self.target}: {log}",
                           self.bootstrap.as_dict())


def _optima(g: GamesInputs) -> GamesResult:
    num, disp = references_table(g.refs)
    return g.table(num, disp, "", f"{len(num)} scenarios")


def _expectations(g: GamesInputs) -> GamesResult:
    num, disp = expectations_table(g.refs)
    return g.table(num, disp, "", f"{len(num)} strategies, {int(num.inside.sum()) if len(num) else 0} inside")


def _leaderboard(g: GamesInputs) -> GamesResult:
    num, disp = leaderboard_table(g.plays, g.judged, g.judges, g.bootstrap, g.published)
    extra = g.facts + g.no_judge("CR and rubric") + (
        f" Published rows: {g.published['source']}; {g.published['setting']} Not ranked with this run's plays."
        if g.published else "")
    return g.table(num, disp, extra, f"{int((num.block == 'this run').sum()) // 2 if len(num) else 0} players")


def _judges(g: GamesInputs) -> GamesResult:
    num, disp = judges_table(g.judged, g.judges)
    return g.table(num, disp, g.no_judge(), f"{len(g.judges)} judges, {len(g.judged)} judgements" if g.judges
                   else NO_JUDGE)


def _family(g: GamesInputs) -> GamesResult:
    family = g.target.removeprefix("games_")
    summ = summary(g.plays[g.plays.family == family], g.judged, g.judges, g.bootstrap)
    num, disp = family_table(summ, family, g.judges)
    extra = f"Family: {family}; {g.facts}" + g.no_judge("Rubric")
    return g.table(num, disp, extra, f"{len(num)} rows from {int((g.plays.family == family).sum())} plays")


def _protocols(g: GamesInputs) -> GamesResult:
    num, disp = protocols_table(g.plays, g.every_view, g.judges, g.bootstrap)
    return g.table(num, disp, g.facts + g.no_judge(), f"{len(num)} rows")


def _judged_table(build):
    def compute(g: GamesInputs) -> GamesResult:
        num, disp = build(g)
        return g.table(num, disp, g.facts + g.no_judge(),
                       f"{len(num)} rows from {len(g.judged)} judgements" if g.judges else NO_JUDGE)
    return compute


def _ablations(g: GamesInputs) -> GamesResult:
    num, disp = ablations_table(g.plays, g.refs, g.judged, g.judges, g.bootstrap)
    return g.table(num, disp, g.facts + g.no_judge("CR2"), f"{len(num)} rows")


def _plays_table(build):
    def compute(g: GamesInputs) -> GamesResult:
        num, disp = build(g.plays, g.refs, g.bootstrap)
        return g.table(num, disp, g.facts, f"{len(num)} rows from {len(g.plays)} plays")
    return compute


def _criteria_figure(build):
    def compute(g: GamesInputs) -> GamesResult:
        fig, numbers = build(g)
        return g.figure(fig, numbers, f"{len(g.plays)} plays" + ("" if g.judges else f"; criteria: {NO_JUDGE}"))
    return compute


def _survival_rubric(g: GamesInputs) -> GamesResult:
    summ = summary(g.plays, g.judged, g.judges, g.bootstrap)
    return g.figure(survival_rubric_figure(summ, g.judges), summ[summ.scenario == "all"].to_dict("records"),
                    f"{len(g.plays)} plays" + ("" if g.judges else f"; rubric: {NO_JUDGE}"))


def _paths(g: GamesInputs) -> GamesResult:
    stats, per_step = path_summary(g.plays, g.refs)
    return g.figure(paths_figure(stats, per_step), {"agents": stats.to_dict("records"),
                                                    "per_deployment": per_step.to_dict("records")},
                    f"{len(g.plays)} plays of {len(stats)} agent x mode")


#: One builder per games target (the registry's ``games_*`` targets); ``games_family`` builds each
#: family's table ``games_<family>``.
GAMES_BUILDERS = {
    "games_optima": _optima,
    "games_expectations": _expectations,
    "games_leaderboard": _leaderboard,
    "games_judges": _judges,
    "games_family": _family,
    "games_protocols": _protocols,
    "games_criteria": _judged_table(lambda g: criteria_table(g.plays, g.judged, g.judges, g.bootstrap)),
    "games_failure_modes": _judged_table(lambda g: failure_modes_table(g.plays, g.judged, g.judges)),
    "games_ablations": _ablations,
    "games_trap_fall": _plays_table(trap_fall_table),
    "games_bias_control": _plays_table(bias_control_table),
    "games_criteria_tiers": _criteria_figure(lambda g: criteria_tiers_figure(g.plays, g.judged, g.judges,
                                                                             g.bootstrap)),
    "games_survival_cr": _criteria_figure(lambda g: survival_cr_figure(g.plays, g.judged, g.judges)),
    "games_survival_rubric": _survival_rubric,
    "games_paths": _paths,
}


def compute_target(target: str, *, references: Sequence, plays: Sequence, judgements: Sequence,
                   judges: Sequence[str], bootstrap: Bootstrap | Mapping,
                   secrets: Mapping | None = None, published: Mapping | None = None) -> GamesResult:
    """Compute one games table or figure from the games artifacts (written by :func:`heuresis.targets.build.build`).

    The note after its caption holds the run's facts: the family, the interval level and
    resamples, whether a judge is configured, and whether its scenarios include sealed test
    variants (:func:`split_caption`; ``secrets``: the run's secrets regime,
    :func:`heuresis.artifacts.sealing.disclosure`).  The builder is :data:`GAMES_BUILDERS`'
    entry of ``target`` (``games_family`` for a family's table).
    """
    boot = Bootstrap.coerce(bootstrap, "games.bootstrap")
    refs, p, every_view = load_inputs(references, plays, judgements)
    inputs = GamesInputs(target, refs, p, every_view[every_view.protocol == "committed"], every_view, list(judges),
                         boot, split_caption(refs, secrets), published)
    if target in GAMES_BUILDERS and target != "games_family":
        return GAMES_BUILDERS[target](inputs)
    if target.removeprefix("games_") in set(p.family):
        return GAMES_BUILDERS["games_family"](inputs)
    raise ValueError(f"unknown games target {target!r}")
