"""Parquet schemas of every artifact, written once and used by writer and reader alike.

Each artifact kind is a :class:`ArtifactSchema` with a name, a pyarrow schema and a one-line
description per column (rendered into README/docs).  :func:`write_table` writes atomically
(temporary file in the same directory, then ``os.replace``) and stamps the schema name and
version into the Parquet key/value metadata; :func:`read_table` checks both and the columns,
and refuses a truncated or foreign file with an error naming the path.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "ArtifactSchema",
    "ArtifactError",
    "data_schema",
    "INSTANCE_INDEX",
    "TRUTH_GRAPHS",
    "TRUTH_NODES",
    "REFERENCES",
    "DELETION",
    "HEADROOM_SELECTION",
    "HEADROOM_SCORES",
    "write_table",
    "read_table",
    "read_metadata",
]

SCHEMA_KEY = b"heuresis.schema"
VERSION_KEY = b"heuresis.schema_version"


class ArtifactError(RuntimeError):
    """An artifact that is missing, truncated, or not of the expected schema."""


@dataclass(frozen=True)
class ArtifactSchema:
    name: str
    version: int
    schema: pa.Schema
    doc: Mapping[str, str]

    def __post_init__(self) -> None:
        missing = set(self.schema.names) ^ set(self.doc)
        if missing:
            raise ValueError(f"schema {self.name!r}: columns and docs differ on {sorted(missing)}")


def _schema(name: str, version: int, cols: list[tuple[str, pa.DataType, str]]) -> ArtifactSchema:
    return ArtifactSchema(name, version, pa.schema([pa.field(c, t, nullable=True) for c, t, _ in cols]),
                          {c: doc for c, _, doc in cols})


def data_schema(d: int) -> ArtifactSchema:
    """Agent-visible data of one instance: columns X1..Xd, standardized, float64."""
    return _schema("instance_data", 1, [(f"X{k + 1}", pa.float64(), "standardized observation")
                                        for k in range(d)])


INSTANCE_INDEX = _schema("instance_index", 1, [
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("instance_id", pa.string(), "family/split/index, unique over the benchmark"),
    ("path", pa.string(), "data file, relative to the index file's folder"),
    ("n", pa.int32(), "rows"),
    ("d", pa.int32(), "columns"),
    ("data_sha256", pa.string(), "SHA-256 of the data file's bytes"),
])

TRUTH_GRAPHS = _schema("truth_graphs", 1, [
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("instance_id", pa.string(), "family/split/index"),
    ("seed_entropy", pa.uint64(), "numpy SeedSequence entropy (the global seed)"),
    ("seed_spawn_key", pa.list_(pa.uint64()), "SeedSequence spawn key (family key, split key, index)"),
    ("prior", pa.string(), "random-graph prior drawn (er or ba)"),
    ("d", pa.int32(), "nodes"),
    ("n", pa.int32(), "rows"),
    ("n_edges", pa.int32(), "edges of the true DAG"),
    ("dag", pa.list_(pa.int8()), "true DAG over X1..Xd, row-major d*d, 1 at [i, j] for Xi -> Xj"),
    ("cpdag", pa.list_(pa.int8()), "true CPDAG mark matrix, row-major (both marks = undirected)"),
    ("causal_order", pa.list_(pa.string()), "the causal order the DAG was drawn over"),
    ("var_sortability_raw", pa.float64(), "var-sortability before standardization"),
    ("var_sortability", pa.float64(), "var-sortability of the stored (standardized) data"),
    ("r2_sortability", pa.float64(), "R^2-sortability of the stored data (Reisach et al. 2023)"),
    ("data_sha256", pa.string(), "SHA-256 of the agent-visible data file"),
])

TRUTH_NODES = _schema("truth_nodes", 1, [
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("node", pa.string(), "column name X1..Xd"),
    ("causal_rank", pa.int32(), "position in the causal order"),
    ("kind", pa.string(), "mechanism kind, or 'root'"),
    ("parents", pa.list_(pa.string()), "parent columns"),
    ("noise_scale", pa.float64(), "sigma (null for input-dependent noise kinds)"),
    ("standardize_output", pa.bool_(), "whether the map output was standardized before noise"),
    ("params", pa.string(), "JSON of every drawn mechanism parameter"),
])

DELETION = pa.struct([
    pa.field("x", pa.string()), pa.field("y", pa.string()), pa.field("sepset", pa.list_(pa.string())),
    pa.field("test", pa.string()), pa.field("pvalue", pa.float64()), pa.field("level", pa.int32()),
    pa.field("grade", pa.string()), pa.field("wrong", pa.bool_()),
])

REFERENCES = _schema("references", 1, [
    ("algorithm", pa.string(), "menu algorithm or baseline name"),
    ("family", pa.string(), "mechanism family"),
    ("split", pa.string(), "dev or test"),
    ("instance", pa.int32(), "instance index within family and split"),
    ("instance_id", pa.string(), "family/split/index"),
    ("status", pa.string(), "ok, or failed (then the graph is empty and error says why)"),
    ("error", pa.string(), "error message of a failed run"),
    ("graph", pa.list_(pa.int8()), "output mark matrix over X1..Xd, row-major"),
    ("edges", pa.string(), "output edges as 'Xi -> Xj' / 'Xi -- Xj', '; '-separated"),
    ("runtime_s", pa.float64(), "wall time of the run in seconds"),
    ("n_tests", pa.int32(), "CI tests run (0 for score-based and functional methods)"),
    ("f1", pa.float64(), "adjacency F1 against the true skeleton"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("shd", pa.int32(), "SHD against the true CPDAG after Meek completion"),
    ("nshd", pa.float64(), "SHD / (d(d-1)/2)"),
    ("n_edges", pa.int32(), "edges in the output"),
    ("details", pa.string(), "JSON of algorithm parameters and method-specific output"),
    ("deletions", pa.list_(DELETION), "PC variants: the deletion log with the hidden wrong label"),
])

HEADROOM_SELECTION = _schema("headroom_selection", 1, [
    ("scope", pa.string(), "a family (BCA_f) or 'all' (BCA_g)"),
    ("algorithm", pa.string(), "menu algorithm"),
    ("dev_f1", pa.float64(), "mean adjacency F1 over the scope's dev instances"),
    ("dev_n", pa.int64(), "dev instances in the mean"),
    ("chosen", pa.bool_(), "the scope's best chosen algorithm"),
])

HEADROOM_SCORES = _schema("headroom_scores", 1, [
    ("family", pa.string(), "mechanism family"),
    ("instance", pa.int64(), "test instance index"),
    ("method", pa.string(), "menu algorithm, baseline, bca_g, bca_f, oracle, empty, complete or random_restoration"),
    ("algorithm", pa.string(), "algorithm behind the method (bca_*: the chosen one; oracle: pc_kci)"),
    ("f1", pa.float64(), "adjacency F1 (random_restoration: mean over draws)"),
    ("precision", pa.float64(), "adjacency precision"),
    ("recall", pa.float64(), "adjacency recall"),
    ("shd", pa.float64(), "SHD against the true CPDAG after Meek completion"),
    ("nshd", pa.float64(), "SHD / (d(d-1)/2)"),
    ("n_deletions", pa.float64(), "PC-KCI deletions on the instance (pc_kci, oracle, random_restoration rows)"),
    ("n_wrong_deletions", pa.float64(), "PC-KCI wrong deletions (same rows)"),
])


def _encode_metadata(meta: Mapping[str, object] | None) -> dict[bytes, bytes]:
    out = {}
    for k, v in (meta or {}).items():
        out[k.encode()] = (v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)).encode()
    return out


def write_table(table: pa.Table | Mapping[str, list], path: str | Path, schema: ArtifactSchema,
                metadata: Mapping[str, object] | None = None) -> Path:
    """Write ``table`` as Parquet under ``schema``, atomically.

    The file appears under its final name only when complete, so a killed job never leaves a
    truncated artifact behind.
    """
    path = Path(path)
    if not isinstance(table, pa.Table):
        table = pa.table(dict(table), schema=schema.schema)
    else:
        table = table.select(schema.schema.names).cast(schema.schema)
    meta = dict(table.schema.metadata or {})
    meta.update(_encode_metadata(metadata))
    meta[SCHEMA_KEY] = schema.name.encode()
    meta[VERSION_KEY] = str(schema.version).encode()
    table = table.replace_schema_metadata(meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_metadata(path: str | Path) -> dict[str, str]:
    """The Parquet key/value metadata of an artifact, decoded."""
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise ArtifactError(f"cannot read artifact {path}: {exc}") from exc
    return {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW:")}


def read_table(path: str | Path, schema: ArtifactSchema) -> pa.Table:
    """Read an artifact and check that it is a complete file of the expected schema."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"artifact {path} does not exist")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise ArtifactError(f"artifact {path} is truncated or corrupt: {exc}") from exc
    meta = table.schema.metadata or {}
    found = meta.get(SCHEMA_KEY, b"").decode()
    if found != schema.name:
        raise ArtifactError(f"artifact {path} holds schema {found!r}, expected {schema.name!r}")
    version = int(meta.get(VERSION_KEY, b"0"))
    if version != schema.version:
        raise ArtifactError(f"artifact {path} has {schema.name} version {version}, expected {schema.version}")
    if table.schema.names != schema.schema.names:
        raise ArtifactError(f"artifact {path}: columns {table.schema.names} differ from {schema.schema.names}")
    return table
