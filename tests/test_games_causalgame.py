"""CausalGame's scenarios re-implemented (heuresis.causal.games.causalgame, docs/games.md "CausalGame models").

The truths the tests hold the models to are independent of our code: the survival ranges each
public ``game.json`` publishes per strategy (``expected_performance``, read into the scenario
files' ``strategies``), and closed-form probabilities of single mechanisms worked out by hand from
the public SCM's equations.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from heuresis.causal.games.causalgame import (
    DesignError,
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
        if not strat:          # weather_noise publishes no strategies (its optimum: the weather tests)
            continue
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
    f = fly(scn, {"enhancement_module": "radar_boost"}, 20000, rng, force={"zone": "gamma", "emi": (0.9, 0.1)})
    assert np.allclose(f.latent["comm_failure_prob"], 0.95)
    assert abs(f.latent["comm_failure"].mean() - 0.95) < 4 * np.sqrt(0.95 * 0.05 / 20000)
    g = fly(scn, {"enhancement_module": "signal_filter", "shield": 25}, 5000, rng, enforce_budget=False,
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
        view = agent_view(scn, f, np.random.default_rng(55), scn.spec["standard_design"])
        text = json.dumps(view) + json.dumps(history(scn, np.random.default_rng(6)))
        assert not any(f'"{h}"' in text for h in HIDDEN), name
        for row in view["results"]:
            extra = {"def_remaining"} if scn.spec.get("show_def_remaining") else set()
            assert set(row) == {"drone", "status", "hit_count", "was_detected", "environment"} | extra
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
    with pytest.raises(DesignError, match="def_budget=70") as refused:
        scn.design({"shield": 25})
    kept = {c: int(v["default_def"]) for c, v in scn.spec["components"].items() if c != "shield"}
    assert str(refused.value).endswith("keep their defaults: " + ", ".join(f"{c} {v}" for c, v in kept.items()) + ")")
    with pytest.raises(DesignError, match=r"design\.enhancement_module"):
        scn.design({"enhancement_module": "warp_drive"})
    with pytest.raises(DesignError, match=r"design\.wing_def"):
        scn.design({"wing_def": 51})
    with pytest.raises(DesignError, match=r"design\.laser"):
        scn.design({"laser": 1})


def test_env_shift_moves_every_drone_to_the_high_emi_zones_and_the_shield_counts():
    scn = load_cg("deployment_zone_trap_env_shift")
    rng = np.random.default_rng(10)
    s1 = fly(scn, {}, 3000, rng, stage=1).latent["mission_zone"]
    s2 = fly(scn, {}, 3000, rng, stage=2).latent["mission_zone"]
    assert set(s1) == {"alpha", "beta", "gamma"} and set(s2) == {"delta", "epsilon"}
    design = {"engine": 15, "cockpit": 15, "wing": 10, "body": 10, "antenna": 5, "camera": 5, "gun": 0, "shield": 30}
    repaired = fly(scn, design, N, np.random.default_rng(11), stage=2).survival
    scn.spec["scm"]["shield_counts"] = False          # the public code: shield read under a key never set
    published = fly(scn, design, N, np.random.default_rng(11), stage=2).survival
    assert repaired > published + 0.25, (repaired, published)


def test_env_shift_stage1_is_what_the_shifted_zones_give():
    """Stage 1 flies only EMI 0.1-0.3 zones: few failures, so the unshielded standard design does
    better there than in Stage 2 (the published Stage-1 ranges predate this distribution: divergence)."""
    scn = load_cg("deployment_zone_trap_env_shift")
    s1 = fly(scn, {}, N, np.random.default_rng(12), stage=1).survival
    s2 = fly(scn, {}, N, np.random.default_rng(13), stage=2).survival
    assert s1 > s2 + 0.25


def _weather_kill_term(scn, c, def_value):
    """P(a weather-noise survivor is killed in combat through component ``c``), in closed form: detected
    with p 0.5, hit with p 0.8 (agility fixed at 1), ``c`` drawn by combat.py's weights among the seven
    components, a hit of int(70*U(0.7,1.3)) (49..90 uniform) doubled with p 0.2 killing ``c`` when the
    damage less min(int(0.9*DEF), int(0.65*damage)) reaches its HP."""
    from heuresis.causal.games.causalgame import TARGET_WEIGHTS
    comps = scn.spec["components"]
    total_w = sum(TARGET_WEIGHTS[k] for k in comps)
    base = np.arange(49, 91)
    kill = 0.0
    for raw, p in ((base, 0.8), (2 * base, 0.2)):
        dealt = np.maximum(1, raw - np.minimum(int(def_value * 0.9), np.floor(raw * 0.65)))
        kill += p * np.mean(dealt >= comps[c]["hp"])
    return 0.5 * 0.8 * TARGET_WEIGHTS[c] / total_w * kill


def _weather_combat_survival(scn, d):
    return 1 - sum(_weather_kill_term(scn, c, d[c]) for c in ("engine", "cockpit", "wing", "body"))


def test_weather_survival_matches_its_closed_form_and_its_optimum_is_below_the_threshold():
    from heuresis.causal.games.causalgame import weather_pre_survival
    scn = load_cg("weather_noise")
    for i, design in enumerate(({}, {"antenna": 30}, {"antenna": 0, "engine": 30, "cockpit": 30, "wing": 20, "body": 10})):
        d = scn.design(design, enforce_budget=False)
        want = weather_pre_survival(scn.spec, d, 2) * _weather_combat_survival(scn, d)
        got = fly(scn, design, 40000, np.random.default_rng(20 + i), stage=2, enforce_budget=False).survival
        assert abs(got - want) < 4 * np.sqrt(want * (1 - want) / 40000), (design, got, want)
    # exhaustive over the integer designs (budget 90, caps 30): camera and gun DEF change nothing here, so
    # survival is pre(antenna, engine) x combat(engine, cockpit, wing, body); for every split of the
    # remaining budget the best (cockpit, wing, body) is found by enumerating all 31^3 of them
    cap = int(scn.spec["def_cap"])
    assert cap == 30                                                  # CausalGame's action_space.json
    term = {c: np.array([_weather_kill_term(scn, c, v) for v in range(cap + 1)]) for c in ("engine", "cockpit", "wing", "body")}
    cwb = term["cockpit"][:, None, None] + term["wing"][None, :, None] + term["body"][None, None, :]
    spend = np.add.outer(np.add.outer(np.arange(cap + 1), np.arange(cap + 1)), np.arange(cap + 1))
    least = np.array([cwb[spend <= r].min() for r in range(91)])     # the best (cockpit, wing, body) within r
    best = 0.0
    for a in range(cap + 1):
        for e in range(cap + 1):
            r = 90 - a - e
            if r < 0:
                continue
            d = scn.design({"antenna": a, "engine": e, "camera": 0, "gun": 0, "cockpit": 0, "wing": 0, "body": 0})
            combat = 1 - term["engine"][e] - least[r]
            best = max(best, weather_pre_survival(scn.spec, d, 2) * combat)
    assert 0.3 < best < scn.spec["resources"]["victory_threshold"] - 0.05, best


def test_weather_rows_are_noisy_counts_exact_and_failed_drones_shown():
    scn = load_cg("weather_noise")
    f = fly(scn, {}, 2000, np.random.default_rng(30), stage=1)
    view = agent_view(scn, f, np.random.default_rng(31), design={})
    assert view["survived"] == int(f.returned.sum())                 # the counts are exact
    assert len(view["results"]) == 2000                               # destroyed rows are shown
    shown = np.array([r["status"] == "RETURNED" for r in view["results"]])
    flips = (shown != f.returned).mean()
    assert 0 < flips < 0.05                                           # 2 % in storms, 0.5 % in clear weather
    wind = np.array([r["environment"]["wind_speed"] for r in view["results"]])
    rel = np.abs(wind / f.visible["wind_speed"] - 1)
    storm = f.latent["is_storm"]
    assert np.median(rel[storm]) > 2 * np.median(rel[~storm])         # 20 % vs 5 % of the value
    with pytest.raises(ValueError, match="observation_noise"):
        agent_view(scn, f)


# --- judges never grade their own model family ----------------------------------------------------
def _config():
    from pathlib import Path

    import yaml
    return yaml.safe_load((Path(__file__).resolve().parents[1] / "config/config.yaml").read_text())


def test_model_families_group_a_providers_models():
    from heuresis.stages.games.workflow import model_family
    assert model_family({"model": "openai/gpt-5"}) == model_family({"model": "openrouter/openai/o3"}) == "openai"
    assert model_family({"model": "anthropic/claude-sonnet-4-5"}) == "anthropic"
    assert model_family({"model": "dashscope/qwen3-max"}) == model_family({"model": "openrouter/qwen/qwen3-32b"}) == "qwen"
    assert model_family({"kind": "game_random"}) is None


def test_the_default_panel_leaves_out_each_players_own_family():
    from heuresis.stages.games.workflow import judges_for, model_family
    cfg = _config()
    for player in cfg["games"]["agents"]:
        panel = judges_for(cfg, player)
        own = model_family(cfg["agents"][player])
        assert all(model_family(cfg["agents"][j]) != own for j in panel) or own is None
        assert len(panel) == (3 if own is None else 2), (player, panel)


def test_a_player_left_without_a_judge_of_another_family_is_a_config_error():
    from heuresis.stages.games.workflow import judge_panel_errors
    cfg = _config()
    cfg["games"]["judges"] = ["judge_gpt"]
    msgs = judge_panel_errors(cfg)
    assert len(msgs) == 1 and "'gpt'" in msgs[0] and "config key games.judges" in msgs[0] and "'openai'" in msgs[0]


def test_a_judgement_job_of_the_players_own_family_is_refused(tmp_path):
    from heuresis.stages.games.workflow import run_judgements
    cfg = _config()
    with pytest.raises(ValueError, match="never grades its own model family"):
        run_judgements("judge_claude", cfg["agents"]["judge_claude"], "claude", "agentic", [], [], tmp_path,
                       tmp_path / "j.parquet", agent_spec=cfg["agents"]["claude"])
    # a run with a single model (games.judge_own_family: the local smoke run) lets it grade its own plays
    out = run_judgements("judge_claude", cfg["agents"]["judge_claude"], "claude", "agentic", [], [], tmp_path,
                         tmp_path / "j.parquet", agent_spec=cfg["agents"]["claude"], own_family=True)
    assert out.exists()


# --- the best design found by search ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["antenna_trap", "deployment_zone_trap_categorical"])
def test_search_from_the_standard_design_reaches_the_published_optimum_and_holds_on_fresh_fleets(name):
    """The hill-climb (common random numbers, budget enforced) from the standard design reaches at least
    the lower end of the published optimal strategy's range, and its survival holds on fresh fleets
    (within 4 standard errors of the two estimates: the search does not live on its own drones)."""
    from heuresis.causal.games.causalgame import search_best
    scn = load_cg(name)
    opt = next(v for k, v in scn.spec["strategies"].items() if k.startswith("optimal"))
    design, found = search_best(scn, scn.spec["standard_design"], seed=5, n=2000)
    scn.design(design)                                    # inside the action space, budget included
    assert found >= opt["expected"][0], (design, found)
    fresh = fly(scn, design, 6000, np.random.default_rng(99), stage=2).survival
    assert abs(fresh - found) < 4 * np.sqrt(0.25 / 2000 + 0.25 / 6000), (found, fresh)


def test_the_env_query_shows_visible_variables_only_and_stops_at_its_budget(scenarios):
    from heuresis.causal.games.causalgame import EnvQuery, EnvQueryBudgetError
    for name, scn in scenarios.items():
        rows = history(scn, np.random.default_rng(40))
        q = EnvQuery(scn)
        assert q.budget == scn.spec["resources"]["env_query_budget"] == 10, name
        for hidden in ("weather_pattern", "mission_zone", "emi_level", "is_storm"):
            with pytest.raises(ValueError, match="not a visible environment variable"):
                q(hidden, rows)
        var = q.shown[0]
        answers = [q(var, rows) for _ in range(q.budget)]
        assert answers[-1]["queries_left"] == 0 and not any(h in json.dumps(answers) for h in HIDDEN)
        with pytest.raises(EnvQueryBudgetError, match="env_query_budget"):
            q(var, rows)


# --- CausalGame's scenarios played through the game, its tools and the play loop ---------------------
OFFLINE_PLAYERS = ("game_random", "game_greedy", "game_bandit", "game_trap_follower", "game_mechanism")
# what the ablations disclose and CausalGame's agent is never told (the default variant)
DISCLOSURES = ("hits_", "misleading", "returned drones only", "\"measure\"", "storm_intensity")


def _seen(transcript) -> str:
    """Everything the agent was sent in a play: the tool definitions and every message (tool results included)."""
    return json.dumps(transcript.tools) + json.dumps([m.get("content") for m in transcript.messages])


def test_every_scenario_plays_through_the_game_tools_and_the_agent_sees_no_hidden_value(scenarios):
    from heuresis.stages.games.play import run_play
    for name, scn in scenarios.items():
        for agent in OFFLINE_PLAYERS:
            out = run_play(agent, {"kind": agent}, scn, seed=3, threshold=scn.threshold)
            row = out.row
            assert row["status"] == "ok" and row["termination"] == "submitted", (name, agent, row["error"])
            assert row["family"] == scn.model and row["scenario"] == name
            assert 0 <= row["survival"] <= 1 and row["drones_used"] <= scn.budgets["stage1_drones"]
            seen = _seen(out.transcript)
            assert not any(f'"{h}"' in seen or f"{h}," in seen for h in HIDDEN), (name, agent)
            assert not any(d in seen for d in DISCLOSURES), (name, agent, [d for d in DISCLOSURES if d in seen])
            tools = {t["function"]["name"] for t in out.transcript.tools}
            assert "query_environment" in tools and "measure" not in tools


def test_the_task_states_the_scenarios_facts_and_warns_of_noise_only_where_rows_are_noisy(scenarios):
    from heuresis.causal.games.game import Game
    from heuresis.stages.games.play import NOISE_WARNING, task_prompt
    for name, scn in scenarios.items():
        text = task_prompt(Game(scn, seed=1, threshold=scn.threshold))
        assert (NOISE_WARNING in text) == bool(scn.spec.get("observation_noise")), name
        for line in (ln for lines in scn.spec["side_information"].values() for ln in lines):
            assert line in text, (name, line)                           # shown as given, misleading on purpose
        assert f"{scn.threshold:.1%}" in text and str(scn.spec["def_budget"]) in text
        for c, v in scn.spec["components"].items():
            assert f"{c} ({v['default_def']})" in text


def test_the_history_is_drawn_per_play_survivors_only_where_failed_drones_are_hidden(scenarios):
    from heuresis.causal.games.game import Game
    for name, scn in scenarios.items():
        a, b, again = Game(scn, seed=1), Game(scn, seed=2), Game(scn, seed=1)
        rows = lambda g: [r for h in g.history for r in h.rows]  # noqa: E731
        assert rows(a) == rows(again), name                            # from the play's seed
        n = scn.spec["resources"]["initial_observations"]
        if n == 0:
            assert rows(a) == [], name
            continue
        assert rows(a) != rows(b), name                                # drawn afresh for every play
        assert sum(h.count for h in a.history) == n
        for h in a.history:
            if scn.spec["hide_failed_drones"]:
                assert {r["status"] for r in h.rows} <= {"RETURNED"}, name
                assert [r["drone"] for r in h.rows] == list(range(1, len(h.rows) + 1))   # no gap betrays a loss
                assert "survival_rate" not in h.summary() and "destroyed" not in h.summary()
            else:
                assert len(h.rows) == h.count and h.summary()["destroyed"] == h.count - h.returned


def test_the_env_query_tool_summarises_visible_rows_and_stops_at_its_budget():
    from heuresis.causal.games.game import Game
    from heuresis.harness.game_tools import game_tools
    from heuresis.harness.tools import ToolError
    scn = load_cg("deployment_zone_trap_categorical")
    game = Game(scn, seed=4)
    tools = game_tools(game, analysis=True)
    q = tools["query_environment"]
    seen = [r for h in game.history for r in h.rows]
    with pytest.raises(ToolError, match="not a visible environment variable"):
        q.handler(None, {"variable": "emi_level"})
    first = json.loads(q.handler(None, {"variable": "altitude_band"}).text)
    want = {v: sum(r["altitude_band"] == v for r in seen) for v in {r["altitude_band"] for r in seen}}
    assert first["counts"] == want and first["rows"] == len(seen)
    temps = [r["temperature"] for r in seen]
    t = json.loads(q.handler(None, {"variable": "temperature"}).text)
    assert t["mean"] == pytest.approx(np.mean(temps), abs=1e-3) and t["min"] == min(temps)
    for _ in range(scn.spec["resources"]["env_query_budget"] - 2):
        q.handler(None, {"variable": "temperature"})
    assert game.status()["env_queries_left"] == 0
    with pytest.raises(ToolError, match="env_query_budget"):
        q.handler(None, {"variable": "temperature"})


def test_designs_in_a_play_keep_the_sheets_defaults_and_the_budget_is_enforced():
    from heuresis.causal.games.game import Game, GameError
    scn = load_cg("deployment_zone_trap_categorical")
    game = Game(scn, seed=2)
    d = game.deploy({"shield": 10, "engine": 5, "enhancement_module": "signal_filter"}, 20)
    assert d.design["cockpit"] == scn.spec["components"]["cockpit"]["default_def"]
    assert d.design["enhancement_module"] == "signal_filter" and d.count == 20
    with pytest.raises(GameError, match="def_budget=70"):
        game.deploy({"shield": 25}, 5)                                 # 70 + 25 over the budget
    with pytest.raises(GameError, match="enhancement_module"):
        game.deploy({"enhancement_module": "warp_drive"}, 5)
    assert len(game.deployments) == 1                                  # a refused action changes nothing


def test_stage2_flies_the_scenarios_stage2_fleet_from_the_play_seed():
    from heuresis.causal.games.game import Game
    scn = load_cg("antenna_trap")
    design = {"antenna": 0, "camera": 10, "gun": 10, "engine": 15, "wing": 15}
    scores = []
    for seed in (5, 5, 6):
        game = Game(scn, seed=seed, threshold=scn.threshold, guard=False)
        game.write_report("r")
        scores.append(game.submit(design).survived)
    assert scores[0] == scores[1] != scores[2]
    fresh = fly(scn, design, 6000, np.random.default_rng(77), stage=2).survival
    assert abs(scores[0] / 1000 - fresh) < 4 * np.sqrt(0.25 / 1000 + 0.25 / 6000)


def test_the_leaderboard_scores_unsubmitted_plays_both_ways_and_counts_failed_ones_apart():
    """Recomputed with pandas on plays whose answers are known: 0 for an unsubmitted play in one view,
    left out in the other; a failed play in neither; ranks by survival."""
    import pandas as pd

    from heuresis.config.settings import Bootstrap
    from heuresis.stages.games.analysis import leaderboard_table
    rows = []
    for agent, surv, sub, status in [("a", 0.9, True, "ok"), ("a", 0.7, True, "ok"), ("a", 0.0, False, "ok"),
                                     ("a", 0.0, False, "failed"), ("b", 0.8, True, "ok"), ("b", 0.6, True, "ok")]:
        rows.append({"agent": agent, "mode": "agentic", "scenario": "antenna_trap", "survival": surv,
                     "submitted": sub, "status": status, "won": surv >= 0.75, "play_id": f"{agent}{len(rows)}"})
    plays = pd.DataFrame(rows)
    num, disp = leaderboard_table(plays, None, [], Bootstrap(resamples=200, seed=1))
    got = {(r.agent, r.view): r for r in num.itertuples()}
    assert got[("a", "all plays")].survival == pytest.approx((0.9 + 0.7 + 0.0) / 3)
    assert got[("a", "submitted only")].survival == pytest.approx(0.8)
    assert got[("a", "all plays")].plays == 3 and got[("a", "all plays")].failed == 1
    assert got[("a", "all plays")].unsubmitted == 1 and got[("a", "submitted only")].plays == 2
    assert got[("b", "all plays")].survival == pytest.approx(0.7) == got[("b", "submitted only")].survival
    assert got[("a", "all plays")].win_rate == pytest.approx(1 / 3)
    # two shared plays cannot separate them (exact sign-flip p = 0.5): one rank, b first by survival (0.70 > 0.53)
    assert got[("b", "all plays")].rank == 1 == got[("a", "all plays")].rank
    assert list(disp["Rank"]) == ["1"] * 4 and list(disp["Agent"]) == ["b", "b", "a", "a"]
    assert list(disp["Tied with"]) == ["a | agentic"] * 2 + ["b | agentic"] * 2


def test_the_games_leaderboard_separates_a_clearly_better_player_and_shows_causalgames_rows_apart():
    """Twenty shared plays, one player better on each: ranks 1 and 2, not tied; CausalGame's published rows
    follow unranked, read from the data file with its source."""
    import pandas as pd

    from heuresis.config.settings import Bootstrap
    from heuresis.stages.games.analysis import leaderboard_table
    from heuresis.targets.published import load_causalgame_leaderboard

    rng = np.random.default_rng(4)
    base = rng.uniform(0.4, 0.7, size=20)
    rows = [{"agent": agent, "mode": "agentic", "scenario": f"s{k % 5}", "repeat": k // 5, "survival": v + lift,
             "submitted": True, "status": "ok", "won": False, "play_id": f"{agent}{k}", "tokens_in": 100,
             "tokens_out": 10, "cost": 0.002}
            for agent, lift in (("good", 0.2), ("plain", 0.0)) for k, v in enumerate(base)]
    published = load_causalgame_leaderboard()
    num, disp = leaderboard_table(pd.DataFrame(rows), None, [], Bootstrap(resamples=200, seed=1), published)
    ours = num[num.block == "this run"]
    assert dict(zip(ours.agent, ours["rank"])) == {"good": 1, "plain": 2}
    assert set(ours.tied_with) == {"[]"} and ours.usd_per_play.tolist() == pytest.approx([0.002] * 4)
    pub = num[num.block == "published"]
    assert len(pub) == len(published["rows"]) and "causalgame" in published["source"].lower()
    assert set(disp["Rank"][num.block == "published"]) == {"—"} and "Uniform High" in set(pub.agent)


# --- this track's extra disclosures as named ablations (NAME~DISCLOSURE) --------------------------------
def test_each_ablation_discloses_its_one_extra_thing_on_the_scenarios_own_draws():
    from heuresis.causal.games.causalgame import DISCLOSURES
    from heuresis.causal.games.game import Game
    from heuresis.causal.games.references import seed_of
    from heuresis.causal.games.scenario import load_scenario
    from heuresis.harness.game_tools import game_tools
    from heuresis.stages.games.play import task_prompt
    base = load_cg("antenna_trap")
    design = {"antenna": 0, "camera": 10, "gun": 10, "engine": 15, "wing": 15}
    plain = Game(base, seed=9)
    plain_dep = plain.deploy(design, 40)
    plain_text = task_prompt(plain) + json.dumps(game_tools(plain, analysis=True)["submit_final_design"].spec())
    for d in DISCLOSURES:
        scn = load_scenario(f"antenna_trap~{d}")
        assert scn.name == f"antenna_trap~{d}" and scn.spec["ablation_of"] == "antenna_trap"
        game = Game(scn, seed=9)
        dep = game.deploy(design, 40)
        assert dep.returned == plain_dep.returned                     # the scenario's own draws: paired
        tools = game_tools(game, analysis=True)
        text = task_prompt(game) + json.dumps(tools["submit_final_design"].spec())
        has = {"component_hits": any("hits_engine" in r for r in dep.rows),
               "returned_only_note": "returned drones only" in text,
               "misleading_question": "misleading" in text,
               "hidden_measurements": "measure" in tools,
               "hints": "engine, cockpit, wing and body are critical" in text}
        assert has == {k: k == d for k in DISCLOSURES}, (d, has)
        assert not any(has[k] for k in DISCLOSURES if k != d)
        assert text != plain_text or d == "component_hits"
        if d == "component_hits":                                     # per component, summing to the total
            assert all(sum(r[f"hits_{c}"] for c in scn.components) == r["hit_count"] for r in dep.rows)
        if d == "hidden_measurements":                                # exact values of the scenario's own draws
            got = game.measure("weather_pattern", "stage1", 1)
            ss = seed_of(base["seed"], "antenna_trap", "play", 9, "stage1", 1)
            fleet = fly(base, game.validate_design(design), 40, np.random.default_rng(ss.spawn(2)[0]))
            want = [round(float(fleet.latent["weather_pattern"][r["drone"] - 1]), 3) for r in dep.rows]
            assert got["values"] == want


def test_the_ablations_table_is_each_ablation_minus_its_scenario():
    import pandas as pd

    from heuresis.config.settings import Bootstrap
    from heuresis.stages.games.analysis import ablations_table
    pattern = [{"of": ["antenna"], "at_least": 20}]
    refs = {"antenna_trap": {"trap_pattern": pattern, "family": "antenna", "ablation_of": None},
            "antenna_trap~component_hits": {"trap_pattern": pattern, "family": "antenna",
                                            "ablation_of": "antenna_trap"}}
    rows = []
    for scn, surv, antenna in [("antenna_trap", 0.9, 0), ("antenna_trap", 0.8, 0), ("antenna_trap~component_hits", 0.3, 27),
                               ("antenna_trap~component_hits", 0.5, 0)]:
        rows.append({"scenario": scn, "agent": "game_trap_follower", "mode": "agentic", "survival": surv,
                     "submitted": True, "status": "ok", "design": json.dumps({"antenna": antenna}),
                     "play_id": f"p{len(rows)}"})
    num, disp = ablations_table(pd.DataFrame(rows), refs, None, [], Bootstrap(resamples=200, seed=2))
    (r,) = num.itertuples()
    assert r.disclosure == "component_hits" and r.base == "antenna_trap"
    assert r.survival == pytest.approx(0.4) and r.base_survival == pytest.approx(0.85)
    assert r.survival_diff == pytest.approx(-0.45) and r.trap_fall_diff == pytest.approx(0.5)
    assert list(disp["CR2 difference"]) == ["no judge configured"]
