"""Snakemake adapter: the leakage probe of one LLM agent on one network (logic: heuresis.stages.leakage)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.stages.leakage import run_leakage

sm = snakemake  # noqa: F821  (injected by Snakemake)
# the agent's full entry: the params hold it without its transport settings (heuresis.harness.agent_spec)
run_leakage(sm.wildcards.agent, sm.config["agents"][sm.wildcards.agent], [sm.wildcards.network], sm.params.repeats,
            sm.params.seed, sm.output[0], log=stage_logger(sm.log[0]), attempt=sm.params.attempt)
