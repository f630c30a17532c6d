"""The games track (docs/games.md): engine, scenarios, references, traps, budgets, tools, agents.

Numbers that need the full reference search (minutes) come from the golden file
``tests/data/games_references.json``, written by ``heuresis game-references`` (its header says
with which code and settings); the tests re-measure them on fresh fleets, and run a small search
themselves on each family's base scenario.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import OWN_SCENARIOS, ROOT

from heuresis.causal.games import Game, GameError, ScenarioError, load_scenario, load_scenarios
from heuresis.causal.games.reading import correlational_design, reading_scores
from heuresis.causal.games.references import search_optimum, seed_of, verify
from heuresis.causal.games.scenario import DesignError
from heuresis.causal.games.scm import draw, simulate, survival
from heuresis.harness.game_tools import game_tools
from heuresis.harness.tools import ToolError
from heuresis.stages.games.play import run_play

SCENARIOS = OWN_SCENARIOS
GOLDEN = json.loads((ROOT / "tests/data/games_references.json").read_text())
BASES = ["antenna_base", "zone_base", "weather_base"]


@pytest.fixture(scope="module")
def scenarios():
    return load_scenarios(SCENARIOS)


def _l1(space, a, b) -> int:
    return int(np.abs(space.vector(a) - space.vector(b)).sum())


# --- scenarios and validation ------------------------------------------------------------------
def test_fourteen_scenarios_three_families(scenarios):
    assert len(scenarios) == 14
    fams = {s.family for s in scenarios.values()}
    assert fams == {"antenna", "zone", "weather"}
    assert {s.spec["variant"] for s in scenarios.values()} == {
        "base", "high_def", "local_optima", "no_history", "no_selection_bias", "simpsons_paradox", "categorical",
        "env_shift"}
    for s in scenarios.values():
        assert s.spec["intended_mechanism"].strip() and s.spec["bias"]
        s.space.validate(s.spec["trap_design"])


@pytest.mark.parametrize("override, key", [
    ("combat: {hit_base: 1.5}", "combat.hit_base"),
    ("env_damage: {storm: {rotor: 1.0}}", "env_damage.storm.rotor"),
    ("environment: {storm_beta: [0, 2]}", "environment.storm_beta"),
    ("trap_design: {antenna: 9}", "trap_design"),
    ("components: {wing: {cap: -1}}", "components.wing.cap"),
    ("family: plasma", "family"),
])
def test_invalid_parameter_names_scenario_and_key(tmp_path, override, key):
    shutil.copy(SCENARIOS / "antenna_base.yaml", tmp_path / "antenna_base.yaml")
    (tmp_path / "bad_one.yaml").write_text(f"extends: antenna_base\nname: bad_one\n{override}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario("bad_one", tmp_path)
    assert "'bad_one'" in str(err.value) and key in str(err.value)


def test_zone_family_keys_checked(tmp_path):
    shutil.copy(SCENARIOS / "zone_base.yaml", tmp_path / "zone_base.yaml")
    (tmp_path / "zone_bad.yaml").write_text("extends: zone_base\nname: zone_bad\n"
                                            "environment: {zones: {ridge: {emi: -1}}}\n")
    with pytest.raises(ScenarioError, match=r"'zone_bad'.*environment\.zones\.ridge\.emi"):
        load_scenario("zone_bad", tmp_path)


def test_design_validation_names_the_field(scenarios):
    space = scenarios["zone_base"].space
    with pytest.raises(DesignError, match="'antenna'.*cap of 8"):
        space.validate({"antenna": 9})
    with pytest.raises(DesignError, match="'total DEF'.*budget of 20"):
        space.validate({"engine": 8, "wing": 8, "body": 2, "emi_filter": True})
    with pytest.raises(DesignError, match="'rotor'"):
        space.validate({"rotor": 1})
    with pytest.raises(DesignError, match="'engine'.*whole number"):
        space.validate({"engine": 1.5})
    assert space.validate({"engine": 8, "wing": 8, "emi_filter": True})["emi_filter"] is True


# --- the engine --------------------------------------------------------------------------------
def test_deterministic_vectorized_and_fast(scenarios):
    scn = scenarios["antenna_base"]
    vec = scn.space.vector(scn.spec["standard_design"])
    a = simulate(scn, draw(scn, seed_of(1), 1000, 2), vec)
    b = simulate(scn, draw(scn, seed_of(1), 1000, 2), vec)
    assert np.array_equal(a.survived, b.survived) and np.array_equal(a.hits, b.hits)
    # one design on a batch equals that design alone (common random numbers)
    d = draw(scn, seed_of(2), 1000, 2)
    both = survival(scn, d, np.stack([vec, scn.space.vector(scn.spec["trap_design"])]))
    assert both[0] == survival(scn, d, vec[None])[0]


def test_agility_makes_max_everything_worse(scenarios):
    """DEF is not free: all points on the critical parts beats the same plus every cap filled elsewhere."""
    scn = scenarios["antenna_high_def"]
    d = draw(scn, seed_of(4), 4000, 2)
    opt = scn.space.vector(GOLDEN["antenna_high_def"]["optimum_design"])
    heavier = opt.copy()
    heavier[scn.space.components.index("antenna")] += 4
    s = survival(scn, d, np.stack([opt, heavier]))
    assert s[0] > s[1] + 0.02


# --- references: optimum, trap, threshold ----------------------------------------------------------
@pytest.mark.parametrize("name", BASES)
def test_trap_reading_and_search_optimum(scenarios, name):
    """The correlational reading of Stage-1 observations favours the trap; the searched optimum beats it."""
    scn = scenarios[name]
    space = scn.space
    game = Game(scn, seed=0)
    game.deploy(scn.spec["standard_design"], 50)
    rows = [r for d in game.observed() for r in d.rows]
    reading = correlational_design(space, rows)
    found = search_optimum(scn, drones=800, starts=2, max_steps=40, sample=0)
    vec, val = found.vec, found.value
    opt = space.design(vec)
    assert _l1(space, reading, scn.spec["trap_design"]) < _l1(space, reading, opt)
    ver = verify(scn, np.stack([vec, space.vector(scn.spec["trap_design"]), space.vector(reading)]), fleets=3)
    opt_s, trap_s, reading_s = ver.mean(axis=1)
    assert opt_s - trap_s >= 0.10, (opt_s, trap_s)
    assert opt_s - reading_s >= 0.08, (opt_s, reading_s)
    assert scn.threshold <= opt_s <= 0.93
    assert abs(val - opt_s) <= 0.04   # a small search; the full one is within 2-3 points (golden test)


def test_golden_optima_verified_and_winnable(scenarios):
    """Every scenario: the golden optimum re-measured on 2 fresh fleets, >= threshold, beats its trap."""
    assert set(GOLDEN) - {"_about"} == set(scenarios)
    for name, scn in scenarios.items():
        g = GOLDEN[name]
        # search vs its verification: the CRN estimate of the best of many designs is optimistic (selection)
        assert -0.02 <= g["optimum_search"] - g["optimum"] <= 0.04, name
        assert g["optimum"] >= g["threshold"] and g["threshold"] == scn.threshold   # the family's fixed threshold
        assert g["optimum"] - g["trap"] >= 0.08, name
        vecs = np.stack([scn.space.vector(g["optimum_design"]), scn.space.vector(scn.spec["trap_design"])])
        s = verify(scn, vecs, fleets=2, seed=99).mean(axis=1)
        assert abs(s[0] - g["optimum"]) <= 0.03, (name, s[0], g["optimum"])
        assert s[0] >= g["threshold"] - 0.015 and s[1] < g["threshold"], name


def test_no_selection_bias_shows_destroyed_and_changes_the_reading(scenarios):
    biased, control = scenarios["antenna_base"], scenarios["antenna_no_selection_bias"]
    readings = {}
    for scn in (biased, control):
        game = Game(scn, seed=0)
        dep = game.deploy(scn.spec["standard_design"], 50)
        rows = [r for d in game.observed() for r in d.rows]
        if scn is biased:
            assert len(dep.rows) == dep.returned and all("status" not in r for r in rows)
        else:
            assert len(dep.rows) == dep.count
            assert sum(r["status"] == "destroyed" for r in dep.rows) == dep.destroyed > 0
        readings[scn.name] = (correlational_design(scn.space, rows), reading_scores(scn.space, rows)[1])
    (rb, mode_b), (rc, mode_c) = readings["antenna_base"], readings["antenna_no_selection_bias"]
    assert (mode_b, mode_c) == ("survivor_damage", "contrast")
    assert rb["antenna"] >= 5 and rc["antenna"] == 0
    s = verify(control, np.stack([control.space.vector(rb), control.space.vector(rc)]), fleets=2).mean(axis=1)
    assert s[1] > s[0] + 0.08


def test_simpsons_history_reverses(scenarios):
    for name in ("antenna_simpsons_paradox", "zone_simpsons_paradox"):
        scn = scenarios[name]
        good, trap = Game(scn, seed=0).history
        assert good.returned / good.count < trap.returned / trap.count        # the aggregate says "trap"
        s = verify(scn, np.stack([scn.space.vector(good.design), scn.space.vector(trap.design)]), fleets=2)
        assert s[0].mean() > s[1].mean() + 0.05                                 # Stage 2 says otherwise


# --- budgets, refusals, tools ---------------------------------------------------------------------
def _state(game: Game) -> str:
    return json.dumps([game.status(), game.report, game.stage2 and game.stage2.survival], sort_keys=True, default=str)


def test_budget_refusals_leave_state_unchanged(scenarios):
    scn = scenarios["antenna_base"]
    game = Game(scn, seed=1)
    tools = game_tools(game)
    design = scn.spec["standard_design"]
    with pytest.raises(ToolError, match="deploy at least once"):
        tools["submit_final_design"].call(None, {"design": design})
    for count in (50, 50, 50, 49):
        tools["deploy"].call(None, {"design": design, "count": count})
    before = _state(game)
    with pytest.raises(ToolError, match="count 2 exceeds the 1 Stage-1 drones left"):   # the 201st drone
        tools["deploy"].call(None, {"design": design, "count": 2})
    assert _state(game) == before and game.drones_used == 199
    game2 = Game(scn, seed=2)
    t2 = game_tools(game2)
    for _ in range(4):
        t2["deploy"].call(None, json.dumps({"design": design, "count": 50}))
    before = _state(game2)
    with pytest.raises(ToolError, match="exceeds the 0 Stage-1 drones left"):
        t2["deploy"].call(None, {"design": design, "count": 1})
    assert _state(game2) == before
    game3 = Game(scn, seed=3)
    t3 = game_tools(game3)
    for _ in range(10):
        t3["deploy"].call(None, {"design": design, "count": 1})
    before = _state(game3)
    with pytest.raises(ToolError, match="no deployments left"):                      # the 11th deployment
        t3["deploy"].call(None, {"design": design, "count": 1})
    assert _state(game3) == before
    with pytest.raises(ToolError, match="antenna.*maximum of 8"):                    # over a cap (schema)
        t3["submit_final_design"].call(None, {"design": {**design, "antenna": 9}})
    with pytest.raises(ToolError, match="'total DEF'.*budget of 20"):                # over the budget
        t3["submit_final_design"].call(None, {"design": {"engine": 8, "wing": 8, "body": 8}})
    assert _state(game3) == before
    with pytest.raises(ToolError, match="commit the report with or before the submission"):   # no report
        t3["submit_final_design"].call(None, {"design": design})
    assert _state(game3) == before
    out = json.loads(t3["submit_final_design"].call(None, {"design": design, "report": "r"}).text)
    assert out["fleet"] == 1000 and 0 < out["survival_rate"] < 1 and game3.report == "r"
    after = _state(game3)
    with pytest.raises(ToolError, match="already submitted"):                        # a second submission
        t3["submit_final_design"].call(None, {"design": scn.spec["trap_design"]})
    with pytest.raises(ToolError, match="Stage 1 is over"):
        t3["deploy"].call(None, {"design": design, "count": 1})
    with pytest.raises(ToolError, match="outcome shown: the report was due with or before"):   # after the outcome
        t3["write_report"].call(None, {"text": "fitted to the outcome"})
    assert _state(game3) == after


def test_201st_drone_refused():
    scn = load_scenario("weather_base", SCENARIOS)
    game = Game(scn, seed=0)
    for _ in range(4):
        game.deploy(scn.spec["standard_design"], 50)
    before = _state(game)
    with pytest.raises(GameError, match="exceeds the 0 Stage-1 drones left"):
        game.deploy(scn.spec["standard_design"], 1)
    assert _state(game) == before and game.drones_used == 200


def test_tool_schemas_are_function_calling_specs(scenarios):
    tools = game_tools(Game(scenarios["zone_base"], seed=0))
    assert list(tools) == ["get_status", "get_history", "deploy", "write_report", "submit_final_design"]
    spec = tools["deploy"].spec()
    assert spec["type"] == "function" and spec["function"]["name"] == "deploy"
    props = spec["function"]["parameters"]["properties"]["design"]["properties"]
    assert props["shield"]["maximum"] == 8 and props["emi_filter"]["type"] == "boolean"


# --- plays ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["game_random", "game_greedy", "game_bandit", "game_mechanism", "game_trap_follower"])
def test_offline_agents_play_through_the_interface(scenarios, kind):
    scn = scenarios["antenna_base"]
    g = GOLDEN["antenna_base"]
    out = run_play(kind, {"kind": kind}, scn, repeat=0, seed=3, threshold=g["threshold"], optimum=g["optimum"])
    row = out.row
    assert row["status"] == "ok" and row["termination"] == "submitted" and row["submitted"]
    assert row["drones_used"] <= 200 and row["deployments"] <= 10 and row["n_errors"] == 0
    assert [c["tool"] for c in out.calls][:2] == ["get_status", "get_history"]
    assert out.calls[-1]["tool"] == "submit_final_design" and row["report"]      # committed with the submission
    assert (row["mode"], row["task_variant"], row["code_isolation"]) == ("agentic", "standard", "bwrap")
    assert row["gap"] == pytest.approx(g["optimum"] - row["survival"])
    if kind == "game_trap_follower":
        assert row["survival"] < g["threshold"] and not row["won"]
        assert json.loads(row["design"])["antenna"] >= 5


def test_bad_calls_are_answered_and_recorded(scenarios):
    """A scripted agent (as an LLM might) sends bad calls; each is answered as an error and recorded."""
    from heuresis.harness.protocol import Agent, AgentReply, register_agent, tool_call

    script = [("fly", {}), ("deploy", "{not json"), ("deploy", {"design": {"engine": 1}, "count": 0}),
              ("submit_final_design", {"design": {"engine": 1}, "report": "r"}),
              ("deploy", {"design": {"engine": 1}, "count": 5}),
              ("submit_final_design", {"design": {"engine": 2}}), ("write_report", {"text": "done"}),
              ("write_report", {"text": "again"}), ("submit_final_design", {"design": {"engine": 2}})]

    @register_agent("scripted_game_test")
    class Scripted(Agent):
        def respond(self, messages, tools):
            k = sum(m["role"] == "assistant" for m in messages)
            name, args = script[k]
            tc = tool_call(name, {} if isinstance(args, str) else args)
            if isinstance(args, str):
                tc["function"]["arguments"] = args
            return AgentReply({"role": "assistant", "content": None, "tool_calls": [tc]})

    out = run_play("scripted", {"kind": "scripted_game_test"}, scenarios["weather_base"], seed=0)
    oks = [c["ok"] for c in out.calls]
    assert oks == [False, False, False, False, True, False, True, False, True]
    assert "unknown tool" in out.calls[0]["error"] and "valid JSON" in out.calls[1]["error"]
    assert "deploy at least once" in out.calls[3]["error"] and "commit the report" in out.calls[5]["error"]
    assert "already committed" in out.calls[7]["error"]
    assert out.row["termination"] == "submitted" and json.loads(out.row["design"])["engine"] == 2
    assert out.row["report"] == "done" and out.row["turns"] == len(script)


def test_cli_play_by_hand(capsys):
    from heuresis.cli import build_parser
    from heuresis.cli.games import cmd_play

    args = build_parser().parse_args(["play", "antenna_base", "--scenarios", str(SCENARIOS), "--rows", "2"])
    final = "submit engine=4 wing=5 body=3 gun=4"          # one syntax for designs: deploy's
    lines = iter(["status", "status --json", "history", "deploy 20 engine=3 wing=4 camera=2", "deploy 10 antenna=9",
                  final, "report ok", final])
    printed: list[str] = []
    assert cmd_play(args, inp=lambda prompt: next(lines), out=printed.append) == 0
    text = "\n".join(map(str, printed))
    short, raw = printed[2], printed[3]                      # after the task prompt and the help
    assert short.startswith("antenna_base: stage1") and len(short.splitlines()) < 10 and "Stage 1: " in short
    assert json.loads(raw)["scenario"] == "antenna_base"
    assert "submit_final_design" not in text
    assert "deployment 1 (history)" in text and "deployment 1 (stage1)" in text
    assert "refused" in text and "maximum of 8" in text and "commit the report" in text
    assert "final:" in text and "searched by simulation: heuresis game-references antenna_base" in text


def test_cli_play_shows_the_result_beside_the_exact_optimum():
    """A CausalGame scenario played by hand ends with the design's exact survival, which the Stage-2 fleet's
    rate agrees with (1,000 drones: within 4 standard errors), beside the best design of the lattice."""
    import re

    from heuresis.cli import build_parser
    from heuresis.cli.games import cmd_play

    args = build_parser().parse_args(["play", "antenna_trap", "--rows", "1"])
    lines = iter(["query wind_speed", "deploy 20 engine=30 antenna=0", "report engine armour", "submit engine=30 antenna=0"])
    printed: list[str] = []
    assert cmd_play(args, inp=lambda prompt: next(lines), out=printed.append) == 0
    text = "\n".join(map(str, printed))
    assert "submitted: engine=30 cockpit=20 wing=15 body=15 antenna=0 camera=5 gun=5" in text
    assert re.search(r"wind_speed: rows 24, queries left 9, mean [\d.]+", text), text[-2000:]
    rate = int(re.search(r"final: (\d+)/1000 survived", text).group(1)) / 1000
    yours, best = map(float, re.search(r"exact survival: ([\d.]+), [\d.]+ below the best: .* survives ([\d.]+)",
                                       text).groups())
    assert abs(rate - yours) < 4 * (yours * (1 - yours) / 1000) ** 0.5 and best == 0.928 > yours   # docs/games.md
# --- the mechanism-aware baseline ---------------------------------------------------------------------------
def test_mechanism_baseline_is_passed_the_family_name_and_reads_no_file(scenarios, monkeypatch):
    """What it is given: its config entry, the play seed and the family's name; what it reads: the tool
    results every agent gets. Opening any file while it decides fails the play."""
    import builtins
    import io

    import heuresis.stages.games.play as play
    from heuresis.agents.players import MechanismAgent

    given = {}
    real_make = play.make_agent

    def spy(name, spec, **kw):
        given.update(spec)
        agent = real_make(name, spec, **kw)
        real_respond = agent.respond

        def respond(messages, tools):
            def no_open(*a, **k):
                raise AssertionError(f"the mechanism-aware baseline opened a file: {a[:1]}")
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(builtins, "open", no_open)
                mp.setattr(io, "open", no_open)
                return real_respond(messages, tools)
        agent.respond = respond
        return agent

    monkeypatch.setattr(play, "make_agent", spy)
    scn = scenarios["zone_env_shift"]
    out = run_play("game_mechanism", {"kind": "game_mechanism"}, scn, seed=5, threshold=0.7)
    assert out.row["status"] == "ok", out.row["error"]
    assert given == {"kind": "game_mechanism", "seed": 5, "family": "zone"}
    agent = real_make("game_mechanism", given)
    assert isinstance(agent, MechanismAgent)
    # nothing of the scenario (parameters, Game, Scenario) is held by the agent
    assert not any(type(v).__module__.startswith("heuresis.stages.games.") for v in vars(agent).values())
    # exactly the Stage-1 budget of every agent (the game refuses more; nothing was refused)
    assert out.row["n_errors"] == 0
    calls = [c for c in out.calls if c["tool"] == "deploy"]
    assert 1 <= len(calls) <= scn.budgets["stage1_deployments"]
    assert sum(json.loads(c["arguments"])["count"] for c in calls) <= scn.budgets["stage1_drones"]


def test_mechanism_baseline_structure_names_only_parts(scenarios):
    """STRUCTURE holds part names per family (no numbers), and each named part exists in its scenarios."""
    from heuresis.agents.players import STRUCTURE

    for fam, st in STRUCTURE.items():
        names = [x for k, v in st.items() if k != "exposed_shares" for x in v]
        assert all(isinstance(x, str) for x in names)
        for scn in (s for s in scenarios.values() if s.family == fam):
            parts = set(scn.space.components) | set(scn.space.equipment)
            assert set(names) <= parts, (fam, set(names) - parts)
            assert {c for c, v in scn.spec["components"].items() if v["critical"]} == set(st["critical"])


def test_mechanism_baseline_beats_random_search(scenarios):
    """Measured: three plays per scenario with the same seeds for both agents (paired)."""
    from heuresis.stages.games.workflow import play_seed

    surv = {"game_mechanism": [], "game_random": []}
    for name, scn in sorted(scenarios.items()):
        for r in range(3):
            for kind in surv:
                row = run_play(kind, {"kind": kind}, scn, repeat=r, seed=play_seed(99, name, r)).row
                assert row["status"] == "ok" and row["submitted"]
                surv[kind].append(row["survival"])
    mech, rand = np.array(surv["game_mechanism"]), np.array(surv["game_random"])
    assert mech.mean() > rand.mean() + 0.05, (mech.mean(), rand.mean())
    per_scenario = (mech - rand).reshape(len(scenarios), 3).mean(1)
    assert (per_scenario > 0).all(), per_scenario
