"""LLM agents through litellm (docs/design.md §5.5): any provider litellm speaks, honest records.

An LLM agent is one more :class:`~heuresis.agents.base.Agent`: the harness's tools go out as
function-calling schemas, the reply comes back as one OpenAI-format assistant message.  What it
adds is the care a benchmark owes its numbers:

* **No network at import, no hidden retries.**  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (litellm's
  bundled price map, never a download); litellm's and the OpenAI SDK's own retries are off
  (``num_retries=0``, ``max_retries=0``) and *our* loop retries rate limits, timeouts, connection
  errors and 5xx with exponential backoff, each retry recorded; a per-call timeout.  A call that
  still fails raises :class:`LLMCallError` carrying what was spent, and the harness records the
  episode as failed with that error.  A request the model's context window cannot hold raises
  :class:`~heuresis.agents.base.ContextOverflow` instead: the episode ends there, ``ok``, with
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

import ast
import itertools
import json
import os
import random
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from heuresis.agents.base import (
    UNREADABLE_TOOL,
    Agent,
    AgentReply,
    ContextOverflow,
    EpisodeEnd,
    FatalAgentError,
    Usage,
    register_agent,
)
from heuresis.agents.spec import scrub
from heuresis.agents.spend import SPEND_DIR, RateWindow, RunStopped, SpendLedger, clear_stop, read_stop, request_bound, stop_run
from heuresis.config.settings import Retries
from heuresis.harness.requestlog import RequestLog, request_key

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__all__ = [
    "CredentialsError",
    "LLMAgent",
    "LLMCallError",
    "ProviderFatalError",
    "RetryPolicy",
    "SpendExhausted",
    "check_credentials",
    "context_overflow",
    "fatal_reason",
    "llm_agents_in_use",
    "missing_credentials",
    "recover_tool_calls",
    "repair_arguments",
    "scrub",
    "verify_keys",
]


def _litellm():
    """litellm, imported on first use (it takes seconds); the local price map, never a download."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LLMCallError(RuntimeError):
    """A model call that failed for good; ``usage`` records what was tried and spent."""

    def __init__(self, message: str, usage: Usage) -> None:
        super().__init__(message)
        self.usage = usage


class ProviderFatalError(LLMCallError, FatalAgentError):
    """A provider's answer that no later request of the agent can get past; never retried.

    An invalid key, an exhausted quota or credit, an unknown model: the job stops naming it.
    """


class SpendExhausted(EpisodeEnd):
    """The episode's spend limit (``max_episode_usd`` / ``max_episode_tokens``) cannot cover the next request."""

    reason = "spend_limit"

    def __init__(self, message: str, limit: str, usage: Usage | None = None) -> None:
        super().__init__(message, usage)
        self.limit = limit


class CredentialsError(RuntimeError):
    """A configured model's credential variable is not set."""


#: The backoff of a model call: an LLM agent's ``retries`` settings (config ``agents.<name>.retries``).
RetryPolicy = Retries


_WARM: set[str] = set()


def _warm_up(model: str) -> None:
    """Import litellm and load the provider's client code once per process, before any episode's clock.

    The first request through a provider's handler loads its SDK and builds its client (about a
    second); a request to a closed port on 127.0.0.1 does that without sending anything anywhere.
    """
    litellm = _litellm()
    if model in _WARM:
        return
    _WARM.add(model)
    import socket

    with socket.socket() as sock:   # a port nothing listens on: the request is refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        litellm.completion(model=model, messages=[{"role": "user", "content": "warm-up"}], max_tokens=1,
                           api_base=f"http://127.0.0.1:{port}", api_key="warm-up", num_retries=0, max_retries=0,
                           timeout=5)
    except Exception:  # refused, as intended
        pass


def _utc() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _retry_after(exc: Exception) -> float | None:
    """The seconds of a ``Retry-After`` header on a failed call's HTTP response (None: not sent)."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or getattr(exc, "headers", None) or {}
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except AttributeError:
        return None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):   # an HTTP date: not worth parsing, the backoff applies
        return None


_QUOTA_TEXT = re.compile(r"insufficient_quota|exceeded your current quota|credit balance is too low|"
                         r"billing|payment required", re.IGNORECASE)


def fatal_reason(exc: Exception) -> str | None:
    """Why a failed call can never succeed for this agent, or None.

    ``invalid_key``, ``permission_denied``, ``quota_exhausted``, ``unknown_model``; None for a call
    worth retrying or an episode's own error.

    A 429 is a rate limit, retried, unless it says the quota or credit is gone (OpenAI's
    ``insufficient_quota``): then retrying only bills the wait.
    """
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    body = getattr(exc, "body", None)
    codes = {str(body.get(k)) for k in ("code", "type")} if isinstance(body, dict) else set()
    if status == 401 or name == "AuthenticationError":
        return "invalid_key"
    if status == 402 or name == "PaymentRequiredError" or "insufficient_quota" in codes \
            or _QUOTA_TEXT.search(str(exc)):
        return "quota_exhausted"
    if status == 403 or name == "PermissionDeniedError":
        return "permission_denied"
    if status == 404 or name == "NotFoundError":
        return "unknown_model"
    return None


# --- credentials -------------------------------------------------------------------------------------

def missing_credentials(spec: Mapping) -> list[str]:
    """Environment variables the model of one ``llm`` agent entry needs and that are not set.

    ``api_key_env`` names the variable explicitly; ``requires_key: false`` (a local server) needs
    none; otherwise litellm's ``validate_environment`` for the model says which are missing
    (``*_API_BASE`` variables do not count when ``api_base`` is given in the config).
    """
    base = [str(spec["api_base_env"])] if spec.get("api_base_env") and not os.environ.get(str(spec["api_base_env"])) \
        else []
    if spec.get("api_key_env"):
        var = str(spec["api_key_env"])
        return base + ([] if os.environ.get(var) else [var])
    if spec.get("requires_key") is False:
        return base
    need = _litellm().validate_environment(model=str(spec["model"]), api_base=spec.get("api_base"))["missing_keys"]
    if spec.get("api_base") or spec.get("api_base_env"):
        need = [k for k in need if not k.endswith("_API_BASE")]
    return base + list(need)


def llm_agents_in_use(config: Mapping) -> dict[str, dict]:
    """Return the ``llm`` agents the configured run will call, by name with their config entries.

    They are the agents of the active episode grids, of the leakage probe and of the games
    track (``games.agents`` and ``games.judges``).
    """
    used: set[str] = set()
    episodes = config.get("episodes", {})
    for grid in episodes.get("run", []):
        used.update(episodes.get("grids", {}).get(grid, {}).get("agents", []))
    used.update(config.get("leakage", {}).get("agents", []))
    used.update(config.get("games", {}).get("agents", []))
    used.update(config.get("games", {}).get("judges", []))
    agents = config.get("agents", {})
    return {a: dict(agents[a]) for a in sorted(used) if a in agents and agents[a].get("kind") == "llm"}


def check_credentials(config: Mapping, agents: Iterable[str] | None = None) -> None:
    """Fail, naming every missing variable and the agent that needs it, before anything runs.

    ``agents``: check only these agent names (those the jobs about to run need); None: every
    ``llm`` agent the config uses (:func:`llm_agents_in_use`).
    """
    used = llm_agents_in_use(config)
    if agents is not None:
        wanted = set(agents)
        used = {a: spec for a, spec in used.items() if a in wanted}
    missing = [(name, var, spec["model"]) for name, spec in used.items() for var in missing_credentials(spec)]
    if missing:
        lines = [f"agent {a!r} (model {m}) needs the environment variable {v}, which is not set" for a, v, m in missing]
        raise CredentialsError("missing credentials: " + "; ".join(lines)
                               + ". Export it, or remove the agent from the active grids (episodes.run), "
                                 "leakage.agents, games.agents and games.judges.")


# --- recovering what the provider sent --------------------------------------------------------------

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
# llama.cpp's chatml-function-calling format: a call is "functions.NAME:" then its JSON arguments
_PREFIXED = re.compile(r"^\s*(?:message:\s*)?functions\.([A-Za-z_][\w-]*):\s*(.*?)\s*$", re.S)
_FENCE = re.compile(r"^\s*```(?:json|python)?\s*(.*?)\s*```\s*$", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _strip_fence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text.strip()


def repair_arguments(raw: Any) -> tuple[str | None, str]:
    """Arguments as a JSON object string, repaired when unambiguous; ``(None, why)`` if not.

    Returns ``(json_string, note)``; the note is empty when nothing had to be repaired.
    """
    if isinstance(raw, Mapping):
        return json.dumps(dict(raw)), ""
    text = "" if raw is None else str(raw)
    if not text.strip():
        return "{}", ""
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return text, ""
    except json.JSONDecodeError:
        obj = None
    attempts = (
        ("code fence removed", lambda t: json.loads(_strip_fence(t))),
        ("double-encoded JSON decoded", lambda t: json.loads(json.loads(t))),
        ("trailing comma removed", lambda t: json.loads(_TRAILING_COMMA.sub(r"\1", _strip_fence(t)))),
        ("Python literal read as JSON", lambda t: ast.literal_eval(_strip_fence(t))),
    )
    for note, fix in attempts:
        try:
            obj = fix(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            try:
                return json.dumps(obj), f"arguments repaired ({note})"
            except (TypeError, ValueError):
                continue
    return None, "arguments are not a JSON object and no unambiguous repair exists"


def _call_from_object(obj: Any, tool_names: set[str]) -> tuple[str, str, str] | None:
    """(name, arguments JSON, note) from ``{"name": .., "arguments"|"parameters": ..}``, else None."""
    if not isinstance(obj, dict) or obj.get("name") not in tool_names:
        return None
    if set(obj) - {"name", "arguments", "parameters"}:
        return None
    args, note = repair_arguments(obj.get("arguments", obj.get("parameters", {})))
    return (obj["name"], args, note) if args is not None else None


def recover_tool_calls(content: str | None, tool_names: Iterable[str]) -> tuple[list[tuple[str, str]], str, list[str]]:
    """Tool calls written into a reply's text: ``(calls, remaining_text, notes)``.

    ``<tool_call>{json}</tool_call>`` blocks (Hermes/Qwen style) each become a call; a block that
    cannot be read unambiguously becomes an :data:`UNREADABLE_TOOL` call so the harness answers it
    with an error.  A reply that is ``functions.NAME:`` followed by JSON arguments (or nothing) for an
    offered tool — llama.cpp's function-calling format, left in the text when its grammar let the
    model start a "message" — is that call.  Without tags, a reply that is exactly one
    ``{"name", "arguments"}`` object of an offered tool is a call.  Anything else is left as text.
    """
    text = content or ""
    names = set(tool_names)
    blocks = _TAG.findall(text)
    prefixed = _PREFIXED.match(text) if not blocks else None
    if prefixed and prefixed.group(1) in names:
        name, raw = prefixed.group(1), prefixed.group(2)
        args, note = repair_arguments(raw)
        if args is None:
            return ([(UNREADABLE_TOOL, json.dumps({"text": text[:500], "problem": f"arguments of {name}: {note}"}))],
                    "", [f"unreadable 'functions.{name}:' call in the reply text: {note}"])
        what = "with its arguments" if raw.strip() else "without arguments (sent as {})"
        return [(name, args)], "", [f"tool call recovered from the reply text ('functions.{name}:' {what})"] \
            + [note] * bool(note)
    if not blocks:
        try:
            call = _call_from_object(json.loads(_strip_fence(text)), names) if text.strip() else None
        except json.JSONDecodeError:
            call = None
        if call is None:
            return [], text, []
        return [call[:2]], "", ["tool call recovered from the reply text (bare JSON object)"] + [call[2]] * bool(call[2])
    calls, notes = [], []
    for block in blocks:
        try:
            obj = json.loads(_strip_fence(block))
        except json.JSONDecodeError:
            fixed, _ = repair_arguments(block)
            obj = json.loads(fixed) if fixed is not None else None
        call = _call_from_object(obj, names)
        if call is None:
            why = ("not a JSON object with an offered tool's name and its arguments"
                   if obj is not None else "not valid JSON")
            calls.append((UNREADABLE_TOOL, json.dumps({"text": block[:500], "problem": why})))
            notes.append(f"unreadable <tool_call> block in the reply text: {why}")
        else:
            calls.append(call[:2])
            notes.append("tool call recovered from a <tool_call> block in the reply text")
            if call[2]:
                notes.append(call[2])
    return calls, _TAG.sub("", text).strip(), notes


def _outgoing(messages: list[dict], plain_history: bool = False) -> list[dict]:
    """Return the history as sent to the provider, every tool call's arguments a JSON object string.

    A malformed argument string, already answered with an error, goes out as ``{}`` (the record
    keeps it).

    ``plain_history``: each tool result goes out as a user message naming the call, and an
    assistant message without text as ``content: ""`` (litellm drops a ``None`` content), for a
    server whose chat template drops the ``tool`` role and needs every message's text (llama.cpp's
    ``chatml-function-calling``).
    """
    out = []
    names: dict[str, str] = {}
    for m in messages:
        m = dict(m)
        if plain_history and m.get("role") == "tool":
            name = names.get(str(m.get("tool_call_id", "")), "tool")
            out.append({"role": "user", "content": f"Result of your call {name} "
                                                   f"(id {m.get('tool_call_id', '')}):\n{m.get('content') or ''}"})
            continue
        for tc in m.get("tool_calls") or []:
            names[str(tc.get("id", ""))] = str((tc.get("function") or {}).get("name", "tool"))
        if plain_history and m.get("content") is None:
            m["content"] = ""
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                fixed, _ = repair_arguments(fn.get("arguments"))
                fn["arguments"] = fixed if fixed is not None else "{}"
                calls.append({**tc, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out


# --- the agent ---------------------------------------------------------------------------------------

#: What servers say when a prompt exceeds the context, where litellm does not map it (llama.cpp's
#: ``llama-server``: "the request exceeds the available context size"; llama-cpp-python, vLLM:
#: "maximum context length"; others: "context window").
_OVERFLOW_TEXT = re.compile(r"context (size|length|window)|exceed_context_size", re.IGNORECASE)


def context_overflow(exc: Exception, litellm) -> bool:
    """Whether a failed call was refused because the prompt does not fit the model's context."""
    if isinstance(exc, getattr(litellm, "ContextWindowExceededError", ())):
        return True
    return getattr(exc, "status_code", None) == 400 and bool(_OVERFLOW_TEXT.search(str(exc)))


#: Providers that cache a prompt prefix only where the request marks it (``cache_control``).
CACHE_MARKED_PROVIDERS = frozenset({"anthropic", "bedrock", "dashscope"})
#: Providers that cache prompt prefixes without marks (nothing to add; the usage reports the reads).
CACHE_AUTOMATIC_PROVIDERS = frozenset({"openai", "deepseek", "xai", "gemini"})
#: Where the marks go: the tool definitions, the system prompt, the last message (rolling: each turn's
#: prefix is then read from the cache by the next turn).
CACHE_INJECTION_POINTS = ({"location": "tool_config"}, {"location": "message", "role": "system"},
                          {"location": "message", "index": -1})

_RETRYABLE_NAMES = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError",
                    "ServiceUnavailableError", "BadGatewayError")


@register_agent("llm")
class LLMAgent(Agent):
    """A model behind litellm driving the harness's tools (see the module docstring)."""

    def __init__(self, name: str, *, model: str, api_base: str | None = None, api_key_env: str | None = None,
                 requires_key: bool = True, temperature: float | None = None, max_tokens: int | None = None,
                 reasoning_effort: str | None = None, thinking: Mapping | None = None, timeout_s: float = 120.0,
                 retries: Retries | Mapping | None = None, prices: Mapping | None = None, extra: Mapping | None = None,
                 api_base_env: str | None = None, tool_choice: str | None = None, force_lone_tool: bool = False,
                 plain_history: bool = False, max_episode_usd: float | None = None,
                 max_episode_tokens: int | None = None, max_run_usd: float | None = None,
                 verify_key: bool = True, prompt_caching: bool = True, tokens_per_minute: int | None = None) -> None:
        super().__init__(name, model=model, api_base=api_base, api_key_env=api_key_env, requires_key=requires_key,
                         temperature=temperature, max_tokens=max_tokens, reasoning_effort=reasoning_effort,
                         thinking=thinking, timeout_s=timeout_s, retries=retries, prices=prices, extra=extra,
                         api_base_env=api_base_env, tool_choice=tool_choice, force_lone_tool=force_lone_tool,
                         plain_history=plain_history, max_episode_usd=max_episode_usd,
                         max_episode_tokens=max_episode_tokens, max_run_usd=max_run_usd, verify_key=verify_key,
                         prompt_caching=prompt_caching, tokens_per_minute=tokens_per_minute)
        self._model = str(model)
        if api_base_env:
            api_base = os.environ.get(str(api_base_env))
            if not api_base:
                raise CredentialsError(f"agent {name!r}: the environment variable {api_base_env} (the server's URL) "
                                       f"is not set; for the local model run the workflow through "
                                       f"`heuresis run-local -- snakemake ...`, or export it")
        self.api_base = api_base
        self.tool_choice = tool_choice
        self.force_lone_tool = bool(force_lone_tool)
        self.plain_history = bool(plain_history)
        self.api_key_env = api_key_env
        self.requires_key = requires_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.reasoning_effort = reasoning_effort
        self.thinking = dict(thinking) if thinking else None
        self.timeout_s = float(timeout_s)
        self.retry = Retries.coerce(retries, f"agents.{name}.retries")
        self.prices = dict(prices) if prices else None
        self.extra = dict(extra or {})
        self.max_episode_usd = None if max_episode_usd is None else float(max_episode_usd)
        self.max_episode_tokens = None if max_episode_tokens is None else int(max_episode_tokens)
        self.max_run_usd = None if max_run_usd is None else float(max_run_usd)
        self.prompt_caching = bool(prompt_caching)
        self._spend_dir: str | Path = SPEND_DIR
        self._stop_checked = False
        self.stop_records = True   # read and leave the run's stop records (the start check's key test does not)
        self._ids = itertools.count()
        self._provider: str | None = None
        self._sleep = time.sleep   # tests may replace it
        self._rng = random.Random(f"{os.getpid()}/{time.time_ns()}")   # the backoff's jitter: timing only
        self._log: RequestLog | None = None
        # every model-calling job of the workflow runs in its working folder: the run's ledger is there
        self._ledger = SpendLedger(SPEND_DIR, name, self.max_run_usd) if self.max_run_usd is not None else None
        self.tokens_per_minute = None if tokens_per_minute is None else int(tokens_per_minute)
        self._rate: RateWindow | None = None   # made on first use: it needs the provider's name
        self._spent_usd = 0.0
        self._spent_tokens = 0
        _warm_up(self._model)   # before the episode's clock starts: the job's start-up is not the agent's time

    # --- identity ---------------------------------------------------------------------------------
    @property
    def model(self) -> str:
        """The litellm model string of the config entry (e.g. ``openai/gpt-4o``)."""
        return self._model

    @property
    def provider(self) -> str:
        """The provider litellm routes :attr:`model` to (from the model prefix if litellm does not know it)."""
        if self._provider is None:
            try:
                self._provider = _litellm().get_llm_provider(self._model, api_base=self.api_base)[1]
            except Exception:  # an unknown provider prefix: litellm will say so on the first call
                self._provider = self._model.split("/", 1)[0] if "/" in self._model else "unknown"
        return self._provider

    def key_variable(self) -> str | None:
        """The environment variable the agent's key comes from (None: no key)."""
        if self.api_key_env:
            return str(self.api_key_env)
        if self.requires_key is False:
            return None
        return f"{self.provider.upper()}_API_KEY"

    def bind(self, limits: Mapping[str, Any]) -> None:
        """The harness's limits: every request's output cap is the turn's output budget.

        A configured ``max_tokens`` may only lower it (one above it is a config error): the
        provider never generates what the harness would refuse to execute.
        """
        cap = limits.get("output_tokens_per_turn")
        if cap:
            self.max_tokens = int(cap) if self.max_tokens is None else min(int(self.max_tokens), int(cap))

    def use_records(self, request_log: RequestLog | None = None, spend_dir: str | Path | None = None) -> None:
        """The run's request log (replayed on a rerun, appended to) and the folder of the run's spend ledger."""
        self._log = request_log
        if spend_dir is not None:
            self._spend_dir = spend_dir
        if self.max_run_usd is not None and spend_dir is not None:
            self._ledger = SpendLedger(spend_dir, self.name, self.max_run_usd)
        self._rate = None

    def _rate_window(self) -> RateWindow | None:
        """The provider's shared tokens-per-minute window (``tokens_per_minute``), None without a limit."""
        if self.tokens_per_minute is not None and self._rate is None:
            self._rate = RateWindow(self._spend_dir, self.provider, self.tokens_per_minute, sleep=self._sleep)
        return self._rate

    # --- one call ---------------------------------------------------------------------------------
    def _kwargs(self, messages: list[dict], tools: list[dict]) -> dict:
        kw: dict[str, Any] = {"model": self._model, "messages": _outgoing(messages, self.plain_history),
                              "timeout": self.timeout_s,
                              "num_retries": 0, "max_retries": 0}
        if tools:
            kw["tools"] = tools
            if self.force_lone_tool and len(tools) == 1:
                kw["tool_choice"] = {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
            elif self.tool_choice:
                kw["tool_choice"] = self.tool_choice
        if self.api_base:
            kw["api_base"] = self.api_base
        if self.api_key_env:
            kw["api_key"] = os.environ.get(self.api_key_env, "")
        elif self.requires_key is False:
            kw["api_key"] = "not-needed"
        for key in ("temperature", "max_tokens", "reasoning_effort", "thinking"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        kw.update(self.extra)
        if self.caching_mode == "explicit":
            kw["cache_control_injection_points"] = [dict(p) for p in CACHE_INJECTION_POINTS]
        return kw

    @property
    def caching_mode(self) -> str:
        """How the provider caches this agent's prompts: ``explicit`` (marked), ``automatic``, ``off``, ``none``."""
        if not self.prompt_caching:
            return "off"
        if self.provider in CACHE_MARKED_PROVIDERS:
            return "explicit"
        return "automatic" if self.provider in CACHE_AUTOMATIC_PROVIDERS else "none"

    def _secrets(self) -> list[str]:
        var = self.key_variable()
        return [os.environ.get(var, "")] if var else []

    def _token_prices(self, n_prompt: int | None = None) -> dict | None:
        """USD per token of a request of ``n_prompt`` prompt tokens (None: the dearest tier; :func:`token_prices`)."""
        return token_prices(self._model, self.prices, n_prompt)

    def _cost(self, resp, n_in: int | None, n_out: int | None, cached: int,
              written: int = 0) -> tuple[float | None, str, list[str]]:
        """(cost in USD or None, source, warnings) of one response.

        The config's ``prices`` override litellm's map (cached input at ``cached_input_per_mtok``, else the
        input price); else litellm's ``completion_cost`` on the response (cached and reasoning tokens priced
        as the provider prices them).  No usage reported, or no price: None, with a warning.
        """
        if n_in is None or n_out is None:
            return None, "no usage", [f"model {self._model}: the provider reported no token usage for a reply: "
                                      "tokens and cost recorded as unknown"]
        if self.prices is not None:
            p = self._token_prices(n_in)
            cost = ((n_in - cached - written) * p["input_per_token"] + cached * p["cached_per_token"]  # type: ignore[index]
                    + written * p["cache_write_per_token"] + n_out * p["output_per_token"])  # type: ignore[index]
            return float(cost), "config", []
        try:
            return float(_litellm().completion_cost(completion_response=resp, model=self._model)), "litellm", []
        except Exception:  # not in litellm's map
            pass
        return None, "unknown", [f"model {self._model} has no known price (not in litellm's map, no prices in "
                                 f"the config for agent {self.name!r}): cost recorded as unknown"]

    def _bound(self, kwargs: dict) -> tuple[int, float | None]:
        """Worst case (tokens, USD or None when the price is unknown) of sending ``kwargs`` once."""
        try:
            n = int(_litellm().token_counter(model=self._model, messages=kwargs["messages"], tools=kwargs.get("tools")))
        except Exception:  # a model litellm cannot count for: a character bound (no token is shorter than 1 char)
            n = len(json.dumps(kwargs["messages"])) + len(json.dumps(kwargs.get("tools") or []))
        max_out = int(self.max_tokens or (_litellm().model_cost.get(self._model) or {}).get("max_output_tokens") or 0)
        prices = self._token_prices()
        if prices is None:
            tokens, _ = request_bound(n, max_out, {"input_per_token": 0.0, "output_per_token": 0.0})
            return tokens, None
        return request_bound(n, max_out, prices)

    def _check_episode_limits(self, bound: tuple[int, float | None]) -> None:
        tokens, usd = bound
        if self.max_episode_tokens is not None and self._spent_tokens + tokens > self.max_episode_tokens:
            raise SpendExhausted(f"the episode's token limit (max_episode_tokens = {self.max_episode_tokens}) cannot "
                                 f"cover the next request (worst case {tokens}; spent {self._spent_tokens})", "tokens")
        if self.max_episode_usd is not None:
            if usd is None:
                raise FatalAgentError(f"agent {self.name!r}: max_episode_usd is set but model {self._model} has no "
                                      "known price (give prices in the config)")
            if self._spent_usd + usd > self.max_episode_usd:
                raise SpendExhausted(f"the episode's spend limit (max_episode_usd = {self.max_episode_usd}) cannot "
                                     f"cover the next request (worst case {usd:.4f} USD; spent "
                                     f"{self._spent_usd:.4f} USD)", "cost")

    def _reserve(self, bound: tuple[int, float | None]) -> str | None:
        if self._ledger is None:
            return None
        if bound[1] is None:
            raise FatalAgentError(f"agent {self.name!r}: max_run_usd is set but model {self._model} has no known "
                                  "price (give prices in the config)")
        return self._ledger.reserve(bound[1], what=self._model)

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """Call the model once: replayed from the request log, else live with retries.

        A request answered before (the same identity, :func:`~heuresis.harness.requestlog.request_key`)
        is answered from the log; a live one retries transient failures with :class:`RetryPolicy` backoff.

        Tool calls are read from the reply; malformed argument JSON is repaired where possible and
        tool calls written as text are recovered (each recovery noted in ``usage.notes``).  Every
        attempt goes to the request log; only the successful attempt's time is charged to the agent
        (``usage.charged_s``).

        Raises
        ------
        ProviderFatalError
            An invalid key, an exhausted quota, an unknown model: never retried.
        SpendExhausted
            The episode's spend limit cannot cover the request (the episode ends, not a failure).
        LLMCallError
            When the call fails for good (not retryable, or out of retries); its ``usage`` holds
            the retry log.
        """
        litellm = _litellm()
        retryable = tuple(getattr(litellm, n) for n in _RETRYABLE_NAMES if hasattr(litellm, n))
        kwargs = self._kwargs(messages, tools)
        # identity: what is asked, and of which configured server (not the address api_base_env gave this run)
        key = request_key({**kwargs, "extra": self.extra, "api_base": self.params.get("api_base")})
        if self._log is not None:
            hit = self._log.replay(key)
            if hit is not None:
                return self._replayed(hit)
        if self.stop_records and not self._stop_checked:   # once per job: an earlier fatal error stops it before it pays
            reason = read_stop(self._spend_dir, self.name)
            if reason is not None:
                raise RunStopped(f"agent {self.name!r}: the run was stopped by an earlier job: {reason}. Fix the "
                                 f"cause, then `heuresis spend --resume {self.name}` lets its jobs send requests again")
            self._stop_checked = True
        rate = self._rate_window()
        limited = (self._ledger is not None or self.max_episode_usd is not None or self.max_episode_tokens is not None
                   or rate is not None)
        bound = self._bound(kwargs) if limited else (0, 0.0)
        self._check_episode_limits(bound)
        log: list[dict] = []
        t_start, started = time.monotonic(), _utc()
        for attempt in range(self.retry.max_retries + 1):
            token = self._reserve(bound)
            slot = rate.acquire(bound[0]) if rate is not None else None   # waits, before the clock starts
            t0, at = time.monotonic(), _utc()
            try:
                resp = litellm.completion(**kwargs)
                break
            except Exception as exc:
                timeout = isinstance(exc, getattr(litellm, "Timeout", ()))
                if token is not None:   # a timed-out attempt may be billed: it stays reserved
                    self._ledger.settle(token, None if timeout else 0.0)  # type: ignore[union-attr]
                if slot is not None:    # a timed-out attempt may have been processed: it stays counted
                    rate.settle(slot, None if timeout else 0)  # type: ignore[union-attr]
                message = scrub(str(exc), self._secrets())
                entry = {"attempt": attempt, "error": type(exc).__name__, "status": getattr(exc, "status_code", None),
                         "message": message[:500], "latency_s": round(time.monotonic() - t0, 4),
                         "started": at, "ended": _utc(), "billed": "unknown" if timeout else "no"}
                fatal = fatal_reason(exc)
                server_error = isinstance(getattr(exc, "status_code", None), int) and exc.status_code >= 500  # type: ignore[attr-defined]
                last = fatal is not None or not (isinstance(exc, retryable) or server_error) \
                    or attempt == self.retry.max_retries
                wait = 0.0 if last else self.retry.wait(attempt, _retry_after(exc), self._rng)
                log.append({**entry, "wait_s": round(wait, 4), "retry_after_s": _retry_after(exc)})
                if self._log is not None:
                    self._log.append({"key": key, **log[-1], "status": "failed", "http_status": log[-1]["status"]})
                if last:
                    usage = Usage(model=self._model, provider=self.provider, retries=attempt, retry_log=log,
                                  latency_s=round(time.monotonic() - t_start, 4), cost=0.0, price_source="no reply",
                                  error=f"{type(exc).__name__}: {message[:300]}", started=started, ended=_utc(),
                                  charged_s=0.0)
                    if fatal is not None:
                        var = self.key_variable()
                        text = (f"agent {self.name!r} (model {self._model}): {fatal.replace('_', ' ')}"
                                + (f" (key from the environment variable {var})" if var else "")
                                + f": {type(exc).__name__}: {message[:300]}")
                        if self.stop_records:
                            stop_run(self._spend_dir, self.name, text)
                        raise ProviderFatalError(text + ". The run stops: every request of this agent would fail "
                                                        "the same way", usage) from exc
                    if context_overflow(exc, litellm):
                        raise ContextOverflow(f"the conversation exceeds the model's context window: "
                                              f"{message[:300]}", usage) from exc
                    final = "not retryable" if attempt < self.retry.max_retries else f"after {attempt} retries"
                    raise LLMCallError(f"model call failed ({final}): {type(exc).__name__}: {message[:300]}",
                                       usage) from exc
                self._sleep(wait)
        latency = time.monotonic() - t0
        reply = self._reply(resp, tools, log, latency)
        u = reply.usage
        u.started, u.ended, u.charged_s = started, _utc(), round(latency, 4)
        if any(e.get("billed") == "unknown" for e in log):
            u.warnings.append(f"{sum(e.get('billed') == 'unknown' for e in log)} timed-out attempt(s) may have been "
                              "billed by the provider: not in the recorded cost")
        if token is not None:
            self._ledger.settle(token, u.cost if u.cost is not None else None)  # type: ignore[union-attr]
        if slot is not None:
            rate.settle(slot, (int(u.tokens_in) + int(u.tokens_out or 0))  # type: ignore[union-attr]
                        if u.tokens_in is not None else None)
        self._spent_usd += float(u.cost or 0.0) if u.cost is not None else bound[1] or 0.0
        self._spent_tokens += int(u.tokens_in or 0) + int(u.tokens_out or 0) if u.tokens_in is not None else bound[0]
        if self._log is not None:
            raw = resp.model_dump() if hasattr(resp, "model_dump") else None
            self._log.append({"key": key, "status": "ok", "attempt": len(log), "message": reply.message,
                              "usage": u.as_dict(), "response": raw})
        return reply

    def _replayed(self, hit: dict) -> AgentReply:
        """The reply of an earlier, paid attempt: charged its original working time, nothing sent."""
        fields = {k: v for k, v in (hit.get("usage") or {}).items() if k in Usage.__dataclass_fields__}
        u = replace(Usage(**fields), replayed=True)
        self._spent_usd += float(u.cost or 0.0)
        self._spent_tokens += int(u.tokens_in or 0) + int(u.tokens_out or 0)
        self._log.append({"key": hit.get("key"), "status": "ok", "replayed": True, "replayed_at": _utc(),  # type: ignore[union-attr]
                          "message": hit.get("message"), "usage": u.as_dict()})
        return AgentReply(dict(hit["message"]), u)

    def _reply(self, resp, tools: list[dict], log: list[dict], latency: float) -> AgentReply:
        choice = resp.choices[0]
        msg = choice.message
        content = msg.content if isinstance(msg.content, str) or msg.content is None else str(msg.content)
        tool_names = {t["function"]["name"] for t in tools}
        notes: list[str] = []
        calls = []
        for tc in (msg.tool_calls or []):
            raw = tc.function.arguments
            fixed, note = repair_arguments(raw)
            if note:
                notes.append(f"{tc.function.name}: {note}")
            calls.append({"id": tc.id or f"call_{self.name}_{next(self._ids)}", "type": "function",
                          "function": {"name": tc.function.name, "arguments": fixed if fixed is not None else raw}})
        if not calls and content and tool_names:
            recovered, content, rnotes = recover_tool_calls(content, tool_names)
            notes += rnotes
            calls = [{"id": f"recovered_{self.name}_{next(self._ids)}", "type": "function",
                      "function": {"name": n, "arguments": a}} for n, a in recovered]
            content = content or None
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        for key in ("reasoning_content", "thinking_blocks"):   # handed back to providers that need them
            value = getattr(msg, key, None)
            if value:
                message[key] = value
        u = getattr(resp, "usage", None)
        n_in = getattr(u, "prompt_tokens", None)
        n_out = getattr(u, "completion_tokens", None)
        if not n_in and not n_out:   # litellm fills an absent usage block with zeros: no prompt is 0 tokens
            n_in = n_out = None
        details_in = getattr(u, "prompt_tokens_details", None)
        details_out = getattr(u, "completion_tokens_details", None)
        cached = int(getattr(details_in, "cached_tokens", 0) or 0) if n_in is not None else None
        written = cache_write_tokens(u) if n_in is not None else None
        reasoning = getattr(details_out, "reasoning_tokens", None) if n_in is not None else None
        cost, source, warnings = self._cost(resp, None if n_in is None else int(n_in),
                                            None if n_out is None else int(n_out), int(cached or 0), int(written or 0))
        finish = getattr(choice, "finish_reason", None)
        if finish == "length" and not calls and not (content or "").strip():
            finish = "empty_length"   # the whole cap went to reasoning: paid for, nothing to act on
            warnings = [*warnings, f"model {self._model}: the reply reached the output cap ({self.max_tokens} tokens, "
                                   f"{reasoning if reasoning is not None else 'unknown'} of them reasoning) with "
                                   "neither text nor a tool call"]
        usage = Usage(tokens_in=None if n_in is None else int(n_in), tokens_out=None if n_out is None else int(n_out),
                      cost=cost, latency_s=round(latency, 4), retries=len(log),
                      model=self._model, provider=self.provider, warnings=warnings, retry_log=log, notes=notes,
                      finish_reason=finish, price_source=source, caching=self.caching_mode,
                      cached_tokens=cached, cache_write_tokens=written,
                      reasoning_tokens=None if reasoning is None else int(reasoning),
                      served_model=getattr(resp, "model", None), response_id=getattr(resp, "id", None))
        return AgentReply(message, usage)


def config_token_prices(prices: Mapping, n_prompt: int | None = None) -> dict[str, float]:
    """USD per token from a config entry's ``prices`` (USD per million tokens).

    Cached input at ``cached_input_per_mtok`` and a cache write at ``cache_write_input_per_mtok``,
    each the input price when not given.  ``tiers`` (a list of ``{from_tokens, input_per_mtok, ...}``)
    price a request of at least ``from_tokens`` prompt tokens at the last tier it reaches, as
    providers with tiered prices bill; ``n_prompt`` None takes the dearest tier (a worst case).
    """
    levels = [dict(prices)] + [dict(t) for t in prices.get("tiers") or []]

    def per_token(level: Mapping) -> dict[str, float]:
        p_in = float(level["input_per_mtok"])
        return {"input_per_token": p_in / 1e6, "output_per_token": float(level["output_per_mtok"]) / 1e6,
                "cached_per_token": float(level.get("cached_input_per_mtok", p_in)) / 1e6,
                "cache_write_per_token": float(level.get("cache_write_input_per_mtok", p_in)) / 1e6}

    if n_prompt is None:
        each = [per_token(level) for level in levels]
        return {k: max(p[k] for p in each) for k in each[0]}
    chosen = levels[0]
    for tier in sorted(levels[1:], key=lambda t: int(t["from_tokens"])):
        if int(n_prompt) >= int(tier["from_tokens"]):
            chosen = tier
    return per_token(chosen)


def _map_prices(model: str) -> dict | None:
    """litellm's bundled prices of ``model`` as a config ``prices`` entry (tiers kept); None: not priced."""
    litellm = _litellm()
    info = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1]) or {}

    def level(entry: Mapping) -> dict | None:
        if entry.get("input_cost_per_token") is None or entry.get("output_cost_per_token") is None:
            return None
        out = {"input_per_mtok": float(entry["input_cost_per_token"]) * 1e6,
               "output_per_mtok": float(entry["output_cost_per_token"]) * 1e6}
        for ours, theirs in (("cached_input_per_mtok", "cache_read_input_token_cost"),
                             ("cache_write_input_per_mtok", "cache_creation_input_token_cost")):
            if entry.get(theirs) is not None:
                out[ours] = float(entry[theirs]) * 1e6
        return out

    base = level(info)
    tiers = [(t.get("range") or [0])[0] for t in info.get("tiered_pricing") or []]
    levels = [level(t) for t in info.get("tiered_pricing") or []]
    if base is None and levels and all(levels):   # only tiers: the first is the base
        base, levels, tiers = levels[0], levels[1:], tiers[1:]
    if base is None or not all(levels):
        return None
    return {**base, "tiers": [{**lv, "from_tokens": int(t)} for lv, t in zip(levels, tiers, strict=True)]}  # type: ignore[dict-item]


def token_prices(model: str, prices: Mapping | None, n_prompt: int | None = None) -> dict[str, float] | None:
    """USD per token (input, cached input, cache write, output) of one request of ``model``.

    The config's ``prices`` (:func:`config_token_prices`), else litellm's map (a model with only
    tiered prices, such as DashScope's, priced by its tiers); None: no known price.  ``n_prompt``
    picks the tier (None: the dearest, for a worst case).
    """
    if prices is None:
        prices = _map_prices(model)
    return None if prices is None else config_token_prices(prices, n_prompt)


def cache_write_tokens(usage) -> int:
    """Prompt tokens a reply's usage says were written to the provider's cache (0: none reported).

    Anthropic reports ``cache_creation_input_tokens`` on the usage; litellm also carries it, and
    DashScope's count, in ``prompt_tokens_details`` (``cache_creation_tokens``, ``cache_write_tokens``,
    ``cache_creation_input_tokens``).
    """
    direct = getattr(usage, "cache_creation_input_tokens", None)
    if direct:
        return int(direct)
    details = getattr(usage, "prompt_tokens_details", None)
    for key in ("cache_creation_tokens", "cache_write_tokens", "cache_creation_input_tokens"):
        value = getattr(details, key, None) if details is not None else None
        if value is None and isinstance(details, Mapping):
            value = details.get(key)
        if value:
            return int(value)
    return 0


def verify_keys(config: Mapping, agents: Iterable[str] | None = None, log=lambda m: None) -> list[str]:
    """Send one cheap request (one output token) per distinct model and key of the LLM agents in use.

    Agents that need no key (``requires_key: false``) and those with ``verify_key: false`` are skipped.
    A key that answers clears the stop records of the agents using it (a fatal error of an earlier
    run, now shown fixed: :func:`heuresis.agents.spend.stop_run`).
    Raises :class:`ProviderFatalError` naming the agent, model and variable when a key is refused, the
    quota is gone or the model is unknown; a transient failure (rate limit, timeout) is returned as a
    warning, not an error.  Returns the warnings.
    """
    used = llm_agents_in_use(config)
    if agents is not None:
        used = {a: spec for a, spec in used.items() if a in set(agents)}
    seen: set[tuple] = set()
    warnings = []
    for name, spec in sorted(used.items()):
        if spec.get("requires_key") is False or spec.get("verify_key") is False:
            continue
        ident = (spec["model"], spec.get("api_base"), spec.get("api_key_env"))
        sharing = [a for a, s in used.items() if (s["model"], s.get("api_base"), s.get("api_key_env")) == ident]
        if ident in seen:
            continue
        seen.add(ident)
        params = {k: v for k, v in spec.items() if k != "kind"}
        agent = LLMAgent(name, **{**params, "retries": {"max_retries": 0}, "max_tokens": 1,
                                  "thinking": None, "reasoning_effort": None})
        agent.stop_records = False
        try:
            agent.respond([{"role": "user", "content": "Reply with OK."}], [])
            log(f"agent {name!r} (model {spec['model']}): key verified")
            for a in sharing:
                if clear_stop(SPEND_DIR, a):
                    log(f"agent {a!r}: the stop record of an earlier fatal error is cleared (its key now answers)")
        except ProviderFatalError:
            raise
        except Exception as exc:   # rate limited, a timeout, an unsupported parameter: not proof of a bad key
            warnings.append(f"agent {name!r} (model {spec['model']}): key check inconclusive: "
                            f"{scrub(str(exc), agent._secrets())[:300]}")
    return warnings
