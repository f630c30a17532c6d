"""Snakemake adapter for one reference-sweep job: a batch of algorithms on one shard."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.stages.references import run_shard

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
for algorithm, params in sm.params.algorithms.items():
    run_shard(
        algorithm,
        params,
        sm.wildcards.family,
        sm.wildcards.split,
        sm.params.indices,
        data_dir=sm.input.data,
        truth_dir=Path(sm.input.truth).parent,
        out=getattr(sm.output, algorithm),
        grades=sm.params.grades,
        log=log,
    )
