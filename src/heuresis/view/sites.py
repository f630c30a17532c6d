"""The site a view shows for the folders it is given, and its export as files.

One results folder: that run's pages (:class:`~heuresis.view.pages.Site`). Two: their comparison
(:class:`~heuresis.view.diff.RunDiff`), each run's own pages under ``a/`` and ``b/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote

from heuresis.artifacts.io import atomic_write_bytes
from heuresis.artifacts.privacy import make_private_folder
from heuresis.view.diff import RunDiff
from heuresis.view.pages import Site

__all__ = ["export_site", "open_site"]


def open_site(results: str | Path | Sequence[str | Path], live: bool = False) -> Site | RunDiff:
    """The site of one results folder (``live``: it follows the run as served) or of two (their comparison)."""
    folders = [results] if isinstance(results, (str, Path)) else list(results)
    if len(folders) == 1:
        return Site(folders[0], live=live)
    if len(folders) == 2:
        return RunDiff(*folders)
    raise ValueError(f"the view shows one results folder or compares two, not {len(folders)}: "
                     f"{', '.join(map(str, folders))}")


def export_site(results: str | Path | Sequence[str | Path], out: str | Path, log=print) -> int:
    """Write every page of the view of ``results`` (one folder or two) under ``out``, each file atomically.

    The pages show the hidden truth: ``out`` is made its owner's only (mode 0700), every page 0600.
    """
    site = open_site(results)
    out = Path(out)
    n = 0
    for path in site.paths():
        body = site.page(path).body         # drawn before its folder exists (the run header counts the folder)
        page = out / unquote(path)
        make_private_folder(page.parent, root=out)
        atomic_write_bytes(page, body, private=True)
        n += 1
    log(f"wrote {n} files to {out} (open {out / 'index.html'})")
    return n
