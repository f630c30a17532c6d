"""Snakemake adapter for Figure 1b's datasets of one network (logic: heuresis.stages.saturation)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.stages.saturation import run_network

sm = snakemake  # noqa: F821  (injected by Snakemake)
run_network(sm.wildcards.network, sm.params.settings, sm.output[0], log=stage_logger(sm.log[0]))
