"""Analysis tables (docs/design.md §6-7: Tables 4, 6, 7, 8, 9, 10, 12, 13) from the episode scores.

Every builder takes the episode scores (:mod:`heuresis.stages.analysis.scores`, test split only is
reported) and returns ``(numbers, display)`` like :mod:`heuresis.stages.headroom_targets`: a DataFrame of numbers
for Parquet and one of formatted strings for Markdown and LaTeX.  Conventions:

* a *result* is an agent under one condition (``condition_id``); rows are per result and family
  (families in config order, docs/design.md §3.3) plus ``all`` over families, for the families the result
  has episodes on; the agents are whichever have episodes (offline ones always; LLM agents when
  their episodes exist);
* intervals are 95% paired bootstrap intervals over instances (:mod:`heuresis.causal.bootstrap`), with
  the configured seed and resample count; pooled rates (repair precision and recall, Unsupp) are
  ratios of sums with instances resampled;
* wherever episodes are summarised there is an all-episodes view, a finished-only view, and the
  truncation rate (share of episodes that ended without a submission of the agent's own);
* a cell that cannot be computed is NaN in the numbers (with the reason in ``note``) and says
  why in the display, never 0;
* an episode with status ``failed`` (a harness error, an API error after the client's retries:
  not the agent's doing) is not a result: it is left out of every number and counted per cell,
  ``n_failed`` in the numbers and, when any failed, "failed (not scored)" in the display
  (:func:`counting_failures`);
  a cell whose episodes all failed is a row that says so.  The agent's own failures (no
  submission, a budget reached) are results and stay in the all-episodes view.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from heuresis.artifacts.report import format_interval
from heuresis.causal.bootstrap import Interval, bootstrap_mean, bootstrap_ratio, paired_bootstrap
from heuresis.config.settings import Bootstrap
from heuresis.harness.conditions import condition_label

__all__ = [
    "CONDITION_FIELDS",
    "FAILED",
    "FAILED_COLUMN",
    "GLOBAL",
    "counting_failures",
    "integrity_summary",
    "integrity_text",
    "merge_star",
    "mutual_information",
    "paired_with",
    "results_of",
    "scopes_of",
    "split_failed",
    "table4",
    "table6",
    "table7",
    "table8",
    "table9",
    "table10",
    "table12",
    "table13",
    "test_episodes",
]

GLOBAL = "all"
FAILED = "failed"                       # episode status of an infrastructure failure
FAILED_COLUMN = "failed (not scored)"   # display column of the per-cell count
ALL_FAILED = "n/a: every episode failed (API or harness error); rerun the target to retry"
CONDITION_FIELDS = ("toolbox", "guided", "prompt_level", "target", "budget", "last_turn", "repeat")
NA = float("nan")


# --- helpers -------------------------------------------------------------------------------------

def test_episodes(scores: pd.DataFrame) -> pd.DataFrame:
    """The episodes every table reports: the test split (docs/design.md §2)."""
    return scores[scores["split"] == "test"].reset_index(drop=True)


def split_failed(scores: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(episodes that are results, episodes that failed: status ``failed``)."""
    failed = scores["status"] == FAILED
    return scores[~failed], scores[failed]


def n_failed(failed: pd.DataFrame, agent: str, cond: str, family: str) -> int:
    """Failed episodes of one result (agent x condition) on a family, or on every family (``all``)."""
    sel = (failed["agent"] == agent) & (failed["condition_id"] == cond)
    if family != GLOBAL:
        sel &= failed["family"] == family
    return int(sel.sum())


def counting_failures(per_family: bool, subset: Callable[[pd.DataFrame], pd.DataFrame] = lambda s: s):
    """Wrap a table builder: it sees only episodes that are results; every row gets ``n_failed``.

    ``per_family``: the table has a row per family and ``all`` (else one per result, ``all``);
    ``subset``: the episodes the table reports (Table 8: guided ones), applied to the failures too.
    A result and scope whose episodes all failed gets a row of its own saying so.
    """
    def wrap(builder):
        @functools.wraps(builder)
        def table(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping, agents: Sequence[str] = ()):
            boot = Bootstrap.coerce(boot)
            test = test_episodes(scores)
            ok, failed = split_failed(test)
            failed = subset(failed)
            numbers, display = builder(ok, families, boot, agents)
            if failed.empty:    # the display gets its "failed (not scored)" column only when any failed
                return numbers.assign(n_failed=0), display
            if subset(ok).empty:    # only the "no episodes" placeholder row: replaced by the failures
                numbers, display = numbers.iloc[:0], display.iloc[:0]
            counts = [n_failed(failed, r["agent"], r["condition_id"], r["family"]) for _, r in numbers.iterrows()]
            numbers = numbers.assign(n_failed=counts)
            _insert_failed_column(display, counts)
            have = set(zip(numbers["agent"], numbers["condition_id"], numbers["family"]))
            extra_n, extra_d = [], []
            for agent, cond in results_of(failed, agents):
                part = failed[(failed["agent"] == agent) & (failed["condition_id"] == cond)]
                for scope in (scopes_of(part, families) if per_family else [GLOBAL]):
                    if (agent, cond, scope) in have:
                        continue
                    k = n_failed(failed, agent, cond, scope)
                    r = part.iloc[0]
                    extra_n.append({"agent": agent, "condition_id": cond, "family": scope,
                                    **{f: r[f] for f in CONDITION_FIELDS}, "n": 0, "n_finished": 0, "n_failed": k,
                                    "note": ALL_FAILED})
                    row = dict.fromkeys(display.columns, ALL_FAILED)
                    row.update({c: v for c, v in (("agent", agent), ("condition", cond), ("family", scope),  # type: ignore[misc]
                                                  ("families", ", ".join(dict.fromkeys(part["family"]))),
                                                  ("episodes", 0), (FAILED_COLUMN, k), ("repeat", r["repeat"]),
                                                  ("budget", r["budget"]), ("last turn", r["last_turn"]),
                                                  ("toolbox", r["toolbox"]), ("start", _start(bool(r["guided"]))),
                                                  ("prompt level", r["prompt_level"]),
                                                  ("stated target", r["target"])) if c in display.columns})
                    extra_d.append(row)
            if extra_n:
                numbers = pd.concat([numbers, pd.DataFrame(extra_n)], ignore_index=True)
                display = pd.concat([display, pd.DataFrame(extra_d, columns=display.columns)], ignore_index=True)
            return numbers.reset_index(drop=True), display.reset_index(drop=True)
        return table
    return wrap


def _insert_failed_column(display: pd.DataFrame, counts: Sequence[int]) -> None:
    cols = list(display.columns)
    at = cols.index("episodes") + 1 if "episodes" in cols else len(cols)
    display.insert(at, FAILED_COLUMN, list(counts))


def results_of(scores: pd.DataFrame, agents: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(agent, condition_id) pairs with episodes: agents in config order (others after), conditions sorted."""
    order = {a: k for k, a in enumerate(agents)}
    pairs = scores[["agent", "condition_id"]].drop_duplicates().itertuples(index=False)
    return sorted(((a, c) for a, c in pairs), key=lambda p: (order.get(p[0], len(order)), p[0], p[1]))


def scopes_of(part: pd.DataFrame, families: Sequence[str]) -> list[str]:
    """List the table scopes of ``part``: its families in config order (others after), then :data:`GLOBAL`."""
    present = set(part["family"])
    return [f for f in families if f in present] + sorted(present - set(families)) + [GLOBAL]


def _scope(part: pd.DataFrame, scope: str) -> pd.DataFrame:
    out = part if scope == GLOBAL else part[part["family"] == scope]
    return out.sort_values(["family", "instance"])


def _iv_cols(iv: Interval | None, prefix: str) -> dict:
    if iv is None or iv.n == 0:
        return {prefix: NA, f"{prefix}_lo": NA, f"{prefix}_hi": NA}
    return {prefix: iv.estimate, f"{prefix}_lo": iv.lo, f"{prefix}_hi": iv.hi}


def _share(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.mean()) if len(x) else NA


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.0%}"


def _mean_iv(values, boot: Bootstrap) -> Interval | None:
    v = np.asarray(values, dtype=float)
    return bootstrap_mean(v, **boot.kwargs()) if len(v) else None


def _diff_iv(a, b, boot: Bootstrap) -> Interval | None:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return paired_bootstrap(a, b, **boot.kwargs()) if len(a) else None


def _start(guided: bool) -> str:
    return "guided" if guided else "unguided"


def _base(part: pd.DataFrame, agent: str, cond: str, scope: str) -> dict:
    r = part.iloc[0]
    return dict(agent=agent, condition_id=cond, family=scope, toolbox=r["toolbox"], guided=bool(r["guided"]),
                prompt_level=int(r["prompt_level"]), target=r["target"], budget=r["budget"],
                last_turn=r["last_turn"], repeat=int(r["repeat"]), n=len(part), n_finished=int(part["finished"].sum()),
                truncation_rate=1 - _share(part["finished"]))


def _base_disp(b: Mapping) -> dict:
    return {"agent": b["agent"], "condition": b["condition_id"], "setting": condition_label(b), "family": b["family"],
            "episodes": b["n"], "truncated": _pct(b["truncation_rate"])}


def _no_episodes(what: str, columns: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    note = f"no {what} in this config"
    return (pd.DataFrame([{"agent": "", "condition_id": "", "family": "", "note": note}]),
            pd.DataFrame([{c: (note if k == 0 else "") for k, c in enumerate(columns)}]))


def _rows_by_result(scores: pd.DataFrame, families: Sequence[str], agents: Sequence[str]):
    """(agent, condition_id, scope, part) for every result and scope with episodes."""
    for agent, cond in results_of(scores, agents):
        part = scores[(scores["agent"] == agent) & (scores["condition_id"] == cond)]
        for scope in scopes_of(part, families):
            yield agent, cond, scope, _scope(part, scope)


def paired_with(scores: pd.DataFrame, part: pd.DataFrame, **change) -> pd.DataFrame | None:
    """The counterpart episodes of ``part`` under a condition that differs only in ``change``.

    Same agent, every other condition field equal; returned aligned with ``part`` by (family,
    instance) and restricted to the instances both have (``part`` is filtered alike by the caller
    with the returned index).  None when the counterpart condition has no episodes.
    """
    r = part.iloc[0]
    mask = scores["agent"] == r["agent"]
    for f in CONDITION_FIELDS:
        mask &= scores[f] == change.get(f, r[f])
    other = scores[mask]
    if other.empty:
        return None
    return other.set_index(["family", "instance"])


def paired_diff(scores, part, boot: Bootstrap, column="f1", **change):
    """Interval of part[column] - counterpart[column] on shared instances, or None if no counterpart."""
    other = paired_with(scores, part, **change)
    if other is None:
        return None
    keyed = part.set_index(["family", "instance"])
    shared = keyed.index.intersection(other.index)
    if not len(shared):
        return None
    return paired_bootstrap(keyed.loc[shared, column].to_numpy(float), other.loc[shared, column].to_numpy(float),
                            **boot.kwargs())


# --- trace attribution -------------------------------------------------------------------------
def merge_star(part: pd.DataFrame) -> tuple[int, np.ndarray]:
    """k chosen in hindsight on ``part`` (best mean merge F1; ties: smallest k) and each episode's F1 at it."""
    m = np.vstack(part["merge_f1"].to_numpy()) if len(part) else np.zeros((0, 1))
    k = int(np.argmax(m.mean(axis=0))) + 1
    return k, m[:, k - 1]


def _merge_star_scope(part: pd.DataFrame) -> tuple[str, np.ndarray]:
    """merge* per episode of ``part`` with k chosen per family; the k label."""
    vals = np.empty(len(part))
    ks = []
    fams = part["family"].to_numpy()
    for fam in dict.fromkeys(fams):
        sel = fams == fam
        k, v = merge_star(part[sel])
        vals[sel] = v
        ks.append(k)
    return (str(ks[0]) if len(ks) == 1 else "per family"), vals


@counting_failures(per_family=True)
def table4(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap, agents: Sequence[str] = ()):
    """Trace attribution: agent F1, merge* (k per family in hindsight), agent - merge*, Unsupp."""
    scores = test_episodes(scores)
    cols = ["agent", "condition", "setting", "family", "episodes", "truncated", "F1", "k", "merge*", "agent − merge*",
            "agent − merge* (finished)", "Unsupp"]
    if scores.empty:
        return _no_episodes("episodes", cols)
    rows, disp = [], []
    for agent, cond, scope, part in _rows_by_result(scores, families, agents):
        b = _base(part, agent, cond, scope)
        k, ms = _merge_star_scope(part)
        f1 = part["f1"].to_numpy(float)
        fin = part["finished"].to_numpy(bool)
        gap, gap_fin = _diff_iv(f1, ms, boot), _diff_iv(f1[fin], ms[fin], boot)
        uns = bootstrap_ratio(part["recovered_unsupported"].to_numpy(float), part["recovered"].to_numpy(float),
                              **boot.kwargs())
        note = "" if part["recovered"].sum() else "Unsupp: no wrongly deleted edge restored"
        rows.append({**b, **_iv_cols(_mean_iv(f1, boot), "f1"), "k": k, "merge_star": float(ms.mean()),
                     **_iv_cols(gap, "agent_minus_merge_star"), **_iv_cols(gap_fin, "agent_minus_merge_star_finished"),
                     **_iv_cols(uns, "unsupp"), "recovered": int(part["recovered"].sum()),
                     "recovered_unsupported": int(part["recovered_unsupported"].sum()), "note": note})
        disp.append({**_base_disp(b), "F1": format_interval(_mean_iv(f1, boot)), "k": k,
                     "merge*": f"{ms.mean():.3f}", "agent − merge*": format_interval(gap, signed=True),
                     "agent − merge* (finished)": format_interval(gap_fin, signed=True,
                                                                  missing="n/a: no finished episode"),
                     "Unsupp": format_interval(uns, percent=True, missing="n/a: no wrongly deleted edge restored")})
    return pd.DataFrame(rows), pd.DataFrame(disp)


# --- Table 6 -----------------------------------------------------------------------------------
@counting_failures(per_family=True)
def table6(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap, agents: Sequence[str] = ()):
    """Agent F1, paired Δ^s (vs BCA_g) and Δ^r (vs BCA_f) per family and over all; all vs finished."""
    scores = test_episodes(scores)
    cols = ["agent", "condition", "setting", "family", "episodes", "truncated", "F1", "Δ^s", "Δ^r", "F1 (finished)",
            "Δ^r (finished)"]
    if scores.empty:
        return _no_episodes("test episodes", cols)
    rows, disp = [], []
    for agent, cond, scope, part in _rows_by_result(scores, families, agents):
        b = _base(part, agent, cond, scope)
        fin = part[part["finished"]]
        f1, ds, dr = (_mean_iv(part[c], boot) for c in ("f1", "delta_s", "delta_r"))
        f1_fin, dr_fin = _mean_iv(fin["f1"], boot), _mean_iv(fin["delta_r"], boot)
        rows.append({**b, **_iv_cols(f1, "f1"), **_iv_cols(ds, "delta_s"), **_iv_cols(dr, "delta_r"),
                     **_iv_cols(f1_fin, "f1_finished"), **_iv_cols(dr_fin, "delta_r_finished"),
                     "note": "" if len(fin) else "no finished episode"})
        why = "n/a: no finished episode"
        disp.append({**_base_disp(b), "F1": format_interval(f1), "Δ^s": format_interval(ds, signed=True),
                     "Δ^r": format_interval(dr, signed=True), "F1 (finished)": format_interval(f1_fin, missing=why),
                     "Δ^r (finished)": format_interval(dr_fin, signed=True, missing=why)})
    return pd.DataFrame(rows), pd.DataFrame(disp)


# --- Table 7 -----------------------------------------------------------------------------------
def mutual_information(part: pd.DataFrame) -> float:
    """Plug-in mutual information (bits) between an episode's family and the tool of each of its calls.

    Calls are the samples (``run_algorithm`` split by the unmasked algorithm); NaN with fewer than
    two families or no calls.
    """
    counts: dict[tuple[str, str], int] = {}
    for fam, tc in zip(part["family"], part["tool_counts"]):
        for tool, n in json.loads(tc).items():
            counts[(fam, tool)] = counts.get((fam, tool), 0) + int(n)
    if len({f for f, _ in counts}) < 2:
        return NA
    joint = pd.Series(counts, dtype=float)
    p = joint / joint.sum()
    pf, pt = p.groupby(level=0).sum(), p.groupby(level=1).sum()
    return float(sum(v * math.log2(v / (pf[f] * pt[t])) for (f, t), v in p.items() if v > 0))


@counting_failures(per_family=True)
def table7(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap, agents: Sequence[str] = ()):
    """Gain over the agent's in-episode PC-KCI output (F1, nSHD reduction) and behaviour."""
    scores = test_episodes(scores)
    cols = ["agent", "condition", "setting", "family", "episodes", "truncated", "with PC-KCI output", "F1 − PC-KCI(episode)",
            "F1 − PC-KCI(episode), finished", "nSHD reduction", "shortcut rate", "distinct algorithms",
            "MI(family; tool) [bits]"]
    if scores.empty:
        return _no_episodes("test episodes", cols)
    rows, disp = [], []
    for agent, cond, scope, part in _rows_by_result(scores, families, agents):
        b = _base(part, agent, cond, scope)
        has = part[part["episode_pc"] != ""]
        fin = has[has["finished"]]
        gain = _diff_iv(has["f1"], has["episode_pc_f1"], boot)
        gain_fin = _diff_iv(fin["f1"], fin["episode_pc_f1"], boot)
        red = _diff_iv(has["episode_pc_nshd"], has["nshd"], boot)
        mi = mutual_information(part) if scope == GLOBAL else NA
        why = "n/a: the agent never saw PC-KCI's output in these episodes"
        rows.append({**b, "n_with_episode_pc": len(has), **_iv_cols(gain, "f1_gain"),
                     **_iv_cols(gain_fin, "f1_gain_finished"), **_iv_cols(red, "nshd_reduction"),
                     "shortcut_rate": _share(part["shortcut"]), "distinct_algorithms": float(part["n_algorithms"].mean()),
                     "mutual_information_bits": mi, "note": "" if len(has) else why})
        disp.append({**_base_disp(b), "with PC-KCI output": f"{len(has)}",
                     "F1 − PC-KCI(episode)": format_interval(gain, signed=True, missing=why),
                     "F1 − PC-KCI(episode), finished": format_interval(
                         gain_fin, signed=True, missing=why if not len(has) else "n/a: no finished episode"),
                     "nSHD reduction": format_interval(red, signed=True, missing=why),
                     "shortcut rate": _pct(_share(part["shortcut"])),
                     "distinct algorithms": f"{part['n_algorithms'].mean():.2f}",
                     "MI(family; tool) [bits]": ("—" if scope != GLOBAL else
                                                 "n/a: one family" if math.isnan(mi) else f"{mi:.3f}")})
    return pd.DataFrame(rows), pd.DataFrame(disp)


# --- Table 8 -----------------------------------------------------------------------------------
@counting_failures(per_family=True, subset=lambda s: s[s["guided"].astype(bool)])
def table8(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap, agents: Sequence[str] = ()):
    """Guided condition: repair precision and recall, gain over PC-KCI, guided − unguided, full − minimal."""
    scores = test_episodes(scores)
    guided = scores[scores["guided"].astype(bool)]
    cols = ["agent", "condition", "setting", "family", "episodes", "truncated", "repair precision", "repair recall",
            "F1 − PC-KCI", "F1 − PC-KCI (finished)", "guided − unguided", "full − minimal"]
    if guided.empty:
        return _no_episodes("guided episodes", cols)
    rows, disp = [], []
    for agent, cond, scope, part in _rows_by_result(guided, families, agents):
        b = _base(part, agent, cond, scope)
        rec, wrong = part["recovered"].to_numpy(float), part["n_wrong_deleted"].to_numpy(float)
        restored = rec + part["harmful"].to_numpy(float)
        kw = boot.kwargs()
        prec, recall = bootstrap_ratio(rec, restored, **kw), bootstrap_ratio(rec, wrong, **kw)
        fin = part[part["finished"]]
        gain, gain_fin = _diff_iv(part["f1"], part["pc_kci_f1"], boot), _diff_iv(fin["f1"], fin["pc_kci_f1"], boot)
        base = scores if scope == GLOBAL else scores[scores["family"] == scope]
        gu = paired_diff(base, part, boot, guided=False)
        other = "minimal" if part.iloc[0]["toolbox"] == "full" else "full"
        tb = paired_diff(base, part, boot, toolbox=other)
        if tb is not None and other == "full":  # always report full − minimal
            tb = Interval(0.0 - tb.estimate, 0.0 - tb.hi, 0.0 - tb.lo, tb.n, tb.resamples, tb.seed, tb.level)
        notes = [m for m, ok in (("no unguided counterpart", gu is not None),
                                 (f"no {other}-toolbox counterpart", tb is not None)) if not ok]
        rows.append({**b, **_iv_cols(prec, "repair_precision"), **_iv_cols(recall, "repair_recall"),
                     "recovered": int(rec.sum()), "restored": int(restored.sum()), "wrong_deleted": int(wrong.sum()),
                     **_iv_cols(gain, "gain_over_pc_kci"), **_iv_cols(gain_fin, "gain_over_pc_kci_finished"),
                     **_iv_cols(gu, "guided_minus_unguided"), **_iv_cols(tb, "full_minus_minimal"),
                     "note": "; ".join(notes)})
        disp.append({**_base_disp(b),
                     "repair precision": format_interval(prec, percent=True, missing="n/a: restored no deleted pair"),
                     "repair recall": format_interval(recall, percent=True, missing="n/a: PC-KCI deleted no true edge here"),
                     "F1 − PC-KCI": format_interval(gain, signed=True),
                     "F1 − PC-KCI (finished)": format_interval(gain_fin, signed=True, missing="n/a: no finished episode"),
                     "guided − unguided": format_interval(
                         gu, signed=True, missing="n/a: no unguided episodes of this agent and condition"),
                     "full − minimal": format_interval(
                         tb, signed=True, missing=f"n/a: no {other}-toolbox episodes of this agent and condition")})
    return pd.DataFrame(rows), pd.DataFrame(disp)


# --- Tables 9, 10, 13: over all families ------------------------------------------------------
def _global_rows(scores: pd.DataFrame, agents: Sequence[str], families: Sequence[str]):
    """Yield per result (agent x condition) over all families its episodes and what its global row needs.

    Each item is ``(agent, condition_id, episodes, finished episodes, base columns, families label)``.
    """
    for agent, cond in results_of(scores, agents):
        part = scores[(scores["agent"] == agent) & (scores["condition_id"] == cond)].sort_values(["family", "instance"])
        yield agent, cond, part, part[part["finished"]], _base(part, agent, cond, GLOBAL), _families_label(part, families)


def _all_and_finished(part: pd.DataFrame, fin: pd.DataFrame, column: str, boot: Bootstrap):
    """Mean intervals of ``column`` over all episodes and over the finished ones."""
    return _mean_iv(part[column], boot), _mean_iv(fin[column], boot)


def _families_label(part: pd.DataFrame, families: Sequence[str]) -> str:
    present = set(part["family"])
    return ", ".join([f for f in families if f in present] + sorted(present - set(families)))


@counting_failures(per_family=False)
def table9(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap, agents: Sequence[str] = ()):
    """Prompt level × stated target: Δ^r, share returning PC-KCI's output, share reaching the wall."""
    scores = test_episodes(scores)
    cols = ["agent", "toolbox", "start", "prompt level", "stated target", "budget", "last turn", "families", "episodes",
            "truncated", "Δ^r", "Δ^r (finished)", "returns PC-KCI's output", "reached the wall"]
    if scores.empty:
        return _no_episodes("test episodes", cols)
    rows, disp = [], []
    for agent, _cond, part, fin, b, fams in _global_rows(scores, agents, families):
        dr, dr_fin = _all_and_finished(part, fin, "delta_r", boot)
        rows.append({**b, "families": fams, **_iv_cols(dr, "delta_r"), **_iv_cols(dr_fin, "delta_r_finished"),
                     "returns_pc_output_rate": _share(part["returns_pc_output"]),
                     "wall_rate": _share(part["wall_reached"]), "note": "" if len(fin) else "no finished episode"})
        disp.append({"agent": agent, "toolbox": b["toolbox"], "start": _start(b["guided"]),
                     "prompt level": b["prompt_level"],
                     "stated target": b["target"], "budget": b["budget"], "last turn": b["last_turn"],
                     "families": fams, "episodes": b["n"], "truncated": _pct(b["truncation_rate"]),
                     "Δ^r": format_interval(dr, signed=True),
                     "Δ^r (finished)": format_interval(dr_fin, signed=True, missing="n/a: no finished episode"),
                     "returns PC-KCI's output": _pct(_share(part["returns_pc_output"])),
                     "reached the wall": _pct(_share(part["wall_reached"]))})
    numbers, display = pd.DataFrame(rows), pd.DataFrame(disp)
    if len({(r["prompt_level"], r["target"]) for r in rows}) < 2:
        numbers["note"] = "one prompt level and stated target in this config"
    return numbers, display


@counting_failures(per_family=False)
def table10(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap, agents: Sequence[str] = ()):
    """Budget sweep: Δ^r, wall reached and rescued, unsubmitted, completion tokens, per budget and last turn."""
    scores = test_episodes(scores)
    cols = ["agent", "condition", "setting", "budget", "last turn", "families", "episodes", "truncated", "Δ^r",
            "Δ^r (finished)",
            "reached the wall", "rescued", "unsubmitted", "completion tokens / episode"]
    if scores.empty:
        return _no_episodes("test episodes", cols)
    rows, disp = [], []
    for agent, cond, part, fin, b, fams in _global_rows(scores, agents, families):
        dr, dr_fin = _all_and_finished(part, fin, "delta_r", boot)
        wall, resc, unsub = (int(part[c].sum()) for c in ("wall_reached", "rescued", "unsubmitted"))
        tokens = float(part["tokens_out"].mean())
        offline = part["model"].isna().all()
        rows.append({**b, "families": fams, **_iv_cols(dr, "delta_r"), **_iv_cols(dr_fin, "delta_r_finished"),
                     "wall_reached": wall, "rescued": resc, "rescue_rate": resc / wall if wall else NA,
                     "unsubmitted": unsub, "tokens_out_mean": tokens,
                     "note": "; ".join(n for n, c in (("offline agent: no tokens", offline),
                                                      ("no episode reached the wall", not wall)) if c)})
        disp.append({"agent": agent, "condition": cond, "setting": condition_label(b), "budget": b["budget"],
                     "last turn": b["last_turn"],
                     "families": fams, "episodes": b["n"], "truncated": _pct(b["truncation_rate"]),
                     "Δ^r": format_interval(dr, signed=True),
                     "Δ^r (finished)": format_interval(dr_fin, signed=True, missing="n/a: no finished episode"),
                     "reached the wall": f"{wall} ({wall / b['n']:.0%})",
                     "rescued": f"{resc} of {wall}" if wall else "— (none reached the wall)",
                     "unsubmitted": f"{unsub} ({unsub / b['n']:.0%})",
                     "completion tokens / episode": "— (offline agent)" if offline else f"{tokens:.0f}"})
    return pd.DataFrame(rows), pd.DataFrame(disp)


@counting_failures(per_family=False)
def table13(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap, agents: Sequence[str] = ()):
    """Per-repeat results: F1 over all episodes and over finished ones, wall/rescued/unsubmitted counts."""
    scores = test_episodes(scores)
    cols = ["agent", "condition", "setting", "repeat", "families", "episodes", "finished", "truncated", "F1 (all)",
            "F1 (finished)", "reached the wall", "rescued", "unsubmitted"]
    if scores.empty:
        return _no_episodes("test episodes", cols)
    rows, disp = [], []
    for agent, cond, part, fin, b, fams in _global_rows(scores, agents, families):
        base_cond = cond.rsplit("-r", 1)[0]
        f1, f1_fin = _all_and_finished(part, fin, "f1", boot)
        wall, resc, unsub = (int(part[c].sum()) for c in ("wall_reached", "rescued", "unsubmitted"))
        rows.append({**b, "condition": base_cond, "families": fams, **_iv_cols(f1, "f1_all"),
                     **_iv_cols(f1_fin, "f1_finished"), "wall_reached": wall, "rescued": resc, "unsubmitted": unsub,
                     "note": "" if len(fin) else "no finished episode"})
        disp.append({"agent": agent, "condition": base_cond, "setting": condition_label(b), "repeat": b["repeat"],
                     "families": fams,
                     "episodes": b["n"], "finished": b["n_finished"], "truncated": _pct(b["truncation_rate"]),
                     "F1 (all)": format_interval(f1),
                     "F1 (finished)": format_interval(f1_fin, missing="n/a: no finished episode"),
                     "reached the wall": wall, "rescued": resc, "unsubmitted": unsub})
    numbers, display = pd.DataFrame(rows), pd.DataFrame(disp)
    order = np.lexsort((numbers["repeat"], numbers["condition"], numbers["agent"].map(
        {a: k for k, a in enumerate(dict.fromkeys([*agents, *numbers["agent"]]))})))
    return numbers.iloc[order].reset_index(drop=True), display.iloc[order].reset_index(drop=True)


# --- Table 12: harness disclosure --------------------------------------------------------------
def integrity_summary(eps: pd.DataFrame) -> tuple[int, dict[str, int]]:
    """Integrity events of some episodes: the total and the count per category (heuresis.harness.integrity)."""
    from heuresis.harness.integrity import CATEGORIES

    per: dict[str, int] = {}
    for counts in (eps["integrity_counts"] if "integrity_counts" in eps else ()):
        for k, v in json.loads(counts or "{}").items():
            per[k] = per.get(k, 0) + int(v)
    per = {k: per[k] for k in (*CATEGORIES, *sorted(set(per) - set(CATEGORIES))) if per.get(k)}
    return sum(per.values()), per


def integrity_text(events: int, n: int, per: Mapping[str, int]) -> str:
    """``0``, or ``1.50 / episode (probe 2, refused_tool 1)``."""
    if not n:
        return "—"
    if not events:
        return "0"
    return f"{events / n:.2f} / episode ({', '.join(f'{k} {v}' for k, v in per.items())})"


_SECRET = ("key", "secret", "token", "password")


def _settings(spec: Mapping) -> str:
    keep = {k: v for k, v in spec.items() if k not in ("kind", "model", "provider", "class")
            and not any(s in k.lower() for s in _SECRET)}
    return json.dumps(keep, sort_keys=True, default=str) if keep else "—"


def _implementation(agent: str, spec: Mapping) -> str:
    """``built-in``, or a plugin's class and the installed distribution holding it (as installed now)."""
    from heuresis.agents import agent_origin
    from heuresis.harness.protocol import AgentSpecError

    try:
        origin = agent_origin(agent, spec)
    except AgentSpecError as exc:
        return f"not importable here ({exc})"
    if origin is None:
        return "built-in"
    dist = f"{origin['distribution']} {origin['version']}" if origin["distribution"] else "no installed distribution"
    return f"{origin['class']} ({dist})"


def _limits(b: Mapping) -> str:
    return (f"tests {b['test_units_factor']}× PC-KCI, {b['turns']} turns, {b['output_tokens_per_turn']} tokens/turn, "
            f"{b['algorithm_calls']} algorithm calls, {b['wall_seconds']} s")


def _families_instances(cell: Mapping) -> str:
    """``lg, wild`` — or ``lg (16), wild (16)`` when the cell records its instances per family."""
    inst = cell.get("instances") or {}
    return ", ".join(f"{f} ({inst[f]})" if f in inst else f for f in cell["families"])


def table12(scores: pd.DataFrame, cells: Sequence[Mapping], agent_specs: Mapping[str, Mapping],
            budgets: Mapping[str, Mapping]):
    """Build the harness disclosure table: per configured result its model, settings, budgets and isolation.

    Columns: kind, implementation (``built-in``, or a plugin agent's class and the name and
    version of the installed distribution that holds it), model, provider, settings, budgets,
    last-turn setting, and the code tool's isolation over its episodes (``code_isolation``:
    value (episodes), ...), the replies cut at the output cap with neither text nor a tool call
    (``empty_length_replies``: a reasoning model that spent the turn's whole cap thinking) and the
    episodes' cost (``cost_usd``; null when some price is unknown), and the agent's integrity events
    (``integrity_events``, per episode and per category: refused or suspicious actions,
    :mod:`heuresis.harness.integrity`) over the episodes that are results.

    ``cells`` are the configured conditions (``agent``, ``condition_id``, condition fields,
    ``families``, ``split``, optionally ``instances`` per family, shown after each family); offline
    agents show model "—" and provider "offline"; an LLM agent's
    model and provider come from its config entry (and the episodes, where they exist).
    """
    from heuresis.agents import AGENTS

    rows, disp = [], []
    for c in cells:
        spec = dict(agent_specs.get(c["agent"], {}))
        kind = spec.get("kind", "?")
        eps = scores[(scores["agent"] == c["agent"]) & (scores["condition_id"] == c["condition_id"])]
        offline = kind in AGENTS and bool(getattr(AGENTS.lookup(kind), "privileged", False))
        model = spec.get("model") or next((m for m in eps["model"].dropna()), None) if len(eps) else spec.get("model")
        provider = spec.get("provider") or (next((p for p in eps["provider"].dropna()), None) if len(eps) else None)
        if offline:
            model, provider = "—", "offline"
        elif provider is None and model and "/" in str(model):
            provider = str(model).split("/", 1)[0]
        bud = budgets.get(c["budget"], {})
        fams = _families_instances(c)
        eps, failed = split_failed(eps)
        n_fin = int(eps["finished"].sum()) if len(eps) else 0
        note = "" if len(eps) else "no episodes yet"
        if len(failed):
            note = f"{len(failed)} failed (API or harness error), not scored; rerun the target to retry"

        empty = int(eps["empty_length_replies"].fillna(0).sum()) if len(eps) and "empty_length_replies" in eps else 0
        cost = float(eps["cost"].sum()) if len(eps) and "cost" in eps and eps["cost"].notna().all() else None
        iso = ", ".join(f"{k} ({v})" for k, v in eps["code_isolation"].value_counts().sort_index().items()) \
            if len(eps) and "code_isolation" in eps else "—"
        impl = _implementation(c["agent"], spec) if "kind" in spec else "—"
        events, per_category = integrity_summary(eps)
        row = dict(agent=c["agent"], kind=kind, implementation=impl, model=model or "—", provider=provider or "—",
                   settings=_settings(spec),
                   condition_id=c["condition_id"], toolbox=c["toolbox"], guided=bool(c["guided"]),
                   prompt_level=int(c["prompt_level"]), target=c["target"], budget=c["budget"],
                   budget_limits=json.dumps(dict(bud), sort_keys=True), last_turn=c["last_turn"],
                   repeat=int(c["repeat"]), families=fams, split=c["split"], episodes=len(eps),
                   finished=n_fin, n_failed=len(failed), code_isolation=iso, empty_length_replies=empty,
                   cost_usd=cost, integrity_events=events,
                   integrity_per_episode=events / len(eps) if len(eps) else NA,
                   integrity_counts=json.dumps(per_category), note=note)
        rows.append(row)
        disp.append({"agent": c["agent"], "kind": kind, "implementation": impl, "model": row["model"],
                     "provider": row["provider"],
                     "settings": row["settings"], "toolbox": c["toolbox"], "start": _start(bool(c["guided"])),
                     "prompt": f"level {c['prompt_level']}, target {c['target']}",
                     "budget": f"{c['budget']}: {_limits(bud)}" if bud else c["budget"], "last turn": c["last_turn"],
                     "repeat": c["repeat"], "families": row["families"], "code tool isolation": iso,
                     "episodes": f"{len(eps)} ({n_fin} finished)" if len(eps) else "no episodes yet",
                     "replies cut empty": empty, "integrity events": integrity_text(events, len(eps), per_category),
                     "cost": "—" if cost is None else f"${cost:,.2f}",
                     FAILED_COLUMN: len(failed)})
    if not any(r["n_failed"] for r in rows):
        disp = [{k: v for k, v in d.items() if k != FAILED_COLUMN} for d in disp]
    if not rows:
        return _no_episodes("configured episode conditions", ["agent", "kind", "model", "provider"])
    return pd.DataFrame(rows), pd.DataFrame(disp)
