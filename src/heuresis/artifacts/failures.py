"""Infrastructure failures: counted, shown, and retried by rerunning the same target.

A unit of work (an episode, a game play, a judgement) whose run raised outside the agent's own
behaviour — a harness error, an API error after the client's retries — is recorded with status
``failed``.  It is not a result: the sweep that ran it

* does not checkpoint it as finished (its ``<artifact>.parts/`` folder, holding the finished
  units, is kept),
* still writes its artifacts, the failed rows flagged ``failed``, with the number of failed units
  in the Parquet key/value metadata (:data:`N_FAILED_KEY`, read by :func:`n_failed`), and
* writes the job's next *attempt* to ``<artifact>.attempt`` (:func:`record_attempt`).

The rule of such a job has a parameter ``attempt`` computed by :func:`attempt_param` from that
file.  After a run with failures the parameter differs from the one Snakemake recorded for the
job, so Snakemake's params rerun trigger schedules exactly that job again the next time a target
needing it is built (a dry run lists it: "Params have changed since last execution"); the job
resumes from its checkpoint and reruns only the failed units.  After a clean run the file is left
as it is, so the parameter equals the recorded one and nothing reruns.  The value depends only on
that file, which Snakemake never deletes, so a cluster job evaluating the parameter again (after
Snakemake removed the job's old outputs) sees the same value as the main process.
"""

from __future__ import annotations

from pathlib import Path

from heuresis.artifacts.io import ArtifactError, atomic_write_text, read_metadata

__all__ = [
    "ATTEMPT_KEY",
    "FIRST_ATTEMPT",
    "N_FAILED_KEY",
    "attempt_file",
    "attempt_param",
    "failure_metadata",
    "n_failed",
    "record_attempt",
]

N_FAILED_KEY = "heuresis.n_failed"    # Parquet metadata: units of the artifact that failed (infrastructure)
ATTEMPT_KEY = "heuresis.attempt"      # Parquet metadata: the attempt that wrote the artifact
FIRST_ATTEMPT = "attempt 1"


def attempt_file(artifact: str | Path) -> Path:
    """Return the path of the attempt file of ``artifact`` (``<artifact>.attempt``)."""
    return Path(str(artifact) + ".attempt")


def n_failed(artifact: str | Path) -> int:
    """Failed units recorded in an artifact's metadata (0 when it records none)."""
    try:
        return int(read_metadata(artifact).get(N_FAILED_KEY, 0))
    except (ArtifactError, ValueError):
        return 0


def attempt_param(artifact: str | Path) -> str:
    """The rule parameter ``attempt`` of the job writing ``artifact`` (see module docstring)."""
    p = attempt_file(artifact)
    try:
        text = p.read_text().strip()
    except OSError:
        return FIRST_ATTEMPT
    return text or FIRST_ATTEMPT


def _number(attempt: str) -> int:
    try:
        return int(attempt.split()[1].rstrip(":"))
    except (IndexError, ValueError):
        raise ValueError(f"not an attempt parameter: {attempt!r} (expected 'attempt N...')") from None


def record_attempt(artifact: str | Path, attempt: str, failed: int, what: str = "units") -> None:
    """After a job: with failures, name the next attempt (the job reruns); else leave the file be."""
    if failed:
        atomic_write_text(attempt_file(artifact), f"attempt {_number(attempt) + 1}: retry {failed} failed {what}\n")


def failure_metadata(failed: int, attempt: str) -> dict[str, str]:
    """Return the Parquet key/value metadata recording ``failed`` units and the ``attempt`` that wrote the artifact."""
    return {N_FAILED_KEY: str(int(failed)), ATTEMPT_KEY: attempt}
