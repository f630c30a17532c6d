"""Scoring of the games track (docs/games.md §5): the tables and figures of ``rules/games.smk``.

* :func:`summary` — per scenario x agent x mode (and per family, scenario ``all``): survival,
  win rate, gap to the optimum, and rubric score, each a mean with a percentile bootstrap
  interval over the plays that did not fail (:func:`heuresis.bootstrap.bootstrap_mean`; a play
  ``failed`` by an API or harness error is counted in ``failed``, shown beside the plays and
  never scored); the rubric of a play is the
  mean total over the judges that scored it.  With no judge configured the rubric columns are
  null and the tables say "no judge configured" (never zeros).
* :func:`family_table` — one table per family; :func:`references_table` — optima, thresholds,
  trap and standard designs; :func:`judges_table` — each judge's mean scores and the agreement
  ICC(2,k) per rubric item.
* :func:`path_summary` — configuration-path statistics per agent x mode: distance of the k-th
  deployed design to the optimum, lock-in share, drift of the submission from the best observed
  design, share of submissions equal to the best observed design.
* :func:`survival_rubric_figure`, :func:`paths_figure`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from heuresis.bootstrap import bootstrap_mean
from heuresis.games.judge import RUBRIC, RUBRIC_MAX, icc

__all__ = [
    "NO_JUDGE",
    "family_table",
    "judges_table",
    "path_summary",
    "paths_figure",
    "references_table",
    "rubric_per_play",
    "summary",
    "survival_rubric_figure",
]

NO_JUDGE = "no judge configured"


def _fmt(mean, lo, hi, digits=3) -> str:
    if mean is None or not np.isfinite(mean):
        return "n/a"
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def rubric_per_play(judgements: pd.DataFrame) -> pd.DataFrame:
    """Per play: mean over the judges that scored it of each rubric item and the total."""
    cols = [*RUBRIC, "total"]
    if judgements is None or judgements.empty:
        return pd.DataFrame(columns=["play_id", *cols, "judges_scored"])
    ok = judgements[judgements.status.isin(["ok", "no_report"])]
    g = ok.groupby("play_id")
    out = g[cols].mean()
    out["judges_scored"] = g.size()
    return out.reset_index()


def summary(plays: pd.DataFrame, judgements: pd.DataFrame | None, judges: Sequence[str], boot: Mapping) -> pd.DataFrame:
    """Per family x scenario x agent x mode (scenario ``all``: the family's plays pooled)."""
    kw = {"resamples": int(boot["resamples"]), "seed": int(boot["seed"]), "level": float(boot["level"])}
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
        rows.append(row)
    out = pd.DataFrame(rows)
    out["judges"] = ", ".join(judges) if judges else NO_JUDGE
    return out


def family_table(summ: pd.DataFrame, family: str, judges: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(numbers, display) of one family: every scenario x agent x mode, then the pooled rows."""
    df = summ[summ.family == family].copy()
    df["_pooled"] = df.scenario == "all"
    df = df.sort_values(["_pooled", "scenario", "agent", "mode"]).drop(columns="_pooled").reset_index(drop=True)
    disp = pd.DataFrame({
        "Scenario": df.scenario.replace({"all": f"all {family}"}), "Agent": df.agent, "Mode": df["mode"],
        "Plays": [f"{p} ({f} failed, not scored)" if f else str(p) for p, f in zip(df.plays, df.failed)],
        "Survival": [_fmt(m, lo, hi) for m, lo, hi in zip(df.survival, df.survival_lo, df.survival_hi)],
        "Win rate": [_fmt(m, lo, hi, 2) for m, lo, hi in zip(df.win_rate, df.win_rate_lo, df.win_rate_hi)],
        "Gap to optimum": [_fmt(m, lo, hi) for m, lo, hi in zip(df.gap, df.gap_lo, df.gap_hi)],
        f"Rubric (0-{RUBRIC_MAX})": ([_fmt(m, lo, hi, 1) for m, lo, hi in zip(df.rubric, df.rubric_lo, df.rubric_hi)]
                                     if judges else [NO_JUDGE] * len(df)),
    })
    return df, disp


def references_table(refs: Mapping[str, Mapping]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Optimum [interval], trap and standard survival, threshold, and the designs, per scenario."""
    def short(d):
        return ", ".join(f"{k} {int(v)}" if not isinstance(v, bool) else k for k, v in d.items() if v)

    rows = [dict(r) for _, r in sorted(refs.items())]
    num = pd.DataFrame(rows)
    for k in ("optimum_design", "trap_design", "standard_design"):
        num[k] = [json.dumps(d, sort_keys=True) for d in num[k]]
    disp = pd.DataFrame({
        "Scenario": [r["scenario"] for r in rows], "Bias": [r["bias"] for r in rows],
        "Optimum [95% CI]": [_fmt(r["optimum"], r["optimum_lo"], r["optimum_hi"]) for r in rows],
        "Threshold": [f"{r['threshold']:.3f}" for r in rows],
        "Trap": [f"{r['trap']:.3f}" for r in rows], "Standard": [f"{r['standard']:.3f}" for r in rows],
        "Optimum design": [short(r["optimum_design"]) for r in rows],
        "Trap design": [short(r["trap_design"]) for r in rows],
    })
    return num, disp


def judges_table(judgements: pd.DataFrame | None, judges: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per judge: plays scored, unparsed/failed answers, mean of each item; then ICC(2,k) per item."""
    if not judges:
        num = pd.DataFrame([{"judge": NO_JUDGE, "item": None, "value": None}])
        return num, pd.DataFrame({"Judge": [NO_JUDGE], "Result": ["games.judges is empty: no rubric, no ICC"]})
    rows, disp = [], []
    for j in judges:
        d = judgements[judgements.judge == j]
        ok = d[d.status.isin(["ok", "no_report"])]
        rec = {"judge": j, "plays": len(d), "scored": len(ok), "unparsed": int((d.status == "unparsed").sum()),
               "play_failed": int((d.status == "play_failed").sum()),
               "failed": int((d.status == "failed").sum()), **{k: float(ok[k].mean()) if len(ok) else None
                                                                 for k in [*RUBRIC, "total"]}}
        rows.append(rec)
        disp.append({"Judge": j, "Plays": str(rec["plays"]) + (f" ({rec['play_failed']} failed plays, not judged)"
                                                             if rec["play_failed"] else ""),
                     "Unparsed / failed": f"{rec['unparsed']} / {rec['failed']}",
                     **{k.replace("_", " ").capitalize(): "n/a" if rec[k] is None else f"{rec[k]:.2f}"
                        for k in [*RUBRIC, "total"]}})
    num = pd.DataFrame(rows)
    # agreement: plays scored by every judge (reports only: a missing report scores 0 for all by rule)
    asked = judgements[judgements.status != "no_report"]
    icc_row = {"judge": f"ICC(2,{len(judges)})"}
    disp_row = {"Judge": f"ICC(2,{len(judges)}) across judges", "Plays": "", "Unparsed / failed": ""}
    for k in [*RUBRIC, "total"]:
        wide = asked.pivot_table(index="play_id", columns="judge", values=k, aggfunc="first")
        wide = wide.reindex(columns=list(judges)).dropna()
        val, n = float("nan"), len(wide)
        if len(judges) >= 2 and n >= 2:
            val = icc(wide.to_numpy(float))["ICC2_k"]
        icc_row[k] = val
        disp_row[k.replace("_", " ").capitalize()] = (f"{val:.2f} (n={n})" if np.isfinite(val)
                                                      else ("n/a (one judge)" if len(judges) < 2 else f"n/a (n={n})"))
    disp_row["Plays"] = str(len(asked.play_id.unique()))
    num = pd.concat([num, pd.DataFrame([icc_row])], ignore_index=True)
    return num, pd.DataFrame([*disp, disp_row])


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
            keys = list(opt)
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(agent: str, mode: str) -> str:
    return agent if mode == "tools" else f"{agent} ({mode})"


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
CAPTIONS = {
    "family": ("Games, {family} family: Stage-2 survival, win rate (survival at or above the scenario's "
               "threshold) and gap to the verified optimum per scenario, agent and mode, and the report rubric "
               "(0-16, mean over judges); means over plays with {level:.0%} bootstrap intervals over plays "
               "({resamples} resamples). Rows 'all {family}' pool the family's plays."),
    "games_optima": ("Games references: optimum by common-random-number search, verified on fresh Stage-2 "
                         "fleets (mean and 95% interval over fleets); trap and standard designs on the same "
                         "fleets; win threshold = optimum - margin (or the scenario's fixed threshold)."),
    "games_judges": ("Games report rubric: each LLM judge's mean score per item (causal reasoning 0-11, "
                     "experimental design 0-2, reflection 0-2, data usage 0-1) and the agreement across judges, "
                     "ICC(2,k) (Shrout & Fleiss 1979) over the plays every judge scored."),
}


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
        :func:`~heuresis.games.workflow.load_references` returns them, and the plays and
        judgements concatenated as DataFrames.
    """
    from heuresis.games.workflow import load_references
    from heuresis.schemas import GAME_JUDGEMENTS, GAME_PLAYS, read_table

    refs = load_references(references)
    p = pd.concat([read_table(x, GAME_PLAYS).to_pandas() for x in plays], ignore_index=True) if plays else \
        pd.DataFrame(columns=GAME_PLAYS.schema.names)
    j = pd.concat([read_table(x, GAME_JUDGEMENTS).to_pandas() for x in judgements], ignore_index=True) \
        if judgements else pd.DataFrame(columns=GAME_JUDGEMENTS.schema.names)
    return refs, p, j


def build_target(target: str, stem, *, references: Sequence, plays: Sequence, judgements: Sequence,
                 judges: Sequence[str], bootstrap: Mapping) -> str:
    """Write one games table (``stem``.parquet/.md/.tex) or figure (``stem``.pdf/.png); returns a log line."""
    from heuresis.provenance import provenance_record
    from heuresis.report import save_figure, write_paper_table

    refs, p, j = load_inputs(references, plays, judgements)
    prov = provenance_record(stage="games_targets", config={"target": target, "judges": list(judges),
                                                            "bootstrap": dict(bootstrap)},
                             seeds={"bootstrap": int(bootstrap["seed"])},
                             inputs=[*references, *plays, *judgements])
    if target == "games_optima":
        num, disp = references_table(refs)
        write_paper_table(num, disp, stem, caption=CAPTIONS[target], provenance=prov)
        return f"{target}: {len(num)} scenarios"
    if target == "games_judges":
        num, disp = judges_table(j, judges)
        write_paper_table(num, disp, stem, caption=CAPTIONS[target], provenance=prov)
        return f"{target}: " + (f"{len(judges)} judges, {len(j)} judgements" if judges else NO_JUDGE)
    if target.startswith("games_") and target[len("games_"):] in set(p.family):
        family = target[len("games_"):]
        summ = summary(p[p.family == family], j, judges, bootstrap)
        num, disp = family_table(summ, family, judges)
        cap = CAPTIONS["family"].format(family=family, level=float(bootstrap["level"]),
                                        resamples=int(bootstrap["resamples"]))
        if not judges:
            cap += f" Rubric: {NO_JUDGE} (games.judges is empty)."
        write_paper_table(num, disp, stem, caption=cap, provenance=prov)
        return f"{target}: {len(num)} rows from {int((p.family == family).sum())} plays"
    if target == "games_survival_rubric":
        summ = summary(p, j, judges, bootstrap)
        fig = survival_rubric_figure(summ, judges)
        save_figure(fig, stem, provenance={**prov, "numbers": summ[summ.scenario == "all"].to_dict("records")})
        return f"{target}: {len(p)} plays" + ("" if judges else f"; rubric: {NO_JUDGE}")
    if target == "games_paths":
        stats, per_step = path_summary(p, refs)
        fig = paths_figure(stats, per_step)
        save_figure(fig, stem, provenance={**prov, "numbers": {"agents": stats.to_dict("records"),
                                                               "per_deployment": per_step.to_dict("records")}})
        return f"{target}: {len(p)} plays of {len(stats)} agent x mode"
    raise ValueError(f"unknown games target {target!r}")
