"""Logging for workflow stages: progress lines to the job's log file, or to stderr without one.

A job's lines (scores among them: a reference's or an episode's F1) go to its log file only,
never to the process's stderr, which the workflow shares with every job and a console or
scheduler may keep in a file: no agent's command, which runs with streams of its own, and no
reader of the run's console learns a score from it while episodes run.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["stage_logger"]


def stage_logger(path: str | Path | None, name: str = "heuresis") -> Callable[[str], None]:
    """A ``log(message)`` function writing timestamped lines to ``path``, or to stderr when ``path`` is None."""
    logger = logging.getLogger(f"{name}.{path}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    fmt = logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S")
    if not logger.handlers:
        handlers: list[logging.Handler] = []
        if path is None:
            handlers.append(logging.StreamHandler(sys.stderr))
        else:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(path))
        for h in handlers:
            h.setFormatter(fmt)
            logger.addHandler(h)
    return logger.info
