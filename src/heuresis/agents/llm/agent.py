"""The LLM agent: one model behind litellm driving the harness's tools (:mod:`heuresis.agents.llm`)."""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from heuresis.agents.llm.errors import (
    CredentialsError,
    Decision,
    LLMCallError,
    ProviderFatalError,
    SpendExhausted,
    decide,
    retry_after,
)
from heuresis.agents.llm.prices import cache_write_tokens, token_prices
from heuresis.agents.llm.provider import load_litellm, warm_up
from heuresis.agents.llm.repair import outgoing_messages, recover_tool_calls, repair_arguments
from heuresis.agents.spend import SPEND_DIR, RateWindow, RunStopped, SpendLedger, read_stop, request_bound, stop_run
from heuresis.config.settings import Retries
from heuresis.harness.agent_spec import scrub
from heuresis.harness.protocol import (
    Agent,
    AgentReply,
    ContextOverflow,
    FatalAgentError,
    Usage,
    register_agent,
)
from heuresis.harness.requestlog import RequestLog, request_key

#: The backoff of a model call: an LLM agent's ``retries`` settings (config ``agents.<name>.retries``).
RetryPolicy = Retries


def _utc() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


#: Providers that cache a prompt prefix only where the request marks it (``cache_control``).
CACHE_MARKED_PROVIDERS = frozenset({"anthropic", "bedrock", "dashscope"})
#: Providers that cache prompt prefixes without marks (nothing to add; the usage reports the reads).
CACHE_AUTOMATIC_PROVIDERS = frozenset({"openai", "deepseek", "xai", "gemini"})
#: Where the marks go: the tool definitions, the system prompt, the last message (rolling: each turn's
#: prefix is then read from the cache by the next turn).
CACHE_INJECTION_POINTS = ({"location": "tool_config"}, {"location": "message", "role": "system"},
                          {"location": "message", "index": -1})


@register_agent("llm")
class LLMAgent(Agent):
    """A model behind litellm driving the harness's tools (:mod:`heuresis.agents.llm` says what it adds)."""

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
        self._warm_up()   # before the episode's clock starts: the job's start-up is not the agent's time

    def _warm_up(self) -> None:
        """Load the provider's client code once per process (:func:`~heuresis.agents.llm.provider.warm_up`)."""
        warm_up(self._model)

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
                self._provider = load_litellm().get_llm_provider(self._model, api_base=self.api_base)[1]
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
        kw: dict[str, Any] = {"model": self._model, "messages": outgoing_messages(messages, self.plain_history),
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
            return float(load_litellm().completion_cost(completion_response=resp, model=self._model)), "litellm", []
        except Exception:  # not in litellm's map
            pass
        return None, "unknown", [f"model {self._model} has no known price (not in litellm's map, no prices in "
                                 f"the config for agent {self.name!r}): cost recorded as unknown"]

    def _bound(self, kwargs: dict) -> tuple[int, float | None]:
        """Worst case (tokens, USD or None when the price is unknown) of sending ``kwargs`` once."""
        try:
            n = int(load_litellm().token_counter(model=self._model, messages=kwargs["messages"], tools=kwargs.get("tools")))
        except Exception:  # a model litellm cannot count for: a character bound (no token is shorter than 1 char)
            n = len(json.dumps(kwargs["messages"])) + len(json.dumps(kwargs.get("tools") or []))
        max_out = int(self.max_tokens or (load_litellm().model_cost.get(self._model) or {}).get("max_output_tokens") or 0)
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
        kwargs = self._kwargs(messages, tools)
        # identity: what is asked, and of which configured server (not the address api_base_env gave this run)
        key = request_key({**kwargs, "extra": self.extra, "api_base": self.params.get("api_base")})
        if self._log is not None:
            hit = self._log.replay(key)
            if hit is not None:
                return self._replayed(hit)
        self._check_not_stopped()
        rate = self._rate_window()
        limited = (self._ledger is not None or self.max_episode_usd is not None or self.max_episode_tokens is not None
                   or rate is not None)
        bound = self._bound(kwargs) if limited else (0, 0.0)
        self._check_episode_limits(bound)
        resp, log, latency, started, token, slot = self._send(kwargs, key, bound, rate)
        reply = self._reply(resp, tools, log, latency)
        u = reply.usage
        u.started, u.ended, u.charged_s = started, _utc(), round(latency, 4)
        if any(e.get("billed") == "unknown" for e in log):
            u.warnings.append(f"{sum(e.get('billed') == 'unknown' for e in log)} timed-out attempt(s) may have been "
                              "billed by the provider: not in the recorded cost")
        self._settle(u, bound, token, slot, rate)
        if self._log is not None:
            raw = resp.model_dump() if hasattr(resp, "model_dump") else None
            self._log.append({"key": key, "status": "ok", "attempt": len(log), "message": reply.message,
                              "usage": u.as_dict(), "response": raw})
        return reply

    def _check_not_stopped(self) -> None:
        """Once per job: a run an earlier job stopped (a fatal provider error) sends nothing more."""
        if self.stop_records and not self._stop_checked:
            reason = read_stop(self._spend_dir, self.name)
            if reason is not None:
                raise RunStopped(f"agent {self.name!r}: the run was stopped by an earlier job: {reason}. Fix the "
                                 f"cause, then `heuresis spend --resume {self.name}` lets its jobs send requests again")
            self._stop_checked = True

    def _send(self, kwargs: dict, key: str, bound: tuple[int, float | None], rate: RateWindow | None):
        """Send the request until it is answered or :func:`decide` stops it.

        Returns the response, the retry log, the answered attempt's latency, the start time, its ledger
        reservation and its rate slot.  Every failed attempt is logged and its reservation settled; a
        stop raises (:class:`ProviderFatalError`, :class:`ContextOverflow`, :class:`LLMCallError`)
        with the usage of what was tried.
        """
        litellm = load_litellm()
        log: list[dict] = []
        t_start, started = time.monotonic(), _utc()
        attempt = 0
        while True:
            token = self._reserve(bound)
            slot = rate.acquire(bound[0]) if rate is not None else None   # waits, before the clock starts
            t0, at = time.monotonic(), _utc()
            try:
                resp = self._complete(kwargs)
                return resp, log, time.monotonic() - t0, started, token, slot
            except Exception as exc:
                timeout = isinstance(exc, getattr(litellm, "Timeout", ()))
                if token is not None:   # a timed-out attempt may be billed: it stays reserved
                    self._ledger.settle(token, None if timeout else 0.0)  # type: ignore[union-attr]
                if slot is not None:    # a timed-out attempt may have been processed: it stays counted
                    rate.settle(slot, None if timeout else 0)  # type: ignore[union-attr]
                message = scrub(str(exc), self._secrets())
                decision = decide(exc, attempt, self.retry, litellm, self._rng)
                log.append({"attempt": attempt, "error": type(exc).__name__, "status": getattr(exc, "status_code", None),
                            "message": message[:500], "latency_s": round(time.monotonic() - t0, 4),
                            "started": at, "ended": _utc(), "billed": "unknown" if timeout else "no",
                            "wait_s": round(decision.wait_s, 4), "retry_after_s": retry_after(exc)})
                if self._log is not None:
                    self._log.append({"key": key, **log[-1], "status": "failed", "http_status": log[-1]["status"]})
                if decision.action != "retry":
                    self._stop(decision, exc, message, log, attempt, t_start, started)
                self._sleep(decision.wait_s)
                attempt += 1

    def _stop(self, decision: Decision, exc: Exception, message: str, log: list[dict], attempt: int,
              t_start: float, started: str) -> None:
        """Raise the error a stopping :class:`Decision` means, with the usage of the attempts made."""
        usage = Usage(model=self._model, provider=self.provider, retries=attempt, retry_log=log,
                      latency_s=round(time.monotonic() - t_start, 4), cost=0.0, price_source="no reply",
                      error=f"{type(exc).__name__}: {message[:300]}", started=started, ended=_utc(), charged_s=0.0)
        if decision.action == "fatal":
            var = self.key_variable()
            text = (f"agent {self.name!r} (model {self._model}): {decision.reason.replace('_', ' ')}"
                    + (f" (key from the environment variable {var})" if var else "")
                    + f": {type(exc).__name__}: {message[:300]}")
            if self.stop_records:
                stop_run(self._spend_dir, self.name, text)
            raise ProviderFatalError(text + ". The run stops: every request of this agent would fail "
                                            "the same way", usage) from exc
        if decision.action == "overflow":
            raise ContextOverflow(f"the conversation exceeds the model's context window: {message[:300]}",
                                  usage) from exc
        raise LLMCallError(f"model call failed ({decision.reason}): {type(exc).__name__}: {message[:300]}",
                           usage) from exc

    def _settle(self, u: Usage, bound: tuple[int, float | None], token: str | None, slot, rate) -> None:
        """Charge an answered request: its ledger reservation and rate slot settled, the episode's spend counted."""
        if token is not None:
            self._ledger.settle(token, u.cost if u.cost is not None else None)  # type: ignore[union-attr]
        if slot is not None:
            rate.settle(slot, (int(u.tokens_in) + int(u.tokens_out or 0))
                        if u.tokens_in is not None else None)
        self._spent_usd += float(u.cost or 0.0) if u.cost is not None else bound[1] or 0.0
        self._spent_tokens += int(u.tokens_in or 0) + int(u.tokens_out or 0) if u.tokens_in is not None else bound[0]

    def _complete(self, kwargs: dict):
        """Send one request (``litellm.completion``'s keywords) and return litellm's response.

        The one place a request leaves the process; :class:`~heuresis.agents.inspect_model.InspectAgent`
        sends it through an inspect_ai model instead.
        """
        return load_litellm().completion(**kwargs)

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
