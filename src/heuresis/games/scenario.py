"""Scenarios of the games track (docs/games.md §2): one YAML file per scenario under ``config/games``.

A scenario file names its family, every SCM parameter, the budgets, the bias settings, the
trap and standard designs and the intended mechanism.  A variant may ``extends:`` another
scenario and override it key by key (mappings merged recursively), so adding a scenario is
adding a file.  Loading validates in two steps, as the workflow config does: the JSON schema
(``heuresis/data/game_scenario.schema.yaml``, defaults filled in), then semantic checks (caps
versus the DEF budget, every design inside the action space, the family's environment keys).
Every error names the scenario and the key.

A **design** is a mapping ``{component: DEF points, equipment: true/false}``; components left
out get 0 and equipment left out is not fitted.  :class:`DesignSpace` validates designs and
converts them to the integer vectors the simulator uses.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from heuresis.config.loading import ConfigError, StrictValidator, format_errors, read_yaml, schema_default, with_defaults

__all__ = [
    "SCENARIO_DIR",
    "DesignError",
    "DesignSpace",
    "Scenario",
    "ScenarioError",
    "follows_pattern",
    "load_scenario",
    "load_scenarios",
    "pattern_text",
    "scenario_dir",
    "scenario_files",
    "scenario_path",
    "scenario_schema",
]

#: Default folder of the scenario files, relative to the repository root.
SCENARIO_DIR = schema_default("games", "scenarios_dir")


class ScenarioError(ValueError):
    """An invalid scenario file; the message names the scenario and the key."""


class DesignError(ValueError):
    """An invalid design; the message names the offending field."""




def scenario_schema() -> dict:
    """The parsed scenario schema (``heuresis/data/game_scenario.schema.yaml``)."""
    return yaml.safe_load(resources.files("heuresis").joinpath("data/game_scenario.schema.yaml").read_text())


# --- designs -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DesignSpace:
    """The enforced action space: per-component caps, equipment costs, one total DEF budget."""

    components: tuple[str, ...]
    caps: tuple[int, ...]
    equipment: tuple[str, ...]
    costs: tuple[int, ...]
    budget: int

    @property
    def n_components(self) -> int:
        """Number of components that take DEF points (the first entries of a design vector)."""
        return len(self.components)

    def validate(self, design: Any) -> dict:
        """The design as a complete mapping, or :class:`DesignError` naming the bad field."""
        if not isinstance(design, Mapping):
            raise DesignError(f"a design must be an object mapping components to DEF points, got {type(design).__name__}")
        out: dict[str, Any] = dict.fromkeys(self.components, 0)
        out.update(dict.fromkeys(self.equipment, False))
        for key, value in design.items():
            if key in self.components:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
                    raise DesignError(f"design field {key!r}: DEF must be a whole number, got {value!r}")
                value = int(value)
                cap = self.caps[self.components.index(key)]
                if value < 0:
                    raise DesignError(f"design field {key!r}: DEF {value} is negative")
                if value > cap:
                    raise DesignError(f"design field {key!r}: DEF {value} exceeds the cap of {cap} for {key}")
                out[key] = value
            elif key in self.equipment:
                if not isinstance(value, bool):
                    raise DesignError(f"design field {key!r}: equipment is fitted (true) or not (false), got {value!r}")
                out[key] = value
            else:
                known = list(self.components) + list(self.equipment)
                raise DesignError(f"design field {key!r}: unknown component or equipment; known: {known}")
        load = self.load(out)
        if load > self.budget:
            parts = " + ".join(f"{k} {v}" for k, v in out.items() if not isinstance(v, bool) and v)
            eq = [f"{e} (cost {c})" for e, c in zip(self.equipment, self.costs) if out[e]]
            raise DesignError(f"design field 'total DEF': {load} exceeds the DEF budget of {self.budget} "
                              f"({parts}{' + ' + ' + '.join(eq) if eq else ''})")
        return out

    def load(self, design: Mapping) -> int:
        """DEF points used, equipment costs included (what the budget and the agility penalty see)."""
        return int(sum(int(design.get(c, 0)) for c in self.components)
                   + sum(k for e, k in zip(self.equipment, self.costs) if design.get(e)))

    def vector(self, design: Mapping) -> np.ndarray:
        """Integer vector: DEF per component, then 0/1 per equipment."""
        d = self.validate(design)
        return np.array([d[c] for c in self.components] + [int(d[e]) for e in self.equipment], dtype=np.int64)

    def design(self, vec: Iterable) -> dict:
        """Decode a design vector (DEF per component, then 0/1 per equipment) into a design mapping; inverse of :meth:`vector`."""
        v = [int(x) for x in vec]
        out: dict[str, Any] = {c: v[k] for k, c in enumerate(self.components)}
        out.update({e: bool(v[self.n_components + k]) for k, e in enumerate(self.equipment)})
        return out

    def is_valid_vector(self, vec: np.ndarray) -> bool:
        """Whether a design vector respects the per-component caps, 0/1 equipment and the total DEF budget."""
        c = self.n_components
        if np.any(vec[:c] < 0) or np.any(vec[:c] > np.array(self.caps)) or np.any((vec[c:] < 0) | (vec[c:] > 1)):
            return False
        return int(vec[:c].sum() + (vec[c:] * np.array(self.costs, dtype=np.int64)).sum()) <= self.budget

    def random(self, rng: np.random.Generator, fill: float | None = None) -> np.ndarray:
        """A random valid design: equipment fitted at random, then DEF points dropped one by one."""
        c = self.n_components
        vec = np.zeros(c + len(self.equipment), dtype=np.int64)
        for k in range(len(self.equipment)):
            vec[c + k] = int(rng.random() < 0.5)
        room = self.budget - int((vec[c:] * np.array(self.costs, dtype=np.int64)).sum())
        if room < 0:
            vec[c:] = 0
            room = self.budget
        total = int(round((rng.uniform(0.4, 1.0) if fill is None else fill) * room))
        caps = np.array(self.caps)
        for _ in range(total):
            free = np.flatnonzero(vec[:c] < caps)
            if free.size == 0:
                break
            vec[rng.choice(free)] += 1
        return vec

    def neighbours(self, vec: np.ndarray, step: int = 1) -> np.ndarray:
        """Every valid design one move away: add, remove, or move ``step`` points; toggle equipment."""
        c = self.n_components
        out = []
        for i in range(c):
            for sign in (step, -step):
                v = vec.copy()
                v[i] += sign
                out.append(v)
            for j in range(c):
                if i != j:
                    v = vec.copy()
                    v[i] -= step
                    v[j] += step
                    out.append(v)
        for k in range(len(self.equipment)):
            v = vec.copy()
            v[c + k] = 1 - v[c + k]
            out.append(v)
            if v[c + k] == 1:   # fitting equipment may need points freed: take them from the largest
                w = v.copy()
                need = int(w[:c].sum() + (w[c:] * np.array(self.costs)).sum()) - self.budget
                while need > 0 and w[:c].max() > 0:
                    w[int(np.argmax(w[:c]))] -= 1
                    need -= 1
                out.append(w)
        cand = [v for v in out if self.is_valid_vector(v)]
        return np.array(cand, dtype=np.int64).reshape(-1, c + len(self.equipment))

    def describe(self) -> dict:
        """Return the design space as agents are told it: component caps, equipment costs, DEF budget."""
        return {"components": {c: {"cap": k} for c, k in zip(self.components, self.caps)},
                "equipment": {e: {"cost": k} for e, k in zip(self.equipment, self.costs)},
                "def_budget": self.budget}


# --- scenarios ---------------------------------------------------------------------------------
@dataclass
class Scenario:
    """A validated scenario: the raw mapping plus its design space and convenience accessors."""

    name: str
    spec: dict
    path: str = ""
    space: DesignSpace = field(init=False)

    def __post_init__(self) -> None:
        comps = self.spec["components"]
        eq = self.spec.get("equipment", {})
        self.space = DesignSpace(tuple(comps), tuple(int(v["cap"]) for v in comps.values()), tuple(eq),
                                 tuple(int(v["cost"]) for v in eq.values()), int(self.spec["def_budget"]))

    def __getitem__(self, key: str) -> Any:
        return self.spec[key]

    @property
    def family(self) -> str:
        """Name of the scenario's SCM family (a key of :data:`heuresis.games.scm.FAMILIES`)."""
        return self.spec["family"]

    @property
    def budgets(self) -> dict:
        """The play budgets: ``stage1_drones``, ``stage1_deployments``, ``max_per_deployment``, ``stage2_fleet``."""
        return self.spec["budgets"]

    @property
    def threshold_margin(self) -> float:
        """Distance below the verified optimum at which the margin rule sets the win threshold."""
        return float(self.spec["threshold_margin"])

    def measurable_variables(self) -> list[str]:
        """List the hidden variables the measurement query reports: ``measurable``, else the family's default."""
        from heuresis.games.scm import FAMILIES
        own = self.spec.get("measurable")
        return list(FAMILIES.lookup(self.family).default_measurable if own is None else own)

    @property
    def threshold(self) -> float | None:
        """The fixed win threshold, or None under the margin rule (``optimum - threshold_margin``)."""
        t = self.spec.get("threshold")
        return None if t is None else float(t)

    def follows_trap(self, design: Mapping | None) -> bool | None:
        """Whether ``design`` matches the scenario's ``trap_pattern`` (every condition holds); None for no design.

        A condition sums the DEF points of the components it names (equipment counts 1 when
        fitted) and compares the sum with ``at_least`` or ``at_most``.
        """
        if design is None:
            return None
        return follows_pattern(self.spec["trap_pattern"], self.space.validate(design))

    def visible_variables(self) -> list[str]:
        """List the environment variables the scenario shows per drone (its family decides which)."""
        from heuresis.games.scm import FAMILIES
        return FAMILIES.lookup(self.family).visible(self.spec)


def _merge(base: Mapping, override: Mapping) -> dict:
    out = copy.deepcopy(dict(base))
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) and k not in _REPLACED:
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


#: Keys replaced whole by a variant, never merged: a design or a history is one object.
_REPLACED = {"trap_design", "standard_design", "calibrated_design", "history"}


def follows_pattern(pattern, design: Mapping) -> bool:
    """Whether ``design`` meets every condition of a trap pattern (fields left out count 0, fitted equipment 1)."""
    for cond in pattern:
        total = sum(int(design.get(f) or 0) for f in cond["of"])
        if "at_least" in cond and total < cond["at_least"]:
            return False
        if "at_most" in cond and total > cond["at_most"]:
            return False
    return True


def pattern_text(pattern) -> str:
    """A trap pattern in words, e.g. ``antenna >= 4 and emi_filter <= 0``."""
    parts = []
    for cond in pattern:
        lhs = " + ".join(cond["of"])
        parts.append(f"{lhs} >= {cond['at_least']}" if "at_least" in cond else f"{lhs} <= {cond['at_most']}")
    return " and ".join(parts)


def _read(path: Path, seen: tuple[str, ...] = ()) -> dict:
    try:
        raw = read_yaml(path, "scenario file") or {}
    except ConfigError as exc:
        raise ScenarioError(f"scenario {path.stem!r}: {exc}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"scenario {path.stem!r}: the file must hold a mapping")
    parent = raw.get("extends")
    if parent is None:
        return raw
    if parent in seen or parent == path.stem:
        raise ScenarioError(f"scenario {path.stem!r}: key extends: cycle through {parent!r}")
    ppath = path.parent / f"{parent}.yaml"
    if not ppath.exists():
        raise ScenarioError(f"scenario {path.stem!r}: key extends: no scenario file {ppath}")
    merged = _merge(_read(ppath, (*seen, path.stem)), raw)
    merged["extends"] = parent
    return merged


def _errors(name: str, spec: dict) -> list[str]:
    validator = with_defaults(StrictValidator)(scenario_schema())
    msgs = format_errors(validator.iter_errors(spec),
                         lambda path: f"scenario {name!r}: key {'.'.join(map(str, path)) or '<top level>'}")
    if msgs:
        return msgs
    return _semantic_errors(name, spec)


def _semantic_errors(name: str, spec: dict) -> list[str]:
    from heuresis.games.scm import FAMILIES

    msgs: list[str] = []
    pre = f"scenario {name!r}: key"
    if spec["name"] != name:
        msgs.append(f"{pre} name: {spec['name']!r} differs from the file name {name!r}")
    if spec["family"] not in FAMILIES:
        return [*msgs, f"{pre} family: unknown family {spec['family']!r}; known: {sorted(FAMILIES)}"]
    comps = spec["components"]
    if not any(c["critical"] for c in comps.values()):
        msgs.append(f"{pre} components: no critical component (a drone could never be destroyed)")
    if sum(c["target_weight"] for c in comps.values()) <= 0:
        msgs.append(f"{pre} components: every target_weight is zero")
    for e in spec.get("equipment", {}):
        if e in comps:
            msgs.append(f"{pre} equipment.{e}: also a component")
    for k in spec["env_damage"].get("storm", {}):
        if k not in comps:
            msgs.append(f"{pre} env_damage.storm.{k}: unknown component {k!r}; known: {list(comps)}")
    b = spec["budgets"]
    if b["max_per_deployment"] > b["stage1_drones"]:
        msgs.append(f"{pre} budgets.max_per_deployment: {b['max_per_deployment']} exceeds stage1_drones "
                    f"{b['stage1_drones']}")
    msgs.extend(f"{pre} environment.{m}" for m in FAMILIES.lookup(spec["family"]).check(spec))
    known = FAMILIES.lookup(spec["family"]).measurable
    for k, v in enumerate(spec.get("measurable") or []):
        if v not in known:
            msgs.append(f"{pre} measurable.{k}: {v!r} is not measurable in the {spec['family']} family; "
                        f"known: {sorted(known)}")
    scen = Scenario(name, spec)
    fields = [*scen.space.components, *scen.space.equipment]
    for k, cond in enumerate(spec["trap_pattern"]):
        if not ({"at_least", "at_most"} & set(cond)):
            msgs.append(f"{pre} trap_pattern.{k}: needs at_least or at_most beside of")
        for f in cond["of"]:
            if f not in fields:
                msgs.append(f"{pre} trap_pattern.{k}.of: unknown component or equipment {f!r}; known: {fields}")
    designs = [("trap_design", spec["trap_design"]), ("standard_design", spec["standard_design"])]
    if spec.get("calibrated_design") is not None:
        designs.append(("calibrated_design", spec["calibrated_design"]))
    designs += [(f"history.groups.{k}.design", g["design"]) for k, g in enumerate(spec["history"]["groups"])]
    for key, d in designs:
        try:
            scen.space.validate(d)
        except DesignError as exc:
            msgs.append(f"{pre} {key}: {exc}")
    if msgs:
        return msgs
    pat = pattern_text(spec["trap_pattern"])
    if not scen.follows_trap(spec["trap_design"]):
        msgs.append(f"{pre} trap_pattern: the trap design does not match its own pattern ({pat})")
    if scen.follows_trap(spec["standard_design"]):
        msgs.append(f"{pre} trap_pattern: the standard design matches the trap pattern ({pat})")
    if spec.get("calibrated_design") is not None and scen.follows_trap(spec["calibrated_design"]):
        msgs.append(f"{pre} trap_pattern: the calibrated design matches the trap pattern ({pat})")
    return msgs


def scenario_path(name_or_path: str | Path, folder: str | Path | None = None) -> Path:
    """The file of a scenario given by name (``folder``/``name``.yaml) or by path."""
    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = Path(folder or scenario_dir()) / f"{name_or_path}.yaml"
    return p


def scenario_files(name_or_path: str | Path, folder: str | Path | None = None) -> list[str]:
    """The scenario's file and the files it ``extends:``, child first (what its jobs depend on).

    A missing parent or a cycle ends the list here; :func:`load_scenario` reports both.
    """
    files: list[str] = []
    path = scenario_path(name_or_path, folder)
    while path.exists() and str(path) not in files:
        files.append(str(path))
        try:
            raw = read_yaml(path, "scenario file") or {}
        except ConfigError:
            break
        parent = raw.get("extends") if isinstance(raw, dict) else None
        if not parent:
            break
        path = path.parent / f"{parent}.yaml"
    return files


def load_scenario(name_or_path: str | Path, folder: str | Path | None = None) -> Scenario:
    """Load and validate one scenario by name (``folder``/``name``.yaml) or by path."""
    p = scenario_path(name_or_path, folder)
    if not p.exists():
        raise ScenarioError(f"scenario {p.stem!r}: no scenario file {p}")
    spec = _read(p)
    errors = _errors(p.stem, spec)
    if errors:
        raise ScenarioError("\n".join(errors))
    return Scenario(p.stem, spec, str(p))


def load_scenarios(folder: str | Path | None = None, names: Iterable[str] | None = None) -> dict[str, Scenario]:
    """Every scenario of ``folder`` (default ``config/games``), by name, validated."""
    folder = Path(folder or scenario_dir())
    if not folder.is_dir():
        raise ScenarioError(f"no scenario folder {folder}")
    wanted = list(names) if names is not None else sorted(p.stem for p in folder.glob("*.yaml"))
    return {n: load_scenario(n, folder) for n in wanted}


def scenario_dir() -> Path:
    """``config/games`` of the current folder, else of the repository this package lives in."""
    here = Path(SCENARIO_DIR)
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[3] / SCENARIO_DIR
