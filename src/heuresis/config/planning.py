"""The jobs a validated config plans: reference batches and shards, episode jobs, config slices.

Each function reads a config that :func:`heuresis.config.validate_config` returned (defaults
filled in). A job's config slice holds only what its outputs depend on, so that an edit
elsewhere in the config reruns nothing that was already computed or paid for (docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from heuresis.config.loading import ConfigError
from heuresis.harness.conditions import Condition, expand_conditions
from heuresis.instances import instance_spec
from heuresis.references import shard_indices, shards

__all__ = [
    "episode_job_config",
    "episode_job_indices",
    "episode_jobs",
    "reference_batches",
    "reference_shard_indices",
    "reference_shards",
    "saturation_settings",
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
