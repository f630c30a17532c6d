"""Writing paper tables (Parquet + Markdown + LaTeX) and figures (PDF + PNG) with provenance.

A table target is a DataFrame of numbers plus a display frame of formatted strings; the numbers
go to Parquet (with provenance metadata), the display frame to Markdown and LaTeX.  A figure is
saved as PDF and PNG with a JSON provenance sidecar.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa

from heuresis.artifacts.io import atomic_write, atomic_write_text, write_parquet
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps
from heuresis.artifacts.sealing import disclosure_caption
from heuresis.causal.bootstrap import Interval

__all__ = ["format_interval", "pyplot", "save_figure", "to_latex", "to_markdown", "write_paper_table"]


def _missing(x) -> bool:
    if x is None or x is pd.NA:
        return True
    try:
        return not math.isfinite(float(x))
    except (TypeError, ValueError):
        return True


def format_interval(estimate: Interval | float | None, lo: float | None = None, hi: float | None = None, *,
                    signed: bool = False, percent: bool = False, digits: int | None = None,
                    missing: str = "n/a") -> str:
    """An estimate with its interval as every table shows it: ``0.512 [0.431, 0.590]``.

    Parameters
    ----------
    estimate : Interval or float or None
        The estimate, or an :class:`~heuresis.causal.bootstrap.Interval` (then ``lo`` and ``hi`` are its
        own and must not be given).
    lo, hi : float
        The interval's bounds (with a float ``estimate``).
    signed : bool
        Show the sign of all three numbers (``+0.041 [-0.012, +0.093]``): for differences.
    percent : bool
        Shares in percent (``42% [35%, 50%]``).
    digits : int, optional
        Digits after the point; 3 by default, 0 for percentages.
    missing : str
        The cell's text when there is no estimate (None, NaN, an interval over no units).

    Returns
    -------
    str
        The cell.
    """
    if isinstance(estimate, Interval):
        if lo is not None or hi is not None:
            raise ValueError("format_interval: give an Interval or estimate, lo and hi, not both")
        if estimate.n == 0:
            return missing
        estimate, lo, hi = estimate.estimate, estimate.lo, estimate.hi  # type: ignore[attr-defined]
    if _missing(estimate):
        return missing
    spec = f"{'+' if signed else ''}.{(0 if percent else 3) if digits is None else int(digits)}{'%' if percent else 'f'}"
    return f"{estimate:{spec}} [{lo:{spec}}, {hi:{spec}}]"


def to_markdown(df: pd.DataFrame, caption: str = "", highlight: Sequence[bool] | None = None) -> str:
    """Markdown table; rows flagged in ``highlight`` are set in bold."""
    cols = [str(c) for c in df.columns]
    lines = [f"**{caption}**", ""] if caption else []
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("| " + " | ".join("---" for _ in cols) + " |")
    flags = list(highlight) if highlight is not None else [False] * len(df)
    for row, flag in zip(df.itertuples(index=False), flags):
        cells = [str(v) for v in row]
        if flag:
            cells = [f"**{c}**" if c else c for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(v) -> str:
    s = str(v)
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in s).replace("−", "-").replace("–", "--")


def to_latex(df: pd.DataFrame, caption: str = "", label: str = "", highlight: Sequence[bool] | None = None) -> str:
    """LaTeX table (booktabs); rows flagged in ``highlight`` are set in red (needs ``xcolor``)."""
    cols = list(df.columns)
    out = [r"\begin{table}[t]", r"\centering"]
    if highlight is not None and any(highlight):
        out.insert(0, r"% red rows need \usepackage{xcolor}")
    if caption:
        out.append(rf"\caption{{{_tex(caption)}}}")
    if label:
        out.append(rf"\label{{{label}}}")
    out.append(r"\begin{tabular}{" + "l" * len(cols) + "}")
    out.append(r"\toprule")
    out.append(" & ".join(_tex(c) for c in cols) + r" \\")
    out.append(r"\midrule")
    flags = list(highlight) if highlight is not None else [False] * len(df)
    for row, flag in zip(df.itertuples(index=False), flags):
        cells = [_tex(v) for v in row]
        if flag:
            cells = [rf"\textcolor{{red}}{{{c}}}" for c in cells]
        out.append(" & ".join(cells) + r" \\")
    out.extend([r"\bottomrule", r"\end{tabular}", r"\end{table}"])
    return "\n".join(out) + "\n"


def write_paper_table(numbers: pd.DataFrame, display: pd.DataFrame, stem: str | Path, *, caption: str,
                      provenance: Mapping, highlight: Sequence[bool] | None = None,
                      secrets: Mapping | None = None) -> None:
    """Write ``stem.parquet`` (numbers), ``stem.md`` and ``stem.tex`` (display).

    ``highlight`` flags display rows to stand out (bold in Markdown, red in LaTeX), e.g. failing
    checks of Table 5.  ``secrets``: the run's secrets regime (:func:`heuresis.artifacts.sealing.disclosure`)
    for a table of test results; the caption ends with it (the test seed's commitment, or UNSEALED)
    and the provenance records it.
    """
    if secrets is not None:
        caption = f"{caption} {disclosure_caption(secrets)}"
        provenance = {**provenance, "secrets": dict(secrets)}
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(numbers, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PROVENANCE_KEY.encode()] = dumps(provenance).encode()
    meta[b"heuresis.caption"] = caption.encode()
    table = table.replace_schema_metadata(meta)
    write_parquet(table, stem.with_suffix(".parquet"))
    atomic_write_text(stem.with_suffix(".md"), to_markdown(display, caption, highlight))
    atomic_write_text(stem.with_suffix(".tex"), to_latex(display, caption, label=f"tab:{stem.name}",
                                                         highlight=highlight))


def pyplot():
    """matplotlib's ``pyplot`` on the headless Agg backend, as every figure of the pipeline draws (no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, stem: str | Path, *, provenance: Mapping) -> None:
    """Save ``fig`` as ``stem.pdf`` and ``stem.png`` (atomically) with ``stem.provenance.json``."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    for ext in ("pdf", "png"):
        atomic_write(stem.with_suffix(f".{ext}"), lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=200,  # type: ignore[misc]
                                                                                   bbox_inches="tight"),
                     suffix=f".{ext}")
    atomic_write_text(stem.with_suffix(".provenance.json"), json.dumps(provenance, indent=2, sort_keys=True,
                                                                       default=str))
