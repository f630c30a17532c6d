"""Snakemake adapter for one episode job: an agent under one condition on a shard of instances."""

from pathlib import Path

from heuresis.agents.spend import SPEND_DIR
from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.sealing import run_salt
from heuresis.stages.episodes import run_episode_shard

sm = snakemake  # noqa: F821  (injected by Snakemake)
run_episode_shard(
    sm.wildcards.agent,
    sm.config["agents"][sm.wildcards.agent],   # the full entry: params hold it without its transport settings
    sm.wildcards.condition_id,
    sm.wildcards.family,
    sm.wildcards.split,
    sm.params.indices,
    data_dir=sm.input.data,
    truth_dir=Path(sm.input.truth).parent,
    pc_kci_paths=list(sm.input.pc_kci),
    episodes_cfg=sm.params.episodes,
    menu=sm.params.menu,
    grades=sm.params.grades,
    seed=sm.params.seed,
    out=sm.output.episodes,
    calls_out=sm.output.calls,
    requests_out=sm.output.requests,
    transcripts_dir=sm.params.transcripts,
    log=stage_logger(sm.log[0]),
    attempt=sm.params.attempt,
    spend_dir=SPEND_DIR,
    salt=run_salt(sm.params.salt, sm.input.salt),
)
