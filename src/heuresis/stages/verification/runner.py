"""Running one check and writing its record and examples.

:func:`run_check` runs a registered check with its settings and times it; :func:`write_check`
writes the one-row record (schema ``VERIFICATION_CHECKS``) and one JSON file per example.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from heuresis.stages.verification.base import CHECKS, CheckResult, Log

__all__ = ["run_check", "write_check"]


def run_check(check: str, settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Run one check with its settings (:func:`~heuresis.stages.verification.settings.check_settings`) and time it."""
    if check not in CHECKS:
        raise ValueError(f"unknown verification check {check!r}; known: {list(CHECKS)}")
    settings = {**settings, "check": check}
    t0 = time.perf_counter()
    result = CHECKS[check].fn(settings, workers=max(1, int(workers)), log=log)
    result.runtime_s = time.perf_counter() - t0
    return result


def write_check(result: CheckResult, record_path: str | Path, examples_dir: str | Path,
                meta: Mapping[str, str] | None = None) -> None:
    """Write the one-row record (schema ``VERIFICATION_CHECKS``) and one JSON file per example."""
    import pyarrow as pa

    from heuresis.artifacts.io import atomic_write_text, write_table
    from heuresis.artifacts.schemas import VERIFICATION_CHECKS

    examples_dir = Path(examples_dir)
    if examples_dir.exists():
        shutil.rmtree(examples_dir)
    examples_dir.mkdir(parents=True)
    for k, example in enumerate(result.examples):
        atomic_write_text(examples_dir / f"{result.check}-{k:03d}.json", json.dumps(example, indent=2, sort_keys=True))
    row = dict(check=result.check, title=result.title, reference=result.reference, scale=result.scale,
               scale_description=result.scale_description, n_cases=result.n_cases,
               disagreements=result.disagreements, passed=result.passed, required=None, tolerance=result.tolerance,
               finding=result.finding, n_examples=len(result.examples), examples_dir=str(examples_dir),
               runtime_s=float(result.runtime_s), details=json.dumps(result.details, sort_keys=True))
    table = pa.table({c: [row[c]] for c in VERIFICATION_CHECKS.schema.names}, schema=VERIFICATION_CHECKS.schema)
    write_table(table, record_path, VERIFICATION_CHECKS, meta)
