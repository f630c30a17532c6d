"""Table 5: the check records read together, written as ``checks.parquet`` and laid out as the table.

Rows are in registry order (:data:`~heuresis.stages.verification.base.CHECKS`); a failing row is
highlighted, and the failing checks that the config requires are named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from heuresis.stages.verification.base import CHECKS

__all__ = ["read_checks", "table5", "write_checks_table"]


def write_checks_table(checks, path: str | Path, meta: Mapping[str, str] | None = None) -> None:
    """Write all check records (with ``required`` set) as ``checks.parquet``."""
    import pyarrow as pa

    from heuresis.artifacts.io import write_table
    from heuresis.artifacts.schemas import VERIFICATION_CHECKS

    cols = VERIFICATION_CHECKS.schema.names
    table = pa.Table.from_pandas(checks[cols], schema=VERIFICATION_CHECKS.schema, preserve_index=False)
    write_table(table, path, VERIFICATION_CHECKS, meta)


def read_checks(paths: Sequence[str | Path]):
    """The records of several checks as one DataFrame, in registry order."""
    import pandas as pd

    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import VERIFICATION_CHECKS

    df = pd.concat([read_table(p, VERIFICATION_CHECKS).to_pandas() for p in paths], ignore_index=True)
    rank = {name: k for k, name in enumerate(CHECKS)}
    return df.sort_values("check", key=lambda s: s.map(rank)).reset_index(drop=True)


def table5(checks, required: Sequence[str]):
    """Table 5 from the check records: ``(numbers, display, highlight, failed_required)``.

    ``highlight`` marks failing rows (red in LaTeX); ``failed_required`` names the failing checks
    that the config requires to pass.
    """
    import pandas as pd

    required = set(required)  # type: ignore[assignment]
    numbers = checks.copy()
    numbers["required"] = numbers["check"].isin(required).astype(bool)

    def verdict(row) -> str:
        if row.passed:
            return "pass"
        return "FAIL" if row.required else "FAIL (not required)"

    display = pd.DataFrame({
        "Check": numbers["title"],
        "Reference": numbers["reference"],
        "Scale": [f"{r.scale}: {r.scale_description}" for r in numbers.itertuples()],
        "Cases": numbers["n_cases"].map(lambda v: f"{v:,}"),
        "Disagreements": numbers["disagreements"].map(lambda v: f"{v:,}"),
        "Tolerance": numbers["tolerance"],
        "Finding": numbers["finding"],
        "Result": [verdict(r) for r in numbers.itertuples()],
    })
    highlight = (~numbers["passed"]).tolist()
    failed_required = numbers.loc[~numbers["passed"] & numbers["required"], "check"].tolist()
    return numbers, display, highlight, failed_required
