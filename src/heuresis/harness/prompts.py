"""Prompt templates (docs/design.md §5.1 prompt levels and stated targets).

Templates are loaded from ``heuresis/data/prompts/*.txt`` and filled with
:class:`string.Template` (``$name`` fields).
Level 0 is the neutral task statement (with the limits, which are always visible); each higher
level adds one paragraph: 1 budgets and the scoring statement, 2 the warning that standard
algorithms can fail under nonlinear or heteroscedastic mechanisms, 3 PC's deletion rule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from functools import cache
from importlib import resources
from string import Template

from heuresis.causal.games.rubric import judge_fields
from heuresis.harness.conditions import TARGETS

__all__ = ["EPISODE_PROMPTS", "JUDGE_PROMPTS", "LAST_TURN_TEXT", "LEAKAGE_PROMPTS", "MODE_PROMPTS", "play_prompts",
           "prompt_digests", "render", "template"]

#: The templates an episode's messages are built from (:mod:`heuresis.harness.episode`, :mod:`heuresis.harness.loop`).
EPISODE_PROMPTS = ("system", "level0", "level1", "level2", "level3", "start_guided", "start_unguided", "guided_log",
                   *(f"target_{t}" for t in TARGETS), "last_turn", "retry", "nudge")
#: The prompt files of each games mode, by role (:mod:`heuresis.stages.games.play`); recorded in every transcript.
MODE_PROMPTS = {
    "agentic": {"system": "game_agentic_system", "task": "game_task", "hints": "game_hints",
                "tools": "game_agentic_tools", "react": "game_react", "analysis": "game_analysis",
                "nudge": "game_nudge"},
    "prompting": {"system": "game_prompting_system", "task": "game_task", "hints": "game_hints",
                  "format": "game_prompting_format", "result": "game_prompting_result",
                  "retry": "game_prompting_retry", "query": "game_prompting_query"},
}
#: The games judge's templates (:mod:`heuresis.stages.games.judge`).
JUDGE_PROMPTS = ("game_judge_system", "game_judge")
#: The leakage probe's templates (:mod:`heuresis.stages.leakage`).
LEAKAGE_PROMPTS = ("leakage_system", "leakage")


def play_prompts(mode: str) -> list[str]:
    """Every template a play of ``mode`` may be built from (the debrief included)."""
    return [*MODE_PROMPTS[mode].values(), "game_debrief"]

LAST_TURN_TEXT = {
    "none": "the episode ends at once and your working graph is scored as unfinished.",
    "once": "get one last turn in which you may only submit.",
    "retry": "get one last turn in which you may only submit, with one retry if your edge list cannot be read.",
}


#: Fields a template's file leaves to a fact declared elsewhere, filled in when it is read (so the
#: template's digest is that of the text its readers get): the judge's rubric (:mod:`heuresis.causal.games.rubric`).
DECLARED_FIELDS: dict[str, Callable[[], dict[str, str]]] = {"game_judge": judge_fields}


@cache
def template(name: str) -> Template:
    """The template ``data/prompts/<name>.txt``, with its :data:`DECLARED_FIELDS` filled in."""
    path = resources.files("heuresis").joinpath(f"data/prompts/{name}.txt")
    if not path.is_file():
        raise ValueError(f"no prompt template {name!r} (expected {path})")
    text = path.read_text()
    if name in DECLARED_FIELDS:
        text = Template(text).safe_substitute(**DECLARED_FIELDS[name]())
    return Template(text)


def render(name: str, **fields) -> str:
    """Fill template ``name``; a missing field is an error naming it."""
    try:
        return template(name).substitute(**fields).strip()
    except KeyError as exc:
        raise ValueError(f"prompt template {name!r} needs field {exc.args[0]!r}") from None


def prompt_digests(names: Iterable[str]) -> dict[str, str]:
    """Each template's SHA-256 (16 hex digits) by name.

    A job's params: editing a prompt reruns the jobs whose messages it builds, and only them.
    """
    return {name: hashlib.sha256(template(name).template.encode()).hexdigest()[:16] for name in sorted(set(names))}
