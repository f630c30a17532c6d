"""The games track by hand: ``play`` (a scenario played at the terminal) and ``game-references``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping

from heuresis.agents.players import rows_of
from heuresis.artifacts.io import atomic_write_text
from heuresis.artifacts.provenance import code_version
from heuresis.artifacts.report import format_interval
from heuresis.causal.games import Game, exact
from heuresis.causal.games.game import GameError
from heuresis.causal.games.references import scenario_references
from heuresis.causal.games.scenario import load_scenario, load_scenarios, scenario_dir
from heuresis.harness.game_tools import game_tools
from heuresis.stages.games.play import task_prompt


def _status_text(status: Mapping) -> str:
    """A game's status as a few lines for a human (``status --json``: the agents' JSON)."""
    space = status.get("design_space", {})
    comps = ", ".join(f"{c} {v['default']} (cap {v['cap']})" if "default" in v else f"{c} (cap {v['cap']})"
                      for c, v in space.get("components", {}).items())
    lines = [f"{status.get('scenario')}: {status.get('stage')}"]
    s1 = status.get("stage1") or {}
    if s1:
        lines.append(f"  Stage 1: {s1.get('drones_left')} of {s1.get('drones_total')} drones and "
                     f"{s1.get('deployments_left')} of {s1.get('deployments_total')} deployments left "
                     f"(at most {s1.get('max_per_deployment')} per deployment)")
    defaults = any("default" in v for v in space.get("components", {}).values())
    lines.append(f"  design: DEF per component: {comps}; at most {space.get('def_budget')} in all"
                 + (" (a component left out keeps its default)" if defaults else " (a component left out gets 0)"))
    for key, label in (("equipment", "equipment"), ("modules", "modules")):
        if space.get(key):
            lines.append(f"  {label}: {json.dumps(space[key])}")
    queries = f"; environment queries left: {status['env_queries_left']}" if "env_queries_left" in status else ""
    lines.append(f"  visible variables: {', '.join(status.get('visible_variables', [])) or 'none'}{queries}; "
                 f"free history: {status.get('history_records')} records")
    lines.append(f"  report: {'committed' if status.get('report_committed') else 'not committed yet'}")
    known = {"scenario", "stage", "design_space", "stage1", "visible_variables", "env_queries_left",
             "history_records", "report_committed"}
    lines += [f"  {k}: {json.dumps(v)}" for k, v in status.items() if k not in known]
    return "\n".join(lines)


def _parse_design(text: str) -> dict:
    """A design typed by a human: JSON (``{"engine": 30}``) or ``engine=30 wing=15 antenna_type=standard``."""
    text = text.strip()
    if text.startswith("{"):
        return json.loads(text)
    out: dict = {}
    for part in text.replace(",", " ").split():
        key, sep, val = part.partition("=")
        if not sep:
            raise ValueError(f"cannot read {part!r}: write component=points, e.g. engine=30")
        low = val.lower()
        out[key] = (True if low in ("yes", "true", "on") else False if low in ("no", "false", "off")
                    else int(val) if val.lstrip("-").isdigit() else val)   # an equipment slot's choice by name
    return out


_PLAY_HELP = """commands:
  status                          design space and budgets left (status --json: as the agents get it)
  history                         every observed flight (free history and your deployments)
  deploy COUNT DESIGN             fly COUNT drones, e.g.  deploy 20 engine=30 wing=15 body=15
  query VARIABLE                  summarise a visible environment variable over the rows seen (within the
                                  scenario's query budget)
  report TEXT                     commit your report (once, before submitting)
  submit DESIGN                   the final design (once, irreversible), e.g.  submit engine=30 wing=15
  help | quit"""


def cmd_play(args: argparse.Namespace, inp=input, out=print) -> int:
    """Play a scenario by hand through the same game the agents play."""
    scn = load_scenario(args.scenario, args.scenarios)
    game = Game(scn, seed=args.seed, threshold=args.threshold)
    tools = game_tools(game)
    out(task_prompt(game))
    out("\n" + _PLAY_HELP)

    def show(dep: dict) -> None:
        counts = f"{dep['returned']}/{dep['count']} returned" if "count" in dep else f"{dep['records']} records"
        out(f"deployment {dep['deployment']} ({dep['source']}): {counts}; design {_design_text(dep['design'])}")
        rows = rows_of(dep)
        if rows:
            out("  " + "  ".join(rows[0]))
            for r in rows[: args.rows]:
                out("  " + "  ".join(str(int(v)) if isinstance(v, float) and v == int(v) else str(v) for v in r.values()))
            if len(rows) > args.rows:
                out(f"  ... {len(rows) - args.rows} more rows")

    while game.stage != "done":
        try:
            line = inp(f"[{game.stage}] > ").strip()
        except EOFError:
            break
        cmd, _, rest = line.partition(" ")
        try:
            if cmd in ("quit", "exit"):
                break
            if cmd == "help" or not cmd:
                out(_PLAY_HELP)
            elif cmd == "status":
                out(json.dumps(game.status(), indent=1) if rest.strip() == "--json" else _status_text(game.status()))
            elif cmd == "history":
                res = tools["get_history"].call(None, {}).data  # type: ignore[arg-type]
                for dep in res["history"] + res["stage1"]:
                    show(dep)
            elif cmd == "deploy":
                count, _, design = rest.strip().partition(" ")
                res = tools["deploy"].call(None, {"design": _parse_design(design), "count": int(count)}).data  # type: ignore[arg-type]
                show(res)
                out(f"left: {res['drones_left']} drones, {res['deployments_left']} deployments")
            elif cmd == "submit":
                done = tools["submit_final_design"].call(None, {"design": _parse_design(rest)}).data  # type: ignore[arg-type]
                out(f"submitted: {_design_text(done['submitted'])}")
            elif cmd == "query":
                q = game.query_environment(rest.strip())
                out(f"{q.pop('variable')}: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in q.items()))
            elif cmd == "report":
                tools["write_report"].call(None, {"text": rest})  # type: ignore[arg-type]
                out(f"report committed ({len(rest)} characters); next: submit DESIGN")
            else:
                out(f"unknown command {cmd!r}\n{_PLAY_HELP}")
        except (GameError, ValueError) as exc:   # the tools' messages name the agents' tools; here the commands
            out("refused: " + str(exc).replace("submit_final_design", "submit").replace("write_report", "report"))
    if game.stage2 is not None:
        s = game.stage2
        out(f"final: {s.survived}/{s.fleet} survived ({s.survival:.1%})" + ("" if s.won is None else f", won: {s.won}"))
        out(_beside_optimum(scn, s.design))
    return 0


def _design_text(design: dict) -> str:
    """A design as the hand-played game writes it (``engine=30 wing=15 ...``, equipment fitted by name)."""
    return " ".join(k if v is True else f"{k}={v}" for k, v in design.items() if v is not False)


def _beside_optimum(scn, design: dict) -> str:
    """The submitted design's exact survival beside the best design of the scenario's lattice."""
    best, yours = exact.exact_optimum(scn), exact.exact_survival(scn, design)
    gap = "as good as the best" if yours >= best.value - 1e-9 else f"{best.value - yours:.3f} below the best"
    return (f"your design's exact survival: {yours:.3f}, {gap}: {_design_text(best.design)} survives {best.value:.3f} "
            f"(exact, over the {best.lattice_size:,} designs with DEF in steps of {best.step})")


def cmd_game_references(args: argparse.Namespace) -> int:
    """Optimum, trap, standard and threshold of game scenarios; writes JSON with ``--out``."""
    scns = load_scenarios(args.scenarios, args.scenario or None)
    if not scns:
        raise ValueError(f"no scenario file (*.yaml) in {args.scenarios or scenario_dir()}")
    out: dict = {"_about": {"command": "heuresis game-references", "code": code_version(),
                            "note": "optimum, trap and standard exact (the lattice of DEF steps of 5 and the "
                                    "full integer lattice), each flown on 10 fresh Stage-2 fleets"}}
    for name, scn in scns.items():
        ref = scenario_references(scn)
        out[name] = ref.as_dict()
        print(f"{name:28s} optimum {format_interval(ref.optimum, ref.optimum_lo, ref.optimum_hi)} "
              f"({ref.optimum_method} {ref.optimum_search:.3f}, runner-up {ref.runner_up:.3f})  trap {ref.trap:.3f}  "
              f"standard {ref.standard:.3f}  threshold {ref.threshold:.3f} ({ref.threshold_rule})", flush=True)
    if args.out:
        atomic_write_text(args.out, json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


def add_commands(sub) -> None:
    """Add this group's commands to the ``heuresis`` parser's subcommands ``sub``."""
    sp = sub.add_parser("game-references", help="optimum, trap, standard and threshold of game scenarios")
    sp.add_argument("scenario", nargs="*", help="scenario names (default: every file in the folder)")
    sp.add_argument("--scenarios", default=None, help="scenario folder (default: games.scenarios_dir's default, CausalGame's)")
    sp.add_argument("--out", help="write the references as JSON here")
    sp.set_defaults(func=cmd_game_references)

    sp = sub.add_parser("play", help="play a game scenario by hand (deploy, history, submit, report)")
    sp.add_argument("scenario", help="scenario name (a file of the scenario folder) or a path")
    sp.add_argument("--scenarios", default=None, help="scenario folder (default: games.scenarios_dir's default, CausalGame's)")
    sp.add_argument("--seed", type=int, default=0, help="play seed (Stage-1 and Stage-2 draws)")
    sp.add_argument("--threshold", type=float, default=None, help="win threshold to show (default: none)")
    sp.add_argument("--rows", type=int, default=15, help="per-drone rows shown per deployment")
    sp.set_defaults(func=cmd_play)
