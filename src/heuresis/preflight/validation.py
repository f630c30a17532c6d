"""Validating a configuration: the schema, then each stage's own ``config_errors``.

Validation is two-step, after a refusal of any credential written into ``agents``
(:func:`heuresis.harness.agent_spec.secret_errors`). The JSON schema (:func:`heuresis.config.loading.schema_errors`) fills in
defaults and checks types, bounds and required keys. Then each stage module checks what a
schema cannot say about its own section (unknown mechanism kinds, inverted ranges, algorithms
not registered, grids naming unknown agents, ...) in a function ``config_errors(config)`` that
returns one line per problem, each naming the offending config key. This module only collects
them: the knowledge of a section lives with the stage that reads it (docs/config-validation.md).
:func:`typed_settings` gives the slices several modules read as frozen dataclasses
(:mod:`heuresis.config.settings`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from heuresis.config.loading import ConfigError, read_config_files, schema_errors
from heuresis.config.settings import ConfigSettings
from heuresis.harness.agent_spec import env_errors, secret_errors
from heuresis.stages import episodes, headroom, instances, leakage, references, repairs, saturation, verification
from heuresis.stages.games import workflow as games

__all__ = ["STAGE_CHECKS", "load_config", "typed_settings", "validate_config"]

#: The stages' checks, in the order their messages are listed: instances (graph, mechanisms,
#: families), references (menu, baselines, batches, grades), headroom, verification, episodes
#: (agents, budgets, grids), leakage, saturation, repairs, games.
STAGE_CHECKS: tuple[Callable[[Mapping], list[str]], ...] = (
    instances.config_errors, references.config_errors, headroom.config_errors, verification.config_errors,
    episodes.config_errors, leakage.config_errors, saturation.config_errors, repairs.config_errors,
    games.config_errors,
)


def validate_config(config: Mapping[str, Any]) -> dict:
    """Validate a configuration and return a copy with the schema's defaults filled in.

    The stages' checks run only on a config that fits the schema (they read keys the schema
    requires or fills in).

    Raises
    ------
    ConfigError
        Listing every problem, each naming its config key.
    """
    cfg = copy.deepcopy(dict(config))
    schema = schema_errors(cfg)
    msgs = secret_errors(cfg) + env_errors(cfg) + schema   # a credential or a secret handed on is named whatever else is wrong
    if not schema:
        for check in STAGE_CHECKS:
            msgs.extend(check(cfg))
    if msgs:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(msgs))
    return cfg


def load_config(*paths: str | Path) -> dict:
    """Load one or more YAML files, later ones merged over earlier ones, and validate."""
    return validate_config(read_config_files(*paths))


def typed_settings(config: Mapping[str, Any]) -> ConfigSettings:
    """The typed slices of a validated config (:func:`validate_config`'s result).

    ``bootstrap``, ``episodes.budgets`` (by name), ``episodes.code_tool`` and the ``retries`` of
    every LLM agent, as :class:`~heuresis.config.settings.ConfigSettings`; each dataclass's
    ``as_dict`` gives back its mapping.
    """
    return ConfigSettings.from_config(config)
