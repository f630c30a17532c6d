"""LLM agents at scale through real ``snakemake`` against the scripted server (tests/llm_server.py):
a provider's resource caps its concurrent requests across parallel jobs, and a change of a transport
setting (timeouts, retries) reruns nothing that was paid for."""

from __future__ import annotations

import shutil

import pytest
from llm_server import Conversations, ScriptedLLMServer

from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import EPISODES

#: four episode jobs of one provider (two instances each): guided and unguided starts x two toolboxes
CONDITIONS = [f"{t}-{s}-p0-none-standard-once-r0" for t in ("full", "minimal") for s in ("guided", "unguided")]


def _llm_config(url: str, **transport) -> str:
    extra = "".join(f", {k}: {v}" for k, v in transport.items())
    return ("agents:\n"
            f"  local: {{kind: llm, model: openai/scripted-model, api_base: '{url}/v1', requires_key: false,\n"
            f"          prices: {{input_per_mtok: 1.0, output_per_mtok: 2.0}}{extra}}}\n"
            "episodes:\n"
            "  grids:\n"
            "    llm: {agents: [local], guided: [true, false], toolbox: [full, minimal], families: [lg]}\n"
            "  run: [llm]\n")


def _script(first_user_message: str) -> list[dict]:
    """Every episode: look at the graph, then submit (each answer waits: the requests of two jobs overlap)."""
    return [{"tool_calls": [("view_graph", {})], "usage": (400, 10)},
            {"tool_calls": [("submit", {"edges": ["X1 -> X2"]})], "usage": (500, 20)}]


@pytest.fixture(scope="module")
def capped_run(tiny_run, tmp_path_factory):
    """Four parallel episode jobs of the provider openai, its resource capped at 2 (four cores)."""
    from tinyflow import CONFIG, run_snakemake

    wd = tmp_path_factory.mktemp("llm_scale") / "wf"
    shutil.copytree(tiny_run, wd, symlinks=True)        # instances and references are built already
    conversations = Conversations(_script, reply_latency=0.8)

    def responder(request: dict) -> dict:   # each reply waits until two requests were in flight once (90 s at most)
        return {**conversations(request), "overlap": (2, 90.0)}

    server = ScriptedLLMServer(responder).__enter__()
    (wd / "config" / "llm.yaml").write_text(_llm_config(server.url, timeout_s=180))   # longer than any wait above
    outs = [f"results/episodes/local/{c}/lg/test/shard-000.parquet" for c in CONDITIONS]
    proc = run_snakemake(wd, *outs, "--cores", "4", *CONFIG, "config/llm.yaml", "--resources", "llm_openai=2")
    yield wd, server, outs, proc
    server.__exit__(None, None, None)


@pytest.mark.slow
def test_provider_cap_holds_across_parallel_jobs(capped_run):
    wd, server, outs, proc = capped_run
    assert len(server.requests) == 4 * 2 * 2              # 4 jobs x 2 episodes x 2 requests, none resent
    assert server.max_in_flight == 2                      # never more than the cap, and the cap was reached
    for out in outs:
        ep = read_table(wd / out, EPISODES).to_pandas()
        assert list(ep.status) == ["ok", "ok"] and list(ep.termination) == ["submitted", "submitted"]
    log = proc.stdout + proc.stderr
    assert "llm_openai=1" in log                          # each job holds one unit of its provider's resource


@pytest.mark.slow
def test_transport_settings_change_plans_nothing(capped_run):
    """After the run, other retries and timeout plan nothing (Snakemake's default rerun triggers);
    a setting that changes what is asked (temperature) plans every job again."""
    from tinyflow import CONFIG, run_snakemake

    wd, server, outs, _ = capped_run
    cfg = wd / "config" / "llm.yaml"
    cfg.write_text(_llm_config(server.url, timeout_s=45, retries="{max_retries: 1, base_s: 0.5, max_s: 4}"))
    dry = run_snakemake(wd, *outs, "-n", "--cores", "4", *CONFIG, "config/llm.yaml")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    cfg.write_text(_llm_config(server.url, timeout_s=45, temperature=0.5))
    dry = run_snakemake(wd, *outs, "-n", "--cores", "4", *CONFIG, "config/llm.yaml")
    text = dry.stdout + dry.stderr
    assert text.count("rule episodes:") == 4 and "Params have changed" in text, text[-3000:]
