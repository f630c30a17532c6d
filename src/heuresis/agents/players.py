"""Offline game agents (docs/games.md §3-4): random, greedy, bandit, mechanism-aware and the scripted trap-follower.

They play through the same interface as an LLM agent — OpenAI-format tool calls with JSON
arguments — and see only what any agent sees (the design space comes from ``get_status``); they
read each tool result as its data (:class:`~heuresis.harness.protocol.Observation`: the same JSON
object as the text, per-drone rows as records), never the text.  Each is written as a generator
that yields ``(tool, arguments)`` and receives the result's data.  Every one spends the whole Stage-1 budget (deployments of
``budget / deployments`` drones) and submits the deployed design with the best observed survival
rate (the bandit: the best posterior mean among deployed designs).

* ``game_random`` — random valid designs;
* ``game_greedy`` — greedy coordinate search: from the free history's design (or an even spread)
  move ``step`` DEF points between two components, keep the move when the observed rate does not
  fall;
* ``game_bandit`` — Thompson sampling over a pool of random designs with a Bayesian linear model
  of survival on the design (DEF per component, equipment, load²): a BO-style policy;
* ``game_trap_follower`` — acts on observed correlations (:mod:`heuresis.causal.games.reading`): reads
  the history, deploys an even spread, and submits what the correlational reading recommends;
* ``game_mechanism`` — mechanism-aware: it knows the family's causal structure
  (:data:`STRUCTURE`: which parts are critical, that a working antenna draws detection, which
  parts storms damage, that the shield absorbs EMI failures, that camera and gun lower the
  enemy's accuracy and damage) but none of its parameters.  The structure fixes the *form* of
  the design (no DEF on the antenna, the whole DEF budget spent); the Stage-1 budget chooses the *amounts* — the
  share of DEF on camera and gun and the share on the exposed parts (storm-damaged parts, or
  the shield) — from a 3 x 3 grid of designs, one deployment each, read through a
  main-effects model of the observed survival rates (each level pooled over three
  deployments); the remaining drones fly the chosen design and the model is refitted before the
  submission.  It plays under exactly the Stage-1 budget and observations of every agent (the
  same tools); its only extra input is the scenario's family name.
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np

from heuresis.causal.games.reading import correlational_design, reading_scores
from heuresis.causal.games.scenario import DesignError, DesignSpace
from heuresis.harness.protocol import Agent, AgentReply, Observation, register_agent, tool_call

__all__ = [
    "STRUCTURE",
    "BanditAgent",
    "GameAgent",
    "GreedyCoordinateAgent",
    "MechanismAgent",
    "RandomSearchAgent",
    "TrapFollowerAgent",
]

Policy = Generator[tuple[str, dict], Observation | None, None]


def _json(obs: Observation | None) -> dict:
    """The data of a tool result; a refused call stops the policy (the play fails, recorded)."""
    if obs is None or not obs.ok:
        raise RuntimeError(f"tool refused: ERROR: {obs.error if obs is not None else 'no result'}")
    return obs.data


def space_of(status: dict) -> DesignSpace:
    """The design space of a ``get_status`` result."""
    ds = status["design_space"]
    comps, eq = ds["components"], ds["equipment"]
    return DesignSpace(tuple(comps), tuple(int(v["cap"]) for v in comps.values()), tuple(eq),
                       tuple(int(v["cost"]) for v in eq.values()), int(ds["def_budget"]))


def rows_of(deployment: dict) -> list[dict]:
    """The per-drone rows of a deployment's data, numbers as floats (labels such as status and terrain as text)."""
    return [{k: (v if isinstance(v, str) else float(v)) for k, v in r.items()}
            for r in deployment.get("drones") or []]


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


def history_design(space: DesignSpace, history: dict) -> dict:
    """The free history's first design that is valid here (its DEF and equipment), else :func:`even_design`.

    A history may have been flown with designs over the DEF budget (CausalGame's biased histories).
    """
    for h in history.get("history") or []:
        keys = (*space.components, *space.equipment)
        try:
            return space.validate({k: v for k, v in h["design"].items() if k in keys})
        except DesignError:
            continue
    return even_design(space)


class GameAgent(Agent):
    """Base of the offline game agents: drives a policy generator through tool calls."""

    takes_seed = True

    def __init__(self, name: str, seed: int = 0, **params) -> None:
        super().__init__(name, seed=seed, **params)
        self.rng = np.random.default_rng([int(seed), 7])
        self._gen: Policy | None = None
        self._last: Observation | None = None
        self.done = False

    def policy(self) -> Policy:  # pragma: no cover - abstract
        """The generator of ``(tool, arguments)``; each ``yield`` receives that call's result data."""
        raise NotImplementedError
        yield

    def observe(self, observation: Observation) -> None:
        """Keep the latest tool result (the game's task prompt carries no data)."""
        if observation.key != "task":
            self._last = observation

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """The policy's next call, sent the last result; ``Done.`` once the policy ends."""
        last = self._last
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
    def start(self) -> Generator[tuple[str, dict], Observation | None, tuple[DesignSpace, dict, dict]]:
        """Read the status and the history: (design space, status, history)."""
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
        """Submit ``design`` with ``report`` (committed with the submission, before its outcome is shown)."""
        yield ("submit_final_design", {"design": design, "report": report})


@register_agent("game_random")
class RandomSearchAgent(GameAgent):
    """Random valid designs; submits the deployed design with the best observed rate."""
    def policy(self):
        """The play, as a generator of tool calls (see the class)."""
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
    """Greedy coordinate search: moves ``step`` DEF points between two components."""
    def policy(self):
        """The play, as a generator of tool calls (see the class)."""
        space, status, history = yield from self.start()
        step = int(self.params.get("step", 2))
        cur = history_design(space, history)
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
        """The play, as a generator of tool calls (see the class)."""
        space, status, history = yield from self.start()
        pool = np.array([space.random(self.rng) for _ in range(int(self.params.get("pool", 300)))])
        X, y, w = [], [], []
        for h in history.get("history") or []:
            if "survival_rate" not in h:      # a history of survivors only: no rate to learn from
                continue
            X.append(space.vector({c: h["design"][c] for c in space.components}))
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
        """The play, as a generator of tool calls (see the class)."""
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


#: The causal structure of each game family as a mechanism-aware player knows it (docs/games.md §1-2):
#: names of parts only, no parameter.  ``critical``: destroyed at 0 HP destroys the drone;
#: ``silent``: a working part that raises detection (leave it bare so it fails and goes silent);
#: ``combat``: parts whose condition lowers the enemy's accuracy and damage; ``exposed``: parts
#: damaged directly by the family's hazard (storms; for the zone family the shield, which absorbs
#: the damage of EMI failures);
#: ``exposed_shares``: the shares of the exposed parts tried in Stage 1 — higher in the weather
#: family, whose main hazard (storms) damages the exposed parts directly.
STRUCTURE = {
    "antenna": {"critical": ("engine", "cockpit", "wing", "body"), "silent": ("antenna",),
                "combat": ("gun", "camera"), "exposed": ("wing", "engine"),
                "exposed_shares": (0.0, 0.2, 0.6)},
    "zone": {"critical": ("engine", "cockpit", "wing", "body"), "silent": ("antenna",),
             "combat": ("gun", "camera"), "exposed": ("shield",),
             "exposed_shares": (0.0, 0.2, 0.6)},
    "weather": {"critical": ("engine", "cockpit", "wing", "body"), "silent": ("antenna",),
                "combat": ("gun", "camera"), "exposed": ("wing", "engine"),
                "exposed_shares": (0.4, 0.7, 1.0)},
}


def _fill(vec: np.ndarray, idx: list[int], caps: list[int], amount: int) -> int:
    """Add ``amount`` DEF points round-robin over ``idx`` up to the caps; returns what did not fit."""
    while amount > 0 and any(vec[i] < caps[i] for i in idx):
        for i in idx:
            if amount > 0 and vec[i] < caps[i]:
                vec[i] += 1
                amount -= 1
    return amount


def structured_design(space: DesignSpace, structure: dict, combat: float, exposed: float) -> dict:
    """The design of the structural form with ``combat`` and ``exposed`` shares of the DEF budget.

    No DEF on silent parts; of the DEF budget the
    share ``combat`` goes to the combat parts, then the share ``exposed`` of the rest to the
    exposed parts; everything left is spread over the critical parts (then over any part that
    still has room), so the whole budget is spent.
    """
    comps, caps = list(space.components), list(space.caps)
    C = len(comps)
    vec = np.zeros(C + len(space.equipment), dtype=np.int64)
    room = space.budget
    at = [comps.index(c) for c in comps]
    combat_idx = [comps.index(c) for c in structure["combat"] if c in comps]
    exposed_idx = [comps.index(c) for c in structure["exposed"] if c in comps]
    critical_idx = [comps.index(c) for c in structure["critical"] if c in comps]
    silent = {comps.index(c) for c in structure["silent"] if c in comps}
    n_combat = int(round(combat * room))
    left = _fill(vec, combat_idx, caps, n_combat)
    rest = room - n_combat + left
    n_exposed = int(round(exposed * rest))
    left = _fill(vec, exposed_idx, caps, n_exposed)
    rest = rest - n_exposed + left
    rest = _fill(vec, critical_idx, caps, rest)
    _fill(vec, [i for i in at if i not in silent], caps, rest)
    return space.design(vec)


@register_agent("game_mechanism")
class MechanismAgent(GameAgent):
    """Knows the family's causal structure (:data:`STRUCTURE`), not its parameters; Stage 1 picks the amounts."""

    takes_family = True
    COMBAT = (0.0, 0.15, 0.3)        # share of the DEF budget on the combat parts

    def policy(self):
        """The play, as a generator of tool calls (see the class)."""
        family = self.params.get("family")
        if family not in STRUCTURE:
            raise ValueError(f"game_mechanism knows the families {sorted(STRUCTURE)}, got {family!r}")
        structure = STRUCTURE[family]
        space, status, _ = yield from self.start()
        combat = [float(x) for x in self.params.get("combat", self.COMBAT)]
        exposed = [float(x) for x in self.params.get("exposed", structure["exposed_shares"])]
        grid = [(i, j) for i in range(len(combat)) for j in range(len(exposed))]
        designs = {ij: structured_design(space, structure, combat[ij[0]], exposed[ij[1]]) for ij in grid}
        sizes = self.plan(status)
        seen: dict[tuple[int, int], list[int]] = {}       # cell -> [returned, flown]
        k = 0
        for ij in self.rng.permutation(len(grid)):      # one deployment per cell, in random order
            if k >= len(sizes):
                break
            cell = grid[int(ij)]
            r = _json((yield ("deploy", {"design": designs[cell], "count": sizes[k]})))
            seen.setdefault(cell, [0, 0])
            seen[cell][0] += r["returned"]
            seen[cell][1] += r["count"]
            k += 1
        for n in sizes[k:]:                             # the rest: the model's choice, refitted each time
            cell = self._choice(seen, grid)
            r = _json((yield ("deploy", {"design": designs[cell], "count": n})))
            seen.setdefault(cell, [0, 0])
            seen[cell][0] += r["returned"]
            seen[cell][1] += r["count"]
        best = self._choice(seen, grid)
        yield from self.finish(designs[best], (
            f"Mechanism-aware baseline ({family} family structure, no parameters): no DEF on "
            f"{', '.join(structure['silent'])} (a working one raises detection), "
            + f"{combat[best[0]]:.0%} of the DEF on {' and '.join(structure['combat'])}, "
            f"{exposed[best[1]]:.0%} of the rest on {' and '.join(structure['exposed'])}, the remainder on the "
            f"critical parts; the shares chosen from Stage-1 survival rates (main-effects model over a 3 x 3 grid)."))

    @staticmethod
    def _choice(seen: dict, grid: list[tuple[int, int]]) -> tuple[int, int]:
        """The cell with the best main-effects estimate: row mean + column mean - grand mean."""
        ret = sum(v[0] for v in seen.values())
        flown = sum(v[1] for v in seen.values())
        grand = ret / flown

        def level(axis: int, value: int) -> float:
            cells = [v for c, v in seen.items() if c[axis] == value]
            n = sum(v[1] for v in cells)
            return sum(v[0] for v in cells) / n if n else grand

        def score(c):
            own = seen.get(c)
            return (level(0, c[0]) + level(1, c[1]) - grand, own[1] if own else 0)

        return max(grid, key=score)
