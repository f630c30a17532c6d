"""Table 1: existing benchmarks against the design requirements D1-D4, from a data file.

The table is data, not computation: ``heuresis/data/table1.yaml`` holds the requirements and
one entry per benchmark with a value (``yes``, ``partial``, ``no`` or ``—`` for "not
determined") and an optional note per requirement.  :func:`load_table1` validates the file
(errors name the offending key); :func:`table1` renders it as the numbers/display pair every
paper table uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import pandas as pd
import yaml

__all__ = ["REQUIREMENTS", "VALUES", "load_table1", "table1", "table1_path"]

VALUES = ("yes", "partial", "no", "—")
REQUIREMENTS = ("D1", "D2", "D3", "D4")


def table1_path() -> Path:
    """The bundled data file (``heuresis/data/table1.yaml``)."""
    return Path(str(resources.files("heuresis").joinpath("data/table1.yaml")))


def load_table1(path: str | Path | None = None) -> dict:
    """Read and validate the Table 1 data file; a bad entry raises ``ValueError`` naming its key."""
    path = Path(path) if path is not None else table1_path()
    data = yaml.safe_load(path.read_text())
    errors = []
    reqs = data.get("requirements") or {}
    if tuple(reqs) != REQUIREMENTS:
        errors.append(f"requirements: expected keys {list(REQUIREMENTS)}, got {list(reqs)}")
    for r, spec in reqs.items():
        for field in ("title", "description"):
            if not isinstance((spec or {}).get(field), str):
                errors.append(f"requirements.{r}.{field}: missing")
    benchmarks = data.get("benchmarks") or []
    if not benchmarks:
        errors.append("benchmarks: empty")
    for k, b in enumerate(benchmarks):
        key = f"benchmarks.{k} ({b.get('name', '?')})"
        for field in ("name", "reference", "input"):
            if not isinstance(b.get(field), str):
                errors.append(f"{key}.{field}: missing")
        cells = b.get("cells") or {}
        if set(cells) != set(REQUIREMENTS):
            errors.append(f"{key}.cells: expected {list(REQUIREMENTS)}, got {sorted(cells)}")
        for r, cell in cells.items():
            extra = set(cell or {}) - {"value", "note"}
            if extra:  # e.g. an unquoted note with commas in a YAML flow mapping
                errors.append(f"{key}.cells.{r}: unknown fields {sorted(map(str, extra))} (quote the note)")
            if (cell or {}).get("value") not in VALUES:
                errors.append(f"{key}.cells.{r}.value: {(cell or {}).get('value')!r} is not one of {list(VALUES)}")
    if errors:
        raise ValueError(f"Table 1 data file {path}:\n  " + "\n  ".join(errors))
    return data


def table1(data: Mapping) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Numbers (one row per benchmark: value and note per requirement) and the display frame."""
    reqs = data["requirements"]
    rows, disp = [], []
    for b in data["benchmarks"]:
        row = {"benchmark": b["name"], "reference": b["reference"], "input": b["input"]}
        shown = {"benchmark": f"{b['name']} ({b['reference']})" if b["reference"] else b["name"]}
        for r in REQUIREMENTS:
            cell = b["cells"][r]
            row[r] = cell["value"]
            row[f"{r}_note"] = cell.get("note", "")
            shown[f"{r} {reqs[r]['title']}"] = cell["value"] + (f" ({cell['note']})" if cell.get("note") else "")
        rows.append(row)
        disp.append(shown)
    return pd.DataFrame(rows), pd.DataFrame(disp)
