"""Reading, merging and schema-checking configuration files; the digest of a config slice.

The lowest layer of :mod:`heuresis.config`: it imports no other part of the package, so every
stage module can use it. Files are read with :func:`read_yaml` (safe loading only, a duplicated
key is an error, every problem one line naming the file and line; docs/config-validation.md).
The JSON schema (``heuresis/data/config.schema.yaml``, also linked as
``workflow/schemas/config.schema.yaml``) checks types (integers written as integers), bounds and
required keys and fills in every default: the schema is the one place a default is written, and
code reads the validated config by key. The helpers here (:data:`StrictValidator`,
:func:`format_errors`, :func:`range_errors`, ...) are what each stage's ``config_errors`` uses
for the checks a schema cannot say.
"""

from __future__ import annotations

import copy
import difflib
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

__all__ = [
    "BASE_CONFIG",
    "CHECKOUT",
    "SPLITS",
    "ConfigError",
    "StrictValidator",
    "agent_errors",
    "allowed",
    "check_config_files",
    "config_digest",
    "config_files",
    "config_key",
    "constants_schema",
    "format_errors",
    "in_file_order",
    "merge_configs",
    "range_errors",
    "read_config_file",
    "read_config_files",
    "read_yaml",
    "scale_errors",
    "schema",
    "schema_default",
    "schema_errors",
    "with_defaults",
]

#: The instance splits, in order: ``dev`` (selection, thresholds) and ``test`` (every reported number).
SPLITS = ("dev", "test")

#: The Snakefile's ``configfile:``: the base under every ``--configfile`` overlay, relative to the
#: working folder (where Snakemake reads it from).
BASE_CONFIG = "config/config.yaml"

#: The checkout this package was imported from (``src/heuresis/config/loading.py``, three folders up):
#: where a relative default folder (``config/games/...``) is found when the working folder lacks it.
CHECKOUT = Path(__file__).resolve().parents[3]


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


@functools.lru_cache(maxsize=1)
def schema() -> dict:
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
    """A validator class that also fills in the schema's ``default`` values (jsonschema FAQ recipe).

    Parameters
    ----------
    validator_class
        A jsonschema validator class, e.g. :data:`StrictValidator`.

    Returns
    -------
    type
        The extended class: validating an instance also writes every missing key that has a
        ``default`` into it (nested objects included, once their parent exists).
    """
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


def config_key(path) -> str:
    """A schema error's path as a dotted config key (``episodes.grids.main.agents``)."""
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
    text = " or ".join(_TYPES.get(x, x) for x in (t if isinstance(t, list) else [t])) if t else "a value"  # type: ignore[misc]
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
    node: Any = schema()
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


#: Validators whose message gets the allowed values appended.
_RANGE_VALIDATORS = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}


def format_errors(errors, key_of) -> list[str]:
    """One line per schema error: the key, jsonschema's message and, for a type or bound, what it allows.

    Parameters
    ----------
    errors
        jsonschema errors (``validator.iter_errors(instance)``).
    key_of
        Maps an error's path to the words that name the key (``config key a.b``, ``scenario 'x': key a.b``).
    """
    msgs = []
    for err in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
        if err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            msgs.append(f"{key_of([*err.absolute_path, missing])}: missing (required)")
        elif err.validator in _RANGE_VALIDATORS and isinstance(err.schema, Mapping):
            msgs.append(f"{key_of(err.absolute_path)}: {err.message} (allowed: {allowed(err.schema)})")
        elif err.validator == "additionalProperties" and isinstance(err.instance, Mapping) and \
                isinstance(err.schema, Mapping) and isinstance(err.schema.get("properties"), Mapping):
            known = list(err.schema["properties"])
            for extra in sorted(set(map(str, err.instance)) - set(known)):
                close = difflib.get_close_matches(extra, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
                msgs.append(f"{key_of([*err.absolute_path, extra])}: unknown key{hint}")
        else:
            msgs.append(f"{key_of(err.absolute_path)}: {err.message}")
    return msgs


def schema_errors(config: dict) -> list[str]:
    """The schema's check of a whole config, which fills in the defaults of ``config`` in place.

    Returns
    -------
    list of str
        One line per problem (:func:`format_errors`), empty when the config fits the schema.
    """
    validator = with_defaults(StrictValidator)(schema())
    return format_errors(validator.iter_errors(config), lambda path: f"config key {config_key(path)}")


def schema_default(*path: str) -> Any:
    """The schema's ``default`` of the config key at ``path`` (``"episodes", "alpha"``; ``"*"``: any entry).

    For code that must give a value where no validated config is at hand (a dataclass field
    default, a function's keyword default): it reads the schema, so the value is written once.

    Raises
    ------
    KeyError
        If the key is not declared with a default.
    """
    node: Any = schema()
    for part in path:   # "*": the entries of a mapping (``episodes.grids.*``)
        node = node["additionalProperties"] if part == "*" else node["properties"][part]
    if "default" not in node:
        raise KeyError(f"config key {'.'.join(path)} has no schema default")
    return copy.deepcopy(node["default"])


def constants_schema(kind: str) -> dict | None:
    """The schema of a built-in mechanism kind's constants (``mechanisms.<kind>``), else None."""
    return schema()["properties"]["mechanisms"].get("properties", {}).get(kind)


def range_errors(key: str, value, allow_negative: bool = False) -> list[str]:
    """Problems of a range ``[lo, hi]`` at config key ``key``: inverted, or a negative bound.

    Parameters
    ----------
    key
        The dotted config key, named in each message.
    value
        The two numbers.
    allow_negative
        Whether ``lo < 0`` is allowed (signed constants such as a knot position).
    """
    lo, hi = value
    msgs = []
    if not allow_negative and lo < 0:
        msgs.append(f"config key {key}: negative bound {lo} in range {list(value)}")
    if lo > hi:
        msgs.append(f"config key {key}: inverted range {list(value)} (lo > hi)")
    return msgs


def agent_errors(config: Mapping, key: str, names, kinds, role: str) -> list[str]:
    """Problems of a list of agent names at config key ``key``.

    Each name must be an entry of ``config["agents"]`` whose kind is in ``kinds``; ``role`` says
    what the list needs, for the message (e.g. "the leakage probe asks an LLM (kind llm)").
    """
    agents = config.get("agents", {})
    msgs = []
    for a in names:
        if a not in agents:
            msgs.append(f"config key {key}: unknown agent {a!r}; known: {sorted(agents)}")
        elif agents[a].get("kind") not in kinds:
            msgs.append(f"config key {key}: agent {a!r} is of kind {agents[a].get('kind')!r}; {role}")
    return msgs


def scale_errors(key: str, value) -> list[str]:
    """Problems of a noise-scale range: it must be ordered, non-negative and not [0, 0] (no noise)."""
    msgs = range_errors(key, value)
    if value[1] <= 0:
        msgs.append(f"config key {key}: noise-scale range {list(value)} gives no noise (allowed: 0 <= lo <= hi, hi > 0)")
    return msgs


def merge_configs(base: Mapping, override: Mapping) -> dict:
    """Deep merge as Snakemake merges ``--configfile`` files over the default config."""
    out = copy.deepcopy(dict(base))
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_configs(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


class _StrictConstructor:
    """A key given twice in one mapping is an error (PyYAML alone would keep the last one silently)."""

    def construct_mapping(self, node, deep=False):
        """A mapping node as a dict; a key given twice is a ConstructorError naming both lines."""
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


class _StrictLoader(_StrictConstructor, yaml.SafeLoader):
    """PyYAML's safe loader that also refuses a key given twice: plain YAML types only, no ``!!python/...`` tags."""


class _FastStrictLoader(_StrictConstructor, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same with libyaml's parser (several times faster); an error is reported by :class:`_StrictLoader`."""


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
    """Read one YAML file safely (plain YAML types only, no key given twice).

    Parameters
    ----------
    path
        The file.
    what
        How messages name the file (``config file``, ``scenario file``).

    Raises
    ------
    ConfigError
        One line naming the file and, for a syntax error or an unsafe tag, the line and column.
    """
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
        return yaml.load(text, Loader=_FastStrictLoader)
    except yaml.YAMLError:
        pass
    try:   # PyYAML's own parser again, for its messages (the same text, so the same error)
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        problem, mark = _yaml_problem(exc)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{what} {path}{where}: {problem}") from None


def read_config_file(path: str | Path) -> dict:
    """One config file as a mapping of config keys (empty file: ``{}``), read with :func:`read_yaml`.

    Raises
    ------
    ConfigError
        For a file that is not a mapping, or a YTE template (Python expressions Snakemake would
        evaluate).
    """
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
        read_config_file(p)


def in_file_order(config: Mapping, paths, key: str = "families") -> dict:
    """``config`` with the entries of its mapping ``key`` in the order the config files define them.

    The base config's entries first, then each other file's new ones in the order the files are
    given: Snakemake's merge puts an overlay's new entries (a seventh family) before the base
    config's, and the tables list the families in this order.
    """
    base = [str(p) for p in paths if Path(p).resolve() == Path(BASE_CONFIG).resolve()]
    order: list[str] = []
    for p in [*base, *(str(p) for p in paths if str(p) not in base)]:
        section = read_config_file(p).get(key)
        if isinstance(section, Mapping):
            order += [k for k in section if k not in order]
    current = config.get(key)
    if not isinstance(current, Mapping):
        return dict(config)
    keys = [k for k in order if k in current] + [k for k in current if k not in order]
    return {**config, key: {k: current[k] for k in keys}}


def config_files(paths, base: str | Path | None = BASE_CONFIG) -> list[str]:
    """The files a config is read from, in merge order, as the workflow reads them.

    Parameters
    ----------
    paths
        The files given (``--config``), later ones merged over earlier ones.
    base
        The base config read first, as the Snakefile's ``configfile:`` is read under every
        ``--configfile`` overlay (not added again when it is the first file given); ``None``: the
        given files only.

    Raises
    ------
    ConfigError
        When the base config is not in the working folder, or no file is given at all.
    """
    files = [str(p) for p in paths]
    if base is not None and not (files and Path(files[0]).resolve() == Path(base).resolve()):
        if not Path(base).is_file():
            raise ConfigError(f"base config {base}: not found in {Path.cwd()} (the workflow reads it under every "
                              f"overlay; run from the workflow's folder, or read the given files only: --no-base)")
        files.insert(0, str(base))
    if not files:
        raise ConfigError("no config file given")
    return files


def read_config_files(*paths: str | Path) -> dict:
    """Read one or more config files, later ones merged over earlier ones (not validated)."""
    cfg: dict = {}
    for p in paths:
        cfg = merge_configs(cfg, read_config_file(p))
    return cfg


def config_digest(obj: Any) -> str:
    """SHA-256 of a canonical JSON rendering (sorted keys) of a config or config slice."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


