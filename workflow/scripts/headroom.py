"""Snakemake adapter for the headroom stage (logic: heuresis.stages.headroom)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.stages.headroom import BCA_FAILURE_RULE, build_headroom, write_headroom

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
started = utc_now()
hp = sm.params.headroom
truth_dirs = {family: Path(p).parent for family, p in zip(sm.params.families, sm.input.truth, strict=True)}
selection, scores = build_headroom(sm.input.refs, truth_dirs, hp["menu"], hp["baselines"],
                                   random_restorations=hp["random_restorations"], seed=hp["seed"])
prov = provenance_record(stage="headroom", config=dict(hp), seeds={"random_restoration": hp["seed"]},
                         inputs=[*sm.input.refs, *sm.input.truth], started=started)
write_headroom(selection, scores, sm.output.selection, sm.output.scores, {PROVENANCE_KEY: dumps(prov)})
chosen = selection[selection["chosen"]]
log("BCA: " + ", ".join(f"{r.scope}={r.algorithm} ({r.dev_f1:.3f})" for r in chosen.itertuples()))
n_dev_failed = int(selection[selection["scope"] == "all"]["dev_n_failed"].sum())
runs = scores[scores["method"].isin([*hp["menu"], *hp["baselines"]])]
if n_dev_failed or runs["failed"].any():
    log(f"FAILED reference runs: {n_dev_failed} on dev, {int(runs['failed'].sum())} on test; {BCA_FAILURE_RULE}")
