"""Scripted repairs of PC-KCI from its deletion log (docs/design.md §4.4, Figure 8).

For every pair PC-KCI deleted on an instance, nine **signals** are computed; each is oriented so
that a *higher* value means "more likely a wrong deletion" (the direction is fixed here, before
any label is seen, so an AUC below 0.5 is informative):

From the log and PC-KCI's output graph alone (no new test):

``log_pvalue``            p-value of the deleting test (oriented: −p; borderline deletions first)
``log_set_size``          size of the deleting set (+)
``log_common_neighbours`` neighbours x and y share in PC-KCI's output (+)
``log_stale_set``         members of the deleting set adjacent to neither x nor y in the output (+):
                          the set was drawn from neighbours that PC later deleted

Needing new computations on the data:

``min_alt_pvalue``        minimum KCI p over the alternative conditioning sets the PC graph implies (−)
``max_alt_pvalue``        maximum KCI p over the same sets (−): no alternative separates the pair
``fisherz_pvalue``        Fisher-z p at the deleting set (−): a linear test sees dependence KCI missed
``stability``             share of row subsamples on which KCI at the deleting set finds dependence (+)
``residual_dcor``         distance correlation of x and y after a linear regression on the deleting
                          set (+), on a fixed subsample of at most ``dcor_rows`` rows

The **alternative sets** of a pair (x, y) are the subsets, of size at most ``max_set``, of
adj(x) \\ {y} and of adj(y) \\ {x} in PC-KCI's output graph, other than the deleting set, in order
of size then lexicographically, at most ``max_alternatives`` of them.  When there is none, both
alternative signals fall back to the deleting test's p-value.

Then (:func:`evaluate`): each signal's **AUC** for ranking wrong deletions (label: the hidden
``wrong`` of the log) on test; the **F1 change** from restoring, per instance, every deleted pair
whose signal reaches a threshold **chosen on dev** (the mean dev F1 change is maximised over
the dev signal values, "restore nothing" included), applied on test; the same for the ideal
oracle (restores every wrong deletion); and a **gradient-boosted classifier** on all nine
signals, trained for each family on the dev pairs of the *other* families (family held out),
with its probability threshold chosen on dev by the same held-out scheme.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa

from heuresis.artifacts.io import read_table, write_table
from heuresis.artifacts.report import format_interval, pyplot
from heuresis.artifacts.schemas import REPAIR_FEATURES
from heuresis.config.settings import Bootstrap
from heuresis.stages.instances import load_data, load_truth, stable_key
from heuresis.stages.references import graph_of, labelled_log, load_references

__all__ = [
    "CLASSIFIER",
    "DIRECTION",
    "LOG_SIGNALS",
    "ORACLE",
    "SIGNALS",
    "TEST_SIGNALS",
    "auc",
    "build_features",
    "choose_threshold",
    "classifier_scores",
    "config_errors",
    "evaluate",
    "f1_after",
    "figure8",
    "load_features",
    "pair_features",
    "summary_display",
    "threshold_gain",
]

LOG_SIGNALS = ("log_pvalue", "log_set_size", "log_common_neighbours", "log_stale_set")
TEST_SIGNALS = ("min_alt_pvalue", "max_alt_pvalue", "fisherz_pvalue", "stability", "residual_dcor")
SIGNALS = LOG_SIGNALS + TEST_SIGNALS
#: +1: a higher raw value means "more likely wrong"; -1: a lower one does.
DIRECTION = {"log_pvalue": -1, "log_set_size": 1, "log_common_neighbours": 1, "log_stale_set": 1,
             "min_alt_pvalue": -1, "max_alt_pvalue": -1, "fisherz_pvalue": -1, "stability": 1, "residual_dcor": 1}
CLASSIFIER = "classifier"
ORACLE = "oracle"


# --- features ---------------------------------------------------------------------------------
def alternative_sets(skel: np.ndarray, x: int, y: int, deleting: Sequence[int], max_set: int,
                     max_alternatives: int) -> list[tuple[int, ...]]:
    """Conditioning sets the PC graph implies for (x, y), other than the deleting set (see module doc)."""
    out: list[tuple[int, ...]] = []
    own = tuple(sorted(deleting))
    for size in range(max_set + 1):
        for a, b in ((x, y), (y, x)):
            nbrs = [int(k) for k in np.flatnonzero(skel[a]) if k != b]
            for s in combinations(nbrs, size):
                if s != own and s not in out:
                    out.append(s)
    return out[:max_alternatives]


def _residual(v: np.ndarray, z: np.ndarray) -> np.ndarray:
    if z.shape[1] == 0:
        return v - v.mean()
    design = np.column_stack([np.ones(len(v)), z])
    coef, *_ = np.linalg.lstsq(design, v, rcond=None)
    return v - design @ coef


def pair_features(data: np.ndarray, graph, deletions: Sequence[Mapping], *, alpha: float, max_set: int,
                  max_alternatives: int, subsamples: int, subsample_fraction: float, dcor_rows: int,
                  rng: np.random.Generator) -> list[dict]:
    """The nine raw signals (and the KCI tests spent) for every deletion of one instance.

    ``deletions`` are deletion-log records with column names; ``graph`` is PC-KCI's output.
    """
    from heuresis.causal.algorithms.router import distance_correlation
    from heuresis.causal.ci import make_ci_test

    names = graph.names
    index = {v: k for k, v in enumerate(names)}
    skel = graph.skeleton()
    n = data.shape[0]
    kci = make_ci_test("kci", data)
    fz = make_ci_test("fisherz", data)
    m = max(4, int(round(subsample_fraction * n)))
    subs = [make_ci_test("kci", data[np.sort(rng.choice(n, size=m, replace=False))]) for _ in range(subsamples)]
    dcor_sub = np.sort(rng.choice(n, size=min(n, dcor_rows), replace=False))
    rows = []
    for dl in deletions:
        x, y = index[dl["x"]], index[dl["y"]]
        S = tuple(sorted(index[v] for v in dl["sepset"]))
        common = int(np.sum(skel[x] & skel[y]))
        stale = int(sum(1 for s in S if not skel[x, s] and not skel[y, s]))
        before = kci.n_computed + sum(t.n_computed for t in subs)
        alts = alternative_sets(skel, x, y, S, max_set, max_alternatives)
        ps = [float(kci.pvalue(x, y, s)) for s in alts]
        p_del = float(dl["pvalue"])
        stab = float(np.mean([t.pvalue(x, y, S) <= alpha for t in subs])) if subs else float("nan")
        z = data[np.ix_(dcor_sub, list(S))]  # type: ignore[arg-type]
        rd = distance_correlation(_residual(data[dcor_sub, x], z), _residual(data[dcor_sub, y], z))
        rows.append(dict(x=dl["x"], y=dl["y"], sepset=list(dl["sepset"]), level=int(dl["level"]),
                         grade=dl["grade"], wrong=bool(dl["wrong"]), log_pvalue=p_del, log_set_size=float(len(S)),
                         log_common_neighbours=float(common), log_stale_set=float(stale),
                         min_alt_pvalue=min(ps) if ps else p_del, max_alt_pvalue=max(ps) if ps else p_del,
                         n_alternatives=len(alts), fisherz_pvalue=float(fz.pvalue(x, y, S)), stability=stab,
                         residual_dcor=float(rd),
                         n_new_tests=kci.n_computed + sum(t.n_computed for t in subs) - before))
    return rows


def build_features(pc_ref_path, data_dir, truth_dir, family: str, split: str, settings: Mapping, *,
                   log: Callable[[str], None] = lambda m: None) -> pd.DataFrame:
    """Feature rows of every deleted pair of every instance in one PC-KCI references shard.

    Each row also carries the instance's PC-KCI confusion counts (``pc_tp``, ``pc_fp``, ``pc_fn``
    against the true skeleton), so F1 after any restoration follows from the labels alone.  An
    instance without any deletion gets one row with ``is_pair`` False (it still counts, with no
    change, in every mean over instances).
    """
    refs = load_references([pc_ref_path])
    truths = load_truth(truth_dir)
    out = []
    for row in refs.sort_values("instance").to_dict("records"):
        i = int(row["instance"])
        graph = graph_of(row)
        true_skel = truths[i].dag.skeleton()
        est = graph.skeleton()
        iu = np.triu_indices(graph.d, 1)
        tp = int(np.sum(true_skel[iu] & est[iu]))
        fp = int(np.sum(~true_skel[iu] & est[iu]))
        fn = int(np.sum(true_skel[iu] & ~est[iu]))
        base = dict(family=family, split=split, instance=i, pc_tp=tp, pc_fp=fp, pc_fn=fn)
        dels = labelled_log(row["deletions"], truths[i].dag)     # the hidden label, from the truth
        if row["status"] != "ok":
            raise ValueError(f"PC-KCI failed on {row['instance_id']} ({row['error']}); no deletion log to repair")
        rng = np.random.default_rng(np.random.SeedSequence(int(settings["seed"]), spawn_key=(
            stable_key(family), stable_key(split), i)))
        data = load_data(data_dir, i)
        feats = pair_features(data, graph, dels, alpha=settings["alpha"], max_set=settings["max_set"],
                              max_alternatives=settings["max_alternatives"], subsamples=settings["subsamples"],
                              subsample_fraction=settings["subsample_fraction"], dcor_rows=settings["dcor_rows"],
                              rng=rng)
        if not feats:
            out.append({**base, **{c: None for c in REPAIR_FEATURES.schema.names if c not in base}, "is_pair": False})
        for f in feats:
            out.append({**base, **f, "is_pair": True})
        log(f"repairs {family}/{split}/{i:04d}: {len(dels)} deletions ({sum(d['wrong'] for d in dels)} wrong), "
            f"{sum(f['n_new_tests'] for f in feats)} new KCI tests")
    cols = {c: [r.get(c) for r in out] for c in REPAIR_FEATURES.schema.names}
    return pd.DataFrame(cols)


def write_features(df: pd.DataFrame, path, meta: Mapping) -> None:
    """Write the repair signals of one shard as a ``repair_features`` artifact (atomically, with ``meta``)."""
    write_table(pa.Table.from_pandas(df, schema=REPAIR_FEATURES.schema, preserve_index=False), path,
                REPAIR_FEATURES, meta)


def load_features(paths: Sequence) -> pd.DataFrame:
    """Read and concatenate ``repair_features`` artifacts (an empty frame of the schema for no paths)."""
    frames = [read_table(p, REPAIR_FEATURES).to_pandas() for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=REPAIR_FEATURES.schema.names)


# --- evaluation -------------------------------------------------------------------------------
def auc(scores, labels) -> float:
    """Area under the ROC curve of ``scores`` for ``labels`` (Mann-Whitney U; ties count one half).

    NaN when only one class is present.
    """
    from scipy.stats import rankdata

    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    n1 = int(y.sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(s)  # average ranks over ties
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def _f1(tp, fp, fn):
    tp, fp, fn = (np.asarray(v, dtype=float) for v in (tp, fp, fn))
    denom = 2 * tp + fp + fn
    return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 1.0)


def f1_after(tp, fp, fn, restored_wrong, restored_right):
    """F1 after restoring ``restored_wrong`` true and ``restored_right`` false pairs as edges."""
    a, b = np.asarray(restored_wrong), np.asarray(restored_right)
    return _f1(np.asarray(tp) + a, np.asarray(fp) + b, np.asarray(fn) - a)


class _Instances:
    """Row-to-instance index and per-instance PC-KCI counts of a features frame (for fast gains)."""

    def __init__(self, df: pd.DataFrame) -> None:
        key = df["family"].astype(str) + "\0" + df["instance"].astype(str)
        self.keys, self.codes = np.unique(key.to_numpy(), return_inverse=True)
        first = pd.DataFrame({"code": self.codes, "tp": df["pc_tp"].to_numpy(), "fp": df["pc_fp"].to_numpy(),
                              "fn": df["pc_fn"].to_numpy()}).groupby("code").first().sort_index()
        self.tp, self.fp, self.fn = (first[c].to_numpy(dtype=float) for c in ("tp", "fp", "fn"))
        self.pairs = df["is_pair"].to_numpy(dtype=bool)
        self.wrong = df["wrong"].fillna(False).to_numpy(dtype=bool) & self.pairs
        self.before = _f1(self.tp, self.fp, self.fn)

    def gain(self, restore: np.ndarray) -> np.ndarray:
        """Per-instance F1 change when restoring the rows flagged in ``restore``."""
        r = np.asarray(restore, dtype=bool) & self.pairs
        k = len(self.keys)
        a = np.bincount(self.codes, weights=r & self.wrong, minlength=k)
        b = np.bincount(self.codes, weights=r & ~self.wrong, minlength=k)
        return f1_after(self.tp, self.fp, self.fn, a, b) - self.before


def choose_threshold(scores, df: pd.DataFrame, max_candidates: int = 1000) -> float:
    """The threshold t maximising the mean F1 change of restoring pairs with score >= t on ``df``.

    Candidates: the distinct scores (at most ``max_candidates`` quantiles of them) and +inf
    ("restore nothing", change 0); ties go to the higher threshold (fewer restorations).
    """
    s = np.asarray(scores, dtype=float)
    inst = _Instances(df)
    cand = np.unique(s[inst.pairs & np.isfinite(s)])
    if len(cand) > max_candidates:
        cand = np.unique(np.quantile(cand, np.linspace(0, 1, max_candidates)))
    best_t, best = math.inf, 0.0
    for t in cand[::-1]:  # high to low, so ties keep the higher threshold
        g = float(inst.gain(s >= t).mean())
        if g > best + 1e-12:
            best_t, best = float(t), g
    return best_t


def threshold_gain(scores, df: pd.DataFrame, threshold: float) -> pd.Series:
    """Per-instance F1 change of restoring the pairs whose score is >= ``threshold`` (NaN never restores)."""
    inst = _Instances(df)
    return pd.Series(inst.gain(np.asarray(scores, dtype=float) >= threshold), index=inst.keys)


def oriented(df: pd.DataFrame, signal: str) -> np.ndarray:
    """Signal values oriented so that higher means more likely wrong."""
    return DIRECTION[signal] * df[signal].to_numpy(dtype=float)


def classifier_scores(dev: pd.DataFrame, target: pd.DataFrame, *, seed: int,
                      params: Mapping | None = None) -> np.ndarray:
    """Return the probability of a wrong deletion for each of ``target``'s rows.

    Each family is predicted by a gradient-boosted classifier trained on ``dev``'s pairs of the
    *other* families.
    """
    from sklearn.ensemble import GradientBoostingClassifier

    out = np.full(len(target), np.nan)
    dpairs = dev[dev["is_pair"]]
    for fam in sorted(target["family"].unique()):
        train = dpairs[dpairs["family"] != fam]
        rows = (target["family"] == fam).to_numpy() & target["is_pair"].to_numpy(dtype=bool)
        if not rows.any():
            continue
        labels = train["wrong"].to_numpy(dtype=bool)
        if len(np.unique(labels)) < 2:
            raise ValueError(f"classifier for family {fam!r}: the dev pairs of the other families hold only "
                             f"one class ({len(train)} pairs); more dev instances or families are needed")
        clf = GradientBoostingClassifier(random_state=seed, **dict(params or {}))
        clf.fit(train[list(SIGNALS)].to_numpy(dtype=float), labels)
        out[rows] = clf.predict_proba(target.loc[rows, list(SIGNALS)].to_numpy(dtype=float))[:, 1]
    return out


def _boot_auc(scores, df, resamples, seed, level):
    """AUC with a bootstrap interval over instances (instances resampled with replacement)."""
    key = df["family"].astype(str) + "/" + df["instance"].astype(str)
    groups = {k: np.flatnonzero(key.to_numpy() == k) for k in pd.unique(key)}
    keys = list(groups)
    labels = df["wrong"].fillna(False).to_numpy(dtype=bool)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(resamples):
        pick = rng.integers(0, len(keys), size=len(keys))
        idx = np.concatenate([groups[keys[k]] for k in pick])
        v = auc(scores[idx], labels[idx])
        if not np.isnan(v):
            vals.append(v)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(vals, [alpha, 1 - alpha]) if vals else (np.nan, np.nan)
    return float(lo), float(hi)


def evaluate(features: pd.DataFrame, boot: Bootstrap | Mapping, *, seed: int,
             classifier_params: Mapping | None = None) -> pd.DataFrame:
    """Per signal (and classifier, oracle): test AUC, dev-chosen threshold and test F1 change.

    One row per method with ``auc``, ``auc_lo``/``auc_hi`` (bootstrap over test instances),
    ``threshold`` (chosen on dev, on the oriented scale: restore when oriented score >= it;
    ``inf``: restore nothing), ``threshold_raw`` (the same in the signal's own units: restore when
    the raw value is >= it for a + signal, <= it for a − signal), ``f1_change`` with its bootstrap interval over test instances,
    ``restored`` and ``restored_wrong`` (pairs restored on test) and ``kind`` (log, test,
    classifier, oracle).
    """
    from heuresis.causal.bootstrap import bootstrap_mean

    dev = features[features["split"] == "dev"].reset_index(drop=True)
    test = features[features["split"] == "test"].reset_index(drop=True)
    if dev.empty or test.empty:
        raise ValueError("scripted repairs need dev and test features (instances.n_dev and n_test > 0)")
    kw = Bootstrap.coerce(boot).kwargs()
    tpairs = test["is_pair"].to_numpy(dtype=bool)
    labels = test["wrong"].fillna(False).to_numpy(dtype=bool)
    rows = []

    def add(method, kind, dev_scores, test_scores, note=""):
        t = choose_threshold(dev_scores, dev)
        gain = threshold_gain(test_scores, test, t)
        iv = bootstrap_mean(gain.to_numpy(), **kw)
        sub = test[tpairs]
        a = auc(test_scores[tpairs], labels[tpairs])
        lo, hi = _boot_auc(test_scores[tpairs], sub, kw["resamples"], kw["seed"], kw["level"])
        restored = (test_scores >= t) & tpairs
        raw = DIRECTION[method] * t if method in DIRECTION else t
        rows.append(dict(method=method, kind=kind, auc=a, auc_lo=lo, auc_hi=hi, threshold=t, threshold_raw=raw,
                         f1_change=iv.estimate,
                         f1_change_lo=iv.lo, f1_change_hi=iv.hi, restored=int(restored.sum()),
                         restored_wrong=int((restored & labels).sum()), n_pairs=int(tpairs.sum()),
                         n_wrong=int(labels[tpairs].sum()), n_instances=iv.n, note=note))

    for s in SIGNALS:
        add(s, "log" if s in LOG_SIGNALS else "test", oriented(dev, s), oriented(test, s))
    if dev["family"].nunique() >= 2:
        # dev scores by the same held-out scheme, so the threshold never sees the scored family
        add(CLASSIFIER, "classifier", classifier_scores(dev, dev, seed=seed, params=classifier_params),
            classifier_scores(dev, test, seed=seed, params=classifier_params))
    else:
        rows.append(dict(method=CLASSIFIER, kind="classifier", note="needs at least two families to hold one out"))
    oracle = threshold_gain(labels.astype(float), test, 1.0)
    iv = bootstrap_mean(oracle.to_numpy(), **kw)
    rows.append(dict(method=ORACLE, kind="oracle", auc=1.0, auc_lo=1.0, auc_hi=1.0, threshold=1.0, threshold_raw=1.0,
                     f1_change=iv.estimate, f1_change_lo=iv.lo, f1_change_hi=iv.hi,
                     restored=int(labels[tpairs].sum()), restored_wrong=int(labels[tpairs].sum()),
                     n_pairs=int(tpairs.sum()), n_wrong=int(labels[tpairs].sum()), n_instances=iv.n,
                     note="restores every wrong deletion (hidden label)"))
    return pd.DataFrame(rows)


def _rule(r: Mapping) -> str:
    t = r.get("threshold")
    if t is None or pd.isna(t):
        return "n/a"
    if np.isinf(t):
        return "never (restoring nothing was best on dev)"
    if r["method"] == ORACLE:
        return "wrong (hidden label)"
    if r["method"] == CLASSIFIER:
        return f"P(wrong) >= {t:.3g}"
    return f"{'<=' if DIRECTION[r['method']] < 0 else '>='} {r['threshold_raw']:.3g}"


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """Formatted rows of :func:`evaluate`'s summary for Markdown and LaTeX."""
    out = []
    for r in summary.to_dict("records"):
        out.append({"signal": _LABELS.get(r["method"], r["method"]), "needs": {"log": "log only", "test": "new tests",
                    "classifier": "all signals", "oracle": "hidden label"}[r["kind"]],
                    "AUC (test)": format_interval(r.get("auc"), r.get("auc_lo"), r.get("auc_hi")),
                    "restore when (dev threshold)": _rule(r),
                    "restored (wrong) on test": "n/a" if pd.isna(r.get("restored")) else
                    f"{int(r['restored'])} ({int(r['restored_wrong'])})",
                    "F1 change (test)": format_interval(r.get("f1_change"), r.get("f1_change_lo"), r.get("f1_change_hi"),
                                                        signed=True),
                    "note": r.get("note") or ""})
    return pd.DataFrame(out)


_LABELS = {"log_pvalue": "p of deleting test", "log_set_size": "size of deleting set",
           "log_common_neighbours": "common neighbours", "log_stale_set": "stale members of set",
           "min_alt_pvalue": "min KCI p, alternative sets", "max_alt_pvalue": "max KCI p, alternative sets",
           "fisherz_pvalue": "Fisher-z p at deleting set", "stability": "KCI dependence on subsamples",
           "residual_dcor": "residual distance corr.", CLASSIFIER: "gradient boosting (family held out)",
           ORACLE: "oracle"}
_KIND_COLORS = {"log": "#4c72b0", "test": "#55a868", "classifier": "#8172b2", "oracle": "#dd8452"}


def figure8(summary: pd.DataFrame):
    """(a) test AUC per signal; (b) test F1 change per signal (threshold from dev) vs the oracle."""
    plt = pyplot()

    s = summary[summary["f1_change"].notna()].reset_index(drop=True)
    y = np.arange(len(s))[::-1]
    labels = [_LABELS.get(m, m) for m in s["method"]]
    colors = [_KIND_COLORS[k] for k in s["kind"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.5, 0.32 * len(s) + 1.6), sharey=True)
    a = s[s["kind"] != "oracle"]
    ya = y[: len(a)]
    ax1.barh(ya, a["auc"], xerr=[a["auc"] - a["auc_lo"], a["auc_hi"] - a["auc"]], color=colors[: len(a)], capsize=2)
    ax1.axvline(0.5, color="0.4", lw=0.8, ls="--")
    ax1.set_xlim(0, 1)
    ax1.set_xlabel("AUC for wrong deletions (test, 95% CI)")
    ax1.set_title("(a) ranking PC-KCI's wrong deletions", fontsize=9, loc="left")
    ax1.set_yticks(y, labels, fontsize=8)
    if (s["kind"] == "oracle").any():
        ax1.annotate("1 by definition", (0.02, y[-1]), va="center", fontsize=7, color="0.3")
    err = [s["f1_change"] - s["f1_change_lo"], s["f1_change_hi"] - s["f1_change"]]
    ax2.barh(y, s["f1_change"], xerr=err, color=colors, capsize=2)
    for yy, r in zip(y, s.to_dict("records")):  # how many pairs the dev-chosen rule restored on test
        ax2.annotate(f"{int(r['restored'])} restored, {int(r['restored_wrong'])} wrong", (0, yy), xytext=(3, 6),
                     textcoords="offset points", fontsize=6, color="0.3")
    ax2.axvline(0, color="0.2", lw=0.8)
    ax2.set_xlabel("F1 change over PC-KCI (test, mean ± 95% CI)")
    ax2.set_title("(b) restoring above a dev-chosen threshold", fontsize=9, loc="left")
    from matplotlib.patches import Patch

    handles = [Patch(color=c, label=t) for t, c in (("log only", _KIND_COLORS["log"]),
                                                      ("new tests", _KIND_COLORS["test"]),
                                                      ("classifier", _KIND_COLORS["classifier"]),
                                                      ("oracle", _KIND_COLORS["oracle"]))]
    fig.legend(handles=handles, ncol=4, frameon=False, loc="upper center", fontsize=8, bbox_to_anchor=(0.55, 1.02))
    for ax in (ax1, ax2):
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of ``repairs``: Figure 8's classifier parameters are GradientBoostingClassifier's.

    ``random_state`` is not one of them (it is ``repairs.seed``); the values are checked by
    scikit-learn itself, as ``fit`` would check them later.
    """
    params = config["repairs"]["classifier"]
    if not params:
        return []
    from sklearn.ensemble import GradientBoostingClassifier

    known = set(GradientBoostingClassifier().get_params()) - {"random_state"}
    msgs = [f"config key repairs.classifier.{k}: not a GradientBoostingClassifier parameter "
            f"(random_state is repairs.seed); known: {sorted(known)}" for k in params if k not in known]
    if not msgs:
        try:   # scikit-learn's own check of the values (what fit() would raise, later)
            GradientBoostingClassifier(**params)._validate_params()
        except AttributeError:   # a scikit-learn without parameter declarations: checked at fit
            pass
        except (ValueError, TypeError) as exc:
            msgs.append(f"config key repairs.classifier: {exc}")
    return msgs
