"""Snakemake adapter for paper tables and figures (logic: heuresis.stages.headroom_targets, heuresis.artifacts.report)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import save_figure, write_paper_table
from heuresis.stages import headroom_targets as targets
from heuresis.stages.headroom import BCA_FAILURE_RULE, load_scores, load_selection

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
scores = load_scores(sm.input.scores)
selection = load_selection(sm.input.selection)
families = sm.params.families
boot = sm.params.bootstrap
prov = provenance_record(stage="targets", config={"families": families, "bootstrap": boot},
                         seeds={"bootstrap": boot["seed"]}, inputs=[sm.input.scores, sm.input.selection])
CAPTIONS = {
    "table2": "Table 2. Mechanism families, PC-KCI's wrong deletions and the oracle's gain (test).",
    "table3": "Table 3. Reference points per family: BCA_f, oracle, headrooms and the router (test). "
              f"Failed runs: {BCA_FAILURE_RULE}.",
    "table11": "Table 11. Trivial floors: adjacency F1 on test with 95% bootstrap intervals.",
}
name = sm.params.target
if name.startswith("table"):
    if name == "table2":
        numbers, display = targets.table2(scores, families, boot)
    elif name == "table3":
        numbers, display = targets.table3(scores, selection, list(families), boot, sm.params.foundation_models)
    else:
        numbers, display = targets.table11(scores, list(families), boot)
    write_paper_table(numbers, display, Path(sm.output.parquet).with_suffix(""), caption=CAPTIONS[name],
                      provenance=prov, secrets=sm.params.secrets)
    log(f"{name}: {len(numbers)} rows")
else:
    fig, numbers = targets.figure1c(scores, list(families), boot)
    save_figure(fig, Path(sm.output.pdf).with_suffix(""), provenance={**prov, "secrets": dict(sm.params.secrets),
                                                                    "numbers": numbers.to_dict("records")})
    log(f"{name}: written")
