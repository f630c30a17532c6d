"""Stage 4, episodes (docs/design.md §5): one job runs one agent under one condition on one shard.

A shard is part of a family's split; the job writes

* ``results/episodes/{agent}/{condition_id}/{family}/{split}/shard-XXX.parquet`` (:data:`EPISODES`),
* ``.../shard-XXX.calls.parquet`` (:data:`CALLS`, one row per tool call),
* ``.../shard-XXX.requests.parquet`` (:data:`REQUESTS`, one row per model request: tokens, cost,
  latency, retries),
* ``results/transcripts/{agent}/{condition_id}/{family}/{split}/{index:04d}.json`` per episode.

Each finished episode is checkpointed (:class:`heuresis.artifacts.io.Checkpoint`; its transcript
is written first), so a killed job resumes without redoing or losing an episode.  An episode whose
run raised (a harness error, an API error after the client's retries) is recorded with status
``failed`` and its error, but it is not finished: it is not checkpointed, the job keeps the
checkpoint of the finished ones, records the count in the episodes file's metadata and the next
attempt beside it (:mod:`heuresis.artifacts.failures`), and rerunning the target reruns only those episodes.
The agent's own failures (no submission, a budget reached) are results, status ``ok``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from heuresis.agents import AGENTS, agent_origin, make_agent
from heuresis.artifacts import paths as P
from heuresis.artifacts.failures import FIRST_ATTEMPT, failure_metadata, record_attempt
from heuresis.artifacts.io import Checkpoint, write_table
from heuresis.artifacts.privacy import make_folder
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.schemas import CALLS, EPISODES, REQUESTS
from heuresis.artifacts.sealing import PUBLIC_SALT, SALT_FILE, salt_digest, write_salt
from heuresis.config.loading import ConfigError, config_digest
from heuresis.config.settings import BudgetSettings, CodeTool
from heuresis.harness.agent_spec import result_spec
from heuresis.harness.conditions import LAST_TURN_REQUESTS, Condition, expand_conditions
from heuresis.harness.episode import (
    EpisodeInput,
    EpisodeSettings,
    episode_algorithm_map,
    episode_seed,
    run_episode,
)
from heuresis.harness.protocol import origin_packages
from heuresis.harness.requestlog import RequestLog
from heuresis.harness.sandbox import SandboxLimits
from heuresis.registry import MODEL_KINDS
from heuresis.stages.instances import load_data, load_truth
from heuresis.stages.jobs import OFFLINE_RUNTIME_MIN, job_minutes, request_seconds
from heuresis.stages.references import grade_table, graph_of, load_references

__all__ = [
    "config_errors",
    "episode_job_config",
    "episode_job_indices",
    "episode_job_runtime",
    "episode_jobs",
    "episode_settings",
    "load_episode_inputs",
    "run_episode_shard",
    "run_one_episode",
]


def episode_settings(episodes_cfg: Mapping, menu: Mapping, grades: Sequence[Mapping], budget: str) -> EpisodeSettings:
    """Settings of an episode from the config slices (``episodes``, the menu, ``grades``)."""
    code_tool = CodeTool.from_config(episodes_cfg["code_tool"])
    return EpisodeSettings(budget=BudgetSettings.from_config(budget, episodes_cfg["budgets"][budget]),
                           menu={k: dict(v) for k, v in menu.items()}, grades=grade_table(grades),
                           alpha=float(episodes_cfg["alpha"]), code_limits=SandboxLimits(**code_tool.limits()),
                           code_isolation=code_tool.isolation)


def load_episode_inputs(family: str, split: str, indices: Sequence[int], data_dir, truth_dir,
                        pc_kci_paths: Sequence) -> dict[int, EpisodeInput]:
    """The instances of a shard with PC-KCI's graph, test count and (label-free) deletion log."""
    refs = load_references(pc_kci_paths)
    refs = {int(r["instance"]): r for r in refs.to_dict("records")}
    truth = load_truth(truth_dir)
    out = {}
    for i in indices:
        if i not in refs:
            raise ValueError(f"no pc_kci references row for {family}/{split}/{i:04d} in {list(map(str, pc_kci_paths))}")
        r = refs[i]
        if r["status"] != "ok":
            raise ValueError(f"pc_kci failed on {r['instance_id']} ({r['error']}); the guided start and the test "
                             "budget need it")
        log = [{"x": d["x"], "y": d["y"], "sepset": list(d["sepset"]), "test": d["test"], "grade": d["grade"]}
               for d in (r["deletions"] if r["deletions"] is not None else [])]
        out[i] = EpisodeInput(family, split, i, truth[i].instance_id, load_data(data_dir, i), truth[i].dag,
                              truth[i].cpdag, graph_of(r), int(r["n_tests"]), log)
    return out


def run_episode_shard(agent: str, agent_spec: Mapping, condition_id: str, family: str, split: str,
                      indices: Sequence[int], *, data_dir, truth_dir, pc_kci_paths: Sequence, episodes_cfg: Mapping,
                      menu: Mapping, grades: Sequence[Mapping], seed: int, out: str | Path, calls_out: str | Path,
                      requests_out: str | Path, transcripts_dir: str | Path, log: Callable[[str], None] = lambda m: None,
                      after_episode: Callable[[int], None] | None = None, attempt: str = FIRST_ATTEMPT,
                      spend_dir: str | Path | None = None, salt: str = PUBLIC_SALT) -> Path:
    """Run every episode of one job and write its tables (transcripts as they finish).

    ``attempt`` is the rule's parameter of that name (:func:`heuresis.artifacts.failures.attempt_param`).
    Each episode's model requests go to its request log beside its transcript
    (``{index:04d}.requests.jsonl``, :mod:`heuresis.harness.requestlog`): a rerun replays what was
    paid for.  ``spend_dir``: the folder of the run's spend ledgers (``max_run_usd``).
    ``salt`` keys every episode's secrets (:func:`~heuresis.harness.episode.episode_seed`); the
    workflow passes the run's (:func:`heuresis.artifacts.sealing.run_salt`).  Its digest, never the salt, is
    recorded in the provenance and every transcript, and is part of the resume key: a checkpoint
    made under another salt is not resumed.
    """
    started = utc_now()
    cond = Condition.from_id(agent, condition_id)
    settings = episode_settings(episodes_cfg, menu, grades, cond.budget)
    code_tool = CodeTool.from_config(episodes_cfg["code_tool"])
    inputs = load_episode_inputs(family, split, indices, data_dir, truth_dir, pc_kci_paths)
    cfg_slice = {"agent": agent, "agent_spec": result_spec(agent_spec), "condition": condition_id,
                 "budget": settings.budget.as_dict(), "code_tool": code_tool.as_dict(),
                 "alpha": episodes_cfg["alpha"], "menu": dict(menu), "grades": list(grades), "seed": seed,
                 "salt": "public" if salt == PUBLIC_SALT else "drawn"}
    salted = {"salt": cfg_slice["salt"], "salt_sha256": salt_digest(salt)}
    origin = agent_origin(agent, agent_spec)
    if origin is not None:   # a plugin's class and distribution version: in the provenance and the resume key
        cfg_slice["agent_origin"] = origin
    key = config_digest({**cfg_slice, **salted, "data": [inputs[i].instance_id for i in indices],
                         "pc_kci_tests": [inputs[i].pc_kci_tests for i in indices]})
    ckpt = Checkpoint(out, key)
    if len(ckpt):
        log(f"{agent} {condition_id} {family}/{split}: resuming, {len(ckpt)} of {len(indices)} episodes done")
    tdir = Path(transcripts_dir)
    make_folder(tdir)
    t0 = time.perf_counter()
    for done, i in enumerate(indices, 1):
        if i in ckpt:
            continue
        inp = inputs[i]
        ep_seed = episode_seed(salt, seed, agent, condition_id, inp.instance_id)
        model = make_agent(agent, agent_spec, algorithm_map=episode_algorithm_map(settings, ep_seed))
        res = run_episode(model, cond, inp, settings, ep_seed, agent_origin=origin,
                          request_log=RequestLog(tdir / f"{i:04d}.requests.jsonl"), spend_dir=spend_dir)
        res.row["transcript"] = str(tdir / f"{i:04d}.json")
        res.transcript.secrets = salted
        res.transcript.write(tdir / f"{i:04d}.json")
        record = {"row": res.row, "calls": res.calls, "requests": res.requests}
        if res.row["status"] == "failed":   # written, not saved: a rerun retries it
            ckpt.fail(i, record)
        else:
            ckpt.save(i, record)
        r = res.row
        log(f"{agent} {condition_id} {family}/{split}: {done}/{len(indices)} ({time.perf_counter() - t0:.1f} s) "
            f"{inp.instance_id} {r['status']} {r['termination']} F1={r['f1']:.3f} (pc_kci {r['pc_kci_f1']:.3f}) "
            f"in {r['wall_s']:.1f} s" + (f" ERROR {r['error']}" if r["error"] else "")
            + (f" WARNING {r['warnings']}" if r["warnings"] else ""))
        if after_episode is not None:
            after_episode(i)
    records = ckpt.values(indices)
    rows = [rec["row"] for rec in records]
    calls = [c for rec in records for c in rec["calls"]]
    requests = [q for rec in records for q in rec.get("requests", [])]
    prov = provenance_record(stage="episodes", config=cfg_slice, seeds={"seed": seed, **salted},
                             inputs=[Path(truth_dir) / "graphs.parquet", *map(Path, pc_kci_paths)], started=started,
                             packages=origin_packages(origin))
    failed = ckpt.failed
    meta = {PROVENANCE_KEY: dumps(prov), **failure_metadata(len(failed), attempt)}
    record_attempt(out, attempt, len(failed), "episodes")   # first: a kill after it still leaves a retry
    write_table(pa.table({c: [r.get(c) for r in calls] for c in CALLS.schema.names}, schema=CALLS.schema), calls_out,
                CALLS, meta)
    write_table(pa.table({c: [r[c] for r in requests] for c in REQUESTS.schema.names}, schema=REQUESTS.schema),
                requests_out, REQUESTS, meta)
    write_table(pa.table({c: [r.get(c) for r in rows] for c in EPISODES.schema.names}, schema=EPISODES.schema), out,
                EPISODES, meta)
    if ckpt.finish():
        log(f"{agent} {condition_id} {family}/{split}: {len(failed)} of {len(indices)} episodes FAILED "
            f"({', '.join(inputs[i].instance_id for i in failed)}); not counted as run: rerun the target to retry "  # type: ignore[index]
            "them (the finished ones are kept)")
    return Path(out)


def run_one_episode(cfg: Mapping, results: str | Path, agent: str, spec: Mapping, condition_id: str, instance: str,
                    *, log: Callable[[str], None] = lambda m: None) -> Path:
    """Run one episode of a built results folder outside the workflow and write its tables beside the run's.

    ``instance`` is ``family/split/index`` (e.g. ``wild/dev/0003``); the instance, its PC-KCI
    reference and the run's salt come from ``results`` (the salt is drawn into it once, as the
    workflow does, unless the config's salt is public).  What ``heuresis serve-episode`` and the
    inspect task ``heuresis_inspect/episodes`` (``integrations/inspect``) run; returns the episodes table's path
    (:data:`heuresis.artifacts.paths.SERVED_EPISODE`: its calls, requests and transcript beside it).
    """
    parts = instance.split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"instance {instance!r}: expected family/split/index, e.g. wild/dev/0003")
    fam, split, idx = parts[0], parts[1], int(parts[2])
    if fam not in cfg["families"]:
        raise ValueError(f"instance {instance!r}: unknown family {fam!r}; known: {sorted(cfg['families'])}")
    cond = Condition.from_id(agent, condition_id)
    if cond.budget not in cfg["episodes"]["budgets"]:
        raise ValueError(f"condition {condition_id!r}: unknown budget {cond.budget!r}; known: "
                         f"{sorted(cfg['episodes']['budgets'])}")
    res = Path(results)
    shards = P.located(P.REFERENCES, res, algorithm="pc_kci", family=fam, split=split, shard="*")
    refs = sorted(shards.parent.glob(shards.name))
    if not refs:
        raise FileNotFoundError(f"no PC-KCI references under {shards.parent} "
                                "(run the workflow's references stage first)")
    salt = PUBLIC_SALT if cfg["secrets"]["salt"] == "public" else write_salt(P.located(SALT_FILE, res))
    where = {"agent": agent, "condition_id": condition_id, "family": fam, "split": split}
    out = P.located(P.SERVED_EPISODE, res, **where, index=f"{idx:04d}")
    return run_episode_shard(agent, spec, condition_id, fam, split, [idx], data_dir=P.located(P.INSTANCES, res, **where),
                             truth_dir=P.located(P.TRUTH_GRAPHS, res, **where).parent, pc_kci_paths=refs,
                             episodes_cfg=cfg["episodes"], menu=cfg["references"]["algorithms"], grades=cfg["grades"],
                             seed=cfg["seed"], out=out, calls_out=out.with_suffix(".calls.parquet"),
                             requests_out=out.with_suffix(".requests.parquet"),
                             transcripts_dir=P.located(P.EPISODE_TRANSCRIPTS, res, **where), log=log, salt=salt)


# --- job planning -----------------------------------------------------------------------------------
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


def episode_job_runtime(config: Mapping, agent: str, condition_id: str, n_episodes: int) -> int:
    """Minutes of an episode job: per episode the budget's ``wall_seconds`` plus its last turn's requests.

    Each episode ends when its working time reaches the condition's ``wall_seconds``; then at
    most the last turn's requests follow (:data:`~heuresis.harness.conditions.LAST_TURN_REQUESTS`),
    each at most the agent's ``timeout_s``.  Times ``n_episodes`` (the shard's), through
    :func:`~heuresis.stages.jobs.job_minutes`; :data:`~heuresis.stages.jobs.OFFLINE_RUNTIME_MIN`
    for an offline baseline (a privileged agent, seconds per episode).
    """
    spec = config["agents"][agent]
    kind = spec.get("kind")
    if kind in AGENTS and AGENTS.lookup(kind).privileged:
        return OFFLINE_RUNTIME_MIN
    cond = Condition.from_id(agent, condition_id)
    budget = BudgetSettings.from_config(cond.budget, config["episodes"]["budgets"][cond.budget])
    last = LAST_TURN_REQUESTS[cond.last_turn] * (request_seconds(spec) or 0.0)
    return job_minutes(int(n_episodes) * (float(budget.wall_seconds) + last))


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def _token_rate_errors(config: Mapping) -> list[str]:
    """A provider's ``tokens_per_minute`` is one account's limit: every LLM agent in use on it states the same."""
    from heuresis.agents.llm import llm_agents_in_use
    from heuresis.stages.jobs import provider_resource

    by_provider: dict[str, dict[str, int | None]] = {}
    for name, spec in llm_agents_in_use(config).items():
        if (resource := provider_resource(spec)) is not None:
            by_provider.setdefault(resource, {})[name] = spec.get("tokens_per_minute")
    return [f"config key agents.*.tokens_per_minute: the agents of provider {resource.removeprefix('llm_')!r} share "
            f"one token window and must state the same limit, got "
            + ", ".join(f"{a}: {v if v is not None else 'none'}" for a, v in sorted(limits.items()))
            for resource, limits in sorted(by_provider.items()) if len(set(limits.values())) > 1]


def config_errors(config: Mapping) -> list[str]:
    """Problems of ``agents`` and ``episodes`` a schema cannot say, each naming its config key.

    Agents have a known kind or an importable outside class (:func:`~heuresis.harness.protocol.check_agent`;
    an offline agent's parameters are checked by building it, a plugin's by binding them to its
    constructor's signature; an LLM agent's ``max_tokens`` exceeds its thinking budget, and both fit
    under the output budget of every condition it plays: :func:`_output_cap_errors`); grids name
    known agents (not game agents), budgets and families, and fit their split; ``episodes.run``
    names known grids; episodes need PC-KCI on the menu.
    """
    from heuresis.agents import check_agent
    from heuresis.agents.players import GameAgent  # registers the offline game agents
    from heuresis.harness.protocol import AgentSpecError, is_plugin

    msgs: list[str] = []
    agents = config["agents"]
    menu = config["references"]["algorithms"]
    classes: dict[str, type] = {}
    for name, spec in agents.items():
        kind = spec.get("kind")
        try:
            classes[name] = check_agent(name, spec)
        except AgentSpecError as exc:
            msgs.append(f"config key agents.{name}{'.' + exc.key if exc.key else ''}: {exc}")
            continue
        if not is_plugin(spec) and kind not in MODEL_KINDS:   # offline agents check their parameters when built
            try:
                make_agent(name, spec)
            except (ValueError, TypeError) as exc:
                msgs.append(f"config key agents.{name}: {exc}")
        if kind == "merge" and "k" in spec and spec["k"] > len(menu) - 1:
            msgs.append(f"config key agents.{name}.k: {spec['k']} other menu algorithms can never join a pair "
                        f"(the menu has {len(menu) - 1} besides pc_kci; allowed: 1 <= k <= {len(menu) - 1})")
        if kind in MODEL_KINDS:
            from heuresis.agents.llm import token_prices

            capped = [k for k in ("max_run_usd", "max_episode_usd") if spec.get(k) is not None]
            if capped and token_prices(str(spec["model"]), spec.get("prices")) is None:
                msgs.append(f"config key agents.{name}.{capped[0]}: a spend limit needs the model's price, and "
                            f"{spec['model']} has none in litellm's map: give agents.{name}.prices (USD per million "
                            "tokens: input_per_mtok, output_per_mtok)")
            budget = (spec.get("thinking") or {}).get("budget_tokens")
            if isinstance(budget, (int, float)) and "max_tokens" in spec and spec["max_tokens"] <= budget:
                msgs.append(f"config key agents.{name}.max_tokens: {spec['max_tokens']} must exceed the thinking "
                            f"budget (thinking.budget_tokens = {budget})")
    msgs += _token_rate_errors(config)
    eps = config["episodes"]
    grids = eps["grids"]
    for g in eps["run"]:
        if g not in grids:
            msgs.append(f"config key episodes.run: unknown grid {g!r}; known: {sorted(grids)}")
    for gname, grid in grids.items():
        key = f"episodes.grids.{gname}"
        for a in grid["agents"]:
            cls = classes.get(a)
            if a not in agents:
                msgs.append(f"config key {key}.agents: unknown agent {a!r}; known: {sorted(agents)}")
            elif isinstance(cls, type) and issubclass(cls, GameAgent):
                msgs.append(f"config key {key}.agents: agent {a!r} is a game agent (kind {agents[a]['kind']!r}); "
                            f"it plays games (games.agents), not episodes")
        for b in grid["budget"]:
            if b not in eps["budgets"]:
                msgs.append(f"config key {key}.budget: unknown budget setting {b!r}; known: {sorted(eps['budgets'])}")
        for f in grid.get("families") or []:
            if f not in config["families"]:
                msgs.append(f"config key {key}.families: unknown family {f!r}")
        msgs.extend(_grid_subset_errors(config, key, grid, active=gname in eps["run"]))
    msgs.extend(_output_cap_errors(config))
    if grids and eps["run"] and "pc_kci" not in menu:
        msgs.append("config key references.algorithms: episodes need pc_kci on the menu (guided start, test budget)")
    return msgs


def _grid_subset_errors(config: Mapping, key: str, grid: Mapping, active: bool) -> list[str]:
    """A grid's per-family repeats name its families; an active grid's instance subset fits in its split.

    An inactive grid is not held to the split's size: a smaller config over the paper's keeps the
    paper's grids without running them.
    """
    from heuresis.harness.conditions import GridError, grid_repeats, instance_range

    msgs = []
    split = grid["split"]
    n = int(config["instances"][f"n_{split}"])
    try:
        instance_range(grid, n if active else None)
    except GridError as exc:
        msgs.append(f"config key {key}.{exc.key}: {exc} (instances.n_{split} = {n})")
    families = tuple(grid.get("families") or config["families"])
    try:
        grid_repeats(grid, families)
    except GridError as exc:
        msgs.append(f"config key {key}.{exc.key}: {exc}")
    return msgs


def _output_cap_errors(config: Mapping) -> list[str]:
    """An LLM agent's output settings against the output budget of every condition it plays (active grids).

    Each request of an episode is capped at the turn's output budget
    (``episodes.budgets.<b>.output_tokens_per_turn``) and a longer reply is refused: a larger
    ``max_tokens`` would have the provider generate, and bill, what the harness refuses; a thinking
    budget (``thinking.budget_tokens``, inside the reply's tokens) must leave room for the reply
    under that cap (the provider refuses the request otherwise).
    """
    eps = config["episodes"]
    agents = config["agents"]
    seen: set[tuple[str, str]] = set()
    msgs = []
    for gname in eps["run"]:
        grid = eps["grids"].get(gname, {})
        budgets = grid.get("budget", [])
        for a in grid.get("agents", []):
            spec = agents.get(a, {})
            if spec.get("kind") not in MODEL_KINDS:
                continue
            for b in budgets if isinstance(budgets, list) else [budgets]:
                if (a, b) in seen or b not in eps["budgets"]:
                    continue
                seen.add((a, b))
                turn = int(eps["budgets"][b]["output_tokens_per_turn"])
                where = f"episodes.budgets.{b}.output_tokens_per_turn = {turn} (grid {gname})"
                own = spec.get("max_tokens")
                if isinstance(own, int) and own > turn:
                    msgs.append(f"config key agents.{a}.max_tokens: {own} exceeds {where}: the provider would bill "
                                f"replies the harness refuses; leave max_tokens out (each request is capped at the "
                                f"turn's output budget) or set it to at most {turn}")
                thinking = (spec.get("thinking") or {}).get("budget_tokens")
                if isinstance(thinking, (int, float)) and thinking >= min(turn, own or turn):
                    msgs.append(f"config key agents.{a}.thinking.budget_tokens: {thinking} does not fit under {where}: "
                                f"the thinking budget counts in the reply's output tokens and must be below the cap "
                                f"of each request")
    return msgs
