"""LLM agents through litellm (docs/design.md §5.5): any provider litellm speaks, honest records.

An LLM agent is one more :class:`~heuresis.harness.protocol.Agent`: the harness's tools go out as
function-calling schemas, the reply comes back as one OpenAI-format assistant message.  What it
adds is the care a benchmark owes its numbers:

* **No network at import, no hidden retries.**  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (litellm's
  bundled price map, never a download); litellm's and the OpenAI SDK's own retries are off
  (``num_retries=0``, ``max_retries=0``) and *our* loop retries rate limits, timeouts, connection
  errors and 5xx with exponential backoff, each retry recorded; a per-call timeout.  A call that
  still fails raises :class:`LLMCallError` carrying what was spent, and the harness records the
  episode as failed with that error.  A request the model's context window cannot hold raises
  :class:`~heuresis.harness.protocol.ContextOverflow` instead: the episode ends there, ``ok``, with
  the termination ``context_overflow``, scored on its working graph.
* **Tool calls the provider left in the text** (``<tool_call>{json}</tool_call>`` from Qwen
  behind vLLM, or a reply that is nothing but ``{"name": .., "arguments": ..}``) are recovered
  when unambiguous; **malformed JSON arguments** are repaired when the repair is unambiguous
  (code fences, trailing commas, double encoding, Python literals).  Otherwise the call is kept
  as sent and the harness answers it with an error message.  Every recovery is a recorded note.
* **Prices**: litellm's bundled map where it knows the model, else ``prices`` from the config
  (USD per million tokens); a model with neither has cost ``None`` and a recorded warning —
  never a silent 0.
* **Prompt caching** (``prompt_caching``, on by default): for providers that cache a prompt's
  prefix only where the request marks it (:data:`CACHE_MARKED_PROVIDERS`: Anthropic, Bedrock,
  DashScope), litellm's ``cache_control_injection_points`` mark the tool definitions, the system
  prompt and the conversation's last message, so each turn reads the previous turns from the cache
  and writes only what is new; providers that cache on their own (:data:`CACHE_AUTOMATIC_PROVIDERS`:
  OpenAI, DeepSeek, xAI, Gemini) get nothing added.  The marks are not content: the conversation
  sent is the same, and a request's identity (:func:`~heuresis.harness.requestlog.request_key`)
  ignores them.  Cache reads and writes are priced as the provider bills them, and each request
  records its caching mode (``explicit``, ``automatic``, ``off``, ``none``).
* **Reasoning inside the cap**: the request's output cap is the turn's output budget, reasoning
  included (litellm sends ``max_completion_tokens`` to OpenAI's reasoning models, and a thinking
  budget must fit under it); a reply cut at that cap with neither text nor a tool call (all of it
  reasoning) is paid for and recorded as ``empty_length``.
* **A fatal provider error stops the run**: besides stopping its job, it leaves a stop record
  (:func:`heuresis.agents.spend.stop_run`) that every later job of the agent reads before its first
  request, so a cluster profile's resubmission or a job queued behind it sends nothing.
* **Credentials** are checked before anything runs: :func:`missing_credentials` names the
  variables a configured model needs and lacks (litellm's ``validate_environment``, or the config's
  ``api_key_env``), :func:`check_credentials` fails naming the missing ones.

Config entry (``agents:`` in the config)::

    gpt:   {kind: llm, model: openai/gpt-5, reasoning_effort: medium}
    local: {kind: llm, model: hosted_vllm/Qwen/Qwen3-32B, api_base: "http://127.0.0.1:8000/v1",
            requires_key: false, prices: {input_per_mtok: 0, output_per_mtok: 0}}

``api_base_env`` names an environment variable holding the server URL instead (``config/local.yaml``:
the port of a server started by ``heuresis run-local`` is not part of any job's parameters);
``tool_choice`` is sent with every request that offers tools (llama.cpp's function-calling chat
format ignores the tools without it); ``force_lone_tool: true`` names the tool when a request
offers only one (the last turn's ``submit``), so a server that constrains output to a named
tool's schema returns a well-formed call; ``plain_history: true`` sends each tool result as a
user message naming the call and every message with text, for a server whose chat template drops
the ``tool`` role and fails on a message without text (llama.cpp's ``chatml-function-calling``).
"""


from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from heuresis.agents.llm.agent import CACHE_AUTOMATIC_PROVIDERS, CACHE_MARKED_PROVIDERS, LLMAgent, RetryPolicy
from heuresis.agents.llm.credentials import (
    check_credentials,
    llm_agents_in_use,
    missing_credentials,
    verify_keys,
)
from heuresis.agents.llm.errors import (
    CredentialsError,
    Decision,
    LLMCallError,
    ProviderFatalError,
    SpendExhausted,
    context_overflow,
    decide,
    fatal_reason,
)
from heuresis.agents.llm.prices import cache_write_tokens, config_token_prices, token_prices
from heuresis.agents.llm.repair import recover_tool_calls, repair_arguments

__all__ = [
    "CACHE_AUTOMATIC_PROVIDERS",
    "CACHE_MARKED_PROVIDERS",
    "CredentialsError",
    "Decision",
    "LLMAgent",
    "LLMCallError",
    "ProviderFatalError",
    "RetryPolicy",
    "SpendExhausted",
    "cache_write_tokens",
    "check_credentials",
    "config_token_prices",
    "context_overflow",
    "decide",
    "fatal_reason",
    "llm_agents_in_use",
    "missing_credentials",
    "recover_tool_calls",
    "repair_arguments",
    "token_prices",
    "verify_keys",
]
