"""The router baseline of docs/design.md §4.4: a hand-written adaptive rule that sees only the data.

1. **Screen.** Run PC-Fisher-z at ``alpha``.  For each pair it deleted compute the gap
   dCor(x, y) − |Pearson r(x, y)| on one fixed random subsample of at most ``subsample`` rows
   (distance correlation, equal to the ``dcor`` package's, see :func:`distance_correlation`); a gap ≥ ``gap`` flags the pair as a
   nonlinear dependence that Fisher-z cannot see.
2. **Route.** If the flagged pairs are at least ``tau`` of the deleted pairs, switch to PC-KCI;
   otherwise return PC-Fisher-z's graph.
3. **Re-test (KCI branch).** Start from PC-KCI's graph.  The candidates are the pairs that
   Fisher-z deleted and PC-KCI also left non-adjacent.  Each is re-tested with KCI at its
   Fisher-z deleting set; the p-values are Holm-corrected across all of the instance's Fisher-z
   deletions.  A candidate is restored (as an undirected edge) only if the corrected test
   rejects independence at ``alpha`` *and* no alternative conditioning set implied by the PC-KCI
   graph — the current neighbours of x (without y) and of y (without x), each of at most
   ``max_alternative_size`` variables — gives KCI independence (p > alpha).

Reading of the design (docs/design.md §4.4) recorded here: re-testing PC-KCI's own deletions at their own deleting sets
could never restore anything (the same test on the same data gives the same p > alpha), so the
re-test is of the screened Fisher-z deletions, whose deleting sets KCI has not necessarily seen.
"""

from __future__ import annotations

import numpy as np

from .base import Algorithm, AlgorithmResult, Param, is_pos_int, is_prob, is_seed, register_algorithm

__all__ = ["Router", "distance_correlation", "holm_adjust"]


def distance_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Distance correlation (Szekely et al. 2007; V-statistic), exact, in numpy.

    Equal to ``dcor.distance_correlation(x, y, method="naive")`` (tested).  We do not call dcor
    in the pipeline: importing it compiles numba kernels (6-25 s per process here), and in fresh
    environments two jobs compiling at once aborted (SIGABRT) or failed numba typing.
    """
    def centred(v):
        d = np.abs(v[:, None] - v[None, :])
        return d - d.mean(axis=0) - d.mean(axis=1)[:, None] + d.mean()

    a, b = centred(np.asarray(x, float)), centred(np.asarray(y, float))
    dvar = np.sqrt((a * a).mean() * (b * b).mean())
    return float(np.sqrt(max((a * b).mean(), 0.0) / dvar)) if dvar > 0 else 0.0


def holm_adjust(pvalues) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def _unit_interval(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1


@register_algorithm("router")
class Router(Algorithm):
    """Screen with PC-Fisher-z and distance correlation, route to PC-KCI, re-test with Holm."""

    cost_class = "slow"

    param_spec = {
        "alpha": Param(0.05, is_prob, "a float in (0, 1)", "level of every CI test"),
        "gap": Param(0.15, _unit_interval, "a float in [0, 1]", "dCor - |r| gap that flags a deleted pair"),
        "tau": Param(0.2, _unit_interval, "a float in [0, 1]", "share of flagged deletions that routes to KCI"),
        "subsample": Param(300, is_pos_int, "a positive int", "rows of the fixed screening subsample"),
        "max_alternative_size": Param(4, is_pos_int, "a positive int", "largest alternative conditioning set"),
        "seed": Param(0, is_seed, "an int in [0, 2**32)", "seed of the screening subsample"),
    }

    def screen(self, data: np.ndarray) -> dict:
        """Steps 1-2: PC-Fisher-z, the dCor − |r| gap of each deleted pair, and the branch chosen.

        Returns ``fisherz`` (the PC result), ``flagged`` ((x, y, gap) per flagged deletion),
        ``gaps`` (the gap of every deletion, in log order), ``flagged_share`` and ``branch``
        (``"kci"`` when the flagged share is at least ``tau`` of a non-empty deletion log).
        """
        from heuresis.causal.algorithms.pc import pc
        from heuresis.causal.ci import make_ci_test

        p = self.params
        fz = pc(data, make_ci_test("fisherz", data), float(p["alpha"]))
        n = data.shape[0]
        rng = np.random.default_rng(p["seed"])
        rows = np.sort(rng.choice(n, size=min(n, p["subsample"]), replace=False))
        sub = data[rows]
        gaps, flagged = [], []
        for dl in fz.deletions:
            a, b = sub[:, dl.x], sub[:, dl.y]
            gap = distance_correlation(a, b) - abs(float(np.corrcoef(a, b)[0, 1]))
            gaps.append(gap)
            if gap >= p["gap"]:
                flagged.append((dl.x, dl.y, gap))
        share = len(flagged) / len(fz.deletions) if fz.deletions else 0.0
        branch = "kci" if fz.deletions and share >= p["tau"] else "fisherz"
        return dict(fisherz=fz, flagged=flagged, gaps=gaps, flagged_share=share, branch=branch)

    def _run(self, data: np.ndarray) -> AlgorithmResult:
        from heuresis.causal.algorithms.pc import pc
        from heuresis.causal.ci import make_ci_test
        from heuresis.causal.graph import Relation

        p = self.params
        alpha = float(p["alpha"])
        scr = self.screen(data)
        fz, flagged, share = scr["fisherz"], scr["flagged"], scr["flagged_share"]
        details = {"seed": p["seed"], "n_fisherz_deletions": len(fz.deletions), "n_flagged": len(flagged),
                   "flagged_share": share}
        if scr["branch"] == "fisherz":
            return AlgorithmResult(graph=fz.graph, n_tests=fz.n_tests, details={**details, "branch": "fisherz"})

        kci = make_ci_test("kci", data)
        kc = pc(data, kci, alpha)
        graph = kc.graph.copy()
        skel = kc.graph.skeleton()
        raw = np.array([kci.pvalue(dl.x, dl.y, dl.sepset) for dl in fz.deletions])
        adjusted = holm_adjust(raw)
        restored = []
        for dl, p_adj in zip(fz.deletions, adjusted):
            if skel[dl.x, dl.y] or p_adj > alpha:
                continue
            alternatives = []
            for a, b in ((dl.x, dl.y), (dl.y, dl.x)):
                s = tuple(int(k) for k in np.flatnonzero(skel[a]) if k != b)
                if s != tuple(sorted(dl.sepset)) and len(s) <= p["max_alternative_size"] and s not in alternatives:
                    alternatives.append(s)
            if any(kci.pvalue(dl.x, dl.y, s) > alpha for s in alternatives):
                continue
            graph.set(dl.x, dl.y, Relation.UNDIRECTED)
            restored.append([graph.names[dl.x], graph.names[dl.y]])
        n_tests = fz.n_tests + kci.n_tests
        return AlgorithmResult(graph=graph, n_tests=n_tests,
                               details={**details, "branch": "kci", "restored": restored})
