"""The agent interface (docs/design.md §5.5) and its registry.

An agent sees OpenAI chat-format messages and tool specs and returns one assistant message::

    reply = agent.respond(messages, tools)   # AgentReply
    reply.message   # {"role": "assistant", "content": str | None,
                    #  "tool_calls": [{"id", "type": "function",
                    #                  "function": {"name", "arguments": <JSON string>}}]}
    reply.usage     # Usage: tokens in/out, cost, latency, retries, model, provider

The harness also hands every agent the structured content of the task and of each tool result
(:meth:`Agent.observe`, an :class:`Observation`): the same facts as the message's text, as
values, never more (no truth, no p-value).  The offline agents read these, not the prose; an LLM
agent ignores them and reads only the text.

Agents register by *kind* (``@register_agent("merge")``); the config's ``agents`` section names
agents and gives each a kind and parameters, e.g. ``merge: {kind: merge, k: 2}``.
:func:`make_agent` builds one per episode.  An agent class may declare itself ``privileged``
(the offline agents do): the harness then passes the episode's unmasking map
(``algorithm_map``: masked name -> menu name) to its constructor and records that it did.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from heuresis.registry import Registry

__all__ = ["AGENTS", "UNREADABLE_TOOL", "Agent", "AgentReply", "ContextOverflow", "EpisodeEnd", "Observation", "Usage",
           "make_agent", "register_agent", "tool_call"]

#: Name given to a tool call an agent wrote but that could not be read (the harness answers it
#: with the problem, so the model can try again).
UNREADABLE_TOOL = "unreadable_tool_call"


@dataclass
class Usage:
    """What one reply cost (None/0 for offline agents)."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = 0.0          # USD; None when the model has no known price (never a silent 0)
    latency_s: float = 0.0
    retries: int = 0
    model: str | None = None
    provider: str | None = None
    warnings: list[str] = field(default_factory=list)
    retry_log: list[dict] = field(default_factory=list)   # one entry per failed attempt
    notes: list[str] = field(default_factory=list)        # recoveries (tool calls from text, repaired JSON)
    finish_reason: str | None = None
    price_source: str = "offline"     # litellm, config, unknown, offline, no reply
    error: str = ""                   # set on a call that failed for good

    def as_dict(self) -> dict:
        """Return the usage as a plain dict (the form episode records store)."""
        return asdict(self)


@dataclass
class AgentReply:
    """One assistant turn: the OpenAI-format message and what producing it cost.

    Attributes
    ----------
    message : dict
        ``{"role": "assistant", "content": str | None, "tool_calls": [...]}``; ``tool_calls`` may
        be absent when the agent answers in prose only.
    usage : Usage
        Tokens, cost, latency and retries of the call that produced ``message``.
    """

    message: dict
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class Observation:
    """The structured content of one message the harness sent: the task, or one tool result.

    ``data`` says what the message's text says, as values (a tool's
    :attr:`~heuresis.harness.tools.ToolResult.data`, or the task's names, starting graph and
    log); empty for a refused call, whose ``error`` is the message answered.  ``budgets`` is
    what remains of every budget (the budgets line of the text), None where there is none.
    """

    key: str                   # "task", or the id of the tool call answered
    tool: str                  # the tool's name ("" for the task)
    ok: bool
    data: dict
    error: str = ""
    budgets: dict | None = None


class EpisodeEnd(Exception):
    """Raised by an agent that cannot go on: the run ends with :attr:`reason` as its termination.

    Not a failure: the run is recorded ``ok`` and scored like an unsubmitted one (the working
    graph of an episode; the game's stage for a play).  :attr:`limit` names the limit that ran
    out, if one did (recorded as the run's exhausted limit); ``usage`` is what the attempt spent.
    """

    reason = "ended"
    limit = ""

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage


class ContextOverflow(EpisodeEnd):
    """The conversation no longer fits the model's context window."""

    reason = "context_overflow"
    limit = "context"


class Agent(ABC):
    """An agent: ``respond(messages, tools) -> AgentReply`` (and, optionally, :meth:`observe`)."""

    kind: ClassVar[str] = ""
    privileged: ClassVar[bool] = False   # receives the unmasking map (baselines only)

    def __init__(self, name: str, **params: Any) -> None:
        self.name = name
        self.params = params

    @abstractmethod
    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """The next assistant message given the conversation so far and the tools offered now."""

    def bind(self, limits: Mapping[str, Any]) -> None:
        """Told the episode's limits (``output_tokens_per_turn``, ...) before the first turn."""

    def observe(self, observation: Observation) -> None:
        """Told the structured content of the task and of every tool result (default: ignored).

        Called once the message is added, before the next :meth:`respond`.
        """

    def end(self, messages: list[dict], termination: str) -> None:
        """Told the run ended: the whole conversation and its termination (default: ignored).

        Called once, after the last turn; an agent that serves the run to an outside client
        answers its last call and lets it go (:mod:`heuresis.agents.external`).
        """

    @property
    def model(self) -> str | None:
        """Name of the model behind the agent (None for offline agents)."""
        return None

    @property
    def provider(self) -> str | None:
        """Provider serving :attr:`model`, as litellm names it (None for offline agents)."""
        return None


AGENTS = Registry("agent kind", Agent, attr="kind")

#: Class decorator: register an :class:`Agent` subclass under a kind (sets ``cls.kind``).
register_agent = AGENTS.register


def make_agent(name: str, spec: Mapping, *, algorithm_map: Mapping[str, str] | None = None) -> Agent:
    """Build agent ``name`` from its config entry ``{kind: ..., **params}``.

    The built-in kinds are registered by then: importing this module runs ``heuresis.agents``
    first, which imports every built-in kind.
    """
    params = dict(spec)
    kind = params.pop("kind", None)
    if kind not in AGENTS:
        raise ValueError(f"agent {name!r}: unknown kind {kind!r}; known: {sorted(AGENTS)}")
    cls = AGENTS.lookup(kind)
    if cls.privileged:
        params["algorithm_map"] = dict(algorithm_map or {})
    return cls(name, **params)


_ids = itertools.count()


def tool_call(name: str, arguments: Mapping, call_id: str | None = None) -> dict:
    """One tool call in OpenAI format (arguments serialized to a JSON string)."""
    import json

    return {"id": call_id or f"call_{next(_ids)}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(dict(arguments))}}
