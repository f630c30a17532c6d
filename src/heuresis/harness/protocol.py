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

An agent from outside the package (docs/agents.md, "Your own agent") is named by its class,
``{kind: python, class: "my_pkg.agents:MyAgent", ...}``, or by a kind an installed distribution
registers in the entry-point group ``heuresis.agents`` (:data:`ENTRY_POINT_GROUP`).  Such a
*plugin* is resolved by :func:`agent_class` and built like a built-in kind; it is never
privileged, and :func:`agent_origin` says which class and which
installed distribution it came from, for the records.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, ClassVar

from heuresis.registry import Registry

__all__ = ["AGENTS", "ENTRY_POINT_GROUP", "PYTHON_KIND", "UNREADABLE_TOOL", "Agent", "AgentReply", "AgentSpecError",
           "ContextOverflow", "EpisodeEnd", "FatalAgentError",
           "Observation", "Usage", "agent_class", "agent_origin", "check_agent",
           "is_plugin", "make_agent", "origin_packages", "register_agent", "tool_call"]

#: Name given to a tool call an agent wrote but that could not be read (the harness answers it
#: with the problem, so the model can try again).
UNREADABLE_TOOL = "unreadable_tool_call"


@dataclass
class Usage:
    """What one reply cost (None/0 for offline agents).

    ``tokens_in``/``tokens_out`` are None when the provider reported no usage (the cost is then
    unknown too).  ``charged_s`` is the part of the request's time charged to the agent's
    working time: the successful attempt (None: all of it); failed attempts, backoff and waits
    for the provider are not the agent's time.  ``replayed`` marks a reply answered from the
    episode's request log (paid for by an earlier attempt of the job, not sent again).
    """

    tokens_in: int | None = 0         # None: not reported (an external agent's client said nothing)
    tokens_out: int | None = 0
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
    cached_tokens: int | None = None      # prompt tokens the provider read from its cache
    cache_write_tokens: int | None = None  # prompt tokens the provider wrote to its cache (billed above input)
    caching: str | None = None            # prompt caching: explicit (marked), automatic, off, none
    reasoning_tokens: int | None = None   # completion tokens spent on reasoning
    served_model: str | None = None       # the model the provider says answered (a dated snapshot)
    response_id: str | None = None        # the provider's id of the response
    started: str = ""                     # UTC time the request was first sent
    ended: str = ""                       # UTC time its answer (or final failure) arrived
    charged_s: float | None = None        # seconds charged to the agent's working time
    replayed: bool = False                # answered from the request log, not sent

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


class FatalAgentError(RuntimeError):
    """An error no run of this agent can get past: the job stops naming it.

    An invalid key, an exhausted quota or spend limit, an unknown model: instead of failing every
    episode, the job fails.

    The harness never records it as a failed episode: it propagates out of the loop, the job
    fails, and the workflow stops scheduling new jobs.
    """


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

    def use_records(self, request_log=None, spend_dir=None) -> None:
        """Given the run's request log and spend-ledger folder before the first turn (default: ignored).

        The log (:class:`~heuresis.harness.requestlog.RequestLog`) holds the answers to replay and
        takes every attempt.
        """

    def observe(self, observation: Observation) -> None:
        """Told the structured content of the task and of every tool result (default: ignored).

        Called once the message is added, before the next :meth:`respond`.
        """

    def end(self, messages: list[dict], termination: str) -> None:
        """Told the run ended: the whole conversation and its termination (default: ignored).

        Called once, after the last turn; an agent that serves the run to an outside client
        answers its last call and lets it go (:mod:`heuresis.agents.external`).
        """

    def record(self) -> dict | None:
        """What the agent adds to its run's transcript once the run ended (default: nothing, None)."""
        return None

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


#: The kind naming an outside class by its import path: ``{kind: python, class: "pkg.mod:Class"}``.
PYTHON_KIND = "python"
#: Entry-point group in which installed distributions register agent kinds (``my_kind = "pkg.mod:Class"``).
ENTRY_POINT_GROUP = "heuresis.agents"
#: What an outside class may not declare: the offline baselines' extra input (docs/agents.md).
_WITHHELD = {"privileged": "the episode's unmasking map (masked name -> menu algorithm)"}
_CLASS_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class AgentSpecError(ValueError):
    """An ``agents`` entry that names no buildable agent; the message names the entry.

    :attr:`key` is the entry's key at fault (``kind``, ``class``), empty for its parameters.
    """

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


def _entry_points() -> dict[str, metadata.EntryPoint]:
    """The installed ``heuresis.agents`` entry points by name."""
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _ep_text(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    where = f" of distribution {dist.metadata['Name']} {dist.version}" if dist is not None else ""
    return f"entry point {ep.name} = {ep.value!r} (group {ENTRY_POINT_GROUP}){where}"


def is_plugin(spec: Mapping) -> bool:
    """Whether a config entry names an agent from outside the package (any kind but a built-in one).

    Every built-in kind is in :data:`AGENTS` by then: importing this module runs
    ``heuresis.agents`` first, which registers them all (the games' players too).
    """
    return spec.get("kind") not in AGENTS


def _import_class(name: str, path: object, origin: str, key: str) -> Any:
    """The object at ``"module:attribute"`` ``path`` (``origin`` in messages), or an :class:`AgentSpecError`."""
    if not isinstance(path, str) or not _CLASS_PATH.match(path):
        raise AgentSpecError(f"agent {name!r}: {origin}: {path!r} is not of the form 'package.module:Class'", key)
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:   # ImportError, or whatever the module raised while importing
        raise AgentSpecError(f"agent {name!r}: {origin}: module {module_name!r} cannot be imported "
                             f"({type(exc).__name__}: {exc})", key) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AgentSpecError(f"agent {name!r}: {origin}: module {module_name!r} has no attribute {attr!r}", key)
        obj = getattr(obj, part)
    return obj


def agent_class(name: str, spec: Mapping) -> type[Agent]:
    """The class of agent ``name`` from its config entry: a built-in kind, ``python`` or an entry point.

    A built-in kind is never shadowed: an installed entry point of the same name (or named
    ``python``) is an error naming both, whichever the entry means.  An outside class must be
    an :class:`Agent` subclass that does not declare ``privileged``.

    Raises
    ------
    AgentSpecError
        The kind is unknown, clashes, or the class cannot be imported, is no ``Agent`` or
        asks for what the party under test never gets; the message names the entry.
    """
    kind = spec.get("kind")
    builtin = AGENTS
    eps = _entry_points()
    if kind in eps and (kind in builtin or kind == PYTHON_KIND):
        what = (f"the built-in kind {kind!r} ({_path_of(builtin[kind])})" if kind in builtin
                else f"the kind {PYTHON_KIND!r} that names a class")
        raise AgentSpecError(f"agent {name!r}: kind {kind!r} is both {what} and the installed {_ep_text(eps[kind])}; "
                             "a built-in kind is never replaced: rename the entry point", "kind")
    if kind in builtin:
        return builtin[kind]
    if kind == PYTHON_KIND:
        if "class" not in spec:
            raise AgentSpecError(f"agent {name!r}: kind {PYTHON_KIND!r} needs 'class: \"package.module:Class\"'", "class")
        origin = f"class {spec['class']!r}"
        cls = _import_class(name, spec["class"], origin, "class")
    elif kind in eps:
        cls = _import_class(name, eps[kind].value, _ep_text(eps[kind]), "kind")
        origin = _ep_text(eps[kind])
    else:
        raise AgentSpecError(f"agent {name!r}: unknown kind {kind!r}; known: built-in {sorted(builtin)}, "
                             f"installed entry points {sorted(eps)} (group {ENTRY_POINT_GROUP}), or "
                             f"{PYTHON_KIND!r} with a class (an entry-point kind needs the distribution that "
                             "registers it installed where the workflow runs)", "kind")
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise AgentSpecError(f"agent {name!r}: {origin} is {cls!r}, not a subclass of {_path_of(Agent)}",
                             "class" if kind == PYTHON_KIND else "kind")
    for attr, what in _WITHHELD.items():
        if getattr(cls, attr, False):
            raise AgentSpecError(f"agent {name!r}: {origin} declares {attr} = True, which would give it {what}; "
                                 "only the built-in offline baselines get it, never an agent under test",
                                 "class" if kind == PYTHON_KIND else "kind")
    return cls


def _path_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _params(spec: Mapping) -> dict:
    """The constructor's keyword arguments of a config entry (every key but ``kind`` and ``python``'s ``class``)."""
    drop = {"kind", "class"} if spec.get("kind") == PYTHON_KIND else {"kind"}
    return {k: v for k, v in spec.items() if k not in drop}


def _check_parameters(name: str, cls: type, params: Mapping) -> None:
    """An outside class's constructor accepts ``(name, **params)``; else which parameter is wrong."""
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):   # no signature to read (a C type): the constructor will say
        return
    try:
        sig.bind(name, **params)
    except TypeError as exc:
        raise AgentSpecError(f"agent {name!r}: bad parameters for {_path_of(cls)}: {exc}") from None


def check_agent(name: str, spec: Mapping) -> type[Agent]:
    """The class of a config entry (:func:`agent_class`), a plugin's parameters bound to its signature.

    Builds nothing: an outside constructor may have side effects.

    Raises
    ------
    AgentSpecError
        As :func:`agent_class`, or a plugin's parameter is unexpected or missing (named).
    """
    cls = agent_class(name, spec)
    if is_plugin(spec):
        _check_parameters(name, cls, _params(spec))
    return cls


def agent_origin(name: str, spec: Mapping) -> dict | None:
    """Where a plugin agent's class comes from (None for a built-in kind), for the records.

    ``{"kind", "class": "module:Qualname", "distribution", "version"}``; the distribution is
    the installed one that holds the class's top-level package (None when it is not installed,
    e.g. a module on ``PYTHONPATH``), or the entry point's.
    """
    if not is_plugin(spec):
        return None
    cls = agent_class(name, spec)
    kind = spec.get("kind")
    dist_name = version = None
    ep = _entry_points().get(kind) if kind != PYTHON_KIND else None  # type: ignore[arg-type]
    if ep is not None and getattr(ep, "dist", None) is not None:
        dist_name, version = ep.dist.metadata["Name"], ep.dist.version  # type: ignore[union-attr]
    else:
        dist_name, version = _distribution_of(cls.__module__.split(".")[0])
    return {"kind": kind, "class": _path_of(cls), "distribution": dist_name, "version": version}


@functools.lru_cache(maxsize=64)
def _distribution_of(package: str) -> tuple[str | None, str | None]:
    """(name, version) of the installed distribution holding top-level ``package``; (None, None) if none does.

    Cached: reading every installed distribution's file list takes a third of a second.
    """
    names = metadata.packages_distributions().get(package) or []
    return (names[0], metadata.version(names[0])) if names else (None, None)


def origin_packages(origin: Mapping | None) -> dict[str, str]:
    """``{distribution: version}`` of an :func:`agent_origin` (empty for a built-in kind or no distribution)."""
    if not origin or not origin.get("distribution"):
        return {}
    return {str(origin["distribution"]): str(origin["version"])}


def make_agent(name: str, spec: Mapping, *, algorithm_map: Mapping[str, str] | None = None) -> Agent:
    """Build agent ``name`` from its config entry ``{kind: ..., **params}``.

    The kind is a built-in one (registered by then: importing this module runs
    ``heuresis.agents`` first, which imports every built-in kind), ``python`` with a ``class``,
    or an installed entry point (:func:`agent_class`).  A plugin's instance records the
    config's kind as its :attr:`Agent.kind`.
    """
    cls = check_agent(name, spec)
    params = _params(spec)
    plugin = is_plugin(spec)
    if not plugin and cls.privileged:
        params["algorithm_map"] = dict(algorithm_map or {})
    agent = cls(name, **params)
    if plugin:
        agent.kind = str(spec["kind"])  # type: ignore[misc]
    return agent


#: The numbers :func:`tool_call` gives its ids, counted per conversation (:func:`new_conversation`), so
#: that an episode's transcript does not depend on what its process ran before (a resumed sweep's too).
_call_ids: contextvars.ContextVar[Iterator[int]] = contextvars.ContextVar("heuresis_call_ids")


def new_conversation() -> None:
    """Number the ids :func:`tool_call` writes from ``call_0`` again (the loop calls it as each run starts)."""
    _call_ids.set(itertools.count())


def tool_call(name: str, arguments: Mapping, call_id: str | None = None) -> dict:
    """One tool call in OpenAI format (arguments serialized to a JSON string); ids count within the conversation."""
    import json

    if call_id is None:
        ids = _call_ids.get(None)
        if ids is None:
            new_conversation()
            ids = _call_ids.get()
        call_id = f"call_{next(ids)}"
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(dict(arguments))}}
