"""Typed settings: frozen dataclasses for the config slices that several modules read.

Each is built from its validated mapping by ``from_config`` and gives the mapping back with
``as_dict`` (the same keys, in the schema's order, with the same values: nothing is converted,
so a record or digest made from ``as_dict`` is the one made from the mapping).

- :class:`Bootstrap`: ``bootstrap`` (and ``games.bootstrap`` merged over it), the intervals'
  resamples, level and seed;
- :class:`BudgetSettings`: one entry of ``episodes.budgets``;
- :class:`CodeTool`: ``episodes.code_tool``, the code tool's sandbox limits and isolation;
- :class:`Retries`: ``agents.<name>.retries`` of an LLM agent, the backoff of a model call;
- :class:`ConfigSettings`: all of them for a validated config
  (:func:`heuresis.preflight.validation.typed_settings`).

``from_config`` checks the mapping against the slice's node of the config schema (the one place
its keys, types and bounds are written) and raises :class:`~heuresis.config.loading.ConfigError`
naming the offending key; a key the mapping leaves out takes the schema's default (a budget's
keys have none: each is required). Like :mod:`heuresis.config.loading`, which is all it imports
of the package, every module may import it.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from heuresis.config.loading import ConfigError, StrictValidator, config_key, format_errors, schema, schema_default
from heuresis.registry import MODEL_KINDS

__all__ = ["Bootstrap", "BudgetSettings", "CodeTool", "ConfigSettings", "Retries"]


def _node(*path: str) -> dict:
    """The schema node at ``path`` (``properties`` steps implied; ``*``: an entry of a mapping)."""
    node: Any = schema()
    for part in path:
        node = node["additionalProperties"] if part == "*" else node["properties"][part]
    return node


def _checked(cls, mapping: Any, node: Mapping, key: str, **extra: Any):
    """``cls`` from ``mapping`` once it fits ``node``; a ConfigError naming each bad key otherwise."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"config key {key}: expected a mapping, got {type(mapping).__name__}")
    validator = StrictValidator({**node, "$defs": schema()["$defs"]})
    msgs = format_errors(validator.iter_errors(dict(mapping)), lambda path: f"config key {config_key([key, *path])}")
    if msgs:
        raise ConfigError(msgs[0] if len(msgs) == 1 else f"invalid {key}:\n  " + "\n  ".join(msgs))
    return cls(**extra, **mapping)


def _as_dict(obj: Any, skip: tuple[str, ...] = ()) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in skip}


@dataclass(frozen=True)
class Bootstrap:
    """Bootstrap intervals (config ``bootstrap``): resamples, level and seed."""

    resamples: int = schema_default("bootstrap", "resamples")
    level: float = schema_default("bootstrap", "level")
    seed: int = schema_default("bootstrap", "seed")

    @classmethod
    def from_config(cls, mapping: Mapping, key: str = "bootstrap") -> Bootstrap:
        """The settings of a ``bootstrap`` mapping (``key``: its config key, named in a ConfigError)."""
        return _checked(cls, mapping, _node("bootstrap"), key)

    @classmethod
    def coerce(cls, value: Bootstrap | Mapping, key: str = "bootstrap") -> Bootstrap:
        """``value`` itself when it is a :class:`Bootstrap`, else :meth:`from_config` of it."""
        return value if isinstance(value, Bootstrap) else cls.from_config(value, key)

    def as_dict(self) -> dict:
        """The config mapping: ``resamples``, ``level``, ``seed``."""
        return _as_dict(self)

    def kwargs(self) -> dict:
        """The keyword arguments of the interval functions (:mod:`heuresis.causal.bootstrap`)."""
        return dict(resamples=int(self.resamples), seed=int(self.seed), level=float(self.level))


@dataclass(frozen=True)
class BudgetSettings:
    """A named budget setting of the config (``episodes.budgets.<name>``); ``name`` is the entry's key."""

    name: str
    test_units_factor: float
    turns: int
    output_tokens_per_turn: int
    algorithm_calls: int
    wall_seconds: float

    @classmethod
    def from_config(cls, name: str, spec: Mapping) -> BudgetSettings:
        """Build the setting ``name`` from its config entry (every key required; a bad one is a ConfigError)."""
        return _checked(cls, spec, _node("episodes", "budgets", "*"), f"episodes.budgets.{name}", name=name)

    @classmethod
    def coerce(cls, name: str, value: BudgetSettings | Mapping) -> BudgetSettings:
        """``value`` itself when it is a :class:`BudgetSettings`, else :meth:`from_config` of it."""
        return value if isinstance(value, BudgetSettings) else cls.from_config(name, value)

    def as_dict(self) -> dict:
        """The config entry (every field but ``name``)."""
        return _as_dict(self, skip=("name",))

    def test_units(self, pc_kci_tests: int) -> int:
        """Test units of an instance: the factor times PC-KCI's test count (at least 1)."""
        return max(1, int(math.ceil(self.test_units_factor * int(pc_kci_tests))))


@dataclass(frozen=True)
class CodeTool:
    """The code tool (config ``episodes.code_tool``): the sandbox's limits and its isolation."""

    cpu_seconds: int = schema_default("episodes", "code_tool", "cpu_seconds")
    memory_mb: int = schema_default("episodes", "code_tool", "memory_mb")
    wall_seconds: float = float(schema_default("episodes", "code_tool", "wall_seconds"))
    max_output_chars: int = schema_default("episodes", "code_tool", "max_output_chars")
    max_processes: int = schema_default("episodes", "code_tool", "max_processes")
    disk_mb: int = schema_default("episodes", "code_tool", "disk_mb")
    memory_bound: str = schema_default("episodes", "code_tool", "memory_bound")
    isolation: str = schema_default("episodes", "code_tool", "isolation")

    @classmethod
    def from_config(cls, mapping: Mapping, key: str = "episodes.code_tool") -> CodeTool:
        """The settings of an ``episodes.code_tool`` mapping (``key`` is named in a ConfigError)."""
        return _checked(cls, mapping, _node("episodes", "code_tool"), key)

    @classmethod
    def coerce(cls, value: CodeTool | Mapping, key: str = "episodes.code_tool") -> CodeTool:
        """``value`` itself when it is a :class:`CodeTool`, else :meth:`from_config` of it."""
        return value if isinstance(value, CodeTool) else cls.from_config(value, key)

    def as_dict(self) -> dict:
        """The config mapping: the limits, then ``isolation``."""
        return _as_dict(self)

    def limits(self) -> dict:
        """The sandbox's limits: every field but ``isolation``."""
        return _as_dict(self, skip=("isolation",))


@dataclass(frozen=True)
class Retries:
    """Backoff with full jitter, on top of the provider's ``Retry-After`` (config ``agents.<name>.retries``).

    Before retry k+1 the wait is drawn uniformly in ``[0, min(max_s, base_s * 2**k))``, added to the
    provider's ``Retry-After`` (at most ``max_retry_after_s``) when it sends one.

    The jitter spreads the retries of parallel jobs, which would otherwise hit a provider in lockstep;
    it changes when a request is sent, never what: the waits are recorded in the retry log.
    """

    max_retries: int = 5
    base_s: float = 2.0
    max_s: float = 60.0
    max_retry_after_s: float = 300.0

    @classmethod
    def from_config(cls, mapping: Mapping, key: str = "agents.<name>.retries") -> Retries:
        """The settings of an LLM agent's ``retries`` mapping (``key`` is named in a ConfigError)."""
        return _checked(cls, mapping, _node("agents", "*")["then"]["properties"]["retries"], key)

    @classmethod
    def coerce(cls, value: Retries | Mapping | None, key: str = "agents.<name>.retries") -> Retries:
        """``value`` itself when it is a :class:`Retries`, the defaults for None, else :meth:`from_config` of it."""
        return value if isinstance(value, Retries) else cls.from_config(value or {}, key)

    def as_dict(self) -> dict:
        """The config mapping: ``max_retries``, ``base_s``, ``max_s``, ``max_retry_after_s``."""
        return _as_dict(self)

    def wait(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Return the seconds to wait after failed attempt ``attempt`` (0-based)."""
        top = float(min(self.max_s, self.base_s * 2.0 ** attempt))
        jitter = (rng or random).uniform(0.0, top)
        floor = min(float(retry_after), self.max_retry_after_s) if retry_after and retry_after > 0 else 0.0
        return floor + jitter


@dataclass(frozen=True)
class ConfigSettings:
    """The typed slices of a validated config: bootstrap, budgets by name, code tool, LLM agents' retries."""

    bootstrap: Bootstrap
    budgets: Mapping[str, BudgetSettings]
    code_tool: CodeTool
    retries: Mapping[str, Retries]

    @classmethod
    def from_config(cls, config: Mapping) -> ConfigSettings:
        """The slices of ``config`` (validated: the schema's defaults filled in); ``retries`` has every LLM agent."""
        episodes = config.get("episodes") or {}
        agents = config.get("agents") or {}
        return cls(bootstrap=Bootstrap.from_config(config["bootstrap"]),
                   budgets={name: BudgetSettings.from_config(name, spec)
                            for name, spec in (episodes.get("budgets") or {}).items()},
                   code_tool=CodeTool.from_config(episodes.get("code_tool") or {}),
                   retries={name: Retries.from_config(spec.get("retries") or {}, f"agents.{name}.retries")
                            for name, spec in agents.items() if spec.get("kind") in MODEL_KINDS})
