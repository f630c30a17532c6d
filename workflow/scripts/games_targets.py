"""Snakemake adapter: one table or figure of the games track (logic: heuresis.games.analysis)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.games.analysis import build_target

sm = snakemake  # noqa: F821  (injected by Snakemake)
out = sm.output.parquet if "parquet" in sm.output.keys() else sm.output.pdf
msg = build_target(sm.params.target, Path(out).with_suffix(""), references=list(sm.input.references),
                   plays=list(sm.input.plays), judgements=list(sm.input.judgements), judges=list(sm.params.judges),
                   bootstrap=dict(sm.params.bootstrap))
stage_logger(sm.log[0])(msg)
