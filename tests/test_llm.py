"""LLM agents through litellm, offline: a scripted server on 127.0.0.1 speaking the OpenAI and the
Anthropic API plays whole episodes; the records are compared with what the server sent."""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
from conftest import small_lg_split
from llm_server import ScriptedLLMServer

from heuresis.agents.llm import (
    CredentialsError,
    check_credentials,
    llm_agents_in_use,
    missing_credentials,
    recover_tool_calls,
    repair_arguments,
)
from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import CALLS, EPISODES, REQUESTS
from heuresis.harness.protocol import UNREADABLE_TOOL
from heuresis.stages.episodes import run_episode_shard

assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"   # set by conftest: no network at import

COND = "full-unguided-p1-none-standard-once-r0"
PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}

# every tool of the full toolbox, two calls in one reply, a call read from text, repaired and
# unreadable arguments, then the submission
EVERY_TOOL = [
    {"tool_calls": [("data_summary", {}), ("run_algorithm", {"algorithm": "algorithm_A"})], "usage": (900, 40)},
    {"tool_calls": [("ci_test", {"x": "X1", "y": "X2", "given": [], "test": "fisherz"})], "usage": (1500, 30)},
    {"tool_calls": [("stability_check", {"x": "X1", "y": "X2", "given": ["X3"], "test": "fisherz",
                                         "resamples": 3})], "usage": (1700, 35)},
    {"tool_calls": [("parent_fit", {"target": "X2", "parents": ["X1"]})], "usage": (1900, 25)},
    {"tool_calls": [("direction_probe", {"x": "X1", "y": "X2"})], "usage": (2100, 25)},
    {"tool_calls": [("run_code", {"code": "import numpy as np\nprint(np.load('data.npy').shape)"})],
     "usage": (2300, 45)},
    {"content": 'Let me look.\n<tool_call>\n{"name": "view_graph", "arguments": {}}\n</tool_call>', "usage": (2500, 20)},
    {"tool_calls": [("ci_test", "{'x': 'X1', 'y': 'X3', 'given': [], 'test': 'fisherz'}")], "usage": (2600, 30)},
    {"tool_calls": [("ci_test", '{"x": "X1", "y": ')], "usage": (2700, 15)},
    {"tool_calls": [("set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "->"},
                                               {"x": "X3", "y": "X4", "relation": "none"}]})], "usage": (2800, 50)},
    {"tool_calls": [("submit", {"edges": ["X1 -> X2", "X2 -- X3"]})], "usage": (3000, 30)},
]


@pytest.fixture(scope="module")
def small(quick_config, tmp_path_factory):
    """3 lg test instances (d = 5, n = 200) with their pc_kci references."""
    return small_lg_split(quick_config, tmp_path_factory.mktemp("llm"), 3)


def _sweep(small, name, spec, indices=(0,), cond=COND, fresh=True):
    """Run one shard; ``fresh``: without the records of an earlier sweep of the same name (request logs
    would replay its answers)."""
    import shutil

    cfg, root = small["cfg"], small["root"]
    out = root / "episodes" / name / "shard-000.parquet"
    if fresh:
        shutil.rmtree(root / "transcripts" / name, ignore_errors=True)
        shutil.rmtree(out.parent, ignore_errors=True)
    run_episode_shard(name, spec, cond, "lg", "test", list(indices), data_dir=small["data"],
                      truth_dir=small["truth"], pc_kci_paths=[small["ref"]], episodes_cfg=cfg["episodes"],
                      menu=cfg["references"]["algorithms"], grades=cfg["grades"], seed=cfg["seed"], out=out,
                      calls_out=out.with_name("shard-000.calls.parquet"),
                      requests_out=out.with_name("shard-000.requests.parquet"),
                      transcripts_dir=root / "transcripts" / name)
    return (read_table(out, EPISODES).to_pandas(), read_table(out.with_name("shard-000.calls.parquet"), CALLS).to_pandas(),
            read_table(out.with_name("shard-000.requests.parquet"), REQUESTS).to_pandas())


def _spec(model, url, **kw):
    return {"kind": "llm", "model": model, "api_base": url, "requires_key": False, "timeout_s": 20,
            "retries": {"max_retries": 3, "base_s": 0.01, "max_s": 0.05}, **kw}


def _answered_once(messages):
    """Every tool call in the history is answered by exactly one tool message, in order."""
    pending = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] == pending.pop(0)
        else:
            assert not pending, f"unanswered tool calls {pending} before a {m['role']} message"
            pending = [tc["id"] for tc in (m.get("tool_calls") or [])]
    assert not pending


def _anthropic_script():
    """The same script for the Anthropic API, whose tool inputs are always JSON objects: the Python
    literal arrives as the object it meant, the broken call as an empty object (rejected by schema)."""
    script = copy.deepcopy(EVERY_TOOL)
    script[7]["tool_calls"] = [("ci_test", {"x": "X1", "y": "X3", "given": [], "test": "fisherz"})]
    script[8]["tool_calls"] = [("ci_test", {})]
    return script


def _check_every_tool_episode(ep, calls, req, server, anthropic=False):
    row = ep.iloc[0]
    assert row.status == "ok" and row.finished and row.termination == "submitted", row.error
    assert row.edges == "X1 -> X2; X2 -- X3"
    # one request row per server reply; tokens and cost exactly what the server sent x the config price
    sent = [r["step"]["usage"] for r in server.replies]
    assert list(zip(req.tokens_in, req.tokens_out)) == sent
    costs = [(i * PRICES["input_per_mtok"] + o * PRICES["output_per_mtok"]) / 1e6 for i, o in sent]
    assert req.cost.tolist() == pytest.approx(costs, rel=1e-12)
    assert (req.price_source == "config").all() and (req.retries == 0).all()
    assert row.tokens_in == sum(i for i, _ in sent) and row.tokens_out == sum(o for _, o in sent)
    assert row.cost == pytest.approx(sum(costs), rel=1e-12) and row.turns == len(EVERY_TOOL)
    # every tool was executed, the text-borne and repaired calls worked, the unreadable one was answered
    tools = set(calls.tool)
    assert tools == {"data_summary", "run_algorithm", "ci_test", "stability_check", "parent_fit", "direction_probe",
                     "run_code", "view_graph", "set_edges", "submit"}
    ok = calls[calls.ok]
    assert set(ok.tool) == tools
    assert "(5, 5)" in ok[ok.tool == "run_code"].result.iloc[0] or "(200, 5)" in ok[ok.tool == "run_code"].result.iloc[0]
    ci = calls[calls.tool == "ci_test"]
    assert list(ci.ok) == [True, True, False]
    assert ("missing" in ci.error.iloc[2] or "required" in ci.error.iloc[2]) if anthropic else \
        "not valid JSON" in ci.error.iloc[2]
    assert calls[calls.tool == "stability_check"].test_units.iloc[0] == 3
    notes = " ".join(req.notes)
    assert "recovered from a <tool_call> block" in notes
    assert anthropic or "repaired (Python literal" in notes
    # the history the server received: OpenAI order kept, every call answered once, one system prompt
    for r in server.requests[1:]:
        msgs = r["body"]["messages"]
        if r["path"].rstrip("/").endswith("/chat/completions"):
            _answered_once(msgs)
    return row


def test_full_episode_openai_server(small):
    with ScriptedLLMServer(copy.deepcopy(EVERY_TOOL)) as server:
        ep, calls, req = _sweep(small, "gpt_local", _spec("openai/scripted-model", server.url + "/v1", prices=PRICES))
    _check_every_tool_episode(ep, calls, req, server)
    assert all(r["path"].endswith("/chat/completions") for r in server.requests)
    assert len(server.requests) == len(EVERY_TOOL)
    first = server.requests[0]["body"]
    assert {t["function"]["name"] for t in first["tools"]} >= {"submit", "ci_test", "run_code"}
    assert first["max_tokens"] == small["cfg"]["episodes"]["budgets"]["standard"]["output_tokens_per_turn"]
    assert ep.provider.iloc[0] == "openai" and ep.model.iloc[0] == "openai/scripted-model"
    # the malformed arguments went back to the server as {} (answered with an error), not as garbage
    last = server.requests[-1]["body"]["messages"]
    sent_args = [tc["function"]["arguments"] for m in last for tc in (m.get("tool_calls") or [])]
    assert all(isinstance(json.loads(a), dict) for a in sent_args)


def test_full_episode_anthropic_server(small):
    with ScriptedLLMServer(_anthropic_script()) as server:
        ep, calls, req = _sweep(small, "claude_local",
                                _spec("anthropic/claude-scripted", server.url, prices=PRICES, api_key_env="TEST_KEY"))
    row = _check_every_tool_episode(ep, calls, req, server, anthropic=True)
    assert row.provider == "anthropic"
    assert all(r["path"].rstrip("/").endswith("/v1/messages") for r in server.requests)
    # Anthropic format: system prompt apart, tool results as tool_result blocks answering each tool_use once
    body = server.requests[-1]["body"]
    assert "system" in body and all(m["role"] in ("user", "assistant") for m in body["messages"])
    uses = [b["id"] for m in body["messages"] if m["role"] == "assistant" for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"]
    results = [b["tool_use_id"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert uses and sorted(uses) == sorted(results) and len(set(results)) == len(results)
    assert server.requests[0]["headers"].get("x-api-key") == "test-key-not-secret"


@pytest.fixture(autouse=True)
def _test_key(monkeypatch):
    monkeypatch.setenv("TEST_KEY", "test-key-not-secret")


def test_retries_recorded_then_failure_recorded_and_sweep_goes_on(small):
    ok_reply = {"tool_calls": [("submit", {"edges": "X1 -> X2"})], "usage": (50, 10)}
    script = [{"status": 429, "error": "rate limited"}, {"status": 503, "error": "overloaded"}, ok_reply,
              # instance 1: every attempt fails (1 + max_retries = 4)
              *[{"status": 500, "error": "boom"}] * 4,
              # instance 2: fine again
              ok_reply]
    with ScriptedLLMServer(script) as server:
        ep, _calls, req = _sweep(small, "flaky", _spec("openai/scripted-model", server.url + "/v1", prices=PRICES),
                                indices=(0, 1, 2))
    assert len(server.requests) == 8           # no hidden SDK retries: exactly our attempts
    assert list(ep.status) == ["ok", "failed", "ok"]
    assert list(ep.retries) == [2, 3, 0]
    failed = ep.iloc[1]
    assert "after 3 retries" in failed.error and "InternalServerError" in failed.error and not failed.finished
    log0 = json.loads(req[req.instance == 0].retry_log.iloc[0])
    assert [e["status"] for e in log0] == [429, 503]
    assert all(0 <= e["wait_s"] < 0.01 * 2 ** k for k, e in enumerate(log0))   # full jitter under the backoff
    bad = req[req.instance == 1].iloc[0]
    assert bad.error and bad.retries == 3 and bad.tokens_in == 0
    assert [e["status"] for e in json.loads(bad.retry_log)] == [500, 500, 500, 500]
    assert ep.iloc[2].edges == "X1 -> X2"


def test_unknown_price_is_unknown_not_zero(small):
    with ScriptedLLMServer([{"tool_calls": [("submit", {"edges": []})], "usage": (70, 7)}]) as server:
        ep, _, req = _sweep(small, "noprice", _spec("openai/scripted-model", server.url + "/v1"))
    assert req.cost.isna().all() and (req.price_source == "unknown").all()
    assert ep.cost.isna().all() and "no known price" in ep.warnings.iloc[0]


def test_known_model_priced_from_litellm_map(small):
    import litellm

    with ScriptedLLMServer([{"tool_calls": [("submit", {"edges": []})], "usage": (1000, 100)}]) as server:
        _ep, _, req = _sweep(small, "mini", _spec("openai/gpt-4o-mini", server.url + "/v1"))
    info = litellm.model_cost["gpt-4o-mini"]
    expect = 1000 * info["input_cost_per_token"] + 100 * info["output_cost_per_token"]
    assert req.price_source.iloc[0] == "litellm" and req.cost.iloc[0] == pytest.approx(expect, rel=1e-9)


def test_price_map_read_without_litellm_serves_what_litellm_serves():
    """The config's checks read litellm's bundled price map without importing litellm (seconds saved
    whenever Snakemake reads the workflow): every name litellm serves, aliases included, has the
    same entry, and no other name is served."""
    import litellm

    from heuresis.agents.llm.provider import price_map

    ours, theirs = price_map(), litellm.model_cost
    fields = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
              "cache_creation_input_token_cost", "tiered_pricing", "max_input_tokens", "max_output_tokens")
    assert set(ours) == set(theirs)
    differ = [m for m in theirs if any(ours[m].get(f) != theirs[m].get(f) for f in fields)]
    assert not differ, differ[:10]
    assert any(isinstance(v, litellm.litellm_core_utils.get_model_cost_map.AliasedCostEntry) for v in theirs.values())


def test_timeout_is_retried(small):
    # the first answer comes far past the timeout; the retry must be answered well inside it, also when loaded
    script = [{"sleep": 30, "tool_calls": [("submit", {"edges": []})]}, {"tool_calls": [("submit", {"edges": []})]}]
    with ScriptedLLMServer(script) as server:
        ep, _, req = _sweep(small, "slow", _spec("openai/scripted-model", server.url + "/v1", prices=PRICES,
                                                 timeout_s=4))
    assert ep.status.iloc[0] == "ok" and req.retries.iloc[0] == 1
    assert json.loads(req.retry_log.iloc[0])[0]["error"] in ("Timeout", "APIConnectionError")


def test_litellm_mock_response_text_submission(small):
    """litellm's own mocking (``mock_response``): a plain-text edge list is read as the submission."""
    spec = {"kind": "llm", "model": "openai/gpt-4o-mini", "api_key_env": "TEST_KEY",
            "extra": {"mock_response": "My answer:\nX1 -> X2\nX3 -- X4"}}
    ep, calls, req = _sweep(small, "mocked", spec)
    assert ep.termination.iloc[0] == "submitted" and ep.edges.iloc[0] == "X1 -> X2; X3 -- X4"
    assert list(calls.tool) == ["(text)"] and req.tokens_out.iloc[0] > 0


# --- recovery of what providers send -------------------------------------------------------------------

def test_repair_arguments():
    assert repair_arguments('{"a": 1}') == ('{"a": 1}', "")
    assert repair_arguments("") == ("{}", "")
    assert json.loads(repair_arguments('```json\n{"a": 1}\n```')[0]) == {"a": 1}
    assert json.loads(repair_arguments('"{\\"a\\": 1}"')[0]) == {"a": 1}
    assert json.loads(repair_arguments('{"a": [1, 2,],}')[0]) == {"a": [1, 2]}
    assert json.loads(repair_arguments("{'a': True}")[0]) == {"a": True}
    for bad in ('{"a": ', "[1, 2]", '{"a": 1}{"b": 2}', "x = 1", "42"):
        fixed, why = repair_arguments(bad)
        assert fixed is None and "no unambiguous repair" in why, bad


def test_recover_tool_calls():
    names = {"ci_test", "submit"}
    calls, text, _notes = recover_tool_calls(
        'thinking...\n<tool_call>\n{"name": "ci_test", "arguments": {"x": "X1", "y": "X2"}}\n</tool_call>\n'
        '<tool_call>{"name": "submit", "arguments": "{\\"edges\\": []}"}</tool_call>', names)
    assert calls == [("ci_test", '{"x": "X1", "y": "X2"}'), ("submit", '{"edges": []}')] and text == "thinking..."
    calls, text, _ = recover_tool_calls('{"name": "submit", "arguments": {"edges": ["X1 -> X2"]}}', names)
    assert calls == [("submit", '{"edges": ["X1 -> X2"]}')] and text == ""
    # unknown tool or broken JSON inside a tag: an unreadable call, answered with an error by the harness
    calls, _, _notes = recover_tool_calls('<tool_call>{"name": "fly", "arguments": {}}</tool_call>', names)
    assert calls[0][0] == UNREADABLE_TOOL and "offered tool" in json.loads(calls[0][1])["problem"]
    calls, _, _ = recover_tool_calls("<tool_call>{name: ci_test</tool_call>", names)
    assert calls[0][0] == UNREADABLE_TOOL and json.loads(calls[0][1])["problem"] == "not valid JSON"
    # ordinary text (an edge list, or JSON that is not a call) stays text
    for text in ("X1 -> X2\nX2 -- X3", '{"edges": ["X1 -> X2"]}', '{"name": "submit", "arguments": {}, "x": 1}'):
        assert recover_tool_calls(text, names)[0] == []


# --- credentials -----------------------------------------------------------------------------------------

def _with_llm(cfg, spec, grid="quick"):
    cfg = copy.deepcopy(cfg)
    cfg["agents"]["gpt"] = spec
    cfg["episodes"]["grids"][grid]["agents"].append("gpt")
    return cfg


def test_missing_credentials_named(quick_config, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = _with_llm(quick_config, {"kind": "llm", "model": "openai/gpt-5"})
    assert llm_agents_in_use(cfg) == {"gpt": {"kind": "llm", "model": "openai/gpt-5"}}
    with pytest.raises(CredentialsError, match=r"agent 'gpt' \(model openai/gpt-5\) needs the environment "
                                               r"variable OPENAI_API_KEY"):
        check_credentials(cfg)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    check_credentials(cfg)
    # an explicit variable, and a local server that needs none
    monkeypatch.delenv("MY_GATEWAY_KEY", raising=False)
    assert missing_credentials({"model": "openai/x", "api_key_env": "MY_GATEWAY_KEY"}) == ["MY_GATEWAY_KEY"]
    assert missing_credentials({"model": "hosted_vllm/q", "api_base": "http://127.0.0.1:9", "requires_key": False}) == []
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert missing_credentials({"model": "anthropic/claude-sonnet-4-5"}) == ["ANTHROPIC_API_KEY"]
    # an agent that no active grid runs needs nothing
    idle = copy.deepcopy(quick_config)
    idle["agents"]["gpt"] = {"kind": "llm", "model": "openai/gpt-5"}
    assert llm_agents_in_use(idle) == {}


def test_paper_config_lists_three_llm_agents(paper_config, quick_config):
    llm = {a for a, s in paper_config["agents"].items() if s["kind"] == "llm" and a not in paper_config["games"]["judges"]}
    assert len(llm) == 3 and llm <= set(llm_agents_in_use(paper_config))
    assert llm_agents_in_use(quick_config) == {}


@pytest.mark.slow
def test_llm_episode_job_through_snakemake(tiny_run, tmp_path):
    """The episodes rule with an LLM agent (a config edit), against the scripted server: the job
    writes episodes, calls and requests tables whose tokens are what the server sent."""
    import shutil

    from tinyflow import CONFIG, run_snakemake

    wd = tmp_path / "wf"
    shutil.copytree(tiny_run, wd, symlinks=True)        # instances and references are built already
    script = [{"tool_calls": [("view_graph", {})], "usage": (400, 10)},
              {"tool_calls": [("submit", {"edges": ["X1 -> X2"]})], "usage": (500, 20)}] * 2
    with ScriptedLLMServer(script) as server:
        (wd / "config" / "llm.yaml").write_text(
            "agents:\n"
            f"  local: {{kind: llm, model: openai/scripted-model, api_base: '{server.url}/v1', requires_key: false,\n"
            "          prices: {input_per_mtok: 1.0, output_per_mtok: 2.0}}\n"
            "episodes:\n"
            "  grids:\n"
            "    llm: {agents: [local], guided: [true], families: [lg]}\n"
            "  run: [tiny, tiny_toolbox, tiny_prompts, tiny_budgets, llm]\n")
        out = "results/episodes/local/full-guided-p0-none-standard-once-r0/lg/test/shard-000.parquet"
        run_snakemake(wd, out, "--cores", "1", *CONFIG, "config/llm.yaml")
    ep = read_table(wd / out, EPISODES).to_pandas()
    req = read_table(wd / out.replace(".parquet", ".requests.parquet"), REQUESTS).to_pandas()
    assert list(ep.status) == ["ok", "ok"] and list(ep.edges) == ["X1 -> X2", "X1 -> X2"]
    assert list(ep.agent_kind) == ["llm", "llm"] and list(ep.tokens_in) == [900, 900]
    assert list(req.tokens_out) == [10, 20, 10, 20] and len(server.requests) == 4
    assert ep.cost.tolist() == pytest.approx([(900 * 1.0 + 30 * 2.0) / 1e6] * 2)
    assert all((wd / p).exists() for p in ep.transcript)


#: What llama-cpp-python's and llama.cpp's servers answer a prompt longer than the context (HTTP 400).
OVERFLOWS = ["This model's maximum context length is 8192 tokens. However, you requested 8887 tokens (8631 in the "
             "messages, 256 in the completion). Please reduce the length of the messages or completion.",
             "the request exceeds the available context size, try increasing it"]


@pytest.mark.parametrize("message", OVERFLOWS)
def test_context_overflow_ends_the_episode_with_its_reason(small, message):
    """A request the model's context cannot hold ends the episode ``ok`` as ``context_overflow``,
    scored on the working graph, never a failure (which would be left out and retried)."""
    script = [{"tool_calls": [("set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "none"}]})],
               "usage": (900, 40)}, {"status": 400, "error": message}]
    with ScriptedLLMServer(script) as server:
        ep, calls, req = _sweep(small, "overflow", _spec("openai/scripted-model", server.url + "/v1", prices=PRICES))
    assert len(server.requests) == 2            # not retried: a longer wait cannot make it fit
    row = ep.iloc[0]
    assert (row.status, row.termination, row.exhausted, bool(row.finished)) == ("ok", "context_overflow", "context",
                                                                                False)
    assert "context window" in row.error and row.turns == 2
    graph = np.array(row.graph).reshape(int(np.sqrt(len(row.graph))), -1)
    assert graph[0, 1] == 0 and graph[1, 0] == 0 and graph[0, 2] != 0   # the working graph: complete minus X1-X2
    assert list(calls.tool) == ["set_edges"]
    assert len(req) == 2 and req.iloc[1].error and req.iloc[1].tokens_in == 0


# --- the retry policy, alone --------------------------------------------------------------------
def test_the_retry_policy_decides_each_failure_as_documented():
    """docs/agents.md's policy: fatal answers never retried; rate limits, timeouts, connection and
    server errors retried with the backoff on top of Retry-After while retries are left, then given
    up; a prompt beyond the context is an overflow; anything else is given up at once."""
    import random

    import httpx
    import litellm

    from heuresis.agents.llm import decide
    from heuresis.config.settings import Retries

    retries = Retries(max_retries=3, base_s=1.0, max_s=8.0, max_retry_after_s=30.0)
    resp = httpx.Response(429, headers={"retry-after": "7"}, request=httpx.Request("POST", "http://x"))
    limited = litellm.RateLimitError("slow down", llm_provider="openai", model="m", response=resp)
    for attempt in range(3):
        d = decide(limited, attempt, retries, litellm, random.Random(attempt))
        top = min(8.0, 2.0 ** attempt)
        assert d.action == "retry" and 7.0 <= d.wait_s < 7.0 + top, (attempt, d)
        assert d.wait_s == 7.0 + random.Random(attempt).uniform(0.0, top)   # the same draw: jitter from the rng
    assert decide(limited, 3, retries, litellm) == type(d)("give_up", 0.0, "after 3 retries")
    assert decide(litellm.AuthenticationError("bad key", llm_provider="openai", model="m"), 0, retries,
                  litellm) == type(d)("fatal", 0.0, "invalid_key")
    quota = litellm.RateLimitError("You exceeded your current quota", llm_provider="openai", model="m")
    assert decide(quota, 0, retries, litellm).reason == "quota_exhausted"
    server = litellm.InternalServerError("boom", llm_provider="openai", model="m")
    assert decide(server, 1, retries, litellm).action == "retry"
    overflow = litellm.ContextWindowExceededError("too long", model="m", llm_provider="openai")
    assert decide(overflow, 0, retries, litellm).action == "overflow"
    assert decide(ValueError("a bug"), 0, retries, litellm) == type(d)("give_up", 0.0, "not retryable")
