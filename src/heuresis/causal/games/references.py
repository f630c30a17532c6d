"""References fixed before any agent plays (docs/games.md §3): optimum, trap, standard, threshold.

* **Optimum** — ``max_a E[Y]`` at Stage 2, exact (:mod:`heuresis.causal.games.exact`) over the
  lattice of DEF steps of 5 (caps and the DEF budget enforced, every equipment choice and flight
  profile), with the runner-up stated; and over the full integer lattice (every integer DEF, the
  agent's action space) with an upper bound (:mod:`heuresis.causal.games.exact_integer`).
* **Trap**, **standard** and every published strategy of the scenario file: exact Stage-2
  survival too.  The optimum, trap, standard and strategies are then **flown** on
  ``search.verify_fleets`` fresh Stage-2 fleets (paired; mean and 95% interval over fleets), and
  the trap's paired margin (standard minus trap) is stated.
* **Threshold** — the scenario's published ``victory_threshold``, kept as published (a scenario
  that cannot be won is a documented fact, not an error).

Every seed derives from the scenario's ``seed`` through :func:`seed_of`, so a reference is the
same on every machine and adding a scenario changes no other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from heuresis.causal.games import causalgame as cg
from heuresis.causal.games import exact, exact_integer

__all__ = ["References", "compute_references", "integer_optimum", "scenario_references", "seed_of", "with_integer"]


def seed_of(*parts) -> np.random.SeedSequence:
    """A SeedSequence from any parts (ints and strings), stable across runs and machines."""
    text = "/".join(map(str, parts)).encode()
    return np.random.SeedSequence(list(np.frombuffer(hashlib.sha256(text).digest()[:16], dtype=np.uint32)))


def _interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% normal interval over fleets."""
    m = float(x.mean())
    half = 1.96 * float(x.std(ddof=1)) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
    return m, m - half, m + half


@dataclass
class References:
    """The references of one scenario, one row of the ``game_references`` artifact.

    Survival rates are fractions of a Stage-2 fleet that return.  ``optimum``, ``trap`` and
    ``standard`` are means over ``verify_fleets`` fresh fleets of ``fleet_size`` drones, each with
    a 95% interval (``*_lo``, ``*_hi``); ``trap_margin`` is standard minus trap on the same fleets
    (paired).  ``optimum_search`` (= ``optimum_exact``) is the exact maximum over the lattice of
    DEF steps of ``lattice_step`` (``optimum_method`` ``exact``, ``optimum_se`` 0), a lattice of
    ``lattice_size`` designs of which ``designs_evaluated`` were valued exactly; ``runner_up`` is
    the best lattice design with another DEF vector.  ``better_share_ub``, ``sample_size`` and
    ``search_drones`` are 0 (no sampled search).  ``threshold`` is the published victory threshold
    (``threshold_rule`` ``fixed``, ``threshold_margin`` 0); ``trap_pattern`` the scenario's trap
    predicate (a scenario without a trap, as weather_noise: ``trap_design`` and ``trap_pattern``
    None, the trap's values NaN); ``seed`` the scenario seed every draw derives from;
    ``trap_exact`` and ``standard_exact`` the exact values of those designs.  Over the full
    integer lattice (every integer DEF within the caps and the budget, every equipment choice and
    flight profile; ``integer_lattice_size`` designs): ``integer_design`` and its exact survival
    ``integer_optimum``, and ``integer_bound``, a rigorous upper bound on the survival of every
    integer design, equal to ``integer_optimum`` when ``integer_exact``; all None when computed
    with ``integer=False``.
    """

    scenario: str
    family: str
    variant: str
    optimum_design: dict
    optimum_search: float
    optimum_se: float
    optimum_method: str
    lattice_size: int
    runner_up: float
    better_share_ub: float
    sample_size: int
    optimum: float
    optimum_lo: float
    optimum_hi: float
    trap_design: dict | None
    trap_pattern: list | None
    trap: float
    trap_lo: float
    trap_hi: float
    standard_design: dict
    standard: float
    standard_lo: float
    standard_hi: float
    trap_margin: float
    trap_margin_lo: float
    trap_margin_hi: float
    threshold: float
    threshold_rule: str
    threshold_margin: float
    search_drones: int
    designs_evaluated: int
    verify_fleets: int
    fleet_size: int
    seed: int
    strategies: list = field(default_factory=list)
    optimum_exact: float | None = None
    trap_exact: float | None = None
    standard_exact: float | None = None
    lattice_step: int | None = None
    integer_optimum: float | None = None
    integer_design: dict | None = None
    integer_bound: float | None = None
    integer_exact: bool | None = None
    integer_lattice_size: int | None = None

    def as_dict(self) -> dict:
        """Return the references as a plain dict (designs still as mappings)."""
        return asdict(self)


#: Stage-2 optima over the integer lattice already computed in this process, by Stage-2 model (:func:`_stage2_key`).
_INTEGER: dict[str, exact_integer.IntegerOptimum] = {}

def _stage2_key(scn: cg.Scenario) -> str:
    """The scenario's Stage-2 model as canonical JSON (the variants of a file share it)."""
    return json.dumps({k: scn.spec.get(k) for k in exact.STAGE2_KEYS}, sort_keys=True, default=str)


def integer_optimum(scn: cg.Scenario, start: Mapping | None = None) -> exact_integer.IntegerOptimum:
    """:func:`~heuresis.causal.games.exact_integer.integer_optimum` at Stage 2, once per Stage-2 model in a process.

    ``start``: a design to start the search from (the lattice's optimum).
    """
    key = _stage2_key(scn)
    if key not in _INTEGER:
        _INTEGER[key] = exact_integer.integer_optimum(scn, start=start, stage=2)
    return _INTEGER[key]


def with_integer(scn: cg.Scenario, ref: References) -> References:
    """``ref`` (computed with ``integer=False``) with the optimum over the full integer lattice added."""
    io = integer_optimum(scn, ref.optimum_design)
    return replace(ref, integer_optimum=io.value, integer_design=scn.design(io.design), integer_bound=io.bound,
                   integer_exact=io.exact, integer_lattice_size=io.lattice_size)


def compute_references(scn: cg.Scenario, *, fleets: int | None = None, step: int = exact.LATTICE_STEP,
                          integer: bool = True) -> References:
    """The references of a CausalGame scenario: its exact optimum, trap and standard, verified on the same fleets.

    The optimum is :func:`~heuresis.causal.games.exact.exact_optimum` over the lattice of DEF
    steps of ``step`` (caps and DEF budget enforced, every equipment choice and flight profile);
    ``runner_up`` is the best lattice design with another DEF vector. With ``integer`` (the
    default) the optimum over the full integer lattice and its bound are computed too
    (:func:`integer_optimum`; not flown: the fleets fly the lattice's optimum). The trap, the standard
    design and every published strategy get their exact Stage-2 survival too. The optimum, trap,
    standard and strategies are then flown on ``fleets`` fresh Stage-2 fleets of ``stage2_fleet``
    drones (paired): the exact values fall inside those intervals up to sampling error. A
    strategy is ``inside`` when its exact survival lies in the published range (or the range a
    listed divergence gives). The threshold is the scenario's published ``victory_threshold``.
    """
    fleets = int(fleets or 10)
    seed = int(scn["seed"])
    opt = exact.exact_optimum(scn, step=step, stage=2)
    size = int(scn.budgets["stage2_fleet"])
    named = scn.spec.get("strategies") or {}
    trap = scn.spec.get("trap_design")     # None: a scenario without a trap (weather_noise); its columns are NaN
    best, standard = scn.design(opt.design), scn.design(scn.spec["standard_design"])
    designs = [best, None if trap is None else scn.design(trap, False), standard,
               *(scn.design(v["design"], False) for v in named.values())]
    exact_values = [opt.value, *(np.nan if d is None else exact.exact_survival(scn, d) for d in designs[1:])]

    def survivals(d):
        if d is None:
            return [np.nan] * fleets
        return [cg.fly(scn, d, size, np.random.default_rng(seed_of(seed, scn.name, "verify", f)), stage=2,
                       enforce_budget=False).survival for f in range(fleets)]

    ver = np.array([survivals(d) for d in designs])
    strategies = []
    for (key, v), d, row, ex in zip(named.items(), designs[3:], ver[3:], exact_values[3:]):
        m, lo, hi = _interval(row)
        div = v.get("divergence") or {}
        rng_ok = div.get("ours", v["expected"])        # a listed divergence states the range our model gives
        strategies.append({"strategy": key, "design": d, "published": v.get("published", ""),
                           "expected": list(v["expected"]), "over_budget": bool(v.get("over_budget", False)),
                           "exact": ex, "survival": m, "survival_lo": lo, "survival_hi": hi,
                           "inside": bool(rng_ok[0] <= ex <= rng_ok[1]), "divergence": " ".join(
                               str(div.get("reason", "")).split())})
    (om, olo, ohi), (tm, tlo, thi), (sm, slo, shi) = (_interval(r) for r in ver[:3])
    dm, dlo, dhi = _interval(ver[2] - ver[1])
    ref = References(scn.name, scn.family, scn.spec["variant"], best, opt.value, 0.0, "exact", opt.lattice_size,
                     opt.runner_up, 0.0, 0, om, olo, ohi, designs[1], scn.spec.get("trap_pattern"),
                     tm, tlo, thi, standard, sm, slo, shi, dm, dlo, dhi, scn.threshold, "fixed", 0.0, 0,
                     opt.evaluated, fleets, size, seed, strategies, opt.value, exact_values[1], exact_values[2], step)
    return with_integer(scn, ref) if integer else ref


def scenario_references(scn: cg.Scenario, search: Mapping | None = None, *, integer: bool = True) -> References:
    """The references of a scenario with the config's ``games.search`` settings (``verify_fleets``; empty: 10 fleets).

    ``integer=False`` leaves out the optimum over the full integer lattice (:func:`with_integer` adds it).
    """
    return compute_references(scn, fleets=(search or {}).get("verify_fleets"), integer=integer)
