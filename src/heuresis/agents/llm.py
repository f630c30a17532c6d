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
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from heuresis.agents.base import UNREADABLE_TOOL, Agent, AgentReply, ContextOverflow, Usage, register_agent

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__all__ = [
    "CredentialsError",
    "LLMAgent",
    "LLMCallError",
    "RetryPolicy",
    "check_credentials",
    "context_overflow",
    "llm_agents_in_use",
    "missing_credentials",
    "recover_tool_calls",
    "repair_arguments",
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


class CredentialsError(RuntimeError):
    """A configured model's credential variable is not set."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: wait ``base_s * 2**k`` (at most ``max_s``) before retry k+1."""

    max_retries: int = 5
    base_s: float = 2.0
    max_s: float = 60.0

    def wait(self, attempt: int) -> float:
        """Return the seconds to wait after failed attempt ``attempt`` (0-based)."""
        return float(min(self.max_s, self.base_s * 2.0 ** attempt))


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


_RETRYABLE_NAMES = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError",
                    "ServiceUnavailableError", "BadGatewayError")


@register_agent("llm")
class LLMAgent(Agent):
    """A model behind litellm driving the harness's tools (see the module docstring)."""

    def __init__(self, name: str, *, model: str, api_base: str | None = None, api_key_env: str | None = None,
                 requires_key: bool = True, temperature: float | None = None, max_tokens: int | None = None,
                 reasoning_effort: str | None = None, thinking: Mapping | None = None, timeout_s: float = 120.0,
                 retries: Mapping | None = None, prices: Mapping | None = None, extra: Mapping | None = None,
                 api_base_env: str | None = None, tool_choice: str | None = None, force_lone_tool: bool = False,
                 plain_history: bool = False) -> None:
        super().__init__(name, model=model, api_base=api_base, api_key_env=api_key_env, requires_key=requires_key,
                         temperature=temperature, max_tokens=max_tokens, reasoning_effort=reasoning_effort,
                         thinking=thinking, timeout_s=timeout_s, retries=retries, prices=prices, extra=extra,
                         api_base_env=api_base_env, tool_choice=tool_choice, force_lone_tool=force_lone_tool,
                         plain_history=plain_history)
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
        self.retry = RetryPolicy(**(retries or {}))
        self.prices = dict(prices) if prices else None
        self.extra = dict(extra or {})
        self._ids = itertools.count()
        self._provider: str | None = None
        self._sleep = time.sleep   # tests may replace it

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

    def bind(self, limits: Mapping[str, Any]) -> None:
        """The harness's limits: output tokens per turn cap ``max_tokens`` unless the config sets it."""
        if self.max_tokens is None and limits.get("output_tokens_per_turn"):
            self.max_tokens = int(limits["output_tokens_per_turn"])

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
        return kw

    def _cost(self, n_in: int, n_out: int) -> tuple[float | None, str, list[str]]:
        """(cost in USD or None, source, warnings)."""
        try:
            p_in, p_out = _litellm().cost_per_token(model=self._model, prompt_tokens=n_in, completion_tokens=n_out)
            return float(p_in + p_out), "litellm", []
        except Exception:  # not in litellm's map
            pass
        if self.prices is not None:
            cost = (n_in * float(self.prices["input_per_mtok"]) + n_out * float(self.prices["output_per_mtok"])) / 1e6
            return cost, "config", []
        return None, "unknown", [f"model {self._model} has no known price (not in litellm's map, no prices in "
                                 f"the config for agent {self.name!r}): cost recorded as unknown"]

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """Call the model once, retrying transient failures with :class:`RetryPolicy` backoff.

        Tool calls are read from the reply; malformed argument JSON is repaired where possible and
        tool calls written as text are recovered (each recovery noted in ``usage.notes``).

        Raises
        ------
        LLMCallError
            When the call fails for good (not retryable, or out of retries); its ``usage`` holds
            the retry log.
        """
        litellm = _litellm()
        retryable = tuple(getattr(litellm, n) for n in _RETRYABLE_NAMES if hasattr(litellm, n))
        kwargs = self._kwargs(messages, tools)
        log: list[dict] = []
        t_start = time.monotonic()
        for attempt in range(self.retry.max_retries + 1):
            t0 = time.monotonic()
            try:
                resp = litellm.completion(**kwargs)
                break
            except Exception as exc:
                entry = {"attempt": attempt, "error": type(exc).__name__,
                         "status": getattr(exc, "status_code", None), "message": str(exc)[:500],
                         "latency_s": round(time.monotonic() - t0, 4)}
                server_error = isinstance(getattr(exc, "status_code", None), int) and exc.status_code >= 500
                if not (isinstance(exc, retryable) or server_error) or attempt == self.retry.max_retries:
                    log.append({**entry, "wait_s": 0.0})
                    usage = Usage(model=self._model, provider=self.provider, retries=attempt, retry_log=log,
                                  latency_s=round(time.monotonic() - t_start, 4), cost=0.0, price_source="no reply",
                                  error=f"{type(exc).__name__}: {str(exc)[:300]}")
                    if context_overflow(exc, litellm):
                        raise ContextOverflow(f"the conversation exceeds the model's context window: "
                                              f"{str(exc)[:300]}", usage) from exc
                    final = "not retryable" if attempt < self.retry.max_retries else f"after {attempt} retries"
                    raise LLMCallError(f"model call failed ({final}): {type(exc).__name__}: {str(exc)[:300]}",
                                       usage) from exc
                wait = self.retry.wait(attempt)
                log.append({**entry, "wait_s": wait})
                self._sleep(wait)
        latency = time.monotonic() - t0
        return self._reply(resp, tools, log, latency)

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
        n_in = int(getattr(u, "prompt_tokens", 0) or 0)
        n_out = int(getattr(u, "completion_tokens", 0) or 0)
        cost, source, warnings = self._cost(n_in, n_out)
        usage = Usage(tokens_in=n_in, tokens_out=n_out, cost=cost, latency_s=round(latency, 4), retries=len(log),
                      model=self._model, provider=self.provider, warnings=warnings, retry_log=log, notes=notes,
                      finish_reason=getattr(choice, "finish_reason", None), price_source=source)
        return AgentReply(message, usage)
