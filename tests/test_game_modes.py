"""The games' task and modes as the protocol states them (docs/games.md §4), checked on what a scripted
LLM server on 127.0.0.1 (tests/llm_server.py) received and answered.

* the default task states the flow, budgets, design space, tools and victory condition, with no
  mechanism fact beyond the side information CausalGame's own prompt gives; the ``hints`` variant
  states them, recorded per play;
* the agentic mode's code tool computes over every observed flight in the sandbox (checked against
  the numbers recomputed from the game), and its measurement query reports the hidden variable
  (checked against the SCM's own draws);
* the ReAct instruction is the last message of every request, the analysis prompt follows every
  deployment's result (after the turn's results) and nothing else;
* the per-turn tool-call limit, the exploration guard (agentic only) and the report: committed with
  or before the submission, never after the outcome is shown.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from llm_server import ScriptedLLMServer
from test_games_workflow import SCENARIOS, _deploy, _spec

from heuresis.causal.games import Game, load_scenario, load_scenarios
from heuresis.causal.games import causalgame as cg
from heuresis.causal.games.references import seed_of
from heuresis.stages.games.play import run_play, task_prompt

#: Phrases of the mechanism (GAMES.md §1: what the agent is not told); none may appear in the default task.
MECHANISM_FACTS = ("critical", "agility", "agile", "destroyed when any", "bias", "nois", "measurement error",
                   "selection", "confound", "survivor", "lowers", "emits", "draws fire", "filter prevents")
DESIGN = {"engine": 3, "cockpit": 3, "wing": 4, "body": 4, "camera": 3, "gun": 3}
REPORT = "Camera and gun lower the enemy's fire; the antenna draws detection, so it gets no DEF."


def _say(*calls, content="Observation: ... Hypothesis: ... Action: ...", usage=(1500, 40)):
    return {"content": content, "tool_calls": list(calls), "usage": usage}


def _text(body: dict) -> str:
    return json.dumps([body["messages"], body.get("tools")])


@pytest.mark.parametrize("mode", ["agentic", "prompting"])
@pytest.mark.parametrize("scenario", ["antenna_trap", "deployment_zone_trap_categorical", "weather_noise"])
def test_the_default_task_states_no_mechanism_fact_and_hints_does(mode, scenario):
    scn = load_scenario(scenario, SCENARIOS)
    first = (_say(("deploy", {"design": {"engine": 3, "wing": 4}, "count": 10})) if mode == "agentic"
             else _deploy({"engine": 3, "wing": 4}, 10))
    seen = {}
    for variant in ("standard", "hints"):
        with ScriptedLLMServer([first]) as server:
            out = run_play("llm_local", _spec(server.url), scn, seed=2, threshold=0.75, optimum=0.85, mode=mode,
                           task_variant=variant, max_turns=1)
        assert out.row["task_variant"] == variant
        body = server.requests[0]["body"]
        seen[variant] = (body, body["messages"][1]["content"])
    body, task = seen["standard"]
    lowered = _text(body).lower()                          # system, task, tool descriptions: all of it
    for lines in (scn.spec.get("side_information") or {}).values():   # CausalGame's own prompt states these
        lowered = lowered.replace(json.dumps(lines).lower()[1:-1], "")
        for line in lines:
            lowered = lowered.replace(json.dumps(line).lower()[1:-1], "")
    assert not [f for f in MECHANISM_FACTS if f in lowered], [f for f in MECHANISM_FACTS if f in lowered]
    b = scn.budgets
    for stated in (f"at most {scn.space.budget}", f"up to {b['stage1_drones']} drones",
                   f"at most {b['stage1_deployments']} deployments", f"fleet of {b['stage2_fleet']} drones",
                   "you win at or above 75.0%", "once and irreversibly", *scn.space.components, *scn.space.equipment):
        assert stated in task, stated
    assert ("after at least one deployment" in task) == (mode == "agentic")   # the guard is stated where it holds
    hinted = seen["hints"][1]
    assert "critical" in hinted and "agility" in hinted and hinted.startswith(task.split("\nHow to work")[0][:200])
    assert len(hinted) > len(task)


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_agentic_mode_computes_over_the_flights_in_the_sandbox_and_measures_the_hidden_variable():
    scn = load_scenario("antenna_trap~hidden_measurements", SCENARIOS)   # the ablation that offers the hidden look
    probe = ("import csv\n"
             "deps = list(csv.DictReader(open('deployments.csv')))\n"
             "rows = list(csv.DictReader(open('drones.csv')))\n"
             "print(len(deps), len(rows), sum(int(r['hit_count']) for r in rows))\n"
             "try:\n"
             f"    open({str(SCENARIOS / 'antenna_trap.yaml')!r})\n"
             "    print('SCENARIO FILE READ')\n"
             "except OSError as exc:\n"
             "    print('no scenario file:', type(exc).__name__)\n")
    script = [_say(("run_code", {"code": probe})),
              _say(("deploy", {"design": DESIGN, "count": 30})),
              _say(("run_code", {"code": probe}), ("measure", {"variable": "weather_pattern", "source": "history",
                                                              "deployment": 1})),
              _say(("submit_final_design", {"design": DESIGN, "report": REPORT}))]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=4, threshold=0.75, optimum=0.85, mode="agentic")
    assert out.row["status"] == "ok" and out.row["termination"] == "submitted", out.row
    assert out.row["code_isolation"] == "bwrap"
    calls = {(c["turn"], c["tool"]): c for c in out.calls}
    # the expected numbers, from the same play replayed on the engine
    g = Game(scn, seed=4)
    before = [(len(g.history), sum(len(d.rows) for d in g.history), sum(r["hit_count"] for d in g.history for r in d.rows))]
    g.deploy(DESIGN, 30)
    obs = g.observed()
    after = (len(obs), sum(len(d.rows) for d in obs), sum(r["hit_count"] for d in obs for r in d.rows))
    for turn, want in ((1, before[0]), (3, after)):
        c = calls[(turn, "run_code")]
        assert c["ok"], c["error"]
        lines = c["result"].split("stdout:\n")[1].splitlines()
        assert lines[0] == " ".join(map(str, want)), (turn, lines, want)
        assert lines[1] == "no scenario file: FileNotFoundError"             # only the data files are there
        assert json.loads(c["details"])["isolation"] == "bwrap"
    assert after[1] > before[0][1]                                            # the deployment's rows came along
    # the measurement: the hidden weather of the shown history drones, as the SCM drew it (the history flown again)
    m = json.loads(calls[(3, "measure")]["result"])
    part, design, force = cg.history_groups(scn)[0]
    n = int(scn.spec["resources"]["initial_observations"])
    assert part == "all"
    rng = np.random.default_rng(seed_of(scn["seed"], scn.seed_name, "play", 4, "history", 0))
    f = cg.fly(scn, design, n, rng, stage=1, enforce_budget=False, force=force)
    shown = np.flatnonzero(f.returned)                                        # rows of returned drones only
    assert m["drones"] == (np.arange(len(shown)) + 1).tolist()
    assert m["values"] == [cg._py(v) for v in f.latent["weather_pattern"][shown]]
    assert len(set(m["values"])) > 1 and all(0 <= v <= 1 for v in m["values"])   # the weather's uniform draw


def test_agentic_injections_the_per_turn_limit_and_the_guard():
    scn = load_scenario("deployment_zone_trap_categorical", SCENARIOS)
    script = [_say(*[("get_status", {})] * 7),                                # one call over the limit of 6
              _say(("submit_final_design", {"design": {"engine": 3}, "report": "too early"})),   # the guard
              _say(("deploy", {"design": {"engine": 3, "wing": 3}, "count": 20}), ("get_history", {})),
              {"content": "Let me think.", "usage": (1000, 10)},              # text only: nudged
              _say(("deploy", {"design": {"engine": 4, "wing": 3}, "count": 25})),
              _say(("write_report", {"text": REPORT})),
              _say(("submit_final_design", {"design": {"engine": 4, "wing": 3}}))]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=3, threshold=0.75, optimum=0.85, mode="agentic",
                       max_tool_calls=6, max_turns=12)
    row = out.row
    assert (row["termination"], row["deployments"], row["report"]) == ("submitted", 2, REPORT)
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == len(script)
    # the ReAct instruction is the last message of every request, numbered by turn
    for k, b in enumerate(bodies, start=1):
        last = b["messages"][-1]
        assert last["role"] == "user" and last["content"].startswith(f"Turn {k} of 12. Before you call a tool, think")
        assert "Hypothesis" in last["content"] and "at most 6 tool calls" in last["content"]
    # the per-turn limit: six calls ran, the seventh was answered (once) as not executed
    turn1 = [c for c in out.calls if c["turn"] == 1]
    assert [c["ok"] for c in turn1] == [True] * 6 + [False]
    assert turn1[-1]["result"] == "ERROR: not executed: at most 6 tool calls per turn"
    msgs = bodies[1]["messages"]
    asked = [tc["id"] for m in msgs if m["role"] == "assistant" for tc in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
    assert sorted(asked) == sorted(answered) and len(asked) == 7              # every call answered exactly once
    # the exploration guard holds in the agentic mode
    guard = next(c for c in out.calls if c["turn"] == 2)
    assert not guard["ok"] and "deploy at least once" in guard["error"]
    # the analysis prompt follows every deployment's result, as a user message after the turn's results
    msgs = out.transcript.messages
    deploys = [c for c in out.calls if c["tool"] == "deploy"]
    analyses = [k for k, m in enumerate(msgs) if m["meta"].get("injected") == "analysis"]
    assert len(deploys) == len(analyses) == 2
    for n, (c, k) in enumerate(zip(deploys, analyses), start=1):
        res = json.loads(c["result"])                                          # the result itself stays JSON
        m = msgs[k]
        assert m["role"] == "user" and m["meta"]["turn"] == c["turn"]
        assert m["content"].startswith(f"Analysis of deployment {n}: {res['returned']} of {res['count']} drones returned")
        assert "expected" in m["content"] and "test next" in m["content"]
        turn_msgs = [j for j, x in enumerate(msgs) if x["meta"]["turn"] == c["turn"] and x["role"] == "tool"]
        assert k > max(turn_msgs)                                              # after every result of its turn
        assert msgs[k + 1]["meta"].get("injected") in ("analysis", "react")    # then the next turn's ReAct
    # the text-only reply was nudged, then the turn's ReAct instruction followed
    after_text = bodies[4]["messages"]
    assert after_text[-2]["content"].startswith("No tool call in your reply.") and after_text[-1]["content"].startswith("Turn 5")
    # every prompt file of the mode is recorded, and its messages are marked where injected
    assert {r: v["file"] for r, v in out.transcript.prompts.items()} == {
        "system": "game_agentic_system.txt", "task": "game_task.txt", "hints": "game_hints.txt",
        "tools": "game_agentic_tools.txt", "react": "game_react.txt", "analysis": "game_analysis.txt",
        "nudge": "game_nudge.txt"}
    assert sum(m["meta"].get("injected") == "react" for m in out.transcript.messages) == len(script)


def test_no_report_once_the_outcome_is_shown():
    """The submission's result (survival, win) ends the play: no request follows it, and a report call in
    the same reply is not executed; a report committed before the submission is the one recorded."""
    scn = load_scenario("antenna_trap", SCENARIOS)
    script = [_say(("deploy", {"design": DESIGN, "count": 20})),
              _say(("submit_final_design", {"design": DESIGN, "report": REPORT}),
                   ("write_report", {"text": "Rewritten after the outcome."})),
              _say(("write_report", {"text": "Never asked for."}))]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=6, threshold=0.75, optimum=0.85, mode="agentic")
    assert len(server.requests) == 2 and out.row["report"] == REPORT and out.row["termination"] == "submitted"
    assert not any('"survival_rate"' in json.dumps(r["body"]["messages"]) and '"won"' in json.dumps(r["body"]["messages"])
                   for r in server.requests)                                  # no request ever saw the outcome
    late = out.calls[-1]
    assert late["tool"] == "write_report" and not late["ok"] and "ended the play" in late["error"]
    # the engine refuses a report after the submission, whoever asks
    g = Game(scn, seed=6)
    g.deploy(DESIGN, 10)
    g.submit(DESIGN, REPORT)
    with pytest.raises(ValueError, match="report was due with or before the submission"):
        g.write_report("fitted to the outcome")
    # the prompting mode commits the report in the submission itself: no request follows it either
    answer = json.dumps({"action": "submit", "design": DESIGN, "report": REPORT})
    with ScriptedLLMServer([{"content": answer}, {"content": "Rewritten."}]) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=6, threshold=0.75, optimum=0.85, mode="prompting")
    assert len(server.requests) == 1 and out.row["report"] == REPORT and out.row["submitted"]


def test_task_prompt_of_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown task variant 'spoilers'"):
        task_prompt(Game(load_scenario("deployment_zone_trap_categorical", SCENARIOS)), variant="spoilers")


def test_the_sandbox_takes_named_data_files_only():
    """The code tool's data files: plain names only, never one of the sandbox's own files; no data matrix
    is written when none is given."""
    from heuresis.harness.sandbox import run_code

    res = run_code("import os; print(sorted(os.listdir('.')))", None, files={"drones.csv": "a,b\n1,2\n"},
                   isolation="bwrap")
    assert res.returncode == 0 and res.stdout.strip() == "['drones.csv', 'script.py']", res.stderr
    for bad in ("script.py", "data.csv", "../escape.csv", "sub/dir.csv", ""):
        with pytest.raises(ValueError, match="reserved or not a plain file name"):
            run_code("print(1)", None, files={bad: "x"}, isolation="none")


def test_no_scenario_offers_a_free_look_at_a_hidden_variable_by_default():
    from heuresis.harness.game_tools import game_tools
    for name, scn in load_scenarios(SCENARIOS).items():
        assert scn.measurable_variables() == [], name
        tools = game_tools(Game(scn, seed=1), analysis=True)
        assert "measure" not in tools, name


@pytest.mark.parametrize("mode", ["agentic", "prompting"])
def test_a_causalgame_scenario_offers_its_environment_query_in_both_modes_and_no_extra_disclosure(mode):
    """CausalGame's zone scenario through a scripted LLM: the query answers over the rows seen, no request
    carries a hidden value or one of this track's extra disclosures, the task shows the side information."""
    from heuresis.causal.games.causalgame import load_cg
    scn = load_cg("deployment_zone_trap_categorical")
    design = {"shield": 10, "engine": 5, "enhancement_module": "signal_filter"}
    if mode == "agentic":
        script = [_say(("query_environment", {"variable": "altitude_band"})),
                  _say(("deploy", {"design": design, "count": 30})),
                  _say(("submit_final_design", {"design": design, "report": REPORT}))]
    else:
        script = [{"content": json.dumps({"action": "query", "variable": "altitude_band"})},
                  {"content": json.dumps({"action": "deploy", "design": design, "count": 30})},
                  {"content": json.dumps({"action": "submit", "design": design, "report": REPORT})}]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=8, threshold=scn.threshold, mode=mode)
    assert out.row["status"] == "ok" and out.row["termination"] == "submitted", out.row["error"]
    query = next(c for c in out.calls if c["tool"] == "query_environment")
    answer = json.loads(query["result"])
    game = Game(scn, seed=8)                                   # the same play's history, from its seed
    bands = [r["altitude_band"] for h in game.history for r in h.rows]
    assert answer["counts"] == {b: bands.count(b) for b in set(bands)} and answer["queries_left"] == 9
    sent = json.dumps([r["body"]["messages"] for r in server.requests])
    told = json.dumps(answer["counts"])[1:-1].replace(" ", "")
    assert told in sent.replace('\\"', '"').replace(" ", "")                 # the agent was told the answer
    for word in ("mission_zone", "emi_level", "effective_emi", "comm_failure", "hits_", "misleading",
                 "returned drones only"):
        assert word not in sent, word
    assert "Low-altitude zones are known to be extremely dangerous." in sent     # side information, as given
    assert out.transcript.prompts["task"]["file"] == "game_task.txt"


DEBRIEF = "1. Yes. 2. A bare antenna keeps the drone stealthy. 3. Storm wind. 4. Trust interventions, not survivors."


@pytest.mark.parametrize("mode", ["agentic", "prompting"])
def test_as_published_asks_causalgames_debrief_after_the_outcome(mode):
    """Under as_published a submitted play gets one more request: the mission report of its own Stage-2
    outcome and CausalGame's four questions, in the play's conversation (the agentic mode keeps its tools,
    a call in the answer is not executed); the answer is the debrief, the committed report stays, the
    debrief's tokens count in the play's. A failed debrief request records the play failed."""
    from heuresis.causal.games.causalgame import load_cg
    scn = load_cg("antenna_trap")
    design = {"antenna": 0, "camera": 10, "gun": 10, "engine": 15, "cockpit": 20}
    if mode == "agentic":
        script = [_say(("deploy", {"design": design, "count": 20}), usage=(1000, 30)),
                  _say(("submit_final_design", {"design": design, "report": REPORT}), usage=(1200, 40)),
                  {"content": DEBRIEF, "tool_calls": [("get_status", {})], "usage": (1400, 50)}]
    else:
        script = [{"content": json.dumps({"action": "deploy", "design": design, "count": 20}), "usage": (1000, 30)},
                  {"content": json.dumps({"action": "submit", "design": design, "report": REPORT}), "usage": (1200, 40)},
                  {"content": DEBRIEF, "usage": (1400, 50)}]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=3, threshold=scn.threshold, mode=mode,
                       protocols=("committed", "as_published"))
    row = out.row
    assert row["status"] == "ok" and row["termination"] == "submitted", row["error"]
    assert len(server.requests) == 3 and row["debrief"] == DEBRIEF and row["debrief_status"] == "ok"
    assert row["report"] == REPORT and (row["tokens_in"], row["tokens_out"]) == (3600, 120)
    last = server.requests[-1]["body"]
    asked = last["messages"][-1]["content"]
    survived = round(row["survival"] * scn.budgets["stage2_fleet"])
    for line in ("MISSION REPORT:", f"- Survival Rate: {row['survival']:.1%}",
                 f"- Survivors: {survived}/{scn.budgets['stage2_fleet']}", f"- Victory: {'YES' if row['won'] else 'NO'}",
                 f"Exploration: {row['drones_used']} drones used in Stage 1.", "DO NOT call any tools",
                 f"1. Did you solve the task? (Survival Rate > {scn.threshold * 100:.0f}% is considered a success).",
                 "2. What was the key to survival?", "3. Why did some drones fail?", "4. Final Conclusion."):
        assert line in asked, line
    prev = server.requests[-2]["body"]["messages"]
    assert last["messages"][:len(prev)] == prev and len(last["messages"]) > len(prev) + 1   # the same conversation
    assert bool(last.get("tools")) == (mode == "agentic")
    assert not any(c["tool"] == "get_status" for c in out.calls)            # the debrief's call is not executed
    assert out.transcript.messages[-2]["meta"]["injected"] == "debrief"
    # committed only: no request after the outcome, no debrief
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=3, threshold=scn.threshold, mode=mode)
    assert len(server.requests) == 2 and out.row["debrief"] == "" and out.row["debrief_status"] == ""
    # the debrief request fails: the play is failed (its rerun replays the paid turns from the request log)
    with ScriptedLLMServer([*script[:2], {"status": 500, "error": "down"}]) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=3, threshold=scn.threshold, mode=mode,
                       protocols=("committed", "as_published"))
    assert out.row["status"] == "failed" and out.row["debrief_status"] == "failed" and "debrief" in out.row["error"]
