"""Snakemake adapter for Table 5 (logic: heuresis.stages.verification.tables, heuresis.artifacts.report).

Collects the check records into ``checks.parquet`` and Table 5, then exits non-zero if a check in
``verification.required`` failed; the Markdown table is also written to the log, because
Snakemake removes a failed job's outputs (``--keep-incomplete`` keeps them).
"""

import sys
from pathlib import Path

from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.report import to_markdown, write_paper_table
from heuresis.stages import verification as V

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
started = utc_now()
checks = V.read_checks(sm.input.records)
numbers, display, highlight, failed = V.table5(checks, sm.params.required)
prov = provenance_record(stage="verification", config={"required": list(sm.params.required),
                                                      "scale": sm.params.scale},
                         inputs=sm.input.records, started=started)
V.write_checks_table(numbers, sm.output.checks, {PROVENANCE_KEY: dumps(prov)})
caption = (f"Table 5. Instrument verification ({sm.params.scale} scale): each check against an "
           f"independent truth; disagreements are counted over all cases.")
write_paper_table(numbers, display, Path(sm.output.parquet).with_suffix(""), caption=caption,
                  provenance=prov, highlight=highlight)
log("\n" + to_markdown(display, caption, highlight))
if failed:
    log(f"required check(s) failed: {', '.join(failed)}; examples under results/verification/examples/; "
        "Snakemake removes the failed job's outputs (the table is above; --keep-incomplete keeps them)")
    sys.exit(1)
log(f"{len(numbers)} checks, {int((~numbers['passed']).sum())} failing (none required)")
