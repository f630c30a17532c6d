"""Adapters for causal foundation models (CDFM, TabCausal in the paper; docs/design.md §4.4).

Their checkpoints cannot be fetched on an offline machine.  An adapter knows where it would
look for a checkpoint (the environment variable ``HEURESIS_<NAME>_CHECKPOINT``) and says why it
is unavailable; it never fakes a result.  A checkpoint-backed implementation subclasses
:class:`FoundationModel` and implements :meth:`_predict`, returning a :class:`~heuresis.causal.graph.Graph`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from heuresis.causal.graph import Graph

__all__ = ["FOUNDATION_MODELS", "FoundationModel", "NotAvailable", "foundation_model"]


class NotAvailable(RuntimeError):
    """The model cannot run here (no checkpoint)."""


@dataclass(frozen=True)
class FoundationModel:
    """Adapter of one causal foundation model: where its checkpoint would be and whether it can run.

    Attributes
    ----------
    name : str
        Short name (``cdfm``, ``tabcausal``); it names the checkpoint variable.
    title : str
        Name as the paper writes it, used in messages.
    """

    name: str
    title: str

    @property
    def env_var(self) -> str:
        """Name of the environment variable pointing to a local checkpoint (``HEURESIS_<NAME>_CHECKPOINT``)."""
        return f"HEURESIS_{self.name.upper()}_CHECKPOINT"

    def checkpoint(self) -> Path | None:
        """Return the local checkpoint named by :attr:`env_var`, or None when unset or missing."""
        path = os.environ.get(self.env_var)
        return Path(path) if path and Path(path).exists() else None

    def availability(self) -> tuple[bool, str]:
        """``(available, reason)``: a model without a local checkpoint is not available."""
        if self.checkpoint() is None:
            return False, f"checkpoint not available offline (set {self.env_var} to a local checkpoint)"
        return False, f"no inference code for {self.title} in this release (checkpoint found at {self.checkpoint()})"

    def predict(self, data: np.ndarray) -> Graph:
        """Predict a graph from ``data`` (n, d).

        Raises
        ------
        NotAvailable
            When the model cannot run here; the message says why.
        """
        ok, reason = self.availability()
        if not ok:
            raise NotAvailable(f"{self.title}: {reason}")
        return self._predict(data)

    def _predict(self, data: np.ndarray) -> Graph:  # pragma: no cover - needs a checkpoint
        raise NotAvailable(f"{self.title}: no inference code")


FOUNDATION_MODELS = {m.name: m for m in (FoundationModel("cdfm", "CDFM"), FoundationModel("tabcausal", "TabCausal"))}


def foundation_model(name: str) -> FoundationModel:
    """Return the adapter named ``name`` (a ValueError naming the known ones otherwise)."""
    if name not in FOUNDATION_MODELS:
        raise ValueError(f"unknown foundation model {name!r}; known: {sorted(FOUNDATION_MODELS)}")
    return FOUNDATION_MODELS[name]
