"""Snakemake adapter for every paper table and figure (logic: heuresis.targets.build)."""

import sys

from heuresis.artifacts.logs import stage_logger
from heuresis.targets.build import TargetFailed, build
from heuresis.targets.registry import target_named

sm = snakemake  # noqa: F821  (injected by Snakemake)
target = target_named(sm.params.target)
inputs = {name: [v] if isinstance(v := getattr(sm.input, name), str) else list(v) for name in target.inputs}
params = {name: getattr(sm.params, name) for name in target.params}
try:
    build(target, inputs, dict(sm.output.items()), params, sm.params.caption, stage_logger(sm.log[0]))
except TargetFailed:
    sys.exit(1)
