"""The report rubric, declared once (docs/games.md §5): six criteria, 16 points.

Everything that states the rubric is made from :data:`RUBRIC`: the judge's instructions and answer
format in the prompt template ``data/prompts/game_judge.txt`` (:func:`judge_fields`, filled in
before the template's digest is taken, so the digest is that of the text a judge reads), the
judgements table's score columns and their descriptions (:func:`column_description`, which the
viewer shows as :func:`label`), the judge's parser and the games tables (``stages.games.judge``),
and the rubric's line in docs/games.md (tests/test_games_rubric.py checks it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["CAUSAL", "RUBRIC", "RUBRIC_MAX", "Criterion", "column_description", "judge_fields", "label"]


@dataclass(frozen=True)
class Criterion:
    """One criterion of the rubric.

    Its score column, its code and name, its maximum, what it scores (short: the column's
    description) and the judge's instruction.
    """

    column: str
    code: str
    name: str
    max: int
    scores: str
    instruction: str


RUBRIC = (
    Criterion("cr1", "CR1", "true mechanism", 4, "names the causes of the losses",
              "names the causes of the losses the true mechanism states (4: all of them, correctly; 0: none)."),
    Criterion("cr2", "CR2", "trap avoidance", 4, "avoids the trap and says why it is one",
              "does not recommend the trap, and says why the pattern that suggests it is misleading (4: avoids it "
              "and explains why; 0: falls for it)."),
    Criterion("cr3", "CR3", "mechanistic depth", 3, "causal chains rather than correlations",
              "explains survival by causal chains (cause, effect, why) rather than by correlations in the "
              "observed drones."),
    Criterion("ed", "ED", "experimental design", 2, "informative, budget-aware deployments",
              "the deployments were informative (they varied what matters and used the budget sensibly)."),
    Criterion("rq", "RQ", "reflection", 2, "says which observed patterns misled and why",
              "says which observed patterns were misleading and why (selection of survivors, a hidden "
              "confounder, measurement error)."),
    Criterion("du", "DU", "data usage", 1, "conclusions supported by the observations",
              "the conclusions are supported by the observed flights."),
)
#: Causal reasoning: the first three criteria.
CAUSAL = ("cr1", "cr2", "cr3")
RUBRIC_MAX = sum(c.max for c in RUBRIC)


def column_description(c: Criterion) -> str:
    """The score column's description: ``CR1 true mechanism, 0-4: names the causes of the losses``."""
    return f"{c.code} {c.name}, 0-{c.max}: {c.scores}"


def label(c: Criterion) -> str:
    """The criterion as tables, the viewer and the docs name it: ``CR1 true mechanism (0–4)``."""
    return f"{c.code} {c.name} (0–{c.max})"


def judge_fields() -> dict[str, str]:
    """The judge template's rubric fields: its points, one instruction line per criterion, the answer's format."""
    fmt = ", ".join(f'{json.dumps(c.code)}: {{"score": <0-{c.max}>, "reason": "<one line>"}}' for c in RUBRIC)
    return {"rubric_max": str(RUBRIC_MAX),
            "rubric": "\n".join(f"- {c.code} {c.name}, 0 to {c.max}: {c.instruction}" for c in RUBRIC),
            "answer_format": "{" + fmt + ', "failure_mode": "<label>"}'}
