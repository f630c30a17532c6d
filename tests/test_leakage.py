"""Figure 1a, the leakage probe: label mapping, scoring against the true structures, the probe sweep
through a scripted LLM server on 127.0.0.1, the no-LLM figure, config checks."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from llm_server import ScriptedLLMServer

from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import LEAKAGE
from heuresis.causal.networks import load_network
from heuresis.config import ConfigError
from heuresis.preflight import validate_config
from heuresis.stages.leakage import figure1a, run_leakage, score_reply, to_tokens


def _edges(net):
    return [(net.variables[i], net.variables[j]) for i, j in zip(*np.nonzero(net.adjacency))]


def _f1(true_pairs, pred_pairs):
    t = {frozenset(p) for p in true_pairs}
    p = {frozenset(q) for q in pred_pairs}
    tp = len(t & p)
    return 0.0 if tp == 0 else 2 * tp / (len(t) + len(p))


def test_to_tokens_whole_words_case_insensitive():
    labels = ["smoke", "lung", "either", "Lung2"]
    assert to_tokens("Smoke -> lung; LUNG2 -- either. smoker -> lung", labels) == \
        "X1 -> X2; X4 -- X3. smoker -> X2"
    # X-labels in a permuted assignment map back in one pass (no chained replacement)
    assert to_tokens("X2 -> X1", ["X2", "X1"]) == "X1 -> X2"


def test_score_reply_against_true_structure():
    net = load_network("asia")
    truth = _edges(net)
    text = "Here is the graph:\n" + "\n".join(f"{a.upper()} -> {b}" for a, b in truth)
    s = score_reply(text, net.variables, net.adjacency)
    assert s["status"] == "ok" and s["f1"] == 1.0 and s["direction_accuracy"] == 1.0
    reversed_half = truth[:4]
    text = "\n".join(f"{b} -> {a}" for a, b in reversed_half) + "\n" + "\n".join(f"{a} -- {b}" for a, b in truth[4:6])
    s = score_reply(text, net.variables, net.adjacency)
    assert s["f1"] == pytest.approx(_f1(truth, reversed_half + truth[4:6]))
    assert s["direction_accuracy"] == 0.0 and s["n_directed_judged"] == 4
    s = score_reply("I do not know.", net.variables, net.adjacency)
    assert s["status"] == "unparsed" and s["f1"] == 0.0 and s["n_edges"] == 0


def _spec(url, **kw):
    return {"kind": "llm", "model": "openai/scripted-model", "api_base": url, "requires_key": False,
            "prices": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
            "retries": {"max_retries": 0, "base_s": 0.0, "max_s": 0.0}, **kw}


def test_probe_sweep_through_local_server(tmp_path):
    cancer, quake = load_network("cancer"), load_network("earthquake")
    def names_reply(net):
        return {"content": "\n".join(f"{a} -> {b}" for a, b in _edges(net)), "usage": (120, 30)}
    script = [names_reply(cancer), {"content": "X1 -> X2\nX3 -> X4", "usage": (110, 12)},
              names_reply(quake), {"status": 500, "error": "boom"}]
    out = tmp_path / "leakage" / "probe.parquet"
    with ScriptedLLMServer(script) as server:
        run_leakage("probe", _spec(server.url + "/v1"), ["cancer", "earthquake"], 1, 11, out)
    df = read_table(out, LEAKAGE).to_pandas()
    assert list(zip(df.network, df.condition)) == [("cancer", "names"), ("cancer", "indices"),
                                                   ("earthquake", "names"), ("earthquake", "indices")]
    assert list(df.status) == ["ok", "ok", "ok", "failed"] and "InternalServerError" in df.error.iloc[3]
    assert df.f1.iloc[0] == 1.0 and df.direction_accuracy.iloc[0] == 1.0 and df.f1.iloc[2] == 1.0
    # the control: recompute the answer's F1 from the recorded seed's label assignment
    row = df.iloc[1]
    labels = [f"X{k + 1}" for k in np.random.default_rng(int(row.seed)).permutation(row.d)]
    node = {lab: j for j, lab in enumerate(labels)}
    pred = [(cancer.variables[node["X1"]], cancer.variables[node["X2"]]),
            (cancer.variables[node["X3"]], cancer.variables[node["X4"]])]
    assert row.f1 == pytest.approx(_f1(_edges(cancer), pred))
    assert sorted(row.labels.split("; ")) == sorted(labels)
    # every prompt lists the variables in a shuffled order and nothing else of the structure
    prompt = server.requests[0]["body"]["messages"][1]["content"]
    assert all(v in prompt for v in cancer.variables) and "->" in prompt   # the format line only
    assert list(df.tokens_in[:3]) == [120, 110, 120] and df.cost.iloc[0] == pytest.approx((120 * 1 + 30 * 2) / 1e6)


def test_probe_resumes_without_asking_again(tmp_path):
    out = tmp_path / "probe.parquet"
    cancer = load_network("cancer")
    reply = {"content": "\n".join(f"{a} -> {b}" for a, b in _edges(cancer))}
    with ScriptedLLMServer([reply, {"sleep": 0}]) as server:   # the second answer is not an edge list
        run_leakage("probe", _spec(server.url + "/v1"), ["cancer"], 1, 11, out)
    first = read_table(out, LEAKAGE).to_pandas()
    assert list(first.status) == ["ok", "unparsed"]
    # a rerun over finished work (artifact present) is Snakemake's business; a killed job keeps its
    # checkpoint: simulate by saving a unit and rerunning with a server that must not be asked for it
    from heuresis.artifacts.io import Checkpoint
    from heuresis.config import config_digest
    from heuresis.harness.agent_spec import result_spec

    out2 = tmp_path / "again.parquet"
    spec = _spec("http://127.0.0.1:9/v1")
    key = config_digest({"agent": "probe", "spec": result_spec(spec), "networks": ["cancer"], "repeats": 1, "seed": 11})
    ck = Checkpoint(out2, key)
    for _, r in first.iterrows():
        ck.save(f"cancer/{r.condition}/0", r.to_dict())
    run_leakage("probe", spec, ["cancer"], 1, 11, out2)      # port 9: any request would fail
    again = read_table(out2, LEAKAGE).to_pandas()
    assert list(again.status) == ["ok", "unparsed"] and again.f1.iloc[0] == 1.0


def test_failed_probe_is_retried_alone_and_a_transport_change_keeps_the_answers(tmp_path):
    """A probe whose request failed is written ``failed`` but not checkpointed: the job names the next
    attempt (the rule's ``attempt`` parameter changes, so Snakemake reruns it) and the rerun asks only
    that probe, even after ``timeout_s`` and ``retries`` changed (transport settings: not in the key)."""
    from heuresis.artifacts.failures import attempt_param, n_failed

    out = tmp_path / "probe.parquet"
    cancer = load_network("cancer")
    reply = {"content": "\n".join(f"{a} -> {b}" for a, b in _edges(cancer)), "usage": (100, 10)}
    with ScriptedLLMServer([reply, {"status": 500, "error": "boom"}, reply]) as server:
        run_leakage("probe", _spec(server.url + "/v1"), ["cancer"], 1, 11, out)
        assert len(server.requests) == 2
        first = read_table(out, LEAKAGE).to_pandas()
        assert list(first.status) == ["ok", "failed"] and n_failed(out) == 1
        assert attempt_param(out) == "attempt 2: retry 1 failed probes"
        spec = _spec(server.url + "/v1", timeout_s=7.0, retries={"max_retries": 3, "base_s": 0.0, "max_s": 0.0})
        run_leakage("probe", spec, ["cancer"], 1, 11, out, attempt=attempt_param(out))
    assert len(server.requests) == 3                         # only the failed probe (the control) again
    assert server.requests[2]["body"] == server.requests[1]["body"]
    again = read_table(out, LEAKAGE).to_pandas()
    assert list(again.status) == ["ok", "unparsed"] and n_failed(out) == 0 and again.f1.iloc[0] == first.f1.iloc[0]
    assert not (tmp_path / "probe.parquet.parts").exists()   # nothing failed: the checkpoint is done


def test_figure_without_llm_says_so():
    import pandas as pd

    fig, numbers = figure1a(pd.DataFrame(), [], ["asia"])
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert numbers.empty and any("no LLM agent is configured" in t for t in texts)


def test_leakage_config_checked(quick_config):
    cfg = copy.deepcopy(quick_config)
    cfg["leakage"] = {"agents": ["shortcut", "nobody"], "networks": ["asia", "atlantis"]}
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    text = str(err.value)
    assert "leakage.agents: agent 'shortcut' is of kind 'shortcut'" in text
    assert "leakage.agents: unknown agent 'nobody'" in text
    assert "leakage.networks: unknown network 'atlantis'" in text


def test_probe_longer_than_the_context_is_unparsed_with_the_reason(tmp_path):
    """A probe the model's context cannot hold is an answer it could not give (empty graph, ``unparsed``), not a failure."""
    overflow = {"status": 400, "error": "the request exceeds the available context size, try increasing it"}
    reply = {"content": "\n".join(f"{a} -> {b}" for a, b in _edges(load_network("cancer"))), "usage": (120, 30)}
    out = tmp_path / "probe.parquet"
    with ScriptedLLMServer([reply, overflow]) as server:
        run_leakage("probe", _spec(server.url + "/v1"), ["cancer"], 1, 11, out)
    df = read_table(out, LEAKAGE).to_pandas()
    assert list(df.status) == ["ok", "unparsed"] and len(server.requests) == 2   # not retried
    bad = df.iloc[1]
    assert bad.error.startswith("context_overflow: ") and bad.f1 == 0.0 and bad.n_edges == 0 and bad.reply == ""
