"""An agent whose model, and optionally whose scaffold, is inspect_ai's (``kind: inspect``; the ``inspect`` extra).

The harness's loop stays ours: turns, budgets, the last turn, the tools and their sandbox, the
request log (a rerun replays what was paid for), the spend ledger and the rate window are those of
the LLM agent (:class:`~heuresis.agents.llm.LLMAgent`), of which this is a subclass.  Only the
request itself goes elsewhere: through an inspect_ai model (any provider inspect supports, its
``mockllm`` offline), converted from and back to the OpenAI chat format the harness speaks.
Inside an inspect evaluation (the task ``heuresis_inspect/episodes`` of ``integrations/inspect``) an
agent without a ``model`` uses the evaluation's model, and each request runs on inspect's event
loop, so it appears in the evaluation's ``.eval`` log.

With ``solver`` (an inspect agent such as ``react``) the conversation is the inspect agent's: it
gets the task as its input, the run's tools as inspect tools (built from the harness's own specs)
and a model that hands each of its requests to the harness.  The harness sends the request with
the tools it offers now (on the last turn only ``submit``; tools the agent added itself are not
sent, and are named in the turn's warnings), through the LLM agent's request path (log, replay,
caps, retries), and gives the reply both to its loop, which runs the calls as one turn, and to the
inspect agent, whose tool calls then receive the loop's answers (a refused call as inspect's
``ToolError``).  A call inspect answers itself (an unknown tool, arguments its schema check
refuses) was already run and charged by the loop as a refused call: the turns are the built-in
loop's; the agent reads inspect's error text for it.  The run ends when the loop ends it (then the
agent's next request stops it) or when the agent stops (``agent_stopped``).

inspect_ai is imported on first use: the kind is always registered, and a config that names it
without the extra installed is told how to install it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import json
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from heuresis.agents.llm.agent import LLMAgent
from heuresis.harness.protocol import AgentReply, EpisodeEnd, FatalAgentError, Observation, Usage, register_agent

__all__ = ["INSTALL_HINT", "AgentStopped", "InspectAgent", "load_inspect"]

#: What to do when inspect_ai is missing.
INSTALL_HINT = ("agent kind `inspect` needs inspect_ai: install the inspect extra in its own environment "
                "(docs/agents.md, \"From inspect_ai\")")

#: inspect's stop reasons as OpenAI finish reasons (what the harness reads).
FINISH_REASONS = {"stop": "stop", "max_tokens": "length", "model_length": "length", "tool_calls": "tool_calls",
                  "content_filter": "content_filter", "unknown": "stop"}


#: Inspect agents named by a bare name (anything else: ``package.module:function``).
SOLVERS = {"react": "inspect_ai.agent:react"}

#: Keyword arguments given to a named agent unless the config's ``solver_args`` say otherwise:
#: react's own ``submit`` tool would clash with the harness's ``submit``.
SOLVER_DEFAULTS = {"react": {"submit": False}}


class AgentStopped(EpisodeEnd):
    """The inspect agent finished (or failed) while the loop waited for its next request."""

    reason = "agent_stopped"


class _EpisodeOver(Exception):
    """Raised into the inspect agent's request after the loop ended the run: it stops the agent."""


_DONE = object()   # queued when the inspect agent's run finished


@dataclass
class _Pending:
    """A call of the last reply: its answer (text, ok) once the loop ran it; claimed by the inspect tool that reads it."""

    id: str
    name: str
    arguments: str
    answer: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    claimed: bool = False


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
                 solver: str | None = None, solver_args: Mapping | None = None, **params: Any) -> None:
        if solver is not None and (not isinstance(solver, str) or not (solver in SOLVERS or ":" in solver)):
            raise ValueError(f"agent {name!r}: solver must be one of {sorted(SOLVERS)} or package.module:function "
                             f"(an inspect agent), got {solver!r}")
        if solver_args is not None and not isinstance(solver_args, Mapping):
            raise ValueError(f"agent {name!r}: solver_args must be a mapping of keyword arguments, got {solver_args!r}")
        self.model_args = dict(model_args or {})
        self.solver = solver
        self.solver_args = {**SOLVER_DEFAULTS.get(solver or "", {}), **dict(solver_args or {})}
        self._inspect_model = None
        if model is None:   # the evaluation's model (only inside an inspect evaluation)
            self._inspect_model = load_inspect().get_model()
            model = str(self._inspect_model)
        params.setdefault("requires_key", False)   # inspect reads its provider's key itself
        params.setdefault("verify_key", False)
        super().__init__(name, model=model, **params)
        self.params["model_args"] = self.model_args
        if solver is not None:
            self.params.update(solver=solver, solver_args=self.solver_args)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requests: queue.Queue = queue.Queue()   # the inspect agent's requests (or _DONE)
        self._run: concurrent.futures.Future | None = None   # the inspect agent's run
        self._request: Any = None       # the request being answered: (input, tools, answer future, its loop)
        self._pending: list[_Pending] = []  # the last reply's calls
        self._ok: dict[str, bool] = {}
        self._ended = False
        self._agent_error: BaseException | None = None
        self._tools_all: list[dict] = []   # the run's tools as the first turn offered them
        self._bridge_model: Any = None     # the model the inspect agent is given

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

    # --- an inspect agent's conversation (``solver``) ----------------------------------------------
    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """The model's reply to the inspect agent's next request (without ``solver``: to the loop's conversation)."""
        if self.solver is None:
            return super().respond(messages, tools)
        self._deliver(messages)
        if self._run is None:
            self._start_agent(messages, tools)
        item = self._requests.get()
        if item is _DONE:
            why = f": {type(self._agent_error).__name__}: {self._agent_error}" if self._agent_error else ""
            raise AgentStopped(f"the inspect agent {self.solver} stopped before the run ended{why}",
                               Usage(model=self._model, provider=self.provider, price_source="no request"))
        self._request = item
        input_, agent_tools = item[0], item[1]
        ours = {t["function"]["name"] for t in tools}
        foreign = sorted({t.name for t in agent_tools} - ours - {t["function"]["name"] for t in self._tools_all})
        im = load_inspect()
        openai_messages = self._await(lambda: im.messages_to_openai(input_))
        try:
            reply = super().respond(openai_messages, tools)
        except BaseException as exc:
            self._answer(exception=exc)
            raise
        if foreign:
            reply.usage.warnings.append(f"inspect agent {self.solver}: tools of its own not sent to the model "
                                        f"(not the harness's): {', '.join(foreign)}")
        self._pending = [_Pending(c["id"], c["function"]["name"], c["function"]["arguments"])
                         for c in reply.message.get("tool_calls") or []]
        self._answer(output=_output(reply, self._model))
        return reply

    def observe(self, observation: Observation) -> None:
        """Keep whether each call was answered or refused (a refused one reaches the agent as a tool error)."""
        self._ok[observation.key] = observation.ok

    def end(self, messages: list[dict], termination: str) -> None:
        """Answer the last calls; the agent's next request stops it; wait a little for it to finish."""
        if self.solver is None:
            return
        self._deliver(messages)
        self._ended = True
        for p in self._pending:
            if not p.answer.done():
                p.answer.set_result((f"episode ended: {termination}", False))
        while True:   # a request already waiting is refused
            try:
                item = self._requests.get_nowait()
            except queue.Empty:
                break
            if item is not _DONE:
                self._request = item
                self._answer(exception=_EpisodeOver(termination))
        if self._run is not None:
            try:
                self._run.result(timeout=30)
            except BaseException:   # the agent's own ending (our _EpisodeOver among them) is not the run's result
                pass

    def _deliver(self, messages: list[dict]) -> None:
        """Hand the loop's answers to the previous reply's calls to the inspect agent's waiting tools."""
        answers = {m.get("tool_call_id"): k for k, m in enumerate(messages) if m.get("role") == "tool"}
        for p in self._pending:
            at = answers.get(p.id)
            if at is None or p.answer.done():
                continue
            parts = [str(messages[at].get("content") or "")]
            parts += [str(m.get("content") or "") for m in messages[at + 1:] if m.get("role") == "user"]
            p.answer.set_result(("\n\n".join(parts), self._ok.get(p.id, True)))

    def _answer(self, output: Any = None, exception: BaseException | None = None) -> None:
        """Resolve the waiting request of the inspect agent (on its event loop)."""
        if self._request is None:
            return
        _, _, fut, loop = self._request
        self._request = None
        if exception is not None:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_exception(exception))
        else:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(output))

    def _start_agent(self, messages: list[dict], tools: list[dict]) -> None:
        """Build the inspect agent with the run's tools and the harness's model, and start it on inspect's loop."""
        im = load_inspect()
        from inspect_ai.agent import run as run_agent
        from inspect_ai.tool import ToolDef, ToolParams

        self._tools_all = [dict(t) for t in tools]
        defs = [ToolDef(self._tool_function(t["function"]["name"]), name=t["function"]["name"],
                        description=t["function"].get("description", ""),
                        parameters=_described(ToolParams.model_validate(t["function"].get("parameters") or {})))
                for t in tools]
        self._bridge_model = bridge = im.Model(_Bridge(self), im.GenerateConfig())
        target = SOLVERS.get(str(self.solver), str(self.solver))
        module, _, attr = target.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
            agent = factory(tools=defs, model=bridge, **self.solver_args)
        except (ImportError, AttributeError, TypeError) as exc:
            raise FatalAgentError(f"agent {self.name!r}: solver {self.solver!r} with solver_args "
                                  f"{sorted(self.solver_args)}: cannot make the inspect agent ({type(exc).__name__}: "
                                  f"{exc}); it must be a function returning an inspect Agent and taking tools= "
                                  "and model=") from exc

        async def go():
            start = await im.messages_from_openai(messages, model=self._model)
            return await run_agent(agent, start)

        self._run = self._spawn(go)

        def finished(f: concurrent.futures.Future) -> None:
            exc = f.exception() if not f.cancelled() else None
            if exc is not None and not isinstance(exc, _EpisodeOver):
                self._agent_error = exc
            self._requests.put(_DONE)

        self._run.add_done_callback(finished)

    def _tool_function(self, name: str):
        """The inspect tool ``name``: waits for the loop's answer to its call (matched by name and arguments)."""
        from inspect_ai.tool import ToolError

        agent = self

        async def execute(**kwargs: Any) -> str:
            same = [p for p in agent._pending if p.name == name and not p.claimed]
            exact = [p for p in same if _same_arguments(p.arguments, kwargs)]
            if not (exact or same):
                raise ToolError("episode ended" if agent._ended else f"no such call of {name} was made")
            call = (exact or same)[0]
            call.claimed = True
            text, ok = await asyncio.wrap_future(call.answer)
            if not ok:
                raise ToolError(text)
            return text

        return execute

    async def _ask(self, input_, tools, tool_choice, config):
        """The bridge's ``generate``: queue the request for the loop and wait for the reply."""
        if self._ended:
            raise _EpisodeOver("the run ended")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._requests.put((input_, tools, fut, loop))
        return await fut

    def _spawn(self, coro_fn) -> concurrent.futures.Future:
        """Start the inspect agent's run ``coro_fn()`` inside an inspect sample; its future.

        Inside an evaluation, on inspect's event loop in the sample being played; elsewhere (the
        workflow) in an evaluation of its own, one sample in a thread (inspect's agents need an active
        sample), its log in a temporary folder removed afterwards (the harness's transcript and
        tables are the record).
        """
        import anyio.from_thread

        async def start() -> concurrent.futures.Future:
            out: concurrent.futures.Future = concurrent.futures.Future()
            task = asyncio.ensure_future(coro_fn())
            task.add_done_callback(lambda t: out.cancel() if t.cancelled() else
                                   out.set_exception(t.exception()) if t.exception() else out.set_result(t.result()))
            return out

        try:
            return anyio.from_thread.run(start)
        except RuntimeError as exc:
            if "worker thread" not in str(exc) and "event loop" not in str(exc).lower():
                raise
        out: concurrent.futures.Future = concurrent.futures.Future()

        def main() -> None:
            try:
                self._own_evaluation(coro_fn)
                out.set_result(None)
            except BaseException as exc:   # handed to the loop's side through the future
                out.set_exception(exc)

        threading.Thread(target=main, name=f"inspect-agent-{self.name}", daemon=True).start()
        return out

    def _own_evaluation(self, coro_fn) -> None:
        """Run ``coro_fn()`` as the solver of a one-sample inspect evaluation; raise what it raised."""
        import tempfile

        from inspect_ai import Task
        from inspect_ai import eval as inspect_eval
        from inspect_ai.dataset import Sample
        from inspect_ai.solver import solver

        failure: list[BaseException] = []

        @solver(name="heuresis_episode_agent")
        def play():
            async def solve(state, generate):
                try:
                    await coro_fn()
                except BaseException as exc:   # the run's end (_EpisodeOver) or the agent's failure
                    failure.append(exc)
                return state

            return solve

        with tempfile.TemporaryDirectory(prefix="heuresis-inspect-") as logs:
            inspect_eval(Task(dataset=[Sample(input=f"heuresis agent {self.name}")], solver=play()),
                         model=self._bridge_model, log_dir=logs, display="none")
        if failure:
            raise failure[0]

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name=f"inspect-{self.name}", daemon=True).start()
        return self._loop

    def _complete(self, kwargs: dict):
        """Send the request through inspect's ``Model.generate``; the reply as litellm's response.

        With ``solver`` the inspect agent's own messages go, to the model's API directly: the
        agent's request is the one inspect logs (with this reply).
        """
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
            if self._request is not None:
                out = await self.model_object().api.generate(self._request[0], tools,
                                                             choice or ("auto" if tools else "none"), config)
                return out[0] if isinstance(out, tuple) else out
            messages = await im.messages_from_openai(kwargs["messages"], model=self._model)
            return await self.model_object().generate(messages, tools=tools, tool_choice=choice, config=config)

        out = self._await(generate)
        if isinstance(out, Exception):
            raise out
        return _response(out, self._model)

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
        return asyncio.run_coroutine_threadsafe(coro_fn(), self._own_loop()).result()


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


def _described(params):
    """``params`` with every property described (inspect's tools require it; the model is sent the harness's specs)."""
    for name, prop in params.properties.items():
        if not prop.description:
            prop.description = name
    return params


def _same_arguments(sent: str, received: Mapping) -> bool:
    try:
        return json.loads(sent) == dict(received)
    except (ValueError, TypeError):
        return False


def _output(reply: AgentReply, model: str):
    """The harness's reply as inspect's ``ModelOutput`` (what the inspect agent reads)."""
    im = load_inspect()
    from inspect_ai.tool import ToolCall

    calls = []
    for c in reply.message.get("tool_calls") or []:
        raw, error = c["function"]["arguments"], None
        try:
            args = json.loads(raw) if isinstance(raw, str) else dict(raw)
            if not isinstance(args, dict):
                args, error = {}, f"arguments are not an object: {raw[:200]}"
        except ValueError as exc:
            args, error = {}, f"arguments are not valid JSON: {exc}"
        calls.append(ToolCall(id=c["id"], function=c["function"]["name"], arguments=args, parse_error=error))
    u = reply.usage
    usage = None if u.tokens_in is None else im.ModelUsage(
        input_tokens=int(u.tokens_in), output_tokens=int(u.tokens_out or 0),
        total_tokens=int(u.tokens_in) + int(u.tokens_out or 0), total_cost=u.cost)
    message = im.ChatMessageAssistant(content=reply.message.get("content") or "", tool_calls=calls or None,
                                      model=model, source="generate")
    return im.ModelOutput(model=model, usage=usage, choices=[im.ChatCompletionChoice(
        message=message, stop_reason="tool_calls" if calls else "stop")])


def _bridge_class():
    """The model API an inspect agent is given: each request is answered by the harness (made on first use)."""
    im = load_inspect()

    class Bridge(im.ModelAPI):
        def __init__(self, agent: InspectAgent) -> None:   # named as the model it stands for
            super().__init__(agent.model_object().api.model_name, None, None, [], im.GenerateConfig())
            self.agent = agent

        async def generate(self, input, tools, tool_choice, config):
            return await self.agent._ask(input, tools, tool_choice, config)

        def max_connections(self) -> int:
            return 1

    return Bridge


def _Bridge(agent: InspectAgent):
    """The bridge of ``agent``, registered as its model's API (inspect names a model by its API's registration)."""
    from inspect_ai._util.registry import registry_info, set_registry_info

    bridge = _bridge_class()(agent)
    set_registry_info(bridge, registry_info(agent.model_object().api))
    return bridge
