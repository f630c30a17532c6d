"""Experimental conditions of an episode (SPEC §5.1) and their expansion from the config.

A :class:`Condition` names everything an episode's setting depends on except the instance:
agent, toolbox, guided/unguided start, prompt level, stated target, budget setting, last-turn
setting and repeat index.  Its :attr:`Condition.condition_id` (agent excluded, it has its own
path level) is the stable string used in artifact paths, e.g. ``full-guided-p1-none-standard-once-r0``.

The config declares *grids* under ``episodes.grids`` (a mapping, so ``--configfile`` files can
add one) and chooses the active ones with ``episodes.run`` (a list, replaced wholesale by an
override): :func:`expand_conditions` returns the cells of the active grids, each with the
families and split it runs on.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

__all__ = ["Condition", "Cell", "expand_conditions", "TOOLBOXES", "TARGETS", "LAST_TURNS", "PROMPT_LEVELS"]

TOOLBOXES = ("full", "minimal")
TARGETS = ("none", "cpdag", "dag")
LAST_TURNS = ("none", "once", "retry")
PROMPT_LEVELS = (0, 1, 2, 3)
_NAME = re.compile(r"^[a-z0-9_]+$")
_ID = re.compile(r"^(full|minimal)-(guided|unguided)-p([0-3])-(none|cpdag|dag)-([a-z0-9_]+)-(none|once|retry)-r(\d+)$")


@dataclass(frozen=True)
class Condition:
    """The setting of an episode (everything but the instance)."""

    agent: str
    toolbox: str = "full"
    guided: bool = False
    prompt_level: int = 0
    target: str = "none"
    budget: str = "standard"
    last_turn: str = "once"
    repeat: int = 0

    def __post_init__(self) -> None:
        if self.toolbox not in TOOLBOXES:
            raise ValueError(f"unknown toolbox {self.toolbox!r}; known: {list(TOOLBOXES)}")
        if self.target not in TARGETS:
            raise ValueError(f"unknown stated target {self.target!r}; known: {list(TARGETS)}")
        if self.last_turn not in LAST_TURNS:
            raise ValueError(f"unknown last-turn setting {self.last_turn!r}; known: {list(LAST_TURNS)}")
        if self.prompt_level not in PROMPT_LEVELS:
            raise ValueError(f"prompt level must be one of {list(PROMPT_LEVELS)}, got {self.prompt_level!r}")
        if not _NAME.match(self.budget):
            raise ValueError(f"budget setting name {self.budget!r} must match [a-z0-9_]+")
        if not isinstance(self.repeat, int) or self.repeat < 0:
            raise ValueError(f"repeat must be a non-negative integer, got {self.repeat!r}")

    @property
    def condition_id(self) -> str:
        """Stable path component naming the condition (the agent is a separate path level)."""
        start = "guided" if self.guided else "unguided"
        return (f"{self.toolbox}-{start}-p{self.prompt_level}-{self.target}-{self.budget}-"
                f"{self.last_turn}-r{self.repeat}")

    @classmethod
    def from_id(cls, agent: str, condition_id: str) -> Condition:
        """Inverse of :attr:`condition_id`."""
        m = _ID.match(condition_id)
        if not m:
            raise ValueError(f"malformed condition id {condition_id!r}")
        toolbox, start, level, target, budget, last_turn, repeat = m.groups()
        return cls(agent, toolbox, start == "guided", int(level), target, budget, last_turn, int(repeat))

    def as_dict(self) -> dict:
        return {**asdict(self), "condition_id": self.condition_id}


@dataclass(frozen=True)
class Cell:
    """A condition with the families and split its episodes run on."""

    condition: Condition
    families: tuple[str, ...]
    split: str


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def expand_conditions(config: Mapping) -> list[Cell]:
    """Every cell of the active grids (``episodes.run``), in a stable order, without duplicates.

    A grid maps each condition field to a list of values (a scalar is a one-value list):
    ``agents``, ``toolbox``, ``guided``, ``prompt_level``, ``target``, ``budget``, ``last_turn``,
    plus ``repeats`` (number of repeat indices), ``families`` (default: every family) and
    ``split`` (default ``test``).
    """
    eps = config["episodes"]
    all_families = tuple(config["families"])
    cells: dict[tuple, Cell] = {}
    for gname in eps["run"]:
        g = eps["grids"][gname]
        families = tuple(g.get("families") or all_families)
        axes = [_as_list(g["agents"]), _as_list(g.get("toolbox", "full")), _as_list(g.get("guided", False)),
                _as_list(g.get("prompt_level", 0)), _as_list(g.get("target", "none")),
                _as_list(g.get("budget", "standard")), _as_list(g.get("last_turn", "once")),
                range(int(g.get("repeats", 1)))]
        for agent, toolbox, guided, level, target, budget, last_turn, r in itertools.product(*axes):
            cond = Condition(agent, toolbox, bool(guided), int(level), target, budget, last_turn, r)
            split = g.get("split", "test")
            key = (cond, split)
            if key in cells:  # the same condition in two grids: union of families
                prev = cells[key]
                families_u = prev.families + tuple(f for f in families if f not in prev.families)
                cells[key] = Cell(cond, families_u, split)
            else:
                cells[key] = Cell(cond, families, split)
    return list(cells.values())
