"""Reading the workflow configuration, and its typed settings.

- :mod:`heuresis.config.loading`: reading and merging files, the schema (the one place each
  default is written) and its helpers, and :func:`config_digest`. It imports no other part of
  the package, so every module may import it; its public names are importable from here.
- :mod:`heuresis.config.settings`: the frozen dataclasses of the slices several modules read.

Validating a whole config (each stage's own checks) and bounding what it may spend sit above
the stages, in :mod:`heuresis.preflight`.
"""

from __future__ import annotations

from heuresis.config import loading as _loading
from heuresis.config.loading import *  # noqa: F403  (every public name of loading, listed once in its __all__)

__all__ = list(_loading.__all__)
