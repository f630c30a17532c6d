"""Conversations are sent append-only: every model request of an episode or game play carries the
previous request's messages unchanged, with the new ones after them (nothing earlier changes between
turns: no budget line, clock or renumbering inside earlier messages), so a provider's prompt cache,
which discounts only an unchanged prefix, holds for the whole conversation. A prompt-cache breakpoint
mark (``cache_control``, which moves to the newest message every turn) is not content and is compared
away.

Checked on what a scripted server on 127.0.0.1 (tests/llm_server.py) received, for the LLM agent in
episodes (guided and unguided, every last-turn setting, OpenAI and Anthropic APIs) and in both game
modes (agentic and prompting).
"""

from __future__ import annotations

import json

import pytest
from conftest import small_lg_split
from llm_server import Conversations, ScriptedLLMServer
from test_llm import _spec, _sweep


@pytest.fixture(scope="module")
def small(quick_config, tmp_path_factory):
    return small_lg_split(quick_config, tmp_path_factory.mktemp("append"), 1)


@pytest.fixture(autouse=True)
def _test_key(monkeypatch):
    monkeypatch.setenv("HEURESIS_TEST_KEY", "sk-test")


def _unmarked(message: dict) -> dict:
    """A message without its prompt-cache breakpoint (``cache_control``): the mark is not content, and it
    moves to the newest message every turn (Anthropic caches the prefix up to the last mark)."""
    out = {k: v for k, v in message.items() if k != "cache_control"}
    content = out.get("content")
    if isinstance(content, list):
        blocks = [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in content]
        out["content"] = (blocks[0]["text"] if len(blocks) == 1 and isinstance(blocks[0], dict)
                          and blocks[0].get("type") == "text" and set(blocks[0]) == {"type", "text"} else blocks)
    return out


def _canonical(messages) -> list[str]:
    return [json.dumps(_unmarked(m), sort_keys=True) for m in messages]


def _marked(message: dict) -> bool:
    content = message.get("content")
    return "cache_control" in message or (isinstance(content, list) and any(
        isinstance(b, dict) and "cache_control" in b for b in content))


def assert_append_only(bodies: list[dict]) -> int:
    """Each request's messages start with the previous request's, unchanged; returns the requests checked."""
    assert len(bodies) >= 2, "a conversation of one request proves nothing here"
    for k in range(1, len(bodies)):
        prev, cur = _canonical(bodies[k - 1]["messages"]), _canonical(bodies[k]["messages"])
        assert len(cur) > len(prev), f"request {k} does not extend request {k - 1}"
        changed = [i for i, (a, b) in enumerate(zip(prev, cur)) if a != b]
        assert not changed, (f"request {k} changed earlier message(s) {changed}:\n  was {prev[changed[0]][:400]}"
                             f"\n  now {cur[changed[0]][:400]}")
        if "system" in bodies[k - 1]:   # Anthropic: the system prompt travels beside the messages
            assert bodies[k]["system"] == bodies[k - 1]["system"]
    return len(bodies)


# a model that looks and never submits: the turns run out and the last-turn setting decides the end
NEVER_SUBMITS = [{"tool_calls": [("data_summary", {})], "usage": (500, 20)},
                 {"tool_calls": [("ci_test", {"x": "X1", "y": "X2", "given": [], "test": "fisherz"})], "usage": (600, 20)},
                 {"content": "Still thinking.", "usage": (700, 20)},
                 {"tool_calls": [("view_graph", {})], "usage": (800, 20)}]


@pytest.mark.parametrize("guided", ["guided", "unguided"])
@pytest.mark.parametrize("last_turn", ["none", "once", "retry"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_episode_requests_are_append_only(small, guided, last_turn, api):
    cond = f"full-{guided}-p1-none-tight-{last_turn}-r0"
    model = "openai/scripted-model" if api == "openai" else "anthropic/claude-scripted"
    with ScriptedLLMServer(Conversations(lambda first: NEVER_SUBMITS)) as server:
        url = server.url + ("/v1" if api == "openai" else "")
        ep, _, req = _sweep(small, f"append_{api}_{guided}_{last_turn}", _spec(model, url, api_key_env="HEURESIS_TEST_KEY"),
                            cond=cond)
    row = ep.iloc[0]
    assert row.status == "ok", row.error
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == len(req)                       # one request row per request the server saw
    if api == "anthropic":                               # prompt caching on: the newest message carries the mark
        assert all(_marked(b["messages"][-1]) for b in bodies)
    # the tight budget's 10 turns, then the last turn(s) the setting allows
    assert len(bodies) >= 10 + (last_turn != "none")
    assert_append_only(bodies)


# --- the games: both modes are conversations ------------------------------------------------------------
ANTENNA_DESIGNS = [{"engine": 3, "cockpit": 3, "wing": 4, "body": 4, "camera": 3, "gun": 3},
                   {"engine": 3, "cockpit": 3, "wing": 5, "body": 4, "camera": 2, "gun": 3},
                   {"engine": 4, "cockpit": 3, "wing": 5, "body": 3, "camera": 2, "gun": 3}]


def _game_spec(url):
    return {"kind": "llm", "model": "openai/scripted-model", "api_base": url + "/v1", "requires_key": False,
            "timeout_s": 20, "retries": {"max_retries": 0}}


def test_agentic_play_requests_are_append_only():
    """The ReAct instruction before every turn, the analysis prompt in every deployment's result, the code
    tool, the measurement query, a refused call and a nudge: each only adds messages."""
    from test_games_workflow import SCENARIOS

    from heuresis.causal.games import load_scenario
    from heuresis.stages.games.play import run_play

    scn = load_scenario("antenna_trap~hidden_measurements", SCENARIOS)   # the ablation that offers the measurement query
    script = [{"tool_calls": [("get_history", {}), ("run_code", {"code": "print(open('drones.csv').read()[:80])"})],
               "usage": (1500, 20)},
              *({"tool_calls": [("deploy", {"design": d, "count": 20})], "usage": (2000, 40)} for d in ANTENNA_DESIGNS),
              {"tool_calls": [("measure", {"variable": "weather_pattern", "deployment": 2})], "usage": (2500, 30)},
              {"content": "Thinking about the wings.", "usage": (3000, 30)},
              {"tool_calls": [("submit_final_design", {"design": {"engine": 51}})], "usage": (3100, 30)},
              {"tool_calls": [("submit_final_design", {"design": ANTENNA_DESIGNS[1],
                                                       "report": "Wings matter; the antenna draws fire."})],
               "usage": (3500, 30)}]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _game_spec(server.url), scn, seed=5, threshold=0.8, optimum=0.88, mode="agentic")
    assert out.row["status"] == "ok" and out.row["submitted"], out.row
    assert out.row["n_errors"] == 1                                           # the design over a cap
    bodies = [r["body"] for r in server.requests]
    assert assert_append_only(bodies) == len(script) == len(out.requests)


def test_prompting_play_requests_are_append_only():
    """The prompting mode is a conversation in text: each deployment's result, a retry after an unreadable
    answer and the budget left (in the newest message only) are appended; nothing earlier changes."""
    from test_games_workflow import SCENARIOS, _deploy

    from heuresis.causal.games import load_scenario
    from heuresis.stages.games.play import run_play

    scn = load_scenario("antenna_trap", SCENARIOS)
    script = [_deploy(ANTENNA_DESIGNS[0], 20), {"content": "I cannot decide."},
              *(_deploy(d, 20) for d in ANTENNA_DESIGNS[1:]),
              {"content": json.dumps({"action": "submit", "design": ANTENNA_DESIGNS[1], "report": "Wings matter."})}]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _game_spec(server.url), scn, seed=5, threshold=0.8, optimum=0.88, mode="prompting")
    assert out.row["submitted"] and out.row["deployments"] == 3, out.row
    bodies = [r["body"] for r in server.requests]
    assert all("tools" not in b for b in bodies)
    assert assert_append_only(bodies) == len(script) == len(out.requests)


def test_the_check_catches_a_changed_earlier_message():
    """The checker itself: a budget line rewritten inside an earlier message fails it."""
    a = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task; 10 turns left"}]}
    b = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task; 9 turns left"},
                      {"role": "assistant", "content": "x"}]}
    with pytest.raises(AssertionError, match="changed earlier message"):
        assert_append_only([a, b])
    b["messages"][1] = a["messages"][1]
    assert assert_append_only([a, b]) == 2
