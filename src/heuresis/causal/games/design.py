"""Designs of the games track: the enforced design space and the trap predicate on a design.

A **design** is a mapping ``{component: DEF points, equipment: true/false}``; components left
out get 0 and equipment left out is not fitted.  :class:`DesignSpace` validates designs and
converts them to the integer vectors the simulator uses; :func:`follows_pattern` tests a design
against a scenario's trap pattern.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ABLATION_SEP", "VARIANT_SEP", "DesignError", "DesignSpace", "follows_pattern"]

#: Separates a scenario's name from the disclosure of its ablation: ``antenna_trap~component_hits``
#: (:func:`heuresis.causal.games.causalgame.ablation`).
ABLATION_SEP = "~"
#: Separates a scenario's name from a test variant's index: ``antenna_trap@test0`` (:mod:`heuresis.stages.games.variants`).
VARIANT_SEP = "@test"


class DesignError(ValueError):
    """An invalid design; the message names the offending field."""


# --- designs -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DesignSpace:
    """The enforced action space: per-component caps, equipment costs, one total DEF budget."""

    components: tuple[str, ...]
    caps: tuple[int, ...]
    equipment: tuple[str, ...]
    costs: tuple[int, ...]
    budget: int

    @property
    def n_components(self) -> int:
        """Number of components that take DEF points (the first entries of a design vector)."""
        return len(self.components)

    def validate(self, design: Any) -> dict:
        """The design as a complete mapping, or :class:`DesignError` naming the bad field."""
        if not isinstance(design, Mapping):
            raise DesignError(f"a design must be an object mapping components to DEF points, got {type(design).__name__}")
        out: dict[str, Any] = dict.fromkeys(self.components, 0)
        out.update(dict.fromkeys(self.equipment, False))
        for key, value in design.items():
            if key in self.components:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
                    raise DesignError(f"design field {key!r}: DEF must be a whole number, got {value!r}")
                value = int(value)
                cap = self.caps[self.components.index(key)]
                if value < 0:
                    raise DesignError(f"design field {key!r}: DEF {value} is negative")
                if value > cap:
                    raise DesignError(f"design field {key!r}: DEF {value} exceeds the cap of {cap} for {key}")
                out[key] = value
            elif key in self.equipment:
                if not isinstance(value, bool):
                    raise DesignError(f"design field {key!r}: equipment is fitted (true) or not (false), got {value!r}")
                out[key] = value
            else:
                known = list(self.components) + list(self.equipment)
                raise DesignError(f"design field {key!r}: unknown component or equipment; known: {known}")
        load = self.load(out)
        if load > self.budget:
            parts = " + ".join(f"{k} {v}" for k, v in out.items() if not isinstance(v, bool) and v)
            eq = [f"{e} (cost {c})" for e, c in zip(self.equipment, self.costs) if out[e]]
            raise DesignError(f"design field 'total DEF': {load} exceeds the DEF budget of {self.budget} "
                              f"({parts}{' + ' + ' + '.join(eq) if eq else ''})")
        return out

    def load(self, design: Mapping) -> int:
        """DEF points used, equipment costs included (what the budget and the agility penalty see)."""
        return int(sum(int(design.get(c, 0)) for c in self.components)
                   + sum(k for e, k in zip(self.equipment, self.costs) if design.get(e)))

    def vector(self, design: Mapping) -> np.ndarray:
        """Integer vector: DEF per component, then 0/1 per equipment."""
        d = self.validate(design)
        return np.array([d[c] for c in self.components] + [int(d[e]) for e in self.equipment], dtype=np.int64)

    def design(self, vec: Iterable) -> dict:
        """Decode a design vector (DEF per component, then 0/1 per equipment) into a design mapping; inverse of :meth:`vector`."""
        v = [int(x) for x in vec]
        out: dict[str, Any] = {c: v[k] for k, c in enumerate(self.components)}
        out.update({e: bool(v[self.n_components + k]) for k, e in enumerate(self.equipment)})
        return out

    def is_valid_vector(self, vec: np.ndarray) -> bool:
        """Whether a design vector respects the per-component caps, 0/1 equipment and the total DEF budget."""
        c = self.n_components
        if np.any(vec[:c] < 0) or np.any(vec[:c] > np.array(self.caps)) or np.any((vec[c:] < 0) | (vec[c:] > 1)):
            return False
        return int(vec[:c].sum() + (vec[c:] * np.array(self.costs, dtype=np.int64)).sum()) <= self.budget

    def random(self, rng: np.random.Generator, fill: float | None = None) -> np.ndarray:
        """A random valid design: equipment fitted at random, then DEF points dropped one by one."""
        c = self.n_components
        vec = np.zeros(c + len(self.equipment), dtype=np.int64)
        for k in range(len(self.equipment)):
            vec[c + k] = int(rng.random() < 0.5)
        room = self.budget - int((vec[c:] * np.array(self.costs, dtype=np.int64)).sum())
        if room < 0:
            vec[c:] = 0
            room = self.budget
        total = int(round((rng.uniform(0.4, 1.0) if fill is None else fill) * room))
        caps = np.array(self.caps)
        for _ in range(total):
            free = np.flatnonzero(vec[:c] < caps)
            if free.size == 0:
                break
            vec[rng.choice(free)] += 1
        return vec


def follows_pattern(pattern, design: Mapping) -> bool | None:
    """Whether ``design`` meets every condition of a trap pattern (fields left out count 0, fitted equipment 1).

    A condition with ``in`` holds when its one field's choice (a CausalGame equipment slot) is one of those listed.
    None for a scenario without a trap (``pattern`` None): no design can fall into it.
    """
    if pattern is None:
        return None
    for cond in pattern:
        if "in" in cond:
            if design.get(cond["of"][0]) not in cond["in"]:
                return False
            continue
        total = sum(int(design.get(f) or 0) for f in cond["of"])
        if "at_least" in cond and total < cond["at_least"]:
            return False
        if "at_most" in cond and total > cond["at_most"]:
            return False
    return True
