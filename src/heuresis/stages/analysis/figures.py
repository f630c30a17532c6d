"""Analysis figures (docs/design.md §7: Figures 6, 7a, 7b, 9) from the episode scores and headroom scores.

Each builder returns ``(fig, numbers)``: a matplotlib figure (saved as PDF and PNG by
:func:`heuresis.artifacts.report.save_figure`) and the plotted numbers.  Families are in config order
(docs/design.md §3.3), then ``all``; every point or bar has its 95% bootstrap interval; a figure without
data says why on its canvas.  Episodes with status ``failed`` (API or harness errors) are left
out of every plotted number; each row of the numbers has ``n_failed``, the failed episodes of its
cell, and a figure with any says how many under its plot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from heuresis.artifacts.report import pyplot
from heuresis.causal.bootstrap import bootstrap_mean, bootstrap_ratio, paired_bootstrap
from heuresis.config.settings import Bootstrap
from heuresis.stages.analysis.tables import GLOBAL, n_failed, paired_diff, results_of, split_failed, test_episodes
from heuresis.stages.headroom_targets import method_f1

__all__ = ["MAX_SERIES", "figure6", "figure7a", "figure7b", "figure9"]

MAX_SERIES = 10
_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
           "#64b5cd"]




def _scored(scores: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(test episodes that are results, failed test episodes)."""
    return split_failed(test_episodes(scores))


def _with_failed(fig, numbers: pd.DataFrame, failed: pd.DataFrame) -> pd.DataFrame:
    """Numbers with ``n_failed`` per row (agent, condition, family); a note under the plot if any failed."""
    if "agent" in numbers.columns and len(numbers):
        numbers = numbers.assign(n_failed=[n_failed(failed, a, c, f) if a else 0 for a, c, f in
                                           zip(numbers["agent"], numbers["condition_id"], numbers["family"])])
    else:
        numbers = numbers.assign(n_failed=pd.Series(dtype=int))
    if len(failed):
        fig.text(0.005, 0.003, f"{len(failed)} failed episode(s) (API or harness error) not shown", fontsize=7,
                 ha="left", va="bottom", color="#c44e52")
    return numbers


def _label(part: pd.DataFrame) -> str:
    r = part.iloc[0]
    bits = [r["agent"], "guided" if r["guided"] else "unguided"]
    if r["toolbox"] != "full":
        bits.append(r["toolbox"])
    if r["prompt_level"] or r["target"] != "none":
        bits.append(f"p{r['prompt_level']}/{r['target']}")
    bits.append(f"{r['budget']}/{r['last_turn']}")
    if r["repeat"]:
        bits.append(f"r{r['repeat']}")
    return " · ".join(str(b) for b in bits)


def _series(scores: pd.DataFrame, agents: Sequence[str]) -> tuple[list[pd.DataFrame], str]:
    """One frame per result; above MAX_SERIES, only the modal condition's results (said in the note)."""
    parts = [scores[(scores["agent"] == a) & (scores["condition_id"] == c)] for a, c in results_of(scores, agents)]
    if len(parts) <= MAX_SERIES:
        return parts, ""
    fields = ["toolbox", "prompt_level", "target", "budget", "last_turn", "repeat"]
    modal = scores[fields].value_counts().index[0]
    keep = [p for p in parts if tuple(p.iloc[0][fields]) == tuple(modal)][:MAX_SERIES]
    shown = ", ".join(f"{f.replace('_', ' ')} {v}" for f, v in zip(fields, modal))
    return keep, f"{len(keep)} of {len(parts)} results shown: those with {shown}"


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])


def _scopes(scores: pd.DataFrame, families: Sequence[str]) -> list[str]:
    present = set(scores["family"])
    return [f for f in families if f in present] + [GLOBAL]


def _fam(part: pd.DataFrame, scope: str) -> pd.DataFrame:
    return (part if scope == GLOBAL else part[part["family"] == scope]).sort_values(["family", "instance"])


def _errbar(ax, x, ivs, color, label, marker="o", fill=True):
    est = np.array([iv.estimate for iv in ivs])
    err = np.array([[iv.estimate - iv.lo for iv in ivs], [iv.hi - iv.estimate for iv in ivs]])
    ax.errorbar(x, est, yerr=err, fmt=marker, color=color, capsize=2, ms=4, label=label,
                mfc=color if fill else "white", lw=1)


def figure6(scores: pd.DataFrame, headroom: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping,
            agents: Sequence[str] = ()):
    """Δ^s and Δ^r per result and family against the selection and repair headrooms."""
    boot = Bootstrap.coerce(boot)
    plt = pyplot()
    scores, failed = _scored(scores)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=False)
    rows = []  # type: ignore[var-annotated]
    if scores.empty:
        for ax in axes:
            _empty(ax, "no test episodes in this config" if failed.empty else "every test episode failed")
        return fig, _with_failed(fig, pd.DataFrame(rows), failed)
    scopes = _scopes(scores, families)
    x = np.arange(len(scopes))
    parts, note = _series(scores, agents)
    heads = {}
    for scope in scopes:
        fam = GLOBAL if scope == GLOBAL else scope
        g, f, o = (method_f1(headroom, fam, m) for m in ("bca_g", "bca_f", "oracle"))
        heads[scope] = (paired_bootstrap(f, g, **boot.kwargs()), paired_bootstrap(o, f, **boot.kwargs()))
    for ax, (col, k, title, hname) in zip(axes, (("delta_s", 0, "selection: Δ$^s$ = F1(A) − F1(BCA$_g$)", "H$^s$"),
                                                 ("delta_r", 1, "repair: Δ$^r$ = F1(A) − F1(BCA$_f$)", "H$^r$"))):
        hv = [heads[s][k] for s in scopes]
        ax.bar(x, [h.estimate for h in hv], 0.8, color="#d9d9d9", label=f"headroom {hname} (all test instances)",
               yerr=[[h.estimate - h.lo for h in hv], [h.hi - h.estimate for h in hv]], capsize=2,
               error_kw={"ecolor": "#7f7f7f", "lw": 1})
        width = 0.7 / max(len(parts), 1)
        for j, part in enumerate(parts):
            ivs, xs = [], []
            for i, scope in enumerate(scopes):
                sub = _fam(part, scope)
                if len(sub):
                    ivs.append(bootstrap_mean(sub[col].to_numpy(float), **boot.kwargs()))
                    xs.append(i - 0.35 + width * (j + 0.5))
                    rows.append(dict(series=_label(part), agent=part.iloc[0]["agent"],
                                     condition_id=part.iloc[0]["condition_id"], family=scope, measure=col,
                                     mean=ivs[-1].estimate, lo=ivs[-1].lo, hi=ivs[-1].hi, n=ivs[-1].n))
            _errbar(ax, xs, ivs, _COLORS[j % len(_COLORS)], _label(part))
        for scope, h in zip(scopes, hv):
            rows.append(dict(series=hname.replace("$", ""), agent="", condition_id="", family=scope,
                             measure="h_s" if k == 0 else "h_r", mean=h.estimate, lo=h.lo, hi=h.hi, n=h.n))
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(x, scopes)
        ax.set_xlabel("mechanism family")
        ax.set_ylabel("adjacency F1 difference\n(test, mean ± 95% CI)" if k == 0 else "")
        ax.set_title(title, fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
    legend = {}  # type: ignore[var-annotated]
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(lab, h)
    n_rows = (len(legend) + 2) // 3
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=3, frameon=False, fontsize=8)
    if note:
        fig.suptitle(note, fontsize=8)
    fig.tight_layout(rect=(0, 0.045 * n_rows + 0.01, 1, 0.95 if note else 1))
    return fig, _with_failed(fig, pd.DataFrame(rows), failed)


def _by_agent_guided(scores, agents):
    g = scores[scores["guided"].astype(bool)]
    return _series(g, agents)[0] if len(g) else []


def figure7a(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping, agents: Sequence[str] = ()):
    """Guided episodes: recall of PC-KCI's wrong deletions per result and family (pooled, instances resampled)."""
    boot = Bootstrap.coerce(boot)
    plt = pyplot()
    scores, failed = _scored(scores)
    failed = failed[failed["guided"].astype(bool)]
    parts = _by_agent_guided(scores, agents)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * (len(families) + 1) + 2), 3.4))
    rows = []  # type: ignore[var-annotated]
    if not parts:
        _empty(ax, "no guided episodes in this config" if failed.empty else "every guided episode failed")
        return fig, _with_failed(fig, pd.DataFrame(rows), failed)
    scopes = _scopes(pd.concat(parts), families)
    width = 0.8 / len(parts)
    for j, part in enumerate(parts):
        xs, ivs = [], []
        for i, scope in enumerate(scopes):
            sub = _fam(part, scope)
            if not len(sub):
                continue
            iv = bootstrap_ratio(sub["recovered"].to_numpy(float), sub["n_wrong_deleted"].to_numpy(float),
                                 **boot.kwargs())
            xi = i - 0.4 + width * (j + 0.5)
            rows.append(dict(series=_label(part), agent=part.iloc[0]["agent"], condition_id=part.iloc[0]["condition_id"],
                             family=scope, recall=iv.estimate, lo=iv.lo, hi=iv.hi,
                             wrong_deleted=int(sub["n_wrong_deleted"].sum()), recovered=int(sub["recovered"].sum())))
            if np.isnan(iv.estimate):
                ax.text(xi, 0.02, "no wrong deletion", ha="center", va="bottom", fontsize=6, rotation=90)
            else:
                xs.append(xi)
                ivs.append(iv)
        if ivs:
            _errbar(ax, xs, ivs, _COLORS[j % len(_COLORS)], _label(part))
    ax.set_xticks(np.arange(len(scopes)), scopes)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel("mechanism family")
    ax.set_ylabel("recall of wrong deletions\n(restored / wrongly deleted, 95% CI)")
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig, _with_failed(fig, pd.DataFrame(rows), failed)


def figure7b(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping, agents: Sequence[str] = ()):
    """Guided − unguided F1 per agent (and condition) and family, paired over instances."""
    boot = Bootstrap.coerce(boot)
    plt = pyplot()
    scores, failed = _scored(scores)
    parts = _by_agent_guided(scores, agents)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * (len(families) + 1) + 2), 3.4))
    rows, plotted = [], []  # type: ignore[var-annotated]
    for part in parts:
        ivs = {}
        for scope in _scopes(part, families):
            sub = _fam(part, scope)
            base = scores if scope == GLOBAL else scores[scores["family"] == scope]
            iv = paired_diff(base, sub, boot, guided=False)
            if iv is not None:
                ivs[scope] = iv
        if ivs:
            plotted.append((part, ivs))
    if not plotted:
        _empty(ax, "no guided/unguided pair of conditions in this config")
        return fig, _with_failed(fig, pd.DataFrame(rows), failed)
    scopes = _scopes(pd.concat([p for p, _ in plotted]), families)
    width = 0.7 / len(plotted)
    for j, (part, ivs) in enumerate(plotted):
        xs = [i - 0.35 + width * (j + 0.5) for i, s in enumerate(scopes) if s in ivs]
        _errbar(ax, xs, [ivs[s] for s in scopes if s in ivs], _COLORS[j % len(_COLORS)], _label(part))
        rows += [dict(series=_label(part), agent=part.iloc[0]["agent"], condition_id=part.iloc[0]["condition_id"],
                      family=s, mean=iv.estimate, lo=iv.lo, hi=iv.hi, n=iv.n) for s, iv in ivs.items()]
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(scopes)), scopes)
    ax.set_xlabel("mechanism family")
    ax.set_ylabel("F1(guided) − F1(unguided)\n(test, paired mean ± 95% CI)")
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig, _with_failed(fig, pd.DataFrame(rows), failed)


def figure9(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping, agents: Sequence[str] = ()):
    """Last-turn settings: F1 over all episodes vs over finished ones, with the truncation rate."""
    boot = Bootstrap.coerce(boot)
    plt = pyplot()
    scores, failed = _scored(scores)
    fields = ["agent", "toolbox", "guided", "prompt_level", "target", "budget", "repeat"]
    order = {"none": 0, "once": 1, "retry": 2}
    rows = []  # type: ignore[var-annotated]
    groups = [g for _, g in scores.groupby(fields, sort=False)] if len(scores) else []
    groups = [g for g in groups if g["last_turn"].nunique() > 1] or groups
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * sum(g["last_turn"].nunique() for g in groups) + 2), 3.6))
    if not groups:
        _empty(ax, "no test episodes in this config" if failed.empty else "every test episode failed")
        return fig, pd.DataFrame(rows).assign(n_failed=pd.Series(dtype=int))
    rank = {a: k for k, a in enumerate(agents)}
    groups.sort(key=lambda g: (rank.get(g.iloc[0]["agent"], len(rank)), g.iloc[0]["agent"], g.iloc[0]["budget"]))
    ticks, labels, x = [], [], 0
    labelled = set()
    for g in groups:
        for lt in sorted(g["last_turn"].unique(), key=lambda v: order.get(v, 9)):
            sub = g[g["last_turn"] == lt].sort_values(["family", "instance"])
            fin = sub[sub["finished"]]
            a = bootstrap_mean(sub["f1"].to_numpy(float), **boot.kwargs())
            f = bootstrap_mean(fin["f1"].to_numpy(float), **boot.kwargs()) if len(fin) else None
            _errbar(ax, [x - 0.12], [a], "#4c72b0", None if "all" in labelled else "all episodes")
            labelled.add("all")
            if f is not None:
                _errbar(ax, [x + 0.12], [f], "#dd8452", None if "fin" in labelled else "finished only", marker="s",
                        fill=False)
                labelled.add("fin")
            else:
                ax.text(x + 0.12, 0.05, "no finished\nepisode", ha="center", fontsize=6, rotation=90)
            trunc = 1 - sub["finished"].mean()
            ax.text(x, 1.07, f"{trunc:.0%}", ha="center", fontsize=7)
            r = g.iloc[0]
            same = np.ones(len(failed), dtype=bool)
            for field in fields:
                same &= (failed[field] == r[field]).to_numpy()
            n_failed = int((same & (failed["last_turn"] == lt).to_numpy()).sum())
            rows.append(dict(agent=r["agent"], guided=bool(r["guided"]), budget=r["budget"], last_turn=lt, n=len(sub),
                             n_failed=n_failed,
                             n_finished=len(fin), truncation_rate=trunc, f1_all=a.estimate, f1_all_lo=a.lo,
                             f1_all_hi=a.hi, f1_finished=f.estimate if f else np.nan, f1_finished_lo=f.lo if f else np.nan,
                             f1_finished_hi=f.hi if f else np.nan))
            ticks.append(x)
            labels.append(f"{r['agent']}\n{r['budget']} budget\nlast turn: {lt}")
            x += 1
        x += 0.5  # type: ignore[assignment]
    ax.set_xticks(ticks, labels, fontsize=7)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("adjacency F1 (test, mean ± 95% CI)")
    ax.set_xlabel("agent, budget setting and last-turn setting (top: share of episodes truncated)")
    ax.legend(frameon=False, fontsize=8, loc="lower right")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    if len(failed):
        fig.text(0.005, 0.003, f"{len(failed)} failed episode(s) (API or harness error) not shown", fontsize=7,
                 ha="left", va="bottom", color="#c44e52")
    return fig, pd.DataFrame(rows)
