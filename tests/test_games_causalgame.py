"""CausalGame's scenarios re-implemented (heuresis.games.causalgame, docs/games.md "CausalGame models").

The truths the tests hold the models to are independent of our code: the survival ranges each
public ``game.json`` publishes per strategy (``expected_performance``, read into the scenario
files' ``strategies``), and closed-form probabilities of single mechanisms worked out by hand from
the public SCM's equations.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from heuresis.games.causalgame import (
    CGDesignError,
    agent_view,
    agility,
    fly,
    history,
    load_cg,
    load_cg_all,
)

# CausalGame's 14 scenario folders (experiments/*), the names of its game.json "experiment.name"
NAMES = {
    "antenna_trap", "antenna_trap_high_def", "antenna_trap_local_optima", "antenna_trap_no_history",
    "antenna_trap_no_selection_bias", "antenna_trap_simpsons_paradox",
    "deployment_zone_trap_categorical", "deployment_zone_trap_categorical_high_def",
    "deployment_zone_trap_categorical_local_optima", "deployment_zone_trap_categorical_no_history",
    "deployment_zone_trap_categorical_no_selection_bias", "deployment_zone_trap_categorical_simpsons_paradox",
    "deployment_zone_trap_env_shift", "weather_noise",
}
HIDDEN = {"weather_pattern", "is_storm", "antenna_emitting", "mission_zone", "emi_level", "effective_emi",
          "comm_failure_prob", "comm_failure", "weather_type", "hp", "agility", "detection_probability"}
N = 4000


@pytest.fixture(scope="module")
def scenarios():
    return load_cg_all()


def test_every_scenario_file_is_one_of_causalgames_and_cites_its_source(scenarios):
    assert set(scenarios) <= NAMES
    for name, scn in scenarios.items():
        src = scn.spec["source"]
        assert src["repo"] == "viewsetting/CausalGame" and len(src["commit"]) == 40, name
        assert any(name in f or "api/" in f for f in src["files"]), name


def _strategies(scenarios):
    for name, scn in sorted(scenarios.items()):
        for key, s in scn.spec.get("strategies", {}).items():
            yield name, key, s


def test_named_strategies_survive_inside_the_published_ranges(scenarios):
    """Each strategy's Stage-2 survival on a seeded fleet of 4,000 lies in its game.json range
    (3 standard errors of slack for the fleet's sampling error), unless the file lists a divergence."""
    failures = []
    for i, (name, key, s) in enumerate(_strategies(scenarios)):
        scn = scenarios[name]
        f = fly(scn, s["design"], N, np.random.default_rng(1000 + i), stage=2, enforce_budget=not s.get("over_budget"))
        lo, hi = s["expected"]
        slack = 3 * np.sqrt(0.25 / N)
        if "divergence" in s:
            lo, hi = s["divergence"]["ours"]
        if not lo - slack <= f.survival <= hi + slack:
            failures.append(f"{name}.{key}: {f.survival:.3f} outside [{lo}, {hi}]")
    assert not failures, failures


def test_trap_scores_below_standard_and_optimal_above_threshold(scenarios):
    for i, (name, scn) in enumerate(sorted(scenarios.items())):
        rng = np.random.default_rng(7 + i)
        strat = scn.spec["strategies"]
        opt = next(v for k, v in strat.items() if k.startswith("optimal"))
        std = fly(scn, scn.spec["standard_design"], N, rng, 2).survival
        trap = fly(scn, scn.spec["trap_design"], N, rng, 2, enforce_budget=False).survival
        best = fly(scn, opt["design"], N, rng, 2, enforce_budget=not opt.get("over_budget")).survival
        assert trap < std - 0.03 or name.startswith("deployment_zone"), (name, trap, std)
        assert trap < best - 0.2 and std < best - 0.2, (name, trap, std, best)
        assert best >= scn.spec["resources"]["victory_threshold"], (name, best)


def test_antenna_stealth_probability_matches_the_closed_form():
    """With antenna DEF 0 an antenna is destroyed by every storm (wind > 35: damage 55-74 >= 50 HP)
    and, in clear weather, when the wind is above 15 (p 15/25) and the damage in 35..54 reaches 50
    (p 5/20): P(emitting) = 0.2 * (1 - 0.6 * 0.25) = 0.17.  With DEF 10 (reduction 35) a storm leaves
    20..39 damage, never 50, and clear weather never destroys it: P(emitting) = 1."""
    scn = load_cg("antenna_trap")
    rng = np.random.default_rng(3)
    f0 = fly(scn, {"antenna": 0}, 40000, rng)
    em0 = f0.latent["antenna_emitting"].mean()
    assert abs(em0 - 0.17) < 4 * np.sqrt(0.17 * 0.83 / 40000), em0
    assert fly(scn, {"antenna": 10}, 5000, rng).latent["antenna_emitting"].all()


def test_zone_comm_failures_match_the_closed_form():
    """In zone gamma (EMI 0.9 +- 0.1, low altitude: modifier -0.05) with no shield and no filter the
    failure probability is (emi - 0.1) * 1.5 - 0.05, emi uniform on [0.8, 1.0]: mean 1.5*0.8 - 0.05
    = 1.15, clipped at 0.95 -> every drone fails with p 0.95.  With the filter (55 %) and shield 25
    (37.5 %) the reduction is 0.925, effective EMI <= 0.075 < 0.1: p 0 (low altitude, -0.05 clipped)."""
    scn = load_cg("deployment_zone_trap_categorical")
    rng = np.random.default_rng(4)
    f = fly(scn, {"module": "radar_boost"}, 20000, rng, force={"zone": "gamma", "emi": (0.9, 0.1)})
    assert np.allclose(f.latent["comm_failure_prob"], 0.95)
    assert abs(f.latent["comm_failure"].mean() - 0.95) < 4 * np.sqrt(0.95 * 0.05 / 20000)
    g = fly(scn, {"module": "signal_filter", "shield": 25}, 5000, rng, enforce_budget=False,
            force={"zone": "gamma", "emi": (0.9, 0.1)})
    assert not g.latent["comm_failure"].any()


def test_agility_is_the_drone_sheets_formula():
    spec = load_cg("antenna_trap").spec
    for t in (0, 50, 90, 200):
        want = 1.0 if t == 0 else max(0.1, min(1.0, 1 - 0.002 * t * np.exp(-t / 200) - 0.001 * t))
        assert agility(spec, t) == pytest.approx(want)


def test_the_agent_sees_status_hits_detection_and_the_visible_environment_only(scenarios):
    for name, scn in scenarios.items():
        f = fly(scn, scn.spec["standard_design"], 300, np.random.default_rng(5))
        view = agent_view(scn, f)
        text = json.dumps(view) + json.dumps(history(scn, np.random.default_rng(6)))
        assert not any(f'"{h}"' in text for h in HIDDEN), name
        for row in view["results"]:
            assert set(row) == {"status", "hit_count", "was_detected", "environment"}
            assert set(row["environment"]) <= set(scn.spec["environment_shown"])
        statuses = {r["status"] for r in view["results"]}
        if scn.spec["hide_failed_drones"]:
            assert statuses == {"RETURNED"}, name
            assert len(view["results"]) == view["survived"]
        else:
            assert "DESTROYED" in statuses and len(view["results"]) == view["deployed"]


def test_histories_follow_the_bias_and_are_drawn_from_the_seed(scenarios):
    for name, scn in scenarios.items():
        n = scn.spec["resources"]["initial_observations"]
        full = history(scn, np.random.default_rng(8), include_failed=True)
        assert len(full) == n, name
        assert full == history(scn, np.random.default_rng(8), include_failed=True)
        if "history_expected" in scn.spec:        # the public files' survival of the history's design
            lo, hi = scn.spec["history_expected"]
            big = fly(scn, full[0]["design"], N, np.random.default_rng(9), enforce_budget=False)
            assert lo <= big.survival <= hi, (name, big.survival)


def test_designs_outside_the_action_space_are_refused_naming_the_field():
    scn = load_cg("deployment_zone_trap_categorical")
    with pytest.raises(CGDesignError, match="def_budget=70"):
        scn.design({"shield": 25})
    with pytest.raises(CGDesignError, match=r"design\.module"):
        scn.design({"module": "warp_drive"})
    with pytest.raises(CGDesignError, match=r"design\.wing_def"):
        scn.design({"wing_def": 51})
    with pytest.raises(CGDesignError, match=r"design\.laser"):
        scn.design({"laser": 1})
