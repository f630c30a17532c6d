"""An episode served over MCP (kind external, ``heuresis serve-episode``) is the built-in loop's episode.

An MCP client written with the official SDK plays the episode over loopback HTTP and over stdio;
its records are compared field by field with those of a scripted agent making the same moves
through the built-in loop (only wall times, ids and the agent's kind and notes may differ).
Misbehaving clients (idle, leaving, flooding) yield recorded, scored episodes with the right
termination, and the external agent's command runs with a stripped environment and, isolated,
cannot read the truth.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
from pathlib import Path

import anyio
import pytest
import yaml
from conftest import NAMED_GAMES, ROOT, SCENARIOS, small_lg_split
from llm_server import CLOCK
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import CALLS, EPISODES, REQUESTS
from heuresis.harness.protocol import Agent, AgentReply, Usage, register_agent
from heuresis.stages.episodes import run_episode_shard

CONDITION = "full-guided-p1-none-mcp-once-r0"
BUDGET = {"test_units_factor": 1.0, "turns": 30, "output_tokens_per_turn": 4000, "algorithm_calls": 10,
          "wall_seconds": 600}
FLOOD = {**BUDGET, "turns": 3}
MOVES = [
    ("data_summary", {}),
    ("ci_test", {"x": "X1", "y": "X2", "test": "fisherz"}),
    ("stability_check", {"x": "X1", "y": "X3", "test": "fisherz", "resamples": 50}),   # over the test budget
    ("ci_test", {"x": 1}),                                                             # malformed
    ("no_such_tool", {"x": "X1"}),                                                     # unknown tool
    ("run_algorithm", {"algorithm": "algorithm_A"}),
    ("set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "->"}]}),
    ("submit", {}),
]


@pytest.fixture(scope="module")
def split(quick_config, tmp_path_factory):
    return small_lg_split(quick_config, tmp_path_factory.mktemp("mcp"), 1)


def _episodes_cfg(split, budget=BUDGET):
    eps = dict(split["cfg"]["episodes"])
    return {**eps, "budgets": {"mcp": dict(budget)}, "code_tool": {**eps["code_tool"], "isolation": "best_effort"}}


def _run(split, agent: str, spec: dict, out: Path, budget=BUDGET, **kw) -> dict:
    """One episode through run_episode_shard (the workflow's job); its rows, calls and requests."""
    cfg = split["cfg"]
    path = out / "shard-000.parquet"
    run_episode_shard(agent, spec, CONDITION, "lg", "test", [0], data_dir=split["data"], truth_dir=split["truth"],
                      pc_kci_paths=[split["ref"]], episodes_cfg=_episodes_cfg(split, budget),
                      menu=cfg["references"]["algorithms"], grades=cfg["grades"], seed=cfg["seed"], out=path,
                      calls_out=out / "shard-000.calls.parquet", requests_out=out / "shard-000.requests.parquet",
                      transcripts_dir=out / "transcripts", **kw)
    return _tables(path)


def _tables(path: Path) -> dict:
    return {"row": read_table(path, EPISODES).to_pylist()[0],
            "calls": read_table(path.with_suffix(".calls.parquet"), CALLS).to_pylist(),
            "requests": read_table(path.with_suffix(".requests.parquet"), REQUESTS).to_pylist()}


@register_agent("mcp_scripted_test")
class Scripted(Agent):
    """The moves of a client, made through the built-in loop (usage as the external agent records it)."""

    def __init__(self, name, moves):
        super().__init__(name)
        self.moves = list(moves)

    def respond(self, messages, tools):
        name, args = self.moves.pop(0)
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"s{len(self.moves)}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
        return AgentReply(msg, Usage(tokens_in=None, tokens_out=None, cost=None, price_source="external"))


@pytest.fixture(scope="module")
def scripted(split, tmp_path_factory):
    return _run(split, "client", {"kind": "mcp_scripted_test", "moves": MOVES}, tmp_path_factory.mktemp("scripted"))


VOLATILE = {"wall_s", "working_s", "charged_s", "started", "ended", "call_id", "latency_s", "notes", "agent_kind",
            "transcript", "index"}


def _same(a: dict, b: dict) -> None:
    """Field by field, except wall times, ids and the agent's kind; the budgets line's wall time masked."""
    def norm(v):
        return re.sub(*CLOCK, v) if isinstance(v, str) else v

    keys = sorted((set(a) | set(b)) - VOLATILE)
    assert {k: norm(a.get(k)) for k in keys} == {k: norm(b.get(k)) for k in keys}


def _assert_same_episode(got: dict, want: dict) -> None:
    assert len(got["calls"]) == len(want["calls"])
    for c, w in zip(got["calls"], want["calls"]):
        _same(c, w)
    for q, w in zip(got["requests"], want["requests"]):
        _same(q, w)
    assert len(got["requests"]) == len(want["requests"])
    _same(got["row"], want["row"])


def _free_port() -> int:
    """A free port for a test that asks for one by number, below the kernel's ephemeral range (32768 and up), so
    that no outgoing connection of another test takes it before the server binds it; most tests pass 0."""
    import random

    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 20000-32000")


def _patient_stdio_client(monkeypatch) -> None:
    """The SDK's stdio client kills its server 2 s after closing its stdin: on a loaded machine, before the
    server has written its tables. The tests give it a minute (the server exits by itself when done)."""
    import mcp.client.stdio

    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 60.0)


def _wait_for_file(path: Path, timeout: float = 120.0) -> None:
    """Wait until ``path`` exists (a server writes it after its client left), failing with its name."""
    import time

    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} not written within {timeout:g} s"
        time.sleep(0.05)


def _served_url(capfd, timeout: float = 60.0) -> str:
    """The URL a hand-served episode prints on stderr (its path is unguessable)."""
    import time

    seen, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen += capfd.readouterr().err
        m = re.search(r"serving the episode over MCP at (http://\S+)", seen)
        if m:
            return m.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no URL printed: {seen[-2000:]}")


async def _connect(target, tries: int = 200, mode: str = "auto"):
    """A connected client (the server starts once the episode is set up: retry until it answers)."""
    for _ in range(tries):
        client = Client(target, cache=None, mode=mode)
        try:
            await client.__aenter__()
            return client
        except Exception:
            await anyio.sleep(0.05)
    raise AssertionError(f"no MCP server at {target}")


async def _moves(client, moves) -> list:
    return [await client.call_tool(name, args) for name, args in moves]


def _check_client_view(results, tools, instructions: str) -> None:
    """What the client saw: the condition's tools, the task, and the loop's answers as tool results."""
    assert {"ci_test", "stability_check", "submit", "run_algorithm"} <= {t.name for t in tools}
    spec = next(t for t in tools if t.name == "run_algorithm").input_schema
    assert spec["properties"]["algorithm"]["enum"][0] == "algorithm_A"   # masked names, the harness's schema
    assert "X1" in instructions and "budgets left" in instructions
    flags = [r.is_error for r in results]
    assert flags == [False, False, True, True, True, False, False, False]
    texts = [r.content[0].text for r in results]
    assert "budget" in texts[2] and "unknown tool" in texts[4] and "invalid arguments" in texts[3]
    assert all("[budgets left:" in t for t in texts)


def test_http_client_plays_the_scripted_episode(split, scripted, tmp_path, capfd):
    """Over loopback HTTP: tool calls, a budget refusal, a malformed call, an unknown tool, submit."""
    port = _free_port()
    spec = {"kind": "external", "port": port, "exit_grace_s": 30, "idle_timeout_s": 60}   # the client's exit ends the grace
    box: dict = {}

    def job():
        box["tables"] = _run(split, "client", spec, tmp_path)

    t = threading.Thread(target=job)
    t.start()
    url = _served_url(capfd)
    assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/[\w-]{{20,}}/mcp", url)   # the port asked for, a secret path

    async def play():
        client = await _connect(url)
        try:
            tools = (await client.list_tools()).tools
            prompt = await client.get_prompt("task")
            results = await _moves(client, MOVES)
            after = await client.call_tool("view_graph", {})
            return tools, client.instructions, prompt, results, after
        finally:
            await client.__aexit__(None, None, None)

    tools, instructions, prompt, results, after = anyio.run(play)
    t.join(60)
    assert not t.is_alive()
    _check_client_view(results, tools, instructions)
    assert prompt.messages[0].content.text == instructions
    assert after.is_error and after.content[0].text == "episode ended: submitted"
    got = box["tables"]
    assert got["row"]["agent_kind"] == "external" and got["row"]["termination"] == "submitted"
    assert got["row"]["cost"] is None and got["row"]["n_errors"] == 3
    _assert_same_episode(got, scripted)


def test_stdio_client_plays_the_scripted_episode(split, scripted, tmp_path, monkeypatch):
    """Over stdio through ``heuresis serve-episode``: the same records, written to the episodes tables."""
    _patient_stdio_client(monkeypatch)
    overlay = tmp_path / "mcp.yaml"
    overlay.write_text(f"instances: {{d: 5, n: 200}}\nepisodes:\n  budgets: {{mcp: {json.dumps(BUDGET)}}}\n"
                       "  code_tool: {isolation: best_effort}\n")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "heuresis.cli", "serve-episode", *(a for c in ("config.yaml", "quick.yaml") for a in
                                                        ("--config", str(ROOT / "config" / c))), "--no-base",
              "--config", str(overlay), "--agent", "client", "--condition", CONDITION, "--instance", "lg/test/0000",
              "--transport", "stdio", "--results", str(split["root"]), "--idle-timeout", "60"],
        env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LITELLM_LOCAL_MODEL_COST_MAP")},
        cwd=str(tmp_path))

    async def play():
        async with Client(params, cache=None) as client:
            tools = (await client.list_tools()).tools
            results = await _moves(client, MOVES)
            return tools, client.instructions, results

    tools, instructions, results = anyio.run(play)
    _check_client_view(results, tools, instructions)
    out = split["root"] / "episodes" / "client" / CONDITION / "lg" / "test" / "served-0000.parquet"
    _wait_for_file(out)    # the server writes its tables once the client has left
    got = _tables(out)
    _assert_same_episode(got, scripted)
    assert got["row"]["transcript"].endswith("0000.json") and Path(got["row"]["transcript"]).exists()


# --- misbehaving clients ---------------------------------------------------------------------------
def _serve_in_thread(split, spec: dict, out: Path, budget=BUDGET) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def job():
        box["tables"] = _run(split, "client", spec, out, budget=budget)

    t = threading.Thread(target=job)
    t.start()
    return t, box


def _client_session(url: str, body):
    async def run():
        client = await _connect(url)
        try:
            return await body(client)
        finally:
            await client.__aexit__(None, None, None)

    return anyio.run(run)


def test_idle_client_ends_the_episode_scored(split, tmp_path, capfd):
    """A client that stops calling: the episode ends as client_idle, recorded ok and scored on the working graph."""
    idle = 6.0
    t, box = _serve_in_thread(split, {"kind": "external", "port": 0, "idle_timeout_s": idle, "exit_grace_s": 30},
                              tmp_path)

    async def body(client):
        first = await client.call_tool("set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "none"}]})
        await anyio.sleep(idle + 4)      # the stimulus: idle past the limit (counted from the answer's delivery)
        return first, await client.call_tool("view_graph", {})

    first, late = _client_session(_served_url(capfd), body)
    t.join(60)
    row = box["tables"]["row"]
    assert not first.is_error and late.is_error and late.content[0].text == "episode ended: client_idle"
    assert (row["status"], row["termination"], row["finished"], row["turns"]) == ("ok", "client_idle", False, 2)
    assert "X1 -- X2" not in row["edges"] and row["n_calls"] == 1 and 0 <= row["f1"] <= 1
    assert box["tables"]["requests"][-1]["price_source"] == "external"


def test_flooding_client_burns_its_turns_then_the_last_turn(split, tmp_path, capfd):
    """Calls past the turn budget: the last turn offers submit only, refuses the rest, then every call is refused."""
    t, box = _serve_in_thread(split, {"kind": "external", "port": 0, "idle_timeout_s": 60, "exit_grace_s": 30},
                              tmp_path, budget=FLOOD)

    async def body(client):
        first = [await client.call_tool("view_graph", {}) for _ in range(FLOOD["turns"])]
        last_tools = [tool.name for tool in (await client.list_tools()).tools]
        flood: list = []

        async def one():
            flood.append(await client.call_tool("ci_test", {"x": "X1", "y": "X2", "test": "fisherz"}))

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(one)
        return first, last_tools, flood

    first, last_tools, flood = _client_session(_served_url(capfd), body)
    t.join(60)
    assert "last turn" in first[-1].content[0].text.lower() and "last turn" not in first[0].content[0].text.lower()
    assert last_tools == ["submit"]
    texts = sorted(r.content[0].text for r in flood)
    assert all(r.is_error for r in flood)
    # one call at a time: the first is the last turn's (refused: not submit); those made meanwhile were not made
    assert sum(x.startswith("ERROR: only submit is allowed in the last turn") for x in texts) == 1
    assert sum(x.startswith("another call is pending") or x == "episode ended: unsubmitted" for x in texts) == 9
    row, calls = box["tables"]["row"], box["tables"]["calls"]
    assert (row["status"], row["termination"], row["exhausted"], row["turns"]) == ("ok", "unsubmitted", "turns", 4)
    assert len(calls) == 4 and calls[-1]["last_turn"] and calls[-1]["tool"] == "ci_test" and not calls[-1]["ok"]
    assert row["test_units_used"] == 0


_INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stranger", "version": "0"}}}).encode()


async def _http_post(port: int, path: str, body: bytes, host: str = "127.0.0.1") -> bytes:
    """A raw HTTP POST (what a stranger on loopback sends); the response's bytes."""
    stream = await anyio.connect_tcp(host, port)
    async with stream:
        await stream.send(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                          b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        out = b""
        with anyio.move_on_after(10):
            try:
                while True:
                    out += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        return out


def _rpc(proc, msg: dict) -> dict | None:
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()
    if "id" not in msg:
        return None
    while True:
        line = json.loads(proc.stdout.readline())
        if line.get("id") == msg["id"]:
            return line


def test_raw_client_sends_what_the_sdk_would_refuse_then_leaves(split, tmp_path):
    """Over stdio, by hand: arguments that are no object and a name that is no string reach the loop as errored,
    charged calls; closing stdin mid-episode ends it as client_left, recorded and scored."""
    import subprocess

    overlay = tmp_path / "mcp.yaml"
    overlay.write_text(f"instances: {{d: 5, n: 200}}\nepisodes:\n  budgets: {{mcp: {json.dumps(BUDGET)}}}\n"
                       "  code_tool: {isolation: best_effort}\n")
    cmd = [sys.executable, "-m", "heuresis.cli", "serve-episode",
           *(a for c in ("config.yaml", "quick.yaml") for a in ("--config", str(ROOT / "config" / c))), "--no-base",
           "--config", str(overlay), "--agent", "raw", "--condition", CONDITION, "--instance", "lg/test/0000",
           "--results", str(split["root"]), "--idle-timeout", "60"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        init = _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert "X1" in init["result"]["instructions"]
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert "submit" in {t["name"] for t in listed["result"]["tools"]}
        a = _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "ci_test", "arguments": [1, 2]}})
        b = _rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                        "params": {"name": {"x": 1}, "arguments": {}}})
        c = _rpc(proc, {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                        "params": {"name": "ci_test", "arguments": {"x": "X1", "y": "X2", "test": "fisherz"}}})
        proc.stdin.close()          # the client leaves mid-episode
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
    assert a["result"]["isError"] and "arguments must be a JSON object, got list" in a["result"]["content"][0]["text"]
    assert b["result"]["isError"] and "unknown tool" in b["result"]["content"][0]["text"]
    assert not c["result"]["isError"]
    out = split["root"] / "episodes" / "raw" / CONDITION / "lg" / "test" / "served-0000.parquet"
    got = _tables(out)
    row, calls = got["row"], got["calls"]
    assert (row["status"], row["termination"], row["turns"], row["n_calls"], row["n_errors"]) == \
        ("ok", "client_left", 4, 3, 2)
    assert [x["arguments"] for x in calls[:2]] == ["[1, 2]", "{}"] and calls[1]["tool"] == '{"x": 1}'
    assert row["test_units_used"] == 1 and 0 <= row["f1"] <= 1


# --- kind external: a command per episode, through the episode job ---------------------------------
CLIENT = '''
import asyncio, json, os, sys
from mcp import Client


def readable(path):
    try:
        with open(path, "rb") as f:
            f.read(1)
        return True
    except OSError:
        return False


async def main():
    seen = {"leaked": os.environ.get("OPENAI_API_KEY"), "passed": os.environ.get("HEURESIS_TEST_PASSED"),
            "truth": readable(sys.argv[1]), "repo": readable(sys.argv[2]), "cwd": sorted(os.listdir(".")),
            "url": os.environ["HEURESIS_MCP_URL"], "uid": os.getuid()}
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as client:
        await client.call_tool("view_graph", {"seen": seen})     # refused (no such argument), recorded
        await client.call_tool("submit", {})

asyncio.run(main())
'''


def _external(split, tmp_path, isolation: str, monkeypatch, indices=(0,)):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "client.py").write_text(CLIENT)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-harness-key")
    monkeypatch.setenv("HEURESIS_TEST_PASSED", "passed-through")
    truth = split["truth"] / "graphs.parquet"
    spec = {"kind": "external", "command": ["python", str(agent / "client.py"), str(truth), str(ROOT / "pyproject.toml")],
            "env": ["HEURESIS_TEST_PASSED"], "isolation": isolation, "expose": [str(agent)], "idle_timeout_s": 60,
            "model": "my-model"}
    got = _run(split, "ext", spec, tmp_path / "out")
    seen = json.loads(got["calls"][0]["arguments"])["seen"]
    return got, seen


def test_external_command_runs_per_episode_with_a_stripped_environment(split, tmp_path, monkeypatch):
    """The command gets the server's URL and the variables listed, never the harness's others (an API key)."""
    got, seen = _external(split, tmp_path, "none", monkeypatch)
    row = got["row"]
    assert (row["status"], row["termination"], row["agent_kind"], row["model"]) == ("ok", "submitted", "external",
                                                                                   "my-model")
    assert seen["leaked"] is None and seen["passed"] == "passed-through" and seen["cwd"] == []
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[\w-]{20,}/mcp", seen.pop("url"))   # an unguessable path
    assert seen["truth"]   # not isolated: the truth is readable (what the isolated run must prevent)
    assert "without isolation" in row["warnings"]
    assert "isolation none" in got["requests"][0]["notes"]


def test_isolated_external_command_cannot_read_the_truth(split, tmp_path, monkeypatch):
    """Under bubblewrap the command reaches the server but neither the truth nor the harness's folder."""
    from heuresis.harness.sandbox import isolation_status

    if not isolation_status()[0]:
        pytest.skip(f"bubblewrap does not work here: {isolation_status()[1]}")
    got, seen = _external(split, tmp_path, "required", monkeypatch)
    row = got["row"]
    assert (row["status"], row["termination"]) == ("ok", "submitted")
    seen.pop("url")
    assert seen.pop("uid") != 0      # never root, even when the harness is
    assert seen == {"leaked": None, "passed": "passed-through", "truth": False, "repo": False, "cwd": []}
    assert row["warnings"] == "" and "isolation bwrap" in got["requests"][0]["notes"]


def test_external_command_that_exits_early_is_client_left(split, tmp_path):
    """A command that exits without submitting: the episode ends as client_left, recorded and scored."""
    spec = {"kind": "external", "command": ["python", "-c", "print('bye')"], "isolation": "none",
            "idle_timeout_s": 60}
    got = _run(split, "quitter", spec, tmp_path)
    row = got["row"]
    assert (row["status"], row["termination"], row["n_calls"]) == ("ok", "client_left", 0)
    assert "exited (status 0)" in row["error"] and 0 <= row["f1"] <= 1


# --- games --------------------------------------------------------------------------------------
GAME_MOVES = [("get_status", {}), ("deploy", {"design": {"engine": 1}, "count": 0}),
              ("deploy", {"design": {"engine": 1}, "count": 5}), ("fly", {}),
              ("write_report", {"text": "engines matter"}), ("submit_final_design", {"design": {"engine": 2}})]
GAME_CLIENT = '''
import asyncio, json, os, sys
from mcp import Client

async def main():
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as client:
        for name, args in json.loads(sys.argv[1]):
            await client.call_tool(name, args)
        late = await client.call_tool("get_status", {})
        assert late.is_error and late.content[0].text.startswith("episode ended"), late

asyncio.run(main())
'''


# the environment query (a visible variable answers, a hidden one is refused)
CG_GAME_MOVES = [("get_status", {}), ("query_environment", {"variable": "wind_speed"}),
                 ("query_environment", {"variable": "weather"}), ("deploy", {"design": {"antenna": 5}, "count": 5}),
                 ("write_report", {"text": "the antenna's DEF matters"}),
                 ("submit_final_design", {"design": {"antenna": 5}})]


@pytest.mark.parametrize(("moves", "ok"), [(GAME_MOVES, [True, False, True, False, True, True]),
                                           (CG_GAME_MOVES, [True, True, False, True, True, True])])
def test_external_command_plays_a_game_like_the_scripted_agent(tmp_path, moves, ok):
    """The games' agentic mode through the same bridge: the same calls, stages and outcome as the built-in loop."""
    from heuresis.causal.games import load_scenarios
    from heuresis.stages.games.play import run_play

    scn = load_scenarios(SCENARIOS)["weather_noise"]
    (tmp_path / "client.py").write_text(GAME_CLIENT)
    ext = run_play("player", {"kind": "external", "command": ["python", str(tmp_path / "client.py"),
                                                             json.dumps(moves)],
                              "isolation": "none", "idle_timeout_s": 60}, scn, seed=0)
    ref = run_play("player", {"kind": "mcp_scripted_test", "moves": moves}, scn, seed=0)
    assert ext.row["termination"] == "submitted" and ext.row["agent_kind"] == "external"
    assert [c["ok"] for c in ext.calls] == ok
    for c in ext.calls:
        if c["tool"] == "query_environment" and c["ok"]:   # one of the budget spent; a summary of a visible variable
            answer = json.loads(c["result"])
            assert answer["queries_left"] == scn["resources"]["env_query_budget"] - 1 and answer["variable"] == "wind_speed"
    assert len(ext.calls) == len(ref.calls)
    for c, w in zip(ext.calls, ref.calls):
        _same(c, w)
    assert "without isolation" in ext.row.pop("warnings") and ref.row.pop("warnings") == "[]"
    _same(ext.row, ref.row)


def test_the_example_client_runs_an_isolated_episode(split, tmp_path):
    """examples/mcp_client.py (docs/mcp.md) as the command of an external agent, under bubblewrap if it works."""
    import shutil

    from heuresis.harness.sandbox import isolation_status

    (tmp_path / "agent").mkdir()     # outside the working folder: expose refuses a folder inside it
    example = Path(shutil.copy(ROOT / "examples" / "mcp_client.py", tmp_path / "agent"))
    spec = {"kind": "external", "command": ["python", str(example)], "expose": [str(example.parent)],
            "isolation": "best_effort", "idle_timeout_s": 60}
    got = _run(split, "example", spec, tmp_path)
    row = got["row"]
    assert (row["status"], row["termination"], row["finished"]) == ("ok", "submitted", True)
    assert [c["tool"] for c in got["calls"]] == ["run_algorithm", "view_graph", "submit"]
    assert row["algorithm_calls_used"] >= 1
    assert ("isolation bwrap" if isolation_status()[0] else "isolation none") in got["requests"][0]["notes"]


@pytest.mark.parametrize("params, match", [
    ({"host": "0.0.0.0"}, "loopback"), ({"host": "192.168.1.5"}, "loopback"), ({"command": "python x.py"}, "list"),
    ({"transport": "sse"}, "transport"), ({"isolation": "off"}, "isolation"), ({"idle_timeout_s": 0}, "idle_timeout_s"),
    ({"env": "OPENAI_API_KEY"}, "env"), ({"expose": ["relative/dir"]}, "absolute"), ({"port": 70000}, "port"),
    ({"transport": "stdio", "command": ["python", "x.py"]}, "stdio"), ({"colour": "red"}, "colour"),
])
def test_bad_entries_are_refused_naming_the_value(params, match):
    """A bad external entry is a config error at workflow start naming the agent and the offending value."""
    from heuresis.stages.episodes import config_errors

    cfg = {"agents": {"ext": {"kind": "external", **params}}, "references": {"algorithms": {"pc_kci": {}}},
           "episodes": {"grids": {}, "run": []}}
    errors = config_errors(cfg)
    assert len(errors) == 1 and "agents.ext" in errors[0] and match in errors[0]


def test_cli_refuses_a_non_loopback_host(split, capsys):
    from heuresis.cli import main

    rc = main(["serve-episode", "--config", str(ROOT / "config" / "config.yaml"), "--config",
               str(ROOT / "config" / "quick.yaml"), "--condition", CONDITION.replace("-mcp-", "-standard-"),
               "--instance", "lg/test/0000", "--transport", "http", "--host", "0.0.0.0", "--results", str(split["root"])])
    assert rc == 2 and "loopback" in capsys.readouterr().err


def test_required_isolation_fails_closed_without_bubblewrap(monkeypatch, tmp_path):
    """No bubblewrap: 'required' refuses to start the command (and the workflow), 'best_effort' runs it unisolated."""
    from heuresis.agents.external import command_argv
    from heuresis.harness import sandbox

    monkeypatch.setattr(sandbox, "isolation_status", lambda: (False, "bwrap (bubblewrap) not found"))
    with pytest.raises(sandbox.IsolationUnavailable, match="required"):
        command_argv(["python", "x.py"], str(tmp_path), "required")
    argv, env, used = command_argv(["python", "x.py"], str(tmp_path), "best_effort", env_names=["HOME"],
                                   extra_env={"HEURESIS_MCP_URL": "http://127.0.0.1:1/mcp"})
    assert used == "none" and argv == [sys.executable, "x.py"] and env["HOME"] == os.environ["HOME"]
    cfg = {"episodes": {"code_tool": {"isolation": "best_effort"}, "run": ["g"], "grids": {"g": {"agents": ["ext"]}}},
           "agents": {"ext": {"kind": "external", "command": ["python", "x.py"]}}, "games": {"agents": []}}
    with pytest.raises(sandbox.IsolationUnavailable, match="agents.ext.isolation"):
        sandbox.check_isolation(cfg)
    cfg["agents"]["ext"]["isolation"] = "best_effort"
    assert sandbox.check_isolation(cfg) == "none"


def test_external_episodes_shard_and_resume(quick_config, tmp_path):
    """Two episodes in one job, killed after the first: the rerun starts the command for the second only."""
    two = small_lg_split(quick_config, tmp_path / "two", 2)
    log = tmp_path / "launches.txt"
    client = tmp_path / "client.py"
    client.write_text("import asyncio, os, sys\nfrom mcp import Client\n"
                      "open(sys.argv[1], 'a').write('launch\\n')\n"
                      "async def main():\n"
                      "    async with Client(os.environ['HEURESIS_MCP_URL'], cache=None) as c:\n"
                      "        await c.call_tool('submit', {})\n"
                      "asyncio.run(main())\n")
    spec = {"kind": "external", "command": ["python", str(client), str(log)], "isolation": "none", "idle_timeout_s": 60}

    def kill(i):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run_shard(two, spec, tmp_path / "out", [0, 1], after_episode=kill)
    assert log.read_text().count("launch") == 1
    got = _run_shard(two, spec, tmp_path / "out", [0, 1])
    assert log.read_text().count("launch") == 2
    rows = read_table(got, EPISODES).to_pylist()
    assert [r["instance"] for r in rows] == [0, 1] and {r["termination"] for r in rows} == {"submitted"}


def _run_shard(split, spec, out: Path, indices, **kw) -> Path:
    cfg = split["cfg"]
    path = out / "shard-000.parquet"
    run_episode_shard("ext", spec, CONDITION, "lg", "test", indices, data_dir=split["data"], truth_dir=split["truth"],
                      pc_kci_paths=[split["ref"]], episodes_cfg=_episodes_cfg(split), menu=cfg["references"]["algorithms"],
                      grades=cfg["grades"], seed=cfg["seed"], out=path, calls_out=out / "shard-000.calls.parquet",
                      requests_out=out / "shard-000.requests.parquet", transcripts_dir=out / "transcripts", **kw)
    return path


def test_handshake_client_that_leaves_over_http_is_client_left(split, tmp_path, capfd):
    """A client of the handshake protocol ends its HTTP session (DELETE) mid-episode: client_left, not idle."""
    t, box = _serve_in_thread(split, {"kind": "external", "port": 0, "idle_timeout_s": 60, "exit_grace_s": 1},
                              tmp_path)
    url = _served_url(capfd)

    async def run():
        client = await _connect(url, mode="legacy")
        try:
            return await client.call_tool("view_graph", {})
        finally:
            await client.__aexit__(None, None, None)   # ends the session: DELETE

    first = anyio.run(run)
    t.join(30)
    assert not t.is_alive() and not first.is_error
    row = box["tables"]["row"]
    assert (row["status"], row["termination"], row["n_calls"]) == ("ok", "client_left", 1)


def test_cli_serves_over_loopback_http(split, tmp_path):
    """``heuresis serve-episode --transport http``: a client connects by itself, plays, and the episode is written."""
    import subprocess

    port = _free_port()
    overlay = tmp_path / "mcp.yaml"
    overlay.write_text(f"instances: {{d: 5, n: 200}}\nepisodes:\n  budgets: {{mcp: {json.dumps(BUDGET)}}}\n"
                       "  code_tool: {isolation: best_effort}\n")
    cmd = [sys.executable, "-m", "heuresis.cli", "serve-episode",
           *(a for c in ("config.yaml", "quick.yaml") for a in ("--config", str(ROOT / "config" / c))), "--no-base",
           "--config", str(overlay), "--agent", "http_client", "--condition", CONDITION, "--instance", "lg/test/0000",
           "--transport", "http", "--port", str(port), "--results", str(split["root"]), "--idle-timeout", "60"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)

    head = b""
    while b"serving the episode" not in head and proc.poll() is None:
        head += proc.stderr.readline()
    url = re.search(rb"serving the episode over MCP at (\S+)", head).group(1).decode()
    assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/[\w-]{{20,}}/mcp", url)   # the user is told the secret path

    async def play():
        stranger = await _http_post(port, "/mcp", _INIT)     # the fixed path of old: nothing there
        client = await _connect(url, tries=400, mode="legacy")
        try:
            return stranger, await _moves(client, MOVES)
        finally:
            await client.__aexit__(None, None, None)

    try:
        stranger, results = anyio.run(play)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert out == b"" and stranger.startswith(b"HTTP/1.1 404")
    assert [r.is_error for r in results] == [False, False, True, True, True, False, False, False]
    got = _tables(split["root"] / "episodes" / "http_client" / CONDITION / "lg" / "test" / "served-0000.parquet")
    assert (got["row"]["termination"], got["row"]["n_calls"]) == ("submitted", len(MOVES))


def test_a_command_that_cannot_start_fails_the_episode(split, tmp_path):
    """Not the agent's early exit: the episode is recorded failed (not scored, retried by a rerun)."""
    spec = {"kind": "external", "command": ["no-such-agent-binary"], "isolation": "none", "idle_timeout_s": 60}
    row = _run(split, "broken", spec, tmp_path)["row"]
    assert (row["status"], row["termination"]) == ("failed", "failed") and "no-such-agent-binary" in row["error"]


def test_cli_serves_a_game_play_over_stdio(tmp_path, monkeypatch):
    """``heuresis serve-play``: an SDK client plays a scenario's tool mode; the play is written to the plays tables."""
    _patient_stdio_client(monkeypatch)
    from heuresis.artifacts.schemas import GAME_CALLS, GAME_PLAYS
    from heuresis.stages.games.workflow import run_references

    run_references("weather_noise", SCENARIOS, {"verify_fleets": 2},
                   tmp_path / "games" / "references" / "weather_noise.parquet")
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({"games": {**NAMED_GAMES, "scenarios_dir": str(SCENARIOS)}}))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "heuresis.cli", "serve-play", "weather_noise", "--no-base", "--config", str(ROOT / "config" / "config.yaml"),
              "--config", str(ROOT / "config" / "quick.yaml"), "--config", str(named),
              "--agent", "player", "--results", str(tmp_path),
              "--idle-timeout", "60"],
        env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LITELLM_LOCAL_MODEL_COST_MAP")},
        cwd=str(tmp_path))

    async def play():
        async with Client(params, cache=None) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            return tools, [await client.call_tool(n, a) for n, a in GAME_MOVES]

    tools, results = anyio.run(play)
    # no measure tool: only the hidden_measurements ablation offers a look at a hidden variable
    assert tools == {"get_status", "get_history", "deploy", "submit_final_design", "write_report", "run_code",
                     "query_environment"}
    assert [r.is_error for r in results] == [False, True, False, True, False, False]
    out = tmp_path / "games" / "plays" / "player" / "agentic" / "served-weather_noise.parquet"
    _wait_for_file(out)
    row = read_table(out, GAME_PLAYS).to_pylist()[0]
    assert (row["agent_kind"], row["termination"], row["submitted"]) == ("external", "submitted", True)
    assert len(read_table(out.with_suffix(".calls.parquet"), GAME_CALLS)) == len(GAME_MOVES)
