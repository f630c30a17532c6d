"""Paired bootstrap intervals over instances (docs/design.md §6).

A gain such as H^r_f = F1(oracle) - F1(BCA_f) is a mean over the same test instances of a
per-instance difference; its interval resamples *instances* (with replacement) and recomputes
the mean difference on each resample, so the pairing is kept.  Percentile intervals, fixed
seed, resample count from the config (default 2,000).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from heuresis.config.loading import schema_default
from heuresis.config.settings import Bootstrap

__all__ = ["LEVEL", "RESAMPLES", "Interval", "bootstrap_mean", "bootstrap_ratio", "bootstrap_settings", "paired_bootstrap",
           "unpaired_bootstrap"]


#: Resamples and level of an interval unless given: the config schema's ``bootstrap`` defaults.
RESAMPLES = schema_default("bootstrap", "resamples")
LEVEL = schema_default("bootstrap", "level")


@dataclass(frozen=True)
class Interval:
    """A mean with its bootstrap percentile interval."""

    estimate: float
    lo: float
    hi: float
    n: int
    resamples: int
    seed: int
    level: float

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        """Return ``{prefix}mean``, ``{prefix}lo``, ``{prefix}hi`` and ``{prefix}n`` as a dict (table columns).

        Its text in a table is :func:`heuresis.artifacts.report.format_interval`'s.
        """
        return {f"{prefix}mean": self.estimate, f"{prefix}lo": self.lo, f"{prefix}hi": self.hi, f"{prefix}n": self.n}


def bootstrap_settings(cfg: Bootstrap | Mapping) -> dict:
    """The keyword arguments of the interval functions from the ``bootstrap`` settings.

    Parameters
    ----------
    cfg
        A :class:`~heuresis.config.settings.Bootstrap`, or a validated ``bootstrap`` section
        (``resamples``, ``seed`` and ``level``; the schema fills in whichever a config leaves out).
    """
    return Bootstrap.coerce(cfg).kwargs()


def bootstrap_mean(values, *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> Interval:
    """Mean of ``values`` with a percentile bootstrap interval.

    NaN values are an error: a missing score must be handled by the caller (dropping an
    instance silently would break the pairing of later comparisons).
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"bootstrap needs a 1-d array of per-instance values, got shape {x.shape}")
    if np.isnan(x).any():
        raise ValueError(f"bootstrap input has {int(np.isnan(x).sum())} NaN value(s)")
    if not 0 < level < 1:
        raise ValueError(f"interval level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"bootstrap resamples must be >= 1, got {resamples}")
    n = len(x)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, resamples, seed, level)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    means = x[idx].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(x.mean()), float(lo), float(hi), n, resamples, seed, level)


def paired_bootstrap(a, b, *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> Interval:
    """Mean of ``a - b`` over paired instances with a percentile bootstrap interval."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs equal shapes, got {a.shape} and {b.shape}")
    return bootstrap_mean(a - b, resamples=resamples, seed=seed, level=level)


def unpaired_bootstrap(a, b, *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> Interval:
    """Mean of ``a`` minus mean of ``b``, resampling the two samples independently.

    For comparison only (tests, docs): it ignores that both were measured on the same instances,
    so on positively correlated scores it is wider than :func:`paired_bootstrap`.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("bootstrap input has NaN values")
    if len(a) == 0 or len(b) == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, resamples, seed, level)
    rng = np.random.default_rng(seed)
    diffs = (a[rng.integers(0, len(a), size=(resamples, len(a)))].mean(axis=1)
             - b[rng.integers(0, len(b), size=(resamples, len(b)))].mean(axis=1))
    alpha = (1 - level) / 2
    lo, hi = np.quantile(diffs, [alpha, 1 - alpha])
    return Interval(float(a.mean() - b.mean()), float(lo), float(hi), len(a), resamples, seed, level)


def bootstrap_ratio(num, den, *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> Interval:
    """Ratio of sums ``sum(num) / sum(den)`` over instances with a percentile bootstrap interval.

    Pooled (micro-averaged) rates such as the recall of wrong deletions, restored / wrongly
    deleted over all instances, resample *instances* and recompute the ratio; a resample whose
    denominator sums to 0 is skipped.  The estimate is NaN when ``sum(den)`` is 0.
    """
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if num.shape != den.shape or num.ndim != 1:
        raise ValueError(f"ratio bootstrap needs two 1-d arrays of equal length, got {num.shape} and {den.shape}")
    n = len(num)
    if n == 0 or den.sum() == 0:
        return Interval(float("nan"), float("nan"), float("nan"), n, resamples, seed, level)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    s_num, s_den = num[idx].sum(axis=1), den[idx].sum(axis=1)
    ok = s_den > 0
    ratios = s_num[ok] / s_den[ok]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return Interval(float(num.sum() / den.sum()), float(lo), float(hi), n, resamples, seed, level)
