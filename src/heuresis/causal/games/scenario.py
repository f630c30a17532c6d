"""Scenario files of the games track (docs/games.md §2): CausalGame's, one YAML file per scenario.

The default folder is ``config/games/causalgame`` (``games.scenarios_dir``); a file names its
SCM (``model``: antenna, zone or weather), every constant of that SCM, the resources, the
designs it declares (standard, trap, published strategies) and the intended mechanism.  A
variant may ``extends:`` another scenario and override it key by key, so adding a scenario is
adding a file.  :func:`load_scenario` returns a :class:`~heuresis.causal.games.causalgame.Scenario`;
``NAME~DISCLOSURE`` names an ablation of a scenario (:func:`~heuresis.causal.games.causalgame.ablation`),
``NAME@testK`` a sealed test variant (drawn by its references job, never from a file).  Every
error names the scenario and the key.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from heuresis.causal.games.causalgame import Scenario, ablation, load_cg
from heuresis.causal.games.design import ABLATION_SEP, VARIANT_SEP, DesignError, DesignSpace, follows_pattern
from heuresis.config.loading import CHECKOUT, ConfigError, read_yaml, schema_default

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
]

#: Default folder of the scenario files, relative to the repository root.
SCENARIO_DIR = schema_default("games", "scenarios_dir")


class ScenarioError(ValueError):
    """An invalid scenario file; the message names the scenario and the key."""


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
    """Load one scenario by name (``folder``/``name``.yaml, ``NAME~DISCLOSURE`` for an ablation) or by path."""
    if VARIANT_SEP in str(name_or_path) and Path(str(name_or_path)).suffix not in (".yaml", ".yml"):
        raise ScenarioError(f"scenario {str(name_or_path)!r}: a test variant has no file; its references job draws it "
                            f"from the test seed (games.test_variants) and its plays rebuild it from its references")
    p = scenario_path(name_or_path, folder)
    if not p.exists():
        raise ScenarioError(f"scenario {p.stem!r}: no scenario file {p}")
    name = str(name_or_path)
    if ABLATION_SEP in name and Path(name).suffix not in (".yaml", ".yml"):
        try:
            return ablation(load_scenario(p, folder), name.split(ABLATION_SEP, 1)[1])
        except ValueError as exc:
            raise ScenarioError(f"scenario {name!r}: {exc}") from None
    try:
        return load_cg(p)
    except (ValueError, FileNotFoundError, KeyError) as exc:   # a YAML error arrives as ConfigError
        raise ScenarioError(f"scenario {p.stem!r}: {exc}") from None


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
