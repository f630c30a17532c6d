"""Snakemake adapter: run one instrument-verification check (logic: heuresis.stages.verification)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.stages import verification as V

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
started = utc_now()
check = sm.wildcards.check
settings = sm.params.settings
log(f"{check}: scale {settings['scale']}, sizes {settings['sizes']}, {sm.threads} worker(s)")
result = V.run_check(check, settings, workers=sm.threads, log=log)
prov = provenance_record(stage="verification", config=settings, seeds={"verification": settings["seed"]},
                         started=started)
V.write_check(result, sm.output.record, sm.output.examples, {PROVENANCE_KEY: dumps(prov)})
log(f"{check}: {'pass' if result.passed else 'FAIL'} - {result.n_cases} cases, {result.disagreements} "
    f"disagreements, {len(result.examples)} examples; {result.finding} ({result.runtime_s:.1f} s)")
