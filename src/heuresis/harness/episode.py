"""One episode (docs/design.md §5.1-5.4): prompt, turns of tool calls, budgets, last turn, score.

An episode, in order:

1. build the prompt (level 0-3 templates, stated target, guided start and deletion log, limits)
   and the same facts as data (:func:`task_data`, for the agent's ``observe``);
2. run the agent loop (:class:`heuresis.harness.loop.AgentLoop`) with the toolbox of the
   condition on the instance's data, the budgets (every tool result ends with the budgets
   line), a text-only reply read as a submission if it holds an edge list, and the last-turn
   setting of the condition;
3. score the submitted graph — or, unsubmitted, the working graph (flagged unfinished) — after
   the loop, which never holds the truth (:func:`heuresis.harness.scoring.score_episode_graph`).

:func:`run_episode` drives the agent it is handed (built by the caller, a privileged one with the
episode's masking, :func:`episode_algorithm_map`) and returns an :class:`EpisodeOutcome`: the
``episodes`` row, the ``calls`` rows and the JSON transcript (every message with its usage, every
call with arguments, result, test units charged and wall time).  An exception of the agent ends the episode as ``failed`` with its
error; an exception inside a tool is answered to the agent as an error and the episode goes on.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from heuresis.artifacts.transcripts import EpisodeTranscript
from heuresis.causal.graph import Graph
from heuresis.config.loading import schema_default
from heuresis.harness.budgets import Budgets, BudgetSettings
from heuresis.harness.conditions import Condition
from heuresis.harness.integrity import episode_events, events_of_calls
from heuresis.harness.loop import AgentLoop, Call, Request
from heuresis.harness.parse import ParseError, parse_edge_list
from heuresis.harness.prompts import LAST_TURN_TEXT, render
from heuresis.harness.protocol import Agent, Usage
from heuresis.harness.requestlog import RequestLog
from heuresis.harness.sandbox import SandboxLimits, isolation_for
from heuresis.harness.scoring import score_episode_graph
from heuresis.harness.tools import ToolContext, ToolResult, toolbox

__all__ = [
    "EpisodeInput",
    "EpisodeOutcome",
    "EpisodeSettings",
    "algorithm_mapping",
    "build_prompt",
    "episode_algorithm_map",
    "episode_seed",
    "run_episode",
    "task_data",
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
    """What the config fixes for every episode of a job: budget, menu, grades, alpha, code tool."""

    budget: BudgetSettings
    menu: Mapping[str, Mapping]
    grades: tuple[tuple[float, str], ...]
    alpha: float = schema_default("episodes", "alpha")
    code_limits: SandboxLimits = SandboxLimits()
    code_isolation: str = "required"          # config episodes.code_tool.isolation


@dataclass
class EpisodeOutcome:
    """What an episode produced: its ``episodes`` row, ``calls`` rows, transcript and ``requests`` rows."""

    row: dict
    calls: list[dict]
    transcript: EpisodeTranscript
    requests: list[dict] = field(default_factory=list)   # one row per model request (:data:`REQUESTS`)


def episode_seed(salt: str, global_seed: int, agent: str, condition_id: str, instance_id: str) -> int:
    """Seed of an episode (masking, subsamples): HMAC-SHA256 keyed by the run's salt (:mod:`heuresis.artifacts.sealing`).

    Stable across runs, reruns and machines of one results tree (the salt is drawn once), and not
    computable from public values: the config, agent, condition and instance are public, the salt
    is not (unless ``secrets.salt: public``).
    """
    h = hmac.new(salt.encode(), f"{global_seed}/{agent}/{condition_id}/{instance_id}".encode(), hashlib.sha256)
    return int.from_bytes(h.digest()[:4], "little")


def algorithm_mapping(menu: Sequence[str], rng: np.random.Generator) -> dict[str, str]:
    """Masked names ``algorithm_A``.. assigned to the menu in a fresh random order."""
    order = rng.permutation(len(menu))
    letters = string.ascii_uppercase
    return {f"algorithm_{letters[k]}": menu[int(j)] for k, j in enumerate(order)}


def episode_algorithm_map(settings: EpisodeSettings, seed: int) -> dict[str, str]:
    """The masking of the episode of seed ``seed``: masked name -> menu name (:func:`algorithm_mapping`).

    The first draw of the episode's seed, as :func:`run_episode` draws it; the caller builds a
    privileged agent with it (``make_agent(..., algorithm_map=...)``).
    """
    return algorithm_mapping(list(settings.menu), np.random.default_rng(seed))


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


def task_data(cond: Condition, inp: EpisodeInput, names: Sequence[str], masked: Sequence[str]) -> dict:
    """The facts of the prompt (:func:`build_prompt`) as data: the agent's ``observe`` of the task.

    Variable names, row count, masked algorithm names, the starting graph (``complete``, or
    guided: ``pc_run`` — the output of a PC run — with its edges and deletion log: pair, set,
    test, grade, as the prompt shows them).  The budgets come with the observation itself.
    """
    guided = bool(cond.guided)
    return {"names": list(names), "rows": int(inp.data.shape[0]), "algorithms": sorted(masked),
            "start": "pc_run" if guided else "complete",
            "start_edges": inp.pc_kci_graph.to_lines() if guided else None,
            "deletion_log": _agent_visible_log(inp.pc_kci_deletions) if guided else None}


class _Episode(AgentLoop):
    """The loop of one episode: the harness's tools on the instance's data, its budgets, no truth."""

    ended_text = "not executed: the episode was submitted by an earlier call of this turn"

    def __init__(self, agent: Agent, cond: Condition, data: np.ndarray, start: Graph, pc_kci_tests: int,
                 settings: EpisodeSettings, seed: int, amap: dict[str, str]) -> None:
        names = tuple(f"X{k + 1}" for k in range(data.shape[1]))
        budgets = Budgets(settings.budget, pc_kci_tests)
        tools = {t.name: t for t in toolbox(cond.toolbox)}
        # the isolation the code tool gets; 'required' without bubblewrap raises here (fail closed)
        self.code_isolation = isolation_for(settings.code_isolation) if "run_code" in tools else "off"
        if self.code_isolation == "off":
            tools.pop("run_code", None)
        ctx = ToolContext(data=data, names=names, working=start, budgets=budgets, algorithm_map=amap,
                          menu=settings.menu, grades=settings.grades, alpha=settings.alpha,
                          code_limits=settings.code_limits, code_isolation=self.code_isolation,
                          rng=np.random.default_rng(seed))
        super().__init__(agent, tools, ctx, budgets, last_turn=cond.last_turn)
        self.budgets = budgets
        self.submitted: Graph | None = None

    def footer(self) -> tuple[str, dict]:
        """The budgets line and what remains of every budget."""
        left = self.budgets.remaining()
        return self.budgets.line(left), left

    def on_result(self, result: ToolResult) -> None:
        """Keep the graph a ``submit`` call submitted."""
        if result.submitted is not None:
            self.submitted = result.submitted

    def on_text(self, msg: dict, usage, *, last_turn: bool) -> str | None:
        """Read a text-only reply as an edge list: a submission, else the parse error."""
        text = msg.get("content") or ""
        try:
            g = parse_edge_list(text, self.ctx.names)
        except ParseError as exc:
            err = str(exc)
            self.calls.append(Call(self.turn, 0, "", "(text)", text, f"ERROR: {err}", False, err, 0, 0.0,
                                   int(usage.tokens_in or 0), int(usage.tokens_out or 0), last_turn, "{}"))
            return err
        self.calls.append(Call(self.turn, 0, "", "(text)", text, f"submitted {g.n_edges()} edges", True, "", 0, 0.0,
                               int(usage.tokens_in or 0), int(usage.tokens_out or 0), last_turn,
                               json.dumps({"edges": g.to_lines()})))
        self.submitted = g
        return None

    def final_graph(self) -> Graph:
        """The submitted graph or, unsubmitted, the working graph."""
        return self.submitted if self.submitted is not None else self.ctx.working

    def call_rows(self) -> list[dict]:
        """The calls as rows of the ``calls`` table (without the episode's keys), each with its integrity events."""
        rows = [{"turn": c.turn, "index": c.index, "call_id": c.call_id, "tool": c.tool, "arguments": c.arguments,
                 "result": c.result, "ok": c.ok, "error": c.error, "test_units": c.test_units, "wall_s": c.wall_s,
                 "tokens_in": c.tokens_in, "tokens_out": c.tokens_out, "last_turn": c.last_turn,
                 "details": c.details} for c in self.calls]
        for row, events in zip(rows, events_of_calls(rows)):
            row["integrity"] = events
        return rows


def run_episode(agent: Agent, cond: Condition, inp: EpisodeInput, settings: EpisodeSettings, seed: int, *,
                agent_origin: Mapping | None = None, request_log: RequestLog | None = None,
                spend_dir: str | Path | None = None) -> EpisodeOutcome:
    """Run one episode of ``agent`` under ``cond``; it is recorded under the agent's name.

    The caller builds the agent (:func:`heuresis.harness.protocol.make_agent`), a privileged one with
    the episode's masking, :func:`episode_algorithm_map` of the same ``seed``.  ``agent_origin``:
    a plugin's class and distribution (:func:`heuresis.harness.protocol.agent_origin`; None: a
    built-in kind), kept in the transcript.  The loop gets the instance's data, its starting
    graph and PC-KCI's test count, never the truth; the graph it ends with is scored afterwards
    (:func:`~heuresis.harness.scoring.score_episode_graph`).  ``request_log``: the episode's log
    of model requests (earlier answers replayed, every attempt appended); ``spend_dir``: the
    folder of the run's spend ledgers.
    """
    t0 = time.monotonic()
    agent_name = agent.name
    rng = np.random.default_rng(seed)
    amap = algorithm_mapping(list(settings.menu), rng)
    agent.use_records(request_log, spend_dir)
    start = inp.pc_kci_graph.copy() if cond.guided else Graph.complete(inp.data.shape[1])
    ep = _Episode(agent, cond, inp.data, start, inp.pc_kci_tests, settings, int(rng.integers(2**32)), amap)
    agent.bind(ep.budgets.limits())
    prompt = build_prompt(cond, inp, ep.ctx.names, list(amap), ep.budgets)
    ep.run(render("system"), prompt, task_data(cond, inp, ep.ctx.names, list(amap)))
    final = ep.final_graph()
    scores = score_episode_graph(inp.true_dag, inp.true_cpdag, final, inp.pc_kci_graph)
    episode_id = f"{agent_name}/{cond.condition_id}/{inp.instance_id}"
    calls = ep.call_rows()
    agent_record = agent.record()   # an external agent's command: its exit status, output, proxy attempts
    integrity = episode_events((c["integrity"] for c in calls), agent_record)
    totals = ep.totals
    requests = [r.row() for r in totals.requests]
    abandoned = [abandoned_row(e) for e in (request_log.abandoned() if request_log is not None else [])]
    abandoned_costs = [r["cost"] for r in abandoned]
    row = {
        "episode_id": episode_id, "agent": agent_name, "agent_kind": agent.kind, "model": agent.model,
        "provider": agent.provider, "privileged": bool(agent.privileged), **cond.as_dict(),
        "family": inp.family, "split": inp.split, "instance": inp.instance, "instance_id": inp.instance_id,
        "seed": int(seed), "algorithm_map": json.dumps(amap, sort_keys=True), "status": ep.status, "error": ep.error,
        "finished": ep.submitted is not None, "termination": ep.termination or "unsubmitted",
        "exhausted": ep.exhausted, "graph": final.amat.ravel().tolist(), "edges": "; ".join(final.to_lines()),
        **scores.row(), "turns": ep.turn, "n_calls": len(calls),
        "n_errors": sum(not c["ok"] for c in calls),
        "test_units_used": ep.budgets.used_test_units, "test_units_limit": ep.budgets.test_units,
        "algorithm_calls_used": ep.budgets.used_algorithm_calls, "algorithm_calls_limit": ep.budgets.algorithm_calls,
        "turns_limit": ep.budgets.turns, "wall_s": round(time.monotonic() - t0, 3),
        "working_s": round(ep.budgets.elapsed(), 3),
        "tokens_in": totals.tokens_in, "tokens_out": totals.tokens_out,
        "cost": totals.cost, "retries": totals.retries,
        "abandoned_cost": None if None in abandoned_costs else float(sum(abandoned_costs)),
        "empty_length_replies": sum(r["finish_reason"] == "empty_length" for r in requests),
        "warnings": "; ".join(totals.warnings), "code_isolation": ep.code_isolation,
        "integrity_events": sum(integrity.values()), "integrity_counts": json.dumps(integrity),
    }
    keys = {"episode_id": episode_id, "agent": agent_name, "condition_id": cond.condition_id,
            "family": inp.family, "split": inp.split, "instance": inp.instance}
    transcript = EpisodeTranscript(
        episode=row, condition=cond.as_dict(),
        budgets={"limits": ep.budgets.limits(), "used": ep.budgets.used(), "setting": ep.budgets.settings.name},
        agent_origin=dict(agent_origin) if agent_origin is not None else None,   # a plugin: class, distribution
        algorithm_map=amap, algorithm_map_given_to_agent=bool(agent.privileged),
        start_graph=("pc_kci" if cond.guided else "complete"),
        deletion_log_shown=_agent_visible_log(inp.pc_kci_deletions) if cond.guided else None,
        tools=ep.specs, messages=ep.transcript_messages(), calls=calls,
        error=ep.failure,
        agent_record=agent_record,
        requests=requests)
    return EpisodeOutcome(row, [{**keys, **c} for c in calls], transcript,
                          [{**keys, "index": k, **r} for k, r in enumerate(requests + abandoned)])


def abandoned_row(entry: Mapping) -> dict:
    """A request-log answer no later run replayed, as a row of the requests table (turn -1, ``abandoned``)."""
    fields = {k: v for k, v in (entry.get("usage") or {}).items() if k in Usage.__dataclass_fields__}
    row = Request(-1, 0.0, Usage(**fields)).row()
    return {**row, "abandoned": True, "replayed": False}
