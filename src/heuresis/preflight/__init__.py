"""Before a run: the whole config validated (each stage's own checks) and what it may spend.

- :mod:`heuresis.preflight.validation`: :func:`validate_config`, the schema followed by each
  stage's own ``config_errors(config)``, :func:`load_config`, and :func:`typed_settings`: the
  slices several modules read, as the frozen dataclasses of :mod:`heuresis.config.settings`.
- :mod:`heuresis.preflight.spend`: what a config may spend, at most (:func:`~heuresis.preflight.spend.spend_bounds`),
  counted from the jobs each stage plans (the stages plan their own jobs and the config slice
  each job depends on: ``reference_batches`` in :mod:`heuresis.stages.references`,
  ``episode_jobs`` in :mod:`heuresis.stages.episodes`, ...).

- :mod:`heuresis.preflight.plan`: :class:`~heuresis.preflight.plan.WorkflowPlan`, what every rule of
  ``rules/`` asks of the config (job lists, input paths, config slices, resources).

This layer sits above the stages, whose checks and plans it collects; reading config files is
:mod:`heuresis.config`, below every stage.
"""

from .validation import STAGE_CHECKS, load_config, typed_settings, validate_config

__all__ = ["STAGE_CHECKS", "load_config", "typed_settings", "validate_config"]
