"""The agent loop's records and the structured tool results the offline agents read."""

import json

import pytest
from conftest import agent_episode, chain_instance

from heuresis.causal.grades import DEFAULT_GRADES
from heuresis.harness import tools as harness_tools
from heuresis.harness.budgets import BudgetSettings
from heuresis.harness.conditions import Condition
from heuresis.harness.episode import EpisodeSettings
from heuresis.harness.loop import UsageTotals, single_request
from heuresis.harness.protocol import Observation, Usage
from heuresis.harness.tools import ToolResult

MENU = {"pc_fisherz": {"alpha": 0.05}, "pc_kci": {"alpha": 0.05}, "ges": {}}


@pytest.fixture(scope="module")
def inst():
    """A nonlinear chain with a collider on 5 variables, n = 200."""
    return chain_instance(4)[0]


def _settings():
    return EpisodeSettings(BudgetSettings("s", 1.0, 30, 4000, 10, 600), MENU, tuple(DEFAULT_GRADES))


AGENT_SPECS = {"shortcut": {"kind": "shortcut"}, "merge": {"kind": "merge", "k": 1},
               "evidence": {"kind": "evidence", "resamples": 4, "candidate_grades": []}}


def _reword(monkeypatch):
    """Every tool text, the budgets line and the prompt replaced by prose no parser could read."""
    original = harness_tools.Tool.call

    def call(self, ctx, arguments):
        out = original(self, ctx, arguments)
        return ToolResult("(reworded result)", out.data, out.test_units, out.submitted, out.details, out.ends)

    monkeypatch.setattr(harness_tools.Tool, "call", call)
    monkeypatch.setattr("heuresis.harness.budgets.Budgets.line", lambda self, remaining=None: "(reworded budgets)")
    monkeypatch.setattr("heuresis.harness.episode.build_prompt", lambda *a, **k: "(reworded prompt)")


@pytest.mark.parametrize("agent", sorted(AGENT_SPECS))
@pytest.mark.parametrize("guided", [True, False])
def test_offline_agents_read_the_data_not_the_text(inst, monkeypatch, agent, guided):
    """Rewording every tool result, the budgets line and the prompt changes nothing an offline agent does."""
    cond = Condition(agent, guided=guided)
    plain = agent_episode(agent, AGENT_SPECS[agent], cond, inp=inst, settings=_settings(), seed=7)
    _reword(monkeypatch)
    reworded = agent_episode(agent, AGENT_SPECS[agent], cond, inp=inst, settings=_settings(), seed=7)
    assert reworded.transcript.messages[1]["content"] == "(reworded prompt)"
    assert all(c["result"] == "(reworded result)\n(reworded budgets)" for c in reworded.calls)
    assert [json.loads(c["arguments"]) for c in reworded.calls] == [json.loads(c["arguments"]) for c in plain.calls]
    assert plain.row["finished"] and reworded.row["edges"] == plain.row["edges"]
    strip = ("result", "wall_s", "call_id", "arguments")
    assert ([{k: v for k, v in c.items() if k not in strip} for c in reworded.calls]
            == [{k: v for k, v in c.items() if k not in strip} for c in plain.calls])


def _leaves(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _leaves(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _leaves(v)
    else:
        yield obj


def test_observations_say_no_more_than_the_text(inst, monkeypatch):
    """What the agent observes holds no p-value, no unmasked algorithm name and no truth."""
    from heuresis.agents.offline import EvidenceAgent

    seen: list[Observation] = []
    monkeypatch.setattr(EvidenceAgent, "observe", lambda self, obs: (seen.append(obs), _observe(self, obs)))
    spec = {"kind": "evidence", "resamples": 4, "candidate_grades": [],
            "nonlinear": {"screen": 1.0, "confirm": 0.05}}
    out = agent_episode("evidence", spec, Condition("evidence", guided=True), inst, _settings(), 3)
    tools = {o.tool for o in seen}
    assert {"", "ci_test", "run_code", "submit"} <= tools
    details = [json.loads(c["details"]) for c in out.calls]
    pvalues = [p for d in details for p in (d.get("pvalue"), *d.get("pvalues", [])) if p is not None]
    assert pvalues                                    # the harness recorded them; the agent saw none
    for obs in seen:
        leaves = list(_leaves(obs.data))
        assert "pvalue" not in leaves and "pvalues" not in leaves and "wrong" not in leaves
        assert not any(isinstance(v, float) and v in pvalues for v in leaves)
        assert not {"pc_kci", "pc_fisherz", "ges"} & {v for v in leaves if isinstance(v, str)}
    task = next(o for o in seen if o.key == "task")
    assert task.data["deletion_log"] == [{k: d[k] for k in ("x", "y", "sepset", "test", "grade")}
                                         for d in inst.pc_kci_deletions]
    assert task.budgets["test_units"] == inst.pc_kci_tests


def _observe(self, obs):
    from heuresis.agents.offline import _Offline

    _Offline.observe(self, obs)


def test_usage_totals_cost_unknown_once_one_request_has_no_price():
    totals = UsageTotals()
    totals.add(Usage(tokens_in=3, tokens_out=2, cost=0.5, retries=1, warnings=["a"]), turn=1, wall_s=0.1)
    assert totals.cost == 0.5
    totals.add(Usage(tokens_in=1, tokens_out=1, cost=None, warnings=["b", "a"]), turn=2, wall_s=0.2)
    totals.add(Usage(tokens_in=1, tokens_out=4, cost=0.25), turn=3)
    totals.add(None)                                  # nothing reported: nothing counted
    assert (totals.tokens_in, totals.tokens_out, totals.retries) == (5, 7, 1)
    assert totals.cost is None and totals.warnings == ["a", "b"]
    rows = [r.row() for r in totals.requests]
    assert [r["turn"] for r in rows] == [1, 2, 3] and [r["cost"] for r in rows] == [0.5, None, 0.25]
    assert json.loads(rows[1]["warnings"]) == ["b", "a"]


def test_single_request_records_a_failure_with_what_it_spent():
    from heuresis.agents.llm import LLMCallError
    from heuresis.harness.protocol import Agent, AgentReply

    class Failing(Agent):
        def respond(self, messages, tools):
            raise LLMCallError("model call failed", Usage(retries=2, cost=0.0, error="boom"))

    class Plain(Agent):
        def respond(self, messages, tools):
            raise RuntimeError("no usage")

    class Fine(Agent):
        def respond(self, messages, tools):
            messages.append({"role": "user", "content": "mutated"})    # the caller's list stays as it was
            return AgentReply({"role": "assistant", "content": "ok"}, Usage(tokens_out=1, cost=None))

    msgs = [{"role": "user", "content": "hi"}]
    ex = single_request(Failing("f"), msgs)
    assert not ex.ok and ex.usage.retries == 2 and ex.cost == 0.0 and "LLMCallError" in ex.failure
    ex = single_request(Plain("p"), msgs)
    assert not ex.ok and ex.usage is None and ex.cost is None
    ex = single_request(Fine("g"), msgs)
    assert ex.ok and ex.reply.message["content"] == "ok" and ex.cost is None and len(msgs) == 1


def test_game_agents_read_the_data_not_the_text(monkeypatch):
    """Rewording every game tool's text changes nothing an offline game agent does."""

    from heuresis.causal.games import load_scenarios
    from heuresis.stages.games.play import run_play

    scn = load_scenarios()["antenna_trap"]
    plain = {a: run_play(a, {"kind": a}, scn, seed=2) for a in ("game_bandit", "game_trap_follower")}
    original = harness_tools.Tool.call

    def call(self, ctx, arguments):
        out = original(self, ctx, arguments)
        return ToolResult("(reworded)", out.data, out.test_units, out.submitted, out.details, out.ends)

    monkeypatch.setattr(harness_tools.Tool, "call", call)
    for agent, before in plain.items():
        after = run_play(agent, {"kind": agent}, scn, seed=2)
        assert all(c["result"] == "(reworded)" for c in after.calls)
        assert before.row["status"] == "ok" and before.row["termination"] == "submitted"
        for key in ("design", "survival", "designs_deployed", "deployment_counts", "report"):
            assert after.row[key] == before.row[key]
        assert [c["arguments"] for c in after.calls] == [c["arguments"] for c in before.calls]
