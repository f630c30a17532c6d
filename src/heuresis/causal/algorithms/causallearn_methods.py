"""FCI and GES from causal-learn.

``fci``
    causal-learn's FCI with its Fisher-z test at ``alpha``.  The PAG is mapped with
    :meth:`heuresis.causal.graph.Graph.from_causallearn`: only a tail-arrow pair (``i --> j``) stays
    directed; bidirected (``<->``) and circle marks (``o->``, ``o-o``) become undirected
    (docs/design.md §4.1).  ``n_tests`` counts the calls to the CI test (skeleton search, possible-d-sep removal
    and the discriminating-path rule), every call counted as in :class:`heuresis.causal.ci.CITest`;
    ``details["n_tests_computed"]`` is the number of distinct tests (causal-learn caches
    p-values).  The counting works by a Fisher-z subclass registered with causal-learn's own CI
    test registry under the name ``heuresis_counting_fisherz``.  The raw PAG endpoint matrix is
    kept in ``details["pag"]`` (causal-learn's encoding: ``pag[j, i] = 1, pag[i, j] = -1`` for
    ``i --> j``; 2 is a circle).

``ges``
    causal-learn's GES with the linear-Gaussian BIC score (``local_score_BIC``; penalty
    ``lambda_value * (|Pa| + 1) * log n``, 0.5 being the standard BIC), mapping the output CPDAG
    ``Record["G"]``.  A score method: ``n_tests = 0``.

Both are deterministic (no randomness).
"""

from __future__ import annotations

import contextlib
import io

import numpy as np

from heuresis.causal.graph import Graph, column_names

from .base import (
    Algorithm,
    AlgorithmResult,
    Param,
    is_opt_pos_int,
    is_pos_float,
    is_prob,
    register_algorithm,
)

__all__ = ["FCI", "GES"]

_COUNTING_TEST = "heuresis_counting_fisherz"
_counting_registered = False


def _register_counting_test() -> None:
    """Register a call-counting Fisher-z test with causal-learn's CI-test registry (once)."""
    global _counting_registered
    if _counting_registered:
        return
    from causallearn.utils.cit import FisherZ, register_ci_test

    class CountingFisherZ(FisherZ):
        """causal-learn's Fisher-z that records calls and cache misses in a ``counter`` dict."""

        def __init__(self, data, counter=None, **kwargs):
            super().__init__(data, **kwargs)
            self._counter = counter if counter is not None else {}
            self._counter.setdefault("calls", 0)
            self._counter.setdefault("computed", 0)

        def __call__(self, X, Y, condition_set=None):
            *_, key = self.get_formatted_XYZ_and_cachekey(X, Y, condition_set)
            self._counter["calls"] += 1
            if key not in self.pvalue_cache:
                self._counter["computed"] += 1
            return super().__call__(X, Y, condition_set)

    register_ci_test(_COUNTING_TEST, CountingFisherZ)
    _counting_registered = True


@register_algorithm("fci")
class FCI(Algorithm):
    """Fast Causal Inference (causal-learn) with Fisher-z; PAG marks other than tail-arrow -> undirected."""

    param_spec = {
        "alpha": Param(0.05, is_prob, "a float in (0, 1)", "significance level of the Fisher-z tests"),
        "depth": Param(None, is_opt_pos_int, "a positive int or None (unlimited)",
                       "largest conditioning set of the adjacency search"),
    }

    def warm_up(self) -> None:
        """Import causal-learn's FCI and register the counting Fisher-z test."""
        import causallearn.search.ConstraintBased.FCI  # noqa: F401

        _register_counting_test()

    def _run(self, data: np.ndarray) -> AlgorithmResult:
        from causallearn.search.ConstraintBased.FCI import fci

        _register_counting_test()
        counter: dict[str, int] = {"calls": 0, "computed": 0}
        depth = self.params["depth"]
        names = column_names(data.shape[1])
        with contextlib.redirect_stdout(io.StringIO()):  # causal-learn prints some orientations
            pag, _ = fci(data, independence_test_method=_COUNTING_TEST, alpha=float(self.params["alpha"]),
                         depth=-1 if depth is None else int(depth), verbose=False, show_progress=False,
                         node_names=names, counter=counter)
        graph = Graph.from_causallearn(pag.graph, names)
        details = {"n_tests_computed": int(counter["computed"]),
                   "pag": np.asarray(pag.graph, dtype=int).tolist()}
        return AlgorithmResult(graph=graph, n_tests=int(counter["calls"]), details=details)


@register_algorithm("ges")
class GES(Algorithm):
    """Greedy Equivalence Search (causal-learn) with the linear-Gaussian BIC score."""

    param_spec = {
        "lambda_value": Param(0.5, is_pos_float, "a positive float",
                              "BIC penalty per parameter in units of log n (0.5 = standard BIC)"),
        "max_parents": Param(None, is_opt_pos_int, "a positive int or None (unlimited)",
                             "largest parent set considered"),
    }

    def warm_up(self) -> None:
        """Import causal-learn's GES."""
        import causallearn.search.ScoreBased.GES  # noqa: F401

    def _run(self, data: np.ndarray) -> AlgorithmResult:
        from causallearn.search.ScoreBased.GES import ges

        names = column_names(data.shape[1])
        rec = ges(data, score_func="local_score_BIC", maxP=self.params["max_parents"], node_names=names,
                  lambda_value=float(self.params["lambda_value"]))
        graph = Graph.from_causallearn(rec["G"].graph, names)
        score = rec.get("score")
        details = {"score": float(np.asarray(score).ravel()[0]) if score is not None else None}
        return AlgorithmResult(graph=graph, n_tests=0, details=details)
