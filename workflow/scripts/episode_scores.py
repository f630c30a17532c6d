"""Snakemake adapter: score every episode (logic: heuresis.stages.analysis.scores)."""

from pathlib import Path

import pandas as pd

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.stages.analysis.scores import load_episodes, load_requests, score_episodes, write_episode_scores
from heuresis.stages.headroom import load_scores
from heuresis.stages.instances import load_truth
from heuresis.stages.references import load_references

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
started = utc_now()
episodes, calls = load_episodes(list(sm.input.episodes))
truths = {tuple(scope): load_truth(Path(p).parent) for scope, p in zip(sm.params.scopes, sm.input.truth, strict=True)}
pc_refs = load_references(list(sm.input.pc_kci)) if sm.input.pc_kci else pd.DataFrame(columns=["family"])
scores = score_episodes(episodes, calls, truths, pc_refs, load_scores(sm.input.headroom), sm.params.menu,
                        load_requests(list(sm.input.episodes)))
inputs = [*sm.input.episodes, *sm.input.calls, *sm.input.pc_kci, *sm.input.truth, sm.input.headroom]
prov = provenance_record(stage="analysis", config={"menu": list(sm.params.menu)}, inputs=inputs, started=started)
write_episode_scores(scores, sm.output.scores, {PROVENANCE_KEY: dumps(prov)})
log(f"episode scores: {len(scores)} episodes of {scores['agent'].nunique() if len(scores) else 0} agents")
