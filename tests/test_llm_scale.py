"""A paid run at scale, offline: the scripted server (tests/llm_server.py) answers rate limits with
``Retry-After``, server errors, quota errors, refused keys, slow failed attempts and replies with
cached tokens; the records, the clocks, the replay of paid requests and the spend limits are
checked against what the server counted and sent."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, small_lg_split
from llm_server import CLOCK, Conversations, ScriptedLLMServer

from heuresis.agents.llm import LLMAgent, ProviderFatalError, verify_keys
from heuresis.agents.spend import RunStopped, SpendLedger, SpendLimitReached, read_stop
from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import EPISODES, REQUESTS
from heuresis.harness.agent_spec import scrub
from heuresis.stages.episodes import run_episode_shard

COND = "full-unguided-p1-none-standard-once-r0"
PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}
SUBMIT = {"tool_calls": [("submit", {"edges": ["X1 -> X2"]})], "usage": (500, 20)}


def _conversation(_prompt: str) -> list[dict]:
    """Four turns: look, test, edit, submit (the same script for every episode)."""
    return [{"tool_calls": [("view_graph", {})], "usage": (400, 10)},
            {"tool_calls": [("ci_test", {"x": "X1", "y": "X2", "given": [], "test": "fisherz"})], "usage": (450, 15)},
            {"tool_calls": [("set_edges", {"changes": [{"x": "X1", "y": "X3", "relation": "none"}]})],
             "usage": (480, 12)},
            SUBMIT]


@pytest.fixture(scope="module")
def small(quick_config, tmp_path_factory):
    return small_lg_split(quick_config, tmp_path_factory.mktemp("scale"), 3)


def _spec(url, **kw):
    return {"kind": "llm", "model": "openai/scripted-model", "api_base": url + "/v1", "requires_key": False,
            "timeout_s": 20, "prices": PRICES, "retries": {"max_retries": 6, "base_s": 0.01, "max_s": 0.05}, **kw}


def _sweep(small, name, spec, indices=(0,), wall_seconds=None, root=None, spend_dir=None):
    cfg = copy.deepcopy(small["cfg"])
    if wall_seconds is not None:
        cfg["episodes"]["budgets"]["standard"]["wall_seconds"] = wall_seconds
    root = Path(root or small["root"])
    out = root / "episodes" / name / "shard-000.parquet"
    run_episode_shard(name, spec, COND, "lg", "test", list(indices), data_dir=small["data"], truth_dir=small["truth"],
                      pc_kci_paths=[small["ref"]], episodes_cfg=cfg["episodes"], menu=cfg["references"]["algorithms"],
                      grades=cfg["grades"], seed=cfg["seed"], out=out, calls_out=out.with_name("shard-000.calls.parquet"),
                      requests_out=out.with_name("shard-000.requests.parquet"),
                      transcripts_dir=root / "transcripts" / name, spend_dir=spend_dir or root / "spend")
    return (read_table(out, EPISODES).to_pandas(),
            read_table(out.with_name("shard-000.requests.parquet"), REQUESTS).to_pandas())


OUTCOME = ["status", "termination", "exhausted", "turns", "edges", "f1", "finished"]


def test_same_episodes_with_and_without_faults_and_slow_failed_attempts(small, tmp_path):
    """Rate limits (with Retry-After), server errors and slow failed attempts change nothing the
    episode measures, although the waits alone exceed the wall budget: they are not working time."""
    wall = 6      # seconds: the clean run's few short requests stay far inside it, even on a loaded machine
    with ScriptedLLMServer(Conversations(_conversation)) as server:
        clean, _ = _sweep(small, "clean", _spec(server.url), indices=(0, 1), wall_seconds=wall, root=tmp_path / "a")
    # two 429s and a 500 in each episode, named outright (never left to a draw that depends on what the
    # server answered before); the Retry-After floors alone (2 x 3.5 s) pass the wall budget on any machine
    responder = Conversations(_conversation, schedule={(0, 0): 429, (0, 1): 500, (2, 0): 429}, retry_after=3.5,
                              latency=(0.15, 0.9))
    with ScriptedLLMServer(responder) as server:
        faulty, req = _sweep(small, "clean", _spec(server.url), indices=(0, 1), wall_seconds=wall, root=tmp_path / "b")
    assert responder.faulted == 6 and len(server.requests) == 8 + 6   # the faults did happen, each retried once
    floors = req.groupby("episode_id").retry_log.agg(lambda logs: sum(e["retry_after_s"] or 0.0 for log in logs
                                                                for e in json.loads(log)))
    assert (floors > wall).all(), floors                           # the waits alone pass the wall budget
    assert (faulty.wall_s > wall).all()
    assert (faulty.working_s < wall).all() and (faulty.working_s < faulty.wall_s).all()
    assert clean[OUTCOME].to_dict("records") == faulty[OUTCOME].to_dict("records")
    assert list(clean.termination) == ["submitted", "submitted"]
    retried = req[req.retries > 0]
    for log in retried.retry_log.map(json.loads):
        for e in log:   # a 429's Retry-After is a floor of the wait, the jitter on top of it
            assert e["wait_s"] >= (e["retry_after_s"] or 0.0)
    assert (req.charged_s < req.wall_s + 1e-9).all() and (req.attempts == req.retries + 1).all()


def test_retry_after_honoured_with_jitter_that_differs_between_agents(small):
    """Two agents told ``Retry-After: 2`` wait at least 2 s each, and not the same time."""
    waits = []
    for k in range(2):
        script = [{"status": 429, "error": "slow down", "headers": {"Retry-After": "2"}},
                  {"content": "ok", "usage": (10, 2)}]
        with ScriptedLLMServer(script) as server:
            agent = LLMAgent(f"a{k}", **{key: v for key, v in _spec(server.url, retries={"base_s": 1.0}).items()
                                         if key != "kind"})
            agent._sleep = waits.append
            reply = agent.respond([{"role": "user", "content": "hi"}], [])
        assert reply.usage.retries == 1 and len(server.requests) == 2
    assert all(2.0 <= w < 3.0 for w in waits) and waits[0] != waits[1]


@pytest.mark.parametrize("step, reason", [
    ({"status": 429, "error": "You exceeded your current quota, please check your plan and billing details.",
      "code": "insufficient_quota"}, "quota exhausted"),
    ({"status": 401, "error": "Incorrect API key provided: sk-proj-abc***wxyz"}, "invalid key"),
    ({"status": 404, "error": "The model `scripted-model` does not exist"}, "unknown model"),
])
def test_fatal_provider_error_stops_the_job_after_one_request(small, step, reason, monkeypatch):
    """A quota error, a refused key or an unknown model is never retried and never recorded as a
    failed episode: the job stops at once, naming the agent, the model and the key's variable; the
    stored error texts hold no key fragment."""
    monkeypatch.setenv("SCRIPTED_KEY", "sk-proj-abcdefwxyz")
    with ScriptedLLMServer([step] * 10) as server:
        spec = {**_spec(server.url), "requires_key": True, "api_key_env": "SCRIPTED_KEY"}
        with pytest.raises(ProviderFatalError) as err:
            _sweep(small, f"fatal{step['status']}", spec, indices=(0, 1, 2))
    assert len(server.requests) == 1
    text = str(err.value)
    assert reason in text and "'fatal" in text and "openai/scripted-model" in text and "SCRIPTED_KEY" in text
    assert "sk-proj-abc" not in text and "abcdefwxyz" not in text
    log = (small["root"] / "transcripts" / f"fatal{step['status']}" / "0000.requests.jsonl").read_text()
    assert "sk-proj-abc" not in log and json.loads(log.splitlines()[0])["status"] == "failed"
    # the stop record: a later job of the agent (a cluster's resubmission) sends nothing
    assert reason in (read_stop(small["root"] / "spend", f"fatal{step['status']}") or "")
    with ScriptedLLMServer([{"content": "ok", "usage": (5, 1)}] * 10) as server:
        spec = {**_spec(server.url), "requires_key": True, "api_key_env": "SCRIPTED_KEY"}
        with pytest.raises(RunStopped, match="stopped by an earlier job"):
            _sweep(small, f"fatal{step['status']}", spec, indices=(0,))
        assert server.requests == []


def test_bad_key_caught_by_the_start_check(quick_config, monkeypatch):
    """One cheap request (one output token) per model checks its key before anything runs."""
    monkeypatch.setenv("SCRIPTED_KEY", "sk-wrong-0123456789")
    with ScriptedLLMServer([{"status": 401, "error": "Incorrect API key provided: sk-wron***6789"}]) as server:
        cfg = copy.deepcopy(quick_config)
        cfg["agents"]["paid"] = {"kind": "llm", "model": "openai/scripted-model", "api_base": server.url + "/v1",
                                 "api_key_env": "SCRIPTED_KEY"}
        cfg["leakage"]["agents"] = ["paid"]
        with pytest.raises(ProviderFatalError, match="invalid key.*SCRIPTED_KEY"):
            verify_keys(cfg)
        body = server.requests[0]["body"]
    assert len(server.requests) == 1 and (body.get("max_tokens") or body.get("max_completion_tokens")) == 1
    with ScriptedLLMServer([{"content": "OK", "usage": (5, 1)}]) as server:
        cfg["agents"]["paid"]["api_base"] = server.url + "/v1"
        assert verify_keys(cfg) == [] and len(server.requests) == 1
        cfg["agents"]["paid"]["verify_key"] = False          # turned off: nothing sent
        assert verify_keys(cfg) == [] and len(server.requests) == 1


def test_cost_and_records_from_the_response(small):
    """Cached input priced as the provider prices it (litellm's completion_cost), the config's prices
    overriding the map, a reply without usage recorded as unknown; served model, response id,
    cached and reasoning tokens and the request's times as the server sent them."""
    import litellm

    usage = {"prompt_tokens": 10000, "completion_tokens": 500, "cached_tokens": 9000, "reasoning_tokens": 300}
    steps = [{"tool_calls": [("view_graph", {})], "usage": usage},
             {"tool_calls": [("view_graph", {})], "usage": None},
             SUBMIT]
    with ScriptedLLMServer(copy.deepcopy(steps), served_model="gpt-5-2025-08-07") as server:
        spec = {**_spec(server.url), "model": "openai/gpt-5"}
        spec.pop("prices")
        ep, req = _sweep(small, "priced", spec)
        sent = [r["reply"] for r in server.replies]
    first = req.iloc[0]
    info = litellm.model_cost["gpt-5"]
    expected = (1000 * info["input_cost_per_token"] + 9000 * info["cache_read_input_token_cost"]
                + 500 * info["output_cost_per_token"])
    assert first.cost == pytest.approx(expected, rel=1e-9) and first.price_source == "litellm"
    assert first.cost < (10000 * info["input_cost_per_token"] + 500 * info["output_cost_per_token"]) * 0.5
    assert (first.cached_tokens, first.reasoning_tokens) == (9000, 300)
    assert list(req.served_model) == ["gpt-5-2025-08-07"] * 3 and list(req.response_id) == [r["id"] for r in sent]
    assert req.started.notna().all() and (req.ended >= req.started).all()
    second = req.iloc[1]   # no usage block: unknown, never zero
    assert second.tokens_in is None or second.tokens_in != second.tokens_in   # null
    assert second.cost != second.cost and "no token usage" in second.warnings
    assert ep.cost.isna().all()                                 # the episode's total is unknown too
    # the config's prices override litellm's map, cached input at its own price
    with ScriptedLLMServer([*copy.deepcopy(steps[:1]), SUBMIT]) as server:
        prices = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cached_input_per_mtok": 0.5}
        _, req = _sweep(small, "priced2", {**_spec(server.url), "model": "openai/gpt-5", "prices": prices})
    assert req.cost.iloc[0] == pytest.approx((1000 * 2.0 + 9000 * 0.5 + 500 * 8.0) / 1e6, rel=1e-12)
    assert req.price_source.iloc[0] == "config"


def test_request_cap_is_the_turn_budget(small):
    """A request never asks for more output than the turn may use: the harness would refuse it."""
    with ScriptedLLMServer([SUBMIT]) as server:
        _sweep(small, "capped", _spec(server.url, max_tokens=100000 // 10))
        body = server.requests[0]["body"]
    limit = small["cfg"]["episodes"]["budgets"]["standard"]["output_tokens_per_turn"]
    assert (body.get("max_tokens") or body.get("max_completion_tokens")) == limit


_KILLED_CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from test_llm_scale import _sweep
    small = json.loads({small!r})
    small = {{k: (v if k == "cfg" else __import__("pathlib").Path(v)) for k, v in small.items()}}
    _sweep(small, "killed", json.loads({spec!r}))
""")


def test_kill_at_turn_k_then_rerun_sends_only_the_turns_from_k(small, tmp_path):
    """A job killed while waiting for request k+1 is rerun: requests 1..k are answered from the
    episode's request log (none is sent again), the conversation goes on live from k+1, and the
    episode equals one never killed."""
    k = 2
    child: dict = {}
    responder = Conversations(_conversation)

    def kill_on_request(request):
        if len(server.requests) == k + 1 and "proc" in child:    # request k+1 arrived: kill the job
            child["proc"].kill()
            return {"status": 500, "error": "job killed"}
        return responder(request)

    payload = {key: (v if key == "cfg" else str(v)) for key, v in small.items()}
    with ScriptedLLMServer(kill_on_request) as server:
        code = _KILLED_CHILD.format(tests=str(ROOT / "tests"), small=json.dumps(payload),
                                    spec=json.dumps(_spec(server.url)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
        child["proc"] = proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path)
        proc.wait(timeout=300)
        assert proc.returncode != 0 and len(server.requests) == k + 1
        del child["proc"]
        ep, req = _sweep(small, "killed", _spec(server.url))
    assert len(server.requests) == 4 + 1                       # k + 1 first, then only 4 - k
    assert sum(responder.counts.values()) == 4                 # no successful request was sent twice
    assert list(req.replayed) == [True] * k + [False] * (4 - k)
    assert list(ep.termination) == ["submitted"] and ep.turns.iloc[0] == 4
    with ScriptedLLMServer(Conversations(_conversation)) as server:
        never_killed, _ = _sweep(small, "never_killed", _spec(server.url))
    assert ep[OUTCOME].to_dict("records") == never_killed[OUTCOME].to_dict("records")


def test_failed_episode_rerun_replays_what_was_paid(small):
    """An episode that failed at its third request (every retry a 500) is rerun from there; the
    failed attempts stay in the request log."""
    down = [*_conversation("")[:2], *[{"status": 500, "error": "down"}] * 3]
    live = Conversations(_conversation)
    with ScriptedLLMServer(lambda request: down.pop(0) if down else live(request)) as server:   # one server
        ep, _ = _sweep(small, "refail", _spec(server.url, retries={"max_retries": 2, "base_s": 0.01}))
        assert list(ep.status) == ["failed"] and len(server.requests) == 5
        ep, req = _sweep(small, "refail", _spec(server.url))
        assert len(server.requests) == 5 + 2                   # turns 3 and 4 only
    assert list(ep.status) == ["ok"] and list(req.replayed) == [True, True, False, False]
    log = [json.loads(line) for line in
           (small["root"] / "transcripts" / "refail" / "0000.requests.jsonl").read_text().splitlines()]
    assert [e["status"] for e in log].count("failed") == 3     # kept, never overwritten


def test_run_spend_limit_is_never_exceeded(small, tmp_path):
    """Jobs sharing a run budget: no request is sent whose worst case the ledger cannot cover; the
    job stops naming what was spent."""
    limit = 0.1   # a request's worst case here is about 0.07 USD (4,000 output tokens), its cost about 0.002
    with ScriptedLLMServer(Conversations(_conversation)) as server:
        spec = _spec(server.url, max_run_usd=limit)
        with pytest.raises(SpendLimitReached, match=r"spent .* USD"):
            for job in range(6):   # one agent's jobs, one ledger
                _sweep(small, "budget", spec, indices=(0, 1, 2), root=tmp_path / f"job{job}",
                       spend_dir=tmp_path / "spend")
        sent = [r["step"]["usage"] for r in server.replies]
    paid = sum((i * PRICES["input_per_mtok"] + o * PRICES["output_per_mtok"]) / 1e6 for i, o in sent)
    totals = SpendLedger(tmp_path / "spend", "budget", limit).totals()
    assert totals["spent"] == pytest.approx(paid, rel=1e-9) and totals["reserved"] == 0
    assert 0 < paid <= limit and len(sent) >= 4                 # it spent, and stopped in time


def test_episode_token_limit_ends_the_episode(small):
    """An episode's token limit ends it before the request that could pass it: ``spend_limit``."""
    def big(prompt):   # each reply reports 3,000 prompt tokens: the second request's worst case passes 8,000
        return [{**step, "usage": (3000, 10)} for step in _conversation(prompt)]

    with ScriptedLLMServer(Conversations(big)) as server:
        ep, req = _sweep(small, "tokcap", _spec(server.url, max_episode_tokens=8000))
    row = ep.iloc[0]
    assert (row.status, row.termination, row.exhausted, bool(row.finished)) == ("ok", "spend_limit", "tokens", False)
    assert int(req.tokens_in.sum() + req.tokens_out.sum()) <= 8000 and len(req) == len(server.requests) == 1


def test_scrub_removes_key_fragments():
    text = "Incorrect API key provided: sk-proj-abc***wxyz. Bearer abc.def api_key=XYZ123 real-secret-value"
    out = scrub(text, ["real-secret-value"])
    assert "sk-proj" not in out and "abc.def" not in out and "XYZ123" not in out and "real-secret" not in out


def _llm_workflow(tiny_run, tmp_path, server, **agent):
    """A copy of the tiny run with an LLM agent `paid` on two episode jobs (guided and unguided)."""
    import shutil

    wd = tmp_path / "wf"
    shutil.copytree(tiny_run, wd, symlinks=True)
    entry = {"kind": "llm", "model": "openai/scripted-model", "api_base": f"{server.url}/v1", "requires_key": False,
             "prices": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}, "retries": {"base_s": 0.01}, **agent}
    (wd / "config" / "llm.yaml").write_text(json.dumps({
        "agents": {"paid": entry},
        "episodes": {"grids": {"llm": {"agents": ["paid"], "guided": [True, False], "families": ["lg"]}},
                     "run": ["tiny", "tiny_toolbox", "tiny_prompts", "tiny_budgets", "llm"]}}))
    return wd


@pytest.mark.slow
def test_quota_error_stops_the_workflow_after_one_request(tiny_run, tmp_path):
    """An exhausted quota fails the first job after one request and the workflow stops: the second
    job never starts, nothing is recorded as a failed episode to retry."""
    from tinyflow import CONFIG, run_snakemake

    quota = {"status": 429, "error": "You exceeded your current quota, please check your plan and billing details.",
             "code": "insufficient_quota"}
    with ScriptedLLMServer([quota] * 20) as server:
        wd = _llm_workflow(tiny_run, tmp_path, server)
        outs = [f"results/episodes/paid/full-{g}-p0-none-standard-once-r0/lg/test/shard-000.parquet"
                for g in ("guided", "unguided")]
        proc = run_snakemake(wd, *outs, "--cores", "1", *CONFIG, "config/llm.yaml", check=False)
    assert proc.returncode != 0 and len(server.requests) == 1
    assert "quota exhausted" in proc.stdout + proc.stderr + "".join(
        p.read_text() for p in (wd / "logs" / "episodes" / "paid").rglob("*.log"))
    assert not any((wd / o).exists() for o in outs)


@pytest.mark.slow
def test_bad_key_stops_the_workflow_at_start(tiny_run, tmp_path):
    """A refused key is found by the start check's one request, before any job runs."""
    from tinyflow import CONFIG, run_snakemake

    with ScriptedLLMServer([{"status": 401, "error": "Incorrect API key provided: sk-bad***1234"}] * 5) as server:
        wd = _llm_workflow(tiny_run, tmp_path, server, requires_key=True, api_key_env="SCRIPTED_KEY")
        out = "results/episodes/paid/full-guided-p0-none-standard-once-r0/lg/test/shard-000.parquet"
        proc = run_snakemake(wd, out, "--cores", "1", *CONFIG, "config/llm.yaml", check=False,
                             env={"SCRIPTED_KEY": "sk-bad-000000001234"})
    assert proc.returncode != 0 and len(server.requests) == 1
    assert "invalid key" in proc.stdout + proc.stderr and "SCRIPTED_KEY" in proc.stdout + proc.stderr
    assert not (wd / "logs" / "episodes" / "paid").exists()


def test_failed_episode_records_hold_no_key_fragment(small):
    """A provider that echoes the key in its errors: the failed episode's row, transcript (traceback
    included), requests table and request log hold none of it."""
    leak = {"status": 500, "error": "upstream refused key sk-proj-LEAKED0123456789 (Bearer sk-proj-LEAKED0123456789)"}
    with ScriptedLLMServer([leak] * 3) as server:
        ep, req = _sweep(small, "leaky", _spec(server.url, retries={"max_retries": 2, "base_s": 0.01}))
    assert list(ep.status) == ["failed"]
    stored = [Path(ep.transcript.iloc[0]).read_text(), ep.error.iloc[0], req.to_json(),
              (small["root"] / "transcripts" / "leaky" / "0000.requests.jsonl").read_text()]
    assert all("LEAKED" not in text for text in stored) and "[redacted]" in stored[0]


# --- prompt caching, priced against the provider's own bill ------------------------------------------
CLAUDE_PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cached_input_per_mtok": 0.3,
                 "cache_write_input_per_mtok": 3.75}


def _long_conversation(_prompt: str) -> list[dict]:
    """30 turns: 29 looks at the working graph, then a submission (the standard budget's turns)."""
    return [{"tool_calls": [("view_graph", {})], "usage": (0, 40)}] * 29 + [SUBMIT]


def test_prompt_caching_cuts_the_bill_and_the_record_equals_it(small, tmp_path):
    """A 30-turn episode of an Anthropic model behind a provider with a prompt cache: with caching the
    recorded cost equals the provider's bill to the cent and is less than half the bill without it;
    each turn reads the turns before it from the cache; the conversation sent is the same either way."""
    from llm_server import PromptCache

    runs = {}
    for caching in (True, False):
        with ScriptedLLMServer(Conversations(_long_conversation), cache=PromptCache(CLAUDE_PRICES)) as server:
            spec = {**_spec(server.url), "model": "anthropic/claude-sonnet-4-5", "api_base": server.url,
                    "prices": CLAUDE_PRICES, "prompt_caching": caching}
            ep, req = _sweep(small, f"cache{caching}", spec, root=tmp_path / str(caching))
            messages = json.loads(Path(ep.transcript.iloc[0]).read_text())["messages"]
            # the wall time left, in whole seconds, is the one thing two runs may legitimately differ in
            runs[caching] = (ep, req, server.bill, [(m.get("role"), re.sub(*CLOCK, m["content"])
                                                     if isinstance(m.get("content"), str) else m.get("content"))
                                                    for m in messages])
    (ep, req, bill, bodies), (_ep0, req0, bill0, bodies0) = runs[True], runs[False]
    assert list(ep.termination) == ["submitted"] and len(req) == 30
    assert req.cost.sum() == pytest.approx(bill, abs=0.005) and ep.cost.iloc[0] == pytest.approx(bill, rel=1e-9)
    assert req0.cost.sum() == pytest.approx(bill0, rel=1e-9) and (req0.cached_tokens == 0).all()
    assert bill < 0.5 * bill0
    assert set(req.caching) == {"explicit"} and set(req0.caching) == {"off"}
    prompt = req.tokens_in.to_numpy()
    assert (req.cached_tokens.to_numpy()[1:] >= 0.9 * prompt[:-1]).all()   # the previous turn's prompt, read
    assert (req.cache_write_tokens.to_numpy()[1:] < 0.2 * prompt[1:]).all()  # only what is new, written
    assert bodies == bodies0                                                # the same conversation


def test_automatic_caching_is_recorded_and_priced_as_the_provider_bills(small, tmp_path):
    """OpenAI caches on its own: nothing is added to the request, the reads are priced at litellm's
    cached rate and the recorded cost equals the bill."""
    import litellm
    from llm_server import PromptCache

    info = litellm.model_cost["gpt-5"]
    prices = {"input_per_mtok": info["input_cost_per_token"] * 1e6, "output_per_mtok": info["output_cost_per_token"] * 1e6,
              "cached_input_per_mtok": info["cache_read_input_token_cost"] * 1e6}
    with ScriptedLLMServer(Conversations(_long_conversation), cache=PromptCache(prices, marked=False)) as server:
        spec = {**_spec(server.url), "model": "openai/gpt-5"}
        spec.pop("prices")
        _, req = _sweep(small, "auto", spec, root=tmp_path)
        assert not any("cache_control" in json.dumps(r["body"]) for r in server.requests)
        bill = server.bill
    assert set(req.caching) == {"automatic"} and req.cached_tokens.iloc[1:].gt(0).all()
    assert req.cost.sum() == pytest.approx(bill, rel=1e-6) and req.price_source.eq("litellm").all()


def test_reply_cut_empty_at_the_cap_is_counted(small):
    """A reasoning model that spends the whole cap thinking: the paid, empty reply is recorded as
    ``empty_length`` and counted on the episode."""
    empty = {"content": None, "finish_reason": "length",
             "usage": {"prompt_tokens": 900, "completion_tokens": 4000, "reasoning_tokens": 4000}}
    with ScriptedLLMServer([empty, SUBMIT]) as server:
        ep, req = _sweep(small, "empty", _spec(server.url, model="openai/gpt-5", reasoning_effort="medium"))
        body = server.requests[0]["body"]
    assert body.get("max_completion_tokens") == small["cfg"]["episodes"]["budgets"]["standard"]["output_tokens_per_turn"]
    assert list(req.finish_reason) == ["empty_length", "tool_calls"] and req.cost.iloc[0] > 0
    assert int(ep.empty_length_replies.iloc[0]) == 1 and "neither text nor a tool call" in ep.warnings.iloc[0]


def test_abandoned_branch_is_in_the_bill(small, tmp_path):
    """An episode rerun after its agent's settings changed (a new temperature): none of the earlier
    answers fits, and what they cost appears as abandoned rows and in the episode's abandoned_cost."""
    with ScriptedLLMServer(Conversations(_conversation)) as server:
        _, first = _sweep(small, "branch", _spec(server.url, temperature=0.5), root=tmp_path)
        for p in (tmp_path / "episodes" / "branch").glob("shard-000*"):
            p.unlink()
        ep, req = _sweep(small, "branch", _spec(server.url, temperature=0.7), root=tmp_path)
    assert len(server.requests) == 8
    old = req[req.abandoned]
    assert len(old) == 4 and (old.turn == -1).all() and not old.replayed.any()
    assert old.cost.sum() == pytest.approx(first.cost.sum(), rel=1e-12)
    assert ep.abandoned_cost.iloc[0] == pytest.approx(first.cost.sum(), rel=1e-12)
    assert ep.cost.iloc[0] == pytest.approx(req[~req.abandoned].cost.sum(), rel=1e-12)


def test_torn_request_log_line_loses_no_paid_answer(tmp_path):
    """A kill mid-write leaves a torn last line: the next record starts on a fresh line and is replayed."""
    from heuresis.harness.requestlog import RequestLog

    path = tmp_path / "0000.requests.jsonl"
    log = RequestLog(path)
    log.append({"key": "a", "status": "ok", "message": {"role": "assistant", "content": "first"}})
    with open(path, "a") as fh:
        fh.write('{"v": 1, "key": "b", "status": "ok", "mess')   # killed here
    RequestLog(path).append({"key": "c", "status": "ok", "message": {"role": "assistant", "content": "paid"}})
    again = RequestLog(path)
    assert [e["key"] for e in again.entries] == ["a", "c"]
    assert again.replay("c")["message"]["content"] == "paid" and again.replay("b") is None


def test_a_token_rate_limit_waits_outside_the_agents_time(tmp_path, monkeypatch):
    """tokens_per_minute (here over a 6-second window): the fourth request waits for the window to
    free, the wait is not the request's charged time, and the window holds each answer's tokens."""
    import time

    monkeypatch.setattr("heuresis.agents.spend.RATE_WINDOW_S", 6.0)   # the wait: 6 s less the first three requests
    look = {"tool_calls": [("view_graph", {})], "usage": (3000, 1000)}
    with ScriptedLLMServer([look] * 4) as server:
        agent = LLMAgent("rated", model="openai/scripted-model", api_base=f"{server.url}/v1", requires_key=False,
                         prices=PRICES, max_tokens=500, tokens_per_minute=10_000, timeout_s=20)
        agent.use_records(None, spend_dir=tmp_path / "spend")
        messages = [{"role": "user", "content": "Look at the graph."}]
        tools = [{"type": "function", "function": {"name": "view_graph", "description": "the working graph",
                                                   "parameters": {"type": "object", "properties": {}}}}]
        sent, charged = [], []
        for _ in range(4):
            t = time.monotonic()
            reply = agent.respond(messages, tools)
            sent.append(time.monotonic() - t)
            charged.append(reply.usage.charged_s)
    window = agent._rate_window()
    assert window is not None and window.waited_s > 0.5
    assert sent[3] - charged[3] > 0.5                         # the fourth waited, and was not charged for the wait
    assert all(c <= s + 1e-9 for c, s in zip(charged, sent))
    events = [json.loads(line) for p in (tmp_path / "spend/rates/openai").rglob("*.jsonl")
              for line in p.read_text().splitlines()]
    assert sorted(e["tokens"] for e in events if e["event"] == "settle") == [4000] * 4
