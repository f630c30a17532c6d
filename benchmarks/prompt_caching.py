"""The bill of the paper config's three LLM agents with and without prompt caching.

Each agent of ``config/config.yaml`` (``gpt``, ``claude``, ``qwen``: its model, its prices or
litellm's) plays scripted episodes of the paper's lengths — the turns of each budget setting
(tight 10, standard 30, generous 60) — through :class:`heuresis.agents.llm.LLMAgent` against the
scripted server of ``tests/llm_server.py`` on 127.0.0.1, whose prompt cache bills as the
provider does (``PromptCache``: breakpoints marked by the request for Anthropic and DashScope,
the longest cached prefix of whole messages for OpenAI). An episode's conversation is the
harness's own tools, a system prompt and task of ``--prompt-tokens``, then per turn a tool call
and a result of ``--result-tokens``. Printed per agent and setting: the provider's bill with
caching on and off (for OpenAI, whose cache is automatic, "off" is a provider without a cache),
their ratio, and whether the cost the harness recorded equals the bill.

    PYTHONPATH=src python benchmarks/prompt_caching.py
    PYTHONPATH=src python benchmarks/prompt_caching.py --prompt-tokens 6000 --result-tokens 600
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from llm_server import Conversations, PromptCache, ScriptedLLMServer  # noqa: E402

from heuresis.agents.llm import LLMAgent, token_prices  # noqa: E402
from heuresis.harness.tools import toolbox  # noqa: E402
from heuresis.preflight import load_config  # noqa: E402

AGENTS = ("gpt", "claude", "qwen")
TURNS = {"tight": 10, "standard": 30, "generous": 60}


def _filler(tokens: int, tag: str) -> str:
    """About ``tokens`` tokens of text (4 characters each), distinct per ``tag``."""
    words = (f"{tag}-{i:05d}" for i in range(tokens))
    return " ".join(words)[: 4 * tokens]


def episode_bill(spec: dict, turns: int, caching: bool, prompt_tokens: int, result_tokens: int) -> dict:
    """One scripted episode of ``turns`` requests: the provider's bill and the harness's record."""
    model = spec["model"]
    per_token = token_prices(model, spec.get("prices"), prompt_tokens)
    assert per_token is not None, f"no price for {model}"
    prices = {k.removesuffix("_per_token"): v * 1e6 for k, v in per_token.items()}
    anthropic, automatic = model.startswith("anthropic/"), model.startswith("openai/")
    # an automatic cache cannot be switched off by the request: "off" is then a provider without one
    cache = PromptCache({"input_per_mtok": prices["input"], "output_per_mtok": prices["output"],
                         "cached_input_per_mtok": prices["cached"]}, marked=not automatic,
                        write=prices["cache_write"] / prices["input"],
                        min_tokens=1024 if caching or not automatic else 10**12)
    script = [{"tool_calls": [("view_graph", {})], "usage": (0, 60)}] * turns
    with ScriptedLLMServer(Conversations(lambda _p: script), cache=cache) as server:
        agent = LLMAgent("bench", model=model, api_base=server.url if anthropic else f"{server.url}/v1",
                         requires_key=False, prices=spec.get("prices"), prompt_caching=caching,
                         thinking=None, timeout_s=30)
        tools = [t.spec(None) for t in toolbox("full")]
        messages = [{"role": "system", "content": _filler(prompt_tokens // 2, "system")},
                    {"role": "user", "content": _filler(prompt_tokens - prompt_tokens // 2, "task")}]
        recorded = 0.0
        for turn in range(turns):
            reply = agent.respond(messages, tools)
            recorded += reply.usage.cost or 0.0
            messages.append(reply.message)
            for call in reply.message.get("tool_calls") or []:
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": _filler(result_tokens, f"result{turn}")})
        return {"bill": server.bill, "recorded": recorded}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt-tokens", type=int, default=3000, help="system prompt and task, tokens")
    ap.add_argument("--result-tokens", type=int, default=300, help="each tool result, tokens")
    args = ap.parse_args()
    cfg = load_config(ROOT / "config/config.yaml")
    rows = []
    for name in AGENTS:
        spec = cfg["agents"][name]
        for budget, turns in TURNS.items():
            on, off = (episode_bill(spec, turns, c, args.prompt_tokens, args.result_tokens) for c in (True, False))
            rows.append({"agent": name, "model": spec["model"], "budget": budget, "turns": turns,
                         "bill_caching_usd": round(on["bill"], 4), "bill_off_usd": round(off["bill"], 4),
                         "ratio": round(on["bill"] / off["bill"], 3),
                         "recorded_equals_bill": abs(on["recorded"] - on["bill"]) < 0.005
                         and abs(off["recorded"] - off["bill"]) < 0.005})
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
