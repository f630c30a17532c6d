"""References fixed before any agent plays (docs/games.md §3): optimum, trap, standard, threshold.

* **Optimum** — a multi-start local search over the enforced action space (add, remove or move
  one or two DEF points, fit or remove equipment; the best neighbour taken while it improves),
  every candidate evaluated on the *same* Stage-2 draws of ``search.drones`` drones (common
  random numbers), then **verified** on ``search.verify_fleets`` fresh fleets of the Stage-2
  size: the mean and a 95% interval over fleets.
* **Trap** and **standard** designs of the scenario file, measured on the same fresh fleets.
* **Threshold** — verified optimum minus the scenario's ``threshold_margin``, or the scenario's
  fixed ``threshold`` when it states one (:func:`quick_optimum` checks that one at workflow start).  A scenario whose
  verified optimum falls below its threshold, or whose trap survives as well as its optimum, is
  a :class:`~heuresis.games.scenario.ScenarioError`.

Every seed derives from the scenario's ``seed`` through :func:`seed_of`, so a reference is the
same on every machine and adding a scenario changes no other.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import numpy as np

from heuresis.games.scenario import Scenario, ScenarioError
from heuresis.games.scm import draw, survival

__all__ = [
    "References",
    "check_references",
    "compute_references",
    "quick_optimum",
    "search_optimum",
    "seed_of",
    "verify",
    "winnability_errors",
]


def seed_of(*parts) -> np.random.SeedSequence:
    """A SeedSequence from any parts (ints and strings), stable across runs and machines."""
    text = "/".join(map(str, parts)).encode()
    return np.random.SeedSequence(list(np.frombuffer(hashlib.sha256(text).digest()[:16], dtype=np.uint32)))


def search_optimum(scn: Scenario, *, drones: int | None = None, starts: int | None = None,
                   seed: int | None = None, max_steps: int = 80) -> tuple[np.ndarray, float, int]:
    """Multi-start best-neighbour search with common random numbers.

    Returns the best design vector, its survival on the search draws, and the number of designs
    evaluated.
    """
    cfg = scn.spec["search"]
    drones = int(drones or cfg["drones"])
    starts = int(starts or cfg["starts"])
    seed = scn.spec["seed"] if seed is None else seed
    space = scn.space
    draws = draw(scn, seed_of(seed, scn.name, "search"), drones, stage=2)
    rng = np.random.default_rng(seed_of(seed, scn.name, "search-starts"))
    inits = [space.vector(scn.spec["standard_design"]), space.vector(scn.spec["trap_design"])]
    while len(inits) < starts:
        inits.append(space.random(rng))
    best_vec, best_val, evaluated = None, -1.0, 0
    cache: dict[bytes, float] = {}

    def evaluate(cands: np.ndarray) -> np.ndarray:
        nonlocal evaluated
        keys = [c.tobytes() for c in cands]
        todo = [k for k, key in enumerate(keys) if key not in cache]
        if todo:
            vals = survival(scn, draws, cands[todo])
            evaluated += len(todo)
            for k, v in zip(todo, vals):
                cache[keys[k]] = float(v)
        return np.array([cache[key] for key in keys])

    for vec in inits[:starts]:
        cur = vec.copy()
        cur_val = float(evaluate(cur[None])[0])
        for _ in range(max_steps):
            cands = np.concatenate([space.neighbours(cur, 1), space.neighbours(cur, 2)])
            vals = evaluate(cands)
            k = int(np.argmax(vals))
            if vals[k] <= cur_val + 1e-12:
                break
            cur, cur_val = cands[k], float(vals[k])
        if cur_val > best_val:
            best_vec, best_val = cur, cur_val
    return best_vec, best_val, evaluated


def verify(scn: Scenario, vecs: np.ndarray, *, fleets: int | None = None, size: int | None = None,
           seed: int | None = None) -> np.ndarray:
    """Survival of each design (rows) on each of ``fleets`` fresh Stage-2 fleets (columns)."""
    fleets = int(fleets or scn.spec["search"]["verify_fleets"])
    size = int(size or scn.budgets["stage2_fleet"])
    seed = scn.spec["seed"] if seed is None else seed
    vecs = np.atleast_2d(vecs)
    out = np.empty((len(vecs), fleets))
    for f in range(fleets):
        out[:, f] = survival(scn, draw(scn, seed_of(seed, scn.name, "verify", f), size, stage=2), vecs)
    return out


def _interval(x: np.ndarray) -> tuple[float, float, float]:
    m = float(x.mean())
    half = 1.96 * float(x.std(ddof=1)) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
    return m, m - half, m + half


@dataclass
class References:
    """The references of one scenario, one row of the ``game_references`` artifact.

    Survival rates are fractions of a Stage-2 fleet that return.  ``optimum``, ``trap`` and
    ``standard`` are means over ``verify_fleets`` fresh fleets of ``fleet_size`` drones, each with
    a 95% interval (``*_lo``, ``*_hi``); ``optimum_search`` is the optimum's survival on the
    search's common-random-number draws of ``search_drones`` drones, over ``designs_evaluated``
    candidate designs.  ``threshold`` is the win threshold (``optimum - threshold_margin`` unless
    the scenario fixes it); ``seed`` is the scenario seed every draw derives from.
    """

    scenario: str
    family: str
    variant: str
    optimum_design: dict
    optimum_search: float          # survival on the search's CRN draws
    optimum: float                 # mean over fresh fleets
    optimum_lo: float
    optimum_hi: float
    trap_design: dict
    trap: float
    trap_lo: float
    trap_hi: float
    standard_design: dict
    standard: float
    standard_lo: float
    standard_hi: float
    threshold: float
    threshold_margin: float
    search_drones: int
    designs_evaluated: int
    verify_fleets: int
    fleet_size: int
    seed: int

    def as_dict(self) -> dict:
        """Return the references as a plain dict (designs still as mappings)."""
        return asdict(self)


def compute_references(scn: Scenario, *, drones: int | None = None, starts: int | None = None,
                       fleets: int | None = None) -> References:
    """Search, verify on fresh fleets, measure trap and standard, set the threshold."""
    vec, val, n_eval = search_optimum(scn, drones=drones, starts=starts)
    space = scn.space
    trap = space.vector(scn.spec["trap_design"])
    std = space.vector(scn.spec["standard_design"])
    ver = verify(scn, np.stack([vec, trap, std]), fleets=fleets)
    (om, olo, ohi), (tm, tlo, thi), (sm, slo, shi) = (_interval(r) for r in ver)
    margin = scn.threshold_margin
    threshold = float(scn.spec["threshold"]) if scn.spec.get("threshold") is not None else om - margin
    return References(scn.name, scn.family, scn.spec["variant"], space.design(vec), val, om, olo, ohi,
                      space.design(trap), tm, tlo, thi, space.design(std), sm, slo, shi, threshold, margin,
                      int(drones or scn.spec["search"]["drones"]), n_eval, ver.shape[1],
                      int(scn.budgets["stage2_fleet"]), int(scn.spec["seed"]))


def check_references(ref: References) -> None:
    """A scenario must be winnable and its trap must be a trap; else a ScenarioError naming it."""
    if ref.optimum < ref.threshold:
        key = "threshold" if abs(ref.threshold - (ref.optimum - ref.threshold_margin)) > 1e-12 else "threshold_margin"
        raise ScenarioError(f"scenario {ref.scenario!r}: key {key}: optimum {ref.optimum:.3f} is below "
                            f"its threshold {ref.threshold:.3f} (unwinnable)")
    if ref.trap >= ref.threshold:
        raise ScenarioError(f"scenario {ref.scenario!r}: key trap_design: the trap survives {ref.trap:.3f}, at or "
                            f"above the threshold {ref.threshold:.3f}, so it is no trap")


def quick_optimum(scn: Scenario, *, drones: int = 1000, starts: int = 2, fleets: int = 3) -> float:
    """A fast estimate of the optimum (a short CRN search verified on ``fleets`` fresh fleets).

    Used at workflow start for scenarios with a fixed ``threshold``: the search can only
    under-estimate the optimum, so a threshold above this estimate is reported as unwinnable
    before any job runs (the full search of the references rule checks again).
    """
    vec, _, _ = search_optimum(scn, drones=min(drones, int(scn.spec["search"]["drones"])), starts=starts)
    return float(verify(scn, vec[None], fleets=fleets).mean())


def winnability_errors(scenarios) -> list[str]:
    """Scenarios whose optimum is below their fixed threshold, each naming the scenario and key.

    A threshold of ``optimum - threshold_margin`` (margin >= 0 by the schema) is winnable by
    construction; only a fixed ``threshold`` needs the quick search.
    """
    msgs = []
    for scn in scenarios:
        thr = scn.spec.get("threshold")
        if thr is None:
            continue
        est = quick_optimum(scn)
        if est < float(thr):
            msgs.append(f"scenario {scn.name!r}: key threshold: {float(thr):.3f} is above the optimum found by a "
                        f"quick search ({est:.3f}); the scenario is unwinnable")
    return msgs
