"""Snakemake adapter: one judge scores the reports of one agent x mode on one scenario (logic: heuresis.stages.games.workflow)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.stages.games.workflow import run_judgements

sm = snakemake  # noqa: F821  (injected by Snakemake)
# the judge's full entry: the params hold it without its transport settings (heuresis.harness.agent_spec)
run_judgements(sm.wildcards.judge, sm.config["agents"][sm.wildcards.judge], sm.wildcards.agent, sm.wildcards.mode,
               [sm.input.plays], [sm.input.references], sm.params.folder, sm.output.judgements, max_tokens=sm.params.max_tokens,
               requests_out=sm.output.requests, agent_spec=sm.config["agents"][sm.wildcards.agent],
               own_family=bool(sm.config["games"].get("judge_own_family")),
               log=stage_logger(sm.log[0]), attempt=sm.params.attempt, protocols=list(sm.params.protocols))
