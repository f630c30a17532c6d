"""A run's results as the view reads them: episodes, their scores, references and truth, game plays.

Artifacts are found by the schema their Parquet metadata names (:data:`~heuresis.artifacts.schemas.EPISODES`,
:data:`~heuresis.artifacts.schemas.GAME_PLAYS`, ...), wherever they sit under the results folder, and read
with :func:`heuresis.artifacts.io.read_table`, which refuses a damaged or other-version file; such a file is
listed on the index as a problem instead of stopping the view. Nothing is written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from heuresis.artifacts.io import ArtifactError, read_metadata, read_table
from heuresis.artifacts.schemas import (
    EPISODE_SCORES,
    EPISODES,
    GAME_JUDGEMENTS,
    GAME_PLAYS,
    GAME_REFERENCES,
    REFERENCES,
    SCHEMA_KEY,
)

__all__ = ["Run"]

_SCHEMAS = {s.name: s for s in (EPISODES, EPISODE_SCORES, GAME_PLAYS, GAME_JUDGEMENTS, GAME_REFERENCES, REFERENCES)}
#: the run's files the index links to (tables and figures), by folder and suffix
RUN_FILES = {"tables": (".md", ".tex", ".csv", ".txt"), "figures": (".png", ".pdf", ".svg")}


@dataclass
class Run:
    """The results folder of one run, read lazily and once per table kind."""

    results: Path
    problems: list[str] = field(default_factory=list)   # artifacts that could not be read, with why

    def __post_init__(self) -> None:
        self.results = Path(self.results)
        if not self.results.is_dir():
            raise FileNotFoundError(f"no results folder {self.results}")

    # --- artifacts by schema -------------------------------------------------------------------
    @cached_property
    def _by_schema(self) -> dict[str, list[Path]]:
        out: dict[str, list[Path]] = {}
        for p in sorted(self.results.rglob("*.parquet")):
            if not p.is_file() or "benchmarks" in p.relative_to(self.results).parts:
                continue
            try:
                name = read_metadata(p).get(SCHEMA_KEY.decode())
            except ArtifactError as exc:
                self.problems.append(str(exc))
                continue
            if name in _SCHEMAS:
                out.setdefault(name, []).append(p)
        return out

    def _rows(self, schema_name: str) -> list[dict]:
        rows = []  # type: ignore[var-annotated]
        for p in self._by_schema.get(schema_name, []):
            try:
                table = read_table(p, _SCHEMAS[schema_name])
            except ArtifactError as exc:
                self.problems.append(str(exc))
                continue
            rows.extend({**r, "_file": p} for r in table.to_pylist())
        return rows

    @cached_property
    def episodes(self) -> dict[str, dict]:
        """Every episode row by ``episode_id`` (the first file holding an id wins; a duplicate is a problem)."""
        out: dict[str, dict] = {}
        for r in self._rows(EPISODES.name):
            if r["episode_id"] in out:
                self.problems.append(f"episode {r['episode_id']} is in two files: {out[r['episode_id']]['_file']} "
                                     f"(shown) and {r['_file']}")
                continue
            out[r["episode_id"]] = r
        return out

    @cached_property
    def scores(self) -> dict[str, dict]:
        """The analysis's per-episode scores by ``episode_id`` (empty before the analysis stage ran)."""
        return {r["episode_id"]: r for r in self._rows(EPISODE_SCORES.name)}

    @cached_property
    def plays(self) -> dict[str, dict]:
        """Every game play row by ``play_id``."""
        return {r["play_id"]: r for r in self._rows(GAME_PLAYS.name)}

    @cached_property
    def judgements(self) -> dict[str, list[dict]]:
        """Judgements by ``play_id``, each judge's row."""
        out: dict[str, list[dict]] = {}
        for r in self._rows(GAME_JUDGEMENTS.name):
            out.setdefault(r["play_id"], []).append(r)
        return out

    @cached_property
    def game_references(self) -> dict[str, dict]:
        """Each scenario's optimum, trap, standard and threshold."""
        return {r["scenario"]: r for r in self._rows(GAME_REFERENCES.name)}

    def pc_kci(self, family: str, split: str, instance: int) -> dict | None:
        """PC-KCI's references row of an instance (its output and deletion log), or None."""
        return self._pc_kci_rows(family, split).get(instance)

    def _pc_kci_rows(self, family: str, split: str) -> dict[int, dict]:
        cache = self.__dict__.setdefault("_pc_cache", {})
        if (family, split) not in cache:
            rows: dict[int, dict] = {}
            for p in sorted((self.results / "references" / "pc_kci" / family / split).glob("shard-*.parquet")):
                try:
                    rows.update({r["instance"]: r for r in read_table(p, REFERENCES).to_pylist()})
                except ArtifactError as exc:
                    self.problems.append(str(exc))
            cache[(family, split)] = rows
        return cache[(family, split)]

    def truth(self, family: str, split: str, instance: int):
        """The hidden truth of an instance (:class:`heuresis.stages.instances.Truth`), or None when absent."""
        from heuresis.stages.instances import load_truth

        cache = self.__dict__.setdefault("_truth_cache", {})
        if (family, split) not in cache:
            try:
                cache[(family, split)] = load_truth(self.results / "truth" / family / split)
            except ArtifactError as exc:
                self.problems.append(str(exc))
                cache[(family, split)] = {}
        return cache[(family, split)].get(instance)

    # --- paths ---------------------------------------------------------------------------------
    def transcript_path(self, row: Mapping, kind: str = "episode") -> Path:
        """Where a row's transcript is: the path it records (relative to the run folder), else the layout's."""
        rec = row.get("transcript") or ""
        if rec:
            p = Path(rec)
            for cand in ([p] if p.is_absolute() else [self.results.parent / p, self.results / p]):
                if cand.is_file():
                    return cand
        if kind == "episode":
            return (self.results / "transcripts" / row["agent"] / row["condition_id"] / row["family"] / row["split"]
                    / f"{int(row['instance']):04d}.json")
        return (self.results / "games" / "transcripts" / row["agent"] / row["mode"] / row["scenario"]
                / f"r{int(row['repeat'])}.json")

    def artifact(self, path: Path) -> str:
        """A path as the run names it (relative to the run folder's parent, as the workflow writes it)."""
        try:
            return str(Path(path).resolve().relative_to(self.results.resolve().parent))
        except ValueError:
            return str(path)

    @cached_property
    def run_files(self) -> list[str]:
        """The run's tables and figures (paths relative to the results folder), for the index's links."""
        out = []  # type: ignore[var-annotated]
        for folder, suffixes in RUN_FILES.items():
            base = self.results / folder
            if base.is_dir():
                out.extend(str(p.relative_to(self.results)) for p in sorted(base.rglob("*"))
                           if p.is_file() and p.suffix in suffixes)
        return out


def number(value) -> float | None:
    """A finite float, else None (NaN, None and non-numbers alike)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def loads(text, default):
    """JSON of a string column, or ``default`` when empty or unreadable."""
    if not text:
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default

