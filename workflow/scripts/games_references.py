"""Snakemake adapter: references of one game scenario (logic: heuresis.stages.games.workflow)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.sealing import require_test_seed
from heuresis.stages.games.workflow import run_references

sm = snakemake  # noqa: F821  (injected by Snakemake)
variants = sm.params.variants  # a test variant: what its draws depend on (a sealed one: the seed from the environment)
sealed = variants is not None and variants["test_seed"] == "sealed"
run_references(sm.wildcards.scenario, sm.params.folder, sm.params.search, sm.output[0], log=stage_logger(sm.log[0]),
               variants=variants, test_seed=require_test_seed(sm.config) if sealed else None)
