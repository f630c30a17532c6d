"""The workflow's console in a terminal: one short line per finished job, with the time left.

Snakemake prints every job's inputs, outputs, reason and resources; the small config's run is
thousands of lines, some of them thousands of characters long.  In a terminal the logger plugin
``heuresis`` (``snakemake_logger_plugin_heuresis``, chosen by the workflow profile
``profiles/default``) prints instead, per finished job, one line no wider than the terminal::

    [ 37/220  17% | 1m12s, ~5m50s left] games_plays game_random/agentic/antenna_trap

(the job's rule and wildcard values, cut to the terminal's width), and Snakemake's own short
lines as they are (job statistics, warnings, errors, what was built and the commands to look at
it, the log file's path at the end: never cut, so a path or command can be copied).
Every detail stays in the run's log file (``.snakemake/log/``, whose path Snakemake prints at
the end).  Not in a terminal (CI, a scheduler's output file) and in dry runs, the console is
Snakemake's own; ``HEURESIS_CONSOLE=full`` or ``=compact`` chooses either way.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from typing import IO

__all__ = ["MODE_VARIABLE", "Progress", "console_mode", "duration", "fit"]

#: The environment variable that chooses the console: ``compact`` or ``full`` (default: compact in a terminal).
MODE_VARIABLE = "HEURESIS_CONSOLE"

#: Snakemake's lines the compact console leaves to the log file.
DROPPED = ("Select jobs to execute...",)


def console_mode(stream: IO, dryrun: bool, env: Mapping[str, str] = os.environ) -> str:
    """``compact`` or ``full``: :data:`MODE_VARIABLE` if set, else compact on a terminal outside dry runs."""
    chosen = env.get(MODE_VARIABLE, "").strip().lower()
    if chosen and chosen not in ("compact", "full"):
        raise ValueError(f"{MODE_VARIABLE}={chosen!r}: expected 'compact' or 'full'")
    if chosen:
        return chosen
    isatty = getattr(stream, "isatty", None)
    return "compact" if not dryrun and isatty is not None and isatty() else "full"


def duration(seconds: float) -> str:
    """``45s``, ``5m50s``, ``2h03m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def fit(line: str, width: int) -> str:
    """``line`` cut to ``width`` characters, its end marked ``…`` when cut."""
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


class Progress:
    """What the compact console prints: a line per finished job with the time left.

    ``clock`` gives seconds (monotonic); ``width`` the terminal's columns (default: the terminal's,
    100 when unknown).  The time left is the elapsed time per finished job times the jobs left.
    """

    def __init__(self, width: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.width = width or shutil.get_terminal_size((100, 24)).columns
        self.clock = clock
        self.start = clock()
        self.jobs: dict[int, str] = {}
        self.last = ""

    def job_info(self, jobid: int, rule: str, wildcards: Mapping[str, str] | None) -> None:
        """Remember what job ``jobid`` is: its rule and wildcards."""
        self.jobs[int(jobid)] = f"{rule} {'/'.join(map(str, (wildcards or {}).values()))}".strip()

    def finished(self, jobid: int) -> None:
        """Job ``jobid`` finished: the next progress line names it."""
        self.last = self.jobs.pop(int(jobid), f"job {jobid}")

    def line(self, done: int, total: int) -> str:
        """The progress line after ``done`` of ``total`` jobs."""
        elapsed = self.clock() - self.start
        left = f", ~{duration(elapsed / done * (total - done))} left" if 0 < done < total else ""
        pct = f"{100 * done // total:3d}%" if total else "  -%"
        n = len(str(total))
        return fit(f"[{done:{n}d}/{total} {pct} | {duration(elapsed)}{left}] {self.last}".rstrip(), self.width)

    @staticmethod
    def intro() -> str:
        """The compact console's first lines: what it shows and where the rest is."""
        return (f"One line per finished job; each job's details are in .snakemake/log/.\n"
                f"{MODE_VARIABLE}=full prints them here.")

    @staticmethod
    def text(message: str) -> str:
        """Snakemake's own message as it is; empty for the lines left to the log file (:data:`DROPPED`)."""
        return "" if message.strip() in DROPPED else message
