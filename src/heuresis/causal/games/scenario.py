"""Scenarios of the games track (docs/games.md §2): one YAML file per scenario.

Two sets: CausalGame's 14 scenarios (``config/games/causalgame``, the default folder, loaded as
:class:`~heuresis.causal.games.causalgame.CGScenario`) and this track's own 14 (``config/games``), whose
format this module defines.

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
from typing import Any, ClassVar

import yaml

from heuresis.causal.games.design import ABLATION_SEP, VARIANT_SEP, DesignError, DesignSpace, follows_pattern
from heuresis.config.loading import (
    CHECKOUT,
    ConfigError,
    StrictValidator,
    format_errors,
    read_yaml,
    schema_default,
    with_defaults,
)

__all__ = [
    "SCENARIO_DIR",
    "DesignError",
    "DesignSpace",
    "Scenario",
    "ScenarioError",
    "follows_pattern",
    "is_causalgame_file",
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


def scenario_schema() -> dict:
    """The parsed scenario schema (``heuresis/data/game_scenario.schema.yaml``)."""
    return yaml.safe_load(resources.files("heuresis").joinpath("data/game_scenario.schema.yaml").read_text())


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

    #: Ablation disclosures: CausalGame's scenarios only (:func:`heuresis.causal.games.causalgame.ablation`).
    disclosures: ClassVar[tuple[str, ...]] = ()

    @property
    def seed_name(self) -> str:
        """The name a play's draws derive from (with the scenario seed and the play seed): the scenario's."""
        return self.name

    @property
    def family(self) -> str:
        """Name of the scenario's SCM family (a key of :data:`heuresis.causal.games.scm.FAMILIES`)."""
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
        from heuresis.causal.games.scm import FAMILIES
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
        from heuresis.causal.games.scm import FAMILIES
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


def pattern_text(pattern) -> str:
    """A trap pattern in words, e.g. ``antenna >= 4 and emi_filter <= 0`` (``no trap`` for None)."""
    if pattern is None:
        return "no trap"
    parts = []
    for cond in pattern:
        lhs = " + ".join(cond["of"])
        if "in" in cond:
            parts.append(f"{lhs} in {{{', '.join(map(str, cond['in']))}}}")
            continue
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
    from heuresis.causal.games.scm import FAMILIES

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
    if p.suffix not in (".yaml", ".yml"):   # an ablation (NAME~DISCLOSURE) is NAME's file
        p = Path(folder or scenario_dir()) / f"{str(name_or_path).split(ABLATION_SEP, 1)[0]}.yaml"
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
    """Load and validate one scenario by name (``folder``/``name``.yaml) or by path.

    A file that names a ``model`` (its own or through ``extends:``) is one of CausalGame's
    scenarios and loads as a :class:`~heuresis.causal.games.causalgame.CGScenario`, which plays through
    the same game, tools and workflow.
    """
    if VARIANT_SEP in str(name_or_path) and Path(str(name_or_path)).suffix not in (".yaml", ".yml"):
        raise ScenarioError(f"scenario {str(name_or_path)!r}: a test variant has no file; its references job draws it "
                            f"from the test seed (games.test_variants) and its plays rebuild it from its references")
    p = scenario_path(name_or_path, folder)
    if not p.exists():
        raise ScenarioError(f"scenario {p.stem!r}: no scenario file {p}")
    name = str(name_or_path)
    if ABLATION_SEP in name and Path(name).suffix not in (".yaml", ".yml"):
        base = load_scenario(p, folder)
        disclosure = name.split(ABLATION_SEP, 1)[1]
        from heuresis.causal.games.causalgame import CGScenario, ablation
        if not isinstance(base, CGScenario):
            raise ScenarioError(f"scenario {name!r}: an ablation ({ABLATION_SEP}DISCLOSURE) is of a CausalGame "
                                f"scenario; {p.stem!r} is this track's own")
        try:
            return ablation(base, disclosure)
        except ValueError as exc:
            raise ScenarioError(f"scenario {name!r}: {exc}") from None
    if is_causalgame_file(p):
        from heuresis.causal.games.causalgame import load_cg
        try:
            return load_cg(p)  # type: ignore[return-value]
        except (ValueError, FileNotFoundError, KeyError) as exc:
            raise ScenarioError(f"scenario {p.stem!r}: {exc}") from None
    spec = _read(p)
    errors = _errors(p.stem, spec)
    if errors:
        raise ScenarioError("\n".join(errors))
    return Scenario(p.stem, spec, str(p))


def is_causalgame_file(path: Path) -> bool:
    """Whether a scenario file (or a file it extends) is in CausalGame's format (it names a ``model``)."""
    for f in scenario_files(path):
        try:
            raw = read_yaml(Path(f), "scenario file") or {}
        except ConfigError:       # unreadable: loaded as this track's format, whose loader names the error
            return False
        if isinstance(raw, dict) and "model" in raw:
            return True
    return False


def load_scenarios(folder: str | Path | None = None, names: Iterable[str] | None = None) -> dict[str, Scenario]:
    """Every scenario of ``folder`` (default :func:`scenario_dir`), by name, validated."""
    folder = Path(folder or scenario_dir())
    if not folder.is_dir():
        raise ScenarioError(f"no scenario folder {folder}")
    wanted = list(names) if names is not None else sorted(p.stem for p in folder.glob("*.yaml"))
    return {n: load_scenario(n, folder) for n in wanted}


def scenario_dir() -> Path:
    """The default scenario folder (``games.scenarios_dir``: CausalGame's) of the current folder, else of the repository."""
    here = Path(SCENARIO_DIR)
    if here.is_dir():
        return here
    return CHECKOUT / SCENARIO_DIR
