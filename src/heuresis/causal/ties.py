"""Which results a paired comparison separates: a sign-flip permutation test, Holm's correction, ranks with ties.

Used by both leaderboards (the observational track's, over instances; the games', over scenarios):
two results are compared on the units both have by the mean of their paired differences.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["EXACT_MAX", "holm", "sign_flip_p", "significance_ranks"]

#: Up to this many paired units the permutation test enumerates every sign pattern (exact p).
EXACT_MAX = 14


def sign_flip_p(diff: Sequence[float], permutations: int, seed: int) -> float:
    """Two-sided p-value of a zero mean of paired differences ``diff`` by flipping their signs.

    Exact (every one of the 2^n patterns) for n <= :data:`EXACT_MAX`; else ``permutations`` random
    patterns drawn with ``seed``, counted with the observed one, ``(1 + k) / (1 + permutations)``.
    """
    d = np.asarray(diff, dtype=float)
    n = len(d)
    if n == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-12 * max(1.0, float(np.abs(d).sum()))   # ties of floating sums count as extreme
    if n <= EXACT_MAX:
        signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)
        return float(np.mean(np.abs(signs @ d) >= observed))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, n))
    return float((1 + np.sum(np.abs(signs @ d) >= observed)) / (1 + permutations))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the order given."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def significance_ranks(f1_by_result: Mapping[str, pd.Series], alpha: float, permutations: int, seed: int):
    """Ranks and ties of results from their per-unit scores (Series indexed by unit: instance, scenario).

    Returns ``(rank, tied_with, pairs)``: rank = 1 + the results significantly better (Holm-adjusted
    p < ``alpha``, positive mean difference on shared instances); ``tied_with``: for each result the
    results it is not separated from (pairs without a shared instance are neither); ``pairs``: one
    dict per compared pair (a, b, shared instances, mean difference a − b, p, Holm-adjusted p).
    """
    names = list(f1_by_result)
    pairs: list[dict[str, Any]] = []
    for k, (a, b) in enumerate(itertools.combinations(names, 2)):
        shared = f1_by_result[a].index.intersection(f1_by_result[b].index)
        if not len(shared):
            continue
        d = f1_by_result[a].loc[shared].to_numpy(float) - f1_by_result[b].loc[shared].to_numpy(float)
        pairs.append({"a": a, "b": b, "n": len(shared), "mean_diff": float(d.mean()),
                      "p": sign_flip_p(d, permutations, seed + k)})
    for pair, adj in zip(pairs, holm([p["p"] for p in pairs])):
        pair["p_holm"] = adj
    better = dict.fromkeys(names, 0)
    tied: dict[str, list[str]] = {n: [] for n in names}
    for p in pairs:
        if p["p_holm"] < alpha and p["mean_diff"] != 0:
            better[p["b"] if p["mean_diff"] > 0 else p["a"]] += 1
        else:
            tied[p["a"]].append(p["b"])
            tied[p["b"]].append(p["a"])
    return {n: 1 + better[n] for n in names}, tied, pairs
