"""Exact survival and exact optima of CausalGame's games (heuresis.causal.games.exact; docs/games.md, "Optima").

The exact values are checked against the simulator (one seeded 20,000-drone fleet per design, within
four standard errors), the combat's generating functions against a brute-force enumeration, the
piecewise integration against a finer one, and each lattice optimum against lattice designs drawn
at random and valued one by one. The optima over the full integer lattice: the branch and bound
against an exhaustive valuation of shrunken lattices, its bound against random integer designs, and
the premises its bound rests on against the exact survival of random designs.
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest

from heuresis.causal.games import exact
from heuresis.causal.games.causalgame import Scenario, fly, hit_chance, load_cg, weather_pre_survival
from heuresis.causal.games.exact import LATTICE_STEP, exact_optimum, exact_survival
from heuresis.causal.games.exact_integer import integer_optimum

BASES = ["antenna_trap", "deployment_zone_trap_categorical", "deployment_zone_trap_env_shift", "weather_noise"]
N = 20_000


@pytest.fixture(scope="module")
def optima():
    return {name: exact_optimum(load_cg(name)) for name in BASES}


def _agrees(scn, design, seed: int, stage: int = 2) -> None:
    want = exact_survival(scn, design, stage)
    got = fly(scn, design, N, np.random.default_rng(seed), stage=stage, enforce_budget=False).survival
    se = math.sqrt(max(want * (1 - want), 1e-3) / N)
    assert abs(got - want) < 4 * se, (scn.name, design, stage, got, want)


# --- the exact survival against the simulator -----------------------------------------------------------
OFF_LATTICE = {"antenna_trap": {"engine": 12, "cockpit": 3, "wing": 31, "body": 7, "antenna": 2, "camera": 13, "gun": 9},
               "deployment_zone_trap_categorical": {"shield": 7, "camera": 13, "engine": 3, "wing": 1,
                                                    "enhancement_module": "thermal_shield"},
               "deployment_zone_trap_env_shift": {"flight_profile": "high", "shield": 12, "camera": 20,
                                                  "power_mode": "propulsion", "hull_coating": "shielded"},
               "weather_noise": {"antenna": 23, "engine": 17, "cockpit": 1}}


@pytest.mark.parametrize("name", BASES)
def test_exact_survival_is_what_large_fleets_fly(name, optima):
    """The standard, trap (if any) and optimal designs, every published strategy and a design off the lattice."""
    scn = load_cg(name)
    designs = [scn.spec["standard_design"], *([scn.spec["trap_design"]] if scn.spec.get("trap_design") else []),
               optima[name].design, OFF_LATTICE[name], *(s["design"] for s in (scn.spec.get("strategies") or {}).values())]
    for k, design in enumerate(designs):
        _agrees(scn, design, seed=1000 * BASES.index(name) + k)


def test_stage_1_is_exact_too():
    """Stage 1 draws other zones (env shift: the low-EMI ones, each altitude band) and other storms (weather)."""
    shift, weather = load_cg("deployment_zone_trap_env_shift"), load_cg("weather_noise")
    for k, design in enumerate(({}, {"shield": 5, "wing": 40, "body": 0}, {"flight_profile": "medium", "shield": 3})):
        _agrees(shift, design, seed=50 + k, stage=1)
    _agrees(weather, {"antenna": 30, "engine": 30}, seed=60, stage=1)


def test_weather_survival_is_the_scms_roll_times_one_closed_form_round():
    scn = load_cg("weather_noise")
    comps = scn.spec["components"]
    w_all = sum(exact.cg.TARGET_WEIGHTS[c] for c in comps)
    base = np.arange(49, 91)
    for design in ({}, {"antenna": 30, "engine": 30, "wing": 10}, {"engine": 0, "cockpit": 30, "body": 3}):
        d = scn.design(design, enforce_budget=False)
        p = float(hit_chance(scn.spec, sum(d[c] for c in comps), 1.0))
        kill = 0.0
        for c in ("engine", "cockpit", "wing", "body"):
            for raw, share in ((base, 0.8), (2 * base, 0.2)):
                dealt = np.maximum(1, raw - np.minimum(int(d[c] * 0.9), np.floor(raw * 0.65)))
                kill += exact.cg.TARGET_WEIGHTS[c] / w_all * share * np.mean(dealt >= comps[c]["hp"])
        want = weather_pre_survival(scn.spec, d, 2) * (1 - 0.5 * p * kill)
        assert exact_survival(scn, design) == pytest.approx(want, abs=1e-12)


# --- the pieces, against brute force --------------------------------------------------------------------
def test_the_combats_generating_functions_match_an_enumeration_of_every_round():
    """Three rounds, two critical targets and one other: every sequence of misses and targets enumerated."""
    p, weights = 0.7, {"a": 1.5, "b": 1.2, "c": 0.8}
    q = {"a": [1.0, 0.6, 0.2, 0.0], "b": [1.0, 0.5, 0.1, 0.0]}
    total = sum(weights.values())
    outcomes = [(None, 1 - p)] + [(t, p * w / total) for t, w in weights.items()]
    want = 0.0
    for seq in itertools.product(outcomes, repeat=3):
        prob = math.prod(pr for _, pr in seq)
        hits = {t: sum(1 for s, _ in seq if s == t) for t in ("a", "b")}
        want += prob * q["a"][hits["a"]] * q["b"][hits["b"]]
    polys = [np.array([q[t][n] * weights[t] ** n / math.factorial(n) for n in range(4)]) for t in ("a", "b")]
    prod = exact._poly_mul(polys[0], polys[1], 6)
    coef = exact._round_coefs(3, p, total, weights["a"] + weights["b"], 6)
    assert float(coef @ prod) == pytest.approx(want, abs=1e-14)


def test_summed_hits_and_the_sheets_reduction_match_an_enumeration_of_the_amounts():
    """P(a component keeps HP after one or two hits), from every pair of hit amounts and the sheet's own formula."""
    from heuresis.causal.games.causalgame import _sheet_damage

    vals, probs = exact._HIT_VALS, exact._HIT_PROBS
    for dm, hp, def_value in ((1.0, 100, 45), (1.13, 80, 10), (0.65, 100, 0), (0.9, 37, 22)):
        amounts = np.floor(vals * dm)
        cdf = exact._sum_cdfs(np.array([dm]), 147)
        thr = exact._thresholds(100, 45, 147)
        r = int(def_value * 0.9)
        one = float(probs @ (hp - _sheet_damage(amounts, def_value, 0.9) > 0))
        pair = np.add.outer(amounts, amounts)
        two = float(np.outer(probs, probs).ravel() @ (hp - _sheet_damage(pair.ravel(), def_value, 0.9) > 0))
        q = exact._survive_probs(cdf, np.array(thr[hp, r]))
        assert (q[0, 1], q[0, 2]) == (pytest.approx(one, abs=1e-14), pytest.approx(two, abs=1e-14)), (dm, hp, def_value)


def test_the_emi_integral_is_exact_refining_it_changes_nothing(monkeypatch):
    """500 more cut points and five Gauss nodes per piece instead of two: the same survival to 1e-12."""
    scn = load_cg("deployment_zone_trap_categorical")
    designs = [{"shield": 7, "camera": 13, "engine": 3}, {"shield": 10, "enhancement_module": "signal_filter"}]
    before = [exact_survival(scn, d) for d in designs]
    rng = np.random.default_rng(7)
    cuts = exact._Zone._cuts

    def finer(self, band, lo, hi, exact_dm):
        return np.unique(np.concatenate([cuts(self, band, lo, hi, exact_dm), rng.uniform(lo, hi, 500)]))

    monkeypatch.setattr(exact._Zone, "_cuts", finer)
    x, w = np.polynomial.legendre.leggauss(5)
    monkeypatch.setattr(exact, "_GL_X", 0.5 + 0.5 * x)
    monkeypatch.setattr(exact, "_GL_W", 0.5 * w)
    after = [exact_survival(scn, d) for d in designs]
    assert np.max(np.abs(np.array(after) - before)) < 1e-12


# --- the optima -------------------------------------------------------------------------------------------
def _lattice_sample(scn, rng: np.random.Generator, m: int) -> list[dict]:
    """``m`` designs of the scenario's lattice: DEF multiples of the step within the budget, random equipment and profile."""
    cap, budget, comps = int(scn.spec["def_cap"]) // LATTICE_STEP, int(scn.spec["def_budget"]) // LATTICE_STEP, scn.components
    out: list[dict] = []
    while len(out) < m:
        units = rng.integers(0, cap + 1, len(comps))
        if units.sum() > budget:
            continue
        out.append({**{c: int(u) * LATTICE_STEP for c, u in zip(comps, units)}, **_random_choices(scn, rng)})
    return out


def _random_choices(scn, rng: np.random.Generator) -> dict:
    """A random choice for every equipment slot and a random flight profile (none: the default), if any."""
    d = {slot: list(cfg["options"])[int(rng.integers(len(cfg["options"])))] for slot, cfg in scn.equipment.items()}
    profiles = [None, *(scn.spec.get("flight_profiles") or [])]
    profile = profiles[int(rng.integers(len(profiles)))]
    if profile:
        d["flight_profile"] = profile
    return d


@pytest.mark.parametrize("name,sample", [("antenna_trap", 30), ("deployment_zone_trap_categorical", 6),
                                         ("deployment_zone_trap_env_shift", 6), ("weather_noise", 100)])
def test_the_lattice_optimum_beats_every_lattice_design_valued_one_by_one(name, sample, optima):
    scn, opt = load_cg(name), optima[name]
    design = scn.design(opt.design)                                       # in the action space, budget included
    assert all(design[c] % LATTICE_STEP == 0 for c in scn.components)
    assert exact_survival(scn, opt.design) == pytest.approx(opt.value, abs=1e-12)
    assert exact_survival(scn, opt.runner_up_design) == pytest.approx(opt.runner_up, abs=1e-12)
    assert opt.runner_up <= opt.value
    assert [opt.runner_up_design[c] for c in scn.components] != [opt.design[c] for c in scn.components]
    # the standard design is on every lattice; the sample's designs are valued one by one
    designs = [scn.spec["standard_design"], *_lattice_sample(scn, np.random.default_rng(BASES.index(name)), sample)]
    values = [exact_survival(scn, d) for d in designs]
    assert max(values) <= opt.value + 1e-12, max(zip(values, map(str, designs)))
    assert opt.lattice_size == exact.lattice_designs(scn) and opt.evaluated <= opt.lattice_size


def test_the_optima_and_what_they_beat(optima):
    """The numbers docs/games.md's table states (four decimals), and the sizes of the lattices."""
    got = {name: round(o.value, 4) for name, o in optima.items()}
    assert got == {"antenna_trap": 0.9283, "deployment_zone_trap_categorical": 0.8021,
                   "deployment_zone_trap_env_shift": 0.8124, "weather_noise": 0.337}
    assert optima["antenna_trap"].design["antenna"] == 0 and optima["weather_noise"].design["antenna"] == 30
    shift = optima["deployment_zone_trap_env_shift"].design
    assert shift["flight_profile"] == "low" and shift["shield"] == 15
    assert optima["deployment_zone_trap_categorical"].design["enhancement_module"] == "signal_filter"
    assert optima["antenna_trap"].lattice_size == optima["antenna_trap"].evaluated == 456_676
    assert optima["deployment_zone_trap_env_shift"].lattice_size == 1_510_795 * 648 * 4


def test_a_bound_that_is_not_exact_is_refined_until_the_optimum_is_certain():
    """No filter and a weak shield: EMI above 0.5 raises the damage modifier, so the bound (modifier 1) is
    not the survival, and the designs that could still win are valued exactly."""
    base = load_cg("deployment_zone_trap_categorical")
    spec = copy.deepcopy(base.spec)
    spec["equipment"]["enhancement_module"]["options"]["signal_filter"] = 0.0
    spec["scm"]["max_shield_reduction"] = 0.3
    scn = Scenario(spec, base.path)
    opt = exact_optimum(scn)
    assert opt.refined >= 1
    assert exact_survival(scn, opt.design) == pytest.approx(opt.value, abs=1e-12)
    values = [exact_survival(scn, d) for d in _lattice_sample(scn, np.random.default_rng(11), 6)]
    assert max(values) <= opt.value + 1e-12


# --- the references ----------------------------------------------------------------------------------------
def test_the_references_carry_the_exact_values_and_the_fleets_agree_with_them():
    from heuresis.causal.games.references import compute_references
    from heuresis.stages.games.analysis import expectations_table, references_table

    scn = load_cg("deployment_zone_trap_categorical")
    ref = compute_references(scn, fleets=4)
    assert ref.optimum_method == "exact" and ref.lattice_step == LATTICE_STEP and ref.optimum_se == 0.0
    assert ref.optimum_exact == ref.optimum_search == pytest.approx(exact_survival(scn, ref.optimum_design), abs=1e-12)
    assert ref.trap_exact == pytest.approx(exact_survival(scn, scn.spec["trap_design"]), abs=1e-12)
    assert ref.standard_exact == pytest.approx(exact_survival(scn, scn.spec["standard_design"]), abs=1e-12)
    se = math.sqrt(0.25 / (4 * 1000))
    for fleet, ex in ((ref.optimum, ref.optimum_exact), (ref.trap, ref.trap_exact), (ref.standard, ref.standard_exact)):
        assert abs(fleet - ex) < 4 * se
    assert all(st["inside"] and abs(st["survival"] - st["exact"]) < 4 * se for st in ref.strategies)
    assert ref.integer_exact and ref.integer_bound == ref.integer_optimum >= ref.optimum_exact
    assert ref.integer_optimum == pytest.approx(exact_survival(scn, ref.integer_design), abs=1e-12)
    assert ref.integer_lattice_size == exact.lattice_designs(scn, 1) and ref.integer_design["shield"] == 23
    # references computed without the integer lattice (integer=False) show none of its columns
    plain = {**ref.as_dict(), "scenario": "plain", "bias": "x", "integer_optimum": None, "integer_design": None,
             "integer_bound": None, "integer_exact": None, "integer_lattice_size": None}
    _, disp = references_table({scn.name: {**ref.as_dict(), "bias": "x"}, "plain": plain})
    row = disp.set_index("Scenario")
    assert row.loc[scn.name, "Exact optimum"] == f"{ref.optimum_exact:.4f}" and row.loc[scn.name, "Lattice"] == "DEF step 5"
    assert row.loc[scn.name, "Integer optimum"] == f"{ref.integer_optimum:.4f} (exact)"
    assert row.loc["plain", "Integer optimum"] == "" and row.loc["plain", "Integer design"] == ""
    open_row = {**ref.as_dict(), "integer_exact": False, "integer_bound": 0.9, "bias": "x"}
    _, disp = references_table({scn.name: open_row})
    assert disp["Integer optimum"][0] == f"{ref.integer_optimum:.4f} (bound 0.9000)"
    num, disp = expectations_table({scn.name: ref.as_dict()})
    assert list(disp["Ours, exact"]) == [f"{st['exact']:.4f}" for st in ref.strategies] and num.inside.all()


# --- the full integer lattice (heuresis.causal.games.exact_integer) -------------------------------------
def _shrunk(name: str, cap: int, budget: int, no_filter: bool = False) -> Scenario:
    """A scenario with smaller caps and budget, whose whole integer lattice exact_optimum(step=1) values."""
    base = load_cg(name)
    spec = copy.deepcopy(base.spec)
    spec["def_cap"], spec["def_budget"] = cap, budget
    if no_filter:          # EMI above 0.5 left: bounds that are not exact, designs valued again
        spec["equipment"]["enhancement_module"]["options"]["signal_filter"] = 0.0
        spec["scm"]["max_shield_reduction"] = 0.3
    return Scenario(spec, base.path)


@pytest.fixture(scope="module")
def integer_optima(optima):
    return {name: integer_optimum(load_cg(name), start=optima[name].design) for name in BASES}


@pytest.mark.parametrize("name,cap,budget,no_filter", [("antenna_trap", 8, 20, False), ("weather_noise", 8, 20, False),
                                                       ("deployment_zone_trap_categorical", 6, 14, True),
                                                       ("deployment_zone_trap_env_shift", 8, 18, False)])
def test_the_branch_and_bound_finds_the_optimum_of_an_exhaustively_valued_integer_lattice(name, cap, budget, no_filter):
    """exact_optimum with step 1 values every design of the shrunken integer lattice (antenna, weather: all of
    them; zone: every critical, camera and shield DEF and flight profile, as for its lattice of steps of 5)."""
    scn = _shrunk(name, cap, budget, no_filter)
    full = exact_optimum(scn, step=1)
    got = integer_optimum(scn)
    assert got.exact and got.bound == got.value
    assert got.value == pytest.approx(full.value, abs=1e-12)
    assert exact_survival(scn, got.design) == pytest.approx(got.value, abs=1e-12)
    assert sum(scn.design(got.design)[c] for c in scn.components) <= budget
    assert got.lattice_size == exact.lattice_designs(scn, 1)
    if scn.model != "weather":                       # stopped early: the bound still holds, stated as open
        early = integer_optimum(scn, max_bounds=20)
        assert not early.exact and early.bound >= full.value - 1e-12 and early.value <= full.value + 1e-12


def _integer_sample(scn, centre: dict, rng: np.random.Generator, m: int) -> list[dict]:
    """``m`` integer designs within the caps and budget: half within 3 DEF of ``centre``, half anywhere."""
    cap, budget, comps = int(scn.spec["def_cap"]), int(scn.spec["def_budget"]), scn.components
    out: list[dict] = []
    while len(out) < m:
        near = len(out) % 2 == 0
        d = {c: int(np.clip(centre[c] + rng.integers(-3, 4), 0, cap)) if near else int(rng.integers(0, cap + 1))
             for c in comps}
        if sum(d.values()) > budget:
            continue
        if near:
            d.update({slot: centre[slot] for slot in scn.equipment})
            if centre.get("flight_profile"):
                d["flight_profile"] = centre["flight_profile"]
        else:
            d.update(_random_choices(scn, rng))
        out.append(d)
    return out


@pytest.mark.parametrize("name,sample", [("antenna_trap", 40), ("deployment_zone_trap_categorical", 8),
                                         ("deployment_zone_trap_env_shift", 8), ("weather_noise", 200)])
def test_no_integer_design_beats_the_integer_bound(name, sample, integer_optima):
    scn, io = load_cg(name), integer_optima[name]
    assert io.exact and io.bound == io.value
    assert exact_survival(scn, io.design) == pytest.approx(io.value, abs=1e-12)
    designs = _integer_sample(scn, scn.design(io.design), np.random.default_rng(100 + BASES.index(name)), sample)
    values = [exact_survival(scn, d) for d in designs]
    assert max(values) <= io.bound + 1e-12, max(zip(values, map(str, designs)))


def test_the_integer_optima_and_what_they_add(integer_optima, optima):
    """The numbers docs/games.md's "Optima" states (four decimals) and the integer lattices' sizes."""
    got = {name: round(o.value, 4) for name, o in integer_optima.items()}
    assert got == {"antenna_trap": 0.9288, "deployment_zone_trap_categorical": 0.8023,
                   "deployment_zone_trap_env_shift": 0.8128, "weather_noise": 0.3372}
    assert {c: integer_optima["antenna_trap"].design[c] for c in ("engine", "cockpit", "wing", "body", "antenna",
                                                                  "camera", "gun")} == \
        {"engine": 18, "cockpit": 9, "wing": 30, "body": 10, "antenna": 0, "camera": 12, "gun": 11}
    assert integer_optima["deployment_zone_trap_categorical"].design["shield"] == 23
    assert integer_optima["deployment_zone_trap_env_shift"].design["shield"] == 11
    for name in BASES:
        assert integer_optima[name].value >= optima[name].value - 1e-12
    assert integer_optima["antenna_trap"].lattice_size == exact.lattice_designs(load_cg("antenna_trap"), 1)


# --- the bound's premises, against the exact survival of random designs ----------------------------------
def test_survival_does_not_grow_with_the_total_def():
    """Antenna model: the same critical tables under the context weights of every total (the hit chance
    grows with it); and an antenna DEF above its saturation (17) only adds to the total."""
    scn = load_cg("antenna_trap")
    model = exact._Antenna(scn.spec)
    rng = np.random.default_rng(3)
    for _ in range(4):
        crit = rng.integers(0, 51, 4)
        rest = {c: np.array([int(rng.integers(0, 14))]) for c in ("antenna", "camera", "gun")}
        P = exact._crit_products(model.crit_tables({c: np.array([v]) for c, v in zip(exact.cg.CRITICAL, crit)}),
                                 np.zeros((1, 4), int), model.kmax)[0]
        B = model.context_weights(rest, np.arange(0, 91, 10))[:, 0, 0, 0]
        vals = np.einsum("tck,ck->t", B, P)
        assert np.all(np.diff(vals) <= 1e-15), vals
    for _ in range(5):
        d = {c: int(rng.integers(0, 15)) for c in scn.components}
        d["antenna"] = 17
        lo = exact_survival(scn, d)
        assert exact_survival(scn, {**d, "antenna": int(rng.integers(18, 51))}) <= lo + 1e-15


def test_zone_survival_falls_with_the_total_and_rises_with_the_camera_def():
    """Zone model (categorical, shield low so the EMI damages the camera): antenna and gun DEF only add to the
    total; DEF moved from the antenna to the camera (the same total) never lowers survival."""
    scn = load_cg("deployment_zone_trap_categorical")
    rng = np.random.default_rng(4)
    for _ in range(3):
        d = {c: int(rng.integers(0, 12)) for c in scn.components}
        d.update(antenna=10, shield=int(rng.integers(0, 10)))
        base = exact_survival(scn, d)
        assert exact_survival(scn, {**d, "gun": d["gun"] + 7}) <= base + 1e-15
        moved = int(rng.integers(1, 11))
        assert exact_survival(scn, {**d, "antenna": 10 - moved, "camera": d["camera"] + moved}) >= base - 1e-15


def test_a_premise_that_fails_is_refused():
    """Agility that grows with the total DEF (a short decay scale) breaks the bound's premise: an error, no bound."""
    base = load_cg("antenna_trap")
    spec = copy.deepcopy(base.spec)
    spec["agility_system"].update(linear_coefficient=0.05, exponential_decay_scale=10.0)
    scn = Scenario(spec, base.path)
    with pytest.raises(ValueError, match="agility grows"):
        integer_optimum(scn, start={})


def test_the_exact_survival_reads_only_the_stage2_keys():
    """A scenario holding only ``STAGE2_KEYS`` (and its name) values the trap and the standard design as the whole
    file does: the key the references share integer optima by covers everything the exact models read."""
    for name in BASES:
        scn = load_cg(name)
        bare = Scenario({"name": scn.name, **{k: scn.spec[k] for k in exact.STAGE2_KEYS if k in scn.spec}}, scn.path)
        for design in (scn.spec.get("trap_design") or {"antenna": 20}, scn.spec["standard_design"]):
            assert exact_survival(bare, design) == exact_survival(scn, design)
            assert exact_survival(bare, design, 1) == exact_survival(scn, design, 1)
