"""Loading and validating the workflow configuration.

Validation is two-step: the JSON schema (``heuresis/data/config.schema.yaml``, also linked as
``workflow/schemas/config.schema.yaml``) fills defaults and checks types and required keys; the
semantic checks here catch what a schema cannot say (unknown mechanism kinds, inverted
ranges, kinds that need a noise range).  Every error names the offending config key.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators

from heuresis.mechanisms import MECHANISMS

__all__ = ["ConfigError", "load_config", "validate_config", "config_digest", "SPLITS", "merge_configs",
           "reference_batches", "episode_jobs", "episode_job_indices", "saturation_settings"]

SPLITS = ("dev", "test")


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


def _schema() -> dict:
    text = resources.files("heuresis").joinpath("data/config.schema.yaml").read_text()
    return yaml.safe_load(text)


def with_defaults(validator_class):
    """A validator that also fills in the schema's ``default`` values (jsonschema FAQ recipe)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _schema_errors(config: dict) -> list[str]:
    validator = with_defaults(Draft202012Validator)(_schema())
    msgs = []
    for err in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        key = _key(err.absolute_path)
        if err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            key = _key([*err.absolute_path, missing])
            msgs.append(f"config key {key}: missing (required)")
        elif err.validator == "additionalProperties":
            msgs.append(f"config key {key}: {err.message}")
        else:
            msgs.append(f"config key {key}: {err.message}")
    return msgs


def _check_range(key: str, value, msgs: list[str], allow_negative: bool = False) -> None:
    lo, hi = value
    if not allow_negative and lo < 0:
        msgs.append(f"config key {key}: negative bound {lo} in range {list(value)}")
    if lo > hi:
        msgs.append(f"config key {key}: inverted range {list(value)} (lo > hi)")


def _semantic_errors(config: dict) -> list[str]:
    msgs: list[str] = []
    for kind in config.get("mechanisms", {}):
        if kind not in MECHANISMS:
            msgs.append(f"config key mechanisms.{kind}: unknown mechanism kind {kind!r}; "
                        f"known: {sorted(MECHANISMS)}")
    for name, fam in config.get("families", {}).items():
        base = f"families.{name}"
        _check_range(f"{base}.root_noise", fam["root_noise"], msgs)
        kinds = fam.get("kinds", {})
        if not kinds:
            msgs.append(f"config key {base}.kinds: empty mixture (family {name!r} names no mechanism kind)")
            continue
        if sum(k["weight"] for k in kinds.values()) <= 0:
            msgs.append(f"config key {base}.kinds: all mixture weights are zero in family {name!r}")
        for kind, spec in kinds.items():
            key = f"{base}.kinds.{kind}"
            if kind not in MECHANISMS:
                msgs.append(f"config key {key}: unknown mechanism kind {kind!r} in family {name!r}; "
                            f"known: {sorted(MECHANISMS)}")
                continue
            if MECHANISMS[kind].uses_noise_scale and "noise" not in spec:
                msgs.append(f"config key {key}.noise: missing (kind {kind!r} needs a noise-scale range)")
            if "noise" in spec:
                if not MECHANISMS[kind].uses_noise_scale:
                    msgs.append(f"config key {key}.noise: kind {kind!r} has an input-dependent noise "
                                f"scale and takes no noise range")
                else:
                    _check_range(f"{key}.noise", spec["noise"], msgs)
            if kind not in config.get("mechanisms", {}):
                msgs.append(f"config key mechanisms.{kind}: missing (constants of kind {kind!r}, "
                            f"used by family {name!r})")
            else:
                signed = MECHANISMS[kind].signed_constants
                msgs.extend(_constant_errors(f"mechanisms.{kind}", config["mechanisms"][kind], signed))
                msgs.extend(_constant_errors(f"{key}.params", spec.get("params", {}), signed))
    msgs.extend(_reference_errors(config))
    msgs.extend(_verification_errors(config))
    msgs.extend(_episode_errors(config))
    msgs.extend(_saturation_errors(config))
    msgs.extend(_repairs_errors(config))
    if "games" in config:
        from heuresis.games.workflow import config_errors as _games_errors

        msgs.extend(_games_errors(config))
    return msgs


def _repairs_errors(config: dict) -> list[str]:
    """Figure 8's classifier parameters are GradientBoostingClassifier's (random_state is repairs.seed)."""
    params = config.get("repairs", {}).get("classifier") or {}
    if not params:
        return []
    from sklearn.ensemble import GradientBoostingClassifier

    known = set(GradientBoostingClassifier().get_params()) - {"random_state"}
    return [f"config key repairs.classifier.{k}: not a GradientBoostingClassifier parameter "
            f"(random_state is repairs.seed); known: {sorted(known)}" for k in params if k not in known]


def _saturation_errors(config: dict) -> list[str]:
    """Figure 1b names a configured family and algorithms on the menu."""
    msgs: list[str] = []
    sat = config.get("saturation")
    if not sat:
        return msgs
    if sat["family"] not in config.get("families", {}):
        msgs.append(f"config key saturation.family: unknown family {sat['family']!r}; "
                    f"configured: {sorted(config.get('families', {}))}")
    menu = config.get("references", {}).get("algorithms", {})
    for a in sat["algorithms"]:
        if a not in menu:
            msgs.append(f"config key saturation.algorithms: {a!r} is not on the menu (references.algorithms: "
                        f"{sorted(menu)})")
    return msgs


def saturation_settings(config: Mapping) -> dict:
    """The config slice Figure 1b's datasets depend on: sizes, seed, the family's mechanisms, algorithms."""
    from heuresis.instances import _kind_constants  # instances imports this module

    sat = config["saturation"]
    fam = config["families"][sat["family"]]
    mechanisms = {kind: _kind_constants(config, fam, kind) for kind in fam["kinds"]}
    menu = config["references"]["algorithms"]
    return {"n": int(sat["n"]), "datasets": int(sat["datasets"]), "seed": int(sat["seed"]),
            "family_name": sat["family"], "family": dict(fam), "mechanisms": mechanisms,
            "algorithms": {a: dict(menu[a]) for a in sat["algorithms"]}}


def _reference_errors(config: dict) -> list[str]:
    """Menu and baselines name registered algorithms with valid parameters; grades are ordered."""
    from heuresis.algorithms import ALGORITHMS, make_algorithm
    from heuresis.grades import validate_grades

    msgs: list[str] = []
    refs = config.get("references", {})
    for section in ("algorithms", "baselines"):
        for name, params in refs.get(section, {}).items():
            key = f"references.{section}.{name}"
            if name not in ALGORITHMS:
                msgs.append(f"config key {key}: unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
                continue
            try:
                make_algorithm(name, **params)
            except ValueError as exc:
                msgs.append(f"config key {key}: {exc}")
    overlap = set(refs.get("algorithms", {})) & set(refs.get("baselines", {}))
    if overlap:
        msgs.append(f"config key references.baselines: {sorted(overlap)} also on the menu (references.algorithms)")
    swept = [*refs.get("algorithms", {}), *refs.get("baselines", {})]
    seen: dict[str, int] = {}
    for k, batch in enumerate(refs.get("batches", [])):
        for name in batch:
            if name not in swept:
                msgs.append(f"config key references.batches.{k}: {name!r} is neither on the menu nor a baseline")
            elif name in seen:
                msgs.append(f"config key references.batches.{k}: {name!r} is already in batch {seen[name]}")
            seen.setdefault(name, k)
    if "grades" in config:
        try:
            validate_grades([(g["upto"], g["label"]) for g in config["grades"]])
        except ValueError as exc:
            msgs.append(f"config key grades: {exc}")
    return msgs


def _verification_errors(config: dict) -> list[str]:
    """The chosen scale exists; node-count ranges are integer, ordered, >= 2; determinism compares runs."""
    msgs: list[str] = []
    v = config.get("verification")
    if not v:
        return msgs
    if v["scale"] not in v["scales"]:
        msgs.append(f"config key verification.scale: {v['scale']!r} is not one of verification.scales "
                    f"({sorted(v['scales'])})")
    for name, sizes in v["scales"].items():
        for check, spec in sizes.items():
            key = f"verification.scales.{name}.{check}"
            if "d" in spec:
                lo, hi = spec["d"]
                if not all(float(b).is_integer() for b in (lo, hi)):
                    msgs.append(f"config key {key}.d: node counts must be integers, got {list(spec['d'])}")
                elif lo < 2:
                    msgs.append(f"config key {key}.d: node counts start at 2, got {list(spec['d'])}")
                _check_range(f"{key}.d", spec["d"], msgs)
        det = sizes.get("determinism", {})
        if det and len(det["thread_counts"]) * len(det["hash_seeds"]) < 2:
            msgs.append(f"config key verification.scales.{name}.determinism: one thread count and one hash seed "
                        f"make a single run, nothing to compare")
    return msgs


def _episode_errors(config: dict) -> list[str]:
    """Agents have registered kinds; grids name known agents, budgets, families; run names known grids."""
    from heuresis.agents import AGENTS
    from heuresis.games.agents import GameAgent   # registers the offline game agents

    msgs: list[str] = []
    agents = config.get("agents", {})
    for name, spec in agents.items():
        if spec.get("kind") not in AGENTS:
            msgs.append(f"config key agents.{name}.kind: unknown agent kind {spec.get('kind')!r}; known: {sorted(AGENTS)}")
    eps = config.get("episodes", {})
    grids = eps.get("grids", {})
    for g in eps.get("run", []):
        if g not in grids:
            msgs.append(f"config key episodes.run: unknown grid {g!r}; known: {sorted(grids)}")
    for gname, grid in grids.items():
        key = f"episodes.grids.{gname}"
        for a in grid.get("agents", []):
            if a not in agents:
                msgs.append(f"config key {key}.agents: unknown agent {a!r}; known: {sorted(agents)}")
            elif isinstance(AGENTS.get(agents[a].get("kind")), type) and issubclass(AGENTS.get(agents[a]["kind"]),
                                                                                     GameAgent):
                msgs.append(f"config key {key}.agents: agent {a!r} is a game agent (kind {agents[a]['kind']!r}); "
                            f"it plays games (games.agents), not episodes")
        for b in grid.get("budget", []):
            if b not in eps.get("budgets", {}):
                msgs.append(f"config key {key}.budget: unknown budget setting {b!r}; known: {sorted(eps.get('budgets', {}))}")
        for f in grid.get("families") or []:
            if f not in config.get("families", {}):
                msgs.append(f"config key {key}.families: unknown family {f!r}")
        msgs.extend(_grid_subset_errors(config, key, grid, active=gname in eps.get("run", [])))
    if grids and eps.get("run") and "pc_kci" not in config.get("references", {}).get("algorithms", {}):
        msgs.append("config key references.algorithms: episodes need pc_kci on the menu (guided start, test budget)")
    from heuresis.networks import NETWORKS

    leak = config.get("leakage", {})
    for a in leak.get("agents", []):
        if a not in agents:
            msgs.append(f"config key leakage.agents: unknown agent {a!r}; known: {sorted(agents)}")
        elif agents[a].get("kind") != "llm":
            msgs.append(f"config key leakage.agents: agent {a!r} is of kind {agents[a].get('kind')!r}; the leakage "
                        f"probe asks an LLM (kind llm)")
    for n in leak.get("networks", []):
        if n not in NETWORKS:
            msgs.append(f"config key leakage.networks: unknown network {n!r}; known: {list(NETWORKS)}")
    return msgs


def _grid_subset_errors(config: dict, key: str, grid: Mapping, active: bool) -> list[str]:
    """A grid's per-family repeats name its families; an active grid's instance subset fits in its
    split (an inactive one is not held to the split's size: a smaller config over the paper's keeps
    the paper's grids without running them)."""
    from heuresis.harness.conditions import GridError, grid_repeats, instance_range

    msgs = []
    split = grid.get("split", "test")
    n = int(config.get("instances", {}).get(f"n_{split}", 0))
    try:
        instance_range(grid, n if active else None)
    except GridError as exc:
        msgs.append(f"config key {key}.{exc.key}: {exc} (instances.n_{split} = {n})")
    families = tuple(grid.get("families") or config.get("families", {}))
    try:
        grid_repeats(grid, families)
    except GridError as exc:
        msgs.append(f"config key {key}.{exc.key}: {exc}")
    return msgs


def _constant_errors(key: str, constants: Mapping, signed: tuple[str, ...] = ()) -> list[str]:
    """Range-valued constants (two numbers) must be ordered; only ``signed`` ones may be negative."""
    msgs: list[str] = []
    for k, v in constants.items():
        if isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
            _check_range(f"{key}.{k}", v, msgs, allow_negative=k in signed)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            msgs.append(f"config key {key}.{k}: negative value {v}")
    return msgs


def validate_config(config: Mapping[str, Any]) -> dict:
    """Validate a configuration and return a copy with schema defaults filled in.

    Raises
    ------
    ConfigError
        Listing every problem, each naming its config key.
    """
    cfg = copy.deepcopy(dict(config))
    msgs = _schema_errors(cfg)
    if not msgs:
        msgs = _semantic_errors(cfg)
    if msgs:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(msgs))
    return cfg


def merge_configs(base: Mapping, override: Mapping) -> dict:
    """Deep merge as Snakemake merges ``--configfile`` files over the default config."""
    out = copy.deepcopy(dict(base))
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_configs(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_config(*paths: str | Path) -> dict:
    """Load one or more YAML files, later ones merged over earlier ones, and validate."""
    cfg: dict = {}
    for p in paths:
        with open(p) as fh:
            data = yaml.safe_load(fh) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"config file {p} must hold a mapping, got {type(data).__name__}")
        cfg = merge_configs(cfg, data)
    return validate_config(cfg)


def config_digest(obj: Any) -> str:
    """SHA-256 of a canonical JSON rendering (sorted keys) of a config or config slice."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def reference_batches(config: Mapping) -> list[list[str]]:
    """The swept algorithms grouped into jobs: the configured batches, then each unlisted one alone."""
    refs = config["references"]
    swept = [*refs["algorithms"], *refs.get("baselines", {})]
    batches = [[a for a in b if a in swept] for b in refs.get("batches", [])]
    listed = {a for b in batches for a in b}
    return [b for b in batches if b] + [[a] for a in swept if a not in listed]


def episode_jobs(config: Mapping) -> list[dict]:
    """Every episode job: agent, condition_id, family, split, shard (one Parquet each) and the
    instance ``indices`` it runs — those of the shard (``episodes.shard_size`` consecutive
    instances) that the job's grids select; a shard none of them selects is no job."""
    from heuresis.harness.conditions import expand_conditions

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
    """The instance indices of one planned episode job (``jobs`` from :func:`episode_jobs`)."""
    for j in jobs:
        if (j["agent"], j["condition_id"], j["family"], j["split"], j["shard"]) == (
                agent, condition_id, family, split, int(shard)):
            return list(j["indices"])
    raise ValueError(f"no planned episode job {agent}/{condition_id}/{family}/{split}/shard-{int(shard):03d} "
                     f"(not in the active grids, episodes.run)")
