"""Coarse strength grades for CI-test p-values (docs/design.md §5.3).

The agent never sees a raw p-value: every verdict comes with a *grade*, the label of the first
bin whose upper bound the p-value does not exceed.  A grade table is a list of
``(upper_p_bound, label)`` pairs with strictly increasing bounds, the last covering ``p = 1``.

Bins are closed on the right (``p <= bound``), matching PC's rule that a test *accepts*
independence only when ``p > alpha``: with the default table and ``alpha = 0.05`` a p-value of
exactly 0.05 is still "weak dependence" and every deletion PC makes is graded "no evidence ...".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["DEFAULT_GRADES", "grade_of", "strength_grade", "validate_grades"]

#: Default grade table; a config may replace it (same shape: list of [bound, label]).
DEFAULT_GRADES: list[tuple[float, str]] = [
    (0.001, "strong dependence"),
    (0.01, "moderate dependence"),
    (0.05, "weak dependence"),
    (0.2, "no evidence (borderline)"),
    (1.0, "no evidence"),
]

# p-values computed in floating point may exceed 1 by rounding; tolerate that much.
_P_TOL = 1e-9


def validate_grades(grades: Sequence) -> tuple[tuple[float, str], ...]:
    """Check a grade table and return it as a tuple of ``(float bound, str label)``.

    Raises ``ValueError`` naming the offending entry when the table is empty, an entry is not a
    ``(bound, label)`` pair, a bound is not a finite positive number, bounds do not strictly
    increase, a label is empty or not a string, or the last bound is below 1.0.
    """
    if isinstance(grades, (str, bytes)) or not isinstance(grades, Sequence) or len(grades) == 0:
        raise ValueError(f"grade table must be a non-empty list of (upper_p_bound, label) pairs, got {grades!r}")
    out: list[tuple[float, str]] = []
    prev = None
    for k, entry in enumerate(grades):
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Sequence) or len(entry) != 2:
            raise ValueError(f"grade entry {k} must be a (upper_p_bound, label) pair, got {entry!r}")
        bound, label = entry
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
            raise ValueError(f"grade entry {k}: upper_p_bound must be a finite number, got {bound!r}")
        bound = float(bound)
        if bound <= 0.0:
            raise ValueError(f"grade entry {k}: upper_p_bound must be > 0, got {bound!r}")
        if prev is not None and bound <= prev:
            raise ValueError(f"grade entry {k}: upper_p_bound {bound!r} does not exceed the previous bound {prev!r}"
                             " (bounds must strictly increase)")
        if not isinstance(label, str) or not label.strip():
            raise ValueError(f"grade entry {k}: label must be a non-empty string, got {label!r}")
        out.append((bound, label))
        prev = bound
    if out[-1][0] < 1.0:
        raise ValueError(f"the last grade bound must cover p = 1.0, got {out[-1][0]!r} (label {out[-1][1]!r})")
    return tuple(out)


def strength_grade(p: float, grades: Sequence = DEFAULT_GRADES) -> str:
    """The coarse grade of p-value ``p``: label of the first bin with ``p <= upper_p_bound``."""
    return grade_of(p, validate_grades(grades))


def grade_of(p: float, table: tuple[tuple[float, str], ...]) -> str:
    """:func:`strength_grade` for a table already checked by :func:`validate_grades`."""
    if isinstance(p, (bool, str, bytes)):
        raise ValueError(f"p-value must be a number, got {p!r}")
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"p-value must be a number, got {p!r}") from None
    if math.isnan(p) or p < 0.0 or p > 1.0 + _P_TOL:
        raise ValueError(f"p-value must lie in [0, 1], got {p!r}")
    for bound, label in table:
        if p <= bound:
            return label
    return table[-1][1]  # only reachable for 1 < p <= 1 + tolerance with a last bound of exactly 1
