"""Who can read what: the artifacts that hold or reveal the hidden truth or a secret are their owner's only.

On a shared node, any local user reads a file the umask left 0644 in a 0755 folder. So the folders
that hold the truth, a secret or a sealed value -- :data:`PRIVATE_FOLDERS`: the truth and the salt,
the transcripts and request logs (which show the truth and the full exchange), the spend journals,
the games' references (a sealed test variant's perturbed values) -- are created mode 0700 and every
file written in them 0600, whatever the umask; the view's export (its pages show the truth) is made
the same way wherever it is written. Everything else (the data an agent sees, the reference sweeps,
the paper's tables and figures) keeps the umask's modes, readable by the group as usual.

:func:`check_private_folders` runs before a workflow starts a job: a private folder that exists and
is readable or searchable by the group or others is refused, naming it and the command that closes it,
because whatever it held may have been read already.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from heuresis.artifacts import paths as P

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "PRIVATE_FOLDERS",
    "PrivacyError",
    "check_private_folders",
    "make_folder",
    "make_private_folder",
    "private_root",
]

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: The private folders of a results tree, relative to the workflow's folder: the fixed part of each
#: private artifact's path template (:mod:`heuresis.artifacts.paths`).
PRIVATE_FOLDERS = tuple(template.split("{", 1)[0].rstrip("/") for template in
                        (P.TRUTH_GRAPHS, P.EPISODE_TRANSCRIPTS, P.SPEND, P.GAME_TRANSCRIPTS, P.GAME_REFERENCES))
#: What marks a path as inside a private folder wherever the results tree lies: these folder names in a row.
_MARKERS = tuple(tuple(Path(f).parts) for f in PRIVATE_FOLDERS)


class PrivacyError(PermissionError):
    """A private folder others can read or enter, or one that cannot be made owner-only."""


def private_root(path: str | Path) -> Path | None:
    """The private folder ``path`` lies in (or is), or None.

    That is the last place where the names of a private folder (``results/truth``, ...) follow each other
    among its folders: a results tree anywhere, and no folder above it that happens to share a name.
    """
    parts = Path(path).parts
    for k in range(len(parts) - 1, -1, -1):
        for marker in _MARKERS:
            if tuple(parts[k:k + len(marker)]) == marker:
                return Path(*parts[:k + len(marker)])
    return None


def make_private_folder(folder: str | Path, root: str | Path | None = None) -> Path:
    """Create ``folder`` and every folder from ``root`` (default: ``folder`` itself) down to it, each mode 0700.

    An existing folder on that chain that others can enter is made owner-only; a folder of another
    owner is refused (:class:`PrivacyError`).
    """
    folder = Path(folder)
    chain = [folder, *folder.parents]
    top = Path(root) if root is not None else folder
    upto = chain.index(top) if top in chain else 0
    chain[upto].parent.mkdir(parents=True, exist_ok=True)
    for f in reversed(chain[:upto + 1]):
        try:
            f.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            pass
        st = f.stat()
        if stat.S_IMODE(st.st_mode) & 0o077:
            if st.st_uid != os.geteuid():
                raise PrivacyError(f"{f}: a private folder owned by another user (uid {st.st_uid}) and open to others "
                                   f"(mode {stat.S_IMODE(st.st_mode):o})")
            os.chmod(f, PRIVATE_DIR_MODE)
    return folder


def make_folder(folder: str | Path) -> Path:
    """Create ``folder`` (and its parents): owner-only from its private root down when it lies in one."""
    root = private_root(folder)
    if root is None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return Path(folder)
    return make_private_folder(folder, root=root)


def _open_to_others(path: Path) -> int | None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    return mode if mode & 0o077 else None


def check_private_folders(base: str | Path = ".", folders: Iterable[str] = PRIVATE_FOLDERS) -> list[Path]:
    """Create the private folders under ``base`` (0700) and refuse one others can read or enter.

    Returns the folders. A folder made open to others (by hand, by a copy, by an older version) is an
    error naming it: what it held may have been read, so the run does not go on as if it had not.
    """
    base = Path(base)
    out = []
    for rel in folders:
        f = base / rel
        mode = _open_to_others(f)
        if mode is not None:
            raise PrivacyError(f"{f}: a private folder (it holds the hidden truth or a secret) is open to other users "
                               f"(mode {mode:o}); anything in it may have been read. Close it with `chmod -R go-rwx {f}` "
                               "and, for a sealed test split, consider drawing a new seed")
        out.append(make_private_folder(f, root=f))
    return out
