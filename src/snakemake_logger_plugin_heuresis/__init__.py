"""Snakemake logger plugin ``heuresis``: the workflow's compact console in a terminal (:mod:`heuresis.view.console`).

The workflow profile ``profiles/default/config.yaml`` selects it (``logger: [heuresis]``).  Outside a
terminal and in dry runs it prints exactly what Snakemake's own console prints.
"""

from __future__ import annotations

import logging
import sys

from snakemake.logging import ColorizingTextHandler
from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from heuresis.view.console import Progress, console_mode

__all__ = ["LogHandler"]


class LogHandler(LogHandlerBase):
    """Snakemake's console, or one line per finished job with the time left (``HEURESIS_CONSOLE``)."""

    def __post_init__(self) -> None:
        """Choose the console for the run's stream (stderr, or stdout with ``--stdout``)."""
        stream = sys.stdout if getattr(self.common_settings, "stdout", False) else sys.stderr
        self.stream = stream
        self.full = ColorizingTextHandler(nocolor=bool(self.common_settings.nocolor), stream=stream)
        self.mode = console_mode(stream, bool(self.common_settings.dryrun))
        self.progress = Progress()

    def emit(self, record: logging.LogRecord) -> None:
        """Print ``record`` as Snakemake does (full, warnings, errors) or as a compact line."""
        try:
            if self.mode == "full" or record.levelno >= logging.WARNING:
                self.full.setFormatter(self.formatter)
                self.full.emit(record)
                return
            fields = vars(record)          # Snakemake's event and its fields ride on the record
            event = fields.get("event")
            text = ""
            if event == LogEvent.JOB_INFO:
                self.progress.job_info(fields["jobid"], fields["rule_name"], fields.get("wildcards"))
            elif event == LogEvent.JOB_FINISHED:
                self.progress.finished(fields["job_id"])
            elif event == LogEvent.WORKFLOW_STARTED:
                text = self.progress.intro()
            elif event == LogEvent.PROGRESS:
                text = self.progress.line(int(fields["done"]), int(fields["total"]))
            elif event in (None, LogEvent.RUN_INFO, LogEvent.ERROR):
                text = self.progress.text(self.format(record))
            if text:
                self.stream.write(text + "\n")
                self.stream.flush()
        except Exception:
            self.handleError(record)

    @property
    def writes_to_stream(self) -> bool:
        """It replaces Snakemake's console."""
        return True

    @property
    def writes_to_file(self) -> bool:
        """The run's log file stays Snakemake's own."""
        return False

    @property
    def has_filter(self) -> bool:
        """Snakemake's filter (``--quiet``, ``--printshellcmds``) applies."""
        return False

    @property
    def has_formatter(self) -> bool:
        """Snakemake's formatter formats what is printed in full."""
        return False

    @property
    def needs_rulegraph(self) -> bool:
        """No rule graph is needed."""
        return False
