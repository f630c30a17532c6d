"""Snakemake adapter for Figure 1b (logic: heuresis.stages.saturation, heuresis.artifacts.report)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import save_figure, write_paper_table
from heuresis.stages.saturation import figure1b, figure1b_table, load_saturation, saturation_summary

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
boot = sm.params.bootstrap
summary = saturation_summary(load_saturation(sm.input), sm.params.networks, sm.params.methods, boot)
fig = figure1b(summary, sm.params.networks, sm.params.methods, n=sm.params.n)
prov = provenance_record(stage="targets", config={"networks": sm.params.networks, "methods": sm.params.methods,
                                                  "bootstrap": boot},
                         seeds={"bootstrap": boot["seed"]}, inputs=list(sm.input))
save_figure(fig, Path(sm.output.pdf).with_suffix(""), provenance={**prov, "numbers": summary.to_dict("records")})
numbers, display = figure1b_table(summary, sm.params.networks, sm.params.methods)
write_paper_table(numbers, display, Path(sm.output.table[0]).with_suffix(""), provenance=prov,
                  caption="Figure 1b. Mean adjacency F1 per public network structure (linear-Gaussian data) and "
                          "the share of the oracle's F1 gain over PC-KCI that GES alone recovers.")
log("figure1b: " + "; ".join(f"{r.network} {r.method} {r.f1:.3f}" for r in summary.itertuples()))
