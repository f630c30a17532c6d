"""One episode (docs/design.md §5.1-5.4): prompt, turns of tool calls, budgets, last turn, score.

The loop, in order:

1. build the prompt (level 0-3 templates, stated target, guided start and deletion log, limits);
2. while no budget is exhausted and nothing is submitted: ``agent.respond(messages, tools)``,
   count the turn, execute every tool call and answer each exactly once (tool result + the
   budgets line); a text-only reply is read as a submission if it holds an edge list, else
   nudged;
3. on exhaustion, the last-turn setting: ``none`` ends the episode, ``once`` offers one turn
   with only ``submit``, ``retry`` the same with one retry after a rejected edge list;
4. the submitted graph — or, unsubmitted, the working graph (flagged unfinished) — is scored
   with :func:`heuresis.metrics.score_graph`.

:func:`run_episode` returns an :class:`EpisodeOutcome`: the ``episodes`` row, the ``calls`` rows
and the JSON transcript (every message with its usage, every call with arguments, result, test
units charged and wall time).  An exception of the agent ends the episode as ``failed`` with its
error; an exception inside a tool is answered to the agent as an error and the episode goes on.
"""

from __future__ import annotations

import copy
import hashlib
import json
import string
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from heuresis.agents.base import UNREADABLE_TOOL, Agent, make_agent
from heuresis.graph import Graph
from heuresis.harness.budgets import Budgets, BudgetSettings
from heuresis.harness.conditions import Condition
from heuresis.harness.parse import ParseError, echo, parse_edge_list
from heuresis.harness.prompts import LAST_TURN_TEXT, render
from heuresis.harness.sandbox import SandboxLimits, isolation_for
from heuresis.harness.tools import TOOLS, ToolContext, ToolError, toolbox
from heuresis.metrics import score_graph

__all__ = [
    "EpisodeInput",
    "EpisodeOutcome",
    "EpisodeSettings",
    "algorithm_mapping",
    "build_prompt",
    "episode_seed",
    "run_episode",
]


@dataclass
class EpisodeInput:
    """One instance as the harness sees it (the truth only for scoring, never shown)."""

    family: str
    split: str
    instance: int
    instance_id: str
    data: np.ndarray
    true_dag: Graph
    true_cpdag: Graph
    pc_kci_graph: Graph                       # PC-KCI's output (references stage)
    pc_kci_tests: int                         # its CI-test count: sizes the test budget
    pc_kci_deletions: Sequence[Mapping] = ()  # its deletion log; the `wrong` label is dropped here


@dataclass(frozen=True)
class EpisodeSettings:
    budget: BudgetSettings
    menu: Mapping[str, Mapping]
    grades: tuple[tuple[float, str], ...]
    alpha: float = 0.05
    code_limits: SandboxLimits = SandboxLimits()
    code_isolation: str = "required"          # config episodes.code_tool.isolation


@dataclass
class EpisodeOutcome:
    row: dict
    calls: list[dict]
    transcript: dict
    requests: list[dict] = field(default_factory=list)   # one row per model request (:data:`REQUESTS`)


def episode_seed(global_seed: int, agent: str, condition_id: str, instance_id: str) -> int:
    """Seed of an episode (masking, subsamples), stable across runs and machines."""
    h = hashlib.sha256(f"{global_seed}/{agent}/{condition_id}/{instance_id}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def algorithm_mapping(menu: Sequence[str], rng: np.random.Generator) -> dict[str, str]:
    """Masked names ``algorithm_A``.. assigned to the menu in a fresh random order."""
    order = rng.permutation(len(menu))
    letters = string.ascii_uppercase
    return {f"algorithm_{letters[k]}": menu[int(j)] for k, j in enumerate(order)}


def _log_lines(deletions: Sequence[Mapping]) -> str:
    lines = [f"{d['x']} -- {d['y']} | given {{{', '.join(d['sepset'])}}} | {d['test']} | {d['grade']}"
             for d in deletions]
    return "\n".join(lines) if lines else "(no deletions)"


def build_prompt(cond: Condition, inp: EpisodeInput, names: Sequence[str], masked: Sequence[str],
                 budgets: Budgets) -> str:
    """The first user message of an episode."""
    d = len(names)
    start = render("start_guided" if cond.guided else "start_unguided")
    parts = [render("level0", n=inp.data.shape[0], d=d, names=f"{names[0]}..{names[-1]}", start_text=start,
                    algorithms=", ".join(sorted(masked)), limits=budgets.line())]
    if cond.prompt_level >= 1:
        parts.append(render("level1", last_turn_text=LAST_TURN_TEXT[cond.last_turn]))
    if cond.prompt_level >= 2:
        parts.append(render("level2"))
    if cond.prompt_level >= 3:
        parts.append(render("level3"))
    target = render(f"target_{cond.target}")
    if target:
        parts.append(target)
    if cond.guided:
        lines = inp.pc_kci_graph.to_lines()
        parts.append(render("guided_log", n_edges=len(lines), start_edges="\n".join(lines) or "(no edges)",
                            n_deletions=len(inp.pc_kci_deletions), deletion_log=_log_lines(inp.pc_kci_deletions)))
    return "\n\n".join(parts)


def _agent_visible_log(deletions: Sequence[Mapping]) -> list[dict]:
    """Pair, conditioning set, test, grade: never the p-value, never the `wrong` label."""
    return [{"x": d["x"], "y": d["y"], "sepset": list(d["sepset"]), "test": d["test"], "grade": d["grade"]}
            for d in deletions]


_MAX_ERROR = 2000


class _Episode:
    def __init__(self, agent: Agent, cond: Condition, inp: EpisodeInput, settings: EpisodeSettings,
                 seed: int, amap: dict[str, str]) -> None:
        self.agent, self.cond, self.inp, self.settings, self.seed = agent, cond, inp, settings, seed
        d = inp.data.shape[1]
        names = tuple(f"X{k + 1}" for k in range(d))
        self.budgets = Budgets(settings.budget, inp.pc_kci_tests)
        start = inp.pc_kci_graph.copy() if cond.guided else Graph.complete(d)
        self.tools = {t.name: t for t in toolbox(cond.toolbox)}
        # the isolation the code tool gets; 'required' without bubblewrap raises here (fail closed)
        self.code_isolation = isolation_for(settings.code_isolation) if "run_code" in self.tools else "off"
        if self.code_isolation == "off":
            self.tools.pop("run_code", None)
        self.ctx = ToolContext(data=inp.data, names=names, working=start, budgets=self.budgets, algorithm_map=amap,
                               menu=settings.menu, grades=settings.grades, alpha=settings.alpha,
                               code_limits=settings.code_limits, code_isolation=self.code_isolation,
                               rng=np.random.default_rng(seed))
        self.specs = [t.spec(self.ctx) for t in self.tools.values()]
        self.submit_spec = [TOOLS["submit"].spec(self.ctx)]
        self.messages: list[dict] = []
        self.meta: list[dict] = []     # per message: turn, usage, wall time
        self.calls: list[dict] = []
        self.turn = 0
        self.submitted: Graph | None = None
        self.termination = ""
        self.tokens_in = self.tokens_out = 0
        self.cost = 0.0
        self.cost_unknown = False      # some reply had no known price: the total is unknown, not 0
        self.warnings: list[str] = []
        self.requests: list[dict] = []

    # --- messages ------------------------------------------------------------------------------
    def _add(self, msg: dict, **meta) -> None:
        self.messages.append(msg)
        self.meta.append({"turn": self.turn, **meta})

    def _account(self, u, wall: float) -> None:
        """Add one model request to the totals and the request record."""
        self.tokens_in += int(u.tokens_in or 0)
        self.tokens_out += int(u.tokens_out or 0)
        if u.cost is None:
            self.cost_unknown = True
        else:
            self.cost += float(u.cost)
        self.warnings += list(u.warnings or [])
        self.requests.append({"turn": self.turn, "model": u.model, "provider": u.provider,
                              "tokens_in": int(u.tokens_in or 0), "tokens_out": int(u.tokens_out or 0),
                              "cost": None if u.cost is None else float(u.cost), "price_source": u.price_source,
                              "latency_s": float(u.latency_s or 0.0), "wall_s": round(wall, 4),
                              "retries": int(u.retries or 0), "retry_log": json.dumps(u.retry_log or []),
                              "finish_reason": u.finish_reason, "notes": json.dumps(u.notes or []),
                              "warnings": json.dumps(u.warnings or []), "error": u.error or ""})

    def _ask(self, tools: list[dict]):
        t0 = time.monotonic()
        try:
            reply = self.agent.respond(copy.deepcopy(self.messages), tools)
        except Exception as exc:   # a call that failed for good: record what it spent, then fail
            u = getattr(exc, "usage", None)
            if u is not None:
                self._account(u, time.monotonic() - t0)
            raise
        wall = time.monotonic() - t0
        msg = dict(reply.message)
        msg.setdefault("role", "assistant")
        msg.setdefault("content", None)
        u = reply.usage
        self._account(u, wall)
        self._add(msg, usage=u.as_dict(), wall_s=round(wall, 4))
        return msg, u

    def _answer(self, tc: dict, text: str, *, ok: bool, error: str = "", units: int = 0, wall: float = 0.0,
                details: dict | None = None, index: int, usage=None, last_turn: bool = False) -> None:
        if not ok and len(text) > _MAX_ERROR:      # an error never echoes an agent's long argument back
            text, error = text[:_MAX_ERROR] + " [truncated]", error[:_MAX_ERROR] + " [truncated]"
        content = f"{text}\n{self.budgets.line()}"
        self._add({"role": "tool", "tool_call_id": tc.get("id", ""), "content": content})
        fn = tc.get("function") or {}
        self.calls.append({"turn": self.turn, "index": index, "call_id": str(tc.get("id", "")),
                           "tool": str(fn.get("name", "")), "arguments": str(fn.get("arguments", "")),
                           "result": content, "ok": ok, "error": error, "test_units": int(units),
                           "wall_s": round(wall, 4), "tokens_in": int(usage.tokens_in) if usage and index == 0 else 0,
                           "tokens_out": int(usage.tokens_out) if usage and index == 0 else 0,
                           "last_turn": last_turn, "details": json.dumps(details or {}, default=str)})

    def _execute(self, tc: dict, index: int, usage, *, allowed: set[str], last_turn: bool = False) -> str | None:
        """Run one tool call and answer it; returns the error message of a rejected call."""
        fn = tc.get("function") or {}
        name = fn.get("name")
        t0 = time.monotonic()
        if name == UNREADABLE_TOOL:
            try:
                problem = str(json.loads(fn.get("arguments") or "{}").get("problem", "unreadable"))[:300]
            except (ValueError, AttributeError, RecursionError):
                problem = "unreadable"
            why = (f"could not read the tool call written in your message ({problem}); send it as a tool call "
                   f"with a JSON object of arguments")
            self._answer(tc, f"ERROR: {why}", ok=False, error=why, index=index, usage=usage, last_turn=last_turn)
            return why
        if name not in allowed:
            why = ("only submit is allowed in the last turn" if last_turn else
                   f"unknown tool {echo(name, 80)}; available: {sorted(allowed)}")
            self._answer(tc, f"ERROR: {why}", ok=False, error=why, index=index, usage=usage, last_turn=last_turn)
            return why
        try:
            out = TOOLS[name].call(self.ctx, fn.get("arguments", "{}"))
        except ToolError as exc:
            self._answer(tc, f"ERROR: {exc}", ok=False, error=str(exc), wall=time.monotonic() - t0, index=index,
                         usage=usage, last_turn=last_turn)
            return str(exc)
        except Exception as exc:  # a bug or a numerical failure in a tool: tell the agent, go on
            msg = f"internal error in {name}: {type(exc).__name__}: {str(exc)[:500]}"
            self._answer(tc, f"ERROR: {msg}", ok=False, error=msg, wall=time.monotonic() - t0, index=index,
                         usage=usage, last_turn=last_turn, details={"traceback": traceback.format_exc(limit=5)})
            return msg
        self._answer(tc, out.text, ok=True, units=out.test_units, wall=time.monotonic() - t0, details=out.details,
                     index=index, usage=usage, last_turn=last_turn)
        if out.submitted is not None:
            self.submitted = out.submitted
        return None

    def _text_submission(self, msg: dict, usage, *, last_turn: bool) -> str | None:
        text = msg.get("content") or ""
        try:
            g = parse_edge_list(text, self.ctx.names)
        except ParseError as exc:
            err = str(exc)
            self.calls.append({"turn": self.turn, "index": 0, "call_id": "", "tool": "(text)", "arguments": text,
                               "result": f"ERROR: {err}", "ok": False, "error": err, "test_units": 0, "wall_s": 0.0,
                               "tokens_in": int(usage.tokens_in), "tokens_out": int(usage.tokens_out),
                               "last_turn": last_turn, "details": "{}"})
            return err
        self.calls.append({"turn": self.turn, "index": 0, "call_id": "", "tool": "(text)", "arguments": text,
                           "result": f"submitted {g.n_edges()} edges", "ok": True, "error": "", "test_units": 0,
                           "wall_s": 0.0, "tokens_in": int(usage.tokens_in), "tokens_out": int(usage.tokens_out),
                           "last_turn": last_turn, "details": json.dumps({"edges": g.to_lines()})})
        self.submitted = g
        return None

    # --- the loop ----------------------------------------------------------------------------------
    def run(self, prompt: str) -> str:
        """Run to the end; returns the exhausted budget ('' if the agent submitted in time)."""
        self._add({"role": "system", "content": render("system")})
        self._add({"role": "user", "content": prompt})
        allowed = set(self.tools)
        while self.submitted is None:
            reason = self.budgets.exhausted()
            if reason:
                break
            self.turn += 1
            msg, usage = self._ask(self.specs)
            within = self.budgets.record_turn(int(usage.tokens_out or 0))
            tcs = msg.get("tool_calls") or []
            if not within:
                for k, tc in enumerate(tcs):
                    why = (f"reply exceeded the output-token limit of a turn "
                           f"({usage.tokens_out} > {self.budgets.output_tokens_per_turn}); not executed")
                    self._answer(tc, f"ERROR: {why}", ok=False, error=why, index=k, usage=usage)
                continue
            if tcs:
                for k, tc in enumerate(tcs):
                    if self.submitted is not None:
                        why = "not executed: the episode was submitted by an earlier call of this turn"
                        self._answer(tc, why, ok=False, error=why, index=k, usage=usage)
                    else:
                        self._execute(tc, k, usage, allowed=allowed)
                if self.submitted is not None:
                    self.termination = "submitted"
            elif self._text_submission(msg, usage, last_turn=False) is None:
                self.termination = "submitted"
            else:
                self._add({"role": "user", "content": render("nudge")})
        else:
            return ""
        return self._last_turn(reason)

    def _last_turn(self, reason: str) -> str:
        if self.cond.last_turn == "none":
            self.termination = "unsubmitted"
            return reason
        self._add({"role": "user", "content": render("last_turn", reason=reason.replace("_", " "))})
        attempts = 2 if self.cond.last_turn == "retry" else 1
        for attempt in range(attempts):
            self.turn += 1
            msg, usage = self._ask(self.submit_spec)
            tcs = msg.get("tool_calls") or []
            error = None
            if tcs:
                for k, tc in enumerate(tcs):
                    if self.submitted is not None:
                        why = "not executed: already submitted"
                        self._answer(tc, why, ok=False, error=why, index=k, usage=usage, last_turn=True)
                        continue
                    err = self._execute(tc, k, usage, allowed={"submit"}, last_turn=True)
                    error = error or err
            else:
                error = self._text_submission(msg, usage, last_turn=True)
            if self.submitted is not None:
                self.termination = "submitted_last_turn" if attempt == 0 else "submitted_retry"
                return reason
            if attempt + 1 < attempts:
                self._add({"role": "user", "content": render("retry", error=error or "no edge list found")})
        self.termination = "unsubmitted"
        return reason


def run_episode(agent_name: str, agent_spec: Mapping, cond: Condition, inp: EpisodeInput,
                settings: EpisodeSettings, seed: int) -> EpisodeOutcome:
    """Run one episode of agent ``agent_name`` (config entry ``agent_spec``) under ``cond``."""
    t0 = time.monotonic()
    rng = np.random.default_rng(seed)
    amap = algorithm_mapping(list(settings.menu), rng)
    agent = make_agent(agent_name, agent_spec, algorithm_map=amap)
    ep = _Episode(agent, cond, inp, settings, int(rng.integers(2**32)), amap)
    agent.bind(ep.budgets.limits())
    status, error, exhausted = "ok", "", ""
    prompt = build_prompt(cond, inp, ep.ctx.names, list(amap), ep.budgets)
    try:
        exhausted = ep.run(prompt)
    except Exception as exc:  # the agent crashed: a recorded failure, scored on the working graph
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        ep.termination = "failed"
        ep.meta.append({"turn": ep.turn, "error": traceback.format_exc(limit=8)})
    final = ep.submitted if ep.submitted is not None else ep.ctx.working
    s = score_graph(inp.true_dag, inp.true_cpdag, final)
    pc = score_graph(inp.true_dag, inp.true_cpdag, inp.pc_kci_graph)
    episode_id = f"{agent_name}/{cond.condition_id}/{inp.instance_id}"
    row = {
        "episode_id": episode_id, "agent": agent_name, "agent_kind": agent.kind, "model": agent.model,
        "provider": agent.provider, "privileged": bool(agent.privileged), **cond.as_dict(),
        "family": inp.family, "split": inp.split, "instance": inp.instance, "instance_id": inp.instance_id,
        "seed": int(seed), "algorithm_map": json.dumps(amap, sort_keys=True), "status": status, "error": error,
        "finished": ep.submitted is not None, "termination": ep.termination or "unsubmitted", "exhausted": exhausted,
        "graph": final.amat.ravel().tolist(), "edges": "; ".join(final.to_lines()),
        "f1": s.f1, "precision": s.precision, "recall": s.recall, "shd": s.shd, "nshd": s.nshd, "n_edges": s.n_edges,
        "pc_kci_f1": pc.f1, "turns": ep.turn, "n_calls": len(ep.calls),
        "n_errors": sum(not c["ok"] for c in ep.calls),
        "test_units_used": ep.budgets.used_test_units, "test_units_limit": ep.budgets.test_units,
        "algorithm_calls_used": ep.budgets.used_algorithm_calls, "algorithm_calls_limit": ep.budgets.algorithm_calls,
        "turns_limit": ep.budgets.turns, "wall_s": round(time.monotonic() - t0, 3),
        "tokens_in": ep.tokens_in, "tokens_out": ep.tokens_out,
        "cost": None if ep.cost_unknown else ep.cost, "retries": sum(r["retries"] for r in ep.requests),
        "warnings": "; ".join(dict.fromkeys(ep.warnings)), "code_isolation": ep.code_isolation,
    }
    calls = [{"episode_id": episode_id, "agent": agent_name, "condition_id": cond.condition_id,
              "family": inp.family, "split": inp.split, "instance": inp.instance, **c} for c in ep.calls]
    transcript = {
        "episode": row, "condition": cond.as_dict(), "budgets": {"limits": ep.budgets.limits(), "used": ep.budgets.used(),
                                                                  "setting": ep.budgets.settings.name},
        "algorithm_map": amap, "algorithm_map_given_to_agent": bool(agent.privileged),
        "start_graph": ("pc_kci" if cond.guided else "complete"),
        "deletion_log_shown": _agent_visible_log(inp.pc_kci_deletions) if cond.guided else None,
        "tools": ep.specs,
        "messages": [{**m, "meta": meta} for m, meta in zip(ep.messages, ep.meta)],
        "calls": ep.calls,
    }
    if len(ep.meta) > len(ep.messages):
        transcript["error"] = ep.meta[-1]
    transcript["requests"] = ep.requests
    requests = [{"episode_id": episode_id, "agent": agent_name, "condition_id": cond.condition_id,
                 "family": inp.family, "split": inp.split, "instance": inp.instance, "index": k, **r}
                for k, r in enumerate(ep.requests)]
    return EpisodeOutcome(row, calls, transcript, requests)
