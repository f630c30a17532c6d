"""A tiny plugin package for Heuresis: two honest agents and an algorithm from outside the package.

* :class:`OneAlgorithmAgent` (episodes): reads the task (the variables and the masked algorithm
  names), runs one masked algorithm, submits that algorithm's graph.
* :class:`ExamplePlayer` (games, agentic mode): reads the game's status and free history, deploys
  an even spread of the defence budget and the best design of the history, submits the one that
  survived better, writes a short report.

Both see only what every agent sees: the messages, the tools offered now, and the structured
content of the task and of each tool result (``observe``); never the truth, never the unmasking
map.  They register as the kinds ``example_one_algorithm`` and ``example_player`` through the
entry-point group ``heuresis.agents`` (pyproject.toml); ``{kind: python, class:
"heuresis_example_agent:OneAlgorithmAgent"}`` names the same class without the entry point.

* :class:`CorrelationSkeleton` (an algorithm): an undirected edge wherever two variables' Pearson
  correlation exceeds ``threshold`` in absolute value.  It registers as ``example_correlation``
  through the entry-point group ``heuresis.algorithms``; the config then sweeps it as a reference
  baseline (``references.baselines``) or offers it on the agents' menu (``references.algorithms``).
"""

from __future__ import annotations

import numpy as np

from heuresis.causal.algorithms import Algorithm, AlgorithmResult, Param
from heuresis.causal.graph import Graph
from heuresis.harness.protocol import Agent, AgentReply, Observation, Usage, tool_call

__all__ = ["CorrelationSkeleton", "ExamplePlayer", "OneAlgorithmAgent"]


class CorrelationSkeleton(Algorithm):
    """Undirected edges between the pairs whose |Pearson r| exceeds ``threshold`` (no CI test)."""

    param_spec = {"threshold": Param(0.3, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                                     and 0 < v < 1, "a number in (0, 1)", "smallest |r| that makes an edge")}
    cost_class = "fast"

    def _run(self, data: np.ndarray) -> AlgorithmResult:
        r = np.abs(np.corrcoef(data, rowvar=False))
        adj = (r > float(self.params["threshold"])).astype(np.int8)
        np.fill_diagonal(adj, 0)
        return AlgorithmResult(graph=Graph(adj), n_tests=0, details={"edges": int(adj.sum() // 2)})


def _reply(calls: list[dict], content: str | None = None) -> AgentReply:
    """One assistant message with ``calls``; an offline agent spends nothing (``Usage()``)."""
    return AgentReply({"role": "assistant", "content": content, "tool_calls": calls}, Usage())


class OneAlgorithmAgent(Agent):
    """Run the ``pick``-th masked algorithm of the task (in the task's order) and submit its output.

    Parameters
    ----------
    name : str
        The agent's name in the config.
    pick : int
        Which masked algorithm to run (0: the first the task lists); the masked names are
        shuffled per episode, so this is a blind choice, as any agent's first choice is.
    """

    def __init__(self, name: str, pick: int = 0) -> None:
        if not isinstance(pick, int) or isinstance(pick, bool) or pick < 0:
            raise ValueError(f"agent {name!r}: pick must be a whole number >= 0, got {pick!r}")
        super().__init__(name, pick=pick)
        self.pick = pick
        self.task: dict = {}
        self.results: dict[str, Observation] = {}
        self.call_id: str | None = None

    def observe(self, observation: Observation) -> None:
        """Keep the task's data and every tool result by call id."""
        if observation.key == "task":
            self.task = dict(observation.data)
        else:
            self.results[observation.key] = observation

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """First turn: run one algorithm; then (or when only ``submit`` is offered) submit its graph."""
        offered = [t["function"]["name"] for t in tools]
        algorithms = list(self.task.get("algorithms") or [])
        if self.call_id is None and "run_algorithm" in offered and algorithms:
            call = tool_call("run_algorithm", {"algorithm": algorithms[self.pick % len(algorithms)]})
            self.call_id = call["id"]
            return _reply([call])
        result = self.results.get(self.call_id or "")
        if result is not None and result.ok:
            return _reply([tool_call("submit", {"edges": list(result.data.get("edges") or [])})])
        return _reply([tool_call("submit", {})])   # no graph of its own: the working graph


class ExamplePlayer(Agent):
    """Compare an even spread of the defence budget with the history's best design; submit the better.

    Plays the games' agentic mode.  ``takes_seed`` asks the harness for the play's seed (recorded
    with the play); this player draws nothing from it, but a randomised player must draw only from it.
    """

    takes_seed = True

    def __init__(self, name: str, seed: int = 0) -> None:
        super().__init__(name, seed=seed)
        self.last: Observation | None = None
        self.status: dict = {}
        self.candidates: list[dict] = []
        self.rates: list[float] = []
        self.step = "status"

    def observe(self, observation: Observation) -> None:
        """Keep the latest tool result (the game's task carries no data)."""
        if observation.key != "task":
            self.last = observation

    def _data(self) -> dict:
        if self.last is None or not self.last.ok:
            raise RuntimeError(f"tool refused: {self.last.error if self.last else 'no result'}")
        return self.last.data

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """The next call of the plan: status, history, two deployments, submission, report."""
        if self.step == "status":
            self.step = "history"
            return _reply([tool_call("get_status", {})])
        if self.step == "history":
            self.status = self._data()
            self.step = "deploy"
            return _reply([tool_call("get_history", {})])
        if self.step == "deploy":
            self.candidates = [_even(self.status["design_space"]), *_best_of_history(self._data())]
            self.step = "deployed"
        elif self.step == "deployed":
            data = self._data()
            self.rates.append(data["returned"] / data["count"])
        if self.step == "deployed" and len(self.rates) < len(self.candidates):
            s1 = self.status["stage1"]
            count = max(1, min(int(s1["max_per_deployment"]), int(s1["drones_left"]) // len(self.candidates)))
            return _reply([tool_call("deploy", {"design": self.candidates[len(self.rates)], "count": count})])
        if self.step == "deployed":   # the report is committed with the submission, before its outcome
            self.step = "done"
            best = max(range(len(self.rates)), key=lambda k: self.rates[k])
            return _reply([tool_call("submit_final_design", {"design": self.candidates[best], "report": (
                "Example player: deployed an even spread of the defence budget and the best design of the "
                f"free history, observed survival rates {', '.join(f'{r:.2f}' for r in self.rates)}, and "
                "submitted the better one. No causal analysis.")})])
        return _reply([], "Done.")


def _even(space: dict) -> dict:
    """The defence budget spread one point at a time over the components below their caps; no equipment."""
    caps = {c: int(v["cap"]) for c, v in space["components"].items()}
    design: dict = dict.fromkeys(caps, 0) | dict.fromkeys(space["equipment"], False)
    for _ in range(int(space["def_budget"])):
        free = [c for c in caps if design[c] < caps[c]]
        if not free:
            break
        design[min(free, key=lambda c: design[c])] += 1
    return design


def _best_of_history(history: dict) -> list[dict]:
    """The design of the free history with the best observed survival rate (none without a history).

    A history of survivors only counts no losses: then its first flight group's design.
    """
    groups = history.get("history") or []
    counted = [h for h in groups if h.get("count")]
    if counted:
        return [dict(max(counted, key=lambda h: h["returned"] / h["count"])["design"])]
    return [dict(groups[0]["design"])] if groups else []
