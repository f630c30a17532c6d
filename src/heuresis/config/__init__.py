"""The workflow configuration, in three parts (and the typed settings).

- :mod:`heuresis.config.loading`: reading and merging files, the schema (the one place each
  default is written) and its helpers, and :func:`config_digest`. It imports no other part of
  the package, so every stage module imports it.
- :mod:`heuresis.config.spend`: what a config may spend, at most (:func:`~heuresis.config.spend.spend_bounds`),
  counted from the jobs each stage plans (the stages plan their own jobs and the config slice
  each job depends on: ``reference_batches`` in :mod:`heuresis.stages.references`,
  ``episode_jobs`` in :mod:`heuresis.stages.episodes`, ...).
- :mod:`heuresis.config.validation`: :func:`validate_config`, the schema followed by each
  stage's own ``config_errors(config)``, :func:`load_config`, and :func:`typed_settings`: the
  slices several modules read, as the frozen dataclasses of :mod:`heuresis.config.settings`
  (which, like loading, every module may import).

The public names of loading and validation are importable from here. Validation imports the
stage modules, which import :mod:`heuresis.config.loading`; so its names are loaded on first
use (PEP 562 ``__getattr__``), and importing a stage never imports every other stage. A stage
module imports from :mod:`heuresis.config.loading`, never from this package (the import graph
would have a cycle: ``tests/test_structure.py`` checks).
"""

from __future__ import annotations

from typing import Any

from heuresis.config import loading as _loading
from heuresis.config.loading import *  # noqa: F403  (every public name of loading, listed once in its __all__)

_VALIDATION = ("STAGE_CHECKS", "load_config", "typed_settings", "validate_config")

__all__ = [*_loading.__all__, *_VALIDATION]


def __getattr__(name: str) -> Any:
    """A public name of :mod:`~heuresis.config.validation`, imported on first use."""
    if name in _VALIDATION:
        from heuresis.config import validation

        return getattr(validation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, including those loaded on first use."""
    return sorted({*globals(), *__all__})
