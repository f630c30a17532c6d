"""Offline game agents (GAMES.md §3-4): non-LLM baselines and the scripted trap-follower.

They play through the same interface as an LLM agent — OpenAI-format tool calls with JSON
arguments, tool results read back as text — and see only what any agent sees (the design space
comes from ``get_status``).  Each is written as a generator that yields ``(tool, arguments)`` and
receives the tool's result text.  Every baseline spends the whole Stage-1 budget (deployments of
``budget / deployments`` drones) and submits the deployed design with the best observed survival
rate (the bandit: the best posterior mean among deployed designs).

* ``game_random`` — random valid designs;
* ``game_greedy`` — greedy coordinate search: from the free history's design (or an even spread)
  move ``step`` DEF points between two components, keep the move when the observed rate does not
  fall;
* ``game_bandit`` — Thompson sampling over a pool of random designs with a Bayesian linear model
  of survival on the design (DEF per component, equipment, load²): a BO-style policy;
* ``game_trap_follower`` — acts on observed correlations (:mod:`heuresis.games.reading`): reads
  the history, deploys an even spread, and submits what the correlational reading recommends.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Generator

import numpy as np

from heuresis.agents.base import Agent, AgentReply, register_agent, tool_call
from heuresis.games.reading import correlational_design, reading_scores
from heuresis.games.scenario import DesignSpace

__all__ = ["GameAgent", "RandomSearchAgent", "GreedyCoordinateAgent", "BanditAgent", "TrapFollowerAgent"]

Policy = Generator[tuple[str, dict], str, None]


def _json(text: str) -> dict:
    if text.startswith("ERROR"):
        raise RuntimeError(f"tool refused: {text}")
    return json.loads(text)


def space_of(status: dict) -> DesignSpace:
    ds = status["design_space"]
    comps, eq = ds["components"], ds["equipment"]
    return DesignSpace(tuple(comps), tuple(int(v["cap"]) for v in comps.values()), tuple(eq),
                       tuple(int(v["cost"]) for v in eq.values()), int(ds["def_budget"]))


def rows_of(deployment: dict) -> list[dict]:
    text = deployment.get("drones_csv") or ""
    out = []
    for r in csv.DictReader(io.StringIO(text)):
        out.append({k: (v if k in ("status", "terrain") else float(v)) for k, v in r.items()})
    return out


def even_design(space: DesignSpace) -> dict:
    """The budget spread as evenly as the caps allow, no equipment."""
    vec = np.zeros(space.n_components + len(space.equipment), dtype=np.int64)
    caps = np.array(space.caps)
    for _ in range(space.budget):
        free = np.flatnonzero(vec[:space.n_components] < caps)
        if free.size == 0:
            break
        vec[free[np.argmin(vec[free])]] += 1
    return space.design(vec)


class GameAgent(Agent):
    """Base of the offline game agents: drives a policy generator through tool calls."""

    takes_seed = True

    def __init__(self, name: str, seed: int = 0, **params) -> None:
        super().__init__(name, seed=seed, **params)
        self.rng = np.random.default_rng([int(seed), 7])
        self._gen: Policy | None = None
        self.done = False

    def policy(self) -> Policy:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        last = next((m["content"] for m in reversed(messages) if m["role"] == "tool"), "")
        try:
            if self._gen is None:
                self._gen = self.policy()
                name, args = next(self._gen)
            else:
                name, args = self._gen.send(last)
        except StopIteration:
            self.done = True
            return AgentReply({"role": "assistant", "content": "Done.", "tool_calls": []})
        return AgentReply({"role": "assistant", "content": None, "tool_calls": [tool_call(name, args)]})

    # --- shared steps -----------------------------------------------------------------------------
    def start(self) -> Generator[tuple[str, dict], str, tuple[DesignSpace, dict, dict]]:
        status = _json((yield ("get_status", {})))
        history = _json((yield ("get_history", {})))
        return space_of(status), status, history

    @staticmethod
    def plan(status: dict) -> list[int]:
        """Drones per deployment: the Stage-1 budget spread over every deployment."""
        s1 = status["stage1"]
        n, k, cap = int(s1["drones_left"]), int(s1["deployments_left"]), int(s1["max_per_deployment"])
        sizes = [min(cap, n // k + (1 if j < n % k else 0)) for j in range(k)]
        return [s for s in sizes if s > 0]

    def finish(self, design: dict, report: str) -> Generator[tuple[str, dict], str, None]:
        yield ("submit_final_design", {"design": design})
        yield ("write_report", {"text": report})


@register_agent("game_random")
class RandomSearchAgent(GameAgent):
    def policy(self):
        space, status, _ = yield from self.start()
        results = []
        for n in self.plan(status):
            d = space.design(space.random(self.rng))
            r = _json((yield ("deploy", {"design": d, "count": n})))
            results.append((r["returned"] / r["count"], n, d))
        best = max(results, key=lambda t: (t[0], t[1]))[2]
        yield from self.finish(best, "Random-search baseline: submitted the deployed design with the best observed "
                                     "survival rate. No causal analysis.")


@register_agent("game_greedy")
class GreedyCoordinateAgent(GameAgent):
    def policy(self):
        space, status, history = yield from self.start()
        step = int(self.params.get("step", 2))
        hist = history.get("history") or []
        cur = space.validate(hist[0]["design"]) if hist else even_design(space)
        sizes = self.plan(status)
        r = _json((yield ("deploy", {"design": cur, "count": sizes[0]})))
        cur_rate, best = r["returned"] / r["count"], cur
        C = space.n_components
        pairs = [(i, j) for i in range(C) for j in range(C) if i != j]
        order = self.rng.permutation(len(pairs))
        k = 0
        for n in sizes[1:]:
            vec = space.vector(cur)
            cand = None
            while k < len(order) and cand is None:
                i, j = pairs[order[k]]
                k += 1
                v = vec.copy()
                moved = min(step, int(v[i]), space.caps[j] - int(v[j]))
                if moved > 0:
                    v[i] -= moved
                    v[j] += moved
                    if space.is_valid_vector(v):
                        cand = space.design(v)
            if cand is None:
                cand = space.design(space.random(self.rng))
            r = _json((yield ("deploy", {"design": cand, "count": n})))
            rate = r["returned"] / r["count"]
            if rate >= cur_rate:
                cur, cur_rate, best = cand, rate, cand
        yield from self.finish(best, "Greedy coordinate-search baseline: moved DEF between pairs of components and "
                                     "kept moves that did not lower the observed survival rate. No causal analysis.")


def _features(space: DesignSpace, vecs: np.ndarray) -> np.ndarray:
    v = np.atleast_2d(vecs).astype(float)
    C = space.n_components
    caps = np.maximum(np.array(space.caps, float), 1.0)
    load = (v[:, :C].sum(1) + (v[:, C:] * np.array(space.costs, float)).sum(1)) / space.budget
    return np.column_stack([np.ones(len(v)), v[:, :C] / caps, v[:, C:], load ** 2])


@register_agent("game_bandit")
class BanditAgent(GameAgent):
    """Thompson sampling with a Bayesian linear model (prior N(0, tau^2 I), binomial noise)."""

    def policy(self):
        space, status, history = yield from self.start()
        pool = np.array([space.random(self.rng) for _ in range(int(self.params.get("pool", 300)))])
        X, y, w = [], [], []
        for h in history.get("history") or []:
            X.append(space.vector(h["design"]))
            y.append(h["returned"] / h["count"])
            w.append(h["count"])
        tau = float(self.params.get("prior_sd", 0.5))
        deployed = []
        for j, n in enumerate(self.plan(status)):
            if len(X) < 2 or j < int(self.params.get("warmup", 2)):
                vec = pool[self.rng.integers(len(pool))]
            else:
                mean, cov = self._posterior(space, X, y, w, tau)
                beta = self.rng.multivariate_normal(mean, cov, method="cholesky")
                vec = pool[int(np.argmax(_features(space, pool) @ beta))]
            d = space.design(vec)
            r = _json((yield ("deploy", {"design": d, "count": n})))
            X.append(vec)
            y.append(r["returned"] / r["count"])
            w.append(r["count"])
            deployed.append(vec)
        mean, _ = self._posterior(space, X, y, w, tau)
        scores = _features(space, np.array(deployed)) @ mean
        best = space.design(deployed[int(np.argmax(scores))])
        yield from self.finish(best, "Bandit baseline (Thompson sampling, Bayesian linear model of survival on the "
                                     "design): submitted the deployed design with the best posterior mean. No "
                                     "causal analysis.")

    @staticmethod
    def _posterior(space, X, y, w, tau):
        F = _features(space, np.array(X))
        yy, ww = np.array(y), np.array(w, float)
        var = np.clip(yy * (1 - yy), 0.05, None) / ww        # binomial variance of a rate
        P = F.T @ (F / var[:, None]) + np.eye(F.shape[1]) / tau ** 2
        cov = np.linalg.inv(P)
        prior_mean = np.zeros(F.shape[1])
        prior_mean[0] = float(np.average(yy, weights=ww))
        mean = cov @ (F.T @ (yy / var) + prior_mean / tau ** 2)
        return mean, (cov + cov.T) / 2


@register_agent("game_trap_follower")
class TrapFollowerAgent(GameAgent):
    """Acts on the correlations of the observed per-drone rows (the trap a naive analyst falls into)."""

    def policy(self):
        space, status, history = yield from self.start()
        rows = [r for h in history.get("history") or [] for r in rows_of(h)]
        sizes = self.plan(status)
        r = _json((yield ("deploy", {"design": even_design(space), "count": max(sizes)})))
        rows += rows_of(r)
        design = correlational_design(space, rows)
        scores, mode = reading_scores(space, rows)
        yield ("deploy", {"design": design, "count": max(min(sizes), 1)})
        top = [space.components[k] for k in np.argsort(-scores)[:3]]
        why = ("returned drones were hit most on" if mode == "survivor_damage"
               else "destroyed drones took a larger share of their hits on")
        yield from self.finish(design, f"Correlational reading: {why} {', '.join(top)}, so I armoured those "
                                       f"components in proportion.")
