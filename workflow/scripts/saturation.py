"""Snakemake adapter for Figure 1b's datasets of one network (logic: heuresis.saturation)."""

from heuresis.logs import stage_logger
from heuresis.saturation import run_network

sm = snakemake  # noqa: F821  (injected by Snakemake)
run_network(sm.wildcards.network, sm.params.settings, sm.output[0], log=stage_logger(sm.log[0]))
