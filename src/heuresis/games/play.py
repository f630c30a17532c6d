"""One play of a scenario by an agent (docs/games.md §4), recorded call by call, in one of two modes.

**tools** (multi-turn tool use).  The agent loop of the observational harness
(:class:`heuresis.harness.loop.AgentLoop`) with the game's tools and a turn limit: a system and a
task prompt, then turns of ``agent.respond(messages, tools)``; every tool call is executed and
answered exactly once (result or error) and recorded with its arguments, result, the game's stage
after it and its wall time.  A text-only reply is nudged.  The play ends when the report is
written, or at the turn limit (then the play is ``unsubmitted`` — survival 0, not won — or
``no_report``).  An exception of the agent ends the play as ``failed``; an exception inside a tool
is answered as an error.  An agent that cannot go on (its context window is full:
:class:`~heuresis.agents.base.EpisodeEnd`) ends the play before the report with that reason as
its termination (``context_overflow``), scored by the stage it reached, in both modes.

**prompt** (single-turn prompting, LLM agents).  No tools and no conversation memory: every
decision is one request whose single prompt holds the rules, the budget left and the *whole*
history observed so far (free history and the agent's own deployments, per-drone rows as CSV),
and whose answer is one JSON object — ``{"action": "deploy", "design": .., "count": n}`` or
``{"action": "submit", "design": .., "report": ".."}``.  The answer is read tolerantly
(:func:`parse_answer`: reasoning blocks, code fences, prose around the object, Python literals,
trailing commas, numbers as strings, case of component names); an answer that still cannot be
read, or that the game refuses (a design over a cap, a deployment beyond the budget), ends the
play as ``bad_answer`` — unsubmitted, survival 0 — with the problem recorded.  At most
``stage1_deployments + 1`` requests are made.

:func:`run_play` returns a :class:`PlayOutcome`: the ``game_plays`` row (survival, win, gap to
the optimum, configuration path), the ``game_calls`` rows and the JSON transcript.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field

from heuresis.agents.base import FatalAgentError, agent_class, agent_origin, make_agent
from heuresis.agents.llm import repair_arguments
from heuresis.games.game import Game, GameError
from heuresis.games.scenario import Scenario
from heuresis.games.tools import game_tools, rows_csv
from heuresis.harness.loop import AgentLoop, TurnLimit, UsageTotals, single_request
from heuresis.harness.prompts import render

__all__ = [
    "DEFAULT_MAX_TURNS",
    "OUTPUT_TOKENS",
    "AnswerError",
    "PlayOutcome",
    "json_objects",
    "parse_answer",
    "path_stats",
    "prompt_request",
    "run_play",
    "task_prompt",
]

DEFAULT_MAX_TURNS = 40
#: Output tokens per reply of an LLM agent whose config entry sets no max_tokens.
OUTPUT_TOKENS = 4000
NUDGE = "Act through the tools: deploy, submit_final_design, then write_report."


@dataclass
class PlayOutcome:
    """What a play produced: its ``game_plays`` row, ``game_calls`` rows, transcript and ``requests`` rows."""

    row: dict
    calls: list[dict]
    transcript: dict
    requests: list[dict] = field(default_factory=list)   # one row per model request (GAME_PLAY_REQUESTS)


def task_prompt(game: Game) -> str:
    """The task prompt of the tools mode: rules, design space, budgets, free history."""
    scn, space, b = game.scn, game.space, game.scn.budgets
    comps = ", ".join(f"{c} (cap {k})" for c, k in zip(space.components, space.caps))
    eq = "".join(f" Equipment: {e} (costs {k} DEF points)." for e, k in zip(space.equipment, space.costs))
    n_hist = sum(h.count for h in game.history)
    history = (f"\nA free history of {n_hist} earlier flights (flown before you arrived, with designs you can see in "
               f"get_history) is available at no cost." if n_hist else "\nThere is no earlier flight history.")
    details = ("per-drone rows are shown for returned drones only" if scn.spec["selection_bias"]
               else "per-drone rows are shown for every drone, with its status")
    thr = f"; you win at or above {game.threshold:.1%}" if game.threshold is not None else ""
    example = json.dumps(dict.fromkeys(space.components[:3], 1))
    return render("game_task", budget=space.budget, components=comps, equipment=eq, visible=", ".join(
        scn.visible_variables()), details=details, history=history, stage1_drones=b["stage1_drones"],
        stage1_deployments=b["stage1_deployments"], max_per_deployment=b["max_per_deployment"],
        fleet=b["stage2_fleet"], threshold_text=thr, example=example)


def path_stats(game: Game) -> dict:
    """Configuration-path statistics of a play (judge-independent, docs/games.md §5)."""
    deps = game.deployments
    designs = [json.dumps(d.design, sort_keys=True) for d in deps]
    rates = [d.returned / d.count for d in deps]
    out = {"designs_deployed": json.dumps([d.design for d in deps]), "distinct_designs": len(set(designs)),
           "deployment_counts": json.dumps([[d.count, d.returned] for d in deps]),
           "best_observed_design": "", "best_observed_rate": float("nan"), "submitted_is_best_observed": None,
           "lock_in_component": "", "lock_in_share": float("nan"), "drift_from_best": float("nan")}
    if not deps:
        return out
    best = max(range(len(deps)), key=lambda k: (rates[k], deps[k].count))
    out["best_observed_design"] = designs[best]
    out["best_observed_rate"] = rates[best]
    if game.stage2 is not None:
        sub = json.dumps(game.stage2.design, sort_keys=True)
        out["submitted_is_best_observed"] = sub == designs[best]
        vec = game.space.vector
        out["drift_from_best"] = float(abs(vec(game.stage2.design) - vec(deps[best].design)).sum())
    # lock-in: the component that holds the largest share of DEF across every deployed design
    tot = sum(game.space.vector(d.design)[:game.space.n_components] for d in deps)
    if tot.sum() > 0:
        k = int(tot.argmax())
        out["lock_in_component"] = game.space.components[k]
        out["lock_in_share"] = float(tot[k] / tot.sum())
    return out


def run_play(agent_name: str, agent_spec: Mapping, scn: Scenario, *, repeat: int = 0, seed: int = 0,
             threshold: float | None = None, optimum: float | None = None,
             max_turns: int = DEFAULT_MAX_TURNS, mode: str = "tools") -> PlayOutcome:
    """Agent ``agent_name`` (config entry ``agent_spec``) plays ``scn`` once in ``mode``."""
    import heuresis.games.agents  # noqa: F401  (registers the offline game agents)

    if mode not in ("tools", "prompt"):
        raise ValueError(f"unknown play mode {mode!r}; known: tools, prompt")
    t0 = time.monotonic()
    spec = dict(agent_spec)
    cls = agent_class(agent_name, spec)
    if getattr(cls, "takes_seed", False):   # offline game agents (and plugins that ask) draw from the play seed
        if mode != "tools":
            raise ValueError(f"agent {agent_name!r} (kind {spec.get('kind')!r}) plays the tools mode only; "
                             f"single-turn prompting is for LLM agents")
        spec.setdefault("seed", int(seed))
    if getattr(cls, "takes_family", False):  # the mechanism-aware offline agent: the family's
        spec.setdefault("family", scn.family)  # name (its structure), no parameter
    agent = make_agent(agent_name, spec)
    agent.bind({"output_tokens_per_turn": OUTPUT_TOKENS})
    game = Game(scn, seed=seed, threshold=threshold)
    play = _play_tools if mode == "tools" else _play_prompt
    calls, transcript, turn, status, error, termination, spend = play(agent, game, max_turns)
    s2 = game.stage2
    survival = s2.survival if s2 else 0.0
    play_id = f"{agent_name}/{mode}/{scn.name}/r{repeat}"
    row = {
        "play_id": play_id, "agent": agent_name, "agent_kind": agent.kind, "model": agent.model, "mode": mode,
        "scenario": scn.name, "family": scn.family, "variant": scn.spec["variant"], "bias": scn.spec["bias"],
        "repeat": int(repeat), "seed": int(seed), "status": status, "error": error, "termination": termination,
        "submitted": s2 is not None, "design": json.dumps(s2.design if s2 else None),
        "survival": float(survival), "threshold": threshold, "won": bool(s2 is not None and threshold is not None
                                                                          and survival >= threshold),
        "optimum": optimum, "gap": (optimum - survival) if optimum is not None else None,
        "deployments": len(game.deployments), "drones_used": game.drones_used,
        **path_stats(game), "report": game.report or "", "turns": turn, "n_calls": len(calls),
        "n_errors": sum(not c["ok"] for c in calls), "tokens_in": spend.tokens_in, "tokens_out": spend.tokens_out,
        "cost": spend.cost, "retries": spend.retries, "warnings": json.dumps(spend.warnings),
        "wall_s": round(time.monotonic() - t0, 3),
    }
    transcript = {"play": row, "agent_origin": agent_origin(agent_name, agent_spec), "scenario": scn.spec,
                  **transcript, "calls": calls}   # agent_origin: a plugin's class and distribution (None: built-in)
    keys = {"play_id": play_id, "agent": agent_name, "mode": mode, "scenario": scn.name, "repeat": int(repeat)}
    requests = [{**keys, "index": k, **r.row()} for k, r in enumerate(spend.requests)]
    return PlayOutcome(row, [{**keys, **c} for c in calls], transcript, requests)


def _termination(game: Game, ended: str = "") -> str:
    """The play's termination from its stage; an agent's ending (``ended``) before the report replaces it."""
    if ended and game.stage != "done":
        return ended
    return {"done": "reported", "report": "no_report", "stage1": "unsubmitted"}[game.stage]


class _Play(AgentLoop):
    """The agent loop with the game's tools and a turn limit (no budgets line, no last turn)."""

    ended_text = "not executed: the report, written by an earlier call of this turn, ended the play"

    def __init__(self, agent, game: Game, max_turns: int) -> None:
        super().__init__(agent, game_tools(game), None, TurnLimit(max_turns))
        self.game = game

    def nudge(self) -> str:
        """Act through the tools."""
        return NUDGE

    def call_extra(self) -> dict:
        """The game's stage after the call."""
        return {"stage": self.game.stage}

    def call_rows(self) -> list[dict]:
        """The calls as rows of the ``game_calls`` table (without the play's keys)."""
        return [{"turn": c.turn, "index": c.index, "call_id": c.call_id, "tool": c.tool, "arguments": c.arguments,
                 "result": c.result, "ok": c.ok, "error": c.error, "stage": c.extra["stage"], "wall_s": c.wall_s,
                 "details": c.details} for c in self.calls]


def _play_tools(agent, game: Game, max_turns: int):
    """Multi-turn tool use: (calls, transcript part, turns, status, error, termination, usage totals)."""
    loop = _Play(agent, game, max_turns)
    loop.run(render("game_system"), task_prompt(game))
    termination = loop.status if loop.status == "failed" else _termination(game, loop.ending)
    part = {"tools": loop.specs, "messages": loop.transcript_messages()}
    if agent.record() is not None:   # an external agent's command: its exit status and output
        part["agent_record"] = agent.record()
    return loop.call_rows(), part, loop.turn, loop.status, loop.error, termination, loop.totals


# --- single-turn prompting ------------------------------------------------------------------------
class AnswerError(ValueError):
    """A prompt-mode answer that cannot be read as a decision."""


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCED = re.compile(r"```(?:json|JSON|python)?\s*(.*?)```", re.S)


def json_objects(text: str) -> list[str]:
    """Every balanced ``{...}`` span of ``text`` that starts at top level, in order."""
    out, depth, start, in_str, esc = [], 0, None, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
    return out


def _number(value, what: str) -> int:
    if isinstance(value, bool):
        raise AnswerError(f"{what}: expected a whole number, got {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise AnswerError(f"{what}: expected a whole number, got {value!r}") from None
    if not isinstance(value, (int, float)) or float(value) != int(value):
        raise AnswerError(f"{what}: expected a whole number, got {value!r}")
    return int(value)


def _design(obj: Mapping, space) -> dict:
    raw = obj.get("design")
    if raw is None:   # the design written at top level
        raw = {k: v for k, v in obj.items() if str(k).strip().lower() in space.components + space.equipment}
    if not isinstance(raw, Mapping) or not raw:
        raise AnswerError("the answer has no design object")
    out: dict = {}
    for k, v in raw.items():
        key = str(k).strip().lower()
        if key in space.equipment:
            if isinstance(v, str) and v.strip().lower() in ("true", "yes", "fitted", "1", "false", "no", "0"):
                v = v.strip().lower() in ("true", "yes", "fitted", "1")
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and v in (0, 1):
                v = bool(v)
            out[key] = v
        elif key in space.components:
            out[key] = _number(v, f"design field {key!r}")
        else:
            out[key] = v    # unknown: the game names it when it refuses the design
    return out


def parse_answer(text: str | None, space) -> dict:
    """The decision in a prompt-mode answer: ``{action, design, count?, report?}``, else :class:`AnswerError`."""
    body = _THINK.sub("", text or "").strip()
    if not body:
        raise AnswerError("empty answer")
    candidates = [*_FENCED.findall(body), *json_objects(body)]
    obj = None
    for cand in reversed(candidates):   # the last decision written wins
        fixed, _ = repair_arguments(cand.strip())
        if fixed is None:
            continue
        parsed = json.loads(fixed)
        if isinstance(parsed, dict) and ({"action", "design"} & {str(k).lower() for k in parsed}
                                         or set(map(str.lower, map(str, parsed))) & set(space.components)):
            obj = {str(k).lower(): v for k, v in parsed.items()}
            break
    if obj is None:
        raise AnswerError("no JSON object with an action or a design in the answer")
    action = str(obj.get("action", "")).strip().lower()
    if "deploy" in action:
        action = "deploy"
    elif "submit" in action or "final" in action:
        action = "submit"
    elif not action:
        action = "deploy" if "count" in obj else "submit" if "report" in obj else ""
    if action not in ("deploy", "submit"):
        raise AnswerError(f"unknown action {obj.get('action')!r}; expected deploy or submit")
    out = {"action": action, "design": _design(obj, space)}
    if action == "deploy":
        if "count" not in obj:
            raise AnswerError("a deploy answer needs a count")
        out["count"] = _number(obj["count"], "count")
    else:
        report = obj.get("report")
        out["report"] = report if isinstance(report, str) else ""
    return out


def _history_text(game: Game) -> str:
    parts = []
    for d in game.observed():
        label = (f"Free history, flight group {d.index}" if d.source == "history" else f"Your deployment {d.index}")
        parts.append(f"{label}: design {json.dumps(d.design, sort_keys=True)}; {d.count} flown, {d.returned} "
                     f"returned, {d.destroyed} destroyed. Per-drone rows ({len(d.rows)} shown):\n{rows_csv(d.rows)}")
    return "\n".join(parts) if parts else "(none yet)"


def prompt_request(game: Game) -> str:
    """The single prompt of the next prompt-mode decision: rules, budget left, whole history."""
    space, b = game.space, game.scn.budgets
    comps = ", ".join(f"{c} (cap {k})" for c, k in zip(space.components, space.caps))
    eq = "".join(f" Equipment: {e} (costs {k} DEF points)." for e, k in zip(space.equipment, space.costs))
    details = ("per-drone rows are shown for returned drones only" if game.scn.spec["selection_bias"]
               else "per-drone rows are shown for every drone, with its status")
    thr = f"; you win at or above {game.threshold:.1%}" if game.threshold is not None else ""
    if not game.deployments:
        ask = "No deployment yet: your answer must deploy."
    elif game.deployments_left <= 0 or game.drones_left <= 0:
        ask = "The Stage-1 budget is spent: your answer must submit the final design with your report."
    else:
        ask = "Deploy again, or submit the final design with your report."
    return render("game_prompt", budget=space.budget, components=comps, equipment=eq,
                  visible=", ".join(game.scn.visible_variables()), details=details, stage1_drones=b["stage1_drones"],
                  stage1_deployments=b["stage1_deployments"], max_per_deployment=b["max_per_deployment"],
                  fleet=b["stage2_fleet"], threshold_text=thr, drones_left=game.drones_left,
                  deployments_left=game.deployments_left, history=_history_text(game), ask=ask,
                  example=json.dumps(dict.fromkeys(space.components[:3], 1)))


def _play_prompt(agent, game: Game, max_turns: int):
    """Single-turn prompting: (calls, transcript part, requests, status, error, termination, usage totals)."""
    totals = UsageTotals()
    requests: list[dict] = []
    calls: list[dict] = []
    turn, status, error, termination = 0, "ok", "", ""
    limit = int(game.scn.budgets["stage1_deployments"]) + 1
    system = render("game_prompt_system")
    try:
        while game.stage == "stage1" and turn < limit:
            turn += 1
            messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt_request(game)}]
            ex = single_request(agent, messages)
            totals.add(ex.usage, turn=turn, wall_s=ex.wall_s)
            if ex.ending:   # the agent cannot go on (e.g. its context is full): an ending, not a failure
                error, termination = str(ex.ending)[:2000], ex.ending.reason
                requests.append({"turn": turn, "error": ex.failure})
                break
            if not ex.ok:   # the agent crashed (a failed request): a recorded failure
                status, error, termination = "failed", f"{type(ex.error).__name__}: {ex.error}", "failed"
                requests.append({"turn": turn, "error": ex.failure})
                break
            answer = ex.reply.message.get("content") or ""
            requests.append({"turn": turn, "messages": messages, "answer": answer, "usage": ex.usage.as_dict(),
                             "wall_s": round(ex.wall_s, 4)})
            t2 = time.monotonic()
            tool, args, details = "answer", "", {}
            try:
                dec = parse_answer(answer, game.space)
                args = json.dumps(dec)
                if dec["action"] == "deploy":
                    tool = "deploy"
                    d = game.deploy(dec["design"], dec["count"])
                    result = json.dumps({**d.summary(), "drones_shown": len(d.rows)})
                    details = {"survived": d.survived.astype(int).tolist()}
                else:
                    tool = "submit_final_design"
                    s2 = game.submit(dec["design"])
                    result = json.dumps({"submitted": s2.design, "survival_rate": round(s2.survival, 4),
                                         "won": s2.won})
                    if dec["report"].strip():
                        calls.append({"turn": turn, "index": 0, "call_id": "", "tool": tool, "arguments": args,
                                      "result": result, "ok": True, "error": "", "stage": game.stage,
                                      "wall_s": round(time.monotonic() - t2, 4), "details": "{}"})
                        tool, t2 = "write_report", time.monotonic()
                        game.write_report(dec["report"])
                        result = json.dumps({"report": "recorded", "characters": len(dec["report"])})
                calls.append({"turn": turn, "index": 0, "call_id": "", "tool": tool, "arguments": args,
                              "result": result, "ok": True, "error": "", "stage": game.stage,
                              "wall_s": round(time.monotonic() - t2, 4), "details": json.dumps(details)})
            except (AnswerError, GameError) as exc:   # a bad answer ends the play, recorded
                calls.append({"turn": turn, "index": 0, "call_id": "", "tool": tool, "arguments": args,
                              "result": f"ERROR: {exc}", "ok": False, "error": str(exc), "stage": game.stage,
                              "wall_s": round(time.monotonic() - t2, 4), "details": "{}"})
                if game.stage == "stage1":
                    termination, error = "bad_answer", f"{tool}: {exc}"
                break
    except FatalAgentError:   # a refused key, an exhausted quota or spend limit: the job stops
        raise
    except Exception as exc:  # a harness error while playing the answer: a recorded failure
        status, error, termination = "failed", f"{type(exc).__name__}: {exc}", "failed"
        requests.append({"turn": turn, "error": traceback.format_exc(limit=8)})
    termination = termination or _termination(game)
    return calls, {"requests": requests}, turn, status, error, termination, totals
