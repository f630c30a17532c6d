"""Snakemake adapter: the forecast of the run's LLM spend from its pilot (logic: heuresis.stages.pilot)."""

from heuresis.preflight.spend import ceilings
from heuresis.stages.pilot import write_forecast

sm = snakemake  # noqa: F821  (injected by Snakemake)
write_forecast(sm.config, list(sm.input), ceilings(sm.config), sm.output.table, sm.output.text)
