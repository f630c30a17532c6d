"""Lineage of an artifact: its provenance record, and its inputs' records, back to config and seeds.

Every artifact carries a provenance record (:mod:`heuresis.artifacts.provenance`): Parquet files in their
key/value metadata under ``heuresis.provenance``, figures in a ``<stem>.provenance.json``
sidecar.  A record lists the files the artifact was computed from with their SHA-256 digests at
the time; :func:`lineage` follows those inputs recursively (an input that is itself an artifact
has its own record) and compares each recorded digest with the file as it is now.  An input whose
bytes changed, or that is gone, makes the artifact **stale**: it no longer follows from what is
on disk.  The chain ends at records without inputs (the instance stage: config slice and seeds).

Which file holds the record of a path:

* ``*.parquet``: its own metadata;
* a figure ``*.pdf``/``*.png``: the sidecar ``<stem>.provenance.json``;
* a table ``*.md``/``*.tex``: the Parquet file of the same stem;
* a folder of instances ``results/instances/{family}/{split}``: its ``index.parquet``;
* an instance's ``data.parquet`` carries no metadata by design (agents read it); its split's
  ``index.parquet`` holds its digest, which is checked, and that index's record is followed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from heuresis.artifacts.io import ArtifactError, read_metadata
from heuresis.artifacts.provenance import PROVENANCE_KEY, file_sha256

__all__ = [
    "InputCheck",
    "Lineage",
    "format_lineage",
    "lineage",
    "narrowed",
    "read_provenance",
    "record_source",
    "to_dict",
]


@dataclass
class InputCheck:
    """One recorded input of an artifact, compared with the file as it is now."""

    recorded_path: str
    recorded_sha256: str
    path: Path | None            # where it was found now (None: missing)
    current_sha256: str | None
    lineage: Lineage | None = None    # the input's own lineage, when it is an artifact

    @property
    def status(self) -> str:
        """``ok`` (same bytes as recorded), ``changed`` or ``missing``."""
        if self.path is None:
            return "missing"
        return "ok" if self.current_sha256 == self.recorded_sha256 else "changed"

    @property
    def stale(self) -> bool:
        """This input, or anything upstream of it, differs from what was recorded."""
        return self.status != "ok" or (self.lineage is not None and self.lineage.stale)


@dataclass
class Lineage:
    """An artifact, the file its record was read from, the record, and its checked inputs."""

    path: Path
    source: Path
    record: Mapping | None
    inputs: list[InputCheck] = field(default_factory=list)
    note: str = ""
    repeated: bool = False       # already expanded elsewhere in the tree

    @property
    def stale(self) -> bool:
        """Whether any input, here or upstream, differs from what was recorded."""
        return any(i.stale for i in self.inputs)

    def stale_inputs(self) -> list[str]:
        """Paths of every changed or missing input, here and upstream (each once)."""
        out: list[str] = []
        for i in self.inputs:
            if i.status != "ok":
                out.append(f"{i.recorded_path} ({i.status})")
            if i.lineage is not None:
                out.extend(x for x in i.lineage.stale_inputs() if x not in out)
        return out


def record_source(path: str | Path) -> tuple[Path, str]:
    """The file that holds ``path``'s provenance record, and a note on why that file."""
    path = Path(path)
    if path.is_dir():
        index = path / "index.parquet"
        if index.exists():
            return index, f"folder: record of {index.name}"
        raise ArtifactError(f"{path} is a folder without an index.parquet; name an artifact file")
    suffix = path.suffix.lower()
    if path.name.endswith(".provenance.json"):
        return path, ""
    if suffix in (".pdf", ".png", ".svg"):
        return path.with_suffix(".provenance.json"), "figure: record in its sidecar"
    if suffix in (".md", ".tex"):
        return path.with_suffix(".parquet"), "table: record in the Parquet file of the same name"
    if suffix == ".parquet" and path.name == "data.parquet" and (path.parent.parent / "index.parquet").exists():
        return path.parent.parent / "index.parquet", "instance data carry no metadata; record of the split's index"
    return path, ""


def read_provenance(path: str | Path) -> dict:
    """The provenance record of an artifact (see :func:`record_source` for which file holds it)."""
    source, _ = record_source(path)
    if not source.exists():
        raise ArtifactError(f"no provenance for {path}: {source} does not exist")
    if source.suffix == ".json":
        try:
            return json.loads(source.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ArtifactError(f"provenance sidecar {source} is unreadable: {exc}") from exc
    meta = read_metadata(source)
    if PROVENANCE_KEY not in meta:
        raise ArtifactError(f"artifact {source} carries no {PROVENANCE_KEY!r} metadata")
    try:
        return json.loads(meta[PROVENANCE_KEY])
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"artifact {source}: provenance metadata is not JSON: {exc}") from exc


def _locate(recorded: str, artifact: Path, root: Path | None) -> Path | None:
    """Find a recorded input now: absolute, under ``root``, or under an ancestor of the artifact.

    Recorded paths are relative to the folder the workflow ran in; the folder need not be the
    current one, so every ancestor of the artifact is tried.
    """
    p = Path(recorded)
    if p.is_absolute():
        return p if p.exists() else None
    bases = [root] if root is not None else [Path.cwd(), *artifact.resolve().parents]
    for base in bases:
        if (base / p).exists():
            return base / p
    return None


def lineage(path: str | Path, *, root: str | Path | None = None, max_depth: int | None = None,
            _seen: dict | None = None, _depth: int = 0) -> Lineage:
    """The lineage tree of an artifact.

    Parameters
    ----------
    path : path
        An artifact (Parquet, figure, table, instance folder or data file).
    root : path, optional
        Folder the workflow ran in (recorded input paths are relative to it); default: the
        current folder, then every ancestor of ``path``.
    max_depth : int, optional
        Follow inputs this many levels deep (default: all the way).

    Returns
    -------
    Lineage
        The artifact's record and each recorded input with its status (``ok``, ``changed``,
        ``missing``) and, when the input is an artifact, its own lineage.  An artifact reached
        twice is expanded once; the second node has ``repeated=True``.
    """
    path = Path(path)
    root = Path(root) if root is not None else None
    seen = {} if _seen is None else _seen
    source, note = record_source(path)
    key = source.resolve()
    if key in seen:
        prior = seen[key]
        return Lineage(path, source, prior.record, prior.inputs, note, repeated=True)
    record = read_provenance(path)
    node = Lineage(path, source, record, note=note)
    seen[key] = node
    if path.name == "data.parquet" and source.name == "index.parquet":
        node.inputs.append(_data_check(path, source))
    for recorded, digest in sorted((record.get("inputs") or {}).items()):
        found = _locate(recorded, source, root)
        check = InputCheck(recorded, digest, found, file_sha256(found) if found and found.is_file() else None)
        if found is not None and (max_depth is None or _depth < max_depth):
            try:
                read_provenance(found)
            except ArtifactError:
                pass                       # a plain input (no record): digest checked, chain ends
            else:
                check.lineage = lineage(found, root=root, max_depth=max_depth, _seen=seen, _depth=_depth + 1)
        node.inputs.append(check)
    return node


def _data_check(data: Path, index: Path) -> InputCheck:
    """The digest the split's index holds for an instance's data file, against the file now."""
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import INSTANCE_INDEX

    rows = read_table(index, INSTANCE_INDEX).to_pylist()
    rel = data.parent.name + "/" + data.name
    row = next((r for r in rows if r["path"] == rel or Path(r["path"]).parts[-2:] == Path(rel).parts), None)
    if row is None:
        raise ArtifactError(f"{index} does not list {data}")
    return InputCheck(str(data), row["data_sha256"], data if data.exists() else None,
                      file_sha256(data) if data.exists() else None)


# --- printing ---------------------------------------------------------------------------------

def _short(digest: str | None) -> str:
    return (digest or "-")[:12]


def _fmt_mapping(m: Mapping | None) -> str:
    if not m:
        return "-"
    return ", ".join(f"{k}={json.dumps(v, default=str) if not isinstance(v, str) else v}" for k, v in m.items())


def _nodes(node: Lineage) -> list[Lineage]:
    out = [node]
    for i in node.inputs:
        if i.lineage is not None and not i.lineage.repeated:
            out.extend(_nodes(i.lineage))
    return out


def _code_text(rec: Mapping) -> str:
    code = rec.get("code") or {}
    dirty = code.get("dirty")
    return f"{code.get('commit', '-')} ({'dirty' if dirty else 'clean' if dirty is False else 'dirty: unknown'})"


def _common(nodes: list[Lineage]) -> dict[str, str]:
    """The facts every record of the tree shares (code, packages, host, run by): printed once, at the top."""
    facts = {"code": _code_text, "packages": lambda r: _fmt_mapping(r.get("packages")),
             "host": lambda r: str(r.get("host", "-")), "run by": lambda r: str(r.get("launched_by") or "-")}
    recs = [n.record or {} for n in nodes]
    return {k: vals.pop() for k, f in facts.items() if len(vals := {f(r) for r in recs}) == 1}


def narrowed(inputs: list[InputCheck], row: Mapping[str, str]) -> list[InputCheck]:
    """The inputs that bear on one row.

    For each of the row's values that names a path segment of some input (a family, an algorithm,
    an agent), only the inputs whose path has it are kept; when no input names a value, all stay.
    """
    if not row:
        return inputs
    keep = list(inputs)
    for value in row.values():
        having = [i for i in keep if value in Path(i.recorded_path).parts]
        if having:
            keep = having
    return keep


def format_lineage(node: Lineage, *, show_config: bool = False, row: Mapping[str, str] | None = None) -> str:
    """Human-readable lineage: the facts every record shares once, then one block per artifact, inputs indented.

    ``row``: column -> value of one table row; each artifact shows only the inputs that bear on it
    (:func:`narrowed`).
    """
    common = _common(_nodes(node))
    lines = [f"{k + ':':9} {v}  (every artifact below)" for k, v in common.items()]
    if lines:
        lines.append("")
    _format(node, lines, "", show_config, common, dict(row or {}), set())
    stale = node.stale_inputs()
    if stale:
        lines.append("")
        lines.append(f"STALE: {node.path} no longer follows from its inputs; changed or missing since it was built:")
        lines.extend(f"  - {s}" for s in stale)
        lines.append("  rerun the workflow to rebuild it (snakemake rebuilds what depends on a changed input).")
    else:
        lines.append("")
        lines.append(f"up to date: every input of {node.path}, back to config and seeds, is as recorded.")
    return "\n".join(lines)


def _format(node: Lineage, lines: list[str], pad: str, show_config: bool, common: Mapping[str, str],
            row: Mapping[str, str], printed: set) -> None:
    rec = node.record or {}
    src = f"  [{node.note}: {node.source}]" if node.note else ""
    lines.append(f"{pad}{node.path}{src}")
    key = node.source.resolve()
    if key in printed:             # expanded above (not merely reached before in a branch left out)
        lines.append(f"{pad}  (lineage shown above)")
        return
    printed.add(key)
    lines.append(f"{pad}  stage:    {rec.get('stage', '-')}")
    lines.append(f"{pad}  config:   sha256 {_short(rec.get('config_digest'))}"
                 + (f" over {', '.join(sorted(rec['config']))}" if isinstance(rec.get("config"), Mapping) else ""))
    if show_config and rec.get("config") is not None:
        for cl in json.dumps(rec["config"], indent=2, sort_keys=True, default=str).splitlines():
            lines.append(f"{pad}    {cl}")
    own = {"code": _code_text(rec), "packages": _fmt_mapping(rec.get("packages")), "host": str(rec.get("host", "-")),
           "run by": str(rec.get("launched_by") or "-")}
    for k, v in own.items():
        if k not in common and v != "-":
            lines.append(f"{pad}  {k + ':':9} {v}")
    lines.append(f"{pad}  seeds:    {_fmt_mapping(rec.get('seeds'))}")
    lines.append(f"{pad}  command:  {rec.get('command', '-')}")
    lines.append(f"{pad}  time:     {rec.get('started', '-')} .. {rec.get('finished', '-')}")
    if not node.inputs:
        lines.append(f"{pad}  inputs:   none (a root: config and seeds only)")
        return
    shown = narrowed(node.inputs, row)
    left = len(node.inputs) - len(shown)
    lines.append(f"{pad}  inputs:" + (f"   ({left} of {len(node.inputs)} left out: they bear on other rows)"
                                      if left else ""))
    for i in shown:
        flag = {"ok": "ok", "changed": "STALE (changed)", "missing": "STALE (missing)"}[i.status]
        now = f" now {_short(i.current_sha256)}" if i.status == "changed" else ""
        lines.append(f"{pad}    {i.recorded_path}  sha256 {_short(i.recorded_sha256)}{now}  {flag}")
        if i.lineage is not None:
            _format(i.lineage, lines, pad + "      ", show_config, common, row, printed)


def to_dict(node: Lineage) -> dict:
    """The lineage tree as plain data (for ``--json``)."""
    out = {"path": str(node.path), "source": str(node.source), "stale": node.stale}
    if node.repeated:
        out["repeated"] = True
        return out
    out["record"] = node.record
    out["inputs"] = [{"path": i.recorded_path, "recorded_sha256": i.recorded_sha256,
                      "current_sha256": i.current_sha256, "status": i.status,
                      **({"lineage": to_dict(i.lineage)} if i.lineage is not None else {})} for i in node.inputs]
    return out

