"""An agent whose model is an inspect_ai model (``kind: inspect``; the ``inspect`` extra; docs/agents.md).

The harness's loop stays ours: turns, budgets, the last turn, the tools and their sandbox, the
request log (a rerun replays what was paid for), the spend ledger and the rate window are those of
the LLM agent (:class:`~heuresis.agents.llm.LLMAgent`), of which this is a subclass.  Only the
request itself goes elsewhere: through inspect_ai's ``Model.generate`` (any provider inspect
supports, its ``mockllm`` offline), converted from and back to the OpenAI chat format the harness
speaks.  Inside an inspect evaluation (the ``heuresis/episodes`` task,
:mod:`heuresis.stages.inspect_tasks`) an agent without a ``model`` uses the evaluation's model,
and each request runs on inspect's event loop, so it appears in the evaluation's ``.eval`` log.

inspect_ai is imported on first use: the kind is always registered, and a config that names it
without the extra installed is told how to install it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from typing import Any

from heuresis.agents.llm.agent import LLMAgent
from heuresis.harness.protocol import FatalAgentError, register_agent

__all__ = ["INSTALL_HINT", "InspectAgent", "load_inspect"]

#: What to do when inspect_ai is missing.
INSTALL_HINT = ("agent kind `inspect` needs inspect_ai: install the inspect extra in its own environment "
                "(docs/agents.md, \"From inspect_ai\")")

#: inspect's stop reasons as OpenAI finish reasons (what the harness reads).
FINISH_REASONS = {"stop": "stop", "max_tokens": "length", "model_length": "length", "tool_calls": "tool_calls",
                  "content_filter": "content_filter", "unknown": "stop"}


def load_inspect():
    """The ``inspect_ai.model`` module, or a clear error naming the extra."""
    try:
        import inspect_ai.model as model
    except ImportError as exc:
        raise FatalAgentError(INSTALL_HINT) from exc
    return model


@register_agent("inspect")
class InspectAgent(LLMAgent):
    """The LLM agent with its requests sent through an inspect_ai model.

    ``model``: an inspect model name (``openai/gpt-4o``, ``anthropic/claude-sonnet-4-5``,
    ``mockllm/model``); None inside an inspect evaluation: the evaluation's own model.
    ``model_args``: keyword arguments of ``inspect_ai.model.get_model`` (e.g. a local server's
    ``base_url``).  Credentials are read by inspect from the environment, as inspect documents.
    The other parameters are the LLM agent's (prices, spend caps, ``max_tokens``, ``temperature``).
    """

    def __init__(self, name: str, *, model: str | None = None, model_args: Mapping | None = None,
                 **params: Any) -> None:
        self.model_args = dict(model_args or {})
        self._inspect_model = None
        if model is None:   # the evaluation's model (only inside an inspect evaluation)
            self._inspect_model = load_inspect().get_model()
            model = str(self._inspect_model)
        params.setdefault("requires_key", False)   # inspect reads its provider's key itself
        params.setdefault("verify_key", False)
        super().__init__(name, model=model, **params)
        self.params["model_args"] = self.model_args
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def provider(self) -> str:
        """inspect's provider: the model name's prefix."""
        return self._model.split("/", 1)[0] if "/" in self._model else "unknown"

    @property
    def caching_mode(self) -> str:
        """inspect marks prompts for its providers' caches itself: nothing is injected here."""
        return "none"

    def _warm_up(self) -> None:
        """Nothing to warm: inspect builds its provider's client on the first request."""

    def model_object(self):
        """The inspect model the requests go to (built once)."""
        if self._inspect_model is None:
            self._inspect_model = load_inspect().get_model(self._model, **self.model_args)
        return self._inspect_model

    def _complete(self, kwargs: dict):
        """Send the request through inspect's ``Model.generate``; the reply as litellm's response."""
        im = load_inspect()
        from inspect_ai.tool import ToolInfo, ToolParams

        tools = [ToolInfo(name=t["function"]["name"], description=t["function"].get("description", ""),
                          parameters=ToolParams.model_validate(t["function"].get("parameters") or {}))
                 for t in kwargs.get("tools") or []]
        config = im.GenerateConfig(max_tokens=kwargs.get("max_tokens"), temperature=kwargs.get("temperature"),
                                   reasoning_effort=kwargs.get("reasoning_effort"))
        choice = kwargs.get("tool_choice")
        if isinstance(choice, Mapping):   # a named tool (force_lone_tool)
            from inspect_ai.tool import ToolFunction

            choice = ToolFunction(name=choice["function"]["name"])
        elif choice == "required":
            choice = "any"

        async def generate():
            messages = await im.messages_from_openai(kwargs["messages"], model=self._model)
            return await self.model_object().generate(messages, tools=tools, tool_choice=choice, config=config)

        return _response(self._await(generate), self._model)

    def _await(self, coro_fn):
        """Run ``coro_fn()`` on inspect's event loop, or on the agent's own.

        Inside an evaluation the episode runs in one of inspect's worker threads and the request goes
        to inspect's loop (it is logged with the sample); elsewhere to one loop per agent, in a thread
        (a provider's client keeps the loop it was made on).
        """
        import anyio.from_thread

        try:
            return anyio.from_thread.run(coro_fn)
        except RuntimeError as exc:
            if "worker thread" not in str(exc) and "event loop" not in str(exc).lower():
                raise
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name=f"inspect-{self.name}", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro_fn(), self._loop).result()


def _response(output, model: str):
    """inspect's ``ModelOutput`` as litellm's ``ModelResponse`` (what the LLM agent reads and logs)."""
    from heuresis.agents.llm.provider import load_litellm

    msg = output.message
    text = msg.text if msg.content else None
    calls = [{"id": tc.id, "type": "function",
              "function": {"name": tc.function,
                           "arguments": json.dumps(tc.arguments) if tc.parse_error is None
                           else str(tc.parse_error)}}
             for tc in msg.tool_calls or []]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    u = output.usage
    usage = {} if u is None else {
        "prompt_tokens": int(u.input_tokens or 0) + int(u.input_tokens_cache_read or 0)
        + int(u.input_tokens_cache_write or 0),
        "completion_tokens": int(u.output_tokens or 0), "total_tokens": int(u.total_tokens or 0),
        "prompt_tokens_details": {"cached_tokens": int(u.input_tokens_cache_read or 0)},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens}}
    stop = output.choices[0].stop_reason if output.choices else "unknown"
    return load_litellm().ModelResponse(
        id=getattr(msg, "id", None), model=output.model or model,
        choices=[{"index": 0, "message": message, "finish_reason": FINISH_REASONS.get(stop, "stop")}],
        usage=usage or None)
