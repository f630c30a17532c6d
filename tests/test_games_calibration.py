"""Calibration of the games track (docs/games.md §3): the design lattice, exact optima by brute
force on small scenarios, fixed thresholds and their check at workflow start, traps below the
standard design, the trap pattern as a predicate, and no unstated Stage-2 shift."""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pytest
from conftest import OWN_SCENARIOS, ROOT

from heuresis.causal.games import ScenarioError, load_scenario, load_scenarios
from heuresis.causal.games.references import (
    check_references,
    compute_references,
    enumerate_lattice,
    lattice_size,
    sample_lattice,
    search_optimum,
    seed_of,
    verify,
    winnability_errors,
)
from heuresis.causal.games.scenario import follows_pattern
from heuresis.causal.games.scm import draw, survival

SCENARIOS = OWN_SCENARIOS
GOLDEN = json.loads((ROOT / "tests/data/games_references.json").read_text())
FIXED = {"antenna": 0.75, "zone": 0.75, "weather": 0.55}


@pytest.fixture(scope="module")
def scenarios():
    return load_scenarios(SCENARIOS)


def _small(tmp_path, base="zone_base", name="zone_small", threshold="0.30", extra=""):
    """A scenario with a lattice small enough to enumerate by hand: caps of 1-2, a budget of 6, the filter costing 3."""
    shutil.copy(SCENARIOS / f"{base}.yaml", tmp_path / f"{base}.yaml")
    caps = "\n".join(f"  {c}: {{cap: {k}}}" for c, k in (("engine", 2), ("cockpit", 1), ("wing", 2), ("body", 1),
                                                          ("antenna", 1), ("camera", 1), ("gun", 1), ("shield", 2)))
    (tmp_path / f"{name}.yaml").write_text(
        f"extends: {base}\nname: {name}\ndef_budget: 6\ncomponents:\n{caps}\nequipment: {{emi_filter: {{cost: 3}}}}\n"
        "trap_design: {antenna: 1, camera: 1, gun: 1, shield: 1}\n"
        "standard_design: {engine: 1, cockpit: 1, wing: 1, body: 1, shield: 2}\n"
        "history: {groups: [{design: {engine: 1, wing: 1}, n: 10}]}\n"
        "calibrated_design: {engine: 1, wing: 1, body: 1, emi_filter: true}\n"
        f"threshold: {threshold}\nsearch: {{drones: 400, starts: 1, verify_fleets: 2, enumerate_max: 100000, sample: 50}}\n"
        f"{extra}")
    return load_scenario(name, tmp_path)


def _brute(space):
    """Every valid design by itertools (independent of the package's enumeration)."""
    out = []
    for defs in itertools.product(*[range(c + 1) for c in space.caps]):
        for eq in itertools.product((0, 1), repeat=len(space.equipment)):
            v = np.array([*defs, *eq], dtype=np.int64)
            if space.is_valid_vector(v):
                out.append(v)
    return np.array(out)


def test_lattice_size_and_enumeration_match_brute_force(tmp_path, scenarios):
    scn = _small(tmp_path)
    brute = _brute(scn.space)
    assert lattice_size(scn.space) == len(brute)
    lat = enumerate_lattice(scn.space)
    assert {v.tobytes() for v in lat} == {v.tobytes() for v in brute} and len(lat) == len(brute)
    # the shipped lattices: 7 components with cap 8 and a budget of 20 hold C(27, 7) minus the cap-violating ones
    assert lattice_size(scenarios["antenna_base"].space) == 666018
    rng = np.random.default_rng(0)
    s = sample_lattice(scn.space, rng, 3000)
    assert all(scn.space.is_valid_vector(v) for v in s)
    # uniform over the lattice: each design's share near 1/size (chi-square against the brute-force set)
    keys = {v.tobytes(): k for k, v in enumerate(brute)}
    counts = np.bincount([keys[v.tobytes()] for v in s], minlength=len(brute))
    expected = len(s) / len(brute)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < len(brute) + 5 * np.sqrt(2 * len(brute))


def test_enumerated_optimum_is_the_brute_force_maximum(tmp_path):
    """On a small lattice the optimum is exact: the maximum of survival over every design on the same CRN draws."""
    scn = _small(tmp_path)
    found = search_optimum(scn)
    assert found.method == "enumerated" and found.evaluated == found.lattice_size == lattice_size(scn.space)
    brute = _brute(scn.space)
    d = draw(scn, seed_of(scn.spec["seed"], scn.name, "search"), 400, stage=2)
    vals = survival(scn, d, brute)
    assert found.value == pytest.approx(vals.max())
    assert survival(scn, d, found.vec[None])[0] == pytest.approx(vals.max())
    assert found.runner_up == pytest.approx(np.sort(vals)[-2]) and found.better_share_ub == 0.0
    assert found.se == pytest.approx(np.sqrt(vals.max() * (1 - vals.max()) / 400))
    # the local search on the same draws can only match or fall short of it; its sample bound is stated
    searched = search_optimum(scn, enumerate_max=0)
    assert searched.method == "searched" and searched.value <= found.value + 1e-12
    assert searched.sample == 50 and 0 < searched.better_share_ub <= 1 and searched.runner_up <= found.value


def test_fixed_thresholds_per_family_and_the_margin_rule(tmp_path, scenarios):
    for name, scn in scenarios.items():
        g = GOLDEN[name]
        assert scn.threshold == FIXED[scn.family] and g["threshold"] == FIXED[scn.family], name
        assert g["threshold_rule"] == "fixed" and g["optimum"] >= g["threshold"], name
        if scn.family == "weather":
            assert 0.58 <= g["optimum"] <= 0.70, name          # lower in weather
        else:
            assert 0.78 <= g["optimum"] <= 0.85, name          # where CausalGame's optima fall
        assert 0.03 <= g["optimum"] - g["threshold"] <= 0.10, name
    scn = _small(tmp_path, threshold="null", extra="threshold_margin: 0.05\n")
    ref = compute_references(scn)
    assert ref.threshold_rule == "margin" and ref.threshold == pytest.approx(ref.optimum - 0.05)


def test_a_threshold_above_the_exact_optimum_fails_at_start(tmp_path):
    scn = _small(tmp_path)
    best = max(verify(scn, _brute(scn.space), fleets=2, size=1000).mean(axis=1))   # the exact optimum, re-measured
    assert best >= 0.30 and winnability_errors([scn]) == []
    hard = _small(tmp_path, name="zone_small_hard", threshold=f"{min(0.99, best + 0.08):.3f}")
    msgs = winnability_errors([hard])
    assert len(msgs) == 1 and "scenario 'zone_small_hard': key threshold" in msgs[0] and "unwinnable" in msgs[0]
    ref = compute_references(hard)
    with pytest.raises(ScenarioError, match="'zone_small_hard': key threshold: optimum .* below"):
        check_references(ref, hard)


def test_every_trap_is_clearly_below_its_standard_design(scenarios):
    for name in scenarios:
        g = GOLDEN[name]
        assert g["trap_margin"] >= 0.05 and g["trap_margin_lo"] > 0, name
        assert g["standard"] - g["trap"] == pytest.approx(g["trap_margin"], abs=1e-9)
    # re-measured on two fresh 1,000-drone fleets: the re-tuned weather trap is a trap
    for name in ("weather_base", "weather_high_def", "weather_no_selection_bias"):
        scn = scenarios[name]
        vecs = np.stack([scn.space.vector(scn.spec["trap_design"]), scn.space.vector(scn.spec["standard_design"])])
        trap, std = verify(scn, vecs, fleets=2, seed=77).mean(axis=1)
        assert std - trap >= 0.03, (name, trap, std)


def test_trap_pattern_predicate_on_hand_made_designs(tmp_path, scenarios):
    ant = scenarios["antenna_base"]
    assert ant.follows_trap({"antenna": 4}) and ant.follows_trap({"antenna": 8, "engine": 8})
    assert not ant.follows_trap({"antenna": 3, "camera": 8}) and not ant.follows_trap({"engine": 5})
    zone = scenarios["zone_base"]
    assert zone.follows_trap({"antenna": 5, "shield": 1}) and zone.follows_trap({"engine": 4})
    assert not zone.follows_trap({"shield": 2}) and not zone.follows_trap({"engine": 4, "emi_filter": True})
    w = scenarios["weather_base"]
    assert w.follows_trap({"wing": 2, "engine": 3, "antenna": 4, "camera": 4})
    assert not w.follows_trap({"wing": 3, "engine": 3, "antenna": 4, "camera": 4})   # wing + engine 6 > 5
    assert not w.follows_trap({"wing": 2, "engine": 2, "antenna": 3, "camera": 4})   # exposed parts 7 < 8
    assert ant.follows_trap(None) is None
    pattern = [{"of": ["shield", "emi_filter"], "at_least": 3}]
    assert follows_pattern(pattern, {"shield": 2, "emi_filter": True}) and not follows_pattern(pattern, {"shield": 2})
    for name, scn in scenarios.items():   # every file: its trap matches, its standard and optimum do not
        assert scn.follows_trap(scn.spec["trap_design"]) and not scn.follows_trap(scn.spec["standard_design"]), name
        assert not scn.follows_trap(GOLDEN[name]["optimum_design"]), name
    shutil.copy(SCENARIOS / "antenna_base.yaml", tmp_path / "antenna_base.yaml")
    (tmp_path / "bad_pat.yaml").write_text("extends: antenna_base\nname: bad_pat\n"
                                           "trap_pattern: [{of: [antenna], at_least: 8}]\n")
    with pytest.raises(ScenarioError, match="'bad_pat': key trap_pattern: the trap design does not match"):
        load_scenario("bad_pat", tmp_path)
    (tmp_path / "bad_field.yaml").write_text("extends: antenna_base\nname: bad_field\n"
                                             "trap_pattern: [{of: [rotor], at_least: 1}]\n")
    with pytest.raises(ScenarioError, match=r"'bad_field': key trap_pattern.0.of: unknown component"):
        load_scenario("bad_field", tmp_path)


def test_no_unstated_stage2_shift(scenarios):
    """What changes between Stage 1 and Stage 2 is the named point of an env_shift variant, nowhere else."""
    for name, scn in scenarios.items():
        env = scn.spec["environment"]
        if scn.spec["variant"] == "env_shift":
            assert env.get("stage2_p"), name
            continue
        assert not env.get("stage2_p"), name
        if scn.family == "weather":
            assert env["storm_p"][0] == env["storm_p"][1], name
            s1, s2 = (draw(scn, seed_of(5), 4000, stage=k).env.weather.mean() for k in (1, 2))
            assert abs(s1 - s2) < 0.04, (name, s1, s2)
