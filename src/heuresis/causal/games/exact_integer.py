"""The optimum of CausalGame's drone designs over the full integer lattice, with a rigorous bound.

An agent's DEF values are integers, so its action space is every integer DEF within the caps and
the DEF budget (1.2e10 designs in the antenna files), not the lattice of DEF steps of 5 that
:func:`~heuresis.causal.games.exact.exact_optimum` enumerates. :func:`integer_optimum` finds the
best design of the integer lattice and an upper bound on the survival of every design in it
(docs/games.md, "Optima"):

* **weather**: exactly, by dynamic programming. Survival is
  ``pre(antenna, engine) * (1 - c * p(total) * (k_engine + k_cockpit + k_wing + k_body))`` (the
  SCM's roll times one round of combat; ``k_c`` a critical component's share of a one-round kill,
  a function of its own DEF; camera and gun enter through the total only), so for each antenna
  and engine DEF and each DEF sum ``s`` of the other five components the best design takes the
  least summed ``k`` over those five components summing to ``s`` (a min-plus convolution, exact),
  and every ``(antenna, engine, s)`` is valued.
* **antenna and zone**: branch and bound over boxes of the four critical DEFs. Survival is
  ``B[total, rest] . P[critical DEFs]`` (:mod:`heuresis.causal.games.exact`): ``B`` the context
  weights (the environment's probabilities times the combat's round coefficients, which depend
  on the total DEF through the hit chance, and on the other components), ``P`` the product of the
  four critical components' polynomials. Both are entrywise non-negative, so for a box of
  critical DEFs ``[lo, hi]`` the product of each component's running maximum over ``DEF <= hi``
  bounds ``P`` of every design in the box entrywise, and ``B . P_max`` bounds their survival at a
  fixed total. Over totals, survival is **non-increasing in the total DEF** with everything else
  fixed, so ``B`` at the box's least total (``rest + sum(lo)``) bounds every total the box
  reaches. A box whose bound does not exceed the best design found (plus :data:`INTEGER_TOL`)
  is discarded, the others are halved along their widest DEF, and a box of one design is valued
  exactly.

Why survival cannot grow with the total DEF (the bound's premise). The total enters only through
the per-round hit chance ``p = clip(0.8 * accuracy * exp(0.1 * (1 - agility(total))))``; the
scenario's agility is checked non-increasing on every integer total up to the budget
(:func:`_check_premises`), so ``p`` is non-decreasing in the total at every accuracy. Given the
environment, combat runs ``R`` rounds; each hits critical component ``c`` with chance
``p w_c / W`` (``W`` the summed weight of the targets), independently of the other rounds, and
survival is ``E[prod_c f_c(N_c)]`` over the multinomial hit counts ``N_c`` (the generating
functions of :mod:`~heuresis.causal.games.exact` expand to exactly this). Raising ``p`` to
``p'`` scales every ``p w_c / W`` by ``p' / p``: read backwards, the rounds under ``p`` are those
under ``p'`` with each critical hit kept with chance ``p / p'`` (thinning), so every ``N_c`` under
``p'`` is at least its value under ``p`` on the same draws. A critical component survives ``n``
hits with ``f_c(n) = E[alive * P(S_n < threshold)]``, non-increasing in ``n`` because the summed
damage ``S_n`` grows with ``n`` (checked on the tables too: :func:`_check_premises`); so the
product over the critical components, and its expectation, cannot grow with ``p``. Detection,
rounds, the environment's damage and the other components' laws do not depend on the total. The
same thinning shows survival cannot fall as ``W`` grows (the zone camera, below), and the bound
keeps both facts: a running maximum over DEFs of non-increasing ``f_c`` is non-increasing.

What is enumerated rather than bounded. Antenna model: the antenna, camera and gun DEF up to
their **saturation**, the least DEF from which the law of the component's HP (and, for camera and
gun, of its sheet surviving) no longer changes, found by comparing the laws of every integer DEF
up to the cap; a design above it has the same environment and combat as the design with the
saturation DEF and a larger total, so it cannot survive more. Zone model: as for
:func:`~heuresis.causal.games.exact.exact_optimum`, antenna and gun DEF 0 and the equipment of
the largest EMI resistance (the antenna and gun act through the total only; survival falls as the
effective EMI grows); every flight profile, and every shield DEF up to its saturation (the least
shield from which the EMI reduction no longer changes). The camera DEF is a fifth box dimension:
it acts only through whether the camera keeps HP after the EMI's damage (checked non-decreasing
in the camera DEF on every quadrature node), which adds its weight to the targets' total ``W``,
and survival cannot fall as ``W`` grows (the thinning above); so a box's bound takes the camera
at its largest DEF. The zone bounds take the damage modifier as 1, as exact_optimum's do
(survival falls as it grows); a box of one design whose effective EMI can exceed 0.5 is valued
again with every piece of it.

Every box's bound is at least the exact survival of each of its designs; the search ends with
every box discarded or valued, so the best design found is the optimum over the integer lattice
(up to :data:`INTEGER_TOL`). With ``max_bounds`` set, the search may stop early: the bound is then
the largest bound of the boxes left open (antenna model; zone model: 1, the trivial bound),
stated as such.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from heuresis.causal.games import causalgame as cg
from heuresis.causal.games import exact as ex

__all__ = ["INTEGER_TOL", "IntegerOptimum", "integer_optimum"]

#: A box is discarded when its bound is at most the best survival found plus this (floating-point rounding).
INTEGER_TOL = 1e-12

#: Boxes bounded per array operation (memory: about 17 kB each in the antenna model).
_CHUNK = 8192


@dataclass
class IntegerOptimum:
    """The best design over a CausalGame scenario's full integer lattice and a bound (:func:`integer_optimum`).

    ``design`` (every DEF an integer within the caps and the DEF budget, every equipment slot and,
    when the scenario has them, the flight profile) survives ``value`` exactly; ``bound`` is a
    rigorous upper bound on the exact survival of every design of the integer lattice. ``exact``:
    the search closed, so no design survives more than ``value + INTEGER_TOL`` (``bound`` is then
    ``value``); otherwise ``bound`` is the largest bound of the boxes left open. ``lattice_size``
    counts the integer lattice; ``bounded`` the boxes bounded (sets of designs), ``valued`` the
    designs valued exactly.
    """

    scenario: str
    design: dict[str, Any]
    value: float
    bound: float
    exact: bool
    lattice_size: int
    bounded: int
    valued: int
    seconds: float = 0.0
    stage: int = 2


# --- premises ---------------------------------------------------------------------------------------
def _check_premises(spec: Mapping, budget: int, tables: list[np.ndarray] | None = None) -> None:
    """Check what the bound relies on; raise ValueError naming the premise that fails.

    * the agility is non-increasing on every integer total DEF ``0..budget`` (so is the hit chance);
    * given ``tables`` (per critical component ``a[d, ..., n] = f(n) w^n / n!``): every entry is
      non-negative and ``f(n)`` is non-increasing in ``n``.
    """
    ag = cg.agility(spec, np.arange(budget + 1))
    if np.any(np.diff(ag) > 0):
        raise ValueError("integer bound: agility grows with the total DEF somewhere in 0..def_budget")
    for c, t in zip(cg.CRITICAL, tables or []):
        if np.any(t < 0):
            raise ValueError(f"integer bound: negative survival polynomial of {c}")
        w = cg.TARGET_WEIGHTS.get(c, 1.0)
        f = t * np.array([math.factorial(k) / w ** k for k in range(t.shape[-1])])
        if np.any(np.diff(f, axis=-1) > 1e-12):
            raise ValueError(f"integer bound: {c}'s survival grows with its hit count")


def _saturation(laws: np.ndarray) -> int:
    """The least index from which ``laws[d]`` equals every later one (laws of DEF 0..cap)."""
    differ = [d for d in range(len(laws)) if not np.array_equal(laws[d], laws[-1])]
    return differ[-1] + 1 if differ else 0


def _pairs(tabs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Products of the engine and cockpit polynomials and of the wing and body ones, per DEF pair."""
    ec = ex._poly_mul(tabs[0][:, None], tabs[1][None, :])
    wb = ex._poly_mul(tabs[2][:, None], tabs[3][None, :])
    return ec, wb


class _Products:
    """``P`` (flattened) of critical DEF rows, each distinct row of a call computed once.

    ``tables``: the four critical components' polynomials, or their pairs (:func:`_pairs`).
    """

    def __init__(self, tables, kmax: int):
        self.tables, self.kmax = tables, kmax

    def __call__(self, crit: np.ndarray) -> np.ndarray:
        u, inv = np.unique(crit, axis=0, return_inverse=True)
        if isinstance(self.tables, tuple):
            ec, wb = self.tables
            p = ex._poly_mul(ec[u[:, 0], u[:, 1]], wb[u[:, 2], u[:, 3]], self.kmax)
        else:
            p = ex._crit_products(self.tables, u, self.kmax)
        return p.reshape(len(u), -1)[inv.ravel()]


def _split(nodes: np.ndarray, first: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Halve each box along its widest interval: (lower halves, upper halves, each upper half's added DEF).

    Box rows hold lows at ``first .. first + width`` and highs at ``first + width .. first + 2 width``.
    """
    lo, hi = nodes[:, first:first + width], nodes[:, first + width:first + 2 * width]
    j = np.argmax(hi - lo, axis=1)
    r = np.arange(len(nodes))
    mid = (lo[r, j] + hi[r, j]) // 2
    a, b = nodes.copy(), nodes.copy()
    a[r, first + width + j] = mid
    b[r, first + j] = mid + 1
    return a, b, mid + 1 - lo[r, j]


class _Best:
    """The incumbent: the best exact survival found and its design."""

    def __init__(self, value: float, design: dict[str, Any]):
        self.value, self.design = float(value), dict(design)

    def better(self, values: np.ndarray) -> int | None:
        """The index of the largest of ``values`` if it beats the incumbent, else None."""
        if len(values):
            j = int(np.argmax(values))
            if values[j] > self.value:
                return j
        return None

    def take(self, value: float, design: dict[str, Any]) -> None:
        self.value, self.design = float(value), dict(design)


# --- the weather model ---------------------------------------------------------------------------
def _weather_integer(scn: cg.Scenario, stage: int, best: _Best) -> tuple[int, int]:
    spec, comps = scn.spec, scn.components
    cap = int(spec["def_cap"])
    budget = int(spec.get("def_budget") or cap * len(comps))
    vals = np.arange(cap + 1)
    kill = ex._weather_combat(spec, vals)
    others = [c for c in comps if c not in ("antenna", "engine")]
    # least summed kill share over the other components for each DEF sum, and one argmin design
    g = np.zeros(1)
    picks: list[np.ndarray] = []
    for c in others:
        k = kill.get(c, np.zeros(cap + 1))
        n = min(len(g) + cap, budget + 1)
        cand = np.full((n, cap + 1), np.inf)
        for x in range(cap + 1):
            m = min(len(g), n - x)
            if m > 0:
                cand[x:x + m, x] = g[:m] + k[x]
        picks.append(np.argmin(cand, axis=1))
        g = cand[np.arange(n), picks[-1]]
    a, e, s = np.meshgrid(vals, vals, np.arange(len(g)), indexing="ij")
    ok = a + e + s <= budget
    a, e, s = a[ok], e[ok], s[ok]
    pre, coef = ex._weather_factors(spec, a, e, a + e + s, stage)
    val = pre * (1.0 - coef * (kill["engine"][e] + g[s]))

    def make(j: int) -> dict[str, Any]:
        d = {"antenna": int(a[j]), "engine": int(e[j])}
        rem = int(s[j])
        for c, pk in zip(reversed(others), reversed(picks)):
            d[c] = int(pk[rem])
            rem -= d[c]
        return {c: d[c] for c in comps}

    j = best.better(val)
    if j is not None:
        best.take(val[j], make(j))
    best.value = ex.exact_survival(scn, best.design, stage)       # the design valued by the model itself
    return len(val), len(val)


# --- the antenna model ---------------------------------------------------------------------------
def _antenna_integer(scn: cg.Scenario, best: _Best, max_bounds: int | None) -> tuple[int, int, float]:
    spec = scn.spec
    model = ex._Antenna(spec)
    cap = int(spec["def_cap"])
    budget = int(spec.get("def_budget") or cap * len(scn.components))
    p = model.p
    sat = {}
    for comp, key, fly_hp in (("antenna", "antenna_def_factor", False), ("camera", "camera_def_factor", True),
                              ("gun", "gun_def_factor", True)):
        sat[comp] = max(_saturation(model._noncrit(comp, tier, np.arange(cap + 1), p[key], fly_hp))
                        for tier in ("high", "mid"))
    rv = {c: np.arange(sat[c] + 1) for c in ("antenna", "camera", "gun")}
    rest = np.array(np.meshgrid(rv["antenna"], rv["camera"], rv["gun"], indexing="ij")).reshape(3, -1).T
    tabs = model.crit_tables(dict.fromkeys(cg.CRITICAL, np.arange(cap + 1)))
    _check_premises(spec, budget, tabs)
    kmax = model.kmax
    exact_p = _Products(_pairs(tabs), kmax)
    max_p = _Products(_pairs([np.maximum.accumulate(t, axis=0) for t in tabs]), kmax)
    # the totals whose weights bound the boxes (any total at most a box's least total bounds it)
    grid = sorted({0, *(t for t in (budget - 40, budget - 20, budget - 10) if t > 0)})
    weights: dict[int, np.ndarray] = {}

    def bound_weights(total: int) -> np.ndarray:
        g = max(t for t in grid if t <= total)
        if g not in weights:
            weights.clear()
            weights[g] = model.context_weights(rv, np.array([g]))[0].reshape(len(rest), -1)
        return weights[g]

    def design_of(r: int, crit) -> dict[str, Any]:
        return {**dict(zip(cg.CRITICAL, (int(x) for x in crit))),
                **dict(zip(("antenna", "camera", "gun"), (int(x) for x in rest[r])))}

    # box rows: rest index, critical lows (4), critical highs (4), the parent's bound (scaled by 1e15)
    buckets: dict[int, list[np.ndarray]] = defaultdict(list)
    for i, t in enumerate(rest.sum(1)):
        if t <= budget:
            buckets[int(t)].append(np.array([[i, 0, 0, 0, 0, cap, cap, cap, cap, 10 ** 15]]))
    bounded = valued = 0
    open_bound = -np.inf
    stopped = False
    for total in range(budget + 1):
        nodes = np.concatenate(buckets.pop(total)) if buckets.get(total) else np.zeros((0, 10), np.int64)
        while len(nodes):
            if max_bounds is not None and bounded >= max_bounds:
                stopped = True
                open_bound = max(open_bound, float(nodes[:, 9].max()) / 1e15 + 1e-15)
                break
            nodes[:, 5:9] = np.minimum(nodes[:, 5:9], nodes[:, 1:5] + (budget - total))
            W = bound_weights(total)
            ub = np.concatenate([np.einsum("ij,ij->i", W[ch[:, 0]], max_p(ch[:, 5:9]))
                                 for ch in np.array_split(nodes, max(1, -(-len(nodes) // _CHUNK)))])
            bounded += len(nodes)
            keep = ub > best.value + INTEGER_TOL
            nodes, ub = nodes[keep], ub[keep]
            nodes[:, 9] = np.ceil(ub * 1e15).astype(np.int64)
            leaf = np.all(nodes[:, 1:5] == nodes[:, 5:9], axis=1)
            if leaf.any():
                L = nodes[leaf]
                rr = rest[L[:, 0]]
                u = [np.unique(rr[:, q]) for q in range(3)]
                B = model.context_weights(dict(zip(("antenna", "camera", "gun"), u)), np.array([total]))[0]
                B = B[tuple(np.searchsorted(u[q], rr[:, q]) for q in range(3))].reshape(len(L), -1)
                v = np.einsum("ij,ij->i", B, exact_p(L[:, 1:5]))
                valued += len(v)
                j = best.better(v)
                if j is not None:
                    best.take(v[j], design_of(int(L[j, 0]), L[j, 1:5]))
                nodes = nodes[~leaf]
            if not len(nodes):
                break
            nodes, upper, added = _split(nodes, 1, 4)
            for t in np.unique(added):
                if total + t <= budget:
                    buckets[int(total + t)].append(upper[added == t])
        if stopped:                              # every box left open bounds the designs not yet valued
            for rows in buckets.values():
                for r in rows:
                    open_bound = max(open_bound, float(r[:, 9].max()) / 1e15 + 1e-15)
            break
    return bounded, valued, open_bound


# --- the zone model -----------------------------------------------------------------------------------
class _ZoneRest:
    """One flight profile and shield DEF of the zone model: context weights per camera DEF and total, products."""

    def __init__(self, model: ex._Zone, nd: ex._Nodes, prof: str | None, shield: int, equip: Mapping[str, Any],
                 comps: list[str], tables: list[np.ndarray], cols: tuple):
        self.model, self.nd, self.prof, self.shield, self.equip, self.comps, self.cols = (
            model, nd, prof, shield, equip, comps, cols)
        self.exact = bool(np.all(nd.dm == 1.0))
        self.exact_p = _Products(tables, model.kmax)
        self.max_p = _Products([np.maximum.accumulate(t, axis=0) for t in tables], model.kmax)
        self.classes: dict[int, tuple] = {}
        self.weights: dict[tuple[int, int], np.ndarray] = {}

    def weight(self, cam: int, total: int) -> np.ndarray:
        """The context weights (flattened) at camera DEF ``cam`` and total DEF ``total``."""
        if (cam, total) not in self.weights:
            m = self.model
            if cam not in self.classes:
                self.classes[cam] = m.class_weights(self.nd, cam)
            classes, G, U = self.classes[cam]
            p = cg.hit_chance(m.spec, float(total), 1.0)
            M = np.stack([ex._round_coefs(r, p, w, m.w_crit, m.kmax) for r, w in classes])
            B = np.einsum("cbs,ck->bsk", G[(slice(None), *self.cols)], M)
            B[..., 0] += U[self.cols]
            self.weights[(cam, total)] = B.ravel()
        return self.weights[(cam, total)]

    def stacked(self, cams: np.ndarray, totals: np.ndarray) -> np.ndarray:
        keys, inv = np.unique(np.column_stack([cams, totals]), axis=0, return_inverse=True)
        return np.stack([self.weight(int(c), int(t)) for c, t in keys])[inv.ravel()]

    def design_of(self, row: np.ndarray) -> dict[str, Any]:
        """The design of a box row of one design (camera at 0, critical DEFs at 2..5)."""
        d: dict[str, Any] = dict.fromkeys(self.comps, 0)
        d.update(zip(cg.CRITICAL, (int(x) for x in row[2:6])))
        if "shield" in d:
            d["shield"] = self.shield
        if "camera" in d:
            d["camera"] = int(row[0])
        d.update(self.equip)
        if self.prof is not None:
            d["flight_profile"] = self.prof
        return d


def _zone_integer(scn: cg.Scenario, stage: int, best: _Best, max_bounds: int | None) -> tuple[int, int, float]:
    spec = scn.spec
    model = ex._Zone(spec, stage)
    comps = scn.components
    cap = int(spec["def_cap"])
    budget = int(spec.get("def_budget") or cap * len(comps))
    equip = ex._best_equipment(scn)
    _check_premises(spec, budget)
    values = np.arange(cap + 1)
    tabs = [t[:, 0] for t in model.crit_tables(dict.fromkeys(cg.CRITICAL, values), np.ones(1))]   # (d, band, seg, n)
    _check_premises(spec, budget, tabs)
    if "shield" in model.hp and model.p.get("shield_counts", True):
        red = [model.total_reduction({"shield": s, **equip}) for s in values]
        shields = values[:_saturation(np.array(red)) + 1]
    else:
        shields = np.zeros(1, int)
    profiles = [None, *spec.get("flight_profiles", [])]
    bounded = valued = 0
    open_bound = -np.inf
    pending: list[tuple[float, dict[str, Any]]] = []       # leaves whose bound is not their survival
    # each (profile, shield): its nodes, then a branch and bound over (camera, critical DEFs) boxes
    jobs = []
    for prof in profiles:
        for sh in shields:
            nd = model.nodes(model.total_reduction({"shield": int(sh), **equip}), prof, exact_dm=False)
            jobs.append((prof, int(sh), nd))
    for prof, sh, nd in jobs:
        if sh > budget:
            continue
        used = np.unique(nd.band)
        segs = np.flatnonzero(np.any(nd.segw > 0, axis=0))
        if "camera" in model.hp:
            alive = np.array([model._w_total(nd, int(c)) for c in values])            # (camera, node)
            if np.any(np.diff(alive, axis=0) < 0):
                raise ValueError("integer bound: the camera's survival of the EMI falls with its DEF")
            cam_cap = min(_saturation(alive), budget - sh)
        else:
            cam_cap = 0
        rs = _ZoneRest(model, nd, prof, sh, equip, comps, [t[:, used][:, :, segs] for t in tabs], np.ix_(used, segs))
        # box rows: camera low, critical lows (4) after a slot, camera high, critical highs (4)
        # laid out as [cam_lo, 0, lo(4), cam_hi, 0, hi(4)] so that _split sees lows 0..5 and highs 6..11
        nodes = np.array([[0, 0, 0, 0, 0, 0, cam_cap, 0, cap, cap, cap, cap]])
        while len(nodes):
            if max_bounds is not None and bounded >= max_bounds:
                open_bound = np.inf
                break
            tot = sh + nodes[:, 0] + nodes[:, 2:6].sum(1)
            nodes = nodes[tot <= budget]
            tot = tot[tot <= budget]
            room = (budget - tot)[:, None]
            nodes[:, 6:7] = np.minimum(nodes[:, 6:7], nodes[:, 0:1] + room)
            nodes[:, 8:12] = np.minimum(nodes[:, 8:12], nodes[:, 2:6] + room)
            if not len(nodes):
                break
            ub = np.einsum("ij,ij->i", rs.stacked(nodes[:, 6], tot), rs.max_p(nodes[:, 8:12]))
            bounded += len(nodes)
            keep = ub > best.value + INTEGER_TOL
            nodes, ub, tot = nodes[keep], ub[keep], tot[keep]
            leaf = np.all(nodes[:, 0:6] == nodes[:, 6:12], axis=1)
            if leaf.any():
                L, Lt = nodes[leaf], tot[leaf]
                v = np.einsum("ij,ij->i", rs.stacked(L[:, 0], Lt), rs.exact_p(L[:, 2:6]))
                if rs.exact:
                    valued += len(v)
                    j = best.better(v)
                    if j is not None:
                        best.take(v[j], rs.design_of(L[j]))
                else:               # the damage modifier taken as 1: valued again at the end if they could still win
                    pending.extend((float(v[j]), rs.design_of(L[j])) for j in np.flatnonzero(v > best.value + INTEGER_TOL))
                nodes = nodes[~leaf]
            if not len(nodes):
                break
            lower, upper, _ = _split(nodes, 0, 6)
            nodes = np.concatenate([lower, upper])
        if max_bounds is not None and bounded >= max_bounds:
            open_bound = np.inf
            break
    for v, d in sorted(pending, key=lambda t: -t[0]):
        if v <= best.value + INTEGER_TOL:
            break
        value = model.survival(scn.design(d))
        valued += 1
        if value > best.value:
            best.take(value, d)
    return bounded, valued, open_bound


# --- the public function -------------------------------------------------------------------------
def integer_optimum(scn: cg.Scenario, start: Mapping[str, Any] | None = None, stage: int = 2,
                    max_bounds: int | None = None) -> IntegerOptimum:
    """The best design over the scenario's full integer lattice and an upper bound on every design's survival.

    Parameters
    ----------
    scn : Scenario
        The scenario (any of the three models).
    start : Mapping, optional
        A design of the integer lattice, the first incumbent (the better it is, the more boxes
        are discarded early), e.g. the optimum over a coarser lattice
        (:func:`~heuresis.causal.games.exact.exact_optimum`), which is computed over the lattice
        of DEF steps of 5 when not given (antenna and zone models).
    stage : int
        The stage whose survival is maximised (2, the evaluation, by default).
    max_bounds : int, optional
        Stop after this many boxes bounded; the result's bound is then the largest bound of the
        boxes left open (``exact`` False). None: run until every box is discarded or valued.

    Returns
    -------
    IntegerOptimum
        The best integer design, its exact survival and the bound (see the module's docstring).
    """
    t0 = time.perf_counter()
    if scn.model == "weather":
        best = _Best(-np.inf, {})
        bounded, valued = _weather_integer(scn, stage, best)
        open_bound = -np.inf
    else:
        start = start if start is not None else ex.exact_optimum(scn, stage=stage).design
        d = scn.design(start)
        best = _Best(ex.exact_survival(scn, d, stage), d)
        if scn.model == "antenna":
            bounded, valued, open_bound = _antenna_integer(scn, best, max_bounds)
        else:
            bounded, valued, open_bound = _zone_integer(scn, stage, best, max_bounds)
    closed = open_bound == -np.inf
    bound = best.value if closed else max(best.value, min(open_bound, 1.0))
    return IntegerOptimum(scn.name, best.design, best.value, bound, closed, ex.lattice_designs(scn, 1), bounded,
                          valued, time.perf_counter() - t0, stage)
