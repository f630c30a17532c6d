"""Logging for workflow stages: progress lines to the rule's log file and to stderr."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["stage_logger"]


def stage_logger(path: str | Path | None, name: str = "heuresis") -> Callable[[str], None]:
    """A ``log(message)`` function writing timestamped lines to ``path`` (if given) and stderr."""
    logger = logging.getLogger(f"{name}.{path}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    fmt = logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S")
    if not logger.handlers:
        handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(path))
        for h in handlers:
            h.setFormatter(fmt)
            logger.addHandler(h)
    return logger.info
