"""Writing paper tables (Parquet + Markdown + LaTeX) and figures (PDF + PNG) with provenance.

A table target is a DataFrame of numbers plus a display frame of formatted strings; the numbers
go to Parquet (with provenance metadata), the display frame to Markdown and LaTeX.  A figure is
saved as PDF and PNG with a JSON provenance sidecar.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from heuresis.provenance import PROVENANCE_KEY, dumps

__all__ = ["atomic_write_text", "save_figure", "to_latex", "to_markdown", "write_paper_table"]


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


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
                      provenance: Mapping, highlight: Sequence[bool] | None = None) -> None:
    """Write ``stem.parquet`` (numbers), ``stem.md`` and ``stem.tex`` (display).

    ``highlight`` flags display rows to stand out (bold in Markdown, red in LaTeX), e.g. failing
    checks of Table 5.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(numbers, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PROVENANCE_KEY.encode()] = dumps(provenance).encode()
    meta[b"heuresis.caption"] = caption.encode()
    table = table.replace_schema_metadata(meta)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem.name}.", suffix=".tmp", dir=stem.parent)
    os.close(fd)
    pq.write_table(table, tmp)
    os.replace(tmp, stem.with_suffix(".parquet"))
    atomic_write_text(stem.with_suffix(".md"), to_markdown(display, caption, highlight))
    atomic_write_text(stem.with_suffix(".tex"), to_latex(display, caption, label=f"tab:{stem.name}",
                                                         highlight=highlight))


def save_figure(fig, stem: str | Path, *, provenance: Mapping) -> None:
    """Save ``fig`` as ``stem.pdf`` and ``stem.png`` (atomically) with ``stem.provenance.json``."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    for ext in ("pdf", "png"):
        fd, tmp = tempfile.mkstemp(prefix=f".{stem.name}.", suffix=f".{ext}", dir=stem.parent)
        os.close(fd)
        fig.savefig(tmp, format=ext, dpi=200, bbox_inches="tight")
        os.replace(tmp, stem.with_suffix(f".{ext}"))
    atomic_write_text(stem.with_suffix(".provenance.json"), json.dumps(provenance, indent=2, sort_keys=True,
                                                                       default=str))
