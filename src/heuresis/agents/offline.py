"""Offline agents (docs/design.md §5.5): scripted policies that act only through tool calls.

They drive the same interface an LLM agent does — OpenAI-format tool calls with JSON-string
arguments — and need no network.  They read the task and the tool results as the structured
data the harness hands every agent (:class:`~heuresis.harness.protocol.Observation`: the same facts
as the text, never the prose), so rewording a tool's text cannot change what they do.  They are **privileged
baselines**: the harness passes them the episode's unmasking map (masked name -> menu name) in
the constructor (recorded in the episode as ``privileged``), because a baseline must know which
masked algorithm is PC-KCI; an agent under study never gets it.

* ``shortcut`` — run PC-KCI, submit its output.
* ``merge`` — run every menu algorithm, add to PC-KCI's output (as undirected) every pair that at
  least ``k`` of the other algorithms join, submit.
* ``evidence`` — start from PC-KCI's output (guided: the starting graph and deletion log of the
  prompt, candidates the deletions with the chosen logged grades; unguided: run PC-KCI, every
  non-adjacent pair a candidate), re-test each candidate through ``ci_test`` calls under the
  alternative conditioning sets the current graph implies, and restore it, undirected, when every
  check of its :class:`EvidenceRule` passes (e.g. KCI dependent given both endpoints' neighbour
  sets and Fisher-z dependent given each single neighbour), optionally confirmed by a stability
  check — within the test budget left (the observed budgets); guided and with the code tool offered,
  also restore the deletions a nonlinear screen and a local permutation test find dependent
  (programs of :mod:`heuresis.agents.nlcode` sent through ``run_code``); then submit.  The rule,
  its planning and its decisions are pure functions of :mod:`heuresis.agents.evidence`, which
  ``benchmarks/evidence_agent.py`` replays on cached p-values to choose the settings on dev.

When offered only ``submit`` (the last turn) every agent submits the best graph it has.
"""

from __future__ import annotations

from collections.abc import Mapping

from heuresis.agents import nlcode
from heuresis.agents.evidence import (
    EvidenceRule,
    RetestPlan,
    decide_nonlinear,
    decide_restore,
    plan_confirm,
    plan_retests,
    plan_screen,
)
from heuresis.causal.graph import Graph, Relation
from heuresis.harness.parse import ParseError, parse_edge_list
from heuresis.harness.protocol import Agent, AgentReply, Observation, register_agent, tool_call

__all__ = ["EvidenceAgent", "MergeAgent", "ShortcutAgent"]

# --- reading what the harness observed (structured results, never the prose) ---------------------
def _graph_of(obs: Observation | None, names: list[str]) -> Graph | None:
    """The graph of a run_algorithm / view_graph result, or None for an error (or no result)."""
    if obs is None or not obs.ok:
        return None
    edges = obs.data.get("edges") or []
    if not edges:
        return Graph.empty(len(names), names)
    try:
        return parse_edge_list("\n".join(edges), names)
    except ParseError:
        return None


def _msg(calls: list[dict], content: str | None = None) -> AgentReply:
    return AgentReply({"role": "assistant", "content": content, "tool_calls": calls})


def _submit(g: Graph | None) -> AgentReply:
    args = {} if g is None else {"edges": g.to_lines()}
    return _msg([tool_call("submit", args)])


def _only_submit(tools: list[dict]) -> bool:
    return [t["function"]["name"] for t in tools] == ["submit"]


class _Offline(Agent):
    """Base of the offline agents: the unmasking map, and the task and results as observed data."""

    privileged = True

    def __init__(self, name: str, algorithm_map: Mapping[str, str] | None = None, **params) -> None:
        super().__init__(name, **params)
        self.unmask = dict(algorithm_map or {})
        self.mask = {v: k for k, v in self.unmask.items()}
        self.best: Graph | None = None
        self.step = 0
        self.pending: dict[str, tuple] = {}
        self.task: dict = {}
        self.budgets: dict = {}
        self._inbox: dict[str, Observation] = {}

    def masked(self, algorithm: str) -> str:
        """The masked name of menu algorithm ``algorithm`` in this episode."""
        if algorithm not in self.mask:
            raise ValueError(f"{self.name}: {algorithm!r} is not on the menu of this episode")
        return self.mask[algorithm]

    @property
    def names(self) -> list[str]:
        """The variables, as the task names them."""
        if "names" not in self.task:
            raise ValueError(f"{self.name}: the task does not name the variables")
        return list(self.task["names"])

    def observe(self, observation: Observation) -> None:
        """Keep the task, the latest budgets and the results of the current turn's calls."""
        if observation.key == "task":
            self.task = dict(observation.data)
        else:
            self._inbox[observation.key] = observation
        if observation.budgets is not None:
            self.budgets = dict(observation.budgets)

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """Submit the best graph in the last turn, else the next step of :meth:`act`."""
        results, self._inbox = self._inbox, {}
        if _only_submit(tools):
            return _submit(self.best)
        self.step += 1
        return self.act(results)

    def act(self, results: dict[str, Observation]) -> AgentReply:
        """The next reply, given the results of the previous turn's calls by call id."""
        raise NotImplementedError


@register_agent("shortcut")
class ShortcutAgent(_Offline):
    """Runs PC-KCI through the masked tool and submits its output."""

    def act(self, results):
        """The next reply (see the class), given the previous turn's results by call id."""
        names = self.names
        if self.step == 1:
            tc = tool_call("run_algorithm", {"algorithm": self.masked("pc_kci")})
            self.pending = {tc["id"]: ("pc_kci",)}
            return _msg([tc])
        for cid in self.pending:
            self.best = _graph_of(results.get(cid), names) or self.best
        return _submit(self.best)


@register_agent("merge")
class MergeAgent(_Offline):
    """PC-KCI plus every pair at least ``k`` other menu algorithms join (undirected)."""

    def __init__(self, name: str, algorithm_map=None, k: int = 2, **params) -> None:
        super().__init__(name, algorithm_map, k=k, **params)
        self.k = int(k)

    def act(self, results):
        """The next reply (see the class), given the previous turn's results by call id."""
        names = self.names
        if self.step == 1:
            calls = []
            for masked, real in sorted(self.unmask.items()):
                tc = tool_call("run_algorithm", {"algorithm": masked})
                self.pending[tc["id"]] = real
                calls.append(tc)
            return _msg(calls)
        graphs = {real: _graph_of(results.get(cid), names) for cid, real in self.pending.items()}
        base = graphs.get("pc_kci")
        if base is None:
            return _submit(None)
        merged = base.copy()
        others = [g for a, g in graphs.items() if a != "pc_kci" and g is not None]
        skel = base.skeleton()
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                if not skel[i, j] and sum(bool(g.skeleton()[i, j]) for g in others) >= self.k:
                    merged.set(i, j, Relation.UNDIRECTED)
        self.best = merged
        return _submit(merged)


@register_agent("evidence")
class EvidenceAgent(_Offline):
    """Re-tests PC-KCI's doubtful deletions under alternative sets; restores robustly dependent pairs.

    1. *Candidates* and 2. *re-tests*: :func:`plan_retests` with the :class:`EvidenceRule` built
       from the agent's parameters (guided: the logged deletions with the chosen grades; unguided:
       run PC-KCI through the masked tool, every non-adjacent pair), within the test budget read
       from the observed budgets; every test is one ``ci_test`` tool call.
       With the nonlinear path on (guided, code tool offered), the same turn sends one ``run_code``
       program that screens every logged deletion (:func:`plan_screen`, :mod:`.nlcode`).
    3. *Decide*: :func:`decide_restore` on the grades read back from the tool results.
    4. *Stability* (optional, ``resamples`` > 0 and the tool offered): pairs that pass are
       re-tested on ``resamples`` subsamples at their weakest alternative set and kept when at
       least ``min_dependent_share`` of them come out dependent.
    5. *Nonlinear path*: the screened pairs below the threshold (:func:`plan_confirm`) go to local
       permutation tests, ``chunk`` pairs per ``run_code`` call; :func:`decide_nonlinear` adds the
       confirmed ones.  A failed or truncated program confirms nothing.
    6. Restore the pairs, undirected, and submit.

    The settings in config.yaml (``agents.evidence``) were chosen on dev instances by
    ``benchmarks/evidence_agent.py``; the measured numbers are in docs/agents.md.
    """

    def __init__(self, name: str, algorithm_map=None, resamples: int = 0, min_dependent_share: float = 0.5,
                 **params) -> None:
        self.rule = EvidenceRule.from_config(params)
        super().__init__(name, algorithm_map, resamples=resamples, min_dependent_share=min_dependent_share,
                         **self.rule.as_config())
        self.resamples, self.min_share = int(resamples), float(min_dependent_share)
        self.phase = "start"
        self.log: list[tuple[int, int, tuple[int, ...], str]] | None = None
        self.plan: RetestPlan | None = None
        self.passed: list[tuple[int, int]] = []
        self.screened: dict[tuple[int, int], float] = {}
        self._tools: list[dict] | None = None

    def _start_guided(self, names) -> None:
        """The guided start: PC-KCI's output and deletion log, as the task gives them."""
        edges = self.task.get("start_edges") or []
        self.best = parse_edge_list("\n".join(edges), names) if edges else Graph.empty(len(names), names)
        idx = {n: k for k, n in enumerate(names)}
        self.log = [(idx[d["x"]], idx[d["y"]], tuple(sorted(idx[v] for v in d["sepset"])), str(d["grade"]))
                    for d in self.task["deletion_log"]]

    @staticmethod
    def _grade(obs: Observation | None) -> str | None:
        """The grade of a ``ci_test`` result (None for an error)."""
        return str(obs.data["grade"]) if obs is not None and obs.ok else None

    def _offered(self, tool: str) -> bool:
        return tool in {t["function"]["name"] for t in (self._tools or [])}

    def act(self, results):
        """The next reply (see the class), given the previous turn's results by call id."""
        names = self.names
        if self.phase == "start":
            if self.task.get("deletion_log") is not None:
                self._start_guided(names)
                self.phase = "retest"
            else:
                tc = tool_call("run_algorithm", {"algorithm": self.masked("pc_kci")})
                self.pending = {tc["id"]: ("pc_kci",)}
                self.phase = "candidates"
                return _msg([tc])
        if self.phase == "candidates":
            g = _graph_of(next((results.get(cid) for cid in self.pending), None), names)
            if g is None:
                return _submit(None)
            self.best = g
            self.phase = "retest"
        left = self.budgets.get("test_units") or 0
        if self.phase == "retest":
            self.plan = plan_retests(self.rule, self.best, self.log, left)
            left -= len(self.plan.tests)
            self.pending = {}
            calls = []
            for x, y, s, test in self.plan.tests:
                self._queue(calls, (x, y, s, test), "ci_test",
                            {"x": names[x], "y": names[y], "given": [names[k] for k in s], "test": test})
            jobs = plan_screen(self.rule, self.best, self.log) if self._offered("run_code") else []
            if jobs:   # the nonlinear screen: one program through the code tool (no test units)
                self._queue(calls, ("screen",), "run_code", {"code": nlcode.program("screen", jobs)})
            self.phase = "decide"
            if calls:
                return _msg(calls)
        if self.phase == "decide":
            grades, self.screened = {}, {}
            for cid, key in self.pending.items():
                if key == ("screen",):
                    self.screened = self._code_values(results.get(cid))
                else:
                    grades[key] = self._grade(results.get(cid))
            self.passed = decide_restore(self.rule, self.plan, grades)
            self.pending = {}
            if self.resamples > 0 and self._offered("stability_check"):
                calls = []
                for x, y in self.passed:
                    if self.resamples > left:
                        break
                    left -= self.resamples
                    # the first set of the first check, under that check's test
                    s, test = self.plan.reads[(x, y)][0][0]
                    self._queue(calls, (x, y), "stability_check", {"x": names[x], "y": names[y],
                                                                   "given": [names[k] for k in s], "test": test,
                                                                   "resamples": self.resamples})
                self.phase = "stability"
                if calls:
                    return _msg(calls)
            self.phase = "nonlinear"
        if self.phase == "stability":
            keep = []
            for cid, (x, y) in self.pending.items():
                obs = results.get(cid)
                if obs is not None and obs.ok:
                    dep_n, ind_n = int(obs.data["dependent"]), int(obs.data["independent"])
                    if dep_n / max(1, dep_n + ind_n) >= self.min_share:
                        keep.append((x, y))
            self.passed = keep
            self.phase = "nonlinear"
        if self.phase == "nonlinear":
            jobs = plan_confirm(self.rule, self.best, self.log, self.screened, skip=self.passed)
            self.pending = {}
            calls = []
            if jobs:
                nl = self.rule.nonlinear
                for k in range(0, len(jobs), nl["chunk"]):
                    self._queue(calls, ("confirm",), "run_code",
                                {"code": nlcode.program("confirm", jobs[k:k + nl["chunk"]],
                                                        permutations=nl["permutations"], block=nl["block"])})
            self.phase = "confirm"
            if calls:
                return _msg(calls)
        if self.phase == "confirm":
            confirmed: dict[tuple[int, int], float] = {}
            for cid in self.pending:
                confirmed.update(self._code_values(results.get(cid)))
            done = set(self.passed)
            self.passed = list(self.passed) + [k for k in decide_nonlinear(self.rule, confirmed) if k not in done]
            self.pending = {}
            self.phase = "restore"
        if self.phase == "restore":
            g = self.best.copy()
            for x, y in self.passed:
                g.set(x, y, Relation.UNDIRECTED)
            self.best = g
            self.phase = "done"
        return _submit(self.best)

    def _queue(self, calls: list[dict], key: tuple, tool: str, args: dict) -> None:
        """Append a call of ``tool`` to ``calls``; its result is read back under ``key``."""
        tc = tool_call(tool, args)
        self.pending[tc["id"]] = key
        calls.append(tc)

    @staticmethod
    def _code_values(obs: Observation | None) -> dict[tuple[int, int], float]:
        """The ``x y value`` lines of a code-tool run that exited 0 ({} when it failed or was killed)."""
        if obs is None or not obs.ok or obs.data.get("timed_out") or obs.data.get("exit_code") != 0:
            return {}
        return nlcode.parse(obs.data.get("stdout") or "")

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """Note the tools offered (the code and stability tools are optional), then act."""
        self._tools = tools
        return super().respond(messages, tools)
