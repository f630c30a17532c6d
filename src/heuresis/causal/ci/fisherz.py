"""Fisher-z partial-correlation test (same p-values as causal-learn's ``fisherz``)."""
from __future__ import annotations

import math

import numpy as np
from scipy import special

from .base import CITest, register_ci_test

__all__ = ["FisherZ"]

_ONE_MINUS_EPS = 1.0 - np.finfo(float).eps


@register_ci_test("fisherz")
class FisherZ(CITest):
    """Gaussian CI test via partial correlation.

    r is read off the inverse of the correlation submatrix of ``[x, y] + S``;
    ``z = 0.5 log((1+r)/(1-r)) * sqrt(n - |S| - 3)``; two-sided normal p-value.
    """

    def __init__(self, data: np.ndarray) -> None:
        super().__init__(data)
        self.corr = np.corrcoef(self.data.T)

    def _compute(self, x: int, y: int, S: tuple[int, ...]) -> float:
        if self.n_samples - len(S) - 3 < 1:
            raise ValueError(f"fisherz needs n - |S| - 3 >= 1 degrees of freedom; n = {self.n_samples} rows and a "
                             f"conditioning set of {len(S)} leave {self.n_samples - len(S) - 3}")
        var = [x, y, *S]
        sub = self.corr[np.ix_(var, var)]
        try:
            inv = np.linalg.inv(sub)
        except np.linalg.LinAlgError:
            raise ValueError("data correlation matrix is singular; cannot run fisherz") from None
        r = -inv[0, 1] / math.sqrt(abs(inv[0, 0] * inv[1, 1]))
        if abs(r) >= 1.0:
            r = _ONE_MINUS_EPS * float(np.sign(r))
        z = 0.5 * math.log((1 + r) / (1 - r))
        stat = math.sqrt(self.n_samples - len(S) - 3) * abs(z)
        return float(2 * (1 - special.ndtr(abs(stat))))
