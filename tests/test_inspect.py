"""inspect_ai (the ``inspect`` extra, its own environment: requirements/inspect-lock.txt).

The same scripted moves played through an inspect model (agent kind ``inspect``) and through the
built-in LLM agent against the scripted OpenAI server give the same calls, outcome and usage; the
task ``heuresis_inspect/episodes`` keeps the truth out of its samples, writes our tables, scores from them,
and a rerun after a failed request pays no answered request again.  CI runs this module in the
inspect environment (.ci/run); without inspect_ai it is skipped, or not collected where
``HEURESIS_INSPECT_TESTS=separate`` says it runs elsewhere (tests/conftest.py).
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

inspect_ai = pytest.importorskip("inspect_ai", reason="needs the inspect extra (requirements/inspect-lock.txt)")

from conftest import ROOT, small_lg_split  # noqa: E402
from llm_server import ScriptedLLMServer  # noqa: E402

from heuresis.artifacts.io import read_table  # noqa: E402
from heuresis.artifacts.schemas import CALLS, EPISODES, REQUESTS  # noqa: E402
from heuresis.harness.budgets import normalize_clock  # noqa: E402
from heuresis.stages.episodes import run_episode_shard  # noqa: E402

COND = "full-unguided-p1-none-standard-once-r0"
PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}

# two calls in one reply, a call written as text, a schema violation, an unknown tool, a submission
MOVES = [
    {"tool_calls": [["data_summary", {}], ["run_algorithm", {"algorithm": "algorithm_A"}]], "usage": [900, 40]},
    {"tool_calls": [["ci_test", {"x": "X1", "y": "X2", "given": [], "test": "fisherz"}]], "usage": [1500, 30]},
    {"content": 'Let me look.\n<tool_call>\n{"name": "view_graph", "arguments": {}}\n</tool_call>', "usage": [2500, 20]},
    {"tool_calls": [["ci_test", {"x": "X1"}]], "usage": [2600, 30]},
    {"tool_calls": [["no_such_tool", {}]], "usage": [2650, 10]},
    {"tool_calls": [["set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "->"}]}]], "usage": [2800, 50]},
    {"tool_calls": [["submit", {"edges": ["X1 -> X2", "X2 -- X3"]}]], "usage": [3000, 30]},
]


@pytest.fixture(scope="module")
def small(quick_config, tmp_path_factory):
    """2 lg test instances (d = 5, n = 200) with their pc_kci references, in a results folder."""
    return small_lg_split(quick_config, tmp_path_factory.mktemp("inspect") / "results", 2)


def _sweep(small, folder, spec, name="scripted"):
    """One episode of agent ``name`` (its name seeds the episode: the same for both routes) into ``folder``."""
    cfg, root = small["cfg"], small["root"]
    out = root / "episodes" / folder / "shard-000.parquet"
    run_episode_shard(name, spec, COND, "lg", "test", [0], data_dir=small["data"], truth_dir=small["truth"],
                      pc_kci_paths=[small["ref"]], episodes_cfg=cfg["episodes"], menu=cfg["references"]["algorithms"],
                      grades=cfg["grades"], seed=cfg["seed"], out=out, calls_out=out.with_name("calls.parquet"),
                      requests_out=out.with_name("requests.parquet"), transcripts_dir=root / "transcripts" / folder)
    return (read_table(out, EPISODES).to_pylist()[0], read_table(out.with_name("calls.parquet"), CALLS).to_pylist(),
            read_table(out.with_name("requests.parquet"), REQUESTS).to_pylist())


def _script(tmp_path, moves, name="moves.json"):
    path = tmp_path / name
    path.write_text(json.dumps(moves))
    return str(path)


@pytest.fixture(scope="module")
def via_litellm(small):
    """The scripted moves played by the built-in LLM agent against the scripted OpenAI server."""
    with ScriptedLLMServer([{**m, "tool_calls": [tuple(c) for c in m.get("tool_calls", [])],
                             "usage": tuple(m["usage"])} for m in MOVES]) as server:
        return _sweep(small, "via_litellm", {"kind": "llm", "model": "openai/scripted-model",
                                             "api_base": server.url + "/v1", "requires_key": False, "prices": PRICES})


@pytest.mark.parametrize("solver", [None, "react"], ids=["our_loop", "react"])
def test_an_inspect_model_or_agent_plays_as_the_llm_agent_does(small, via_litellm, tmp_path, solver):
    """Through an inspect model in our loop, and through inspect's react agent (its own conversation,
    our tools as inspect tools): the same calls, answers, turns, charges and outcome as the built-in
    loop; the schema violation and the unknown tool, answered by inspect itself under react, are
    recorded and charged as refused calls all the same."""
    spec = {"kind": "inspect", "model": "heuresis-script/moves", "prices": PRICES,
            "model_args": {"script": _script(tmp_path, MOVES)}}
    insp = _sweep(small, f"via_inspect_{solver}", spec if solver is None else {**spec, "solver": solver})
    (ep_l, calls_l, req_l), (ep_i, calls_i, req_i) = via_litellm, insp
    assert ep_i["status"] == "ok" and ep_i["termination"] == "submitted", ep_i["error"]
    assert ep_i["agent_kind"] == "inspect" and ep_i["model"] == "heuresis-script/moves"
    same = ("status", "termination", "turns", "edges", "f1", "n_calls", "n_errors", "tokens_in", "tokens_out",
            "test_units_used", "algorithm_calls_used")
    assert {k: ep_i[k] for k in same} == {k: ep_l[k] for k in same}
    assert ep_i["cost"] == pytest.approx(ep_l["cost"], rel=1e-12) and ep_i["cost"] > 0
    # every call the same, answered the same (the budgets line's clock aside); the refused ones charged
    def view(calls):
        return [(c["turn"], c["tool"], c["ok"], c["error"], normalize_clock(c["result"] or "")) for c in calls]
    assert view(calls_i) == view(calls_l)
    assert [c["tool"] for c in calls_i if not c["ok"]] == ["ci_test", "no_such_tool"]
    usage = [(r["tokens_in"], r["tokens_out"], r["cost"], r["price_source"]) for r in req_i]
    assert usage == [(r["tokens_in"], r["tokens_out"], r["cost"], r["price_source"]) for r in req_l]
    assert [u[:2] for u in usage] == [tuple(m["usage"]) for m in MOVES]


def test_the_task_keeps_the_truth_out_writes_our_tables_and_a_rerun_pays_nothing_twice(small, tmp_path,
                                                                                      monkeypatch):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log

    monkeypatch.chdir(ROOT)   # the workflow's folder: the base config is read there
    failing = [*MOVES[:3], {"error": "the provider fell over"}]
    args = {"results": str(small["root"]), "config": "config/quick.yaml", "families": "lg", "split": "test",
            "instances": "0,1", "agent": "insp"}
    model = "heuresis-script/moves"

    def run(moves, log_dir):
        script = _script(tmp_path, moves, f"{log_dir}.json")
        log = inspect_eval("heuresis_inspect/episodes", model=model, model_args={"script": script},
                           task_args=args, log_dir=str(tmp_path / log_dir), display="none")[0]
        return read_eval_log(log.location)

    first = run(failing, "first")
    second = run(MOVES, "second")
    truth = pq.read_table(small["truth"] / "graphs.parquet").to_pylist()
    for log in (first, second):
        text = json.dumps([s.model_dump(mode="json", include={"input", "target", "metadata"}) for s in log.samples])
        for t in truth:   # no field of the truth in any sample, its target or its metadata
            for key in ("dag", "cpdag", "causal_order", "seed_entropy", "seed_spawn_key"):
                assert str(t[key]) not in text
        for s in log.samples:
            assert s.target in ("", []) and set(s.metadata) == {"condition", "instance"}
        # nor in what the log records before the scorer ran (the transcript: requests, replies, tool results)
        played = json.dumps([s.model_dump(mode="json", exclude={"scores"}) for s in log.samples])
        for t in truth:
            for key in ("dag", "cpdag", "causal_order", "seed_entropy", "seed_spawn_key"):
                assert str(t[key]) not in played and json.dumps(t[key]) not in played, key
    where = small["root"] / "episodes" / "insp" / COND / "lg" / "test"
    for i, sample in enumerate(second.samples):
        row = read_table(where / f"served-{i:04d}.parquet", EPISODES).to_pylist()[0]
        score = sample.scores["heuresis_score"]
        assert row["status"] == "ok" and score.value["f1"] == pytest.approx(row["f1"])
        assert score.value["pc_kci_f1"] == pytest.approx(row["pc_kci_f1"])
        req = read_table(where / f"served-{i:04d}.requests.parquet", REQUESTS).to_pylist()
        # the three requests answered before the failure were replayed, not sent again
        assert [r["replayed"] for r in req] == [True] * 3 + [False] * (len(MOVES) - 3)
        sent = [e for e in sample.events if type(e).__name__ == "ModelEvent"]
        assert len(sent) == len(MOVES) - 3
    fails = [read_table(where / f"served-{i:04d}.parquet", EPISODES).to_pylist()[0] for i in range(2)]
    assert all(f["status"] == "ok" for f in fails)
    assert [s.scores["heuresis_score"].metadata["status"] for s in first.samples] == ["failed", "failed"]


def test_react_in_the_task_reads_our_answers_and_its_requests_are_logged_once(small, tmp_path, monkeypatch):
    """``-T solver=react``: inspect's react agent plays with our tools; every answer it reads is the
    one in our calls table (a refused call as inspect's tool error), the two calls inspect answers
    itself are in our table as refused, and each request is one ModelEvent of the sample."""
    from inspect_ai import eval as inspect_eval

    monkeypatch.chdir(ROOT)
    log = inspect_eval("heuresis_inspect/episodes", model="heuresis-script/moves", display="none",
                       model_args={"script": _script(tmp_path, MOVES)}, log_dir=str(tmp_path / "logs"),
                       task_args={"results": str(small["root"]), "config": "config/quick.yaml", "families": "lg",
                                  "split": "test", "instances": "0", "agent": "react", "solver": "react"})[0]
    assert log.status == "success", log.error
    (sample,) = log.samples
    where = small["root"] / "episodes" / "react" / COND / "lg" / "test"
    row = read_table(where / "served-0000.parquet", EPISODES).to_pylist()[0]
    calls = read_table(where / "served-0000.calls.parquet", CALLS).to_pylist()
    assert row["status"] == "ok" and row["termination"] == "submitted" and row["turns"] == len(MOVES)
    assert sample.scores["heuresis_score"].value["f1"] == pytest.approx(row["f1"])
    tools = [e for e in sample.events if type(e).__name__ == "ToolEvent"]
    assert [e.function for e in tools] == [c["tool"] for c in calls]
    for event, call in zip(tools, calls):
        if call["ok"]:
            assert event.error is None and normalize_clock(str(event.result)).startswith(
                normalize_clock(call["result"]))
        else:
            assert event.error is not None
    assert [c["tool"] for c in calls if not c["ok"]] == ["ci_test", "no_such_tool"]
    requests = [e for e in sample.events if type(e).__name__ == "ModelEvent"]
    # the 7 answered, then the agent's next request, refused once the run had ended (nothing sent)
    assert [e.error is None for e in requests] == [True] * len(MOVES) + [False]
    assert {e.model for e in requests} == {"heuresis-script/moves"}   # logged as the evaluation's model


def test_an_eval_set_killed_mid_episode_resumes_and_pays_no_answered_request_twice(small, tmp_path):
    """``inspect eval-set`` killed (SIGKILL, its whole process group) while the episode waits for its
    fourth reply; the same eval-set rerun retries the sample, whose episode replays the three
    answered requests from the request log and sends only the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from inspect_ai.log import read_eval_log

    logs = tmp_path / "logs"
    targs = {"results": str(small["root"]), "config": "config/quick.yaml", "families": "lg", "split": "test",
             "instances": "0", "agent": "killed"}
    hanging = _script(tmp_path, [*MOVES[:3], {"wait_s": 600, **MOVES[3]}], "hanging.json")
    cmd = [sys.executable, "-m", "inspect_ai", "eval-set", "heuresis_inspect/episodes", "--model", "heuresis-script/moves",
           "-M", f"script={hanging}", "--log-dir", str(logs), "--display", "none",
           *[a for k, v in targs.items() for a in ("-T", f"{k}={v}")]]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    transcripts = small["root"] / "transcripts" / "killed"
    answered: list = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        answered = [json.loads(line) for f in transcripts.rglob("*.requests.jsonl")
                    for line in f.read_text().splitlines() if line.strip()]
        if len(answered) >= 3:
            break
        time.sleep(0.2)
    running = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    out = proc.communicate()[0].decode(errors="replace")
    assert running and [e["status"] for e in answered] == ["ok"] * 3, (answered, out[-3000:])
    _script(tmp_path, MOVES, "hanging.json")   # the same command (the eval-set's identity), the provider answering now
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    (log,) = [read_eval_log(f) for f in logs.glob("*.eval") if read_eval_log(f, header_only=True).status == "success"]
    (sample,) = log.samples
    where = small["root"] / "episodes" / "killed" / COND / "lg" / "test"
    row = read_table(where / "served-0000.parquet", EPISODES).to_pylist()[0]
    req = read_table(where / "served-0000.requests.parquet", REQUESTS).to_pylist()
    assert row["status"] == "ok" and row["termination"] == "submitted"
    assert [r["replayed"] for r in req] == [True] * 3 + [False] * (len(MOVES) - 3)
    assert len([e for e in sample.events if type(e).__name__ == "ModelEvent"]) == len(MOVES) - 3


@pytest.mark.parametrize("solver", [None, "react"], ids=["our_loop", "react"])
def test_the_games_task_plays_a_scenario_and_scores_from_the_plays_table(tmp_path, monkeypatch, solver):
    import yaml
    from conftest import NAMED_GAMES, SCENARIOS
    from inspect_ai import eval as inspect_eval

    from heuresis.artifacts import paths as P
    from heuresis.artifacts.schemas import GAME_CALLS, GAME_PLAYS
    from heuresis.stages.games.workflow import run_references

    monkeypatch.chdir(ROOT)
    results = tmp_path / "results"
    run_references("weather_noise", SCENARIOS, {"verify_fleets": 2},
                   P.located(P.GAME_REFERENCES, results, scenario="weather_noise"))
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({"games": {**NAMED_GAMES, "scenarios_dir": str(SCENARIOS)}}))
    moves = [{"tool_calls": [[name, args]], "usage": [500, 20]} for name, args in
             [("deploy", {"design": {"engine": 1}, "count": 5}), ("fly", {}),
              ("write_report", {"text": "engines matter"}), ("submit_final_design", {"design": {"engine": 2}})]]
    log = inspect_eval("heuresis_inspect/games", model="heuresis-script/player", display="none", log_dir=str(tmp_path / "logs"),
                       model_args={"script": _script(tmp_path, moves)},
                       task_args={"results": str(results), "config": ["config/quick.yaml", str(named)],
                                  "scenarios": "weather_noise", "agent": "insp",
                                  **({"solver": solver} if solver else {})})[0]
    assert log.status == "success", log.error
    (sample,) = log.samples
    assert sample.metadata == {"scenario": "weather_noise"} and sample.target in ("", [])
    out = P.located(P.SERVED_PLAY, results, agent="insp", scenario="weather_noise")
    row = read_table(out, GAME_PLAYS).to_pylist()[0]
    calls = read_table(out.with_suffix(".calls.parquet"), GAME_CALLS).to_pylist()
    assert row["status"] == "ok" and row["agent_kind"] == "inspect" and row["tokens_in"] == 2000
    assert [c["tool"] for c in calls] == ["deploy", "fly", "write_report", "submit_final_design"]
    score = sample.scores["heuresis_play_score"].value
    assert score == {"survival": pytest.approx(row["survival"]), "won": float(row["won"]), "gap": pytest.approx(row["gap"])}


def test_kind_inspect_in_the_workflow_lands_in_the_tables_and_the_leaderboard(tiny_run, tmp_path):
    """An inspect model as an agent of the workflow (a config edit): its episode jobs run through the
    harness, and the analysis tables and the leaderboard rank it beside the offline agents."""
    import shutil

    from tinyflow import CONFIG, run_snakemake

    wd = tmp_path / "wf"
    shutil.copytree(tiny_run, wd, symlinks=True)        # instances, references and the offline agents built
    moves = [{"tool_calls": [["view_graph", {}]], "usage": [400, 10]},
             {"tool_calls": [["submit", {"edges": ["X1 -> X2"]}]], "usage": [500, 20]}]
    script = _script(tmp_path, moves)
    (wd / "config" / "insp.yaml").write_text(
        "agents:\n"
        f"  insp: {{kind: inspect, model: heuresis-script/moves, model_args: {{script: '{script}'}},\n"
        "         prices: {input_per_mtok: 1.0, output_per_mtok: 2.0}}\n"
        "episodes:\n"
        "  grids:\n"
        "    insp: {agents: [insp], guided: [true], families: [lg]}\n"
        "  run: [tiny, tiny_toolbox, tiny_prompts, tiny_budgets, insp]\n")
    run_snakemake(wd, "results/tables/leaderboard.parquet", "results/tables/table6.parquet", "--cores", "2",
                  *CONFIG, "config/insp.yaml")
    ep = pq.read_table(wd / "results/episodes/insp/full-guided-p0-none-standard-once-r0/lg/test/shard-000.parquet")
    ep = ep.to_pylist()
    assert [e["agent_kind"] for e in ep] == ["inspect"] * len(ep) and all(e["status"] == "ok" for e in ep)
    assert all(e["edges"] == "X1 -> X2" and e["tokens_in"] == 900 for e in ep)
    assert all(e["cost"] == pytest.approx((900 * 1.0 + 30 * 2.0) / 1e6) for e in ep)
    board = pq.read_table(wd / "results/tables/leaderboard.parquet").to_pylist()
    assert "insp" in {r["agent"] for r in board} and "shortcut" in {r["agent"] for r in board}
    assert "insp" in {r.get("agent") or r.get("Agent") for r in pq.read_table(wd / "results/tables/table6.parquet").to_pylist()}


def test_kcis_forked_workers_inside_an_inspect_evaluation_give_the_sequential_pvalues(monkeypatch, tmp_path):
    """KCI's prefetch forks its workers from a process that runs inspect's event loop and threads (a
    sample's solver in a worker thread, as the episodes task runs its episodes): the children finish,
    and PC's tests, p-values and graph are those of one process asking one query at a time."""
    import os

    import anyio
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import solver
    from test_ci_kci import _pair, _pc_run

    data = _pair("nonlinear", 300, 0)[0]
    res1, _, tests1 = _pc_run(data, 1)
    forks: list = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    inside: dict = {}

    @solver
    def pc_in_a_worker_thread():
        async def solve(state, generate):
            inside["run"] = await anyio.to_thread.run_sync(_pc_run, data, 2)
            return state
        return solve

    (log,) = inspect_eval(Task(dataset=[Sample(input="kci")], solver=pc_in_a_worker_thread()), model="mockllm/model",
                          display="none", log_dir=str(tmp_path))
    assert log.status == "success", log.error
    res2, _, tests2 = inside["run"]
    assert forks and tests2 == tests1 and res2.graph == res1.graph
