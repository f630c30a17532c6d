"""One play of a scenario by an agent (GAMES.md §4), recorded call by call.

The loop mirrors the observational harness (:mod:`heuresis.harness.episode`): a system and a task
prompt, then turns of ``agent.respond(messages, tools)``; every tool call is executed and
answered exactly once (result or error) and recorded with its arguments, result and wall time.
A text-only reply is nudged.  The play ends when the report is written, or at the turn limit
(then the play is ``unsubmitted`` — survival 0, not won — or ``no_report``).  An exception of the
agent ends the play as ``failed``; an exception inside a tool is answered as an error.

:func:`run_play` returns a :class:`PlayOutcome`: the ``game_plays`` row (survival, win, gap to
the optimum, configuration path), the ``game_calls`` rows and the JSON transcript.
"""

from __future__ import annotations

import copy
import json
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass

from heuresis.agents.base import AGENTS, make_agent
from heuresis.games.game import Game
from heuresis.games.scenario import Scenario
from heuresis.games.tools import game_tools
from heuresis.harness.prompts import render
from heuresis.harness.tools import ToolError

__all__ = ["PlayOutcome", "run_play", "task_prompt", "path_stats", "DEFAULT_MAX_TURNS"]

DEFAULT_MAX_TURNS = 40
NUDGE = "Act through the tools: deploy, submit_final_design, then write_report."


@dataclass
class PlayOutcome:
    row: dict
    calls: list[dict]
    transcript: dict


def task_prompt(game: Game) -> str:
    scn, space, b = game.scn, game.space, game.scn.budgets
    comps = ", ".join(f"{c} (cap {k})" for c, k in zip(space.components, space.caps))
    eq = "".join(f" Equipment: {e} (costs {k} DEF points)." for e, k in zip(space.equipment, space.costs))
    n_hist = sum(h.count for h in game.history)
    history = (f"\nA free history of {n_hist} earlier flights (flown before you arrived, with designs you can see in "
               f"get_history) is available at no cost." if n_hist else "\nThere is no earlier flight history.")
    details = ("per-drone rows are shown for returned drones only" if scn.spec["selection_bias"]
               else "per-drone rows are shown for every drone, with its status")
    thr = f"; you win at or above {game.threshold:.1%}" if game.threshold is not None else ""
    example = json.dumps({c: 1 for c in space.components[:3]})
    return render("game_task", budget=space.budget, components=comps, equipment=eq, visible=", ".join(
        scn.visible_variables()), details=details, history=history, stage1_drones=b["stage1_drones"],
        stage1_deployments=b["stage1_deployments"], max_per_deployment=b["max_per_deployment"],
        fleet=b["stage2_fleet"], threshold_text=thr, example=example)


def path_stats(game: Game) -> dict:
    """Configuration-path statistics of a play (judge-independent, GAMES.md §5)."""
    deps = game.deployments
    designs = [json.dumps(d.design, sort_keys=True) for d in deps]
    rates = [d.returned / d.count for d in deps]
    out = {"designs_deployed": json.dumps([d.design for d in deps]), "distinct_designs": len(set(designs)),
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
             max_turns: int = DEFAULT_MAX_TURNS) -> PlayOutcome:
    """Agent ``agent_name`` (config entry ``agent_spec``) plays ``scn`` once."""
    import heuresis.games.agents  # noqa: F401  (registers the offline game agents)

    t0 = time.monotonic()
    spec = dict(agent_spec)
    if getattr(AGENTS.get(spec.get("kind")), "takes_seed", False):   # offline game agents draw from the play seed
        spec.setdefault("seed", int(seed))
    agent = make_agent(agent_name, spec)
    game = Game(scn, seed=seed, threshold=threshold)
    tools = game_tools(game)
    specs = [t.spec() for t in tools.values()]
    messages: list[dict] = [{"role": "system", "content": render("game_system")},
                            {"role": "user", "content": task_prompt(game)}]
    meta: list[dict] = [{"turn": 0}, {"turn": 0}]
    calls: list[dict] = []
    turn, status, error = 0, "ok", ""
    tokens_in = tokens_out = 0
    cost = 0.0
    try:
        while game.stage != "done" and turn < max_turns:
            turn += 1
            t1 = time.monotonic()
            reply = agent.respond(copy.deepcopy(messages), specs)
            msg = dict(reply.message)
            msg.setdefault("role", "assistant")
            msg.setdefault("content", None)
            u = reply.usage
            tokens_in += int(u.tokens_in or 0)
            tokens_out += int(u.tokens_out or 0)
            cost += float(u.cost or 0.0)
            messages.append(msg)
            meta.append({"turn": turn, "usage": u.as_dict(), "wall_s": round(time.monotonic() - t1, 4)})
            tcs = msg.get("tool_calls") or []
            if not tcs:
                messages.append({"role": "user", "content": NUDGE})
                meta.append({"turn": turn})
                continue
            for k, tc in enumerate(tcs):
                fn = tc.get("function") or {}
                name = str(fn.get("name", ""))
                t2 = time.monotonic()
                ok, err, details = True, "", {}
                if name not in tools:
                    ok, err = False, f"unknown tool {name!r}; available: {sorted(tools)}"
                    text = f"ERROR: {err}"
                else:
                    try:
                        out = tools[name].call(None, fn.get("arguments", "{}"))
                        text, details = out.text, out.details
                    except ToolError as exc:
                        ok, err, text = False, str(exc), f"ERROR: {exc}"
                    except Exception as exc:  # a bug in a tool: tell the agent, go on
                        ok, err = False, f"internal error in {name}: {type(exc).__name__}: {exc}"
                        text, details = f"ERROR: {err}", {"traceback": traceback.format_exc(limit=5)}
                messages.append({"role": "tool", "tool_call_id": tc.get("id", ""), "content": text})
                meta.append({"turn": turn})
                calls.append({"turn": turn, "index": k, "call_id": str(tc.get("id", "")), "tool": name,
                              "arguments": str(fn.get("arguments", "")), "result": text, "ok": ok, "error": err,
                              "stage": game.stage, "wall_s": round(time.monotonic() - t2, 4),
                              "details": json.dumps(details)})
    except Exception as exc:  # the agent crashed: a recorded failure
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        meta.append({"turn": turn, "error": traceback.format_exc(limit=8)})
    termination = {"done": "reported", "report": "no_report", "stage1": "unsubmitted"}[game.stage]
    if status == "failed":
        termination = "failed"
    s2 = game.stage2
    survival = s2.survival if s2 else 0.0
    play_id = f"{agent_name}/{scn.name}/r{repeat}"
    row = {
        "play_id": play_id, "agent": agent_name, "agent_kind": agent.kind, "model": agent.model,
        "scenario": scn.name, "family": scn.family, "variant": scn.spec["variant"], "bias": scn.spec["bias"],
        "repeat": int(repeat), "seed": int(seed), "status": status, "error": error, "termination": termination,
        "submitted": s2 is not None, "design": json.dumps(s2.design if s2 else None),
        "survival": float(survival), "threshold": threshold, "won": bool(s2 is not None and threshold is not None
                                                                          and survival >= threshold),
        "optimum": optimum, "gap": (optimum - survival) if optimum is not None else None,
        "deployments": len(game.deployments), "drones_used": game.drones_used,
        **path_stats(game), "report": game.report or "", "turns": turn, "n_calls": len(calls),
        "n_errors": sum(not c["ok"] for c in calls), "tokens_in": tokens_in, "tokens_out": tokens_out,
        "cost": cost, "wall_s": round(time.monotonic() - t0, 3),
    }
    transcript = {"play": row, "scenario": scn.spec, "tools": specs,
                  "messages": [{**m, "meta": mm} for m, mm in zip(messages, meta)], "calls": calls}
    return PlayOutcome(row, [{"play_id": play_id, "agent": agent_name, "scenario": scn.name, "repeat": int(repeat),
                              **c} for c in calls], transcript)
