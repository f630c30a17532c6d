"""Exact expected survival of CausalGame's drone designs, and the exact optimum over a design lattice.

:func:`~heuresis.causal.games.causalgame.fly` draws a drone's environment, then its combat. Here
both are summed over instead of drawn (docs/games.md, "Exact optima"):

* **combat**, given the environment: ``R`` rounds each hit with probability ``p`` a component
  drawn by weight among those with HP left, so the hits per component are multinomial; a
  critical component ``c`` keeps HP after ``n`` hits with probability ``q_c(n)``, the chance that
  the sheet's reduction of the sum of ``n`` independent hit amounts stays below its HP (the
  amount's law is discrete: ``int(70 * U(0.7, 1.3))`` is uniform on 49..90, doubled with
  probability 0.2, then ``int(amount * damage_modifier)``). With exponential generating
  functions, survival is ``R! [x^R] exp((1 - p S / W) x) prod_c sum_n q_c(n) (p w_c x / W)^n / n!``
  (``w_c`` the target weights, ``W`` their sum over the components alive at the start of combat,
  ``S`` that of the critical ones): a polynomial of small degree per component, since a few hits
  destroy any component;
* **the environment**, every draw of the SCM: discrete draws (zones, wind tiers, tier damages,
  the integer part of a scaled uniform) are summed with their exact probabilities; continuous
  ones (the weather pattern, the EMI, the crash severity) are integrated piecewise, split at every
  point where a discrete outcome changes (a round count, a clamp, an ``int()``, a threshold), so
  that each piece's integrand is a polynomial of degree at most 2 in the variable, integrated
  exactly by two-point Gauss-Legendre.

What remains is floating-point rounding (about 1e-13) and the float edge cases of the
simulator's ``int()`` at the exact breakpoints, a set of probability zero.

The survival of a design separates into a part that depends on the critical components' DEF
(engine, cockpit, wing, body: the per-component polynomials, one per environment context) and a
part that depends on the rest (the weights of those contexts: the environment's probabilities
and the combat's coefficients, through the total DEF). The lattice's survival is then one
matrix product per total DEF (:func:`exact_optimum`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from heuresis.causal.games import causalgame as cg

__all__ = [
    "LATTICE_STEP",
    "STAGE2_KEYS",
    "ExactOptimum",
    "exact_optimum",
    "exact_survival",
    "lattice_designs",
]

#: The DEF step of the lattice the optimum is taken over: every design CausalGame publishes uses multiples of 5.
LATTICE_STEP = 5

#: The scenario keys this module (and :mod:`~heuresis.causal.games.exact_integer`) reads: scenarios equal on
#: them have the same exact survival of every design, at every stage (the variants of a file share them).
STAGE2_KEYS = ("model", "components", "def_cap", "def_budget", "def_reduction_factor", "agility_system", "scm",
               "zones", "equipment", "flight_profiles")

#: Gauss-Legendre nodes and weights on [0, 1]: two nodes integrate a polynomial of degree 3 exactly.
_GL_X = np.array([0.5 - 0.5 / math.sqrt(3.0), 0.5 + 0.5 / math.sqrt(3.0)])
_GL_W = np.array([0.5, 0.5])
_BASES = np.arange(int(cg.DAMAGE_BASE * (1 - cg.DAMAGE_VARIANCE)), int(round(cg.DAMAGE_BASE * (1 + cg.DAMAGE_VARIANCE))))


# --- combat -------------------------------------------------------------------------------------------
def _hit_values() -> tuple[np.ndarray, np.ndarray]:
    """The hit's raw amounts before the damage modifier and their probabilities.

    ``int(70 * U(0.7, 1.3))`` is uniform on 49..90 (each integer's interval of U has length 1/42);
    a critical hit (probability 0.2) doubles it.
    """
    base = _BASES.astype(float)
    p = np.full(len(base), 1.0 / len(base))
    vals = np.concatenate([base, np.floor(base * cg.CRIT_MULT)])
    return vals, np.concatenate([p * (1 - cg.CRIT_P), p * cg.CRIT_P])


_HIT_VALS, _HIT_PROBS = _hit_values()


def _sum_cdfs(dms: np.ndarray, smax: int) -> np.ndarray:
    """``cdf[m, n, s] = P(S_n <= s)`` for ``s < smax``: ``S_n`` the sum of ``n`` hits under damage modifier ``dms[m]``.

    The array's last ``n`` is the first with ``P(S_n < smax) = 0`` (every further one is 0 too).
    """
    dms = np.atleast_1d(np.asarray(dms, float))
    amounts = np.floor(_HIT_VALS[None, :] * dms[:, None]).astype(np.int64)       # as the simulator's np.floor
    m = len(dms)
    one = np.zeros((m, smax))
    rows = np.repeat(np.arange(m), amounts.shape[1])
    ok = amounts.ravel() < smax
    np.add.at(one, (rows[ok], amounts.ravel()[ok]), np.tile(_HIT_PROBS, m)[ok])
    amin = max(1, int(amounts.min()))
    nmax = -(-smax // amin)
    pmfs = [np.zeros((m, smax)), one]
    pmfs[0][:, 0] = 1.0
    for _ in range(2, nmax + 1):
        prev, new = pmfs[-1], np.zeros((m, smax))
        for t in range(smax):
            col = prev[:, t]
            if col.any():
                new[:, t:] += col[:, None] * one[:, :smax - t]
        pmfs.append(new)
    return np.cumsum(np.stack(pmfs, axis=1), axis=2)


def _thresholds(hp_max: int, r_max: int, smax: int) -> np.ndarray:
    """``thr[h, r]``: the least summed raw damage that leaves a component of ``h`` HP and reduction ``r`` at 0 HP.

    The sheet deals ``max(1, S - min(r, int(0.65 S)))``, non-decreasing in ``S``; a struck
    component survives iff ``S < thr[h, r]``.
    """
    s = np.arange(1, smax + 1, dtype=float)
    r = np.arange(r_max + 1, dtype=float)
    dealt = np.maximum(1.0, s[None, :] - np.minimum(r[:, None], np.floor(s[None, :] * cg.REDUCTION_CAP)))   # (r, S)
    h = np.arange(hp_max + 1)
    below = (dealt[None, :, :] < h[:, None, None]).sum(-1)        # how many S in 1..smax deal less than h
    if np.any(dealt[:, -1] < hp_max):
        raise AssertionError("summed-damage table too short")
    return 1 + below                                               # (h, r)


def _survive_probs(cdf: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """``q[m, n, ...] = P(S_n < thr)`` for thresholds ``thr`` (any shape of ints >= 1); ``q[:, 0] = 1``."""
    idx = np.clip(thr - 1, 0, cdf.shape[2] - 1)
    return cdf[:, :, idx]


def _poly_mul(a: np.ndarray, b: np.ndarray, kmax: int | None = None) -> np.ndarray:
    """Product of polynomials along the last axis (coefficients from degree 0), truncated to degree ``kmax``."""
    n = a.shape[-1] + b.shape[-1] - 1
    if kmax is not None:
        n = min(n, kmax + 1)
    out = np.zeros((*np.broadcast_shapes(a.shape[:-1], b.shape[:-1]), n))
    for i in range(min(a.shape[-1], n)):
        j = min(b.shape[-1], n - i)
        out[..., i:i + j] += a[..., i:i + 1] * b[..., :j]
    return out


def _round_coefs(rounds: Any, p: Any, w_total: Any, w_crit: float, kmax: int) -> np.ndarray:
    """``M[..., k] = R!/(R-k)! (p/W)^k (1 - p S/W)^(R-k)``: the weight of ``[y^k]`` of the components' product.

    Broadcasts ``rounds``, ``p`` and ``w_total``; ``k`` runs to ``kmax`` (0 beyond ``R``).
    """
    rounds, p, w_total = np.broadcast_arrays(np.asarray(rounds, float), np.asarray(p, float), np.asarray(w_total, float))
    k = np.arange(kmax + 1, dtype=float)
    falling = np.cumprod(np.concatenate([np.ones((*rounds.shape, 1)),
                                         np.maximum(rounds[..., None] - k[:-1], 0.0)], axis=-1), axis=-1)
    miss = 1.0 - p * w_crit / w_total
    expo = np.maximum(rounds[..., None] - k, 0.0)
    return falling * (p / w_total)[..., None] ** k * miss[..., None] ** expo


def _sheet(raw: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The drone sheet's damage ``max(1, raw - min(r, int(raw * 0.65)))`` for reductions ``r = int(DEF * f)``."""
    return np.maximum(1.0, raw - np.minimum(r, np.floor(raw * cg.REDUCTION_CAP)))


def _reduction(spec: Mapping, values) -> np.ndarray:
    """``int(DEF * def_reduction_factor)`` as the sheet computes it."""
    return np.floor(np.asarray(values, float) * float(spec["def_reduction_factor"]))


def _floor_uniform_pmf(lo: float, hi: float, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Values and probabilities of ``int(U(lo, hi) * scale)`` (each integer's share of the interval)."""
    a, b = lo * scale, hi * scale
    ks = np.arange(math.floor(a), math.ceil(b))
    length = np.minimum(ks + 1.0, b) - np.maximum(ks.astype(float), a)
    keep = length > 0
    return ks[keep].astype(float), length[keep] / (b - a)


def _comp_poly(spec: Mapping, comp: str, def_values: np.ndarray, hp_dists: Sequence[tuple[np.ndarray, np.ndarray]],
               cdf: np.ndarray, thr: np.ndarray, nmax: int) -> np.ndarray:
    """Per-component polynomial ``a[m, d, e, n] = E[alive * q(n)] w^n / n!``.

    ``hp_dists[e]`` is, per DEF value ``d``, the law of the component's HP after the environment
    (``(hp (d, j), prob (d, j))``) in environment context ``e``; ``cdf`` the summed-hit laws per
    damage modifier ``m`` (:func:`_sum_cdfs`).
    """
    w = cg.TARGET_WEIGHTS.get(comp, 1.0)
    r = _reduction(spec, def_values).astype(int)
    n = min(nmax, cdf.shape[1] - 1)
    out = np.zeros((cdf.shape[0], len(def_values), len(hp_dists), nmax + 1))
    fact = np.array([w ** k / math.factorial(k) for k in range(n + 1)])
    for e, (hp, prob) in enumerate(hp_dists):
        hp = np.asarray(hp, int)
        t = thr[np.clip(hp, 0, thr.shape[0] - 1), r[:, None]]                     # (d, j)
        q = _survive_probs(cdf[:, :n + 1], t)                                    # (m, n, d, j)
        alive = (hp > 0) * np.asarray(prob)                                       # (d, j)
        out[:, :, e, :n + 1] = np.einsum("mndj,dj->mdn", q, alive) * fact
    return out


def _crit_products(tables: Sequence[np.ndarray], combos: np.ndarray, kmax: int) -> np.ndarray:
    """``P[i, ctx, k]``: ``[y^k]`` of the product of the critical components' polynomials for design ``combos[i]``.

    ``tables[j][d, ctx, n]`` is component ``j``'s polynomial at its ``d``-th DEF value.
    """
    a, b, c, d = (tables[j][combos[:, j]] for j in range(4))
    return _poly_mul(_poly_mul(a, b), _poly_mul(c, d), kmax)


# --- the antenna SCM --------------------------------------------------------------------------------
def _wind_cats(lo: float, hi: float, p: Mapping) -> list[tuple[str, bool, float]]:
    """(tier, wind > 50, probability) of a wind uniform on ``[lo, hi)``: the antenna SCM's wind tiers."""
    cuts = sorted({lo, hi, *(x for x in (p["wind_threshold_low"], p["wind_threshold_high"], 50.0) if lo < x < hi)})
    out = []
    for a, b in itertools.pairwise(cuts):
        mid = 0.5 * (a + b)
        tier = "high" if mid > p["wind_threshold_high"] else "mid" if mid > p["wind_threshold_low"] else "none"
        out.append((tier, bool(mid > 50), (b - a) / (hi - lo)))
    return out


def _tier_raw(comp: str, tier: str) -> tuple[np.ndarray, np.ndarray]:
    """The antenna SCM's raw tier damage to a non-critical component: values and probabilities."""
    if tier == "none":
        return np.zeros(1), np.ones(1)
    hi, md = cg.ANTENNA_TIER_DAMAGE[comp]
    return _floor_uniform_pmf(*(hi if tier == "high" else md))


def _mitigated(raw: np.ndarray, def_value: np.ndarray, factor: float) -> np.ndarray:
    """The antenna SCM's own mitigation of a tier damage (``antenna_trap_scm.py``)."""
    red = np.minimum(np.floor(def_value * factor), np.floor(raw * cg.TIER_MITIGATION_CAP))
    return np.where(raw > 0, np.maximum(1, raw - red), 0.0)


class _Antenna:
    """The antenna SCM's survival, split into critical-component polynomials and context weights."""

    CRIT_ENV = {c: ("w50" if c in ("engine", "wing") else "w07", cg.ANTENNA_CRITICAL_DAMAGE[c]) for c in cg.CRITICAL}

    def __init__(self, spec: Mapping):
        self.spec = spec
        self.p = p = spec["scm"]
        comps = spec["components"]
        self.comps = list(comps)
        self.hp = {c: int(comps[c]["hp"]) for c in comps}
        self.w_crit = sum(cg.TARGET_WEIGHTS.get(c, 1.0) for c in cg.CRITICAL)
        # regions of the weather pattern u: (weather low, high, density per unit of weather, wind range)
        cut = 1 - p["storm_probability"]
        regions = [(cut, 1.0, 1.0, (40.0, 80.0)), (0.0, cut * 0.5, 2.0, (5.0, 30.0))]
        self.parts = []          # (w_lo, w_hi, density, w07, [(tier, w50, prob)])
        for wlo, whi, dens, wind in regions:
            if whi <= wlo:
                continue
            cats = _wind_cats(*wind, p)
            for a, b, w07 in ((wlo, min(whi, 0.7), False), (max(wlo, 0.7), whi, True)):
                if b > a:
                    self.parts.append((a, b, dens, w07, cats))
        self.gun_hp = self.hp["gun"]
        self.dms = np.array([p["gun_destroyed_damage_penalty"] if h <= 0 else
                             1 - p["gun_damage_reduction"] * min(1.0, h / 30.0) for h in range(self.gun_hp + 1)])
        hp_max = max(self.hp[c] for c in cg.CRITICAL)
        self.r_max = int(_reduction(spec, int(spec["def_cap"])))
        self.smax = hp_max + self.r_max + 2
        self.cdf = _sum_cdfs(self.dms, self.smax)
        self.thr = _thresholds(hp_max, self.r_max, self.smax)
        self.nmax = self.cdf.shape[1] - 2          # the last n of cdf has P = 0 below smax
        self.kmax = 4 * self.nmax
        self.rmax = cg.max_rounds(spec)

    # ... critical components
    def crit_tables(self, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Per critical component: ``a[d, ctx, n]``, ctx = (gun HP as the SCM sees it, wind > 50, weather > 0.7)."""
        out = []
        for c in cg.CRITICAL:
            vals = np.asarray(values[c])
            ind, (lo, hi) = self.CRIT_ENV[c]
            hit = []
            for d in vals:
                scale = 1.0 + (1.0 - d / 15.0) if d < 15 else 1.0
                raw, pr = _floor_uniform_pmf(lo, hi, scale)
                hp = np.maximum(0.0, self.hp[c] - _sheet(raw, _reduction(self.spec, d)))
                hit.append((hp, pr))
            width = max(len(h) for h, _ in hit)
            hp_hit = np.zeros((len(vals), width))
            pr_hit = np.zeros((len(vals), width))
            for i, (h, pr) in enumerate(hit):
                hp_hit[i, :len(h)], pr_hit[i, :len(h)] = h, pr
            none = (np.full((len(vals), 1), float(self.hp[c])), np.ones((len(vals), 1)))
            a = _comp_poly(self.spec, c, vals, [none, (hp_hit, pr_hit)], self.cdf, self.thr, self.nmax)  # (m, d, 2, n)
            # ctx = (m, w50, w07): this component reads its own indicator
            full = np.zeros((len(vals), len(self.dms), 2, 2, self.nmax + 1))
            a = a.transpose(1, 0, 2, 3)                                            # (d, m, e, n)
            if ind == "w50":
                full[:] = a[:, :, :, None, :]
            else:
                full[:] = a[:, :, None, :, :]
            out.append(full.reshape(len(vals), -1, self.nmax + 1))
        return out

    # ... the rest of the design
    def _noncrit(self, comp: str, tier: str, values: np.ndarray, factor: float, fly_hp: bool):
        """Law of a non-critical component's HP as the SCM sees it (and whether the sheet leaves it HP): ``(d, hp[, alive])``."""
        raw, pr = _tier_raw(comp, tier)
        hp_max = self.hp[comp]
        vals = np.asarray(values, float)
        dmg = _mitigated(raw[None, :], vals[:, None], factor)                    # (d, j)
        scm_hp = np.maximum(0.0, hp_max - dmg).astype(int)
        if not fly_hp:
            law: np.ndarray = np.zeros((len(vals), hp_max + 1))
            for i in range(len(vals)):
                np.add.at(law[i], scm_hp[i], pr)
            return law
        sheet = np.maximum(0.0, hp_max - _sheet(dmg, _reduction(self.spec, vals)[:, None]))
        alive = np.where(dmg > 0, sheet > 0, True).astype(int)
        law = np.zeros((len(vals), hp_max + 1, 2))
        for i in range(len(vals)):
            np.add.at(law[i], (scm_hp[i], alive[i]), pr)
        return law

    def _weather_integrals(self, a: float, b: float, dens: float):
        """``D[s, R]`` (integral of density * detection where the combat has R rounds) and ``U[s]`` (of 1 - detection).

        ``s`` runs over the detection laws: emitting with antenna HP 1..50, then not emitting with camera HP 0..hp.
        """
        p = self.p
        st = []
        for h in range(1, self.hp["antenna"] + 1):
            sig = min(1.0, h / 50.0)
            st.append((p["base_detection_clear"] + p["antenna_emission_boost"] * sig,
                       p["base_detection_storm"] - p["base_detection_clear"], 1.8))
        for h in range(self.hp["camera"] + 1):
            if h > 0:
                stealth = p["stealth_mode_reduction"] * (1 - p["camera_evasion_bonus"] * min(1.0, h / 20.0))
            else:
                stealth = p["stealth_mode_reduction"] * p["camera_destroyed_detection_penalty"]
            st.append((p["base_detection_clear"] * stealth, (p["base_detection_storm"] - p["base_detection_clear"]) * stealth,
                       0.3))
        ci, cs = p["combat_intensity_clear"], p["combat_intensity_storm"]
        D = np.zeros((len(st), self.rmax + 1))
        U = np.zeros(len(st))
        lo_c, hi_c = cg.DETECTION_CLAMP
        for i, (al, be, fac) in enumerate(st):
            cuts = {a, b}
            slope = 10 * fac * (cs - ci)
            if slope:
                for j in range(int(math.floor(10 * fac * min(ci, cs))) - 1, int(math.ceil(10 * fac * max(ci, cs))) + 2):
                    w = (j / (10 * fac) - ci) / (cs - ci)
                    if a < w < b:
                        cuts.add(w)
            if be:
                for c in (lo_c, hi_c):
                    w = (c - al) / be
                    if a < w < b:
                        cuts.add(w)
            xs = np.array(sorted(cuts))
            mid = 0.5 * (xs[:-1] + xs[1:])
            length = np.diff(xs) * dens
            det = np.clip(al + be * mid, lo_c, hi_c)
            combat = ci * (1 - mid) + cs * mid
            rounds = np.maximum(1, np.floor(10 * (combat * fac))).astype(int)
            np.add.at(D[i], rounds, length * det)
            U[i] = float((length * (1 - det)).sum())
        return D, U

    def context_weights(self, values: Mapping[str, np.ndarray], totals: np.ndarray) -> np.ndarray:
        """``B[t, a, c, g, ctx, k]``: the weight of ``[y^k]`` in each context ctx of the critical tables.

        ``a``, ``c``, ``g`` index the antenna, camera and gun DEF ``values``, ``t`` the total DEF
        ``totals``. Sums over the weather pattern (piecewise, split where the round count, the
        clamped detection or the body damage change), the wind tier and the tier damages.
        """
        p = self.p
        av, cv, gv = (np.asarray(values[c]) for c in ("antenna", "camera", "gun"))
        n_ant, n_cam = self.hp["antenna"], self.hp["camera"]
        w = cg.TARGET_WEIGHTS
        out = np.zeros((len(totals), len(av), len(cv), len(gv), len(self.dms), 2, 2, self.kmax + 1))
        cam_h = np.arange(n_cam + 1)
        acc = np.where(cam_h > 0, 1 - p["camera_evasion_bonus"] * np.minimum(1.0, cam_h / 20.0),
                       p["camera_destroyed_detection_penalty"])
        # W by (emitting, camera alive, gun alive)
        others = sum(w.get(c, 1.0) for c in self.comps if c not in cg.CRITICAL and c not in ("antenna", "camera", "gun"))
        wt = np.array([[[self.w_crit + others + w["antenna"] * e + w["camera"] * ca + w["gun"] * ga
                         for ga in (0, 1)] for ca in (0, 1)] for e in (0, 1)])
        pmf_cache: dict[tuple[str, str], np.ndarray] = {}
        for wlo, whi, dens, w07, cats in self.parts:
            D, U = self._weather_integrals(wlo, whi, dens)
            # per antenna HP (0..n_ant) and camera HP (0..n_cam): the detection law's index
            idx = np.zeros((n_ant + 1, n_cam + 1), int)
            idx[1:, :] = np.arange(n_ant)[:, None]
            idx[0, :] = n_ant + cam_h
            Dfull, Ufull = D[idx], U[idx]                                           # (ant, cam, R), (ant, cam)
            emit = (np.arange(n_ant + 1) > 0).astype(int)
            for t, total in enumerate(totals):
                pk = cg.hit_chance(self.spec, float(total), acc)                    # (cam,)
                M = _round_coefs(np.arange(self.rmax + 1)[None, None, None, None, :], pk[:, None, None, None, None],
                                 wt[None, :, :, :, None], self.w_crit, self.kmax)   # (cam, e, ca, ga, R, k)
                coef = np.zeros((n_ant + 1, n_cam + 1, 2, 2, self.kmax + 1))
                for e in (0, 1):
                    rows = emit == e
                    coef[rows] = np.einsum("acr,cxyrk->acxyk", Dfull[rows], M[:, e])
                coef[..., 0] += Ufull[:, :, None, None]
                for tier, w50, prob in cats:
                    key_a, key_c, key_g = ("antenna", tier), ("camera", tier), ("gun", tier)
                    if key_a not in pmf_cache:
                        pmf_cache[key_a] = self._noncrit("antenna", tier, av, p["antenna_def_factor"], False)
                        pmf_cache[key_c] = self._noncrit("camera", tier, cv, p["camera_def_factor"], True)
                        pmf_cache[key_g] = self._noncrit("gun", tier, gv, p["gun_def_factor"], True)
                    pa, pc, pg = pmf_cache[key_a], pmf_cache[key_c], pmf_cache[key_g]
                    x = np.einsum("Aa,acxyk->Acxyk", pa, coef)
                    y = np.einsum("Ccx,Acxyk->ACyk", pc, x)
                    z = np.einsum("Ggy,ACyk->ACGgk", pg, y)
                    out[t, :, :, :, :, int(w50), int(w07)] += prob * z
        return out.reshape((*out.shape[:4], -1, self.kmax + 1))


def _antenna_survival(model: _Antenna, d: Mapping[str, Any]) -> float:
    """Exact survival of one filled design under the antenna SCM."""
    vals = {c: np.array([int(d[c])]) for c in model.comps}
    total = sum(int(d[c]) for c in model.comps)
    P = _crit_products(model.crit_tables(vals), np.zeros((1, 4), int), model.kmax)[0]
    B = model.context_weights(vals, np.array([total]))[0, 0, 0, 0]
    return float((B * P).sum())


def _antenna_lattice(model: _Antenna, values: np.ndarray, budget: int):
    """Survival of every lattice design: yields ``(rest (n, 3) antenna/camera/gun indices, crit (m, 4), F (n, m))``."""
    tabs = model.crit_tables(dict.fromkeys(cg.CRITICAL, values))
    combos, sums = _combos(4, values, budget)
    rest, rsum = _combos(3, values, budget)
    prods: dict[int, np.ndarray] = {
        int(s): _crit_products(tabs, combos[sums == s], model.kmax).reshape(int((sums == s).sum()), -1)
        for s in np.unique(sums)}
    used = np.any([np.any(x != 0, axis=0) for x in prods.values()], axis=0)      # columns some design reads
    prods = {s: x[:, used] for s, x in prods.items()}
    for total in sorted({int(v) for v in np.unique(sums[:, None] + rsum[None, :]) if v <= budget}):
        B = model.context_weights({"antenna": values, "camera": values, "gun": values}, np.array([total]))[0]
        for t in np.unique(rsum[rsum <= total]):
            s = total - int(t)
            if s not in prods:
                continue
            r = rest[rsum == t]
            yield r, combos[sums == s], B[r[:, 0], r[:, 1], r[:, 2]].reshape(len(r), -1)[:, used] @ prods[s].T


# --- the weather-noise SCM ----------------------------------------------------------------------------
def _weather_combat(spec: Mapping, values: np.ndarray) -> dict[str, np.ndarray]:
    """Per critical component and DEF value: ``w_c * (1 - q_c(1))``, its share of a one-round kill."""
    hp_max = max(int(spec["components"][c]["hp"]) for c in cg.CRITICAL)
    r_max = int(_reduction(spec, int(spec["def_cap"])))
    smax = hp_max + r_max + 2
    cdf = _sum_cdfs(np.ones(1), smax)
    thr = _thresholds(hp_max, r_max, smax)
    out = {}
    for c in cg.CRITICAL:
        t = thr[int(spec["components"][c]["hp"]), _reduction(spec, values).astype(int)]
        out[c] = cg.TARGET_WEIGHTS.get(c, 1.0) * (1.0 - cdf[0, 1, t - 1])
    return out


def _weather_factors(spec: Mapping, antenna, engine, total, stage: int) -> tuple[np.ndarray, np.ndarray]:
    """``(pre, c)`` with survival ``pre * (1 - c * k)``, ``k`` the critical components' summed kill shares.

    ``pre`` is the chance of surviving the SCM's roll (a function of the antenna and engine DEF),
    ``c`` detection times the hit chance at the total DEF over the summed target weight. A survivor
    of the roll keeps every component's HP, so it meets combat with every component a target,
    detection 0.5 and ``max(1, int(10 * 0))`` = 1 round.
    """
    w_all = sum(cg.TARGET_WEIGHTS.get(c, 1.0) for c in spec["components"])
    det = float(np.clip(0.5, *cg.DETECTION_CLAMP))
    storm = spec["scm"][f"storm_probability_stage{stage}"]
    ant, eng = np.asarray(antenna, float), np.asarray(engine, float)
    bonus = 0.3 * np.clip((eng - 10) / 20.0, 0.0, 1.0)
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    pre = storm * np.minimum(1.0, sig(ant / 30.0 * 2.5 - 4) + bonus) + (1 - storm) * np.minimum(
        1.0, sig(ant / 30.0 * -2.5 - 4) + bonus)
    return pre, det * cg.hit_chance(spec, total, 1.0) / w_all


def _weather_survival(spec: Mapping, designs: Mapping[str, np.ndarray], stage: int) -> np.ndarray:
    """Exact survival of designs given as DEF arrays per component (the weather SCM: its roll, then one round)."""
    total = sum(np.asarray(designs[c]) for c in spec["components"])
    kill = sum(_weather_combat(spec, np.asarray(designs[c]))[c] for c in cg.CRITICAL)
    pre, c = _weather_factors(spec, designs["antenna"], designs["engine"], total, stage)
    return pre * (1.0 - c * kill)


# --- the deployment-zone SCM -------------------------------------------------------------------------
_BANDS = ("low", "medium", "high")


def _zone_probs(spec: Mapping, stage: int) -> dict[str, float]:
    """The zones' probabilities at ``stage`` (normalised, as ``rng.choice`` does)."""
    zones = spec["zones"]
    staged = f"stage{stage}_probability"
    key = staged if all(staged in v for v in zones.values()) else "probability"
    w = {z: float(v.get(key, 0.0)) for z, v in zones.items()}
    total = sum(w.values())
    return {z: x / total for z, x in w.items() if x > 0}


@dataclass
class _Nodes:
    """Quadrature nodes of the EMI integral of one design's zones (every array indexed by node)."""

    wt: np.ndarray           # probability weight
    band: np.ndarray         # index into _BANDS
    eff: np.ndarray
    cfp: np.ndarray
    det: np.ndarray
    rounds: np.ndarray
    ant_alive: np.ndarray
    cam_on: np.ndarray
    cam_raw: np.ndarray
    dm: np.ndarray
    segw: np.ndarray         # (node, 1 + segments): no crash (1 - cfp), then 2.5 x overlap of each severity segment


class ZoneBlock(NamedTuple):
    """Designs of the zone model's lattice that share a flight profile, shield and camera DEF and critical DEF sum."""

    profile: str | None      # the flight profile (None: the scenario has none)
    shield: int
    camera: int
    total: int               # DEF spent in all
    rows: np.ndarray         # (n, 4): the critical components' DEF as indices into the lattice's values
    bound: np.ndarray        # (n,): each design's survival bound (the damage modifier taken as 1)
    exact: bool              # whether the bound is the survival (no EMI above 0.5)


class _Zone:
    """The deployment-zone SCM's survival, split into critical-component polynomials and context weights."""

    def __init__(self, spec: Mapping, stage: int = 2):
        self.spec = spec
        self.p = p = spec["scm"]
        comps = spec["components"]
        self.comps = list(comps)
        self.hp = {c: int(comps[c]["hp"]) for c in comps}
        self.probs = _zone_probs(spec, stage)
        self.thr, self.rate = float(p["emi_threshold"]), float(p["emi_base_failure_rate"])
        self.w_crit = sum(cg.TARGET_WEIGHTS.get(c, 1.0) for c in cg.CRITICAL)
        # severity segments: the crash damages floor(k * s) are constant on each
        cuts = {0.0, 0.95}
        for k in cg.ZONE_CRASH_DAMAGE.values():
            cuts.update(j / k for j in range(1, int(0.95 * k) + 1) if j / k < 0.95)
        self.seg_edges = np.array(sorted(cuts))
        mids = 0.5 * (self.seg_edges[:-1] + self.seg_edges[1:])
        # per critical component (1 + segments,)
        self.seg_damage = {c: np.concatenate([[0.0], np.floor(k * mids)]) for c, k in cg.ZONE_CRASH_DAMAGE.items()}
        hp_max = max(self.hp[c] for c in cg.CRITICAL)
        self.r_max = int(_reduction(spec, int(spec["def_cap"])))
        self.smax = hp_max + self.r_max + 2
        self.thr_table = _thresholds(hp_max, self.r_max, self.smax)
        self.nmax = _sum_cdfs(np.ones(1), self.smax).shape[1] - 2    # dm >= 1: the fewest hits that can kill
        self.kmax = 4 * self.nmax

    # ... the design's effective EMI protection
    def total_reduction(self, d: Mapping[str, Any]) -> float:
        """``min(0.95, shield reduction + equipment resistance)`` of a filled design."""
        p = self.p
        shield = d.get("shield", 0) if p.get("shield_counts", True) else 0
        shield_red = min(shield * p["shield_effectiveness"], p["max_shield_reduction"])
        return min(0.95, shield_red + cg.equipment_resistance(self.spec, d))

    def _cuts(self, band: str, lo: float, hi: float, exact_dm: bool) -> np.ndarray:
        """Every point of ``(lo, hi)`` where the integrand's piece changes (sorted, with ``lo`` and ``hi``)."""
        thr, rate, alt = self.thr, self.rate, cg.ZONE_ALTITUDE_FAILURE[band]
        pts = [thr, 0.4, 0.5]
        pts += [thr + j / 80.0 for j in range(1, int(max(0.0, hi - thr) * 80) + 2)]
        if rate > 0:
            levels = [0.0, 0.5, 0.95, *self.seg_edges, *(self.seg_edges / 0.6)]
            pts += [thr + (c - alt) / rate for c in levels]
        if exact_dm and hi > 0.5:
            dm_hi = 1.0 + (hi - 0.5) * 0.5
            for v in np.unique(_HIT_VALS):
                js = np.arange(math.floor(v) + 1, math.floor(v * dm_hi) + 2)
                pts += list(0.5 + 2.0 * (js / v - 1.0))
        pts_a = np.array(pts)
        pts_a = pts_a[(pts_a > lo) & (pts_a < hi)]
        return np.unique(np.concatenate([[lo, hi], pts_a]))

    def nodes(self, tr: float, profile: str | None, exact_dm: bool) -> _Nodes:
        """Nodes and weights integrating over every zone and its EMI, for total EMI reduction ``tr``."""
        effs: list[np.ndarray] = []
        wts: list[np.ndarray] = []
        bands: list[np.ndarray] = []
        scale = 1.0 - tr
        for z, pz in self.probs.items():
            zone = self.spec["zones"][z]
            band = profile or zone["altitude_band"]
            b = _BANDS.index(band)
            e0 = float(zone["emi_level"])
            lo, hi = e0 - 0.1, e0 + 0.1
            dens = pz / (hi - lo)
            for at, mass in ((0.0, -lo), (scale, hi - 1)):     # emi clipped at 0 or 1: a point mass there
                if mass > 0:
                    effs.append(np.array([at]))
                    wts.append(np.array([dens * mass]))
                    bands.append(np.array([b]))
            a, c = max(lo, 0.0) * scale, min(hi, 1.0) * scale
            if c <= a:
                continue
            xs = self._cuts(band, a, c, exact_dm)
            length = np.diff(xs)
            node = (xs[:-1, None] + length[:, None] * _GL_X[None, :]).ravel()
            effs.append(node)
            wts.append((length[:, None] * _GL_W[None, :]).ravel() * dens / scale)
            bands.append(np.full(len(node), b))
        eff, wt, band_i = np.concatenate(effs), np.concatenate(wts), np.concatenate(bands)
        alt = np.array([cg.ZONE_ALTITUDE_FAILURE[x] for x in _BANDS])[band_i]
        cfp = np.clip(np.where(eff < self.thr, 0.0, (eff - self.thr) * self.rate) + alt, 0.0, 0.95)
        det = np.clip(0.20 + cfp * 0.5, *cg.DETECTION_CLAMP)
        rounds = np.maximum(1, np.floor(cg.BASE_ROUNDS * np.where(cfp > 0.5, 1.8, 1.0))).astype(int)
        over = eff > self.thr
        emi_damage = np.where(over, np.floor((eff - self.thr) * 80), 0.0)
        ant_alive = self.hp.get("antenna", 0) - emi_damage > 0
        cam_on = over & (eff > 0.4)
        cam_raw = np.floor(emi_damage * 0.6)
        dm = np.where(eff > 0.5, 1.0 + (eff - 0.5) * 0.5, 1.0)
        edges = self.seg_edges
        ov = np.clip(np.minimum(edges[None, 1:], cfp[:, None]) - np.maximum(edges[None, :-1], 0.6 * cfp[:, None]), 0.0, None)
        segw = np.concatenate([(1.0 - cfp)[:, None], np.where(cfp[:, None] > 0, ov / 0.4, 0.0)], axis=1)
        return _Nodes(wt, band_i, eff, cfp, det, rounds, ant_alive, cam_on, cam_raw, dm, segw)

    def coefs(self, nd: _Nodes, camera: int, total: int) -> np.ndarray:
        """``coef[node, k]``: the weight of ``[y^k]`` at each node for camera DEF ``camera`` and total DEF ``total``."""
        p = cg.hit_chance(self.spec, float(total), 1.0)
        out = nd.det[:, None] * _round_coefs(nd.rounds, p, self._w_total(nd, camera), self.w_crit, self.kmax)
        out[:, 0] += 1.0 - nd.det
        return out

    def crit_tables(self, values: Mapping[str, np.ndarray], dms: np.ndarray) -> list[np.ndarray]:
        """Per critical component: ``a[d, m, band, seg, n]`` for damage modifiers ``dms``."""
        awd = self.p["altitude_wind_damage"]
        cdf = _sum_cdfs(dms, self.smax)
        out = []
        for c in cg.CRITICAL:
            vals = np.asarray(values[c])
            r = _reduction(self.spec, vals)[:, None, None]
            dists = []
            for band in _BANDS:
                if c == "engine" and band == "high" and awd["high"] > 0:
                    wind = _floor_uniform_pmf(5, 15)
                elif c == "wing" and band == "high" and awd["high"] > 0:
                    wind = _floor_uniform_pmf(8, 20)
                elif c == "wing" and band == "medium" and awd["medium"] > 0:
                    wind = _floor_uniform_pmf(3, 10)
                else:
                    wind = None
                for seg, crash in enumerate(self.seg_damage[c]):
                    if wind is None and seg == 0:
                        hp = np.full((len(vals), 1), float(self.hp[c]))
                        pr = np.ones((len(vals), 1))
                    else:
                        wv, wp = wind if wind is not None else (np.zeros(1), np.ones(1))
                        raw = (wv + crash)[None, :, None]
                        hp = np.maximum(0.0, self.hp[c] - _sheet(raw, r))[:, :, 0]
                        pr = np.broadcast_to(wp[None, :], hp.shape)
                    dists.append((hp, pr))
            a = _comp_poly(self.spec, c, vals, dists, cdf, self.thr_table, self.nmax)        # (m, d, band*seg, n)
            out.append(a.transpose(1, 0, 2, 3).reshape(len(vals), len(dms), len(_BANDS), -1, self.nmax + 1))
        return out

    def survival(self, d: Mapping[str, Any]) -> float:
        """Exact survival of one filled design (every piece of the damage modifier apart)."""
        nd = self.nodes(self.total_reduction(d), d.get("flight_profile"), exact_dm=True)
        total = sum(int(d[c]) for c in self.comps)
        coef = self.coefs(nd, int(d.get("camera", 0)), total)
        amounts = np.floor(_HIT_VALS[None, :] * nd.dm[:, None])
        uniq, inv = np.unique(amounts, axis=0, return_index=False, return_inverse=True)
        inv = inv.ravel()
        first = np.zeros(len(uniq), int)
        first[inv[::-1]] = np.arange(len(inv))[::-1]
        tabs = self.crit_tables({c: np.array([int(d[c])]) for c in cg.CRITICAL}, nd.dm[first])
        prod = _poly_mul(_poly_mul(tabs[0][0], tabs[1][0]), _poly_mul(tabs[2][0], tabs[3][0]), self.kmax)  # (m, band, seg, k)
        per = prod[inv, nd.band]                                                  # (node, seg, k)
        return float(np.einsum("i,is,ik,isk->", nd.wt, nd.segw, coef, per))

    def class_weights(self, nd: _Nodes, camera: int) -> tuple[list[tuple[int, float]], np.ndarray, np.ndarray]:
        """The nodes' weights grouped by combat class for camera DEF ``camera``.

        Returns the classes ``(rounds, W)``, ``G[class, band, seg]`` (sum of weight * detection *
        segment weight) and ``U[band, seg]`` (of weight * (1 - detection) * segment weight).
        """
        wtot = self._w_total(nd, camera)
        keys = np.stack([nd.rounds.astype(float), wtot], axis=1)
        classes, cls = np.unique(keys, axis=0, return_inverse=True)
        cls = cls.ravel()
        G = np.zeros((len(classes), len(_BANDS), nd.segw.shape[1]))
        np.add.at(G, (cls, nd.band), (nd.wt * nd.det)[:, None] * nd.segw)
        U = np.zeros((len(_BANDS), nd.segw.shape[1]))
        np.add.at(U, nd.band, (nd.wt * (1 - nd.det))[:, None] * nd.segw)
        return [(int(r), float(w)) for r, w in classes], G, U

    def lattice(self, values: np.ndarray, budget: int, equip: Mapping[str, Any]):
        """Survival bounds of every design spending DEF on the critical components, the camera and the shield.

        The bound takes the damage modifier as 1 (survival falls as it grows), so it is exact for a
        design whose EMI never exceeds 0.5. Yields, per flight profile, shield and camera DEF and
        sum of the critical DEFs, a :class:`ZoneBlock`.
        """
        tabs = [t[:, 0] for t in self.crit_tables(dict.fromkeys(cg.CRITICAL, values), np.ones(1))]   # (d, band, seg, n)
        combos, sums = _combos(4, values, budget)
        by_sum = {int(s): combos[sums == s] for s in np.unique(sums)}
        prods: dict[int, np.ndarray] = {}
        profiles = [None, *self.spec.get("flight_profiles", [])]
        shields = values if "shield" in self.hp and self.p.get("shield_counts", True) else np.zeros(1, int)
        cams = values if "camera" in self.hp else np.zeros(1, int)
        for prof in profiles:
            for sh in shields:
                nd = self.nodes(self.total_reduction({"shield": int(sh), **equip}), prof, exact_dm=False)
                exact = bool(np.all(nd.dm == 1.0))
                used = np.unique(nd.band)
                for cm in cams:
                    spent = int(sh) + int(cm)
                    if spent > budget:
                        continue
                    classes, G, U = self.class_weights(nd, int(cm))
                    G, U = G[:, used], U[used]
                    for s, rows in by_sum.items():
                        if s > budget - spent:
                            continue
                        total = spent + s
                        p = cg.hit_chance(self.spec, float(total), 1.0)
                        M = np.stack([_round_coefs(r, p, w, self.w_crit, self.kmax) for r, w in classes])   # (class, k)
                        B = np.einsum("cbs,ck->bsk", G, M)
                        B[..., 0] += U
                        if s not in prods:
                            prods[s] = _crit_products(tabs, rows, self.kmax)                          # (n, band, seg, k)
                        yield ZoneBlock(prof, int(sh), int(cm), total, rows,
                                        np.einsum("bsk,nbsk->n", B, prods[s][:, used]), exact)

    def _w_total(self, nd: _Nodes, camera: int) -> np.ndarray:
        """Summed target weight of the components alive at the start of combat, per node."""
        w = cg.TARGET_WEIGHTS
        cam_alive: np.ndarray = np.ones(len(nd.eff), bool)
        if "camera" in self.hp:
            dealt = _sheet(nd.cam_raw, _reduction(self.spec, camera))
            cam_alive = np.where(nd.cam_on, self.hp["camera"] - dealt > 0, True)
        wtot: np.ndarray = np.full(len(nd.eff), self.w_crit)
        for c in self.comps:
            if c not in cg.CRITICAL:
                alive = nd.ant_alive if c == "antenna" else cam_alive if c == "camera" else True
                wtot = wtot + w.get(c, 1.0) * alive
        return wtot


def _combos(n: int, values: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ``n``-tuple of indices into ``values`` whose values sum to at most ``budget``, and the sums."""
    idx: np.ndarray = np.zeros((1, 0), dtype=np.int64)
    sums: np.ndarray = np.zeros(1, dtype=np.int64)
    for _ in range(n):
        idx = np.concatenate([np.column_stack([idx, np.full(len(idx), k)]) for k in range(len(values))])
        sums = np.concatenate([sums + v for v in values])
        keep = sums <= budget
        idx, sums = idx[keep], sums[keep]
    return idx, sums


# --- the public functions ---------------------------------------------------------------------------
@dataclass
class ExactOptimum:
    """The exact optimum of a CausalGame scenario over its design lattice (:func:`exact_optimum`).

    ``design`` names every component, equipment slot and (when the scenario has them) the flight
    profile; ``runner_up`` is the best survival of a lattice design with another DEF vector
    (``runner_up_design``; a tie is possible). ``lattice_size`` counts the lattice's designs (DEF
    vectors in steps of ``step`` within the caps and the DEF budget, times every equipment choice
    and flight profile); ``evaluated`` the designs whose survival or bound was computed (the rest
    are dominated: see :func:`exact_optimum`), ``refined`` those of them computed again with the
    damage modifier's every piece (zone model).
    """

    scenario: str
    design: dict[str, Any]
    value: float
    runner_up: float
    runner_up_design: dict[str, Any]
    step: int
    lattice_size: int
    evaluated: int
    refined: int = 0
    seconds: float = 0.0
    stage: int = 2


def exact_survival(scn: cg.Scenario, design: Mapping[str, Any], stage: int = 2) -> float:
    """The exact probability that a drone of ``design`` returns from a flight of ``stage``.

    The share of a large fleet that :func:`~heuresis.causal.games.causalgame.fly` flies converges
    to this value.

    Parameters
    ----------
    scn : Scenario
        The scenario (any of the three models).
    design : Mapping
        Read as ``fly`` reads it: left-out components keep their default DEF, equipment its
        default, no flight profile the zone's altitude band. The DEF budget is not enforced
        (published strategies over it are valued too); the caps are.
    stage : int
        1 (exploration) or 2 (evaluation).

    Returns
    -------
    float
        The survival probability, exact up to floating-point rounding.
    """
    if stage not in (1, 2):
        raise ValueError(f"stage must be 1 or 2, got {stage!r}")
    d = scn.design(design, enforce_budget=False)
    if scn.model == "antenna":
        return _antenna_survival(_Antenna(scn.spec), d)
    if scn.model == "zone":
        return _Zone(scn.spec, stage).survival(d)
    return float(_weather_survival(scn.spec, {c: np.array([d[c]]) for c in scn.components}, stage)[0])


def _count(n: int, cap: int, budget: int) -> int:
    """Vectors of ``n`` integers in ``[0, cap]`` summing to at most ``budget``."""
    ways = [1] + [0] * budget
    for _ in range(n):
        new = [0] * (budget + 1)
        for s0, w in enumerate(ways):
            for x in range(min(cap, budget - s0) + 1) if w else ():
                new[s0 + x] += w
        ways = new
    return sum(ways)


def lattice_designs(scn: cg.Scenario, step: int = LATTICE_STEP) -> int:
    """Designs of the scenario's lattice: DEF multiples of ``step`` within the caps and the budget.

    Every equipment choice and flight profile (none, or each the scenario offers) multiplies them.
    """
    cap = int(scn.spec["def_cap"])
    budget = int(scn.spec.get("def_budget") or cap * len(scn.components))
    n = _count(len(scn.components), cap // step, budget // step)
    for cfg in scn.equipment.values():
        n *= len(cfg["options"])
    return n * (1 + len(scn.spec.get("flight_profiles") or []))


def _best_equipment(scn: cg.Scenario) -> dict[str, Any]:
    """Per equipment slot the choice of the largest EMI resistance (the default when it is one of them)."""
    out = {}
    for slot, cfg in scn.equipment.items():
        opts = cfg["options"]
        top = max(opts.values())
        out[slot] = cfg["default"] if opts[cfg["default"]] == top else next(o for o, v in opts.items() if v == top)
    return out


def _top2(best: list[tuple[float, Any, dict[str, Any]]], value: float, key: Any, item: dict[str, Any]) -> None:
    """Keep ``best`` the two best (value, key, item) of distinct keys (first seen wins a tie)."""
    for k, (v, kk, _) in enumerate(best):
        if kk == key:
            if value > v:
                best[k] = (value, key, item)
                best.sort(key=lambda t: -t[0])
            return
    best.append((value, key, item))
    best.sort(key=lambda t: -t[0])
    del best[2:]


class Lattice(NamedTuple):
    """The designs :func:`exact_optimum` values: each DEF a multiple of ``step`` up to ``cap``, the sum within ``budget``."""

    values: np.ndarray
    cap: int
    budget: int
    step: int


#: The two best designs of a lattice: (survival, DEF vector, design), best first.
Top2 = list[tuple[float, Any, dict[str, Any]]]


def _antenna_top(scn: cg.Scenario, lat: Lattice, stage: int) -> tuple[Top2, int, int]:
    """Antenna model: every lattice design valued (its flights do not depend on the stage)."""
    model, values, comps = _Antenna(scn.spec), lat.values, scn.components
    best: Top2 = []
    evaluated = 0
    for rest, rows, F in _antenna_lattice(model, values, lat.budget):
        evaluated += F.size
        flat = np.argpartition(F, F.size - 2, axis=None)[-2:] if F.size > 2 else np.arange(F.size)
        for f in flat:
            i, j = np.unravel_index(f, F.shape)
            d = {**dict(zip(cg.CRITICAL, (int(x) for x in values[rows[j]]))),
                 **dict(zip(("antenna", "camera", "gun"), (int(x) for x in values[rest[i]])))}
            _top2(best, float(F[i, j]), tuple(d[c] for c in comps), d)
    return best, evaluated, 0


def _weather_top(scn: cg.Scenario, lat: Lattice, stage: int) -> tuple[Top2, int, int]:
    """Weather model: every lattice design valued in one closed form."""
    comps, values = scn.components, lat.values
    idx, _ = _combos(len(comps), values, lat.budget)
    F = _weather_survival(scn.spec, {c: values[idx[:, k]] for k, c in enumerate(comps)}, stage)
    best: Top2 = []
    for f in np.argsort(-F, kind="stable")[:2]:
        d = {c: int(values[idx[f, k]]) for k, c in enumerate(comps)}
        _top2(best, float(F[f]), tuple(d[c] for c in comps), d)
    return best, len(F), 0


def _zone_top(scn: cg.Scenario, lat: Lattice, stage: int) -> tuple[Top2, int, int]:
    """Zone model: bounds of the designs without antenna and gun DEF, the best refined exactly (:func:`exact_optimum`)."""
    comps, values = scn.components, lat.values
    model = _Zone(scn.spec, stage)
    equip = _best_equipment(scn)
    blocks = list(model.lattice(values, lat.budget, equip))
    ub = np.concatenate([b.bound for b in blocks])
    where = np.concatenate([np.full(len(b.bound), k) for k, b in enumerate(blocks)])
    pos = np.concatenate([np.arange(len(b.bound)) for b in blocks])

    def design_of(b: ZoneBlock, j: int) -> dict[str, Any]:
        d: dict[str, Any] = dict.fromkeys(comps, 0)
        d.update(zip(cg.CRITICAL, (int(x) for x in values[b.rows[j]])))
        if "shield" in d:
            d["shield"] = b.shield
        if "camera" in d:
            d["camera"] = b.camera
        d.update(equip)
        if b.profile is not None:
            d["flight_profile"] = b.profile
        return d

    best: Top2 = []
    refined = 0
    for i in np.argsort(-ub, kind="stable"):
        if len(best) == 2 and ub[i] < best[1][0]:
            break
        block = blocks[int(where[i])]
        d = design_of(block, int(pos[i]))
        if block.exact:
            val = float(ub[i])
        else:
            val = model.survival(scn.design(d))
            refined += 1
        _top2(best, val, tuple(d[c] for c in comps), d)
    top = best[0][2]
    spare = [c for c in comps if c not in cg.CRITICAL and c not in ("camera", "shield")]
    if spare and sum(top[c] for c in comps) + lat.step <= lat.budget and top[spare[0]] + lat.step <= lat.cap:
        d = {**top, spare[0]: top[spare[0]] + lat.step}
        _top2(best, model.survival(scn.design(d)), tuple(d[c] for c in comps), d)
        refined += 1
    return best, len(ub), refined


#: Each game model's exact optimum over a lattice: the two best designs, designs valued or bounded, designs refined.
_TOP = {"antenna": _antenna_top, "weather": _weather_top, "zone": _zone_top}


def exact_optimum(scn: cg.Scenario, step: int = LATTICE_STEP, stage: int = 2) -> ExactOptimum:
    """The design of the largest exact survival over the scenario's lattice.

    The lattice: every DEF a multiple of ``step`` within the cap, their sum within the DEF budget,
    every equipment choice and flight profile. Antenna and weather models: every lattice design
    is valued. Zone model: survival depends on the antenna and gun DEF only through the total
    DEF, and falls as the total DEF grows (the hit chance grows) and as the effective EMI grows
    (more and worse crashes, more detection and rounds, a destroyed antenna or camera leaving
    more hits to the critical parts, a larger damage modifier); so an optimum spends nothing on
    the antenna and the gun and takes the equipment of the largest EMI resistance. Every such
    design (each critical DEF, camera, shield and flight profile) is bounded with the damage
    modifier taken as 1, its exact survival where its EMI never exceeds 0.5, and the designs
    whose bound could still beat the two best are valued exactly.

    Parameters
    ----------
    scn : Scenario
        The scenario.
    step : int
        The lattice's DEF step (default :data:`LATTICE_STEP`).
    stage : int
        The stage whose survival is maximised (2, the evaluation, by default).

    Returns
    -------
    ExactOptimum
        The optimal design, its survival, the best design with another DEF vector and the counts.
    """
    t0 = time.perf_counter()
    cap = int(scn.spec["def_cap"])
    lattice = Lattice(np.arange(0, cap + 1, step), cap, int(scn.spec.get("def_budget") or cap * len(scn.components)), step)
    best, evaluated, refined = _TOP[scn.model](scn, lattice, stage)
    (value, _, design), (runner, _, runner_design) = best[0], best[1]
    return ExactOptimum(scn.name, design, value, runner, runner_design, step, lattice_designs(scn, step), evaluated,
                        refined, time.perf_counter() - t0, stage)
