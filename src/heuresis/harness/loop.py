"""The agent loop (docs/design.md §5.1-5.4), used by the episodes and by the games' agentic mode.

One run, in order:

1. a system message and the task prompt (with the task's structured content handed to the
   agent's :meth:`~heuresis.harness.protocol.Agent.observe`);
2. while nothing ended the run and no limit is exhausted: ``agent.respond(messages, tools)``,
   count the turn, execute every tool call and answer each exactly once — the tool's text (or
   an error), followed by the limits' footer when there is one (the episodes' budgets line) —
   and record it; a reply over the output-token limit of a turn has none of its calls
   executed; a text-only reply goes to :meth:`AgentLoop.on_text` (the episodes read it as an
   edge list), else the agent is nudged;
3. on exhaustion, the last-turn rule: ``none`` ends the run, ``once`` offers one turn with only
   ``submit``, ``retry`` the same with one retry after a rejected edge list.

A tool call that ends the run (:attr:`~heuresis.harness.tools.ToolResult.ends`: the episode's
``submit``, the game's ``write_report``) answers the later calls of its turn as not executed.
An exception of the agent ends the run as ``failed`` (:attr:`AgentLoop.failure` holds its
traceback), except :class:`~heuresis.harness.protocol.EpisodeEnd` (the conversation overflowed the
model's context, the client left): the run then ends ``ok`` with the exception's reason as its
termination (and its limit, if one ran out, as the exhausted one), scored like an unsubmitted run.  An exception inside a
tool is answered to the agent as an error and the run goes on.  Once the run is over, the agent
is told so (:meth:`~heuresis.harness.protocol.Agent.end`: the conversation and the termination).

The loop holds the tools, their context and the limits — never the truth: what was submitted
is scored by the caller, after the run (:mod:`heuresis.harness.scoring`).

Usage is recorded as typed records: one :class:`Request` per model request (its turn, wall time
and the agent's :class:`~heuresis.harness.protocol.Usage`) and the :class:`UsageTotals` over a run,
whose cost is ``None`` — unknown — as soon as one request has no known price.  Single requests
outside a loop (the leakage probe, the games' judge and prompting mode) go through
:func:`single_request`, which records the same way.
"""

from __future__ import annotations

import copy
import json
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from heuresis.harness.agent_spec import scrub
from heuresis.harness.conditions import LAST_TURN_REQUESTS, LAST_TURNS
from heuresis.harness.parse import echo
from heuresis.harness.prompts import render
from heuresis.harness.protocol import (
    UNREADABLE_TOOL,
    Agent,
    AgentReply,
    EpisodeEnd,
    FatalAgentError,
    Observation,
    Usage,
    new_conversation,
)
from heuresis.harness.tools import Tool, ToolError, ToolResult

__all__ = ["AgentLoop", "Call", "Exchange", "Request", "TurnLimit", "UsageTotals",
           "single_request"]

#: An error answered to the agent is cut to this many characters (it never echoes a long argument back).
MAX_ERROR = 2000


# --- usage ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One model request as recorded: the turn it belongs to, its wall time and the agent's usage."""

    turn: int
    wall_s: float
    usage: Usage

    def row(self) -> dict:
        """The request as a row of the ``requests`` table (lists as JSON strings)."""
        u = self.usage
        return {"turn": self.turn, "model": u.model, "provider": u.provider, "served_model": u.served_model,
                "response_id": u.response_id, "tokens_in": _tokens(u.tokens_in), "tokens_out": _tokens(u.tokens_out),
                "cached_tokens": _tokens(u.cached_tokens), "cache_write_tokens": _tokens(u.cache_write_tokens),
                "caching": u.caching, "reasoning_tokens": _tokens(u.reasoning_tokens),
                "cost": None if u.cost is None else float(u.cost), "price_source": u.price_source,
                "latency_s": float(u.latency_s or 0.0), "wall_s": round(self.wall_s, 4),
                "charged_s": round(float(self.wall_s if u.charged_s is None else u.charged_s), 4),
                "started": u.started or None, "ended": u.ended or None, "attempts": int(u.retries or 0) + 1,
                "replayed": bool(u.replayed), "abandoned": False,
                "retries": int(u.retries or 0), "retry_log": json.dumps(u.retry_log or []),
                "finish_reason": u.finish_reason, "notes": json.dumps(u.notes or []),
                "warnings": json.dumps(u.warnings or []), "error": u.error or ""}


def _tokens(n: int | None) -> int | None:
    """A token count as recorded: None when it was not reported (never a silent 0)."""
    return None if n is None else int(n)


@dataclass
class UsageTotals:
    """Tokens, cost, retries and warnings over the requests of a run.

    ``cost`` is ``None`` once any request has no known price, and a token total once any
    request did not report its tokens: the total is then unknown, never a partial sum.
    ``warnings`` are unique, in order of first appearance.
    """

    tokens_in: int | None = 0
    tokens_out: int | None = 0
    cost: float | None = 0.0
    retries: int = 0
    warnings: list[str] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)

    def add(self, usage: Usage | None, *, turn: int = 0, wall_s: float = 0.0) -> Request | None:
        """Count one request's usage (None: nothing was reported, nothing is counted)."""
        if usage is None:
            return None
        self.tokens_in = None if self.tokens_in is None or usage.tokens_in is None else self.tokens_in + int(usage.tokens_in)
        self.tokens_out = (None if self.tokens_out is None or usage.tokens_out is None
                           else self.tokens_out + int(usage.tokens_out))
        self.retries += int(usage.retries or 0)
        if usage.cost is None:
            self.cost = None
        elif self.cost is not None:
            self.cost += float(usage.cost)
        for w in usage.warnings or []:
            if w not in self.warnings:
                self.warnings.append(w)
        req = Request(turn, wall_s, usage)
        self.requests.append(req)
        return req


@dataclass
class Exchange:
    """One single request outside a loop: the reply, or the exception that ended it.

    ``usage`` is the reply's usage, or what a failed call reported spending (None when the
    exception carried none); ``failure`` the traceback of a failed call.
    """

    reply: AgentReply | None
    usage: Usage | None
    wall_s: float
    error: Exception | None = None
    failure: str = ""

    @property
    def ok(self) -> bool:
        """Whether the request returned a reply."""
        return self.error is None

    @property
    def ending(self) -> EpisodeEnd | None:
        """The agent's :class:`~heuresis.harness.protocol.EpisodeEnd` (e.g. a full context), else None.

        Not a failure of the infrastructure: the caller records the request as one the agent could
        not answer, with the ending's reason.
        """
        return self.error if isinstance(self.error, EpisodeEnd) else None

    @property
    def cost(self) -> float | None:
        """The request's cost; None when unknown (no price, or a failure that reported nothing)."""
        return None if self.usage is None else self.usage.cost


def single_request(agent: Agent, messages: list[dict], tools: Sequence[dict] = ()) -> Exchange:
    """Send one request (no tools, no conversation memory unless ``messages`` holds it).

    An exception of the agent is caught and returned in the :class:`Exchange`, with the usage
    it carried (:class:`~heuresis.agents.llm.LLMCallError` does) and its traceback.
    """
    t0 = time.monotonic()
    try:
        reply = agent.respond(copy.deepcopy(messages), list(tools))
    except FatalAgentError:   # stops the job (a refused key, a spend limit), never a recorded request
        raise
    except Exception as exc:   # recorded by the caller, never dropped
        return Exchange(None, getattr(exc, "usage", None), time.monotonic() - t0, exc,
                        scrub(traceback.format_exc(limit=8)))
    return Exchange(reply, reply.usage, time.monotonic() - t0)


# --- limits -----------------------------------------------------------------------------------------
class TurnLimit:
    """Limits made of a number of turns only (the games).

    The same interface as :class:`~heuresis.harness.budgets.Budgets` as far as the loop uses it:
    :meth:`exhausted` before every turn, :meth:`record_turn` after every reply.
    """

    def __init__(self, turns: int) -> None:
        self.turns = int(turns)
        self.used_turns = 0
        self.output_tokens_per_turn = None

    def start(self) -> None:
        """The run starts: a turn limit keeps no clock."""

    def exclude(self, seconds: float) -> None:
        """Time not charged to the agent: a turn limit keeps no clock."""

    def exhausted(self) -> str | None:
        """``"turns"`` once every turn is used, else None."""
        return "turns" if self.used_turns >= self.turns else None

    def record_turn(self, output_tokens: int) -> bool:
        """Count one reply; always within the limits (a game sets no output-token limit)."""
        self.used_turns += 1
        return True


# --- the loop ---------------------------------------------------------------------------------------
@dataclass
class Call:
    """One answered tool call (or text reply read as a submission), as the loop recorded it."""

    turn: int
    index: int
    call_id: str
    tool: str
    arguments: str
    result: str
    ok: bool
    error: str
    test_units: int
    wall_s: float
    tokens_in: int
    tokens_out: int
    last_turn: bool
    details: str
    extra: dict = field(default_factory=dict)


class AgentLoop:
    """Turns of ``agent.respond(messages, tools)`` with every tool call answered once and recorded.

    Parameters
    ----------
    agent
        The agent; it sees the messages' text, and its :meth:`~heuresis.harness.protocol.Agent.observe`
        gets the task's and every tool result's structured content.
    tools
        The tools offered, by name.
    ctx
        What the tools act on (passed to :meth:`heuresis.harness.tools.Tool.call`).
    limits
        :class:`~heuresis.harness.budgets.Budgets` or :class:`TurnLimit`.
    last_turn
        The last-turn setting (:data:`~heuresis.harness.conditions.LAST_TURNS`); the last turn
        offers the ``last_turn_tools`` only.
    last_turn_tools
        The tools of the last turn (those of ``tools`` with these names).

    Subclasses say what is specific to a kind of run: :meth:`footer`, :meth:`on_text`,
    :meth:`nudge`, :meth:`call_extra` and the texts of :attr:`ended_text`.
    """

    #: The answer to a call after an earlier call of its turn ended the run.
    ended_text = "not executed: an earlier call of this turn ended the run"
    #: The same in the last turn.
    ended_last_turn_text = "not executed: already submitted"

    def __init__(self, agent: Agent, tools: Mapping[str, Tool], ctx: Any, limits, *, last_turn: str = "none",
                 last_turn_tools: Sequence[str] = ("submit",)) -> None:
        if last_turn not in LAST_TURNS:
            raise ValueError(f"unknown last-turn setting {last_turn!r}; known: {list(LAST_TURNS)}")
        self.agent, self.tools, self.ctx, self.limits, self.last_turn = agent, dict(tools), ctx, limits, last_turn
        self.specs = [t.spec(ctx) for t in self.tools.values()]
        self.last_specs = [self.tools[n].spec(ctx) for n in last_turn_tools if n in self.tools]
        self.messages: list[dict] = []
        self.meta: list[dict] = []      # per message: turn, usage, wall time
        self.calls: list[Call] = []
        self.turn = 0
        self.ended = False
        self.termination = ""
        self.exhausted = ""
        self.status, self.error = "ok", ""
        self.ending = ""                   # the reason of an agent's EpisodeEnd, if one ended the run
        self.failure: dict | None = None   # the traceback of an agent's exception
        self.totals = UsageTotals()

    # --- hooks --------------------------------------------------------------------------------------
    def footer(self) -> tuple[str, dict] | None:
        """Text and data appended to every tool result (None: nothing appended)."""
        return None

    def on_text(self, msg: dict, usage: Usage, *, last_turn: bool) -> str | None:
        """A reply without tool calls: None when it ended the run, else why not (the agent is nudged)."""
        return "no tool call"

    def nudge(self) -> str:
        """The user message after a text-only reply that did not end the run."""
        return render("nudge")

    def call_extra(self) -> dict:
        """Fields recorded with every call, read once it is answered (e.g. the game's stage)."""
        return {}

    def on_result(self, result: ToolResult) -> None:
        """A tool call returned ``result`` (after it was answered)."""

    def before_turn(self) -> None:
        """Called before every turn's request, after the turn is counted; by default nothing.

        The games' agentic mode appends its ReAct instruction here.
        """

    # --- messages -----------------------------------------------------------------------------------
    def add(self, msg: dict, **meta) -> None:
        """Append a message and its record (turn and ``meta``)."""
        self.messages.append(msg)
        self.meta.append({"turn": self.turn, **meta})

    def _footer_text(self, text: str) -> tuple[str, dict | None]:
        foot = self.footer()
        return (text, None) if foot is None else (f"{text}\n{foot[0]}", foot[1])

    def _ask(self, tools: list[dict]) -> tuple[dict, Usage]:
        t0 = time.monotonic()
        try:
            reply = self.agent.respond(copy.deepcopy(self.messages), tools)
        except Exception as exc:   # a call that failed for good: record what it spent, then fail
            self.totals.add(getattr(exc, "usage", None), turn=self.turn, wall_s=time.monotonic() - t0)
            raise
        wall = time.monotonic() - t0
        msg = dict(reply.message)
        msg.setdefault("role", "assistant")
        msg.setdefault("content", None)
        u = reply.usage
        if u.charged_s is not None:   # the provider's waits are not the agent's working time
            self.limits.exclude(wall - float(u.charged_s))
        self.totals.add(u, turn=self.turn, wall_s=wall)
        self.add(msg, usage=u.as_dict(), wall_s=round(wall, 4))
        return msg, u

    def _answer(self, tc: dict, text: str, *, ok: bool, error: str = "", units: int = 0, wall: float = 0.0,
                details: dict | None = None, index: int, usage: Usage | None = None, last_turn: bool = False,
                data: dict | None = None) -> None:
        if not ok and len(text) > MAX_ERROR:      # an error never echoes an agent's long argument back
            text, error = text[:MAX_ERROR] + " [truncated]", error[:MAX_ERROR] + " [truncated]"
        content, budgets = self._footer_text(text)
        call_id = str(tc.get("id", ""))
        self.add({"role": "tool", "tool_call_id": tc.get("id", ""), "content": content})
        fn = tc.get("function") or {}
        tool = str(fn.get("name", ""))
        first = usage is not None and index == 0
        self.calls.append(Call(self.turn, index, call_id, tool, str(fn.get("arguments", "")), content, ok, error,
                               int(units), round(wall, 4), _tokens(usage.tokens_in) if first else 0,  # type: ignore[arg-type, union-attr]
                               _tokens(usage.tokens_out) if first else 0, last_turn,  # type: ignore[arg-type, union-attr]
                               json.dumps(details or {}, default=str), self.call_extra()))
        self.agent.observe(Observation(call_id, tool, ok, copy.deepcopy(data) if ok and data else {}, error,
                                       copy.deepcopy(budgets)))

    def _refuse(self, tc: dict, why: str, **kw) -> str:
        self._answer(tc, f"ERROR: {why}", ok=False, error=why, **kw)
        return why

    def _execute(self, tc: dict, index: int, usage: Usage, *, allowed: set[str], last_turn: bool = False) -> str | None:
        """Run one tool call and answer it; returns the error message of a rejected call."""
        fn = tc.get("function") or {}
        name = fn.get("name")
        t0 = time.monotonic()
        kw = {"index": index, "usage": usage, "last_turn": last_turn}
        if name == UNREADABLE_TOOL:
            try:
                problem = str(json.loads(fn.get("arguments") or "{}").get("problem", "unreadable"))[:300]
            except (ValueError, AttributeError, RecursionError):
                problem = "unreadable"
            return self._refuse(tc, f"could not read the tool call written in your message ({problem}); send it "
                                    f"as a tool call with a JSON object of arguments", **kw)
        if name not in allowed:
            return self._refuse(tc, "only submit is allowed in the last turn" if last_turn else
                                f"unknown tool {echo(name, 80)}; available: {sorted(allowed)}", **kw)
        try:
            out = self.tools[name].call(self.ctx, fn.get("arguments", "{}"))
        except ToolError as exc:
            return self._refuse(tc, str(exc), wall=time.monotonic() - t0, **kw)
        except Exception as exc:  # a bug or a numerical failure in a tool: tell the agent, go on
            return self._refuse(tc, f"internal error in {name}: {type(exc).__name__}: {str(exc)[:500]}",
                                wall=time.monotonic() - t0, details={"traceback": traceback.format_exc(limit=5)},
                                **kw)
        self._answer(tc, out.text, ok=True, units=out.test_units, wall=time.monotonic() - t0, details=out.details,
                     data=out.data, **kw)  # type: ignore[arg-type]
        if out.ends:
            self.ended = True
        self.on_result(out)
        return None

    def _calls_of_turn(self, tcs: list[dict], usage: Usage, *, allowed: set[str], last_turn: bool) -> str | None:
        """Execute the calls of one reply; the first error, if any."""
        error = None
        for k, tc in enumerate(tcs):
            if self.ended:
                why = self.ended_last_turn_text if last_turn else self.ended_text
                self._answer(tc, why, ok=False, error=why, index=k, usage=usage, last_turn=last_turn)
                continue
            err = self._execute(tc, k, usage, allowed=allowed, last_turn=last_turn)
            error = error or err
        return error

    # --- the run ------------------------------------------------------------------------------------
    def run(self, system: str, prompt: str, task: Mapping | None = None) -> None:
        """Run to the end; sets :attr:`termination`, :attr:`exhausted`, :attr:`status` and :attr:`error`."""
        new_conversation()
        self.limits.start()
        self.add({"role": "system", "content": system})
        self.add({"role": "user", "content": prompt})
        foot = self.footer()
        try:
            self.agent.observe(Observation("task", "", True, copy.deepcopy(dict(task or {})), "",
                                           None if foot is None else copy.deepcopy(foot[1])))
            self.exhausted = self._turns()
        except FatalAgentError:   # no run of this agent can go on (a refused key, a spend limit): stop the job
            raise
        except EpisodeEnd as end:  # the agent cannot go on: an ending with its reason, not a failure
            self.termination = self.ending = end.reason
            self.exhausted = end.limit
            self.error = str(end)[:MAX_ERROR]
        except Exception as exc:  # the agent crashed: a recorded failure
            self.status, self.error = "failed", scrub(f"{type(exc).__name__}: {exc}")
            self.termination = "failed"
            self.failure = {"turn": self.turn, "error": scrub(traceback.format_exc(limit=8))}
        self.agent.end(copy.deepcopy(self.messages), self.termination or "unsubmitted")

    def _turns(self) -> str:
        """The turns and, on exhaustion, the last turn; returns the exhausted limit ('' if none)."""
        allowed = set(self.tools)
        while not self.ended:
            reason = self.limits.exhausted()
            if reason:
                break
            self.turn += 1
            self.before_turn()
            msg, usage = self._ask(self.specs)
            within = self.limits.record_turn(int(usage.tokens_out or 0))
            tcs = msg.get("tool_calls") or []
            if not within:
                for k, tc in enumerate(tcs):
                    self._refuse(tc, f"reply exceeded the output-token limit of a turn "
                                     f"({usage.tokens_out} > {self.limits.output_tokens_per_turn}); not executed",
                                 index=k, usage=usage)
                continue
            if tcs:
                self._calls_of_turn(tcs, usage, allowed=allowed, last_turn=False)
                if self.ended:
                    self.termination = "submitted"
            elif self.on_text(msg, usage, last_turn=False) is None:
                self.ended = True
                self.termination = "submitted"
            else:
                self.add({"role": "user", "content": self.nudge()})
        else:
            return ""
        self._last_turn(reason)
        return reason

    def _last_turn(self, reason: str) -> None:
        if self.last_turn == "none":
            self.termination = "unsubmitted"
            return
        self.add({"role": "user", "content": render("last_turn", reason=reason.replace("_", " "))})
        attempts = LAST_TURN_REQUESTS[self.last_turn]
        allowed = {s["function"]["name"] for s in self.last_specs}
        for attempt in range(attempts):
            self.turn += 1
            msg, usage = self._ask(self.last_specs)
            tcs = msg.get("tool_calls") or []
            if tcs:
                error = self._calls_of_turn(tcs, usage, allowed=allowed, last_turn=True)
            else:
                error = self.on_text(msg, usage, last_turn=True)
                self.ended = self.ended or error is None
            if self.ended:
                self.termination = "submitted_last_turn" if attempt == 0 else "submitted_retry"
                return
            if attempt + 1 < attempts:
                self.add({"role": "user", "content": render("retry", error=error or "no edge list found")})
        self.termination = "unsubmitted"

    def transcript_messages(self) -> list[dict]:
        """Every message with its record (turn, usage, wall time) under ``meta``."""
        return [{**m, "meta": meta} for m, meta in zip(self.messages, self.meta)]
