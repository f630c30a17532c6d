"""Snakemake adapter: Figure 1a from the leakage probes (logic: heuresis.stages.leakage)."""

from pathlib import Path

import pandas as pd

from heuresis.artifacts.io import read_table
from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import save_figure
from heuresis.artifacts.schemas import LEAKAGE
from heuresis.stages.leakage import figure1a

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
frames = [read_table(p, LEAKAGE).to_pandas() for p in sm.input]
results = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LEAKAGE.schema.names)
fig, numbers = figure1a(results, list(sm.params.agents), list(sm.params.networks))
prov = provenance_record(stage="targets", config={"agents": list(sm.params.agents), "networks": list(sm.params.networks)},
                         inputs=list(sm.input))
save_figure(fig, Path(sm.output.pdf).with_suffix(""), provenance={**prov, "numbers": numbers.to_dict("records")})
log("figure1a: " + (f"{len(results)} probes of {len(sm.params.agents)} agents" if len(sm.params.agents)
                    else "no LLM agent configured (leakage.agents is empty); the figure says so"))
