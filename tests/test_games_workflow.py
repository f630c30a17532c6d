"""The games track in the workflow: the prompting mode and the judges through a scripted
LLM server on 127.0.0.1, ICC against Shrout & Fleiss (1979), the play jobs (checkpoint, recorded
failures), scoring against independent computations, the config checks at start, and the rules
run by Snakemake on two scenarios."""

from __future__ import annotations

import copy
import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import NAMED_GAMES, ROOT, SCENARIOS
from llm_server import ScriptedLLMServer

from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import (
    GAME_CALLS,
    GAME_JUDGEMENT_REQUESTS,
    GAME_JUDGEMENTS,
    GAME_PLAY_REQUESTS,
    GAME_PLAYS,
    GAME_REFERENCES,
)
from heuresis.causal.bootstrap import bootstrap_mean
from heuresis.causal.games import Game, load_scenario
from heuresis.config import ConfigError
from heuresis.config.settings import Bootstrap
from heuresis.preflight import load_config, validate_config
from heuresis.stages.games.analysis import NO_JUDGE, criteria_table, family_table, judges_table, path_summary, summary
from heuresis.stages.games.judge import CRITERIA, ScoreError, icc, parse_scores
from heuresis.stages.games.play import AnswerError, parse_answer, run_play
from heuresis.stages.games.workflow import play_optimum, play_seed, run_judgements, run_plays, run_references

FAST_SEARCH = {"verify_fleets": 2}


def _spec(url, **kw):
    return {"kind": "llm", "model": "openai/scripted-model", "api_base": url + "/v1", "requires_key": False,
            "timeout_s": 20, "retries": {"max_retries": 0}, "prices": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
            **kw}


# --- ICC ------------------------------------------------------------------------------------------
SHROUT_FLEISS = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]


def test_icc_matches_shrout_fleiss_1979():
    """Table 2 (mean squares) and Table 4 (the six ICCs) of Shrout & Fleiss (1979), 6 targets x 4 judges."""
    r = icc(SHROUT_FLEISS)
    assert tuple(round(r[k], 2) for k in ("BMS", "JMS", "EMS", "WMS")) == (11.24, 32.49, 1.02, 6.26)
    published = {"ICC1_1": 0.17, "ICC2_1": 0.29, "ICC3_1": 0.71, "ICC1_k": 0.44, "ICC2_k": 0.62, "ICC3_k": 0.91}
    assert {k: round(r[k], 2) for k in published} == published


def test_icc_spearman_brown_and_limits():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 1)) + 0.7 * rng.normal(size=(30, 3)) + np.array([0.0, 0.5, -0.2])
    r = icc(x)
    k, r1 = 3, r["ICC2_1"]
    assert r["ICC2_k"] == pytest.approx(k * r1 / (1 + (k - 1) * r1), rel=1e-12)   # Spearman-Brown, exact for ICC(2,.)
    # the same ratings from a two-way ANOVA by least squares (an independent route to the mean squares)
    n = x.shape[0]
    y = x.ravel()
    rows, cols = np.repeat(np.arange(n), k), np.tile(np.arange(k), n)
    X = np.column_stack([np.ones(n * k), np.eye(n)[rows][:, 1:], np.eye(k)[cols][:, 1:]])
    resid = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    assert r["EMS"] == pytest.approx((resid ** 2).sum() / ((n - 1) * (k - 1)), rel=1e-10)
    same = np.tile(np.arange(10.0)[:, None], (1, 3))
    assert icc(same)["ICC2_k"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="2 targets x 2 raters"):
        icc([[1.0, 2.0]])


# --- parsing ----------------------------------------------------------------------------------------
def _answer(cr1=2, cr2=1, cr3=1, ed=1, rq=0, du=1, mode="correlational_reading", drop_du=False):
    """A judge's answer in the format the prompt asks for (DU left out with ``drop_du``)."""
    obj = {k.upper(): {"score": v, "reason": f"reason {k}"} for k, v in
           dict(cr1=cr1, cr2=cr2, cr3=cr3, ed=ed, rq=rq, du=du).items() if not (drop_du and k == "du")}
    return json.dumps({**obj, "failure_mode": mode})


def test_parse_scores_criteria_with_reasons_tolerant_and_strict():
    """Six criteria each with its reason and a failure-mode label; missing or out of range is an error, never 0."""
    a = parse_scores('<think>maybe CR1 4</think>Scores: ```json\n{"CR1": {"score": "3/4", "reason": "names the storm"},'
                     ' "CR2 trap avoidance": 2, "CR2_reason": "avoids it", "cr3": 1, "ED": 2, "reflection": 0.5,'
                     ' "data usage": 1, "failure_mode": "Missed confounder",}\n```')
    assert {k: a[k] for k in CRITERIA} == {"cr1": 3.0, "cr2": 2.0, "cr3": 1.0, "ed": 2.0, "rq": 0.5, "du": 1.0}
    assert a["cr1_reason"] == "names the storm" and a["cr2_reason"] == "avoids it" and a["cr3_reason"] == ""
    assert a["failure_mode"] == "missed_confounder"
    b = parse_scores("CR1 (true mechanism): 1/4 - names the storm\nCR2: 0 - falls for the trap\nCR3: 3\n"
                     "ED: 2\nRQ: 0\nDU: 1\nfailure mode: correlational_reading")
    assert [b[k] for k in CRITERIA] == [1.0, 0.0, 3.0, 2.0, 0.0, 1.0] and b["cr2_reason"] == "falls for the trap"
    assert parse_scores(_answer())["cr1"] == 2.0
    for bad, why in [(_answer(cr1=5), "cr1: 5 outside 0..4"), (_answer(cr3=4), "cr3: 4 outside 0..3"),
                     (_answer(du=-1), "outside"), (_answer(ed="lots"), "ed: not a number"),
                     (_answer(drop_du=True), "no score for DU"),
                     (_answer(mode="lazy"), "failure_mode: 'lazy' is not one of"),
                     (json.dumps({"CR1": {"reason": "x"}, "CR2": 1}), "cr1: no score"),
                     ('{"causal_reasoning": 7, "experimental_design": 1}', "no score for CR1"),
                     ("I liked it.", "no score"), ("", "empty")]:
        with pytest.raises(ScoreError, match=why):
            parse_scores(bad)


def test_parse_answer_tolerant_and_strict():
    space = load_scenario("antenna_trap", SCENARIOS).space
    a = parse_answer('I will explore.\n```json\n{"action": "Deploy", "design": {"Engine": "3", "wing": 4.0}, '
                     '"count": "20",}\n```', space)
    assert a == {"action": "deploy", "design": {"engine": 3, "wing": 4}, "count": 20}
    b = parse_answer("Final: {'action': 'submit', 'design': {'body': 5}, 'report': 'the storm {latent} drives it'}",
                     space)
    assert b["action"] == "submit" and b["design"] == {"body": 5} and "latent" in b["report"]
    assert parse_answer('{"engine": 2, "count": 5}', space)["action"] == "deploy"
    for bad, why in [("", "empty"), ("deploy 20 drones", "no JSON"), ('{"action": "fly", "design": {"engine": 1}}',
                                                                        "unknown action"),
                     ('{"action": "deploy", "design": {"engine": 1}}', "count"),
                     ('{"action": "deploy", "design": {"engine": "lots"}, "count": 3}', "whole number")]:
        with pytest.raises(AnswerError, match=why):
            parse_answer(bad, space)


# --- the prompting mode via the local server ---------------------------------------------------------
def _deploy(design, count, prose="Let me test this."):
    return {"content": f"{prose}\n```json\n{json.dumps({'action': 'deploy', 'design': design, 'count': count})}\n```",
            "usage": (2000, 60)}


def test_prompting_mode_plays_through_the_local_server():
    scn = load_scenario("antenna_trap", SCENARIOS)
    d1 = {"engine": 3, "cockpit": 3, "wing": 4, "body": 4, "camera": 3, "gun": 3}
    d2 = {"engine": 3, "cockpit": 3, "wing": 5, "body": 4, "camera": 2, "gun": 3}
    final = {"engine": 3, "cockpit": 3, "wing": 5, "body": 4, "camera": 2, "gun": 3}
    script = [_deploy(d1, 30), _deploy(d2, 40, prose="Now the other one: <think>{oops</think>"),
              {"content": json.dumps({"action": "submit", "design": final,
                                      "report": "Leave the antenna bare: it emits and draws fire."}),
               "usage": (4000, 90)}]
    with ScriptedLLMServer(script) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=5, threshold=0.8, optimum=0.88, mode="prompting")
    row = out.row
    assert (row["termination"], row["status"], row["submitted"], row["deployments"]) == ("submitted", "ok", True, 2)
    assert (row["mode"], row["task_variant"], row["code_isolation"]) == ("prompting", "standard", "off")
    # the same decisions replayed on the engine directly give the same numbers
    g = Game(scn, seed=5, threshold=0.8, guard=False)
    dep = [g.deploy(d1, 30), g.deploy(d2, 40)]
    s2 = g.submit(final, "Leave the antenna bare: it emits and draws fire.")
    assert row["survival"] == s2.survival and row["won"] == (s2.survival >= 0.8)
    assert row["gap"] == pytest.approx(0.88 - s2.survival)
    assert json.loads(row["deployment_counts"]) == [[d.count, d.returned] for d in dep]
    assert row["report"].startswith("Leave the antenna bare")
    assert (row["tokens_in"], row["tokens_out"]) == (8000, 210) and row["cost"] == pytest.approx((8000 + 420) / 1e6)
    # one requests row per server reply, as the server sent it
    sent = server.replies
    assert [(q["tokens_in"], q["tokens_out"]) for q in out.requests] == [(2000, 60), (2000, 60), (4000, 90)]
    assert [q["response_id"] for q in out.requests] == [r["reply"]["id"] for r in sent]
    assert [q["index"] for q in out.requests] == [0, 1, 2] and {q["play_id"] for q in out.requests} == {row["play_id"]}
    assert [c["tool"] for c in out.calls] == ["deploy", "deploy", "submit_final_design"]
    # a conversation in text: no tools; request k holds the task, then every earlier answer and its result
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == 3 and all("tools" not in b for b in bodies)
    assert [len(b["messages"]) for b in bodies] == [2, 4, 6]
    assert [m["role"] for m in bodies[2]["messages"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert bodies[2]["messages"][2]["content"] == script[0]["content"]      # the model sees its earlier turns
    task = bodies[0]["messages"][1]["content"]
    assert "Free history, flight group 1" in task and "Your deployment" not in task
    results = [bodies[2]["messages"][3]["content"], bodies[2]["messages"][5]["content"]]
    assert results[0].startswith("Your deployment 1:") and results[1].startswith("Your deployment 2:")
    assert f"{200 - 70} of 200 drones" in results[1]
    assert results[0].count("\n") > dep[0].returned                        # the per-drone rows came along
    # the prompts used are recorded, by role and file
    assert {r: v["file"] for r, v in out.transcript.prompts.items()} == {
        "system": "game_prompting_system.txt", "task": "game_task.txt", "hints": "game_hints.txt",
        "format": "game_prompting_format.txt", "result": "game_prompting_result.txt",
        "retry": "game_prompting_retry.txt", "query": "game_prompting_query.txt"}
    assert [m["role"] for m in out.transcript.messages] == [m["role"] for m in bodies[2]["messages"]] + ["assistant"]


def test_prompting_mode_answers_an_unreadable_or_refused_answer_with_a_retry():
    """Each bad answer (unreadable, over a cap, a submission without a report) is answered with the retry
    message naming the problem, as the next user message; the play goes on within its turn limit."""
    scn = load_scenario("antenna_trap", SCENARIOS)
    good = {"engine": 25, "antenna": 0}
    answers = ["I am not sure what to do.",
               json.dumps({"action": "deploy", "design": {"antenna": 51}, "count": 10}),
               json.dumps({"action": "submit", "design": good}),
               json.dumps({"action": "submit", "design": good, "report": "Camera and gun lower the enemy's fire."})]
    with ScriptedLLMServer([{"content": a} for a in answers]) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=1, threshold=0.8, optimum=0.88, mode="prompting",
                       max_turns=6)
    r = out.row
    # no exploration guard in the prompting mode: a submission without any deployment is played
    assert (r["termination"], r["submitted"], r["deployments"], r["turns"]) == ("submitted", True, 0, 4)
    assert r["report"].startswith("Camera and gun") and r["survival"] > 0
    bodies = [q["body"] for q in server.requests]
    assert len(bodies) == 4
    for k, why in enumerate(["no JSON", "in [0, 50], got 51", "commit the report"], start=1):
        last = bodies[k]["messages"][-1]
        assert last["role"] == "user" and last["content"].startswith("Your answer could not be played:"), last
        assert why in last["content"] and f"({6 - k} turns left)" in last["content"]
        assert not out.calls[k - 1]["ok"] and why in out.calls[k - 1]["error"]
    assert out.calls[-1]["ok"] and out.calls[-1]["tool"] == "submit_final_design"


def test_prompting_mode_ends_unsubmitted_at_the_turn_limit():
    scn = load_scenario("deployment_zone_trap_categorical", SCENARIOS)
    with ScriptedLLMServer([{"content": "Hmm."}] * 3) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=1, threshold=0.8, optimum=0.88, mode="prompting",
                       max_turns=3)
    r = out.row
    assert (r["termination"], r["submitted"], r["survival"], r["won"], r["turns"]) == ("unsubmitted", False, 0.0,
                                                                                       False, 3)
    assert len(server.requests) == 3 and all(not c["ok"] for c in out.calls)


def test_offline_agents_refuse_prompting_mode():
    with pytest.raises(ValueError, match="agentic mode only"):
        run_play("game_random", {"kind": "game_random"}, load_scenario("deployment_zone_trap_categorical", SCENARIOS),
                 mode="prompting")


# --- jobs: references, plays (checkpoint, failures), judgements ------------------------------------------
@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    out = tmp_path_factory.mktemp("games_refs") / "antenna_trap.parquet"
    run_references("antenna_trap", SCENARIOS, FAST_SEARCH, out)
    return out


def test_references_job_row(refs):
    r = read_table(refs, GAME_REFERENCES).to_pylist()[0]
    assert r["scenario"] == "antenna_trap" and r["verify_fleets"] == 2 and r["search_drones"] == 0
    assert r["threshold"] == 0.75 and r["threshold_rule"] == "fixed"        # CausalGame's published threshold
    assert r["trap_margin_lo"] > 0 and json.loads(r["trap_pattern"]) == [{"of": ["antenna"], "at_least": 20}]
    assert r["control"] == "antenna_trap_no_selection_bias" and r["optimum_method"] == "exact"
    assert r["optimum"] > r["threshold"] > r["trap"] and r["integer_optimum"] >= r["optimum_exact"]


def test_plays_job_resumes_from_checkpoint_and_records_a_crash(refs, tmp_path):
    from heuresis.artifacts.io import Checkpoint
    from heuresis.config import config_digest

    out, calls = tmp_path / "plays.parquet", tmp_path / "plays.calls.parquet"
    kw = dict(plays=3, seed=9, max_turns=40, references=refs, out=out, calls_out=calls, transcripts_dir=tmp_path / "t")
    run_plays("game_random", {"kind": "game_random"}, "agentic", "antenna_trap", SCENARIOS, **kw)
    first = read_table(out, GAME_PLAYS).to_pandas()
    assert list(first.seed) == [play_seed(9, "antenna_trap", r) for r in range(3)]
    assert all((tmp_path / "t" / f"r{r}.json").exists() for r in range(3))
    # a killed job: play 1 is in the checkpoint (marked), the rerun keeps it and redoes only the others
    ref = read_table(refs, GAME_REFERENCES).to_pylist()[0]
    key = config_digest({"agent": "game_random", "spec": {"kind": "game_random"}, "mode": "agentic",
                         "scenario": load_scenario("antenna_trap", SCENARIOS).spec, "plays": 3, "seed": 9,
                         "max_turns": 40, "threshold": ref["threshold"], "optimum": play_optimum(ref),
                         "task_variant": "standard", "max_tool_calls": None, "code_tool": {}})
    marked = first.iloc[1].to_dict()
    marked["report"] = "FROM CHECKPOINT"
    Checkpoint(out, key).save(1, {"row": marked, "calls": []})
    run_plays("game_random", {"kind": "game_random"}, "agentic", "antenna_trap", SCENARIOS, **kw)
    again = read_table(out, GAME_PLAYS).to_pandas()
    assert list(again.report)[1] == "FROM CHECKPOINT" and list(again.survival) == list(first.survival)
    assert not (tmp_path / "plays.parquet.parts").exists()
    # an LLM whose server refuses: every play recorded failed, none dropped
    with ScriptedLLMServer([{"status": 400, "error": "bad request"}] * 2) as server:
        run_plays("llm_local", _spec(server.url), "agentic", "antenna_trap", SCENARIOS,
                  **{**kw, "plays": 2, "out": tmp_path / "f.parquet", "calls_out": tmp_path / "f.calls.parquet"})
    failed = read_table(tmp_path / "f.parquet", GAME_PLAYS).to_pandas()
    assert list(failed.status) == ["failed", "failed"] and (failed.survival == 0).all() and (~failed.won).all()
    assert failed.error.str.contains("bad request").all()
    read_table(tmp_path / "f.calls.parquet", GAME_CALLS)


def test_failed_llm_play_rerun_replays_what_was_paid(refs, tmp_path, monkeypatch):
    """A play that failed after two paid replies: the rerun gets them from the play's request log
    and sends only the third request; the play then ends as an uninterrupted one does."""
    d1 = {"engine": 3, "cockpit": 3, "wing": 4, "body": 4, "camera": 3, "gun": 3}
    d2 = {"engine": 3, "cockpit": 3, "wing": 5, "body": 4, "camera": 2, "gun": 3}
    submit = {"content": json.dumps({"action": "submit", "design": d2, "report": "Wings matter."}), "usage": (4000, 90)}
    kw = dict(plays=1, seed=9, max_turns=10, references=refs, out=tmp_path / "p.parquet",
              calls_out=tmp_path / "p.calls.parquet", requests_out=tmp_path / "p.requests.parquet",
              transcripts_dir=tmp_path / "t")
    spec = {k: v for k, v in _spec("").items() if k != "api_base"} | {"api_base_env": "HEURESIS_TEST_API_BASE"}
    # the server's address comes from the environment (a new port each run), as api_base_env gives it

    def serve(script):
        server = ScriptedLLMServer(script)
        monkeypatch.setenv("HEURESIS_TEST_API_BASE", server.url + "/v1")
        return server

    with serve([_deploy(d1, 30), _deploy(d2, 40), {"status": 400, "error": "bad request"}]) as server:
        run_plays("llm_local", spec, "prompting", "antenna_trap", SCENARIOS, **kw)
    first = read_table(tmp_path / "p.parquet", GAME_PLAYS).to_pandas()
    assert list(first.status) == ["failed"] and len(server.requests) == 3
    with serve([submit]) as server:
        run_plays("llm_local", spec, "prompting", "antenna_trap", SCENARIOS, **kw)
    assert len(server.requests) == 1                     # the two paid answers came from the log
    again = read_table(tmp_path / "p.parquet", GAME_PLAYS).to_pandas().iloc[0]
    assert (again.status, again.termination, again.deployments) == ("ok", "submitted", 2)
    req = read_table(tmp_path / "p.requests.parquet", GAME_PLAY_REQUESTS).to_pandas()
    assert list(req.replayed) == [True, True, False]
    with ScriptedLLMServer([_deploy(d1, 30), _deploy(d2, 40), submit]) as server:
        clean = run_play("llm_local", _spec(server.url), load_scenario("antenna_trap", SCENARIOS),
                         seed=again.seed, threshold=again.threshold, optimum=again.optimum, max_turns=10,
                         mode="prompting").row
    assert (clean["survival"], clean["design"], clean["tokens_in"]) == (again.survival, again.design, again.tokens_in)


def test_judge_job_through_the_local_server(refs, tmp_path):
    kw = dict(plays=3, seed=4, max_turns=40, references=refs, transcripts_dir=tmp_path / "t")
    run_plays("game_trap_follower", {"kind": "game_trap_follower"}, "agentic", "antenna_trap", SCENARIOS,
              out=tmp_path / "p.parquet", calls_out=tmp_path / "p.calls.parquet", **kw)
    plays = read_table(tmp_path / "p.parquet", GAME_PLAYS).to_pandas()
    # play 2 lost its report: scored 0 without a request
    table = read_table(tmp_path / "p.parquet", GAME_PLAYS)
    rows = table.to_pylist()
    rows[2]["report"] = ""
    from heuresis.artifacts.io import write_table
    write_table(GAME_PLAYS.schema.empty_table().from_pylist(rows, schema=GAME_PLAYS.schema), tmp_path / "p.parquet",
                GAME_PLAYS)
    answers = [{"content": _answer(cr1=1, cr2=0, cr3=1, ed=1, rq=0, du=1), "usage": (1500, 40)},
               {"content": "A fine report, 9 out of 10.", "usage": (1500, 10)}]
    with ScriptedLLMServer(answers) as server:
        run_judgements("judge_local", _spec(server.url), "game_trap_follower", "agentic", [tmp_path / "p.parquet"],
                       [refs], SCENARIOS, tmp_path / "j.parquet", max_tokens=700, requests_out=tmp_path / "jr.parquet")
    j = read_table(tmp_path / "j.parquet", GAME_JUDGEMENTS).to_pandas()
    jr = read_table(tmp_path / "jr.parquet", GAME_JUDGEMENT_REQUESTS).to_pandas()
    assert list(jr.play_id) == list(j.play_id[:2]) and list(jr.tokens_out) == [40, 10]     # no request: no row
    assert list(jr.response_id) == [r["reply"]["id"] for r in server.replies]
    assert list(j.status) == ["ok", "unparsed", "no_report"]
    assert (j.total[0], j.cr[0], j.cr1[0], j.cr2[0]) == (4.0, 2.0, 1.0, 0.0) and j.cr1_reason[0] == "reason cr1"
    assert j.failure_mode[0] == "correlational_reading" and j.failure_mode[2] == "no_report"
    assert math.isnan(j.total[1]) and math.isnan(j.cr1[1]) and j.failure_mode[1] is None    # unparsed: null, never 0
    assert j.total[2] == 0.0 and j.cr1[2] == 0.0
    assert len(server.requests) == 2 and all(r["body"]["max_tokens"] == 700 for r in server.requests)
    prompt = server.requests[0]["body"]["messages"][1]["content"]
    scn = load_scenario("antenna_trap", SCENARIOS)
    assert " ".join(scn.spec["intended_mechanism"].split()) in prompt
    assert plays.report[0] in prompt and "survival" not in prompt.split("<<<")[0].lower().replace(
        "observed survival rate", "")   # the judge is not told the Stage-2 outcome


def test_judgements_are_checkpointed_per_play(refs, tmp_path):
    """A play played again (a failed play retried) is the only one judged again: the judgement job's
    checkpoint is per play and what the judge is shown of it, and outlives the job (Snakemake removes
    the job's output before rerunning it); a transport change (timeout, retries) re-buys nothing."""
    from heuresis.artifacts.io import write_table

    run_plays("game_trap_follower", {"kind": "game_trap_follower"}, "agentic", "antenna_trap", SCENARIOS,
              plays=3, seed=4, max_turns=40, references=refs, out=tmp_path / "p.parquet",
              calls_out=tmp_path / "p.calls.parquet", transcripts_dir=tmp_path / "t")
    played = read_table(tmp_path / "p.parquet", GAME_PLAYS).to_pylist()
    failed = [dict(r) for r in played]
    failed[1].update(status="failed", error="scripted: provider unavailable", report="")

    def write(rows):
        write_table(GAME_PLAYS.schema.empty_table().from_pylist(rows, schema=GAME_PLAYS.schema), tmp_path / "p.parquet",
                    GAME_PLAYS)

    answer = {"content": _answer(), "usage": (1500, 40)}
    out = tmp_path / "j.parquet"
    with ScriptedLLMServer([answer] * 4) as server:
        write(failed)
        run_judgements("judge_local", _spec(server.url), "game_trap_follower", "agentic", [tmp_path / "p.parquet"],
                       [refs], SCENARIOS, out)
        assert list(read_table(out, GAME_JUDGEMENTS).to_pandas().status) == ["ok", "play_failed", "ok"]
        assert len(server.requests) == 2
        write(played)        # the failed play, played again
        out.unlink()         # as Snakemake does before it reruns the job
        run_judgements("judge_local", _spec(server.url, timeout_s=99, retries={"max_retries": 4}), "game_trap_follower",
                       "agentic", [tmp_path / "p.parquet"], [refs], SCENARIOS, out)
        assert len(server.requests) == 3                  # only play 1 asked again
        assert played[1]["report"] in server.requests[2]["body"]["messages"][1]["content"]
        j = read_table(out, GAME_JUDGEMENTS).to_pandas()
        assert list(j.status) == ["ok", "ok", "ok"] and list(j.play_id) == [r["play_id"] for r in played]
        assert len(list((tmp_path / "j.parquet.parts").glob("*.json"))) == 3   # pruned to this job's plays
        out.unlink()
        run_judgements("judge_local", _spec(server.url), "game_trap_follower", "agentic", [tmp_path / "p.parquet"],
                       [refs], SCENARIOS, out)
        assert len(server.requests) == 3                  # nothing changed: nothing bought
        assert read_table(out, GAME_JUDGEMENTS).to_pandas().total.tolist() == j.total.tolist()


# --- scoring -----------------------------------------------------------------------------------------------
def _fake_plays():
    rng = np.random.default_rng(0)
    rows = []
    for fam, scns in (("antenna", ["antenna_trap", "antenna_trap_high_def"]), ("zone", ["deployment_zone_trap_categorical"])):
        for scn in scns:
            for agent in ("a1", "a2"):
                for r in range(4):
                    s = float(rng.uniform(0.5, 0.9))
                    rows.append({"play_id": f"{agent}/agentic/{scn}/r{r}", "agent": agent, "mode": "agentic",
                                 "family": fam, "scenario": scn, "status": "ok", "submitted": True,
                                 "survival": s, "won": s >= 0.75, "gap": 0.88 - s})
    return pd.DataFrame(rows)


BOOT = Bootstrap(resamples=300, level=0.9, seed=5)


def test_summary_against_independent_computation():
    plays = _fake_plays()
    summ = summary(plays, None, [], BOOT)
    row = summ[(summ.scenario == "antenna_trap") & (summ.agent == "a2")].iloc[0]
    sub = plays[(plays.scenario == "antenna_trap") & (plays.agent == "a2")]
    assert row.survival == pytest.approx(sub.survival.mean()) and row.plays == 4
    iv = bootstrap_mean(sub.survival.to_numpy(), resamples=300, seed=5, level=0.9)
    assert (row.survival_lo, row.survival_hi) == (iv.lo, iv.hi)
    assert row.win_rate == pytest.approx(sub.won.mean()) and row.gap == pytest.approx(0.88 - sub.survival.mean())
    pooled = summ[(summ.scenario == "all") & (summ.family == "antenna") & (summ.agent == "a1")].iloc[0]
    assert pooled.plays == 8 and pooled.survival == pytest.approx(
        plays[(plays.family == "antenna") & (plays.agent == "a1")].survival.mean())
    assert summ.rubric.isna().all()
    _num, disp = family_table(summ, "antenna", [])
    assert (disp["Rubric (0-16)"] == NO_JUDGE).all() and "all antenna" in set(disp.Scenario)
    _num, disp = judges_table(None, [])
    assert NO_JUDGE in disp.to_string()


def test_rubric_and_icc_from_judgements():
    plays = _fake_plays()
    rng = np.random.default_rng(1)
    rows = []
    for pid in plays.play_id:
        base = rng.integers(0, 10)
        for j, off in (("j1", 0), ("j2", 1), ("j3", 0)):
            items = {"cr1": float(min(base + off, 4)), "cr2": float(base % 3), "cr3": 1.0, "ed": 1.0, "rq": 1.0,
                     "du": float(rng.integers(0, 2))}
            rows.append({"judge": j, "play_id": pid, "status": "ok", **items, "total": sum(items.values()),
                         "cr": items["cr1"] + items["cr2"] + items["cr3"]})
    jd = pd.DataFrame(rows)
    summ = summary(plays, jd, ["j1", "j2", "j3"], BOOT)
    row = summ[(summ.scenario == "deployment_zone_trap_categorical") & (summ.agent == "a1")].iloc[0]
    ids = plays[(plays.scenario == "deployment_zone_trap_categorical") & (plays.agent == "a1")].play_id
    assert row.rubric == pytest.approx(jd[jd.play_id.isin(ids)].groupby("play_id").total.mean().mean())
    num, disp = judges_table(jd, ["j1", "j2", "j3"])
    wide = jd.pivot(index="play_id", columns="judge", values="total")[["j1", "j2", "j3"]]
    assert num.iloc[-1]["total"] == pytest.approx(icc(wide.to_numpy())["ICC2_k"])
    assert disp.iloc[-1]["Judge"].startswith("ICC(2,3)")


def test_the_judges_criteria_are_the_columns_the_judgements_table_has():
    """A table without DU and with a further criterion ``xx`` (scored, with its reason): the tables read
    the criteria from the columns, and the new one's maximum is the highest score a judge gave it."""
    plays = _fake_plays()
    rows = [{"judge": j, "play_id": pid, "status": "ok", "cr1": 2.0, "cr2": 1.0, "cr3": 1.0, "ed": 1.0, "rq": 0.0,
             "xx": float(k % 4), "xx_reason": "why", "cr": 4.0, "total": 5.0 + k % 4}
            for k, pid in enumerate(plays.play_id) for j in ("j1", "j2")]
    jd = pd.DataFrame(rows)
    num, disp = judges_table(jd, ["j1", "j2"])
    assert "XX (0-3)" in disp.columns and not any(c.startswith("DU") for c in disp.columns)
    assert num.iloc[0]["xx"] == pytest.approx(jd[jd.judge == "j1"].xx.mean())
    num, disp = criteria_table(plays, jd, ["j1", "j2"], BOOT)
    assert set(num.criterion) == {"cr1", "cr2", "cr3", "ed", "rq", "xx", "cr", "total"}
    assert num[num.criterion == "xx"]["max"].iloc[0] == 3.0


def test_path_summary_distance_to_optimum():
    plays = pd.DataFrame([{"agent": "a", "mode": "agentic", "scenario": "s", "submitted": True,
                           "designs_deployed": json.dumps([{"x": 1, "y": 0}, {"x": 3, "y": 1}]),
                           "distinct_designs": 2, "lock_in_share": 0.8, "drift_from_best": 0.0,
                           "submitted_is_best_observed": True}])
    stats, steps = path_summary(plays, {"s": {"optimum_design": {"x": 3, "y": 2}}})
    assert list(steps["mean"]) == [4.0, 1.0] and stats.iloc[0].submitted_is_best_observed == 1.0


# --- config checks at workflow start ------------------------------------------------------------------------
def _cfg(**games):
    cfg = load_config(ROOT / "config/config.yaml", ROOT / "config/quick.yaml")
    cfg = copy.deepcopy(cfg)
    cfg["games"].update(games)
    return cfg


@pytest.mark.parametrize("games, key", [
    ({"agents": ["nobody"]}, "games.agents: unknown agent 'nobody'"),
    ({"agents": ["shortcut"]}, "games.agents: agent 'shortcut' is of kind 'shortcut'"),
    ({"judges": ["game_random"]}, "games.judges: agent 'game_random' is of kind 'game_random'"),
    ({"scenarios": ["antenna_nowhere"]}, "games.scenarios: scenario 'antenna_nowhere'"),
])
def test_games_config_errors_name_the_key(games, key):
    with pytest.raises(ConfigError) as err:
        validate_config(_cfg(**games))
    assert key in str(err.value)


def test_bad_scenario_files_fail_at_start(tmp_path):
    shutil.copy(SCENARIOS / "deployment_zone_trap_categorical.yaml", tmp_path / "deployment_zone_trap_categorical.yaml")
    (tmp_path / "zone_bad.yaml").write_text("extends: deployment_zone_trap_categorical\nname: zone_bad\nmodel: plasma\n")
    (tmp_path / "zone_orphan.yaml").write_text("extends: zone_nowhere\nname: zone_orphan\n")
    with pytest.raises(ConfigError) as err:
        validate_config(_cfg(**{**NAMED_GAMES, "scenarios_dir": str(tmp_path),
                                "scenarios": ["deployment_zone_trap_categorical", "zone_bad", "zone_orphan"]}))
    msg = str(err.value)
    assert "scenario 'zone_bad':" in msg and "model: 'plasma' is not one of ['antenna', 'weather', 'zone']" in msg
    assert "scenario 'zone_orphan':" in msg and "zone_nowhere" in msg
    assert "scenario 'deployment_zone_trap_categorical'" not in msg and "antenna_trap" not in msg


def test_games_agents_and_judges_need_credentials(paper_config, quick_config):
    from heuresis.agents.llm import llm_agents_in_use

    assert {"gpt", "claude", "qwen", "judge_gpt", "judge_claude", "judge_qwen"} <= set(llm_agents_in_use(paper_config))
    cfg = copy.deepcopy(quick_config)
    cfg["leakage"]["agents"], cfg["episodes"]["run"] = [], []
    cfg["games"]["judges"] = ["judge_qwen"]
    assert set(llm_agents_in_use(cfg)) == {"judge_qwen"}
    assert paper_config["games"]["modes"] == ["agentic", "prompting"] and len(paper_config["games"]["judges"]) == 3


# --- the rules, run by Snakemake on two scenarios ----------------------------------------------------------
def test_games_rules_on_two_scenarios(tmp_path):
    from tinyflow import copy_workflow, run_snakemake

    wd = copy_workflow(tmp_path / "wf")
    # a bad scenario file stops the workflow at start, naming the scenario and the key
    bad = wd / "config/games/causalgame/zone_bad.yaml"
    bad.write_text("extends: deployment_zone_trap_categorical\nname: zone_bad\nmodel: plasma\n")
    (wd / "config/named.yaml").write_text(yaml.safe_dump({"games": {**NAMED_GAMES, "scenarios": ["zone_bad"]}}))
    proc = run_snakemake(wd, "-n", "--configfile", "config/quick.yaml", "config/named.yaml", check=False)
    assert proc.returncode != 0 and "scenario 'zone_bad':" in proc.stdout + proc.stderr
    assert "model: 'plasma'" in proc.stdout + proc.stderr and "games_plays" not in proc.stdout
    bad.unlink()
    rng = np.random.default_rng(2)
    answers = [{"content": _answer(cr1=int(rng.integers(0, 5)), cr2=int(rng.integers(0, 5)), rq=int(rng.integers(0, 3)),
                                   mode=str(rng.choice(["none", "correlational_reading"])))}
               for _ in range(8)]
    with ScriptedLLMServer(answers) as server:
        judge = _spec(server.url)
        (wd / "config/games_test.yaml").write_text(yaml.safe_dump({
            "agents": {"j_one": judge, "j_two": judge},
            "games": {**NAMED_GAMES, "scenarios": ["antenna_trap", "deployment_zone_trap_categorical"],
                      "agents": ["game_trap_follower"], "plays": 2,
                      "baseline_plays": 2,
                      "judges": ["j_one", "j_two"], "search": FAST_SEARCH, "bootstrap": {"resamples": 200},
                      "protocols": ["committed", "as_published"]}}))
        targets = ["results/tables/games_antenna.md", "results/tables/games_zone.md", "results/tables/games_optima.md",
                   "results/tables/games_judges.md", "results/figures/games_paths.png",
                   "results/figures/games_survival_rubric.png", "results/tables/games_criteria.md",
                   "results/tables/games_failure_modes.md", "results/tables/games_trap_fall.md",
                   "results/tables/games_bias_control.md", "results/figures/games_criteria_tiers.png",
                   "results/figures/games_survival_cr.png", "results/tables/games_protocols.md"]
        run_snakemake(wd, *targets, "--cores", "2", "--configfile", "config/quick.yaml", "config/games_test.yaml",
                      timeout=900)
    res = wd / "results"
    plays = pd.concat([read_table(res / f"games/plays/game_trap_follower/agentic/{s}.parquet", GAME_PLAYS).to_pandas()
                       for s in ("antenna_trap", "deployment_zone_trap_categorical")])
    assert len(plays) == 4 and (plays.status == "ok").all() and len(server.requests) == 8
    table = pd.read_parquet(res / "tables/games_antenna.parquet")
    row = table[table.scenario == "antenna_trap"].iloc[0]
    assert row.survival == pytest.approx(plays[plays.scenario == "antenna_trap"].survival.mean())
    every_view = pd.concat([read_table(p, GAME_JUDGEMENTS).to_pandas() for p in (res / "games/judgements").rglob("*.parquet")
                            if not p.name.endswith(".requests.parquet")])
    assert (every_view[every_view.protocol == "as_published"].status == "no_report").all()   # no debrief: 0, unasked
    jd = every_view[every_view.protocol == "committed"]                    # the view every other table shows
    ids = plays[plays.scenario == "antenna_trap"].play_id
    assert row.rubric == pytest.approx(jd[jd.play_id.isin(ids)].groupby("play_id").total.mean().mean())
    judges = pd.read_parquet(res / "tables/games_judges.parquet")
    wide = jd.pivot(index="play_id", columns="judge", values="total")[["j_one", "j_two"]]
    assert judges.iloc[-1]["total"] == pytest.approx(icc(wide.to_numpy())["ICC2_k"])
    assert "ICC(2,2)" in (res / "tables/games_judges.md").read_text()
    crit = pd.read_parquet(res / "tables/games_criteria.parquet")
    cr1 = jd.pivot(index="play_id", columns="judge", values="cr1")[["j_one", "j_two"]]
    row = crit[(crit.agent == "all") & (crit.criterion == "cr1")].iloc[0]
    assert row.icc2k == pytest.approx(icc(cr1.to_numpy())["ICC2_k"]) and row.plays == 4
    assert row.share_zero == pytest.approx((cr1.mean(axis=1) == 0).mean())
    modes = pd.read_parquet(res / "tables/games_failure_modes.parquet")
    assert modes[modes.agent == "all"]["count"].sum() == 8
    falls = pd.read_parquet(res / "tables/games_trap_fall.parquet")
    assert set(falls.scenario) == {"antenna_trap", "deployment_zone_trap_categorical"} and (falls.submitted == 2).all()
    optima = pd.read_parquet(res / "tables/games_optima.parquet")
    assert set(optima.scenario) == {"antenna_trap", "deployment_zone_trap_categorical"}
    assert (optima.optimum > optima.threshold).all()
    assert (res / "figures/games_paths.pdf").stat().st_size > 0
    views = pd.read_parquet(res / "tables/games_protocols.parquet")     # offline players answer no debrief: 0
    pub = views[(views.agent == "all") & (views.protocol == "as_published")].iloc[0]
    assert pub.plays == 4 and pub.texts == 0 and pub.scored == 4 and pub.total == 0


def test_the_as_published_view_judges_the_debrief_and_keeps_the_committed_judgements(refs, tmp_path):
    """games.protocols adds the as_published view: each judge grades the debrief (after the outcome) in place of
    the report, a play without one scores 0 without asking; turning the view on asks only for it (the committed
    judgements are kept); games_protocols shows both views and their paired difference."""
    from heuresis.artifacts.io import write_table
    from heuresis.stages.games.analysis import protocols_table

    run_plays("game_trap_follower", {"kind": "game_trap_follower"}, "agentic", "antenna_trap", SCENARIOS,
              plays=3, seed=4, max_turns=40, references=refs, out=tmp_path / "p.parquet",
              calls_out=tmp_path / "p.calls.parquet", transcripts_dir=tmp_path / "t")
    played = read_table(tmp_path / "p.parquet", GAME_PLAYS).to_pylist()
    debriefs = ["Debrief one: the storm broke the antenna.", "Debrief two: the camera mattered.", ""]
    for r, text in zip(played, debriefs):
        r.update(debrief=text, debrief_status="ok" if text else "")
    write_table(GAME_PLAYS.schema.empty_table().from_pylist(played, schema=GAME_PLAYS.schema), tmp_path / "p.parquet",
                GAME_PLAYS)
    scores = [dict(cr1=3, cr2=2), dict(cr1=1, cr2=0), dict(cr1=2, cr2=2), dict(cr1=4, cr2=4), dict(cr1=0, cr2=0)]
    out = tmp_path / "j.parquet"
    with ScriptedLLMServer([{"content": _answer(**k), "usage": (900, 30)} for k in scores]) as server:
        run_judgements("judge_local", _spec(server.url), "game_trap_follower", "agentic", [tmp_path / "p.parquet"],
                       [refs], SCENARIOS, out)
        assert len(server.requests) == 3
        out.unlink()
        run_judgements("judge_local", _spec(server.url), "game_trap_follower", "agentic", [tmp_path / "p.parquet"],
                       [refs], SCENARIOS, out, protocols=["committed", "as_published"])
        assert len(server.requests) == 5                                  # only the two debriefs asked
        for req, text in zip(server.requests[3:], debriefs):
            prompt = req["body"]["messages"][1]["content"]
            assert text in prompt and played[0]["report"] not in prompt
    j = read_table(out, GAME_JUDGEMENTS).to_pandas()
    assert sorted(j.protocol) == ["as_published"] * 3 + ["committed"] * 3
    pub = j[j.protocol == "as_published"].set_index("play_id")
    assert pub.loc[played[2]["play_id"], "status"] == "no_report" and pub.loc[played[2]["play_id"], "total"] == 0
    assert list(pub.loc[[played[0]["play_id"], played[1]["play_id"]], "cr1"]) == [4.0, 0.0]
    num, disp = protocols_table(pd.DataFrame(played), j, ["judge_local"], BOOT)
    row = num[(num.agent == "game_trap_follower") & (num.protocol == "as_published")].iloc[0]
    committed = j[j.protocol == "committed"].set_index("play_id").total
    assert row.scored == 3 and row.texts == 2 and row.total == pytest.approx(pub.total.mean())
    assert row.total_minus_committed == pytest.approx((pub.total - committed.reindex(pub.index)).mean())
    assert set(disp.View) == {"committed", "as_published"}


def test_baselines_have_their_own_play_count_and_a_table_row(refs, tmp_path, paper_config):
    """games.baseline_plays plays of the mechanism-aware baseline land in the family table, with the count."""
    from heuresis.stages.games.workflow import play_jobs, plays_of

    g = paper_config["games"]
    assert "game_mechanism" in g["agents"] and g["baseline_plays"] != g["plays"]
    assert plays_of(paper_config, "game_mechanism") == plays_of(paper_config, "game_random") == g["baseline_plays"]
    assert plays_of(paper_config, "gpt") == g["plays"]
    assert {j["mode"] for j in play_jobs(paper_config) if j["agent"] == "game_mechanism"} == {"agentic"}
    cfg = copy.deepcopy(paper_config)
    cfg["games"]["baseline_plays"] = 6
    n = plays_of(cfg, "game_mechanism")
    out = tmp_path / "m.parquet"
    run_plays("game_mechanism", {"kind": "game_mechanism"}, "agentic", "antenna_trap", SCENARIOS, plays=n, seed=2024,
              max_turns=40, references=refs, out=out, calls_out=tmp_path / "m.calls.parquet",
              transcripts_dir=tmp_path / "t")
    plays = read_table(out, GAME_PLAYS).to_pandas()
    assert len(plays) == 6 and (plays.status == "ok").all() and (plays.drones_used <= 200).all()
    assert all(json.loads(d)["antenna"] == 0 for d in plays.design)   # the structure: a bare antenna
    num, disp = family_table(summary(plays, None, [], BOOT), "antenna", [])
    row = disp[(disp.Agent == "game_mechanism") & (disp.Scenario == "antenna_trap")]
    assert len(row) == 1 and row.Plays.iloc[0] == "6"
    assert num[(num.agent == "game_mechanism") & (num.scenario == "antenna_trap")].win_rate.iloc[0] == pytest.approx(
        plays.won.mean())


def test_failed_plays_are_written_counted_and_retried_alone(refs, tmp_path, monkeypatch):
    """A play whose harness raises is written failed, not checkpointed, counted in the metadata; the
    rerun plays only it; the summary counts it and leaves it out of every mean."""
    import heuresis.stages.games.play as play_mod
    from heuresis.artifacts.failures import N_FAILED_KEY, attempt_param, n_failed
    from heuresis.artifacts.io import read_metadata

    real, ran = play_mod.run_play, []

    def flaky(*args, repeat, **kw):
        ran.append(repeat)
        if repeat == 1:
            raise ConnectionError("scripted: provider unavailable after every retry")
        return real(*args, repeat=repeat, **kw)

    out = tmp_path / "p.parquet"
    kw = dict(plays=3, seed=9, max_turns=40, references=refs, out=out, calls_out=tmp_path / "p.calls.parquet",
              transcripts_dir=tmp_path / "t")
    monkeypatch.setattr(play_mod, "run_play", flaky)
    run_plays("game_random", {"kind": "game_random"}, "agentic", "antenna_trap", SCENARIOS, **kw,
              attempt=attempt_param(out))
    first = read_table(out, GAME_PLAYS).to_pandas()
    assert list(first.status) == ["ok", "failed", "ok"] and ran == [0, 1, 2]
    assert n_failed(out) == 1 and read_metadata(tmp_path / "p.calls.parquet")[N_FAILED_KEY] == "1"
    assert sorted(p.name for p in (tmp_path / "p.parquet.parts").glob("*.json")) == ["0.json", "2.json"]
    assert attempt_param(out) == "attempt 2: retry 1 failed plays"
    summ = summary(first, None, [], BOOT)
    row = summ[summ.scenario == "antenna_trap"].iloc[0]
    ok = first[first.status == "ok"]
    assert (row.plays, row.failed) == (3, 1) and row.survival == pytest.approx(ok.survival.mean())
    assert row.win_rate == pytest.approx(ok.won.mean()) and row.gap == pytest.approx(ok.gap.mean())
    _, disp = family_table(summ, "antenna", [])
    assert disp.Plays.iloc[0] == "3 (1 failed, not scored)"
    from heuresis.stages.games.judge import judge_play  # a failed play is not judged (no request: no model here)
    judged = judge_play(None, "j", first.iloc[1].to_dict(), load_scenario("antenna_trap", SCENARIOS))
    assert judged["status"] == "play_failed" and judged["total"] is None

    ran.clear()
    def counted(*args, repeat, **kw):
        ran.append(repeat)
        return real(*args, repeat=repeat, **kw)

    monkeypatch.setattr(play_mod, "run_play", counted)
    run_plays("game_random", {"kind": "game_random"}, "agentic", "antenna_trap", SCENARIOS, **kw,
              attempt=attempt_param(out))
    again = read_table(out, GAME_PLAYS).to_pandas()
    assert ran == [1] and (again.status == "ok").all() and n_failed(out) == 0
    assert list(again.survival[[0, 2]]) == list(first.survival[[0, 2]])
    assert not (tmp_path / "p.parquet.parts").exists()


OVERFLOW = {"status": 400, "error": "the request exceeds the available context size, try increasing it"}


@pytest.mark.parametrize("mode", ["agentic", "prompting"])
def test_context_overflow_ends_a_play_with_its_reason(mode):
    """A full context ends the play ``ok`` as ``context_overflow`` (survival 0: nothing submitted)."""
    scn = load_scenario("antenna_trap", SCENARIOS)
    design = {"engine": 3, "cockpit": 3, "wing": 4, "body": 4, "camera": 3, "gun": 3}
    first = ({"tool_calls": [("deploy", {"design": design, "count": 10})], "usage": (2000, 60)} if mode == "agentic"
             else _deploy(design, 10))
    with ScriptedLLMServer([first, OVERFLOW]) as server:
        out = run_play("llm_local", _spec(server.url), scn, seed=5, threshold=0.8, optimum=0.88, mode=mode)
    row = out.row
    assert (row["status"], row["termination"], row["submitted"], row["survival"]) == ("ok", "context_overflow",
                                                                                      False, 0.0)
    assert row["deployments"] == 1 and "context window" in row["error"] and len(server.requests) == 2


def test_judge_context_overflow_is_a_judgement_it_cannot_make(refs, tmp_path):
    """A judge whose context cannot hold the prompt: ``unparsed`` (scores null) with the reason, not a failure."""
    from heuresis.agents import make_agent
    from heuresis.stages.games.judge import judge_play

    run_plays("game_trap_follower", {"kind": "game_trap_follower"}, "agentic", "antenna_trap", SCENARIOS,
              out=tmp_path / "p.parquet", calls_out=tmp_path / "p.calls.parquet", plays=1, seed=4, max_turns=40,
              references=refs, transcripts_dir=tmp_path / "t")
    play = read_table(tmp_path / "p.parquet", GAME_PLAYS).to_pylist()[0]
    assert play["report"].strip()
    with ScriptedLLMServer([OVERFLOW]) as server:
        row = judge_play(make_agent("judge_local", _spec(server.url)), "judge_local", play,
                         load_scenario("antenna_trap", SCENARIOS))
    assert row["status"] == "unparsed" and row["error"].startswith("context_overflow: ") and row["total"] is None
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", ["agentic", "prompting"])
def test_quota_error_stops_the_play_job_after_one_request(refs, tmp_path, mode):
    """An exhausted quota is no failed play to retry: the job stops after one request, in both modes."""
    from heuresis.agents.llm import ProviderFatalError

    quota = {"status": 429, "error": "You exceeded your current quota", "code": "insufficient_quota"}
    with ScriptedLLMServer([quota] * 10) as server:
        with pytest.raises(ProviderFatalError, match="quota exhausted"):
            run_plays("llm_local", _spec(server.url), mode, "antenna_trap", SCENARIOS, plays=3, seed=1, max_turns=10,
                      references=refs, out=tmp_path / "p.parquet", calls_out=tmp_path / "p.calls.parquet",
                      transcripts_dir=tmp_path / "t", spend_dir=tmp_path / "spend")
    assert len(server.requests) == 1 and not (tmp_path / "p.parquet").exists()
    assert "quota exhausted" in (tmp_path / "spend/stopped/llm_local.json").read_text()   # later jobs send nothing


def test_llm_players_have_their_own_turn_limit(quick_config):
    """games.llm_max_turns: the turn limit of LLM agents only (the offline players keep
    games.max_turns); the job's runtime and the spend bound count it; null means games.max_turns."""
    from heuresis.preflight.spend import spend_bounds
    from heuresis.stages.games.workflow import max_turns_of, plays_of, scenario_names

    cfg = copy.deepcopy(quick_config)
    cfg["agents"]["scripted"] = {"kind": "llm", "model": "openai/scripted-model", "requires_key": False,
                                 "api_base": "http://127.0.0.1:9/v1", "timeout_s": 10,
                                 "prices": {"input_per_mtok": 0, "output_per_mtok": 0}}
    cfg["games"]["agents"] = ["game_random", "scripted"]
    cfg["games"]["llm_max_turns"] = 7
    cfg = validate_config(cfg)
    assert max_turns_of(cfg, "scripted") == 7 and max_turns_of(cfg, "game_random") == cfg["games"]["max_turns"] != 7
    bound = {(r.agent, r.part): r for r in spend_bounds(cfg)}[("scripted", "games_agentic")]
    debrief = int("as_published" in cfg["games"]["protocols"])           # one more request after a submission
    assert bound.requests == plays_of(cfg, "scripted") * (7 + debrief) * len(scenario_names(cfg)) and debrief == 1
    cfg["games"]["llm_max_turns"] = None
    assert max_turns_of(cfg, "scripted") == cfg["games"]["max_turns"]
    bad = copy.deepcopy(cfg)
    bad["games"]["llm_max_turns"] = 0
    with pytest.raises(ConfigError, match="games.llm_max_turns"):
        validate_config(bad)


def test_a_causalgame_plays_gap_is_to_the_integer_lattices_exact_optimum(tmp_path):
    """In CausalGame's scenarios an agent's DEF is any integer: its gap is measured to the exact optimum over the
    integer lattice (above the step-5 lattice's), so no design can score a negative expected gap."""
    from heuresis.causal.games.causalgame import CG_DIR, load_cg
    from heuresis.causal.games.exact import exact_survival

    name = "deployment_zone_trap_categorical"
    refs = tmp_path / "refs.parquet"
    run_references(name, CG_DIR, {"verify_fleets": 2}, refs)
    ref = read_table(refs, GAME_REFERENCES).to_pylist()[0]
    assert ref["integer_exact"] and ref["integer_optimum"] > ref["optimum_exact"]
    best = json.loads(ref["integer_design"])
    assert exact_survival(load_cg(name), best) == pytest.approx(ref["integer_optimum"], abs=1e-12)
    out = tmp_path / "plays.parquet"
    run_plays("game_random", {"kind": "game_random"}, "agentic", name, CG_DIR, plays=1, seed=3, max_turns=40,
              references=refs, out=out, calls_out=tmp_path / "calls.parquet", transcripts_dir=tmp_path / "t")
    row = read_table(out, GAME_PLAYS).to_pylist()[0]
    assert row["optimum"] == ref["integer_optimum"]
    assert row["gap"] == pytest.approx(ref["integer_optimum"] - row["survival"])
