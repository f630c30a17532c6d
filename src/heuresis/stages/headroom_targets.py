"""Paper tables and figures built from the headroom stage's per-instance test scores.

Each builder returns ``(numbers, display)``: a DataFrame of numbers (written to Parquet) and one
of formatted strings (Markdown and LaTeX).  Every interval is a 95% paired bootstrap over test
instances (:mod:`heuresis.causal.bootstrap`) with the configured seed and resample count.  Families
appear in config order (docs/design.md §3.3: lg, anm, hetero, wild, mixed, gauntlet), then ``all``.

A reference run that crashed on a test instance is scored as the empty graph
(:data:`heuresis.stages.headroom.BCA_FAILURE_RULE`) and counted: every cell built on such runs says
"(k failed)" in the display and the numbers carry the count (``*_n_failed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from heuresis.artifacts.report import format_interval, pyplot
from heuresis.causal.bootstrap import Interval, bootstrap_mean, paired_bootstrap
from heuresis.causal.foundation import foundation_model
from heuresis.config.settings import Bootstrap
from heuresis.stages.headroom import BCA_FAILURE_RULE, GLOBAL
from heuresis.stages.instances import family_kinds

__all__ = ["FLOORS", "figure1c", "method_f1", "method_failed", "table2", "table3", "table11"]

FLOORS = ("empty", "complete", "pc_kci", "random_restoration", "oracle")
FAILED_RUNS = "failed test runs (scored as the empty graph)"   # Table 3's column when any run failed



def method_f1(scores: pd.DataFrame, family: str, method: str) -> np.ndarray:
    """Per-instance F1 of a method on a family (``all``: every family), in instance order."""
    part = scores[scores["method"] == method]
    if family != GLOBAL:
        part = part[part["family"] == family]
    return part.sort_values(["family", "instance"])["f1"].to_numpy()


def method_failed(scores: pd.DataFrame, family: str, method: str) -> int:
    """Test instances of a family (``all``: every family) on which the run behind a method failed."""
    part = scores[scores["method"] == method]
    if family != GLOBAL:
        part = part[part["family"] == family]
    return int(part["failed"].sum())


def _failed_note(k: int) -> str:
    return f" ({k} failed)" if k else ""


def _scopes(families: Sequence[str]) -> list[str]:
    return [*families, GLOBAL]


def _f(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def _iv(iv: Interval, prefix: str) -> dict:
    return {f"{prefix}": iv.estimate, f"{prefix}_lo": iv.lo, f"{prefix}_hi": iv.hi}


def table2(scores: pd.DataFrame, families: Mapping[str, Mapping], boot: Bootstrap | Mapping) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Families, their mechanism kinds, PC-KCI's wrong deletions, and the oracle's gain over PC-KCI."""
    boot = Bootstrap.coerce(boot)
    rows, disp = [], []
    for fam in _scopes(list(families)):
        pc = scores[(scores["method"] == "pc_kci") & ((scores["family"] == fam) | (fam == GLOBAL))]
        n_failed = int(pc["failed"].sum())
        wrong = pc.loc[~pc["failed"].astype(bool), "n_wrong_deletions"].to_numpy(dtype=float)  # no log if failed
        gain = paired_bootstrap(method_f1(scores, fam, "oracle"), method_f1(scores, fam, "pc_kci"), **boot.kwargs())
        kinds = family_kinds(families[fam]) if fam != GLOBAL else ""
        mean = float(wrong.mean()) if len(wrong) else np.nan
        share = float(np.mean(wrong == 0)) if len(wrong) else np.nan
        rows.append(dict(family=fam, kinds=kinds, n_instances=len(pc), n_failed=n_failed, wrong_deletions_mean=mean,
                         share_without_wrong_deletion=share, **_iv(gain, "oracle_minus_pc_kci"),
                         note=(f"PC-KCI failed on {n_failed} test instance(s): no deletion log there (left out of "
                               "the deletion counts); PC-KCI and the oracle score the empty graph there"
                               if n_failed else "")))
        disp.append({"family": fam, "mechanism kinds": kinds or "(all families)",
                     "test instances": f"{len(pc)}" + (f" (PC-KCI failed on {n_failed})" if n_failed else ""),
                     "wrongly deleted edges / instance": _f(mean, 2),
                     "instances with none": "n/a" if np.isnan(share) else f"{share:.0%}",
                     "oracle − PC-KCI (F1)": format_interval(gain, signed=True) + _failed_note(n_failed)})
    return pd.DataFrame(rows), pd.DataFrame(disp)


def _routed_share(scores: pd.DataFrame, family: str, router: str) -> float:
    """Share of a family's (``all``: every) test instances the router's screen sent to PC-KCI."""
    part = scores[scores["method"] == router]
    if family != GLOBAL:
        part = part[part["family"] == family]
    if "routed_to_kci" not in part or part["routed_to_kci"].isna().all():
        return float("nan")
    return float(part["routed_to_kci"].mean())


def table3(scores: pd.DataFrame, selection: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping,
           foundation: Sequence[str] = (), router: str = "router") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build Table 3, the reference points: F1 of BCA_f and the oracle, and both headrooms.

    Also the router's residual gain and the share of instances its screen routed to PC-KCI.
    """
    boot = Bootstrap.coerce(boot)
    chosen = selection[selection["chosen"]].set_index("scope")["algorithm"]
    has_router = router in set(scores["method"])
    rows, disp = [], []
    for fam in _scopes(families):
        bca_g, bca_f, oracle = (method_f1(scores, fam, m) for m in ("bca_g", "bca_f", "oracle"))
        hs = paired_bootstrap(bca_f, bca_g, **boot.kwargs())
        hr = paired_bootstrap(oracle, bca_f, **boot.kwargs())
        rg = paired_bootstrap(method_f1(scores, fam, router), bca_f, **boot.kwargs()) if has_router else None
        nf = {m: method_failed(scores, fam, m)
              for m in ("bca_g", "bca_f", "oracle", *((router,) if has_router else ()))}
        dev_scope = selection[(selection["scope"] == (fam if fam != GLOBAL else GLOBAL)) & selection["chosen"]]
        dev_failed = int(dev_scope["dev_n_failed"].sum()) if "dev_n_failed" in dev_scope else 0
        failures = "; ".join(f"{label} {nf[m]}" for m, label in (("bca_g", "BCA_g"), ("bca_f", "BCA_f"),
                                                                 ("oracle", "oracle"), (router, "router"))
                             if nf.get(m))
        routed = _routed_share(scores, fam, router) if has_router else np.nan
        rows.append(dict(row=fam, kind="family" if fam != GLOBAL else "all", bca_g=chosen.get(GLOBAL, ""),
                         bca_f=chosen.get(fam, "") if fam != GLOBAL else "per family",
                         f1_bca_f=float(bca_f.mean()), f1_oracle=float(oracle.mean()), **_iv(hs, "h_s"),
                         **_iv(hr, "h_r"), **(_iv(rg, "router_delta_r") if rg else
                                              {"router_delta_r": np.nan, "router_delta_r_lo": np.nan,
                                               "router_delta_r_hi": np.nan}),
                         bca_g_n_failed=nf["bca_g"], bca_f_n_failed=nf["bca_f"], oracle_n_failed=nf["oracle"],
                         router_n_failed=nf.get(router, 0), chosen_dev_n_failed=dev_failed, router_kci_share=routed,
                         note=f"failed runs: {BCA_FAILURE_RULE}" if failures or dev_failed else ""))
        disp.append({"family": fam, "BCA_f": (chosen.get(fam, "per family") if fam != GLOBAL else "per family")
                     + (f" ({dev_failed} failed on dev)" if dev_failed else ""),
                     "F1(BCA_f)": _f(bca_f.mean()) + _failed_note(nf["bca_f"]),
                     "F1(oracle)": _f(oracle.mean()) + _failed_note(nf["oracle"]),
                     "H^s": format_interval(hs, signed=True),
                     "H^r": format_interval(hr, signed=True),
                     "router Δ^r": (format_interval(rg, signed=True) + _failed_note(nf.get(router, 0))) if rg else
                     "not run (no router in references.baselines)",
                     "router → KCI": "—" if np.isnan(routed) else f"{routed:.0%}",
                     FAILED_RUNS: failures or "none"})
    for name in foundation:
        model = foundation_model(name)
        _ok, reason = model.availability()
        rows.append(dict(row=model.title, kind="foundation_model", bca_g="", bca_f="", f1_bca_f=np.nan,
                         f1_oracle=np.nan, h_s=np.nan, h_s_lo=np.nan, h_s_hi=np.nan, h_r=np.nan, h_r_lo=np.nan,
                         h_r_hi=np.nan, router_delta_r=np.nan, router_delta_r_lo=np.nan, router_delta_r_hi=np.nan,
                         bca_g_n_failed=0, bca_f_n_failed=0, oracle_n_failed=0, router_n_failed=0,
                         chosen_dev_n_failed=0, router_kci_share=np.nan, note=reason))
        disp.append({"family": model.title, "BCA_f": "—", "F1(BCA_f)": "—", "F1(oracle)": "—", "H^s": "—", "H^r": "—",
                     "router Δ^r": reason, "router → KCI": "—", FAILED_RUNS: "—"})
    numbers, display = pd.DataFrame(rows), pd.DataFrame(disp)
    if not (numbers[["bca_g_n_failed", "bca_f_n_failed", "oracle_n_failed", "router_n_failed",
                     "chosen_dev_n_failed"]].to_numpy().any()):
        display = display.drop(columns=FAILED_RUNS)   # the column appears when any run failed
    return numbers, display


def table11(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Trivial floors per family: F1 of empty, complete, PC-KCI, random restoration, oracle."""
    boot = Bootstrap.coerce(boot)
    labels = {"empty": "empty", "complete": "complete", "pc_kci": "PC-KCI", "random_restoration": "random restoration",
              "oracle": "oracle"}
    rows, disp = [], []
    for fam in _scopes(families):
        r, d = {"family": fam}, {"family": fam}
        for m in FLOORS:
            iv = bootstrap_mean(method_f1(scores, fam, m), **boot.kwargs())
            k = method_failed(scores, fam, m)
            r.update(_iv(iv, m), **{f"{m}_n_failed": k})
            d[labels[m]] = format_interval(iv) + _failed_note(k)
        rows.append(r)
        disp.append(d)
    return pd.DataFrame(rows), pd.DataFrame(disp)


def figure1c(scores: pd.DataFrame, families: Sequence[str], boot: Bootstrap | Mapping):
    """F1 per family of BCA_g, BCA_f and the oracle with bootstrap intervals; returns (fig, numbers)."""
    boot = Bootstrap.coerce(boot)
    plt = pyplot()

    methods = (("bca_g", "BCA$_g$", "#9e9e9e"), ("bca_f", "BCA$_f$", "#4c72b0"), ("oracle", "oracle", "#dd8452"))
    scopes = _scopes(families)
    rows = []
    fig, ax = plt.subplots(figsize=(1.2 * len(scopes) + 2, 3.2))
    width = 0.8 / len(methods)
    for k, (m, label, color) in enumerate(methods):
        ivs = [bootstrap_mean(method_f1(scores, fam, m), **boot.kwargs()) for fam in scopes]
        x = np.arange(len(scopes)) + (k - 1) * width
        est = np.array([iv.estimate for iv in ivs])
        err = np.array([[iv.estimate - iv.lo for iv in ivs], [iv.hi - iv.estimate for iv in ivs]])
        ax.bar(x, est, width, yerr=err, capsize=2, label=label, color=color)
        failed = [method_failed(scores, fam, m) for fam in scopes]
        for xi, k in zip(x, failed):
            if k:   # a crashed run is scored as the empty graph: say so on the bar
                ax.text(xi, 0.02, f"{k} failed", rotation=90, ha="center", va="bottom", fontsize=6, color="#c44e52")
        rows += [dict(family=fam, method=m, **_iv(iv, "f1"), n_failed=k) for fam, iv, k in zip(scopes, ivs, failed)]
    ax.set_xticks(np.arange(len(scopes)), scopes)
    ax.set_ylabel("adjacency F1 (test, mean ± 95% CI)")
    ax.set_xlabel("mechanism family")
    ax.set_ylim(0, 1.05)
    ax.legend(frameon=False, ncol=3, loc="upper center", bbox_to_anchor=(0.5, 1.15))
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig, pd.DataFrame(rows)
