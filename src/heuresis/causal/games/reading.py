"""The correlational reading of observed drones (what a naive analyst concludes).

It is the rule of the scripted trap-follower and the yardstick of the trap tests:

* when destroyed drones are visible (no selection bias): armour the components whose **share of
  the hits** is larger among destroyed drones than among returned ones (the hits that go with
  losses);
* when only returned drones are visible: armour the components where the returned drones show
  the **most hits** ("armour where the damage is" — the survivorship error Wald corrected).

The DEF budget is spread in proportion to the positive scores, capped per component (excess
redistributed), rounded by largest remainder; no equipment is fitted, since no per-drone column
shows it.  :func:`reading_scores` gives the scores, :func:`correlational_design` the design.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from heuresis.causal.games.scenario import DesignSpace

__all__ = ["allocate", "correlational_design", "reading_scores"]


def reading_scores(space: DesignSpace, rows: Iterable[Mapping]) -> tuple[np.ndarray, str]:
    """Per-component scores and the mode (``contrast`` or ``survivor_damage``)."""
    rows = list(rows)
    comps = space.components
    if not rows:
        return np.zeros(len(comps)), "none"
    H = np.array([[r.get(f"hits_{c}", 0) for c in comps] for r in rows], float)
    status = [r.get("status") for r in rows]
    lost = np.array([str(s).lower() == "destroyed" for s in status])
    back = np.array([str(s).lower() == "returned" for s in status])
    if lost.any() and back.any():
        share = lambda m: H[m].sum(0) / max(H[m].sum(), 1.0)  # noqa: E731
        return share(lost) - share(back), "contrast"
    return H.mean(0), "survivor_damage"


def allocate(space: DesignSpace, scores: np.ndarray) -> dict:
    """Spread the DEF budget over components in proportion to the positive scores, within caps."""
    caps = np.array(space.caps, float)
    w = np.clip(np.asarray(scores, float), 0, None)
    alloc = np.zeros(len(caps))
    room = float(min(space.budget, caps.sum()))
    free = (w > 0) & (caps > 0)
    while room > 1e-9 and free.any():
        share = room * w * free / w[free].sum()
        over = free & (alloc + share > caps)
        if not over.any():
            alloc += share
            break
        alloc[over] = caps[over]
        free &= ~over
        room = float(min(space.budget, caps.sum())) - alloc.sum()
    base = np.floor(alloc + 1e-9).astype(int)
    left = int(round(alloc.sum())) - int(base.sum())
    for k in np.argsort(-(alloc - base))[:max(left, 0)]:
        if base[k] < caps[k]:
            base[k] += 1
    out = {c: int(v) for c, v in zip(space.components, base)}
    out.update(dict.fromkeys(space.equipment, False))
    return space.validate(out)


def correlational_design(space: DesignSpace, rows: Iterable[Mapping]) -> dict:
    """The design the correlational reading of ``rows`` recommends."""
    scores, _ = reading_scores(space, rows)
    return allocate(space, scores)
