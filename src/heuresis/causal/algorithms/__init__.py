"""The algorithm menu of docs/design.md §4.1: one registered :class:`Algorithm` class per method.

=================  ===========================================================  ===========
name               method                                                       n_tests
=================  ===========================================================  ===========
``pc_fisherz``     PC-stable (heuresis.causal.algorithms.pc) with Fisher-z                        CI tests
``pc_kci``         PC-stable (heuresis.causal.algorithms.pc) with KCI                             CI tests
``fci``            FCI (causal-learn), Fisher-z; PAG marks -> undirected         CI tests
``ges``            GES (causal-learn), linear-Gaussian BIC                      0
``direct_lingam``  DirectLiNGAM (lingam)                                        0
``resit``          RESIT additive-noise method (lingam), spline fit/HSIC        0
``notears``        linear NOTEARS (own scipy implementation)                    0
``router``         baseline (docs/design.md §4.4): screen, route to KCI, Holm re-test     CI tests
=================  ===========================================================  ===========

``make_algorithm(name, **params).run(data)`` returns an :class:`AlgorithmResult`.
Importing this package registers every algorithm.
"""

from __future__ import annotations

from . import causallearn_methods, lingam_methods, notears, pc_variants, router  # noqa: F401  (registration)
from .base import ALGORITHMS, Algorithm, AlgorithmResult, Param, make_algorithm, register_algorithm

__all__ = ["ALGORITHMS", "Algorithm", "AlgorithmResult", "Param", "make_algorithm", "register_algorithm"]
