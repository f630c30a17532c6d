"""Loading and validating the workflow configuration.

Validation is two-step: the JSON schema (``heuresis/data/config.schema.yaml``, also linked as
``workflow/schemas/config.schema.yaml``) fills defaults and checks types (integers written as
integers), bounds and required keys; the semantic checks here catch what a schema cannot say
(unknown mechanism kinds, inverted ranges, kinds that need a noise range, expected_degree
<= d - 1, family overrides against the kind's declared constants).  Every error names the
offending config key and, for a type or a bound, what the key allows.  Files are read with
:func:`read_yaml`: safe loading only, a duplicated key is an error, and every problem is one
line naming the file and line (docs/config-validation.md).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators

from heuresis.mechanisms import MECHANISMS

__all__ = [
    "SPLITS",
    "ConfigError",
    "check_config_files",
    "config_digest",
    "episode_job_indices",
    "episode_jobs",
    "load_config",
    "merge_configs",
    "read_yaml",
    "reference_batches",
    "saturation_settings",
    "validate_config",
]

SPLITS = ("dev", "test")


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


@functools.lru_cache(maxsize=1)
def _schema() -> dict:
    """The parsed config schema (cached: read it, never modify it)."""
    text = resources.files("heuresis").joinpath("data/config.schema.yaml").read_text()
    return yaml.safe_load(text)


def _is_integer(checker, instance) -> bool:
    """JSON Schema counts 2.0 as an integer; a config integer must be written as one."""
    return isinstance(instance, int) and not isinstance(instance, bool)


#: Draft 2020-12 with integers that must be written as integers (2.5 and 2.0 are not).
StrictValidator = validators.extend(
    Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


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


_TYPES = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
          "array": "a list", "object": "a mapping", "null": "null"}


def allowed(schema: Mapping) -> str:
    """What a schema node allows, in words: ``an integer in [1, 1000]``, ``a number in (0, 1)``."""
    if "$ref" in schema and "type" not in schema:
        schema = {**_resolve(schema["$ref"]), **{k: v for k, v in schema.items() if k != "$ref"}}
    if "enum" in schema:
        return f"one of {schema['enum']}"
    if "const" in schema:
        return repr(schema["const"])
    t = schema.get("type")
    text = " or ".join(_TYPES.get(x, x) for x in (t if isinstance(t, list) else [t])) if t else "a value"
    lo = (schema["minimum"], "[") if "minimum" in schema else (schema["exclusiveMinimum"], "(") \
        if "exclusiveMinimum" in schema else None
    hi = (schema["maximum"], "]") if "maximum" in schema else (schema["exclusiveMaximum"], ")") \
        if "exclusiveMaximum" in schema else None
    if lo and hi:
        text += f" in {lo[1]}{lo[0]}, {hi[0]}{hi[1]}"
    elif lo:
        text += f" {'>=' if lo[1] == '[' else '>'} {lo[0]}"
    elif hi:
        text += f" {'<=' if hi[1] == ']' else '<'} {hi[0]}"
    return text


def _resolve(ref: str) -> dict:
    node: Any = _schema()
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


#: Validators whose message gets the allowed values appended.
_RANGE_VALIDATORS = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}


def format_errors(errors, key_of) -> list[str]:
    """One line per schema error: the key, jsonschema's message and, for a type or bound, what the key allows."""
    msgs = []
    for err in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
        if err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            msgs.append(f"{key_of([*err.absolute_path, missing])}: missing (required)")
        elif err.validator in _RANGE_VALIDATORS and isinstance(err.schema, Mapping):
            msgs.append(f"{key_of(err.absolute_path)}: {err.message} (allowed: {allowed(err.schema)})")
        else:
            msgs.append(f"{key_of(err.absolute_path)}: {err.message}")
    return msgs


def _schema_errors(config: dict) -> list[str]:
    validator = with_defaults(StrictValidator)(_schema())
    return format_errors(validator.iter_errors(config), lambda path: f"config key {_key(path)}")


def _check_range(key: str, value, msgs: list[str], allow_negative: bool = False) -> None:
    lo, hi = value
    if not allow_negative and lo < 0:
        msgs.append(f"config key {key}: negative bound {lo} in range {list(value)}")
    if lo > hi:
        msgs.append(f"config key {key}: inverted range {list(value)} (lo > hi)")


def _check_scale(key: str, value, msgs: list[str]) -> None:
    """A noise-scale range: ordered, non-negative and not [0, 0] (that would be no noise at all)."""
    _check_range(key, value, msgs)
    if value[1] <= 0:
        msgs.append(f"config key {key}: noise-scale range {list(value)} gives no noise (allowed: 0 <= lo <= hi, hi > 0)")


def _instance_errors(config: dict) -> list[str]:
    """Cross-key checks of the instance settings: the expected degree fits the node count."""
    d, k = config["instances"]["d"], config["graph"]["expected_degree"]
    if k > d - 1:
        return [f"config key graph.expected_degree: {k} exceeds instances.d - 1 = {d - 1} (a node has at most "
                f"d - 1 neighbours; allowed: 0 < expected_degree <= {d - 1})"]
    return []


def _semantic_errors(config: dict) -> list[str]:
    msgs: list[str] = _instance_errors(config)
    for kind in config.get("mechanisms", {}):
        if kind not in MECHANISMS:
            msgs.append(f"config key mechanisms.{kind}: unknown mechanism kind {kind!r}; "
                        f"known: {sorted(MECHANISMS)}")
        elif _constants_schema(kind) is not None:   # declared: the schema checked types and signs
            for k, v in config["mechanisms"][kind].items():
                if isinstance(v, list) and len(v) == 2:
                    _check_range(f"mechanisms.{kind}.{k}", v, msgs, allow_negative=True)
    for name, fam in config.get("families", {}).items():
        base = f"families.{name}"
        _check_scale(f"{base}.root_noise", fam["root_noise"], msgs)
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
                    _check_scale(f"{key}.noise", spec["noise"], msgs)
            if kind not in config.get("mechanisms", {}):
                msgs.append(f"config key mechanisms.{kind}: missing (constants of kind {kind!r}, "
                            f"used by family {name!r})")
            else:
                signed = MECHANISMS[kind].signed_constants
                if _constants_schema(kind) is None:   # a kind without declared constants: generic checks
                    msgs.extend(_constant_errors(f"mechanisms.{kind}", config["mechanisms"][kind], signed))
                    msgs.extend(_constant_errors(f"{key}.params", spec.get("params", {}), signed))
                else:
                    msgs.extend(_override_errors(f"{key}.params", kind, config["mechanisms"][kind],
                                                 spec.get("params", {}), signed))
    msgs.extend(_reference_errors(config))
    msgs.extend(_verification_errors(config))
    msgs.extend(_episode_errors(config))
    msgs.extend(_saturation_errors(config))
    msgs.extend(_repairs_errors(config))
    if "games" in config:
        from heuresis.games.workflow import config_errors as _games_errors

        msgs.extend(_games_search_errors(config))
        msgs.extend(_games_errors(config))
    return msgs


def _games_search_errors(config: dict) -> list[str]:
    """``games.search`` overrides a scenario's ``search``: the scenario schema's declaration applies."""
    from heuresis.games.scenario import _schema as scenario_schema

    node = scenario_schema()["properties"]["search"]
    validator = StrictValidator({k: v for k, v in node.items() if k != "default"})
    return format_errors(validator.iter_errors(config["games"].get("search", {})),
                          lambda path: f"config key games.search.{_key(path)}" if path else "config key games.search")


def _repairs_errors(config: dict) -> list[str]:
    """Figure 8's classifier parameters are GradientBoostingClassifier's (random_state is repairs.seed)."""
    params = config.get("repairs", {}).get("classifier") or {}
    if not params:
        return []
    from sklearn.ensemble import GradientBoostingClassifier

    known = set(GradientBoostingClassifier().get_params()) - {"random_state"}
    msgs = [f"config key repairs.classifier.{k}: not a GradientBoostingClassifier parameter "
            f"(random_state is repairs.seed); known: {sorted(known)}" for k in params if k not in known]
    if not msgs:
        try:   # scikit-learn's own check of the values (what fit() would raise, later)
            GradientBoostingClassifier(**params)._validate_params()
        except AttributeError:   # a scikit-learn without parameter declarations: checked at fit
            pass
        except (ValueError, TypeError) as exc:
            msgs.append(f"config key repairs.classifier: {exc}")
    return msgs


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
    from heuresis.foundation import FOUNDATION_MODELS

    for k, m in enumerate(config.get("headroom", {}).get("foundation_models", [])):
        if m not in FOUNDATION_MODELS:
            msgs.append(f"config key headroom.foundation_models.{k}: unknown foundation model {m!r}; "
                        f"known: {sorted(FOUNDATION_MODELS)}")
    if "grades" in config:
        try:
            validate_grades([(g["upto"], g["label"]) for g in config["grades"]])
        except ValueError as exc:
            msgs.append(f"config key grades: {exc}")
    return msgs


def _verification_errors(config: dict) -> list[str]:
    """The chosen scale exists; node-count ranges are ordered; determinism compares runs."""
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
            if "d" in spec:   # integers in [2, 1000]: the schema's node_range
                _check_range(f"{key}.d", spec["d"], msgs)
        det = sizes.get("determinism", {})
        if det and len(det["thread_counts"]) * len(det["hash_seeds"]) < 2:
            msgs.append(f"config key verification.scales.{name}.determinism: one thread count and one hash seed "
                        f"make a single run, nothing to compare")
    return msgs


def _episode_errors(config: dict) -> list[str]:
    """Agents have registered kinds; grids name known agents, budgets, families; run names known grids."""
    from heuresis.agents import AGENTS
    from heuresis.games.agents import GameAgent  # registers the offline game agents

    msgs: list[str] = []
    agents = config.get("agents", {})
    menu = config.get("references", {}).get("algorithms", {})
    for name, spec in agents.items():
        if spec.get("kind") not in AGENTS:
            msgs.append(f"config key agents.{name}.kind: unknown agent kind {spec.get('kind')!r}; known: {sorted(AGENTS)}")
        elif spec.get("kind") != "llm":   # offline agents check their parameters when built
            from heuresis.agents.base import make_agent

            try:
                make_agent(name, spec)
            except (ValueError, TypeError) as exc:
                msgs.append(f"config key agents.{name}: {exc}")
        if spec.get("kind") == "merge" and "k" in spec and spec["k"] > len(menu) - 1:
            msgs.append(f"config key agents.{name}.k: {spec['k']} other menu algorithms can never join a pair "
                        f"(the menu has {len(menu) - 1} besides pc_kci; allowed: 1 <= k <= {len(menu) - 1})")
        if spec.get("kind") == "llm":
            budget = (spec.get("thinking") or {}).get("budget_tokens")
            if isinstance(budget, (int, float)) and "max_tokens" in spec and spec["max_tokens"] <= budget:
                msgs.append(f"config key agents.{name}.max_tokens: {spec['max_tokens']} must exceed the thinking "
                            f"budget (thinking.budget_tokens = {budget})")
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


def _constants_schema(kind: str) -> dict | None:
    """The schema of a built-in kind's constants (``mechanisms.<kind>``), else None."""
    return _schema()["properties"]["mechanisms"].get("properties", {}).get(kind)


def _override_errors(key: str, kind: str, constants: Mapping, params: Mapping, signed: tuple[str, ...]) -> list[str]:
    """A family's ``params`` checked against the kind's declared constants (merged over ``mechanisms``)."""
    root = _schema()
    node = _constants_schema(kind)
    known = sorted(node.get("properties", {}))
    msgs = [f"config key {key}.{k}: not a constant of kind {kind!r}; known: {known}" for k in params if k not in known]
    merged = {**constants, **{k: v for k, v in params.items() if k in known}}
    validator = StrictValidator({"$defs": root["$defs"], **node})
    msgs.extend(format_errors(validator.iter_errors(merged), lambda path: f"config key {key}.{_key(path)}"))
    if not msgs:   # ordering of the merged ranges (sign and type are the schema's)
        for k, v in params.items():
            if isinstance(v, list) and len(v) == 2:
                _check_range(f"{key}.{k}", v, msgs, allow_negative=True)
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


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader (plain YAML types only, no ``!!python/...`` tags) that also refuses a
    key given twice in one mapping (PyYAML would keep the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:   # an unhashable key: the base class reports it
                continue
            if first is not key_node.start_mark:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice (first on line {first.line + 1})", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError) -> tuple[str, Any]:
    """The one-line description of a YAML error and the mark (line, column) it points at."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    tag = re.search(r"constructor for the tag '([^']+)'", problem)
    if tag:
        name = re.sub(r"^tag:yaml\.org,2002:", "!!", tag.group(1))
        problem = (f"unsafe or unknown YAML tag {name} (a config holds plain YAML only: mappings, "
                   f"lists, strings, numbers, booleans, null)")
    else:
        context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and cmark is not None and mark is not cmark:
            context += f" (started on line {cmark.line + 1}, column {cmark.column + 1})"
        problem = f"{context}: {problem}" if context and mark is not cmark else problem
    return " ".join(problem.split()), mark


def read_yaml(path: str | Path, what: str = "config file") -> Any:
    """Read one YAML file safely; every problem is a one-line :class:`ConfigError` naming the file
    and, for a syntax error or an unsafe tag, the line and column."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path}: is a folder, not a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        problem, mark = _yaml_problem(exc)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{what} {path}{where}: {problem}") from None


def _read_config_file(path: str | Path) -> dict:
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: must hold a mapping of config keys, got a {type(data).__name__}")
    if "__use_yte__" in data:
        raise ConfigError(f"config file {path}: a YTE template (__use_yte__), whose Python expressions Snakemake "
                          f"evaluates when it reads the file; a config holds plain YAML only")
    return data


def check_config_files(paths) -> None:
    """Re-read config files with the safe loader (the workflow's check of what Snakemake read)."""
    for p in paths:
        _read_config_file(p)


def load_config(*paths: str | Path) -> dict:
    """Load one or more YAML files, later ones merged over earlier ones, and validate."""
    cfg: dict = {}
    for p in paths:
        cfg = merge_configs(cfg, _read_config_file(p))
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


def episode_job_config(config: Mapping, condition_id: str) -> dict:
    """The slice of the ``episodes`` section one episode job depends on.

    Only the job's own budget, the code tool's settings and the test level: adding a grid, a
    budget or an agent elsewhere in the section leaves every existing job's params unchanged, so
    Snakemake reruns nothing that was already paid for.
    """
    from heuresis.harness.conditions import Condition

    episodes = config["episodes"]
    budget = Condition.from_id("", condition_id).budget
    if budget not in episodes["budgets"]:
        raise ConfigError(f"config key episodes.budgets.{budget}: unknown budget of condition {condition_id!r}")
    return {"budgets": {budget: dict(episodes["budgets"][budget])}, "code_tool": dict(episodes.get("code_tool", {})),
            "alpha": episodes.get("alpha", 0.05)}


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
