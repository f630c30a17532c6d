"""Snakemake adapter for Table 2 beside the published one (logic: heuresis.targets.published, heuresis.artifacts.report)."""

from pathlib import Path

import pyarrow.parquet as pq

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import write_paper_table
from heuresis.targets.published import load_published_table2, table2_vs_paper

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
published = load_published_table2(sm.input.published)
numbers, display = table2_vs_paper(pq.read_table(sm.input.table2).to_pandas(), published)
prov = provenance_record(stage="targets", config={"published_table2": published},
                         inputs=[sm.input.table2, sm.input.published])
write_paper_table(numbers, display, Path(sm.output.parquet).with_suffix(""), provenance=prov,
                  caption=f"Table 2 beside the published one: PC-KCI's wrong deletions per test instance, the share "
                          f"of instances with none and the oracle's F1 gain over PC-KCI, ours and the paper's "
                          f"(source: {published['source']}).")
log(f"table2_paper: {len(numbers)} rows")
