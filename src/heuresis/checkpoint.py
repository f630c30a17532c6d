"""Resumable sweeps: one small record per finished unit, kept beside the final artifact.

A sweep job (a shard of instances, a batch of episodes) saves each finished unit as its own
JSON file in ``<artifact>.parts/`` (written atomically).  A rerun after a kill loads the finished
units and skips them; when the job completes it writes the artifact and removes the folder.
A part written under another configuration (its ``key`` differs) is ignored and redone, so a
changed config never mixes with stale results.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from heuresis.report import atomic_write_text

__all__ = ["Checkpoint"]


class Checkpoint:
    """Finished units of one sweep job.

    Parameters
    ----------
    artifact : path
        The final artifact the job writes; parts live in ``<artifact>.parts/``.
    key : str
        Digest of everything the units depend on (config slice, inputs); parts with another key
        are stale.
    """

    def __init__(self, artifact: str | Path, key: str) -> None:
        self.folder = Path(str(artifact) + ".parts")
        self.key = key
        self._done: dict[str, Any] = {}
        if self.folder.exists():
            for p in sorted(self.folder.glob("*.json")):
                try:
                    rec = json.loads(p.read_text())
                except (OSError, json.JSONDecodeError):
                    continue  # a torn file from a kill mid-write cannot exist (atomic), but be safe
                if rec.get("key") == key:
                    self._done[rec["unit"]] = rec["value"]

    def __contains__(self, unit: object) -> bool:
        return str(unit) in self._done

    def __len__(self) -> int:
        return len(self._done)

    def get(self, unit: object) -> Any:
        """Return the saved value of finished ``unit`` (KeyError if it is not finished)."""
        return self._done[str(unit)]

    def save(self, unit: object, value: Any) -> None:
        """Record ``unit`` as finished with its JSON-serializable ``value`` (one file, written atomically)."""
        unit = str(unit)
        self.folder.mkdir(parents=True, exist_ok=True)
        safe = unit.replace("/", "_")
        atomic_write_text(self.folder / f"{safe}.json", json.dumps({"key": self.key, "unit": unit, "value": value},
                                                                   default=float))
        self._done[unit] = value

    def clear(self) -> None:
        """Remove the parts folder; called once the job has written its final artifact."""
        shutil.rmtree(self.folder, ignore_errors=True)
