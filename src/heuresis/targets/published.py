"""The paper's published numbers: Table 2 beside ours (target ``table2_paper``), Table 13 on the leaderboard.

``heuresis/data/table2_published.yaml`` holds the published numbers per family (PC-KCI's
wrongly deleted true edges per instance, the share of instances with none, the oracle's
adjacency-F1 gain over PC-KCI) and their source. :func:`load_published_table2` validates the
file (errors name the offending key); :func:`table2_vs_paper` puts them beside the numbers of
our Table 2 (the Parquet written by the rule ``table2``), one row per family with the
differences ours − paper, so a run at paper scale shows where the generator's families differ
from the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

__all__ = [
    "PAPER_SCALE",
    "PUBLISHED13_FIELDS",
    "PUBLISHED_FIELDS",
    "causalgame_leaderboard_path",
    "load_causalgame_leaderboard",
    "load_published_table2",
    "load_published_table13",
    "published_table2_path",
    "published_table13_path",
    "scale_note",
    "table2_vs_paper",
]

#: The paper's scale: dev instances per family (selection) and test instances per family (every reported number).
PAPER_SCALE = {"n_dev": 100, "n_test": 32}


def scale_note(n_dev: int, n_test: int) -> str:
    """A caption's warning when a run is smaller than the paper's: its counts, the paper's, how to read it ('' if not)."""
    if n_dev >= PAPER_SCALE["n_dev"] and n_test >= PAPER_SCALE["n_test"]:
        return ""
    return (f"Small run: the selection rests on {n_dev} dev and the intervals on {n_test} test instances per family "
            f"(the paper: {PAPER_SCALE['n_dev']} and {PAPER_SCALE['n_test']}); its numbers check the pipeline, "
            "they do not estimate the paper's.")


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


PUBLISHED13_FIELDS = ("model", "settings", "family", "repeat", "last_turn", "wall", "rescued", "finished", "f1_all",
                      "dr_all", "dr_all_lo", "dr_all_hi", "f1_finished", "dr_finished", "dr_finished_lo",
                      "dr_finished_hi")


def published_table13_path() -> Path:
    """The bundled data file of the paper's Table 13 (``heuresis/data/table13_published.yaml``)."""
    return Path(str(resources.files("heuresis").joinpath("data/table13_published.yaml")))


def load_published_table13(path: str | Path | None = None) -> dict:
    """Read and check the published Table 13; a bad row raises ValueError naming its position and field."""
    path = Path(path) if path is not None else published_table13_path()
    data = yaml.safe_load(Path(path).read_text()) or {}
    errors = []
    if not isinstance(data.get("source"), str) or not data["source"].strip():
        errors.append("source: missing (where the published numbers come from)")
    rows = data.get("rows")
    if not isinstance(rows, list):
        rows = []
    if not rows:
        errors.append("rows: missing or empty")
    for k, r in enumerate(rows):
        if not isinstance(r, Mapping) or set(r) != set(PUBLISHED13_FIELDS):
            errors.append(f"rows[{k}]: expected fields {list(PUBLISHED13_FIELDS)}")
            continue
        for f in PUBLISHED13_FIELDS[5:]:
            if isinstance(r[f], bool) or not isinstance(r[f], (int, float)) or not math.isfinite(r[f]):
                errors.append(f"rows[{k}].{f}: {r[f]!r} is not a number")
    if errors:
        raise ValueError(f"published Table 13 data file {path}:\n  " + "\n  ".join(errors))
    return {"source": data["source"], "instances_per_family": int(data.get("instances_per_family") or 0),
            "rows": [dict(r) for r in rows]}


def causalgame_leaderboard_path() -> Path:
    """The bundled data file of CausalGame's published leaderboard (``heuresis/data/causalgame_leaderboard.yaml``)."""
    return Path(str(resources.files("heuresis").joinpath("data/causalgame_leaderboard.yaml")))


def load_causalgame_leaderboard(path: str | Path | None = None) -> dict:
    """CausalGame's published leaderboard: ``source``, ``setting`` and its ``rows`` (models, then baselines).

    Each row: ``model``, ``kind`` (model or baseline), ``survival`` (a fraction; null for a baseline
    published only as a range), ``lo``/``hi`` (95% t-interval over 3 trials; null where none is
    published) and ``trials``.  A bad row raises ValueError naming its position.
    """
    path = Path(path) if path is not None else causalgame_leaderboard_path()
    data = yaml.safe_load(Path(path).read_text()) or {}
    rows = data.get("rows")
    errors = [] if isinstance(data.get("source"), str) and data["source"].strip() else ["source: missing"]
    if not isinstance(rows, list) or not rows:
        errors.append("rows: missing or empty")
        rows = []
    for k, r in enumerate(rows):
        if not isinstance(r, Mapping) or not isinstance(r.get("model"), str) or r.get("kind") not in ("model", "baseline"):
            errors.append(f"rows[{k}]: needs a model name and kind model or baseline")
            continue
        for f in ("survival", "lo", "hi"):
            v = r.get(f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1.5):
                errors.append(f"rows[{k}].{f}: {v!r} is not a survival rate")
    if errors:
        raise ValueError(f"CausalGame leaderboard data file {path}:\n  " + "\n  ".join(errors))
    return {"source": data["source"], "setting": str(data.get("setting", "")), "rows": [dict(r) for r in rows]}
