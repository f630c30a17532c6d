"""What a validated config may spend: every LLM agent's requests, tokens and dollars, at most.

:func:`spend_bounds` adds up what each stage plans (episodes, game plays in either mode,
judgements, leakage probes) into an upper bound per agent and part of the run, printed by
``heuresis check-config`` before a paid run starts (docs/agents.md, "Running real models at
scale"). Each stage plans its own jobs, their config slices, provider resources and minutes
(:mod:`heuresis.stages.episodes`, :mod:`heuresis.stages.leakage`, :mod:`heuresis.stages.games.workflow`,
:mod:`heuresis.stages.jobs`); this module only counts what they plan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from heuresis.agents.llm import llm_agents_in_use
from heuresis.harness.conditions import LAST_TURN_REQUESTS, Condition, expand_conditions
from heuresis.stages.games.play import OUTPUT_TOKENS
from heuresis.stages.games.workflow import judges_for, play_jobs, plays_of, requests_per_play
from heuresis.stages.leakage import CONDITIONS
from heuresis.stages.pilot import pilot_plan

__all__ = ["SPEND_PARTS", "SpendBound", "ceilings", "pilot_bound", "spend_bounds"]

#: The parts of a run that call models, in the order :func:`spend_bounds` lists them.
SPEND_PARTS = ("episodes", "games_agentic", "games_prompting", "judgements", "leakage")


@dataclass(frozen=True)
class SpendBound:
    """Upper bounds of what one LLM agent may spend on one part of the run (``part`` ``total``: all parts).

    ``input_tokens`` / ``output_tokens`` / ``dollars`` are None when unknown (a model whose context
    window, output limit or price neither litellm's map nor the config gives): never a 0 that is
    not one.
    """

    agent: str
    model: str
    part: str
    requests: int
    input_tokens: int | None
    output_tokens: int | None
    dollars: float | None


def _model_info(model: str) -> dict:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"   # litellm's bundled map, never a download
    import litellm

    try:
        return dict(litellm.get_model_info(model))
    except Exception:   # not in the map
        return {}


def _request_dollars(spec: Mapping, n_in: int | None, n_out: int | None) -> float | None:
    """USD of one request of ``n_in`` input and ``n_out`` output tokens at most; None when unknown.

    At the agent's prices as it prices its replies (:func:`heuresis.agents.llm.token_prices`: the
    config's ``prices``, else litellm's map; a tiered price at the tier of ``n_in``).  Input is
    priced at the dearer of plain input and a cache write (an upper bound).
    """
    from heuresis.agents.llm import token_prices

    p = token_prices(str(spec["model"]), spec.get("prices"), n_in)
    if p is None:
        return None
    p_in = max(p["input_per_token"], p["cache_write_per_token"])
    if (n_in is None and p_in) or (n_out is None and p["output_per_token"]):
        return None
    return (n_in or 0) * p_in + (n_out or 0) * p["output_per_token"]


def _episode_requests(config: Mapping, spec: Mapping, budget: str, last_turn: str) -> tuple[int, int]:
    """(output cap of a request, requests at most) of one episode of an LLM agent under a budget and last turn."""
    b = config["episodes"]["budgets"][budget]
    own = spec.get("max_tokens")   # a request's output cap: the turn's output budget
    cap = min(int(b["output_tokens_per_turn"]), int(own)) if own else int(b["output_tokens_per_turn"])
    return cap, int(b["turns"]) + LAST_TURN_REQUESTS[last_turn]


def pilot_bound(config: Mapping, k: int) -> dict[str, float | None]:
    """Dollars at most of ``heuresis forecast --pilot k`` per LLM agent: its pilot episodes at their ceilings.

    None for an agent whose price is unknown.
    """
    llm = llm_agents_in_use(config)
    out: dict[str, float | None] = {}
    for ep in pilot_plan(config, k):
        spec = llm[ep["agent"]]
        window = _model_info(str(spec["model"])).get("max_input_tokens")
        c = Condition.from_id(ep["agent"], ep["condition_id"])
        cap, requests = _episode_requests(config, spec, c.budget, c.last_turn)
        d = _request_dollars(spec, int(window) if window else None, cap)
        prev = out.get(ep["agent"], 0.0)
        out[ep["agent"]] = None if d is None or prev is None else prev + requests * d
    return out


def _unit_groups(config: Mapping) -> dict[tuple[str, str, int | None], int]:
    """Requests planned per (agent, part, output cap of a request), for every LLM agent in use."""
    llm = llm_agents_in_use(config)
    groups: dict[tuple[str, str, int | None], int] = {}

    def add(agent: str, part: str, cap: int | None, n: int) -> None:
        if n:
            groups[(agent, part, cap)] = groups.get((agent, part, cap), 0) + n

    for cell in expand_conditions(config):   # each planned episode once (a cell shared by grids runs once)
        c = cell.condition
        if c.agent not in llm:
            continue
        n = int(config["instances"][f"n_{cell.split}"])
        k = sum(len(cell.indices(f, n)) for f in cell.families)
        cap, requests = _episode_requests(config, llm[c.agent], c.budget, c.last_turn)
        add(c.agent, "episodes", cap, k * requests)
    g = config["games"]
    for job in play_jobs(config):
        if job["agent"] in llm:
            cap = int(llm[job["agent"]].get("max_tokens") or OUTPUT_TOKENS)
            add(job["agent"], f"games_{job['mode']}", cap,
                plays_of(config, job["agent"]) * requests_per_play(config, job["agent"]))
    for judge in g["judges"]:
        cap = int(llm[judge].get("max_tokens") or g["judge_max_tokens"])
        add(judge, "judgements", cap, len(g["protocols"]) * sum(plays_of(config, j["agent"]) for j in play_jobs(config)
                                                                if judge in judges_for(config, j["agent"])))
    leak = config["leakage"]
    for agent in leak["agents"]:
        own = llm[agent].get("max_tokens") or _model_info(str(llm[agent]["model"])).get("max_output_tokens")
        add(agent, "leakage", int(own) if own else None,
            len(leak["networks"]) * len(CONDITIONS) * int(leak["repeats"]))
    return groups


def _sum(values) -> int | float | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def ceilings(config: Mapping) -> dict[tuple[str, str], float | None]:
    """The upper bound of each LLM agent's dollars per (agent, part), as the forecast compares them."""
    return {(b.agent, b.part): b.dollars for b in spend_bounds(config)}


def spend_bounds(config: Mapping) -> list[SpendBound]:
    """Upper bounds of every LLM agent's requests, tokens and dollars, per part of the run and in total.

    * **Requests**: per episode its budget's ``turns`` plus its last turn's requests; per play
      the agent's turn limit (``games.llm_max_turns`` or ``games.max_turns``, either mode) and, under
      the ``as_published`` protocol, its debrief; one per judged play and protocol (every play of
      every agent and mode, by each judge not of the player's model family); two conditions x
      ``leakage.repeats`` per probed network.  A failed attempt retried (``retries``) is not a
      request here: providers bill replies, and what a failed attempt spent is recorded when it happens.
    * **Output tokens** per request: its cap — the turn's output budget in an episode (the agent's
      ``max_tokens`` if lower), the agent's ``max_tokens`` or the games' per-reply cap in a play,
      ``games.judge_max_tokens`` for a judge without its own, and the agent's ``max_tokens`` or the
      model's output limit (litellm's map) for a probe.  Reasoning and thinking tokens are inside it.
    * **Input tokens** per request: the model's context window (litellm's ``max_input_tokens``).
      A conversation grows turn by turn by replies and tool results whose size no limit fixes
      (a result lists a graph, a program's output ...), so no smaller bound holds for every run;
      a request larger than the window is refused unbilled (the episode ends ``context_overflow``).
    * **Dollars**: each request at those counts (:func:`_request_dollars`), cached input at the
      full rate.

    One :class:`SpendBound` per agent and part of :data:`SPEND_PARTS` it takes part in, then one
    per agent with ``part="total"``, agents sorted.
    """
    llm = llm_agents_in_use(config)
    planned = _unit_groups(config)
    rows: list[SpendBound] = []
    for agent, spec in llm.items():
        model = str(spec["model"])
        window = _model_info(model).get("max_input_tokens")
        window = int(window) if window else None
        own = []
        for part in SPEND_PARTS:
            groups = [(cap, n) for (a, p, cap), n in planned.items() if a == agent and p == part]
            if not groups:
                continue
            requests = sum(n for _, n in groups)
            tin = None if window is None else requests * window
            tout = _sum(None if cap is None else n * cap for cap, n in groups)
            dollars = _sum(None if (d := _request_dollars(spec, window, cap)) is None else n * d for cap, n in groups)
            own.append(SpendBound(agent, model, part, requests, tin, tout, dollars))  # type: ignore[arg-type]
        rows += own
        rows.append(SpendBound(agent, model, "total", sum(r.requests for r in own), _sum(r.input_tokens for r in own),  # type: ignore[arg-type]
                               _sum(r.output_tokens for r in own), _sum(r.dollars for r in own)))  # type: ignore[arg-type]
    return rows
