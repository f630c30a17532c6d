"""The jobs a validated config plans: reference batches and shards, episode jobs, config slices.

Each function reads a config that :func:`heuresis.config.validate_config` returned (defaults
filled in). A job's config slice holds only what its outputs depend on, so that an edit
elsewhere in the config reruns nothing that was already computed or paid for (docs/configuration.md).

For the model-calling jobs (episodes, game plays, judgements, leakage probes) it also says what
they may cost and hold: the Snakemake resource of the provider a job calls
(:func:`llm_resource`; one unit per job, each job sends one request at a time, so a limit on the
resource caps a provider's concurrent requests across jobs), the minutes a job asks a cluster for
(:func:`episode_job_runtime` and its siblings), and an upper bound of every LLM agent's requests,
tokens and dollars for everything the config plans (:func:`spend_bounds`, printed by
``heuresis check-config``; docs/agents.md, "Running real models at scale").
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from heuresis.agents.spec import provider_resource
from heuresis.config.loading import ConfigError
from heuresis.config.settings import BudgetSettings
from heuresis.harness.conditions import LAST_TURN_REQUESTS, Condition, expand_conditions
from heuresis.stages.instances import instance_spec
from heuresis.stages.references import shard_indices, shards

__all__ = [
    "OFFLINE_RUNTIME_MIN",
    "RUNTIME_MARGIN_MIN",
    "RUNTIME_SLACK",
    "SPEND_PARTS",
    "SpendBound",
    "episode_job_config",
    "episode_job_indices",
    "episode_job_runtime",
    "episode_jobs",
    "judgement_job_runtime",
    "leakage_job_runtime",
    "llm_resource",
    "llm_resources",
    "play_job_runtime",
    "reference_batches",
    "reference_shard_indices",
    "reference_shards",
    "saturation_settings",
    "spend_bounds",
]


def reference_batches(config: Mapping) -> list[list[str]]:
    """The swept algorithms grouped into jobs: the configured batches, then each unlisted one alone."""
    refs = config["references"]
    swept = [*refs["algorithms"], *refs["baselines"]]
    batches = [[a for a in b if a in swept] for b in refs["batches"]]
    listed = {a for b in batches for a in b}
    return [b for b in batches if b] + [[a] for a in swept if a not in listed]


def reference_shards(config: Mapping, split: str) -> list[int]:
    """The shard numbers of a split's reference jobs (``references.shard_size`` instances each)."""
    return shards(int(config["instances"][f"n_{split}"]), int(config["references"]["shard_size"]))


def reference_shard_indices(config: Mapping, split: str, shard: int) -> list[int]:
    """The instance indices of one reference shard of a split."""
    return shard_indices(int(shard), int(config["instances"][f"n_{split}"]), int(config["references"]["shard_size"]))


def saturation_settings(config: Mapping) -> dict:
    """The config slice Figure 1b's datasets depend on: sizes, seed, the family's mechanisms, algorithms."""
    sat = config["saturation"]
    fam = config["families"][sat["family"]]
    menu = config["references"]["algorithms"]
    return {"n": int(sat["n"]), "datasets": int(sat["datasets"]), "seed": int(sat["seed"]),
            "family_name": sat["family"], "family": dict(fam),
            "mechanisms": instance_spec(config, sat["family"])["mechanisms"],
            "algorithms": {a: dict(menu[a]) for a in sat["algorithms"]}}


def episode_job_config(config: Mapping, condition_id: str) -> dict:
    """The slice of the ``episodes`` section one episode job depends on.

    Only the job's own budget, the code tool's settings and the test level: adding a grid, a
    budget or an agent elsewhere in the section leaves every existing job's params unchanged, so
    Snakemake reruns nothing that was already paid for.

    Raises
    ------
    ConfigError
        If the condition names a budget that ``episodes.budgets`` does not define.
    """
    episodes = config["episodes"]
    budget = Condition.from_id("", condition_id).budget
    if budget not in episodes["budgets"]:
        raise ConfigError(f"config key episodes.budgets.{budget}: unknown budget of condition {condition_id!r}")
    return {"budgets": {budget: dict(episodes["budgets"][budget])}, "code_tool": dict(episodes["code_tool"]),
            "alpha": episodes["alpha"]}


def episode_jobs(config: Mapping) -> list[dict]:
    """Every episode job of the active grids, one Parquet each.

    Returns
    -------
    list of dict
        Keys ``agent``, ``condition_id``, ``family``, ``split``, ``shard`` and ``indices``: the
        instances of the shard (``episodes.shard_size`` consecutive instances) that the job's
        grids select. A shard none of them selects is no job.
    """
    size = int(config["episodes"]["shard_size"])
    out: list[dict] = []
    for cell in expand_conditions(config):
        n = int(config["instances"][f"n_{cell.split}"])
        for family in cell.families:
            by_shard: dict[int, list[int]] = {}
            for i in cell.indices(family, n):
                by_shard.setdefault(i // size, []).append(i)
            for shard, idx in sorted(by_shard.items()):   # cells are unique: so is each key
                key = (cell.condition.agent, cell.condition.condition_id, family, cell.split, shard)
                out.append({**dict(zip(("agent", "condition_id", "family", "split", "shard"), key)), "indices": idx})
    return out


def episode_job_indices(jobs: list[dict], agent: str, condition_id: str, family: str, split: str,
                        shard: int) -> list[int]:
    """The instance indices of one planned episode job (``jobs`` from :func:`episode_jobs`).

    Raises
    ------
    ValueError
        If no active grid plans that job.
    """
    for j in jobs:
        if (j["agent"], j["condition_id"], j["family"], j["split"], j["shard"]) == (
                agent, condition_id, family, split, int(shard)):
            return list(j["indices"])
    raise ValueError(f"no planned episode job {agent}/{condition_id}/{family}/{split}/shard-{int(shard):03d} "
                     f"(not in the active grids, episodes.run)")


# --- model-calling jobs: provider resources ------------------------------------------------------
def llm_resource(config: Mapping, agent: str) -> str | None:
    """The Snakemake resource of the provider ``agent`` calls (``llm_openai``), None for an agent that calls none."""
    return provider_resource(config["agents"].get(agent, {}))


def llm_resources(config: Mapping) -> list[str]:
    """The provider resources of every LLM agent the config uses (episodes, leakage, games, judges), sorted."""
    from heuresis.agents.llm import llm_agents_in_use

    return sorted({r for spec in llm_agents_in_use(config).values() if (r := provider_resource(spec))})


# --- model-calling jobs: cluster minutes -------------------------------------------------------------
#: A job's minutes are its time bound times this (the agent's working-time clock leaves out
#: start-up, failed attempts and backoff waits, which still take wall time) ...
RUNTIME_SLACK = 1.5
#: ... plus this many minutes (imports, loading inputs, writing outputs).
RUNTIME_MARGIN_MIN = 15
#: Minutes of a job whose agent calls no model (the offline baselines and game players: minutes of work).
OFFLINE_RUNTIME_MIN = 120


def _request_seconds(spec: Mapping) -> float | None:
    """The longest one request of an ``llm`` agent may take (its ``timeout_s``), None for other kinds."""
    if spec.get("kind") != "llm":
        return None
    if spec.get("timeout_s") is not None:
        return float(spec["timeout_s"])
    from heuresis.agents.llm import LLMAgent

    return float(inspect.signature(LLMAgent).parameters["timeout_s"].default)


def _minutes(seconds: float) -> int:
    return int(math.ceil(seconds * RUNTIME_SLACK / 60.0)) + RUNTIME_MARGIN_MIN


def episode_job_runtime(config: Mapping, agent: str, condition_id: str, n_episodes: int) -> int:
    """Minutes of an episode job: per episode the budget's ``wall_seconds`` plus its last turn's requests.

    Each episode ends when its working time reaches the condition's ``wall_seconds``; then at
    most the last turn's requests follow (:data:`~heuresis.harness.conditions.LAST_TURN_REQUESTS`),
    each at most the agent's ``timeout_s``.  Times ``n_episodes`` (the shard's), with
    :data:`RUNTIME_SLACK` and :data:`RUNTIME_MARGIN_MIN`; :data:`OFFLINE_RUNTIME_MIN` for an
    offline baseline (a privileged agent, seconds per episode).
    """
    from heuresis.agents.base import AGENTS

    spec = config["agents"][agent]
    kind = spec.get("kind")
    if kind in AGENTS and AGENTS.lookup(kind).privileged:
        return OFFLINE_RUNTIME_MIN
    cond = Condition.from_id(agent, condition_id)
    budget = BudgetSettings.from_config(cond.budget, config["episodes"]["budgets"][cond.budget])
    last = LAST_TURN_REQUESTS[cond.last_turn] * (_request_seconds(spec) or 0.0)
    return _minutes(int(n_episodes) * (float(budget.wall_seconds) + last))


def play_job_runtime(config: Mapping, agent: str, mode: str, scenario: str) -> int:
    """Minutes of a play job of an LLM agent: its plays' requests at most, each at most ``timeout_s``.

    A play sends at most the agent's turn limit (either mode).  :data:`OFFLINE_RUNTIME_MIN` for
    an agent that is not an LLM agent.
    """
    seconds = _request_seconds(config["agents"][agent])
    if seconds is None:
        return OFFLINE_RUNTIME_MIN
    from heuresis.games.workflow import plays_of

    return _minutes(plays_of(config, agent) * _play_requests(config, agent, mode, scenario) * seconds)


def judgement_job_runtime(config: Mapping, judge: str, agent: str) -> int:
    """Minutes of a judgement job: one request per play of ``agent`` (a scenario x mode), each at most ``timeout_s``."""
    from heuresis.games.workflow import plays_of

    return _minutes(plays_of(config, agent) * (_request_seconds(config["agents"][judge]) or 0.0))


def leakage_job_runtime(config: Mapping, agent: str) -> int:
    """Minutes of a leakage job (one network): two conditions x ``leakage.repeats`` requests, each at most ``timeout_s``."""
    from heuresis.stages.leakage import CONDITIONS

    n = len(CONDITIONS) * int(config["leakage"]["repeats"])
    return _minutes(n * (_request_seconds(config["agents"][agent]) or 0.0))


def _play_requests(config: Mapping, agent: str, mode: str, scenario: str) -> int:
    """Requests of one play at most: the agent's turn limit, in either mode (a prompting retry is a turn)."""
    from heuresis.games.workflow import max_turns_of

    return max_turns_of(config, agent)


# --- what the config may spend --------------------------------------------------------------------
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

    The config's ``prices`` win over litellm's map (as the agent prices its replies); from the map,
    litellm's ``cost_per_token`` at those counts (a tiered price at its tier: prices only rise with
    the tokens).  Cached input is priced at the full rate (an upper bound).
    """
    prices = spec.get("prices")
    if prices:
        p_in, p_out = float(prices["input_per_mtok"]), float(prices["output_per_mtok"])
        if (n_in is None and p_in) or (n_out is None and p_out):
            return None
        return ((n_in or 0) * p_in + (n_out or 0) * p_out) / 1e6
    if n_in is None or n_out is None:
        return None
    import litellm

    try:
        p_in, p_out = litellm.cost_per_token(model=str(spec["model"]), prompt_tokens=int(n_in),
                                             completion_tokens=int(n_out))
    except Exception:   # no price in the map
        return None
    cost = float(p_in + p_out)
    if cost == 0 and n_in + n_out > 0:   # a map entry without a price reads as 0: unknown unless it says 0
        entry = litellm.model_cost.get(str(spec["model"])) or {}
        if entry.get("input_cost_per_token") != 0 or entry.get("output_cost_per_token") != 0:
            return None
    return cost


def _unit_groups(config: Mapping) -> dict[tuple[str, str, int | None], int]:
    """Requests planned per (agent, part, output cap of a request), for every LLM agent in use."""
    from heuresis.agents.llm import llm_agents_in_use
    from heuresis.games.play import OUTPUT_TOKENS
    from heuresis.games.workflow import play_jobs, plays_of
    from heuresis.stages.leakage import CONDITIONS

    llm = llm_agents_in_use(config)
    groups: dict[tuple[str, str, int | None], int] = {}

    def add(agent: str, part: str, cap: int | None, n: int) -> None:
        if n:
            groups[(agent, part, cap)] = groups.get((agent, part, cap), 0) + n

    budgets = config["episodes"]["budgets"]
    for cell in expand_conditions(config):   # each planned episode once (a cell shared by grids runs once)
        c = cell.condition
        if c.agent not in llm:
            continue
        n = int(config["instances"][f"n_{cell.split}"])
        k = sum(len(cell.indices(f, n)) for f in cell.families)
        b = budgets[c.budget]
        own = llm[c.agent].get("max_tokens")   # a request's output cap: the turn's output budget
        cap = min(int(b["output_tokens_per_turn"]), int(own)) if own else int(b["output_tokens_per_turn"])
        add(c.agent, "episodes", cap, k * (int(b["turns"]) + LAST_TURN_REQUESTS[c.last_turn]))
    g = config["games"]
    for job in play_jobs(config):
        if job["agent"] in llm:
            cap = int(llm[job["agent"]].get("max_tokens") or OUTPUT_TOKENS)
            add(job["agent"], f"games_{job['mode']}", cap,
                plays_of(config, job["agent"]) * _play_requests(config, job["agent"], job["mode"], job["scenario"]))
    for judge in g["judges"]:
        cap = int(llm[judge].get("max_tokens") or g["judge_max_tokens"])
        add(judge, "judgements", cap, sum(plays_of(config, j["agent"]) for j in play_jobs(config)))
    leak = config["leakage"]
    for agent in leak["agents"]:
        own = llm[agent].get("max_tokens") or _model_info(str(llm[agent]["model"])).get("max_output_tokens")
        add(agent, "leakage", int(own) if own else None,
            len(leak["networks"]) * len(CONDITIONS) * int(leak["repeats"]))
    return groups


def _sum(values) -> int | float | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def spend_bounds(config: Mapping) -> list[SpendBound]:
    """Upper bounds of every LLM agent's requests, tokens and dollars, per part of the run and in total.

    * **Requests**: per episode its budget's ``turns`` plus its last turn's requests; per play
      the agent's turn limit (``games.llm_max_turns`` or ``games.max_turns``, either mode);
      one per judged play (every play of every agent and mode, by each judge); two conditions x
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
    from heuresis.agents.llm import llm_agents_in_use

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
