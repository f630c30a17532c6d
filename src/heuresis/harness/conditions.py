"""Experimental conditions of an episode (docs/design.md §5.1) and their expansion from the config.

A :class:`Condition` names everything an episode's setting depends on except the instance:
agent, toolbox, guided/unguided start, prompt level, stated target, budget setting, last-turn
setting and repeat index.  Its :attr:`Condition.condition_id` (agent excluded, it has its own
path level) is the stable string used in artifact paths, e.g. ``full-guided-p1-none-standard-once-r0``.

The config declares *grids* under ``episodes.grids`` (a mapping, so ``--configfile`` files can
add one) and chooses the active ones with ``episodes.run`` (a list, replaced wholesale by an
override): :func:`expand_conditions` returns the cells of the active grids, each with the
families and split it runs on and, per family, the instances it runs on.  A grid may restrict
its instances (``instances: 16`` — the first 16 of the split — or ``instances: [8, 24]`` — indices
8 to 23) and give its repeats per family (``repeats: {lg: 3, default: 1}``: repeat ``r`` of a
condition runs on the families with more than ``r`` repeats).  :func:`grid_plan` counts the
episodes each active grid plans.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from heuresis.config.loading import schema_default
from heuresis.registry import MODEL_KINDS

__all__ = [
    "CONDITION_ID_PATTERN",
    "LAST_TURNS",
    "LAST_TURN_REQUESTS",
    "PROMPT_LEVELS",
    "TARGETS",
    "TOOLBOXES",
    "Cell",
    "Condition",
    "GridError",
    "cell_records",
    "condition_label",
    "expand_conditions",
    "grid_instances",
    "grid_plan",
    "grid_repeats",
    "instance_range",
]

TOOLBOXES = ("full", "minimal")
TARGETS = ("none", "cpdag", "dag")
LAST_TURNS = ("none", "once", "retry")
PROMPT_LEVELS = (0, 1, 2, 3)
#: Requests of the last turn at most (``none``: no last turn; ``retry``: one retry after a rejected list).
LAST_TURN_REQUESTS = {"none": 0, "once": 1, "retry": 2}
_NAME = re.compile(r"^[a-z0-9_]+$")
#: A condition id (:attr:`Condition.condition_id`) as a regular expression; groups: toolbox, start,
#: prompt level, target, budget, last turn, repeat. The workflow's wildcard constraint is this pattern.
CONDITION_ID_PATTERN = (f"({'|'.join(TOOLBOXES)})-(guided|unguided)-p([{PROMPT_LEVELS[0]}-{PROMPT_LEVELS[-1]}])-"
                        f"({'|'.join(TARGETS)})-([a-z0-9_]+)-({'|'.join(LAST_TURNS)})-r(\\d+)")
_ID = re.compile(f"^{CONDITION_ID_PATTERN}$")
#: The condition fields' defaults of a grid (``episodes.grids.*``), from the config schema.
_GRID_DEFAULTS = {k: schema_default("episodes", "grids", "*", k)
                  for k in ("toolbox", "guided", "prompt_level", "target", "budget", "last_turn", "repeats", "split")}


@dataclass(frozen=True)
class Condition:
    """The setting of an episode (everything but the instance); a field left out is the grids' default."""

    agent: str
    toolbox: str = _GRID_DEFAULTS["toolbox"][0]
    guided: bool = _GRID_DEFAULTS["guided"][0]
    prompt_level: int = _GRID_DEFAULTS["prompt_level"][0]
    target: str = _GRID_DEFAULTS["target"][0]
    budget: str = _GRID_DEFAULTS["budget"][0]
    last_turn: str = _GRID_DEFAULTS["last_turn"][0]
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
        """Return the condition's fields plus its ``condition_id`` as a plain dict."""
        return {**asdict(self), "condition_id": self.condition_id}


def condition_label(fields: Mapping) -> str:
    """A condition in words, from its fields (a row with ``toolbox`` ... ``repeat``).

    ``full toolbox, guided, prompt 1, target none, budget standard, last turn once, repeat 0``: what a
    ``condition_id`` such as ``full-guided-p1-none-standard-once-r0`` encodes, for a table's reader.
    """
    return (f"{fields['toolbox']} toolbox, {'guided' if bool(fields['guided']) else 'unguided'}, "
            f"prompt {int(fields['prompt_level'])}, target {fields['target']}, budget {fields['budget']}, "
            f"last turn {fields['last_turn']}, repeat {int(fields['repeat'])}")


@dataclass(frozen=True)
class Cell:
    """A condition with the families and split its episodes run on, and the instances per family.

    ``instances`` maps each family to the instance indices of the split the condition runs on
    there (sorted), or to ``None``: every instance of the split (so is a missing map).
    """

    condition: Condition
    families: tuple[str, ...]
    split: str
    # not compared (a mapping is unhashable): a cell is identified by its condition and split
    instances: Mapping[str, tuple[int, ...] | None] | None = field(default=None, compare=False)

    def indices(self, family: str, n: int) -> tuple[int, ...]:
        """Instance indices on ``family`` (``n``: instances of the split)."""
        if family not in self.families:
            return ()
        if self.instances is None or self.instances.get(family) is None:
            return tuple(range(n))
        return self.instances[family]  # type: ignore[return-value]


class GridError(ValueError):
    """A bad instance subset or repeat count of a grid; ``key`` is the offending key under the grid."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def instance_range(grid: Mapping, n: int | None = None) -> tuple[int, int] | None:
    """Return a grid's ``instances`` subset as ``(start, stop)``, or ``None`` when absent (every instance).

    An integer N means ``(0, min(N, n))``: the first N, or every instance of a smaller split; a
    pair [start, stop] is itself.  With ``n`` (instances of the split) a range must fit in it.

    Raises :class:`GridError` when the subset is malformed or does not fit.
    """
    sub = grid.get("instances")
    if sub is None:
        return None
    if isinstance(sub, bool) or not isinstance(sub, (int, list, tuple)):
        raise GridError("instances", f"must be a count N (the first N instances) or a range [start, stop], "
                                     f"got {sub!r}")
    if isinstance(sub, int):
        start, stop = 0, sub if n is None else min(sub, n)
        if sub < 1:
            raise GridError("instances", f"a count of instances must be >= 1, got {sub}")
    else:
        if len(sub) != 2 or not all(isinstance(b, int) and not isinstance(b, bool) for b in sub):
            raise GridError("instances", f"a range is two whole numbers [start, stop], got {list(sub)!r}")
        start, stop = sub
    if start < 0 or stop <= start:  # (a count N >= 1 on an empty split lands here too)
        raise GridError("instances", f"empty or negative instance range {[start, stop]} (need 0 <= start < stop)")
    if n is not None and stop > n:
        raise GridError("instances", f"{sub!r} asks for instances up to index {stop - 1}, but the split has "
                                     f"{n} (indices 0..{n - 1})")
    return start, stop


def grid_instances(grid: Mapping, n: int) -> tuple[int, ...]:
    """Instance indices a grid runs on: ``instances`` N (the first N), [start, stop) or absent (all ``n``)."""
    rng = instance_range(grid, n)
    return tuple(range(n)) if rng is None else tuple(range(*rng))


def grid_repeats(grid: Mapping, families: tuple[str, ...]) -> dict[str, int]:
    """Return the repeats per family of a grid.

    ``repeats`` is an integer (every family) or a mapping by family with an optional ``default``
    for the families it does not name.

    Raises :class:`GridError` (its ``key`` names the entry) for a family outside the grid, a
    family left without a count, or a count that is not a whole number >= 1.
    """
    rep = grid.get("repeats", _GRID_DEFAULTS["repeats"])
    if isinstance(rep, Mapping):
        for k, v in rep.items():
            if k != "default" and k not in families:
                raise GridError(f"repeats.{k}", f"{k!r} is not a family of this grid; its families: "
                                                f"{list(families)} (or use the key default)")
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise GridError(f"repeats.{k}", f"must be a whole number >= 1, got {v!r}")
        missing = [f for f in families if f not in rep and "default" not in rep]
        if missing:
            raise GridError("repeats", f"no repeat count for families {missing} (name them or give a default)")
        return {f: rep.get(f, rep.get("default")) for f in families}
    if isinstance(rep, bool) or not isinstance(rep, int) or rep < 1:
        raise GridError("repeats", f"must be a whole number >= 1 or a mapping by family, got {rep!r}")
    return dict.fromkeys(families, rep)


def _grid_cells(config: Mapping, g: Mapping) -> list[Cell]:
    """The cells of one grid (before merging with other grids)."""
    all_families = tuple(config["families"])
    families = tuple(g.get("families") or all_families)
    g = {**_GRID_DEFAULTS, **g}   # a grid straight from a file, not yet validated, gets the schema's defaults
    split = g["split"]
    # None: every instance of the split (the split's size is read only for a subset)
    idx = grid_instances(g, int(config["instances"][f"n_{split}"])) if g.get("instances") is not None else None
    reps = grid_repeats(g, families)
    axes = [_as_list(g["agents"]), _as_list(g["toolbox"]), _as_list(g["guided"]), _as_list(g["prompt_level"]),
            _as_list(g["target"]), _as_list(g["budget"]), _as_list(g["last_turn"]), range(max(reps.values()))]
    out = []
    for agent, toolbox, guided, level, target, budget, last_turn, r in itertools.product(*axes):
        fams = tuple(f for f in families if reps[f] > r)
        cond = Condition(agent, toolbox, bool(guided), int(level), target, budget, last_turn, r)
        out.append(Cell(cond, fams, split, dict.fromkeys(fams, idx)))
    return out


def _union(a: Mapping, b: Mapping, family: str) -> tuple[int, ...] | None:
    """Instances of ``family`` in either cell's map (``None``: every instance; absent: none)."""
    ia, ib = a.get(family, ()), b.get(family, ())
    if ia is None or ib is None:
        return None
    return tuple(sorted(set(ia) | set(ib)))


def expand_conditions(config: Mapping) -> list[Cell]:
    """Every cell of the active grids (``episodes.run``), in a stable order, without duplicates.

    A grid maps each condition field to a list of values (a scalar is a one-value list):
    ``agents``, ``toolbox``, ``guided``, ``prompt_level``, ``target``, ``budget``, ``last_turn``,
    plus ``repeats`` (number of repeat indices: an integer, or per family with an optional
    ``default``), ``families`` (default: every family), ``split`` (default ``test``) and
    ``instances`` (default: every instance of the split; N: the first N; [start, stop]).  The
    same condition in two grids runs on the union of their families and, per family, of their
    instances.
    """
    eps = config["episodes"]
    cells: dict[tuple, Cell] = {}
    for gname in eps["run"]:
        for cell in _grid_cells(config, eps["grids"][gname]):
            key = (cell.condition, cell.split)
            prev = cells.get(key)
            if prev is None:
                cells[key] = cell
                continue
            families_u = prev.families + tuple(f for f in cell.families if f not in prev.families)
            inst = {f: _union(prev.instances, cell.instances, f) for f in families_u}  # type: ignore[arg-type]
            cells[key] = Cell(cell.condition, families_u, cell.split, inst)
    return list(cells.values())


def cell_records(config: Mapping) -> list[dict]:
    """List every configured result (agent x condition) as a plain record (Table 12).

    A record holds the condition fields, the families, the split and the number of instances per
    family.
    """
    out = []
    for c in expand_conditions(config):
        n = int(config["instances"][f"n_{c.split}"])
        out.append({**c.condition.as_dict(), "families": list(c.families), "split": c.split,
                    "instances": {f: len(c.indices(f, n)) for f in c.families}})
    return out


def _is_llm(config: Mapping, agent: str) -> bool:
    return config.get("agents", {}).get(agent, {}).get("kind") in MODEL_KINDS


def grid_plan(config: Mapping) -> list[dict]:
    """Episodes each active grid plans, LLM episodes among them, and their requests at most.

    One row per grid of ``episodes.run``: ``episodes`` (every agent), ``llm_episodes``,
    ``llm_requests`` (per LLM episode its budget's ``turns`` plus the last-turn requests — an upper
    bound; transport retries of a request are not counted), and ``new_llm_episodes`` and
    ``new_llm_requests``: those not already planned by an earlier grid of the list (a condition
    shared by two grids runs once), so their sums over the grids are the run's totals.
    """
    eps = config["episodes"]
    budgets = eps.get("budgets", {})
    seen: set[tuple] = set()
    rows = []
    for gname in eps["run"]:
        n_all = n_llm = n_req = n_new = n_new_req = 0
        for cell in _grid_cells(config, eps["grids"][gname]):
            c = cell.condition
            n = int(config["instances"][f"n_{cell.split}"])
            k = sum(len(cell.indices(f, n)) for f in cell.families)
            n_all += k
            if not _is_llm(config, c.agent):
                continue
            n_llm += k
            per = int(budgets[c.budget]["turns"]) + LAST_TURN_REQUESTS[c.last_turn]
            n_req += k * per
            for f in cell.families:
                for i in cell.indices(f, n):
                    key = (c, cell.split, f, i)
                    if key not in seen:
                        seen.add(key)
                        n_new += 1
                        n_new_req += per
        rows.append({"grid": gname, "episodes": n_all, "llm_episodes": n_llm, "llm_requests": n_req,
                     "new_llm_episodes": n_new, "new_llm_requests": n_new_req})
    return rows
