"""Snakemake adapter: references of one game scenario (logic: heuresis.games.workflow)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.games.workflow import run_references

sm = snakemake  # noqa: F821  (injected by Snakemake)
run_references(sm.wildcards.scenario, sm.params.folder, sm.params.search, sm.output[0], log=stage_logger(sm.log[0]))
