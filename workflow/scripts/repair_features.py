"""Snakemake adapter: scripted-repair signals of one PC-KCI references shard (logic: heuresis.stages.repairs)."""

from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.stages.instances import stable_key
from heuresis.stages.repairs import build_features, write_features

sm = snakemake  # noqa: F821  (injected by Snakemake)
started = utc_now()
w, settings = sm.wildcards, sm.params.settings
df = build_features(sm.input.ref, sm.input.data, Path(sm.input.truth).parent, w.family, w.split, settings,
                    log=stage_logger(sm.log[0]))
prov = provenance_record(stage="repairs", config=dict(settings),
                         seeds={"entropy": settings["seed"],
                                "spawn_key": [stable_key(w.family), stable_key(w.split), "index"]},
                         inputs=[sm.input.ref, sm.input.truth, Path(sm.input.data) / "index.parquet"],
                         started=started)
write_features(df, sm.output[0], {PROVENANCE_KEY: dumps(prov)})
