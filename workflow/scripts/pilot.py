"""Snakemake adapter: one LLM agent's pilot episodes (logic: heuresis.stages.pilot.run_pilot)."""

from heuresis.agents.spend import SPEND_DIR
from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.sealing import run_salt
from heuresis.stages.pilot import run_pilot

sm = snakemake  # noqa: F821  (injected by Snakemake)
# the agent's full entry: the params hold it without its transport settings (heuresis.harness.agent_spec)
run_pilot(sm.wildcards.agent, sm.config["agents"][sm.wildcards.agent], sm.params.plan, sm.config, int(sm.wildcards.k),
          out=sm.output[0], spend_dir=SPEND_DIR, salt=run_salt(sm.params.salt, sm.input.salt),
          log=stage_logger(sm.log[0]))
