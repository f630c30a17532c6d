"""Snakemake adapter for Table 1 (logic: heuresis.targets.table1, heuresis.artifacts.report)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import write_paper_table
from heuresis.targets.table1 import table1, table1_path

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
numbers, display = table1(sm.params.data)
prov = provenance_record(stage="targets", config={"table1": sm.params.data}, inputs=[table1_path()])
legend = "; ".join(f"{k} {v['title']}" for k, v in sm.params.data["requirements"].items())
write_paper_table(numbers, display, Path(sm.output.parquet).with_suffix(""), provenance=prov,
                  caption=f"Table 1. Existing benchmarks against the design requirements ({legend}). "
                          "yes / partial / no by design; — not determined.")
log(f"table1: {len(numbers)} benchmarks")
