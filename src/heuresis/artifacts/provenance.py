"""Provenance stamped on every artifact (docs/design.md §9).

:func:`provenance_record` gathers what an auditor needs to trace a number back: the digest of
the config slice the artifact depends on, the code version (git commit and dirty flag), the
versions of the packages that compute results, the seeds, SHA-256 digests of the input files,
the command, the host and the start/end times.  It is stored in Parquet key/value metadata
under the key ``heuresis.provenance`` (a JSON object).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import metadata as _md
from pathlib import Path

from heuresis.config.loading import config_digest

__all__ = ["PROVENANCE_KEY", "code_version", "file_sha256", "package_versions", "provenance_record", "stable_command",
           "utc_now"]

PROVENANCE_KEY = "heuresis.provenance"
_PACKAGES = ("heuresis", "numpy", "scipy", "pandas", "pyarrow", "scikit-learn", "causal-learn", "lingam",
             "snakemake", "litellm", "pgmpy-no-torch", "gadjid", "dcor", "statsmodels", "networkx", "matplotlib")


def utc_now() -> str:
    """Return the current UTC time in ISO 8601 with seconds (``2026-01-31T12:00:00+00:00``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def file_sha256(path: str | Path) -> str:
    """Return the hex SHA-256 digest of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@lru_cache(maxsize=1)
def code_version() -> dict[str, object]:
    """Git commit and dirty flag of the source tree this package was imported from."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                    capture_output=True, text=True, timeout=10, check=True).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "unknown (not a git checkout)", None
    return {"commit": commit, "dirty": dirty}


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Return the versions of Python and of the packages results depend on (``not installed`` for an absent one)."""
    out = {"python": sys.version.split()[0]}
    for name in _PACKAGES:
        try:
            out[name] = _md.version(name)
        except _md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def stable_command(argv: list[str]) -> str:
    """The command line, with Snakemake's temporary copy of a rule's script named as the script shipped.

    Under ``script:`` Snakemake runs ``.snakemake/scripts/tmp<random>.<name>.py``, a file it deletes
    afterwards; the record names ``workflow/scripts/<name>.py`` instead, which a reader can open.
    """
    if argv:
        m = re.search(r"(?:^|/)\.snakemake/scripts/tmp[^./]+\.(?P<name>[^/]+\.py)$", argv[0])
        if m:
            return " ".join([f"snakemake script workflow/scripts/{m.group('name')}", *argv[1:]])
    return " ".join(argv)


def _launcher() -> str | None:
    """The Snakemake command line that started this process, if any (nearest ancestor process).

    Under Snakemake's ``script:`` directive ``sys.argv`` names a temporary copy of the script;
    the command that ran the job (a local run, or the job's own Snakemake under SLURM with its
    ``--target-jobs``) is one of the parent processes.
    """
    pid = os.getppid()
    for _ in range(6):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        text = " ".join(a.decode(errors="replace") for a in argv if a)
        if "snakemake" in text and ".snakemake/scripts/" not in text:
            return text
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            return None
    return None


def provenance_record(*, stage: str, config: Mapping | None, seeds: Mapping | None = None,
                      inputs: Iterable[str | Path] = (), started: str | None = None,
                      packages: Mapping[str, str] | None = None) -> dict[str, object]:
    """A provenance record for an artifact written now.

    Parameters
    ----------
    stage : str
        Workflow stage that produced the artifact (``instances``, ``references``, ...).
    config : mapping
        The config slice the artifact depends on (its digest is recorded, and the slice itself).
    seeds : mapping, optional
        Seeds of the random draws behind the artifact.
    inputs : paths
        Files read; their SHA-256 digests are recorded.
    started : str, optional
        ISO time the computation started (default: now).
    packages : mapping, optional
        Further distributions the artifact depends on, name -> version (a plugin agent's).
    """
    return {
        "stage": stage,
        "config_digest": config_digest(config),
        "config": config,
        "code": code_version(),
        "packages": {**package_versions(), **dict(packages or {})},
        "seeds": dict(seeds or {}),
        "inputs": {str(p): file_sha256(p) for p in inputs},
        "command": stable_command(sys.argv),
        "launched_by": _launcher(),
        "host": socket.gethostname(),
        "started": started or utc_now(),
        "finished": utc_now(),
    }


def dumps(record: Mapping) -> str:
    """Serialize a provenance record as JSON with sorted keys (non-JSON values as strings)."""
    return json.dumps(record, sort_keys=True, default=str)
