"""One play of a scenario by an agent (docs/games.md §4), recorded call by call, in one of two modes.

**agentic** (every agent).  The agent loop of the observational harness
(:class:`heuresis.harness.loop.AgentLoop`) with the game's tools and the analysis tools — the code
tool (the observational track's sandbox, every observed flight as data files) and the
measurement query of the scenario's declared hidden variables — and a turn limit
(:func:`heuresis.stages.games.workflow.max_turns_of`).  Before every turn a ReAct instruction is appended
(``game_react.txt``: observation, hypothesis, why this action; the thought before the tool
call); every deployment's result is followed by the analysis prompt (``game_analysis.txt``, a user
message after the turn's tool results: survival against expectation, what it says, what to test
next).  A reply with more than
``max_tool_calls`` tool calls has the first ``max_tool_calls`` executed and the rest answered as
not executed.  The exploration guard applies: a submission needs at least one deployment.  Every
tool call is answered exactly once (result or error) and recorded with its arguments, result,
the game's stage after it and its wall time; a text-only reply is nudged (``game_nudge.txt``).

**prompting** (LLM agents).  A multi-turn conversation in text, no tools: the task with the free
history, then per turn one answer holding one action as a JSON object —
``{"action": "deploy", "design": .., "count": n}`` or ``{"action": "submit", "design": ..,
"report": ".."}`` — answered by the deployment's result (``game_prompting_result.txt``).  The
answer is read tolerantly (:func:`parse_answer`: reasoning blocks, code fences, prose around the
object, Python literals, trailing commas, numbers as strings, case of component names); an answer
that cannot be read, or that the game refuses, is answered with a retry message
(``game_prompting_retry.txt``) and the play goes on within its turn limit.  No exploration guard.

In both modes the report is committed with (or before) the submission, and the submission's
result — the Stage-2 outcome — ends the play: no report is written after the outcome is shown.
Under the ``as_published`` protocol (:data:`PROTOCOLS`) an LLM agent's submitted play is then
asked CausalGame's debrief (its mission report and four questions, no tool executed); that
answer, written after the outcome, is recorded apart (``debrief``) and judged as its own view.
Conversations are append-only: nothing sent earlier changes between turns.  The task is the
``standard`` one (flow, budgets, design space, tools, victory condition and the questions of the
OBSERVE → DISCOVER → ANALYZE → HYPOTHESIZE → TEST loop, no mechanism fact) or, as a recorded
ablation, ``hints`` (``game_hints.txt`` added: which components are critical, that DEF costs
agility).  Every prompt file a mode uses is recorded in the transcript (``prompts``).  The play
ends at the submission, at the turn limit (``unsubmitted``: survival 0, not won), or when the
agent cannot go on (its context window is full: :class:`~heuresis.harness.protocol.EpisodeEnd`, then
``context_overflow``); an exception of the agent ends it as ``failed``.

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
from pathlib import Path

from heuresis.agents import agent_class, agent_origin, make_agent
from heuresis.agents.llm import repair_arguments
from heuresis.artifacts.transcripts import PlayTranscript
from heuresis.causal.games.game import Game, GameError
from heuresis.causal.games.scenario import Scenario
from heuresis.config.loading import schema_default
from heuresis.config.settings import CodeTool
from heuresis.harness.game_tools import game_tools, report_question, rows_csv
from heuresis.harness.loop import AgentLoop, TurnLimit, UsageTotals, single_request
from heuresis.harness.prompts import MODE_PROMPTS, render, template
from heuresis.harness.protocol import FatalAgentError
from heuresis.harness.requestlog import RequestLog
from heuresis.harness.sandbox import SandboxLimits, isolation_for
from heuresis.registry import MODEL_KINDS

__all__ = [
    "DEFAULT_MAX_TURNS",
    "MODES",
    "MODE_PROMPTS",
    "OUTPUT_TOKENS",
    "PROTOCOLS",
    "TASK_VARIANTS",
    "AnswerError",
    "PlayOutcome",
    "debrief_prompt",
    "json_objects",
    "parse_answer",
    "path_stats",
    "run_play",
    "task_prompt",
]

DEFAULT_MAX_TURNS = 40
#: Output tokens per reply of an LLM agent whose config entry sets no max_tokens.
OUTPUT_TOKENS = 4000
#: The play modes (config ``games.modes``): ``agentic`` (every agent) and ``prompting`` (LLM agents).
MODES = ("agentic", "prompting")
#: The task variants (config ``games.task_variant``): ``standard``, and ``hints`` (mechanism facts told).
TASK_VARIANTS = ("standard", "hints")
#: The protocol views (config ``games.protocols``): the report ``committed`` with the submission, before the
#: outcome (this track's), and ``as_published``: CausalGame's debrief after the outcome (its mission report and
#: four questions, ``game_debrief.txt``), asked once per submitted play of an LLM agent, in either mode.
PROTOCOLS = ("committed", "as_published")


@dataclass
class PlayOutcome:
    """What a play produced: its ``game_plays`` row, ``game_calls`` rows, transcript and ``requests`` rows."""

    row: dict
    calls: list[dict]
    transcript: PlayTranscript
    requests: list[dict] = field(default_factory=list)   # one row per model request (GAME_PLAY_REQUESTS)


def _example(game: Game) -> str:
    comps = game.scn.spec["components"]
    return json.dumps({c: int(comps[c]["default_def"]) for c in game.space.components[:3]})


#: What a scenario with noisy per-drone rows tells the agent (CausalGame's Weather prompt warns likewise).
NOISE_WARNING = (" Observation data may carry measurement uncertainty, and its quality may vary with the "
                 "conditions; the counts of returned and destroyed drones are exact.")


def task_prompt(game: Game, *, variant: str = "standard", interaction: str = "") -> str:
    """The task: the scenario's facts, the side information it shows, no fact beyond them; flow, budgets, victory.

    Then ``interaction`` (the mode's tools or answer format); the ``hints`` variant (or the ``hints``
    ablation) adds the mechanism facts (``game_hints.txt``).
    """
    if variant not in TASK_VARIANTS:
        raise ValueError(f"unknown task variant {variant!r}; known: {list(TASK_VARIANTS)}")
    scn, b = game.scn, game.scn.budgets
    thr = f"; you win at or above {game.threshold:.1%}" if game.threshold is not None else ""
    guard = " (after at least one deployment)" if game.guard else ""
    spec = scn.spec
    comps = ", ".join(f"{c} ({v['default_def']})" for c, v in spec["components"].items())
    eq = "".join(f" Choose one {slot}: {', '.join(map(json.dumps, cfg['options']))} (default "
                 f"{json.dumps(cfg['default'])})." for slot, cfg in game.choices.items())
    if spec.get("flight_profiles"):
        eq += (f" You may set flight_profile to one of {', '.join(spec['flight_profiles'])} (the drones then fly "
               f"at that altitude band).")
    side = "\n".join(f"- {line}" for lines in (spec.get("side_information") or {}).values() for line in lines)
    n_hist = sum(len(h.rows) for h in game.history)
    history = (f"\nA free history of {n_hist} earlier flight records, flown before you arrived with designs you can "
               f"see, is available at no cost." if n_hist else "\nThere is no earlier flight history.")
    told = scn.disclosures
    visible = ", ".join(scn.visible_variables())
    if "component_hits" in told:
        visible += "; and the hits on each component"
    if "returned_only_note" in told:
        visible += ("; per-drone rows are shown for returned drones only" if spec["hide_failed_drones"]
                    else "; per-drone rows are shown for every drone, with its status")
    if "hidden_measurements" in told:
        history += (f" A free measurement query reports the exact values of {', '.join(scn.measurable_variables())} "
                    f"for the drones of any flight group whose rows you see.")
    hints = render("game_hints") if variant == "hints" or "hints" in told else ""
    return render("game_task", cap=spec["def_cap"], budget=game.space.budget, components=comps,
                  equipment=eq, side_information=side or "- (nothing)", visible=visible,
                  env_queries=spec["resources"].get("env_query_budget", 0),
                  question=report_question(game),
                  noise=NOISE_WARNING if spec.get("observation_noise") else "", history=history,
                  stage1_drones=b["stage1_drones"], stage1_deployments=b["stage1_deployments"],
                  fleet=b["stage2_fleet"], threshold_text=thr, guard=guard, hints=hints, interaction=interaction)



def _prompt_record(mode: str) -> dict:
    """The prompt files of ``mode``: role -> {file, template text}."""
    return {role: {"file": f"{name}.txt", "template": template(name).template}
            for role, name in MODE_PROMPTS[mode].items()}


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
        vec = game.vector
        out["drift_from_best"] = float(abs(vec(game.stage2.design) - vec(deps[best].design)).sum())
    # lock-in: the component that holds the largest share of DEF across every deployed design
    tot = sum(game.vector(d.design)[:game.space.n_components] for d in deps)
    if tot.sum() > 0:  # type: ignore[union-attr]
        k = int(tot.argmax())  # type: ignore[union-attr]
        out["lock_in_component"] = game.space.components[k]
        out["lock_in_share"] = float(tot[k] / tot.sum())  # type: ignore[index, union-attr]
    return out


def debrief_prompt(game: Game) -> str:
    """CausalGame's debrief after a submitted play (``run_agent.py``): the mission report and its four questions."""
    s2 = game.stage2
    assert s2 is not None
    threshold = s2.threshold if s2.threshold is not None else game.scn.threshold
    pct = "?" if threshold is None else f"{float(threshold) * 100:.0f}"
    return render("game_debrief", survival_rate=f"{s2.survival:.1%}", survived=s2.survived, fleet_size=s2.fleet,
                  victory="YES" if s2.won else "NO", drones_used=game.drones_used, threshold_pct=pct)


def _debrief(agent, game: Game, part: dict, turn: int, spend: UsageTotals) -> tuple[str, str, str]:
    """Ask the ``as_published`` debrief in the play's own conversation: (text, status, error).

    The request carries the conversation so far and, in the agentic mode, the same tools (a
    cached prefix; the instruction says not to call them, and a call is not executed); its
    usage counts in the play's. Status ``ok``, ``context_overflow`` (the agent cannot go on)
    or ``failed`` (the request failed: the play is recorded failed and retried).
    """
    prompt = debrief_prompt(game)
    messages = [{k: v for k, v in m.items() if k != "meta"} for m in part["messages"]]
    ex = single_request(agent, [*messages, {"role": "user", "content": prompt}], part.get("tools") or ())
    spend.add(ex.usage, turn=turn + 1, wall_s=ex.wall_s)
    part["messages"].append({"role": "user", "content": prompt, "meta": {"turn": turn + 1, "injected": "debrief"}})
    if ex.ending:
        return "", ex.ending.reason, str(ex.ending)[:2000]
    if not ex.ok:
        return "", "failed", f"debrief: {type(ex.error).__name__}: {ex.error}"
    msg = ex.reply.message  # type: ignore[union-attr]
    text = msg.get("content") or ""
    part["messages"].append({"role": "assistant", "content": text, "meta": {
        "turn": turn + 1, "usage": ex.usage.as_dict(), "wall_s": round(ex.wall_s, 4),  # type: ignore[union-attr]
        **({"tool_calls_not_executed": len(msg["tool_calls"])} if msg.get("tool_calls") else {})}})
    return text, "ok", ""


def run_play(agent_name: str, agent_spec: Mapping, scn: Scenario, *, repeat: int = 0, seed: int = 0,
             threshold: float | None = None, optimum: float | None = None,
             max_turns: int = DEFAULT_MAX_TURNS, mode: str = "agentic", task_variant: str = "standard",
             max_tool_calls: int | None = None, code_tool: CodeTool | None = None,
             request_log: RequestLog | None = None, spend_dir: str | Path | None = None,
             protocols: tuple[str, ...] | list[str] = ("committed",)) -> PlayOutcome:
    """Agent ``agent_name`` (config entry ``agent_spec``) plays ``scn`` once in ``mode``.

    ``protocols`` (config ``games.protocols``, :data:`PROTOCOLS`): with ``as_published``, a submitted
    play of an LLM agent ends with CausalGame's debrief (:func:`debrief_prompt`), its answer
    recorded as ``debrief``; a debrief request that fails records the play ``failed``.

    ``request_log``: the play's log of model requests (a rerun of a play killed or failed midway
    gets its paid answers from it; every attempt is appended); ``spend_dir``: the folder of the
    run's spend ledgers and stop records (default ``results/spend`` of the working folder).

    ``max_tool_calls``: tool calls executed per turn in the agentic mode (default
    ``games.max_tool_calls_per_turn``'s); ``code_tool``: the code tool's settings (config
    ``episodes.code_tool``: isolation and limits; default the schema's).
    """
    import heuresis.agents.players  # noqa: F401  (registers the offline game agents)

    if mode not in MODES:
        raise ValueError(f"unknown play mode {mode!r}; known: {', '.join(MODES)}")
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown:
        raise ValueError(f"unknown protocol {unknown[0]!r}; known: {', '.join(PROTOCOLS)}")
    if task_variant not in TASK_VARIANTS:
        raise ValueError(f"unknown task variant {task_variant!r}; known: {', '.join(TASK_VARIANTS)}")
    t0 = time.monotonic()
    spec = dict(agent_spec)
    cls = agent_class(agent_name, spec)
    if getattr(cls, "takes_seed", False):   # offline game agents (and plugins that ask) draw from the play seed
        if mode != "agentic":
            raise ValueError(f"agent {agent_name!r} (kind {spec.get('kind')!r}) plays the agentic mode only; "
                             f"the prompting mode is for LLM agents")
        spec.setdefault("seed", int(seed))
    if getattr(cls, "takes_family", False):  # the mechanism-aware offline agent: the family's
        spec.setdefault("family", scn.family)  # name (its structure), no parameter
    agent = make_agent(agent_name, spec)
    agent.use_records(request_log, spend_dir)
    agent.bind({"output_tokens_per_turn": OUTPUT_TOKENS})
    game = Game(scn, seed=seed, threshold=threshold, guard=mode == "agentic")
    if mode == "agentic":
        calls_cap = int(schema_default("games", "max_tool_calls_per_turn") if max_tool_calls is None
                        else max_tool_calls)
        code = CodeTool() if code_tool is None else code_tool
        isolation = isolation_for(code.isolation)
        limits = SandboxLimits(**code.limits())
        result = _play_agentic(agent, game, max_turns, task_variant, calls_cap, isolation, limits)
    else:
        isolation = "off"
        result = _play_prompting(agent, game, max_turns, task_variant)
    calls, transcript, turn, status, error, termination, spend = result
    debrief, debrief_status = "", ""
    if "as_published" in protocols and game.stage2 is not None and status == "ok" and agent.kind in MODEL_KINDS:
        debrief, debrief_status, why = _debrief(agent, game, transcript, turn, spend)
        if debrief_status == "failed":
            status, error, termination = "failed", why, "failed"
    s2 = game.stage2
    survival = s2.survival if s2 else 0.0
    play_id = f"{agent_name}/{mode}/{scn.name}/r{repeat}"
    row = {
        "play_id": play_id, "agent": agent_name, "agent_kind": agent.kind, "model": agent.model, "mode": mode,
        "task_variant": task_variant, "code_isolation": isolation,
        "scenario": scn.name, "family": scn.family, "variant": scn.spec["variant"], "bias": scn.spec["bias"],
        "repeat": int(repeat), "seed": int(seed), "status": status, "error": error, "termination": termination,
        "submitted": s2 is not None, "design": json.dumps(s2.design if s2 else None),
        "survival": float(survival), "threshold": threshold, "won": bool(s2 is not None and threshold is not None
                                                                          and survival >= threshold),
        "optimum": optimum, "gap": (optimum - survival) if optimum is not None else None,
        "deployments": len(game.deployments), "drones_used": game.drones_used,
        **path_stats(game), "report": game.report or "", "debrief": debrief, "debrief_status": debrief_status,
        "turns": turn, "n_calls": len(calls),
        "n_errors": sum(not c["ok"] for c in calls), "tokens_in": spend.tokens_in, "tokens_out": spend.tokens_out,
        "cost": spend.cost, "retries": spend.retries, "warnings": json.dumps(spend.warnings),
        "wall_s": round(time.monotonic() - t0, 3),
    }
    record = PlayTranscript(row, agent_origin=agent_origin(agent_name, agent_spec), scenario=scn.spec,
                            prompts=_prompt_record(mode), **transcript, calls=calls)
    keys = {"play_id": play_id, "agent": agent_name, "mode": mode, "scenario": scn.name, "repeat": int(repeat)}
    requests = [{**keys, "index": k, **r.row()} for k, r in enumerate(spend.requests)]
    return PlayOutcome(row, [{**keys, **c} for c in calls], record, requests)


def _termination(game: Game, ended: str = "") -> str:
    """The play's termination from its stage; an agent's ending (``ended``) before the submission replaces it."""
    if ended and game.stage != "done":
        return ended
    return {"done": "submitted", "stage1": "unsubmitted"}[game.stage]


def _call_row(turn: int, tool: str, args: str, result: str, ok: bool, error: str, stage: str, wall: float,
              details: str = "{}") -> dict:
    return {"turn": turn, "index": 0, "call_id": "", "tool": tool, "arguments": args, "result": result, "ok": ok,
            "error": error, "stage": stage, "wall_s": round(wall, 4), "details": details}


# --- the agentic mode -------------------------------------------------------------------------------
class _Agentic(AgentLoop):
    """The agent loop of the agentic mode.

    The game's and the analysis tools, the ReAct instruction before every turn, the per-turn
    tool-call limit and a turn limit (no budgets line, no last turn).
    """

    ended_text = "not executed: the submission, made by an earlier call of this turn, ended the play"

    def __init__(self, agent, game: Game, max_turns: int, max_calls: int, isolation: str,
                 limits: SandboxLimits) -> None:
        super().__init__(agent, game_tools(game, analysis=True, code_isolation=isolation, code_limits=limits),
                         None, TurnLimit(max_turns))
        self.game, self.max_turns, self.max_calls = game, int(max_turns), int(max_calls)
        self._analyses: list[str] = []   # analysis prompts of the turn's deployments, sent after its results

    def before_turn(self) -> None:
        """The ReAct instruction, appended as a user message before the turn's request."""
        self.add({"role": "user", "content": render("game_react", turn=self.turn, max_turns=self.max_turns,
                                                    max_calls=self.max_calls)}, injected="react")

    def nudge(self) -> str:
        """Act through the tools."""
        return render("game_nudge")

    def call_extra(self) -> dict:
        """The game's stage after the call."""
        return {"stage": self.game.stage}

    def on_result(self, result) -> None:
        """A deployment's result: its analysis prompt is queued for the end of the turn's results."""
        d = result.data or {}
        if d.get("source") == "stage1" and "drones_left" in d:
            self._analyses.append(render("game_analysis", deployment=d["deployment"], returned=d["returned"],
                                         count=d["count"], rate=f"{d['returned'] / d['count']:.1%}"))

    def _calls_of_turn(self, tcs, usage, *, allowed, last_turn):
        """Run the reply's first ``max_calls`` calls and answer the others as not executed.

        Then one analysis prompt per deployment of the turn, a user message after the turn's results.
        """
        error = super()._calls_of_turn(tcs[:self.max_calls], usage, allowed=allowed, last_turn=last_turn)
        why = f"not executed: at most {self.max_calls} tool calls per turn"
        for k, tc in enumerate(tcs[self.max_calls:], start=self.max_calls):
            self._refuse(tc, why, index=k, usage=usage, last_turn=last_turn)
            error = error or why
        if not self.ended:
            for text in self._analyses:
                self.add({"role": "user", "content": text}, injected="analysis")
        self._analyses.clear()
        return error

    def call_rows(self) -> list[dict]:
        """The calls as rows of the ``game_calls`` table (without the play's keys)."""
        return [{"turn": c.turn, "index": c.index, "call_id": c.call_id, "tool": c.tool, "arguments": c.arguments,
                 "result": c.result, "ok": c.ok, "error": c.error, "stage": c.extra["stage"], "wall_s": c.wall_s,
                 "details": c.details} for c in self.calls]


def _play_agentic(agent, game: Game, max_turns: int, variant: str, max_calls: int, isolation: str,
                  limits: SandboxLimits):
    """The agentic mode: (calls, transcript part, turns, status, error, termination, usage totals)."""
    loop = _Agentic(agent, game, max_turns, max_calls, isolation, limits)
    listing = "\n".join(f"- {s['function']['name']}: {s['function']['description']}" for s in loop.specs)
    interaction = render("game_agentic_tools", max_calls=max_calls, tools=listing, example=_example(game))
    loop.run(render("game_agentic_system"), task_prompt(game, variant=variant, interaction=interaction))
    termination = loop.status if loop.status == "failed" else _termination(game, loop.ending)
    part = {"tools": loop.specs, "messages": loop.transcript_messages()}
    if agent.record() is not None:   # an external agent's command: its exit status and output
        part["agent_record"] = agent.record()
    return loop.call_rows(), part, loop.turn, loop.status, loop.error, termination, loop.totals


# --- the prompting mode: reading an answer ---------------------------------------------------------
class AnswerError(ValueError):
    """A prompting-mode answer that cannot be read as an action."""


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
    """The action in a prompting-mode answer: ``{action, design, count?, report?}``, else :class:`AnswerError`."""
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
    if "query" in action or (not action and "variable" in obj):
        if not isinstance(obj.get("variable"), str):
            raise AnswerError("a query answer needs a variable (the name of a visible environment variable)")
        return {"action": "query", "variable": obj["variable"].strip()}
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
        out["count"] = _number(obj["count"], "count")  # type: ignore[assignment]
    else:
        report = obj.get("report")
        out["report"] = report if isinstance(report, str) else ""
    return out


def _flight_text(d) -> str:
    label = f"Free history, flight group {d.index}" if d.source == "history" else f"Your deployment {d.index}"
    counts = (f"{d.count} flown, {d.returned} returned, {d.destroyed} destroyed" if d.counts_shown
              else f"{len(d.rows)} flight records")
    return (f"{label}: design {json.dumps(d.design, sort_keys=True)}; {counts}. Per-drone rows ({len(d.rows)} "
            f"shown):\n{rows_csv(d.rows)}").rstrip()


def _ask_text(game: Game) -> str:
    if game.deployments_left <= 0 or game.drones_left <= 0:
        return "The Stage-1 budget is spent: your next answer must submit the final design with your report."
    return "Deploy again, or submit the final design with your report."


def _play_prompting(agent, game: Game, max_turns: int, variant: str):
    """The prompting mode: (calls, transcript part, turns, status, error, termination, usage totals)."""
    totals = UsageTotals()
    requests: list[dict] = []
    calls: list[dict] = []
    b = game.scn.budgets
    turn, status, error, termination = 0, "ok", "", ""
    observed = "\n".join(_flight_text(d) for d in game.history) or "(none yet)"
    query = ""
    if game.env_query is not None:
        query = (f"\nor, to summarise one visible environment variable over every per-drone row seen so far "
                 f"({game.env_query.budget} queries per game),\n"
                 f"{json.dumps({'action': 'query', 'variable': game.env_query.shown[0]})}")
    fmt = render("game_prompting_format", example=_example(game), max_turns=max_turns, observed=observed,
                 query=query)
    messages = [{"role": "system", "content": render("game_prompting_system")},
                {"role": "user", "content": task_prompt(game, variant=variant, interaction=fmt)}]
    meta: list[dict] = [{"turn": 0}, {"turn": 0}]

    def say(text: str, **kw) -> None:
        messages.append({"role": "user", "content": text})
        meta.append({"turn": turn, **kw})

    try:
        while game.stage == "stage1" and turn < max_turns:
            turn += 1
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
            answer = ex.reply.message.get("content") or ""  # type: ignore[union-attr]
            messages.append({"role": "assistant", "content": answer})
            meta.append({"turn": turn, "usage": ex.usage.as_dict(), "wall_s": round(ex.wall_s, 4)})  # type: ignore[union-attr]
            requests.append({"turn": turn, "answer": answer, "usage": ex.usage.as_dict(),  # type: ignore[union-attr]
                             "wall_s": round(ex.wall_s, 4)})
            t2 = time.monotonic()
            tool, args = "answer", ""
            try:
                dec = parse_answer(answer, game.space)
                args = json.dumps(dec)
                if dec["action"] == "query":
                    tool = "query_environment"
                    out = game.query_environment(dec["variable"])
                    result = json.dumps(out)
                    calls.append(_call_row(turn, tool, args, result, True, "", game.stage, time.monotonic() - t2))
                    say(render("game_prompting_query", result=result, queries_left=out["queries_left"],
                               ask=_ask_text(game)))
                elif dec["action"] == "deploy":
                    tool = "deploy"
                    d = game.deploy(dec["design"], dec["count"])
                    result = json.dumps({**d.summary(), "drones_shown": len(d.rows)})
                    calls.append(_call_row(turn, tool, args, result, True, "", game.stage, time.monotonic() - t2,
                                           json.dumps({"survived": d.survived.astype(int).tolist()})))
                    say(render("game_prompting_result", flight=_flight_text(d), drones_left=game.drones_left,
                               stage1_drones=b["stage1_drones"], deployments_left=game.deployments_left,
                               stage1_deployments=b["stage1_deployments"], ask=_ask_text(game)))
                else:
                    tool = "submit_final_design"
                    report = dec["report"] if dec["report"].strip() else None
                    s2 = game.submit(dec["design"], report)   # the report is committed with the submission
                    result = json.dumps({"submitted": s2.design, "report": "committed",
                                         "survival_rate": round(s2.survival, 4), "won": s2.won})
                    calls.append(_call_row(turn, tool, args, result, True, "", game.stage, time.monotonic() - t2))
            except (AnswerError, GameError) as exc:   # answered with a retry message; the play goes on
                problem = str(exc)
                calls.append(_call_row(turn, tool, args, f"ERROR: {problem}", False, problem, game.stage,
                                       time.monotonic() - t2))
                if turn < max_turns:
                    say(render("game_prompting_retry", error=problem, turns_left=max_turns - turn), injected="retry")
    except FatalAgentError:   # a refused key, an exhausted quota or spend limit: the job stops
        raise
    except Exception as exc:  # a harness error while playing the answer: a recorded failure
        status, error, termination = "failed", f"{type(exc).__name__}: {exc}", "failed"
        requests.append({"turn": turn, "error": traceback.format_exc(limit=8)})
    termination = termination or _termination(game)
    part = {"messages": [{**m, "meta": mt} for m, mt in zip(messages, meta)], "requests": requests}
    return calls, part, turn, status, error, termination, totals
