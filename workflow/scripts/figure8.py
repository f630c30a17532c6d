"""Snakemake adapter for Figure 8 and its numbers (logic: heuresis.stages.repairs, heuresis.artifacts.report)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import save_figure, write_paper_table
from heuresis.stages.repairs import evaluate, figure8, load_features, summary_display

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
boot = sm.params.bootstrap
summary = evaluate(load_features(sm.input), boot, seed=sm.params.seed, classifier_params=sm.params.classifier)
prov = provenance_record(stage="targets", config={"bootstrap": boot, "seed": sm.params.seed,
                                                  "classifier": sm.params.classifier},
                         seeds={"bootstrap": boot["seed"], "classifier": sm.params.seed}, inputs=list(sm.input))
write_paper_table(summary, summary_display(summary), Path(sm.output.parquet).with_suffix(""), provenance=prov,
                  caption="Figure 8 numbers. Scripted repairs of PC-KCI: AUC per signal for wrong deletions and "
                          "F1 change on test from restoring above a threshold chosen on dev.")
save_figure(figure8(summary), Path(sm.output.pdf).with_suffix(""),
            provenance={**prov, "numbers": summary.to_dict("records")})
log("figure8: " + "; ".join(f"{r.method} AUC={r.auc:.3f} dF1={r.f1_change:+.3f}" for r in summary.itertuples()))
