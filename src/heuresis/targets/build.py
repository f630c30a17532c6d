"""Build one declared target: run its builder, then write its files with their caption and provenance.

The one entry point of every target job (``workflow/scripts/target.py`` calls :func:`build`).
The caption is the target's caption file (:func:`~heuresis.targets.registry.caption_file`),
then what the builder notes of this run; a table of test results ends it with the secrets
disclosure (:func:`heuresis.artifacts.report.write_paper_table`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from heuresis.artifacts.provenance import provenance_record, utc_now
from heuresis.artifacts.report import save_figure, to_markdown, write_paper_table
from heuresis.targets.builders import BUILDERS, Figure, Own, Table
from heuresis.targets.registry import Target

__all__ = ["TargetFailed", "build", "caption_text"]


class TargetFailed(Exception):
    """The target was written but its job must fail (Table 5 with a failed required check)."""


def caption_text(rst: str) -> str:
    """A caption file's text as one line: reST's ````literal```` marks become single backquotes."""
    return re.sub(r"\s+", " ", rst.replace("``", "`")).strip()


def build(target: Target, inputs: Mapping[str, list[str]], outputs: Mapping[str, str], params: Mapping,
          caption: str, log: Callable[[str], None]) -> None:
    """Compute ``target`` and write its ``outputs`` (name -> path, :func:`~heuresis.targets.registry.target_files`).

    Raises
    ------
    TargetFailed
        After writing, when the builder says the job fails.
    """
    started = utc_now()
    result = BUILDERS[target.builder](target.name, inputs, params)
    items = result if isinstance(result, list) else [result]
    failure = ""
    for item in items:
        prov = provenance_record(stage=target.stage, config=item.config, seeds=item.seeds or None,
                                 inputs=list(item.inputs), started=started)
        prov = {**prov, **item.provenance}
        if isinstance(item, Own):
            path = outputs[item.output] if item.output else next(iter(outputs.values()))
            message = item.write(path, caption, prov)
        elif isinstance(item, Table):
            text = f"{caption} {item.note}".strip()
            stem = Path(outputs[item.output]).with_suffix("")
            write_paper_table(item.numbers, item.display, stem, caption=text, provenance=prov,
                              secrets=item.secrets, highlight=item.highlight)
            if item.log_table:
                log("\n" + to_markdown(item.display, text, item.highlight))
            message, failure = item.log, failure or item.failure
        elif isinstance(item, Figure):
            extra = {"secrets": dict(item.secrets)} if item.secrets is not None else {}
            save_figure(item.fig, Path(outputs["pdf"]).with_suffix(""),
                        provenance={**prov, **extra, "numbers": item.numbers})
            message = item.log
        else:
            raise TypeError(f"target {target.name!r}: its builder returned {type(item).__name__}")
        if message:
            log(message)
    if failure:
        log(failure)
        raise TargetFailed(failure)
