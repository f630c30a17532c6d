"""Snakemake adapter for the analysis tables and figures (logic: heuresis.stages.analysis)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import save_figure, write_paper_table
from heuresis.stages.analysis import figures, tables
from heuresis.stages.analysis.scores import load_episode_scores
from heuresis.stages.headroom import load_scores

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
name = sm.params.target
scores = load_episode_scores(sm.input.scores)
families, boot, agents = list(sm.params.families), dict(sm.params.bootstrap), list(sm.params.agents)
inputs = [sm.input.scores] + ([sm.input.headroom] if "headroom" in sm.input.keys() else [])
prov = provenance_record(stage="analysis", config={"families": families, "bootstrap": boot, "agents": agents,
                                                   **dict(sm.params.extra)},
                         seeds={"bootstrap": boot["seed"]} if boot else {}, inputs=inputs)
CAPTIONS = {
    "table4": "Table 4. Trace attribution: agent F1, merge* (k per family in hindsight), agent − merge*, Unsupp (test).",
    "table6": "Table 6. Agent F1 and paired gains Δ^s (vs BCA_g) and Δ^r (vs BCA_f) per family (test).",
    "table7": "Table 7. Gain over the agent's in-episode PC-KCI output; shortcut rate, algorithms, tool-choice MI (test).",
    "table8": "Table 8. Guided condition: repairs of PC-KCI's deletions, gain over PC-KCI, guided − unguided, "
              "full − minimal toolbox (test).",
    "table9": "Table 9. Prompt level × stated target: Δ^r, returning PC-KCI's output, reaching the wall (test).",
    "table10": "Table 10. Budget sweep: Δ^r, wall reached and rescued, unsubmitted, completion tokens (test).",
    "table12": "Table 12. Harness disclosure: model, provider, settings, budgets and last-turn setting per result.",
    "table13": "Table 13. Per-repeat results: all episodes vs finished, wall and rescued counts (test).",
}
if name.startswith("table"):
    if name == "table12":
        numbers, display = tables.table12(scores, sm.params.extra["cells"], sm.params.extra["agent_specs"],
                                          sm.params.extra["budgets"])
    else:
        numbers, display = getattr(tables, name)(scores, families, boot, agents)
    write_paper_table(numbers, display, Path(sm.output.parquet).with_suffix(""), caption=CAPTIONS[name],
                      provenance=prov, secrets=sm.params.secrets)
    log(f"{name}: {len(numbers)} rows")
else:
    if name == "figure6":
        fig, numbers = figures.figure6(scores, load_scores(sm.input.headroom), families, boot, agents)
    else:
        fig, numbers = getattr(figures, name)(scores, families, boot, agents)
    save_figure(fig, Path(sm.output.pdf).with_suffix(""), provenance={**prov, "secrets": dict(sm.params.secrets),
                                                                    "numbers": numbers.to_dict("records")})
    log(f"{name}: {len(numbers)} plotted numbers")
