"""The game's tools through the agent interface of the observational harness (docs/games.md §4).

``get_status``, ``get_history``, ``deploy(design, count)``, ``write_report(text)`` and
``submit_final_design(design, report)`` are :class:`heuresis.harness.tools.Tool` objects —
OpenAI function-calling schemas whose arguments are validated (JSON schema first, with the
scenario's components, caps and equipment spelt out, then the game's own checks such as the
total DEF budget) — built per game by :func:`game_tools`.  The agentic mode adds the analysis
tools: ``run_code(code)``, the observational track's sandbox (:func:`heuresis.harness.sandbox.run_code`)
with every observed flight as data files (:func:`flight_files`), and ``measure(variable,
source, deployment)``, the measurement query of the hidden variables the scenario declares.
Budgets are enforced by the :class:`~heuresis.causal.games.game.Game` (server-side); a refused call
raises :class:`~heuresis.harness.tools.ToolError`, is answered to the agent as an error, and
changes nothing.  Results are JSON; per-drone rows are CSV text inside the JSON.  Each result's
data (:attr:`~heuresis.harness.tools.ToolResult.data`) is the same JSON object with the
per-drone rows as a list of records (``drones``) instead of CSV text (``drones_csv``).

The report is committed with the submission (its ``report`` argument) or before it
(``write_report``).  The submission's result — the Stage-2 outcome — ends the play, so no report
is written once the outcome is shown.
"""

from __future__ import annotations

import csv
import io
import json

from heuresis.causal.games.game import Deployment, Game, GameError
from heuresis.harness.sandbox import SandboxLimits, run_code
from heuresis.harness.tools import Tool, ToolError, ToolResult

__all__ = ["ANALYSIS_TOOL_NAMES", "GAME_TOOL_NAMES", "MISLEADING_QUESTION", "REPORT_QUESTION", "design_schema", "flight_files",
           "game_tools", "report_question", "rows_csv"]

GAME_TOOL_NAMES = ("get_status", "get_history", "deploy", "write_report", "submit_final_design")
#: What the report answers (CausalGame's question).
REPORT_QUESTION = "what drives survival and why drones failed"
#: What the report answers under the ``misleading_question`` ablation, which also asks about misleading patterns.
MISLEADING_QUESTION = "what drives survival, why drones failed, which observed patterns were misleading and why"
#: The agentic mode's analysis tools (the code tool only where the code tool's isolation is not ``off``).
ANALYSIS_TOOL_NAMES = ("run_code", "measure", "query_environment")


def design_schema(game: Game) -> dict:
    """JSON schema of a design in this scenario (caps as maxima; the total budget is checked after)."""
    space = game.space
    spec = game.scn.spec
    props: dict[str, dict] = {
        c: {"type": "integer", "minimum": 0, "maximum": cap,
            "description": f"DEF on {c} (0..{cap}; default {spec['components'][c]['default_def']})"}
        for c, cap in zip(space.components, space.caps)}
    for slot, cfg in game.choices.items():
        options = list(cfg["options"])
        props[slot] = {"type": "boolean" if any(isinstance(o, bool) for o in options) else "string",
                       "enum": options, "description": f"one {slot} (default {cfg['default']})"}
    if spec.get("flight_profiles"):
        props["flight_profile"] = {"type": "string", "enum": list(spec["flight_profiles"]),
                                   "description": "the altitude band the drones fly at (default: the zone's)"}
    return {"type": "object", "properties": props, "additionalProperties": False,
            "description": f"DEF points per component (omitted = the component's default); total at most "
                           f"{space.budget}"}


def report_question(game: Game) -> str:
    """What the play's report answers: CausalGame's question, or the ``misleading_question`` ablation's."""
    return MISLEADING_QUESTION if "misleading_question" in game.scn.disclosures else REPORT_QUESTION


def rows_csv(rows: list[dict]) -> str:
    """Rows as CSV text: every key of any row, in order of first appearance, a row's missing ones left empty.

    A free history of survivors only has no counts, so its flight groups lack the columns a Stage-1
    deployment has (``returned``, ``destroyed``, ...); an empty text without rows.
    """
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def flight_files(game: Game) -> dict[str, str]:
    """The code tool's data files of every observed flight.

    ``deployments.csv``: one row per flight group (source, deployment, counts, survival rate and
    the design); ``drones.csv``: every per-drone row the agent sees, with source and deployment.
    """
    space = game.space
    deps, drones = [], []
    for d in game.observed():
        slots = list(game.choices)
        summ = d.summary()
        deps.append({"source": summ.pop("source"), "deployment": summ.pop("deployment"),
                     **{k: v for k, v in summ.items() if k != "design"},
                     **{c: d.design[c] for c in space.components},
                     **{e: int(bool(d.design[e])) for e in space.equipment}, **{e: d.design[e] for e in slots}})
        drones += [{"source": d.source, "deployment": d.index, **r} for r in d.rows]
    return {"deployments.csv": rows_csv(deps), "drones.csv": rows_csv(drones)}


def _deployment_json(d: Deployment) -> dict:
    return {**d.summary(), "drones_shown": len(d.rows), "drones_csv": rows_csv(d.rows)}


def _deployment_data(d: Deployment) -> dict:
    return {**d.summary(), "drones_shown": len(d.rows), "drones": d.rows}


def _obj(payload: dict) -> str:
    return json.dumps(payload, separators=(",", ":"))


def _result(text: dict, data: dict | None = None, **kw) -> ToolResult:
    """The JSON text of ``text`` and, as data, ``data`` (default: the same object) in JSON values."""
    return ToolResult(_obj(text), json.loads(json.dumps(text if data is None else data)), **kw)


def game_tools(game: Game, *, analysis: bool = False, code_isolation: str = "off",
               code_limits: SandboxLimits | None = None) -> dict[str, Tool]:
    """The game tools bound to ``game``.

    With ``analysis`` (the agentic mode) also ``measure`` and, unless ``code_isolation`` is
    ``off``, ``run_code`` in that isolation (``bwrap`` or ``none``) under ``code_limits``
    (default the schema's).
    """
    code_limits = code_limits or SandboxLimits()
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

    def report(args):
        game.write_report(args["text"])
        return _result({"report": "committed", "characters": len(args["text"]),
                        "next": "submit_final_design(design)"})

    def submit(args):
        s = game.submit(args["design"], args.get("report"))
        out = {"submitted": s.design, "report": "committed", "fleet": s.fleet, "returned": s.survived,
               "survival_rate": round(s.survival, 4)}
        if s.threshold is not None:
            out.update({"threshold": round(s.threshold, 4), "won": s.won})
        return _result(out, ends=True)

    def code(args):
        res = run_code(args["code"], None, code_limits, isolation=code_isolation, files=flight_files(game))
        return ToolResult(res.render(), res.shown(),
                          details={k: v for k, v in res.as_dict().items() if k not in ("stdout", "stderr")})

    def measure(args):
        return _result(game.measure(args["variable"], args.get("source", "stage1"), args["deployment"]))

    def tool(name, description, params, fn):
        return Tool(name, description, {"type": "object", "additionalProperties": False, **params}, guard(fn))

    question = report_question(game)
    report_text = {"type": "string", "minLength": 1, "description": question}
    out = {
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
        "write_report": tool("write_report", f"Commit your report, once, before the submission: {question}. "
                             "It cannot be written after the Stage-2 outcome is shown.",
                             {"properties": {"text": report_text}, "required": ["text"]}, report),
        "submit_final_design": tool("submit_final_design", f"Stage 2: submit the final design, once and "
                                    f"irreversibly, with your report (`report`, unless committed before with "
                                    f"write_report); a fleet of {b['stage2_fleet']} drones is flown and scored, "
                                    f"and the play ends.",
                                    {"properties": {"design": design, "report": report_text},
                                     "required": ["design"]}, submit),
    }
    if not analysis:
        return out
    if code_isolation != "off":
        where = ("in a sandbox (no network, no other files; CPU, memory, processes, output and time limited)"
                 if code_isolation == "bwrap" else "(CPU, memory, output and time limited)")
        out["run_code"] = tool("run_code", f"Run a short Python program (numpy and scipy available) {where} on "
                               "every observed flight: the working folder holds deployments.csv (one row per "
                               "flight group: source, deployment, counts, survival rate, the design) and "
                               "drones.csv (every per-drone row you see, with source and deployment). Returns "
                               "stdout (truncated).",
                               {"properties": {"code": {"type": "string", "minLength": 1}}, "required": ["code"]},
                               code)
    if game.env_query is not None:
        shown = game.env_query.shown
        out["query_environment"] = tool(
            "query_environment", f"Summarise one visible environment variable ({', '.join(shown)}) over every "
            f"per-drone row you have seen (count, mean, min, max, or the counts of each value); "
            f"{game.env_query.budget} queries per game.",
            {"properties": {"variable": {"type": "string", "enum": shown}}, "required": ["variable"]},
            lambda args: _result(game.query_environment(args["variable"])))
    names = game.scn.measurable_variables()
    if names:
        n_hist = len(game.history)
        out["measure"] = tool("measure", f"Measure a hidden environment variable ({', '.join(names)}) on the "
                              "drones of one observed flight group whose rows you see (the history or one of "
                              "your deployments); free of charge.",
                              {"properties": {"variable": {"type": "string", "enum": names},
                                              "source": {"type": "string", "enum": ["history", "stage1"],
                                                         "default": "stage1",
                                                         "description": f"history ({n_hist} flight groups) or "
                                                                        f"stage1 (your deployments)"},
                                              "deployment": {"type": "integer", "minimum": 1,
                                                             "description": "flight group number (from 1)"}},
                               "required": ["variable", "deployment"]}, measure)
    return out
