"""Prompt templates (docs/design.md §5.1 prompt levels and stated targets).

Templates are loaded from ``heuresis/data/prompts/*.txt`` and filled with
:class:`string.Template` (``$name`` fields).
Level 0 is the neutral task statement (with the limits, which are always visible); each higher
level adds one paragraph: 1 budgets and the scoring statement, 2 the warning that standard
algorithms can fail under nonlinear or heteroscedastic mechanisms, 3 PC's deletion rule.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

__all__ = ["LAST_TURN_TEXT", "render", "template"]

LAST_TURN_TEXT = {
    "none": "the episode ends at once and your working graph is scored as unfinished.",
    "once": "get one last turn in which you may only submit.",
    "retry": "get one last turn in which you may only submit, with one retry if your edge list cannot be read.",
}


@cache
def template(name: str) -> Template:
    """The template ``data/prompts/<name>.txt``."""
    path = resources.files("heuresis").joinpath(f"data/prompts/{name}.txt")
    if not path.is_file():
        raise ValueError(f"no prompt template {name!r} (expected {path})")
    return Template(path.read_text())


def render(name: str, **fields) -> str:
    """Fill template ``name``; a missing field is an error naming it."""
    try:
        return template(name).substitute(**fields).strip()
    except KeyError as exc:
        raise ValueError(f"prompt template {name!r} needs field {exc.args[0]!r}") from None
