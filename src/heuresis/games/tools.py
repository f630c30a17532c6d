"""The game's tools through the agent interface of the observational harness (docs/games.md §4).

``get_status``, ``get_history``, ``deploy(design, count)``, ``submit_final_design(design)`` and
``write_report(text)`` are :class:`heuresis.harness.tools.Tool` objects — OpenAI
function-calling schemas whose arguments are validated (JSON schema first, with the scenario's
components, caps and equipment spelt out, then the game's own checks such as the total DEF
budget) — built per game by :func:`game_tools`.  Budgets are enforced by the
:class:`~heuresis.games.game.Game` (server-side); a refused call raises
:class:`~heuresis.harness.tools.ToolError`, is answered to the agent as an error, and changes
nothing.  Results are JSON; per-drone rows are CSV text inside the JSON.  Each result's data
(:attr:`~heuresis.harness.tools.ToolResult.data`) is the same JSON object with the per-drone rows
as a list of records (``drones``) instead of CSV text (``drones_csv``); ``write_report`` ends
the play.
"""

from __future__ import annotations

import csv
import io
import json

from heuresis.games.game import Deployment, Game, GameError
from heuresis.harness.tools import Tool, ToolError, ToolResult

__all__ = ["GAME_TOOL_NAMES", "design_schema", "game_tools", "rows_csv"]

GAME_TOOL_NAMES = ("get_status", "get_history", "deploy", "submit_final_design", "write_report")


def design_schema(game: Game) -> dict:
    """JSON schema of a design in this scenario (caps as maxima; the total budget is checked after)."""
    space = game.space
    props = {c: {"type": "integer", "minimum": 0, "maximum": cap, "description": f"DEF on {c} (cap {cap})"}
             for c, cap in zip(space.components, space.caps)}
    props.update({e: {"type": "boolean", "description": f"fit {e} (costs {k} DEF points)"}
                  for e, k in zip(space.equipment, space.costs)})
    return {"type": "object", "properties": props, "additionalProperties": False,
            "description": f"DEF points per component (omitted = 0); total at most {space.budget} including "
                           f"equipment costs"}


def rows_csv(rows: list[dict]) -> str:
    """Per-drone rows as CSV text (header from the first row; empty without rows)."""
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _deployment_json(d: Deployment) -> dict:
    return {**d.summary(), "drones_shown": len(d.rows), "drones_csv": rows_csv(d.rows)}


def _deployment_data(d: Deployment) -> dict:
    return {**d.summary(), "drones_shown": len(d.rows), "drones": d.rows}


def _obj(payload: dict) -> str:
    return json.dumps(payload, separators=(",", ":"))


def _result(text: dict, data: dict | None = None, **kw) -> ToolResult:
    """The JSON text of ``text`` and, as data, ``data`` (default: the same object) in JSON values."""
    return ToolResult(_obj(text), json.loads(json.dumps(text if data is None else data)), **kw)


def game_tools(game: Game) -> dict[str, Tool]:
    """The five game tools bound to ``game``."""
    design = design_schema(game)
    b = game.scn.budgets

    def guard(fn):
        def handler(ctx, args):
            try:
                return fn(args)
            except GameError as exc:
                raise ToolError(str(exc)) from None
        return handler

    def status(args):
        return _result(game.status())

    def history(args):
        return _result({"history": [_deployment_json(d) for d in game.history],
                        "stage1": [_deployment_json(d) for d in game.deployments]},
                       {"history": [_deployment_data(d) for d in game.history],
                        "stage1": [_deployment_data(d) for d in game.deployments]})

    def deploy(args):
        d = game.deploy(args["design"], args["count"])
        left = {"drones_left": game.drones_left, "deployments_left": game.deployments_left}
        return _result({**_deployment_json(d), **left}, {**_deployment_data(d), **left},
                       details={"survived": d.survived.astype(int).tolist()})

    def submit(args):
        s = game.submit(args["design"])
        out = {"submitted": s.design, "fleet": s.fleet, "returned": s.survived, "survival_rate": round(s.survival, 4)}
        if s.threshold is not None:
            out.update({"threshold": round(s.threshold, 4), "won": s.won})
        out["next"] = "write_report(text)"
        return _result(out)

    def report(args):
        game.write_report(args["text"])
        return _result({"report": "recorded", "characters": len(args["text"])}, ends=True)

    def tool(name, description, params, fn):
        return Tool(name, description, {"type": "object", "additionalProperties": False, **params}, guard(fn))

    return {
        "get_status": tool("get_status", "The design space (components, caps, equipment, DEF budget), the visible "
                           "variables and the budgets left.", {"properties": {}}, status),
        "get_history": tool("get_history", "Every observed flight: the free history and your Stage-1 deployments, "
                            "with counts and per-drone rows (CSV).", {"properties": {}}, history),
        "deploy": tool("deploy", f"Stage 1: fly `count` drones (1..{b['max_per_deployment']}) of one design. "
                       f"Budget: {b['stage1_drones']} drones in at most {b['stage1_deployments']} deployments.",
                       {"properties": {"design": design,
                                       "count": {"type": "integer", "minimum": 1,
                                                 "maximum": int(b["max_per_deployment"])}},
                        "required": ["design", "count"]}, deploy),
        "submit_final_design": tool("submit_final_design", f"Stage 2: submit the final design, once and "
                                    f"irreversibly; a fleet of {b['stage2_fleet']} drones is flown and scored.",
                                    {"properties": {"design": design}, "required": ["design"]}, submit),
        "write_report": tool("write_report", "After submitting: a short report on what drives survival, why drones "
                             "failed, and which observed patterns were misleading and why.",
                             {"properties": {"text": {"type": "string"}}, "required": ["text"]}, report),
    }
