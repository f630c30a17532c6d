"""Snakemake adapter for the instances stage (logic: heuresis.instances.write_split)."""

from pathlib import Path

from heuresis.instances import write_split
from heuresis.logs import stage_logger

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
write_split(
    sm.params.spec,
    sm.wildcards.family,
    sm.wildcards.split,
    sm.params.n_instances,
    data_dir=sm.output.data,
    truth_dir=Path(sm.output.graphs).parent,
    log=log,
)
