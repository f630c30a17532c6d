"""Finding truncated or corrupt artifacts so that a rerun rebuilds them instead of reading them.

Snakemake decides what to rerun from file existence, modification times and recorded job
metadata, not from file contents: a Parquet file truncated or overwritten after its job finished
looks up to date.  Readers refuse such a file (:func:`heuresis.artifacts.io.read_table` raises
:class:`~heuresis.artifacts.io.ArtifactError` naming it), so the damage is never read into a number;
:func:`scan` finds every such file under a results folder and :func:`remove_damaged` deletes the
Snakemake output that holds it, so that the next ``snakemake`` run rebuilds exactly that.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from heuresis.artifacts.provenance import file_sha256

__all__ = ["Damage", "remove_damaged", "scan"]


@dataclass(frozen=True)
class Damage:
    """A damaged file found by :func:`scan`: its path and what is wrong with it."""

    path: Path
    reason: str

    @property
    def output(self) -> Path:
        """The Snakemake output to delete: an instance split is one folder output."""
        for parent in self.path.parents:
            if (parent / "index.parquet").exists() and parent.parent.parent.name == "instances":
                return parent
        if self.path.name == "index.parquet" and self.path.parent.parent.parent.name == "instances":
            return self.path.parent
        return self.path


def _check_parquet(path: Path) -> str | None:
    try:
        pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        return f"unreadable Parquet: {exc}"
    return None


def scan(results: str | Path) -> list[Damage]:
    """List the damaged files under ``results``.

    A file is damaged when it is a Parquet file that cannot be read in full, or an instance data
    file whose SHA-256 differs from the one its split's index recorded.
    """
    results = Path(results)
    damaged: list[Damage] = []
    for path in sorted(results.rglob("*.parquet")):
        if ".parts" in path.parent.name or path.name.startswith("."):
            continue
        reason = _check_parquet(path)
        if reason:
            damaged.append(Damage(path, reason))
    for index in sorted(results.rglob("instances/*/*/index.parquet")):
        if _check_parquet(index):
            continue
        for row in pq.read_table(index, columns=["path", "data_sha256"]).to_pylist():
            data = index.parent / row["path"]
            if not data.exists():
                damaged.append(Damage(data, "missing (listed in its split's index)"))
            elif not any(d.path == data for d in damaged) and file_sha256(data) != row["data_sha256"]:
                damaged.append(Damage(data, "SHA-256 differs from the one in its split's index"))
    return damaged


def remove_damaged(damaged: list[Damage]) -> list[Path]:
    """Delete the Snakemake outputs holding damaged files; returns what was removed."""
    removed: list[Path] = []
    for d in damaged:
        out = d.output
        if out in removed or not out.exists():
            continue
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink()
        removed.append(out)
    return removed
