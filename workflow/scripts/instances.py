"""Snakemake adapter for the instances stage (logic: heuresis.stages.instances.write_split)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.sealing import require_test_seed
from heuresis.stages.instances import write_split

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
sealed = isinstance(sm.params.spec["seed"], dict)  # a sealed test split: its seed from the job's environment
write_split(
    sm.params.spec,
    sm.wildcards.family,
    sm.wildcards.split,
    sm.params.n_instances,
    data_dir=sm.output.data,
    truth_dir=Path(sm.output.graphs).parent,
    log=log,
    test_seed=require_test_seed(sm.config) if sealed else None,
)
