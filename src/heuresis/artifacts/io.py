"""Reading and writing artifacts: atomic writes, schema-checked Parquet, resumable checkpoints.

Every file the package writes goes through this module.

* :func:`atomic_write` (and :func:`atomic_write_text`, :func:`atomic_write_bytes`,
  :func:`write_parquet`) writes to a temporary file in the target's folder and renames it onto
  the target (``os.replace``), so a reader sees the old file or the complete new one, never a
  partial one, even when the writer is killed.  A writer that raises leaves the target as it
  was and removes its temporary file; a writer killed outright leaves a hidden temporary
  (``.<name>.*``) beside it, which no reader looks at and the next write of that file removes.
* :func:`write_table` writes an artifact under its :class:`~heuresis.artifacts.schemas.ArtifactSchema`
  (columns cast to the schema, the schema's name and version stamped into the Parquet key/value
  metadata, zstd compression); :func:`read_table` checks name, version and columns and refuses
  a missing, truncated or foreign file with an :class:`ArtifactError` naming the path.
* :class:`Checkpoint` keeps the finished units of a sweep job (a shard of instances, a batch of
  episodes, a game's plays) beside its artifact, so a rerun after a kill does only the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from glob import escape as glob_escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from heuresis.artifacts.privacy import PRIVATE_FILE_MODE, make_private_folder, private_root
from heuresis.artifacts.schemas import SCHEMA_KEY, VERSION_KEY, ArtifactSchema

__all__ = [
    "ArtifactError",
    "Checkpoint",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "read_metadata",
    "read_table",
    "write_parquet",
    "write_table",
]


def _file_mode() -> int:
    """Permissions of a new file under the process umask (``mkstemp`` alone would give 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _file_mode()


class ArtifactError(RuntimeError):
    """An artifact that is missing, truncated, or not of the expected schema."""


# --- atomic writes -----------------------------------------------------------------------------
def atomic_write(path: str | Path, write: Callable[[Path], object], *, suffix: str = ".tmp",
                 private: bool | None = None) -> Path:
    """Create ``path`` by ``write(tmp)`` on a temporary file, then rename it onto ``path``.

    Parameters
    ----------
    path : path
        The target; its folder is created if missing.
    write : callable
        Called with the temporary file's path (in the target's folder, already created and
        empty); it writes the complete content there.
    suffix : str
        Suffix of the temporary file, for writers that choose a format by it.
    private : bool, optional
        Whether only the owner may read the file (mode 0600, its folder 0700, whatever the umask).
        Default: when ``path`` lies in a private folder (:func:`heuresis.artifacts.privacy.private_root`);
        otherwise the file takes the umask's mode.

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    If ``write`` raises, the temporary file is removed and ``path`` keeps its old content (or
    stays absent); a temporary that a killed writer of ``path`` left is removed by the next write
    of ``path`` (a file has one writer at a time: the workflow's job that makes it).  The rename is
    atomic on POSIX file systems, so no reader ever sees a partial file; durability across a power
    loss (``fsync``) is not attempted.
    """
    path = Path(path)
    root = private_root(path) if private is None else (path.parent if private else None)
    if root is not None:            # the truth, a secret, a transcript: the owner's only (heuresis.artifacts.privacy)
        make_private_folder(path.parent, root=root)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{glob_escape(path.name)}.*{glob_escape(suffix)}"):
        stale.unlink(missing_ok=True)       # left by a writer of this file that was killed (one writer at a time)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _FILE_MODE if root is None else PRIVATE_FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes, *, private: bool | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data), private=private)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, UTF-8 encoded (:func:`atomic_write`)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_parquet(table: pa.Table, path: str | Path, **options: Any) -> Path:
    """Write ``table`` as Parquet atomically; ``options`` go to :func:`pyarrow.parquet.write_table`."""
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp, **options))


# --- artifacts under their schemas -------------------------------------------------------------------
def _encode_metadata(meta: Mapping[str, object] | None) -> dict[bytes, bytes]:
    out = {}
    for k, v in (meta or {}).items():
        out[k.encode()] = (v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)).encode()
    return out


def write_table(table: pa.Table | Mapping[str, list], path: str | Path, schema: ArtifactSchema,
                metadata: Mapping[str, object] | None = None) -> Path:
    """Write ``table`` as Parquet under ``schema``, atomically.

    Parameters
    ----------
    table : pyarrow.Table or mapping of column name to values
        The rows; a table is reduced to the schema's columns (in its order) and cast to it.
    path : path
        The artifact.
    schema : ArtifactSchema
        Its schema; name and version go into the key/value metadata.
    metadata : mapping, optional
        More key/value metadata (strings as they are, anything else as sorted JSON).

    Returns
    -------
    Path
        ``path``, which appears under its name only when complete.
    """
    if not isinstance(table, pa.Table):
        table = pa.table(dict(table), schema=schema.schema)
    else:
        table = table.select(schema.schema.names).cast(schema.schema)
    meta = dict(table.schema.metadata or {})
    meta.update(_encode_metadata(metadata))
    meta[SCHEMA_KEY] = schema.name.encode()
    meta[VERSION_KEY] = str(schema.version).encode()
    return write_parquet(table.replace_schema_metadata(meta), path, compression="zstd")


def read_metadata(path: str | Path) -> dict[str, str]:
    """The Parquet key/value metadata of an artifact, decoded (Arrow's own keys left out)."""
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise ArtifactError(f"cannot read artifact {path}: {exc}") from exc
    return {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW:")}


def read_table(path: str | Path, schema: ArtifactSchema) -> pa.Table:
    """Read an artifact and check that it is a complete file of the expected schema.

    Raises
    ------
    ArtifactError
        The file is missing, unreadable (truncated, not Parquet), or holds another schema, another
        version of it, or other columns; the message names the path.
    """
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


# --- checkpoints -----------------------------------------------------------------------------------------
class Checkpoint:
    """The finished units of one sweep job, kept beside its artifact until the job completes.

    Each finished unit is saved as its own JSON file in ``<artifact>.parts/`` (written
    atomically), holding the job's ``key``, the unit's name and its value.  A rerun after a kill
    loads the finished units and skips them; a part saved under another ``key`` (another
    configuration or other inputs) is ignored and its unit redone, so a changed configuration
    never mixes with stale results.

    A unit whose run failed for a reason outside the measured behaviour (a harness error, an API
    error after retries) is passed to :meth:`fail`: its record goes into this run's artifact but
    is not saved, so the next run of the job retries it (:mod:`heuresis.artifacts.failures`).
    :meth:`finish` removes the folder once no unit failed (:meth:`keep`: a job that keeps its
    parts as a cache for its next run, pruned to the units it still has).

    Parameters
    ----------
    artifact : path
        The final artifact the job writes; parts live in ``<artifact>.parts/``.
    key : str
        Digest of everything the units depend on (config slice, inputs); parts with another key
        are stale.

    Examples
    --------
    >>> ckpt = Checkpoint(out, key)                               # doctest: +SKIP
    >>> for i in units:                                           # doctest: +SKIP
    ...     if i not in ckpt:
    ...         ckpt.save(i, run(i))
    >>> rows = ckpt.values(units); write(rows); ckpt.finish()     # doctest: +SKIP
    """

    def __init__(self, artifact: str | Path, key: str) -> None:
        self.folder = Path(str(artifact) + ".parts")
        self.key = key
        self._done: dict[str, Any] = {}
        self._failed: dict[str, tuple[object, Any]] = {}
        if self.folder.exists():
            for p in sorted(self.folder.glob("*.json")):
                try:
                    rec = json.loads(p.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                    continue  # written atomically, so never torn; a foreign file is no part
                if isinstance(rec, dict) and rec.get("key") == key and "unit" in rec:
                    self._done[str(rec["unit"])] = rec.get("value")

    def __contains__(self, unit: object) -> bool:
        """Whether ``unit`` finished (in this run or a saved earlier one)."""
        return str(unit) in self._done

    def __len__(self) -> int:
        """Number of finished units."""
        return len(self._done)

    def get(self, unit: object) -> Any:
        """The value of a finished unit, or the record of a unit that failed in this run."""
        name = str(unit)
        if name in self._done:
            return self._done[name]
        if name in self._failed:
            return self._failed[name][1]
        raise KeyError(f"unit {name!r} is neither finished nor failed in {self.folder}")

    def values(self, units: Iterable[object]) -> list[Any]:
        """:meth:`get` of each of ``units``, in their order."""
        return [self.get(u) for u in units]

    def save(self, unit: object, value: Any) -> None:
        """Record ``unit`` as finished with a JSON-serialisable ``value`` (floats for numpy scalars)."""
        name = str(unit)
        self._failed.pop(name, None)
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / f"{quote(name, safe='')}.json",
                          json.dumps({"key": self.key, "unit": name, "value": value}, default=float))
        self._done[name] = value

    def fail(self, unit: object, value: Any) -> None:
        """Record that ``unit`` failed in this run: ``value`` is its record, not saved, so a rerun retries it."""
        self._failed[str(unit)] = (unit, value)

    @property
    def failed(self) -> list[object]:
        """The units that failed in this run (as passed to :meth:`fail`), in order of failure."""
        return [u for u, _ in self._failed.values()]

    def finish(self) -> int:
        """End the job: remove the parts if no unit failed; return the number of failed units."""
        if not self._failed:
            self.clear()
        return len(self._failed)

    def clear(self) -> None:
        """Remove the parts folder (the artifact holds every unit now)."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def keep(self, units: Iterable[object]) -> int:
        """End a job whose parts outlive it: keep the saved parts of ``units``, remove every other part.

        For a job that Snakemake reruns when one of its inputs changes (a judgement job, when a
        play is played again): the next run finds the units it has already paid for.  Returns
        the number of failed units, as :meth:`finish`.
        """
        wanted = {f"{quote(str(u), safe='')}.json" for u in units if str(u) in self._done}
        if self.folder.exists():
            for p in self.folder.glob("*.json"):
                if p.name not in wanted:
                    p.unlink(missing_ok=True)
        return len(self._failed)
