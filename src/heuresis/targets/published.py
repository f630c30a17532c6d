"""The paper's published Table 2 beside ours (target ``table2_paper``).

``heuresis/data/table2_published.yaml`` holds the published numbers per family (PC-KCI's
wrongly deleted true edges per instance, the share of instances with none, the oracle's
adjacency-F1 gain over PC-KCI) and their source. :func:`load_published_table2` validates the
file (errors name the offending key); :func:`table2_vs_paper` puts them beside the numbers of
our Table 2 (the Parquet written by the rule ``table2``), one row per family with the
differences ours − paper, so a run at paper scale shows where the generator's families differ
from the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

__all__ = ["PUBLISHED_FIELDS", "load_published_table2", "published_table2_path", "table2_vs_paper"]

#: published field -> column of our Table 2's numbers
PUBLISHED_FIELDS = {
    "wrong_deletions": "wrong_deletions_mean",
    "share_none": "share_without_wrong_deletion",
    "oracle_gain": "oracle_minus_pc_kci",
}


def published_table2_path() -> Path:
    """The bundled data file (``heuresis/data/table2_published.yaml``)."""
    return Path(str(resources.files("heuresis").joinpath("data/table2_published.yaml")))


def load_published_table2(path: str | Path | None = None) -> dict:
    """Read and validate the published Table 2; a bad entry raises ``ValueError`` naming its key."""
    path = Path(path) if path is not None else published_table2_path()
    data = yaml.safe_load(Path(path).read_text()) or {}
    errors = []
    if not isinstance(data.get("source"), str) or not data["source"].strip():
        errors.append("source: missing (where the published numbers come from)")
    fams = data.get("families")
    if not isinstance(fams, Mapping) or not fams:
        errors.append("families: missing or empty")
        fams = {}
    for fam, entry in fams.items():
        entry = entry if isinstance(entry, Mapping) else {}
        if set(entry) != set(PUBLISHED_FIELDS):
            errors.append(f"families.{fam}: expected fields {sorted(PUBLISHED_FIELDS)}, got {sorted(map(str, entry))}")
        for field in PUBLISHED_FIELDS:
            v = entry.get(field)
            if field in entry and (isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v)):
                errors.append(f"families.{fam}.{field}: {v!r} is not a number")
            elif field == "share_none" and field in entry and not 0.0 <= v <= 1.0:  # type: ignore[operator]
                errors.append(f"families.{fam}.share_none: {v!r} is not a share in [0, 1]")
            elif field == "wrong_deletions" and field in entry and v < 0:  # type: ignore[operator]
                errors.append(f"families.{fam}.wrong_deletions: {v!r} is negative")
    if errors:
        raise ValueError(f"published Table 2 data file {path}:\n  " + "\n  ".join(errors))
    return {"source": data["source"], "families": {f: {k: float(v) for k, v in e.items()} for f, e in fams.items()}}


def _fmt(v: float, kind: str, signed: bool = False) -> str:
    """A Table 2 value as shown: shares in percent (differences in points), deletions to 2 digits, F1 to 3."""
    if v is None or not np.isfinite(v):
        return "—"
    sign = "+" if signed else ""
    if kind == "share_none":
        return f"{v * 100:{sign}.0f} pp" if signed else f"{v:.0%}"
    return f"{v:{sign}.{2 if kind == 'wrong_deletions' else 3}f}"


def table2_vs_paper(ours: pd.DataFrame, published: Mapping) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our Table 2 (its numbers frame) beside the published one, per family, with ours − paper.

    Families in our table's order; a family the paper does not report (e.g. a seventh, or
    ``all``) gets empty published cells, and a published family we did not run is listed with
    empty cells of ours.
    """
    missing = [c for c in ("family", "n_instances", *PUBLISHED_FIELDS.values()) if c not in ours.columns]
    if missing:
        raise ValueError(f"our Table 2 lacks columns {missing}; columns: {list(ours.columns)}")
    pub = published["families"]
    ours_by = {r["family"]: r for r in ours.to_dict("records")}
    order = list(ours_by) + [f for f in pub if f not in ours_by]
    rows, disp = [], []
    labels = {"wrong_deletions": "wrong deletions / instance", "share_none": "instances with none",
              "oracle_gain": "oracle − PC-KCI (F1)"}
    for fam in order:
        o, p = ours_by.get(fam), pub.get(fam)
        row = {"family": fam, "n_instances": int(o["n_instances"]) if o is not None else 0}
        d = {"family": fam, "test instances (ours)": row["n_instances"] if o is not None else "—"}
        for field, col in PUBLISHED_FIELDS.items():
            ov = float(o[col]) if o is not None else float("nan")
            pv = float(p[field]) if p is not None else float("nan")
            row[f"{field}_ours"], row[f"{field}_paper"], row[f"{field}_diff"] = ov, pv, ov - pv
            d[f"{labels[field]}: ours"] = _fmt(ov, field)
            d[f"{labels[field]}: paper"] = _fmt(pv, field)
            d[f"{labels[field]}: ours − paper"] = _fmt(ov - pv, field, signed=True)
        rows.append(row)
        disp.append(d)
    return pd.DataFrame(rows), pd.DataFrame(disp)
