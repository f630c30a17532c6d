"""Snakemake adapter for one reference-sweep job (logic: heuresis.references.run_shard)."""

from pathlib import Path

from heuresis.logs import stage_logger
from heuresis.references import run_shard

sm = snakemake  # noqa: F821  (injected by Snakemake)
run_shard(
    sm.wildcards.algorithm,
    sm.params.algorithm_params,
    sm.wildcards.family,
    sm.wildcards.split,
    sm.params.indices,
    data_dir=sm.input.data,
    truth_dir=Path(sm.input.truth).parent,
    out=sm.output[0],
    grades=sm.params.grades,
    log=stage_logger(sm.log[0]),
)
