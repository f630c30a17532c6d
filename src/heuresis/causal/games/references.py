"""References fixed before any agent plays (docs/games.md §3): optimum, trap, standard, threshold.

* **Optimum** — ``max_a E[Y]`` over the enforced design lattice, every design evaluated on the
  *same* Stage-2 draws of ``search.drones`` drones (common random numbers).  A lattice of at most
  ``search.enumerate_max`` designs (:func:`lattice_size`) is **enumerated**: the optimum is the
  lattice's best on the CRN draws, its error the CRN standard error, and the runner-up is
  stated.  A larger lattice is **searched** (multi-start best-neighbour search: add, remove or
  move one or two DEF points, fit or remove equipment), and the stated bound is a uniform sample
  of ``search.sample`` lattice designs on the same draws: the best of them (the gap to it) and a
  95% upper bound on the share of the lattice that beats the optimum there.  Either way the
  optimum is then **verified** on ``search.verify_fleets`` fresh fleets of the Stage-2 size (mean
  and 95% interval over fleets).
* **Trap** and **standard** designs of the scenario file, measured on the same fresh fleets,
  and their paired margin (standard minus trap, 95% interval over the same fleets).
* **Threshold** — the scenario's fixed ``threshold`` (per family: antenna and zone 0.75,
  weather 0.55), or under the margin rule (``threshold: null``) the verified optimum minus
  ``threshold_margin``.  At workflow start :func:`winnability_errors` checks a fixed threshold
  (the scenario's ``calibrated_design`` on a fresh fleet, else a quick search).  A scenario whose
  verified optimum falls below its threshold, whose optimum matches its trap pattern, or whose
  trap is not clearly below its standard design (the paired interval excludes 0) is a
  :class:`~heuresis.causal.games.scenario.ScenarioError`.

CausalGame's scenarios (:func:`compute_cg_references`) have no search: their optimum, trap and
standard are exact (:mod:`heuresis.causal.games.exact`), then flown on fresh fleets as above; the
optimum over the full integer lattice (every integer DEF, the agent's action space) is computed
beside the lattice's, with an upper bound (:mod:`heuresis.causal.games.exact_integer`).

Every seed derives from the scenario's ``seed`` through :func:`seed_of`, so a reference is the
same on every machine and adding a scenario changes no other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from scipy.stats import beta as beta_dist

from heuresis.causal.games import causalgame as cg
from heuresis.causal.games import exact, exact_integer
from heuresis.causal.games.scenario import Scenario, ScenarioError
from heuresis.causal.games.scm import draw, survival

__all__ = [
    "References",
    "check_references",
    "compute_cg_references",
    "compute_references",
    "enumerate_lattice",
    "lattice_size",
    "quick_optimum",
    "sample_lattice",
    "scenario_references",
    "search_optimum",
    "seed_of",
    "verify",
    "winnability_errors",
    "with_integer",
]


def seed_of(*parts) -> np.random.SeedSequence:
    """A SeedSequence from any parts (ints and strings), stable across runs and machines."""
    text = "/".join(map(str, parts)).encode()
    return np.random.SeedSequence(list(np.frombuffer(hashlib.sha256(text).digest()[:16], dtype=np.uint32)))


def _subsets(space) -> list[np.ndarray]:
    """Every equipment choice (0/1 per equipment) whose cost fits the budget."""
    e = len(space.equipment)
    out = []
    for m in range(2 ** e):
        bits = np.array([(m >> k) & 1 for k in range(e)], dtype=np.int64)
        if int((bits * np.array(space.costs, dtype=np.int64)).sum()) <= space.budget:
            out.append(bits)
    return out


def lattice_size(space) -> int:
    """Number of valid designs: DEF vectors within caps and the budget, times the equipment choices that fit."""
    total = 0
    for bits in _subsets(space):
        room = space.budget - int((bits * np.array(space.costs, dtype=np.int64)).sum())
        ways = [1] + [0] * room                     # ways[s]: DEF vectors so far summing to s
        for cap in space.caps:
            new = [0] * (room + 1)
            for s0, w in enumerate(ways):
                if w:
                    for x in range(min(cap, room - s0) + 1):
                        new[s0 + x] += w
            ways = new
        total += sum(ways)
    return total


def enumerate_lattice(space) -> np.ndarray:
    """Every valid design vector (rows), DEF per component then 0/1 per equipment."""
    rows = []
    for bits in _subsets(space):
        room = space.budget - int((bits * np.array(space.costs, dtype=np.int64)).sum())
        part = np.zeros((1, 0), dtype=np.int64)
        for cap in space.caps:
            grown = [np.column_stack([part, np.full(len(part), x)]) for x in range(cap + 1)]
            part = np.concatenate(grown)
            part = part[part.sum(1) <= room]
        rows.append(np.column_stack([part, np.repeat(bits[None], len(part), axis=0)]))
    return np.concatenate(rows).astype(np.int64)


def sample_lattice(space, rng: np.random.Generator, m: int) -> np.ndarray:
    """``m`` designs drawn uniformly from the valid lattice (rejection from the box of caps and equipment)."""
    c, e = space.n_components, len(space.equipment)
    caps = np.array(space.caps, dtype=np.int64)
    costs = np.array(space.costs, dtype=np.int64)
    out: list[np.ndarray] = []
    got = 0
    while got < m:
        box = np.column_stack([rng.integers(0, caps + 1, (4 * m + 16, c)), rng.integers(0, 2, (4 * m + 16, e))])
        ok = box[:, :c].sum(1) + (box[:, c:] * costs).sum(1) <= space.budget
        out.append(box[ok])
        got += int(ok.sum())
    return np.concatenate(out)[:m].astype(np.int64)


@dataclass
class Search:
    """Result of :func:`search_optimum`: the optimum on the CRN draws and what bounds it."""

    vec: np.ndarray
    value: float                 # survival on the CRN draws
    se: float                    # its binomial standard error on those draws
    method: str                  # "enumerated" or "searched"
    lattice_size: int
    evaluated: int
    runner_up: float             # enumerated: best other design; searched: best of the uniform sample
    better_share_ub: float       # 95% upper bound on the lattice share beating the optimum on the draws
    sample: int                  # uniform lattice designs compared (0 when enumerated)
    drones: int


def search_optimum(scn: Scenario, *, drones: int | None = None, starts: int | None = None,
                   seed: int | None = None, max_steps: int = 80, enumerate_max: int | None = None,
                   sample: int | None = None) -> Search:
    """The design maximising survival on one set of CRN draws: enumerated when the lattice is small, else searched."""
    cfg = scn.spec["search"]
    drones = int(drones or cfg["drones"])
    starts = int(starts or cfg["starts"])
    enumerate_max = int(cfg["enumerate_max"] if enumerate_max is None else enumerate_max)
    sample = int(cfg["sample"] if sample is None else sample)
    seed = scn.spec["seed"] if seed is None else seed
    space = scn.space
    draws = draw(scn, seed_of(seed, scn.name, "search"), drones, stage=2)
    size = lattice_size(space)
    if size <= enumerate_max:
        lattice = enumerate_lattice(space)
        vals = np.concatenate([survival(scn, draws, lattice[k:k + 2000]) for k in range(0, len(lattice), 2000)])
        order = np.argsort(-vals, kind="stable")
        best = float(vals[order[0]])
        runner = float(vals[order[1]]) if len(order) > 1 else float("nan")
        return Search(lattice[order[0]], best, float(np.sqrt(best * (1 - best) / drones)), "enumerated", size,
                      len(lattice), runner, 0.0, 0, drones)
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
    runner, share_ub = float("nan"), float("nan")
    if sample > 0:
        pool = sample_lattice(space, np.random.default_rng(seed_of(seed, scn.name, "search-sample")), sample)
        vals = evaluate(pool)
        runner = float(vals.max())
        better = int((vals > best_val + 1e-12).sum())
        share_ub = float(beta_dist.ppf(0.95, better + 1, sample - better)) if better < sample else 1.0
    return Search(best_vec, best_val, float(np.sqrt(best_val * (1 - best_val) / drones)), "searched", size,  # type: ignore[arg-type]
                  evaluated, runner, share_ub, sample, drones)


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
    (paired).  ``optimum_search`` is the optimum's survival on the CRN draws of ``search_drones``
    drones (standard error ``optimum_se``), found by ``optimum_method`` (``enumerated`` or
    ``searched``) over a lattice of ``lattice_size`` designs, ``designs_evaluated`` of them
    evaluated; ``runner_up`` is the best competitor on the same draws (the enumeration's second
    best, or the best of ``sample_size`` uniform lattice designs) and ``better_share_ub`` a 95%
    upper bound on the share of the lattice better than the optimum on those draws (0 when
    enumerated).  ``threshold`` is the win threshold under ``threshold_rule`` (``fixed`` or
    ``margin``); ``trap_pattern`` the scenario's trap predicate (a scenario without a trap, as
    CausalGame's weather_noise: ``trap_design`` and ``trap_pattern`` None, the trap's values NaN);
    ``seed`` the scenario seed every draw derives from. A CausalGame scenario also has its exact values
    (:mod:`heuresis.causal.games.exact`): ``optimum_exact`` (the exact maximum over the lattice of
    DEF steps of ``lattice_step``; then ``optimum_method`` is ``exact``), ``trap_exact`` and
    ``standard_exact``. Over the full integer lattice (every integer DEF within the caps and the
    budget, every equipment choice and flight profile; ``integer_lattice_size`` designs):
    ``integer_design`` and its exact survival ``integer_optimum``, and ``integer_bound``, a rigorous
    upper bound on the survival of every integer design, equal to ``integer_optimum`` when
    ``integer_exact`` (the optimum is then exact over the integer lattice). All of these are None
    for this track's own scenarios.
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


def compute_references(scn: Scenario, *, drones: int | None = None, starts: int | None = None,
                       fleets: int | None = None, enumerate_max: int | None = None,
                       sample: int | None = None) -> References:
    """Search (or enumerate), verify on fresh fleets, measure trap and standard, set the threshold."""
    found = search_optimum(scn, drones=drones, starts=starts, enumerate_max=enumerate_max, sample=sample)
    space = scn.space
    trap = space.vector(scn.spec["trap_design"])
    std = space.vector(scn.spec["standard_design"])
    ver = verify(scn, np.stack([found.vec, trap, std]), fleets=fleets)
    (om, olo, ohi), (tm, tlo, thi), (sm, slo, shi) = (_interval(r) for r in ver)
    dm, dlo, dhi = _interval(ver[2] - ver[1])
    margin = scn.threshold_margin
    fixed = scn.threshold
    threshold, rule = (fixed, "fixed") if fixed is not None else (om - margin, "margin")
    return References(scn.name, scn.family, scn.spec["variant"], space.design(found.vec), found.value, found.se,
                      found.method, found.lattice_size, found.runner_up, found.better_share_ub, found.sample,
                      om, olo, ohi, space.design(trap), list(scn.spec["trap_pattern"]), tm, tlo, thi,
                      space.design(std), sm, slo, shi, dm, dlo, dhi, threshold, rule, margin, found.drones,
                      found.evaluated, ver.shape[1], int(scn.budgets["stage2_fleet"]), int(scn.spec["seed"]))


#: Stage-2 optima over the integer lattice already computed in this process, by Stage-2 model (:func:`_stage2_key`).
_INTEGER: dict[str, exact_integer.IntegerOptimum] = {}

def _stage2_key(scn: cg.CGScenario) -> str:
    """The scenario's Stage-2 model as canonical JSON (the variants of a file share it)."""
    return json.dumps({k: scn.spec.get(k) for k in exact.STAGE2_KEYS}, sort_keys=True, default=str)


def integer_optimum(scn: cg.CGScenario, start: Mapping | None = None) -> exact_integer.IntegerOptimum:
    """:func:`~heuresis.causal.games.exact_integer.integer_optimum` at Stage 2, once per Stage-2 model in a process.

    ``start``: a design to start the search from (the lattice's optimum).
    """
    key = _stage2_key(scn)
    if key not in _INTEGER:
        _INTEGER[key] = exact_integer.integer_optimum(scn, start=start, stage=2)
    return _INTEGER[key]


def with_integer(scn: cg.CGScenario, ref: References) -> References:
    """``ref`` (computed with ``integer=False``) with the optimum over the full integer lattice added."""
    io = integer_optimum(scn, ref.optimum_design)
    return replace(ref, integer_optimum=io.value, integer_design=scn.design(io.design), integer_bound=io.bound,
                   integer_exact=io.exact, integer_lattice_size=io.lattice_size)


def compute_cg_references(scn: cg.CGScenario, *, fleets: int | None = None, step: int = exact.LATTICE_STEP,
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


def scenario_references(scn: Scenario | cg.CGScenario, search: Mapping | None = None, *,
                        integer: bool = True) -> References:
    """The references of any scenario, with the config's ``games.search`` settings (empty: the scenario's own).

    This track's scenarios: :func:`compute_references`, checked (:func:`check_references`: an
    unwinnable scenario or a trap that is no trap raises :class:`ScenarioError`). CausalGame's:
    :func:`compute_cg_references` (exact; of the search settings only ``verify_fleets`` applies),
    its published threshold and trap kept as published (a scenario that cannot be won is a
    documented fact, not an error). ``integer=False`` leaves out a CausalGame scenario's optimum over
    the full integer lattice (:func:`with_integer` adds it).
    """
    search = search or {}
    if isinstance(scn, cg.CGScenario):
        return compute_cg_references(scn, fleets=search.get("verify_fleets"), integer=integer)
    ref = compute_references(scn, drones=search.get("drones"), starts=search.get("starts"),
                             fleets=search.get("verify_fleets"), enumerate_max=search.get("enumerate_max"),
                             sample=search.get("sample"))
    check_references(ref, scn)
    return ref


def check_references(ref: References, scn: Scenario | None = None) -> None:
    """A scenario must be winnable and its trap a trap; else a ScenarioError naming the scenario and key.

    Errors: the verified optimum below the threshold; the trap at or above the threshold; the
    trap not clearly below the standard design (the paired interval of the margin reaches 0);
    the optimum matching the trap pattern (given ``scn``).
    """
    if ref.optimum < ref.threshold:
        key = "threshold" if ref.threshold_rule == "fixed" else "threshold_margin"
        raise ScenarioError(f"scenario {ref.scenario!r}: key {key}: optimum {ref.optimum:.3f} is below "
                            f"its threshold {ref.threshold:.3f} (unwinnable)")
    if ref.trap >= ref.threshold:
        raise ScenarioError(f"scenario {ref.scenario!r}: key trap_design: the trap survives {ref.trap:.3f}, at or "
                            f"above the threshold {ref.threshold:.3f}, so it is no trap")
    if not ref.trap_margin_lo > 0:
        raise ScenarioError(f"scenario {ref.scenario!r}: key trap_design: the trap ({ref.trap:.3f}) is not clearly "
                            f"below the standard design ({ref.standard:.3f}; margin {ref.trap_margin:.3f} "
                            f"[{ref.trap_margin_lo:.3f}, {ref.trap_margin_hi:.3f}]), so it is no trap")
    if scn is not None and scn.follows_trap(ref.optimum_design):
        raise ScenarioError(f"scenario {ref.scenario!r}: key trap_pattern: the optimum "
                            f"{json.dumps(ref.optimum_design, sort_keys=True)} matches the trap pattern")


def quick_optimum(scn: Scenario, *, drones: int = 1000, starts: int = 2, fleets: int = 3) -> float:
    """A fast estimate of the optimum (a short CRN search verified on ``fleets`` fresh fleets).

    The search can only under-estimate the optimum, so a threshold above this estimate is
    reported as unwinnable before any job runs (the full search of the references rule checks again).
    """
    found = search_optimum(scn, drones=min(drones, int(scn.spec["search"]["drones"])), starts=starts,
                           enumerate_max=min(5000, int(scn.spec["search"]["enumerate_max"])), sample=0)
    return float(verify(scn, found.vec[None], fleets=fleets).mean())


#: Drones of the fresh Stage-2 fleet the workflow-start check flies the calibrated design on.
WITNESS_DRONES = 2000


def witness_survival(scn: Scenario) -> tuple[float, float] | None:
    """Survival of the scenario's ``calibrated_design`` on a fresh Stage-2 fleet, and its standard error (None without one)."""
    design = scn.spec.get("calibrated_design")
    if design is None:
        return None
    d = draw(scn, seed_of(scn.spec["seed"], scn.name, "witness"), WITNESS_DRONES, stage=2)
    p = float(survival(scn, d, scn.space.vector(design)[None])[0])
    return p, float(np.sqrt(p * (1 - p) / WITNESS_DRONES))


def winnability_errors(scenarios) -> list[str]:
    """Scenarios whose optimum is below their fixed threshold, each naming the scenario and key.

    The optimum is at least the survival of any design: a ``calibrated_design`` whose survival on
    a fresh 2,000-drone fleet is two standard errors above the threshold proves the threshold
    reachable in milliseconds; otherwise a quick search (:func:`quick_optimum`, seconds) decides.
    A threshold of ``optimum - threshold_margin`` (margin >= 0 by the schema) is winnable by
    construction.
    """
    msgs = []
    for scn in scenarios:
        if isinstance(scn, cg.CGScenario):   # CausalGame's published thresholds are kept as published (docs/games.md)
            continue
        thr = scn.threshold
        if thr is None:
            continue
        wit = witness_survival(scn)
        if wit is not None and wit[0] - 2 * wit[1] >= thr:
            continue
        est = quick_optimum(scn)
        if est < thr:
            msgs.append(f"scenario {scn.name!r}: key threshold: {thr:.3f} is above the optimum found by a "
                        f"quick search ({est:.3f}); the scenario is unwinnable")
    return msgs
