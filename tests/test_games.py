"""The games track (docs/games.md): budgets and refusals, tools, offline players and the hand-played game.

CausalGame's models, their exact survival and references are tested in test_games_causalgame.py and
test_games_exact.py; these tests play the scenarios through the game and its tools.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SCENARIOS

from heuresis.causal.games import Game, GameError, load_scenario, load_scenarios
from heuresis.harness.game_tools import game_tools
from heuresis.harness.tools import ToolError
from heuresis.stages.games.play import run_play

#: antenna_trap's exact Stage-2 optimum over the lattice of DEF steps of 5 (docs/games.md; test_games_exact.py)
ANTENNA_OPTIMUM = 0.928


@pytest.fixture(scope="module")
def scenarios():
    return load_scenarios(SCENARIOS)


# --- budgets, refusals, tools ---------------------------------------------------------------------
def _state(game: Game) -> str:
    return json.dumps([game.status(), game.report, game.stage2 and game.stage2.survival], sort_keys=True, default=str)


def test_budget_refusals_leave_state_unchanged(scenarios):
    scn = scenarios["antenna_trap"]
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
    game3 = Game(scn, seed=3)
    t3 = game_tools(game3)
    for _ in range(10):
        t3["deploy"].call(None, json.dumps({"design": design, "count": 1}))
    before = _state(game3)
    with pytest.raises(ToolError, match="no deployments left"):                      # the 11th deployment
        t3["deploy"].call(None, {"design": design, "count": 1})
    assert _state(game3) == before
    with pytest.raises(ToolError, match="antenna.*maximum of 50"):                   # over a cap (schema)
        t3["submit_final_design"].call(None, {"design": {**design, "antenna": 51}})
    with pytest.raises(ToolError, match="total DEF 110 exceeds the budget def_budget=90.*cockpit 20"):
        t3["submit_final_design"].call(None, {"design": {"engine": 30, "wing": 20, "body": 20}})   # defaults named
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
    scn = load_scenario("weather_noise", SCENARIOS)
    game = Game(scn, seed=0)
    for _ in range(4):
        game.deploy(scn.spec["standard_design"], 50)
    before = _state(game)
    with pytest.raises(GameError, match="exceeds the 0 Stage-1 drones left"):
        game.deploy(scn.spec["standard_design"], 1)
    assert _state(game) == before and game.drones_used == 200


def test_tool_schemas_are_function_calling_specs(scenarios):
    tools = game_tools(Game(scenarios["deployment_zone_trap_categorical"], seed=0))
    assert list(tools) == ["get_status", "get_history", "deploy", "write_report", "submit_final_design"]
    spec = tools["deploy"].spec()
    assert spec["type"] == "function" and spec["function"]["name"] == "deploy"
    props = spec["function"]["parameters"]["properties"]["design"]["properties"]
    assert props["shield"]["maximum"] == 50 and props["enhancement_module"]["type"] == "string"
    assert "signal_filter" in props["enhancement_module"]["enum"]


# --- plays ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["game_random", "game_greedy", "game_bandit", "game_mechanism", "game_trap_follower"])
def test_offline_agents_play_through_the_interface(scenarios, kind):
    # the trap-follower reads the hits per component, which the component_hits ablation shows
    scn = load_scenario("antenna_trap~component_hits") if kind == "game_trap_follower" else scenarios["antenna_trap"]
    out = run_play(kind, {"kind": kind}, scn, repeat=0, seed=3, threshold=scn.threshold, optimum=ANTENNA_OPTIMUM)
    row = out.row
    assert row["status"] == "ok" and row["termination"] == "submitted" and row["submitted"]
    assert row["drones_used"] <= 200 and row["deployments"] <= 10 and row["n_errors"] == 0
    assert [c["tool"] for c in out.calls][:2] == ["get_status", "get_history"]
    assert out.calls[-1]["tool"] == "submit_final_design" and row["report"]      # committed with the submission
    assert (row["mode"], row["task_variant"], row["code_isolation"]) == ("agentic", "standard", "bwrap")
    assert row["gap"] == pytest.approx(ANTENNA_OPTIMUM - row["survival"])
    if kind == "game_trap_follower":
        assert row["survival"] < scn.threshold and not row["won"]
        assert scn.follows_trap(json.loads(row["design"]))


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

    out = run_play("scripted", {"kind": "scripted_game_test"}, scenarios["weather_noise"], seed=0)
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

    args = build_parser().parse_args(["play", "antenna_trap", "--scenarios", str(SCENARIOS), "--rows", "2"])
    final = "submit engine=25 antenna=0"                   # one syntax for designs: deploy's
    lines = iter(["status", "status --json", "history", "deploy 20 engine=30 wing=15 antenna=0", "deploy 10 antenna=51",
                  final, "report ok", final])
    printed: list[str] = []
    assert cmd_play(args, inp=lambda prompt: next(lines), out=printed.append) == 0
    text = "\n".join(map(str, printed))
    short, raw = printed[2], printed[3]                      # after the task prompt and the help
    assert short.startswith("antenna_trap: stage1") and len(short.splitlines()) < 10 and "Stage 1: " in short
    assert json.loads(raw)["scenario"] == "antenna_trap"
    assert "submit_final_design" not in text
    assert "deployment 1 (history)" in text and "deployment 1 (stage1)" in text
    assert "refused" in text and "51 is greater than the maximum of 50" in text and "commit the report" in text
    assert "final:" in text and "your design's exact survival" in text


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
    scn = scenarios["deployment_zone_trap_env_shift"]
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
