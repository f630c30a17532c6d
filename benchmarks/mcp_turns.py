"""Time per turn of an episode served over MCP (loopback HTTP) against the same turns of the built-in loop.

An MCP client written with the official SDK makes ``--calls`` ``view_graph`` calls and submits;
a scripted agent makes the same calls through the loop directly.  Prints milliseconds per turn.

    PYTHONPATH=src python benchmarks/mcp_turns.py --calls 200 [--mode legacy]
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time

import anyio
import numpy as np
from mcp import Client

from heuresis.causal.grades import DEFAULT_GRADES
from heuresis.causal.graph import Graph, dag_to_cpdag
from heuresis.harness.budgets import BudgetSettings
from heuresis.harness.conditions import Condition
from heuresis.harness.episode import EpisodeInput, EpisodeSettings, run_episode
from heuresis.harness.protocol import Agent, AgentReply, Usage, make_agent, register_agent


@register_agent("bench_scripted")
class Scripted(Agent):
    """``calls`` view_graph calls, then submit."""

    def __init__(self, name, calls):
        super().__init__(name)
        self.left = int(calls)

    def respond(self, messages, tools):
        name = "view_graph" if self.left > 0 else "submit"
        self.left -= 1
        return AgentReply({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{self.left}", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
            Usage(cost=None, price_source="external"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--mode", default="auto", help="the client's protocol negotiation: auto (the SDK's default: "
                                                  "2026-07-28 if the server speaks it) or legacy (initialize handshake)")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    data = rng.normal(size=(200, 5))
    dag = np.triu(np.ones((5, 5), int), 1)
    inp = EpisodeInput("b", "test", 0, "b/test/0000", data, Graph.from_dag(dag), dag_to_cpdag(dag),
                       Graph.complete(5), 10)
    settings = EpisodeSettings(BudgetSettings("b", 1.0, a.calls + 5, 4000, 10, 3600), {"pc_kci": {}},
                               tuple(DEFAULT_GRADES), code_isolation="off")
    cond = Condition("bench", toolbox="minimal", guided=False)

    t0 = time.perf_counter()
    run_episode(make_agent("bench", {"kind": "bench_scripted", "calls": a.calls}), cond, inp, settings, 1)
    loop_s = time.perf_counter() - t0

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    box = {}
    th = threading.Thread(target=lambda: box.update(out=run_episode(
        make_agent("bench", {"kind": "external", "port": port, "exit_grace_s": 0.1}), cond, inp, settings, 1)))
    th.start()

    async def client() -> float:
        for _ in range(400):
            try:
                c = Client(f"http://127.0.0.1:{port}/mcp", cache=None, mode=a.mode)
                await c.__aenter__()
                break
            except Exception:
                await anyio.sleep(0.05)
        t = time.perf_counter()
        for _ in range(a.calls):
            await c.call_tool("view_graph", {})
        await c.call_tool("submit", {})
        dt = time.perf_counter() - t
        await c.__aexit__(None, None, None)
        return dt

    mcp_s = anyio.run(client)
    th.join()
    row = box["out"].row
    assert row["termination"] == "submitted" and row["turns"] == a.calls + 1, row
    n = a.calls + 1
    print(json.dumps({"turns": n, "mode": a.mode, "loop_ms_per_turn": round(1000 * loop_s / n, 2),
                      "mcp_http_ms_per_turn": round(1000 * mcp_s / n, 2)}))


if __name__ == "__main__":
    main()
