"""A bundle that proves a leaderboard row: what made it, with digests, and a check anyone can run.

:func:`write_bundle` packs a results folder's episode record into one ``.tar.gz`` — the episodes,
their calls and requests (each Parquet carries its provenance: config slice, seeds, code version,
packages), the transcripts, the episode scores, the headroom scores, the instance indexes (the
data digests), the leaderboard and Table 12 — with the lock file, the seed commitment record when
the config has one, and, on request, the hidden truth (for a public split, or a sealed one after its
seed is revealed). ``manifest.json`` lists every member with its SHA-256 and the code version.

:func:`verify_bundle` checks every member against the manifest, then recomputes every episode's
score from the truth: the graph in the episodes table must be the graph its transcript recorded,
and its adjacency F1 and SHD against the true DAG and CPDAG (the harness's own scoring,
:func:`heuresis.causal.metrics.score_graph`) must equal the recorded ones, in the
episodes table and in the episode scores.  The truth comes from the bundle or, for a sealed split,
from a results folder rebuilt from the revealed seed (``heuresis verify-seed`` checks the seed
against its commitment first); its data digests must be the bundle's.  The first difference fails
the check, named.

The bundle holds transcripts (and, on request, the truth): it is written readable by its owner
only, like every private artifact.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["BUNDLED", "BundleMismatch", "extracted", "verify_bundle", "write_bundle"]

MANIFEST = "manifest.json"
#: What a bundle holds of a results folder (glob patterns, relative to it); the truth only on request.
BUNDLED = ("episodes/**/*.parquet", "transcripts/**/*.json", "analysis/episode_scores.parquet",
           "headroom/test_scores.parquet", "instances/*/*/index.parquet", "tables/leaderboard.*", "tables/table12.*",
           "run/plan.json")
TRUTH = ("truth/*/*/graphs.parquet",)


class BundleMismatch(ValueError):
    """A bundle whose member or recomputed score differs from what it records (the message names it)."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _members(results: Path, patterns: Iterable[str]) -> list[Path]:
    out: set[Path] = set()
    for pat in patterns:
        out.update(p for p in results.glob(pat) if p.is_file() and ".parts" not in p.parts)
    return sorted(out)


def write_bundle(results: str | Path, out: str | Path, *, with_truth: bool = False, lock: str | Path | None = None,
                 commitment: str | Path | None = None, log: Callable[[str], None] = print) -> Path:
    """Write the bundle of ``results`` to ``out`` (a ``.tar.gz``, 0600); returns its path.

    ``lock``: the lock file the run was installed from; ``commitment``: the sealed seed's commitment
    record; ``with_truth``: add the hidden truth (``truth/*/*/graphs.parquet``).
    Raises FileNotFoundError when the folder has no episodes.
    """
    from heuresis import __version__

    results, out = Path(results), Path(out)
    files = _members(results, BUNDLED + (TRUTH if with_truth else ()))
    if not any(p.match("*.parquet") and "episodes" in p.relative_to(results).parts[:1] for p in files):
        raise FileNotFoundError(f"{results}: no episodes to bundle (results/episodes is empty or missing)")
    entries = {f"results/{p.relative_to(results)}": p for p in files}
    for name, path in (("lock.txt", lock), ("commitment.json", commitment)):
        if path is not None and Path(path).is_file():
            entries[name] = Path(path)
    digests = {name: _sha256(p.read_bytes()) for name, p in entries.items()}
    manifest = {"format": 1, "heuresis_version": __version__, "truth_included": with_truth,
                "files": digests, "code_version": _code_version(results)}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "wb") as fh:
        tmp.chmod(0o600)
        with tarfile.open(fileobj=fh, mode="w:gz") as tar:
            blob = json.dumps(manifest, indent=1, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode = len(blob), 0o600
            tar.addfile(info, io.BytesIO(blob))
            for name, path in entries.items():
                tar.add(path, arcname=name, recursive=False)
    tmp.replace(out)
    log(f"wrote {out}: {len(entries)} files ({'with' if with_truth else 'without'} the truth), manifest {MANIFEST}")
    return out


def _code_version(results: Path) -> dict:
    """The code version the episodes record in their provenance (``code``: package version, git commit)."""
    import pyarrow.parquet as pq

    from heuresis.artifacts.provenance import PROVENANCE_KEY

    for p in sorted(results.glob("episodes/**/shard-*.parquet")):
        if p.name.count(".") > 1:
            continue
        raw = (pq.read_schema(p).metadata or {}).get(PROVENANCE_KEY.encode())
        if raw:
            return dict(json.loads(raw).get("code") or {})
    return {}


@dataclass
class Verified:
    """What :func:`verify_bundle` checked."""

    files: int
    episodes: int
    truth: str


def _extract(bundle: Path, into: Path) -> dict:
    with tarfile.open(bundle, "r:gz") as tar:
        tar.extractall(into, filter="data")     # no absolute paths, no links out, no devices
    manifest_path = into / MANIFEST
    if not manifest_path.is_file():
        raise BundleMismatch(f"{bundle}: no {MANIFEST}")
    manifest = json.loads(manifest_path.read_text())
    listed = set(manifest.get("files", {}))
    present = {str(p.relative_to(into)) for p in into.rglob("*") if p.is_file()} - {MANIFEST}
    for name in sorted(present - listed):
        raise BundleMismatch(f"{bundle}: {name} is in the bundle but not in its manifest")
    for name in sorted(listed):
        p = into / name
        if not p.is_file():
            raise BundleMismatch(f"{bundle}: {name} is in the manifest but missing")
        if _sha256(p.read_bytes()) != manifest["files"][name]:
            raise BundleMismatch(f"{bundle}: {name} differs from its manifest digest")
    return manifest


@contextmanager
def extracted(bundle: str | Path) -> Iterator[Path]:
    """The bundle's ``results`` folder, unpacked into a temporary folder and checked against its manifest."""
    with tempfile.TemporaryDirectory(prefix="heuresis-bundle-") as tmp:
        _extract(Path(bundle), Path(tmp))
        yield Path(tmp) / "results"


def verify_bundle(bundle: str | Path, truth: str | Path | None = None, log: Callable[[str], None] = print) -> Verified:
    """Check a bundle (module docstring); raises :class:`BundleMismatch` naming the first difference.

    ``truth``: a results folder holding ``truth/<family>/<split>/graphs.parquet`` (a sealed split,
    rebuilt from the revealed seed); without it, the bundle's own truth.
    """
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import EPISODE_SCORES, EPISODES, INSTANCE_INDEX, TRUTH_GRAPHS
    from heuresis.artifacts.transcripts import read_episode_transcript
    from heuresis.causal.graph import Graph
    from heuresis.causal.metrics import score_graph

    bundle = Path(bundle)
    with tempfile.TemporaryDirectory(prefix="heuresis-bundle-") as tmp:
        root = Path(tmp)
        manifest = _extract(bundle, root)
        res = root / "results"
        truth_root = Path(truth) if truth is not None else res
        if truth is None and not manifest.get("truth_included"):
            raise BundleMismatch(f"{bundle}: holds no truth; give a results folder rebuilt from the revealed seed "
                                 "(--truth RESULTS)")
        digests = {}
        for p in sorted(res.glob("instances/*/*/index.parquet")):
            for r in read_table(p, INSTANCE_INDEX).to_pylist():
                digests[r["instance_id"]] = r["data_sha256"]
        truths: dict[str, dict] = {}
        for p in sorted(truth_root.glob("truth/*/*/graphs.parquet")):
            for r in read_table(p, TRUTH_GRAPHS).to_pylist():
                truths[r["instance_id"]] = r
        scores = {}
        ep_scores = res / "analysis" / "episode_scores.parquet"
        if ep_scores.is_file():
            scores = {r["episode_id"]: r for r in read_table(ep_scores, EPISODE_SCORES).to_pylist()}
        n = 0
        for shard in sorted(res.glob("episodes/**/shard-*.parquet")):
            if shard.name.count(".") > 1:      # calls and requests beside it
                continue
            for row in read_table(shard, EPISODES).to_pylist():
                eid, iid = row["episode_id"], row["instance_id"]
                t = truths.get(iid)
                if t is None:
                    raise BundleMismatch(f"episode {eid}: no truth for instance {iid} under {truth_root}")
                if iid in digests and t["data_sha256"] != digests[iid]:
                    raise BundleMismatch(f"episode {eid}: the truth of {iid} belongs to other data (digest "
                                         f"{t['data_sha256'][:12]}… against the bundle's {digests[iid][:12]}…)")
                d = int(t["d"])
                graph = Graph(np.asarray(row["graph"], dtype=np.int8).reshape(d, d))
                parts = Path(row.get("transcript") or "").parts
                at = len(parts) - 1 - parts[::-1].index("transcripts") if "transcripts" in parts else None
                tr_path = res.joinpath(*parts[at:]) if at is not None else None
                if tr_path is None or not tr_path.is_file():
                    raise BundleMismatch(f"episode {eid}: its transcript ({row.get('transcript')}) is not in the bundle")
                recorded = read_episode_transcript(tr_path).episode.get("graph")
                if list(recorded or []) != list(row["graph"]):
                    raise BundleMismatch(f"episode {eid}: the graph in the episodes table is not the one its "
                                         "transcript recorded")
                dag = Graph.from_dag(np.asarray(t["dag"], dtype=np.int8).reshape(d, d))
                cpdag = Graph(np.asarray(t["cpdag"], dtype=np.int8).reshape(d, d))
                s = score_graph(dag, cpdag, graph)
                for what, rec in (("episodes table", row), ("episode scores", scores.get(eid))):
                    if rec is None:
                        continue
                    if not np.isclose(s.f1, rec["f1"], rtol=0, atol=1e-12) or int(s.shd) != int(rec["shd"]):
                        raise BundleMismatch(f"episode {eid}: recomputed F1 {s.f1:.6f}, SHD {s.shd} against the "
                                             f"truth; the {what} records F1 {rec['f1']:.6f}, SHD {rec['shd']}")
                n += 1
        if not n:
            raise BundleMismatch(f"{bundle}: no episodes")
    source = "the bundle" if truth is None else str(truth_root)
    log(f"{bundle}: {len(manifest['files'])} files match the manifest; {n} episodes rescored against the truth "
        f"({source}): every score as recorded")
    return Verified(len(manifest["files"]), n, source)
