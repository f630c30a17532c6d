"""Snakemake adapter: the plays of one agent x mode x scenario (logic: heuresis.stages.games.workflow)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.stages.games.workflow import run_plays

sm = snakemake  # noqa: F821  (injected by Snakemake)
# the agent's full entry: the params hold it without its transport settings (heuresis.harness.agent_spec)
run_plays(sm.wildcards.agent, sm.config["agents"][sm.wildcards.agent], sm.wildcards.mode, sm.wildcards.scenario, sm.params.folder,
          plays=sm.params.plays, seed=sm.params.seed, max_turns=sm.params.max_turns, references=sm.input.references,
          out=sm.output.plays, calls_out=sm.output.calls, requests_out=sm.output.requests, transcripts_dir=sm.params.transcripts,
          log=stage_logger(sm.log[0]), attempt=sm.params.attempt, task_variant=sm.params.task_variant,
          max_tool_calls=sm.params.max_tool_calls, code_tool=dict(sm.params.code_tool),
          protocols=list(sm.params.protocols))
