"""CausalGame's drone-design games re-implemented from the facts of its public code (docs/games.md, "CausalGame models").

CausalGame (GitHub ``viewsetting/CausalGame``) flies one drone at a time through three pieces
that every scenario shares, and one scenario-specific SCM:

* the **drone sheet** (``api/middleware/drone_sheet.py``): per component base HP and a DEF value
  (components the design leaves out keep their ``default_def``); agility falls with the total
  DEF ``T`` as ``1 - a*T*exp(-T/s) - 0.001*T`` (clamped to ``[min, max]``); damage to a
  component other than the antenna is reduced by ``min(int(DEF * f), int(raw * 0.65))`` and is
  at least 1 (``f`` = ``def_reduction_factor``); combat damage is summed per component before
  that reduction is applied once; detection is clamped to ``[0.01, 0.95]``; combat lasts
  ``max(1, int(10 * rounds_modifier))`` rounds;
* **combat** (``api/modules/game/combat.py``): each round hits with probability
  ``clip(0.8 * accuracy_modifier * exp(0.1 * (1 - agility)), 0.05, 0.95)`` a component chosen
  by fixed weights among those with HP left at the start of combat, for
  ``int(int(int(70 * U(0.7, 1.3)) * (2 if critical hit (p 0.2) else 1)) * damage_modifier)``;
* the **judge** (``api/modules/game/judge.py`` and ``api/modules/agent/action_space.py``): a drone
  whose engine or cockpit has no HP left after the environment is destroyed without combat;
  otherwise it is detected with the SCM's probability, fights, and returns when no critical
  component (engine, cockpit, wing, body) is at 0 HP.

The SCMs (``antenna`` after ``api/modules/environment/antenna_trap_scm.py``, ``zone`` after
``deployment_zone_trap_scm.py``) read every constant from the scenario file.  All numbers are
drawn with numpy from the caller's generator, vectorized over a fleet; :func:`fly` returns the
true outcome of every drone and what CausalGame's agent is shown of it (:func:`agent_view`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from heuresis.causal.games.design import ABLATION_SEP, DesignError, DesignSpace, follows_pattern
from heuresis.config.loading import CHECKOUT, read_yaml

__all__ = [
    "CRITICAL",
    "DISCLOSURES",
    "MEASURABLE",
    "TARGET_WEIGHTS",
    "DesignError",
    "EnvQuery",
    "EnvQueryBudgetError",
    "Fleet",
    "Scenario",
    "ablation",
    "agent_view",
    "agility",
    "equipment_resistance",
    "fly",
    "history",
    "history_groups",
    "load_cg",
    "load_cg_all",
    "weather_pre_survival",
]

CRITICAL = ("engine", "cockpit", "wing", "body")
# combat.py CombatConfig.target_weights; a component not listed (the shield) weighs 1.0
TARGET_WEIGHTS = {"engine": 1.5, "cockpit": 1.5, "wing": 1.2, "body": 1.0, "antenna": 0.8, "camera": 0.5, "gun": 0.5}
BASE_ROUNDS = 10
HIT_BASE, DAMAGE_BASE, DAMAGE_VARIANCE, CRIT_P, CRIT_MULT = 0.80, 70, 0.3, 0.20, 2.0
REDUCTION_CAP = 0.65
DETECTION_CLAMP = (0.01, 0.95)
HIT_CLAMP = (0.05, 0.95)
CG_DIR = CHECKOUT / "config" / "games" / "causalgame"
# antenna_trap_scm.py: raw damage to a non-critical component, U(high) above wind_threshold_high and U(mid) above
# wind_threshold_low, floored; its own mitigation takes at most this share of the raw damage
ANTENNA_TIER_DAMAGE = {"antenna": ((55, 75), (35, 55)), "camera": ((25, 40), (10, 25)), "gun": ((35, 50), (20, 35))}
TIER_MITIGATION_CAP = 0.8
# antenna_trap_scm.py: raw damage to wing and engine when the wind passes 50, to body and cockpit when the weather
# pattern passes 0.7 (each scaled up below 15 DEF)
ANTENNA_CRITICAL_DAMAGE = {"engine": (40, 70), "wing": (40, 70), "body": (30, 55), "cockpit": (30, 55)}
# deployment_zone_trap_scm.py: a communication crash deals floor(k * severity) to each critical component, and the
# altitude band shifts the communication-failure probability
ZONE_CRASH_DAMAGE = {"engine": 60, "wing": 50, "body": 40, "cockpit": 35}
ZONE_ALTITUDE_FAILURE = {"low": -0.05, "medium": 0.0, "high": 0.05}


#: This track's extra disclosures, each a named ablation of a CausalGame scenario (``NAME~DISCLOSURE``,
#: docs/games.md §8): hits per component in every row, the note that rows show returned drones only,
#: the report question about misleading patterns, exact measurements of the hidden variables
#: (:data:`MEASURABLE`), the mechanism hints of ``game_hints.txt``.
DISCLOSURES = ("component_hits", "returned_only_note", "misleading_question", "hidden_measurements", "hints")
#: The hidden variables the ``hidden_measurements`` ablation lets an agent measure, per SCM.
MEASURABLE = {"antenna": ("weather_pattern",), "zone": ("mission_zone", "emi_level"), "weather": ("weather_pattern",)}


@dataclass
class Scenario:
    """One CausalGame scenario: its file's mapping, with accessors for the parts the simulator reads."""

    spec: dict[str, Any]
    path: str = ""

    @property
    def name(self) -> str:
        """The scenario's name (CausalGame's experiment folder name)."""
        return str(self.spec["name"])

    def __getitem__(self, key: str) -> Any:
        return self.spec[key]

    @property
    def family(self) -> str:
        """The SCM (``antenna``, ``zone`` or ``weather``): the scenario's family in the games tables."""
        return self.model

    @property
    def space(self) -> DesignSpace:
        """DEF per component, each in ``[0, def_cap]``, under the total ``def_budget`` (equipment slots: :attr:`equipment`)."""
        comps = self.components
        cap = int(self.spec["def_cap"])
        return DesignSpace(tuple(comps), (cap,) * len(comps), (), (), int(self.spec.get("def_budget") or cap * len(comps)))

    @property
    def budgets(self) -> dict[str, int]:
        """The play budgets in the games track's names (``resources`` of the scenario file).

        CausalGame caps the drones of Stage 1 in all, not per deployment: ``max_per_deployment``
        is the whole Stage-1 budget.
        """
        r = self.spec["resources"]
        drones = int(r["total_drone_budget"])
        return {"stage1_drones": drones, "stage1_deployments": int(r["stage1_deployment_budget"]),
                "max_per_deployment": drones, "stage2_fleet": int(r["stage2_fleet_size"])}

    @property
    def threshold(self) -> float:
        """The scenario's victory threshold (``resources.victory_threshold``)."""
        return float(self.spec["resources"]["victory_threshold"])

    def visible_variables(self) -> list[str]:
        """The environment variables of a deployment's per-drone rows (``environment_shown``)."""
        return list(self.spec["environment_shown"])

    @property
    def seed_name(self) -> str:
        """The name a play's draws derive from: an ablation flies its scenario's draws (a paired comparison)."""
        return str(self.spec.get("ablation_of") or self.name)

    @property
    def disclosures(self) -> tuple[str, ...]:
        """The ablation's extra disclosures (:data:`DISCLOSURES`); none in CausalGame's own scenarios."""
        return tuple(self.spec.get("disclosures") or ())

    def measurable_variables(self) -> list[str]:
        """None: CausalGame never shows a hidden value (its environment query summarises visible ones).

        The ``hidden_measurements`` ablation offers the SCM's hidden variables (:data:`MEASURABLE`).
        """
        return list(MEASURABLE[self.model]) if "hidden_measurements" in self.disclosures else []

    def follows_trap(self, design: Mapping | None) -> bool | None:
        """Whether ``design`` (its defaults filled in) matches the scenario's ``trap_pattern``; None for no design or no trap."""
        if design is None:
            return None
        return follows_pattern(self.spec.get("trap_pattern"), self.design(design, enforce_budget=False))

    @property
    def model(self) -> str:
        """The SCM: ``antenna`` or ``zone``."""
        return str(self.spec["model"])

    @property
    def components(self) -> list[str]:
        """Component names in the drone sheet's order."""
        return list(self.spec["components"])

    @property
    def equipment(self) -> dict[str, dict[str, Any]]:
        """Equipment slots (one choice each) -> ``{default, options: {choice: EMI resistance}}``; empty when none."""
        return {k: v for k, v in self.spec.get("equipment", {}).items() if v is not None}

    def design(self, design: Mapping[str, Any], enforce_budget: bool = True) -> dict[str, Any]:
        """Validate ``design`` and fill the components it leaves out with their ``default_def`` (as the drone sheet does).

        ``enforce_budget=False`` flies a design over the DEF budget, as CausalGame does (its published
        strategies include such designs); every cap is still checked.
        """
        comps = self.spec["components"]
        out: dict[str, Any] = {c: int(v["default_def"]) for c, v in comps.items()}
        cap = int(self.spec["def_cap"])
        slots = self.equipment
        for k, v in design.items():
            if k in slots or k == "flight_profile":
                continue
            c = k[:-4] if k.endswith("_def") else k
            if c not in comps:
                raise DesignError(f"{self.name}: design.{k}: unknown component; known: {list(comps)}")
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= cap:
                raise DesignError(f"{self.name}: design.{k}: DEF must be an integer in [0, {cap}], got {v!r}")
            out[c] = int(v)
        budget = self.spec.get("def_budget")
        total = sum(out[c] for c in comps)
        if enforce_budget and budget is not None and total > budget:
            kept = [f"{c} {out[c]}" for c in comps if c not in design and f"{c}_def" not in design]
            raise DesignError(f"{self.name}: design: total DEF {total} exceeds the budget def_budget={budget}"
                                + (f" (the components it leaves out keep their defaults: {', '.join(kept)})"
                                   if kept else ""))
        if "flight_profile" in design:
            fp = design["flight_profile"]
            if fp not in self.spec.get("flight_profiles", []):
                known = self.spec.get("flight_profiles", [])
                raise DesignError(f"{self.name}: design.flight_profile: {fp!r} is not one of {known}")
            out["flight_profile"] = fp
        for slot, cfg in slots.items():
            m = design.get(slot, cfg["default"])
            if m not in cfg["options"]:
                raise DesignError(f"{self.name}: design.{slot}: unknown choice {m!r}; known: {list(cfg['options'])}")
            out[slot] = m
        return out


def _read_spec(path: Path) -> dict:
    """The parsed scenario file, a fresh copy each call (parsed once per file version: the workflow asks for it per job)."""
    st = path.stat()
    return copy.deepcopy(_parse_spec(str(path.resolve()), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=256)
def _parse_spec(path: str, mtime_ns: int, size: int) -> dict:
    spec = read_yaml(path, "scenario file")   # safe YAML; an error names the file, line and column
    if not isinstance(spec, dict):
        raise ValueError(f"scenario file {path}: the file must hold a mapping")
    return spec


def load_cg(name_or_path: str | Path, folder: str | Path | None = None) -> Scenario:
    """Load one CausalGame scenario file (by name from ``config/games/causalgame``, or a path), resolving ``extends``."""
    folder = Path(folder) if folder is not None else CG_DIR
    p = Path(name_or_path)
    path = p if p.suffix == ".yaml" else folder / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(q.stem for q in folder.glob("*.yaml"))
        raise FileNotFoundError(f"CausalGame scenario {name_or_path!r}: no file {path}; known: {known}")
    spec = _read_spec(path)
    parent = spec.pop("extends", None)
    if parent:   # a variant inherits everything but its parent's control (the control of the parent only)
        base = {k: v for k, v in load_cg(parent, path.parent).spec.items() if k != "control"}
        spec = _merge(base, spec)
    spec.setdefault("name", path.stem)
    if spec["name"] != path.stem:
        raise ValueError(f"{path}: name: {spec['name']!r} differs from the file name {path.stem!r}")
    if spec.get("model") not in _MODELS:
        raise ValueError(f"{path}: model: {spec.get('model')!r} is not one of {sorted(_MODELS)}")
    if not isinstance(spec.get("seed"), int) or isinstance(spec.get("seed"), bool):
        raise ValueError(f"{path}: seed: every draw derives from the scenario's integer seed, got {spec.get('seed')!r}")
    # the games tables' columns, in CausalGame's terms: the variant is the name's suffix after the base
    # scenario, selection bias is hiding destroyed drones
    words, base = spec["name"].split("_"), (parent or spec["name"]).split("_")
    shared = next((k for k, (a, b) in enumerate(zip(words, base)) if a != b), min(len(words), len(base)))
    spec["variant"] = "_".join(words[shared:]) or "base"
    spec["selection_bias"] = bool(spec["hide_failed_drones"])
    return Scenario(spec, str(path))


def ablation(scn: Scenario, disclosure: str) -> Scenario:
    """The scenario with one of this track's extra disclosures (:data:`DISCLOSURES`): ``NAME~DISCLOSURE``.

    Everything else is the scenario's own (its SCM, seed, history, references); the ablation's
    plays are compared with the scenario's in ``games_ablations``.
    """
    if disclosure not in DISCLOSURES:
        raise ValueError(f"{scn.name}{ABLATION_SEP}{disclosure}: unknown disclosure {disclosure!r}; "
                         f"known: {list(DISCLOSURES)}")
    spec = {**scn.spec, "name": f"{scn.name}{ABLATION_SEP}{disclosure}", "disclosures": [disclosure],
            "variant": f"{scn.spec['variant']}{ABLATION_SEP}{disclosure}", "ablation_of": scn.name, "control": None}
    return Scenario(spec, scn.path)


def load_cg_all(folder: str | Path | None = None) -> dict[str, Scenario]:
    """Every CausalGame scenario of ``folder`` (default ``config/games/causalgame``), by name."""
    folder = Path(folder) if folder is not None else CG_DIR
    return {p.stem: load_cg(p) for p in sorted(folder.glob("*.yaml"))}


# sections a variant replaces whole (every other mapping is merged key by key)
_REPLACED = {"standard_design", "trap_design", "trap_pattern", "strategies", "zones", "side_information", "equipment", "perturb",
             "components"}


def _merge(base: Mapping, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        merge = isinstance(v, Mapping) and isinstance(out.get(k), Mapping) and k not in _REPLACED
        out[k] = _merge(out[k], v) if merge else v
    return out


# --- shared mechanics ------------------------------------------------------------------------------
def _uniform(rng: np.random.Generator, a: float, b: float, shape) -> np.ndarray:
    """``random.uniform(a, b)``: ``a + (b - a) * U[0, 1)``."""
    return a + (b - a) * rng.random(shape)


def _sheet_damage(raw: np.ndarray, def_value, factor: float) -> np.ndarray:
    """The drone sheet's ``_calculate_damage``: ``max(1, raw - min(int(DEF*f), int(raw*0.65)))`` (int arrays)."""
    red = np.minimum(np.floor(np.asarray(def_value) * factor), np.floor(raw * REDUCTION_CAP))
    return np.maximum(1, raw - red)


def agility(spec: Mapping, total_def) -> np.ndarray:
    """Agility from total DEF (``drone_sheet.py`` ``_compute_agility`` with the scenario's ``agility_system``)."""
    a = spec["agility_system"]
    t = np.asarray(total_def, float)
    val = a["base_agility"] - a["linear_coefficient"] * t * np.exp(-t / a["exponential_decay_scale"]) - 0.001 * t
    val = np.clip(val, a["min_agility"], a["max_agility"])
    return np.where(t <= 0, a["max_agility"], val)


def hit_chance(spec: Mapping, total_def, accuracy_mod) -> np.ndarray:
    """Per-round hit probability of combat (``combat.py``)."""
    ag = agility(spec, total_def)
    return np.clip(HIT_BASE * np.asarray(accuracy_mod, float) * np.exp(0.1 * (1.0 - ag)), *HIT_CLAMP)


@dataclass
class Effects:
    """What an SCM writes into the drone sheet for a fleet of ``n`` drones (numpy arrays of length ``n``)."""

    damage: dict[str, np.ndarray]     # component -> environmental damage before the sheet's reduction (antenna: after)
    detection: np.ndarray
    rounds_mod: np.ndarray
    accuracy_mod: np.ndarray
    damage_mod: np.ndarray
    visible: dict[str, np.ndarray]    # the SCM's visible environment
    latent: dict[str, np.ndarray]     # hidden variables (audits only)


@dataclass
class Fleet:
    """The true outcome of ``n`` drones of one design."""

    returned: np.ndarray              # (n,) bool
    hit_count: np.ndarray             # (n,) int, total hits in combat
    detected: np.ndarray              # (n,) bool
    visible: dict[str, np.ndarray]    # the SCM's visible environment
    latent: dict[str, np.ndarray]     # hidden variables (never shown)
    hits_by: dict[str, np.ndarray] = field(default_factory=dict)   # component -> (n,) hits (the component_hits ablation)

    @property
    def survival(self) -> float:
        """Share of drones that returned."""
        return float(self.returned.mean())


def fly(scn: Scenario, design: Mapping[str, Any], n: int, rng: np.random.Generator, stage: int = 1,
        enforce_budget: bool = True, force: Mapping[str, Any] | None = None) -> Fleet:
    """Fly ``n`` drones of ``design`` through ``scn``'s SCM, combat and judge.

    Parameters
    ----------
    scn : Scenario
        The scenario.
    design : Mapping
        ``{component or component_def: DEF, module: name}``; left-out components keep their default DEF.
    n : int
        Fleet size.
    rng : numpy.random.Generator
        Source of every draw (seed it from a recorded seed).
    stage : int
        1 (exploration) or 2 (evaluation); a scenario with a stage shift draws Stage 2 differently.
    enforce_budget : bool
        Reject a design over the DEF budget (default); False flies it, as CausalGame does.
    force : Mapping, optional
        What a biased history pins after the environment is drawn (zone SCM: ``{"zone": name,
        "emi": (centre, half_width)}``, as CausalGame's Simpson's-paradox history does).

    Returns
    -------
    Fleet
        Per-drone outcome, hit count, detection and environment.
    """
    if stage not in (1, 2):
        raise ValueError(f"stage must be 1 or 2, got {stage!r}")
    spec = scn.spec
    d = scn.design(design, enforce_budget)
    comps = scn.components
    eff = _MODELS[scn.model](spec, d, n, rng, stage, force)
    f = float(spec["def_reduction_factor"])
    hp: dict[str, np.ndarray] = {c: np.full(n, float(spec["components"][c]["hp"])) for c in comps}
    for c, raw in eff.damage.items():
        if c not in hp:
            continue
        if c == "antenna":        # the SCM's own mitigation; the sheet applies it as is
            hp[c] = np.maximum(0.0, hp[c] - raw)
        else:                     # an entry the SCM wrote costs at least 1 HP after the sheet's reduction
            hp[c] = np.where(_present(eff, c), np.maximum(0.0, hp[c] - _sheet_damage(raw, d[c], f)), hp[c])
    total_def = sum(d[c] for c in comps)
    pre = (hp["engine"] > 0) & (hp["cockpit"] > 0)
    det_p = np.clip(eff.detection, *DETECTION_CLAMP)
    detected = pre & (rng.random(n) < det_p)
    rounds = np.maximum(1, np.floor(BASE_ROUNDS * eff.rounds_mod)).astype(int)
    # combat numbers are drawn for the scenario's largest possible number of rounds, whatever the design,
    # so that designs flown from one seed share their random numbers (common random numbers)
    rmax = max_rounds(spec) if detected.any() else 0
    hits = np.zeros(n, int)
    hits_by = {c: np.zeros(n, int) for c in comps}
    if rmax:
        p_hit = hit_chance(spec, total_def, eff.accuracy_mod)
        active = detected[:, None] & (np.arange(rmax)[None, :] < rounds[:, None])
        landed = active & (rng.random((n, rmax)) < p_hit[:, None])
        w = np.stack([np.where(hp[c] > 0, TARGET_WEIGHTS.get(c, 1.0), 0.0) for c in comps], axis=1)   # (n, C)
        cum = np.cumsum(w, axis=1)
        roll = rng.random((n, rmax)) * cum[:, -1:]
        tgt = np.minimum((roll[:, :, None] >= cum[:, None, :]).sum(-1), len(comps) - 1)
        base = np.floor(DAMAGE_BASE * _uniform(rng, 1 - DAMAGE_VARIANCE, 1 + DAMAGE_VARIANCE, (n, rmax)))
        crit = rng.random((n, rmax)) < CRIT_P
        base = np.where(crit, np.floor(base * CRIT_MULT), base)
        amount = np.floor(base * eff.damage_mod[:, None]) * landed
        hits = landed.sum(1)
        for k, c in enumerate(comps):
            on = landed & (tgt == k)
            hits_by[c] = on.sum(1)
            struck = on.any(1)
            raw = (amount * on).sum(1)
            hp[c] = np.where(struck, np.maximum(0.0, hp[c] - _sheet_damage(raw, d[c], f)), hp[c])
    returned = pre & np.all([hp[c] > 0 for c in CRITICAL if c in hp], axis=0)
    return Fleet(returned, hits, detected, eff.visible, eff.latent, hits_by)


def max_rounds(spec: Mapping) -> int:
    """The most combat rounds a drone of the scenario can fight, over every design and environment."""
    model, p = spec["model"], spec["scm"]
    if model == "antenna":
        mod = max(p["combat_intensity_clear"], p["combat_intensity_storm"]) * 1.8
    elif model == "zone":
        mod = 1.8
    else:
        mod = 0.0
    return max(1, int(BASE_ROUNDS * mod))


def _present(eff: Effects, c: str) -> np.ndarray:
    """Drones whose SCM wrote a damage entry for ``c`` (a zero entry still costs the sheet's minimum of 1)."""
    return eff.latent.get(f"_damaged_{c}", np.zeros(len(eff.detection), bool))


# --- the antenna trap SCM ----------------------------------------------------------------------------
def _antenna(spec: Mapping, d: Mapping[str, Any], n: int, rng: np.random.Generator, stage: int,
             force: Mapping[str, Any] | None = None) -> Effects:
    """``antenna_trap_scm.py``: a uniform weather pattern, a storm above ``1 - storm_probability``, wind-tier damage."""
    p = spec["scm"]
    comp = spec["components"]
    u = rng.random(n)
    storm = u > 1 - p["storm_probability"]
    weather = np.where(storm, u, u * 0.5)
    wind = np.where(storm, _uniform(rng, 40, 80, n), _uniform(rng, 5, 30, n))
    humidity = np.where(storm, _uniform(rng, 70, 95, n), _uniform(rng, 30, 60, n))
    temperature = np.where(storm, _uniform(rng, 10, 20, n), _uniform(rng, 20, 35, n))
    high = wind > p["wind_threshold_high"]
    mid = ~high & (wind > p["wind_threshold_low"])

    def tier(hi: tuple[float, float], md: tuple[float, float]) -> np.ndarray:
        return np.where(high, np.floor(_uniform(rng, *hi, n)), np.where(mid, np.floor(_uniform(rng, *md, n)), 0.0))

    ant_raw, cam_raw, gun_raw = (tier(*ANTENNA_TIER_DAMAGE[c]) for c in ("antenna", "camera", "gun"))
    damage: dict[str, np.ndarray] = {}
    latent: dict[str, np.ndarray] = {"weather_pattern": weather, "is_storm": storm}
    for group, cond in ((("wing", "engine"), wind > 50), (("body", "cockpit"), weather > 0.7)):
        for c in group:
            base = _uniform(rng, *ANTENNA_CRITICAL_DAMAGE[c], n)
            if d[c] < 15:
                base = base * (1.0 + (1.0 - d[c] / 15.0))
            damage[c] = np.where(cond, np.floor(base), 0.0)
            latent[f"_damaged_{c}"] = cond

    def mitigated(raw: np.ndarray, def_value: int, factor: float) -> np.ndarray:
        red = np.minimum(np.floor(def_value * factor), np.floor(raw * TIER_MITIGATION_CAP))
        return np.where(raw > 0, np.maximum(1, raw - red), 0.0)

    ant = mitigated(ant_raw, d["antenna"], p["antenna_def_factor"])
    cam = mitigated(cam_raw, d["camera"], p["camera_def_factor"])
    gun = mitigated(gun_raw, d["gun"], p["gun_def_factor"])
    ant_hp = np.maximum(0, comp["antenna"]["hp"] - ant)
    cam_hp = np.maximum(0, comp["camera"]["hp"] - cam)
    gun_hp = np.maximum(0, comp["gun"]["hp"] - gun)
    damage["antenna"] = ant
    damage["camera"], damage["gun"] = cam, gun
    latent["_damaged_camera"], latent["_damaged_gun"] = cam > 0, gun > 0
    emitting = ant_hp > 0
    cam_ok = cam_hp > 0
    cam_eff = np.minimum(1.0, cam_hp / 20.0)
    stealth = np.where(cam_ok, p["stealth_mode_reduction"] * (1 - p["camera_evasion_bonus"] * cam_eff),
                       p["stealth_mode_reduction"] * p["camera_destroyed_detection_penalty"])
    accuracy = np.where(cam_ok, 1 - p["camera_evasion_bonus"] * cam_eff, p["camera_destroyed_detection_penalty"])
    base_det = p["base_detection_clear"] * (1 - weather) + p["base_detection_storm"] * weather
    signal = np.minimum(1.0, ant_hp / 50.0)
    detection = np.where(emitting, base_det + p["antenna_emission_boost"] * signal, base_det * stealth)
    combat = p["combat_intensity_clear"] * (1 - weather) + p["combat_intensity_storm"] * weather
    rounds_mod = combat * np.where(emitting, 1.8, 0.3)
    gun_ok = gun_hp > 0
    damage_mod = np.where(gun_ok, 1 - p["gun_damage_reduction"] * np.minimum(1.0, gun_hp / 30.0),
                          p["gun_destroyed_damage_penalty"])
    latent.update(antenna_emitting=emitting)
    visible = {"wind_speed": wind, "humidity": humidity, "temperature": temperature}
    return Effects(damage, detection, rounds_mod, accuracy, damage_mod, visible, latent)


# --- the deployment-zone trap SCM --------------------------------------------------------------------
def _zone(spec: Mapping, d: Mapping[str, Any], n: int, rng: np.random.Generator, stage: int,
          force: Mapping[str, Any] | None = None) -> Effects:
    """``deployment_zone_trap_scm.py``: a hidden zone sets the altitude band and the EMI; EMI above a threshold fails comms."""
    p = spec["scm"]
    zones = spec["zones"]
    names = list(zones)
    staged = f"stage{stage}_probability"
    probs = staged if all(staged in v for v in zones.values()) else "probability"
    w = np.array([zones[z].get(probs, 0.0) for z in names], float)
    z = rng.choice(len(names), size=n, p=w / w.sum())
    emi0 = np.array([zones[k]["emi_level"] for k in names], float)[z]
    emi = np.clip(emi0 + _uniform(rng, -0.1, 0.1, n), 0.0, 1.0)
    bands = np.array([zones[k]["altitude_band"] for k in names], dtype=object)[z]
    if d.get("flight_profile") is not None:    # the agent's flight profile sets the band (the zone, and its EMI, stay drawn)
        bands = np.full(n, d["flight_profile"], dtype=object)
    wind_res = np.select([bands == "low", bands == "high"], [0.2, 0.8], 0.5) + _uniform(rng, -0.1, 0.1, n)
    signal = np.select([bands == "low", bands == "high"], [0.9, 0.75], 0.85) + _uniform(rng, -0.05, 0.05, n)
    temperature = np.select([bands == "high", bands == "medium"],
                            [_uniform(rng, -5, 10, n), _uniform(rng, 10, 20, n)], _uniform(rng, 15, 30, n))
    if force:   # the zone and its EMI pinned after the visible variables were drawn (their history does so)
        z = np.full(n, names.index(force["zone"]))
        centre, half = force["emi"]
        emi = centre + _uniform(rng, -half, half, n)
        bands = np.full(n, zones[force["zone"]]["altitude_band"], dtype=object)
    shield = d.get("shield", 0) if p.get("shield_counts", True) else 0
    shield_red = min(shield * p["shield_effectiveness"], p["max_shield_reduction"])
    total_red = min(0.95, shield_red + equipment_resistance(spec, d))
    eff = emi * (1 - total_red)
    thr = p["emi_threshold"]
    cfp = np.where(eff < thr, 0.0, (eff - thr) * p["emi_base_failure_rate"])
    alt = ZONE_ALTITUDE_FAILURE
    alt_mod = np.select([bands == "low", bands == "high"], [alt["low"], alt["high"]], alt["medium"])
    cfp = np.clip(cfp + alt_mod, 0.0, 0.95)
    damage: dict[str, np.ndarray] = {c: np.zeros(n) for c in ("engine", "wing", "body", "cockpit", "antenna", "camera")}
    present = {c: np.zeros(n, bool) for c in damage}
    hi_band, md_band = bands == "high", bands == "medium"
    if p["altitude_wind_damage"]["high"] > 0:
        damage["engine"] = np.where(hi_band, np.floor(_uniform(rng, 5, 15, n)), 0.0)
        present["engine"] |= hi_band
    wing_hi, wing_md = np.floor(_uniform(rng, 8, 20, n)), np.floor(_uniform(rng, 3, 10, n))
    damage["wing"] = np.where(hi_band & (p["altitude_wind_damage"]["high"] > 0), wing_hi,
                              np.where(md_band & (p["altitude_wind_damage"]["medium"] > 0), wing_md, 0.0))
    present["wing"] |= (hi_band & (p["altitude_wind_damage"]["high"] > 0)) | (md_band & (p["altitude_wind_damage"]["medium"] > 0))
    over = eff > thr
    emi_damage = np.floor((eff - thr) * 80)
    damage["antenna"] = np.where(over, emi_damage, 0.0)
    cam_on = over & (eff > 0.4)
    damage["camera"] = np.where(cam_on, np.floor(emi_damage * 0.6), 0.0)
    present["camera"] |= cam_on
    crash = (cfp > 0) & (rng.random(n) < cfp)
    severity = _uniform(rng, 0.6, 1.0, n) * cfp
    for c, k in ZONE_CRASH_DAMAGE.items():
        damage[c] = damage[c] + np.where(crash, np.floor(k * severity), 0.0)
        present[c] |= crash
    detection = 0.20 + cfp * 0.5
    rounds_mod = np.where(cfp > 0.5, 1.8, 1.0)
    damage_mod = np.where(eff > 0.5, 1.0 + (eff - 0.5) * 0.5, 1.0)
    latent: dict[str, np.ndarray] = {"mission_zone": np.array(names, dtype=object)[z], "emi_level": emi,
                                     "effective_emi": eff, "comm_failure_prob": cfp, "comm_failure": crash}
    latent.update({f"_damaged_{c}": v for c, v in present.items()})
    visible = {"altitude_band": bands, "wind_resistance": wind_res, "signal_strength": signal, "temperature": temperature}
    return Effects(damage, detection, rounds_mod, np.ones(n), damage_mod, visible, latent)


def equipment_resistance(spec: Mapping, d: Mapping[str, Any]) -> float:
    """Summed EMI resistance of the design's equipment choices (0 when the scenario has no equipment)."""
    slots = {k: v for k, v in spec.get("equipment", {}).items() if v is not None}
    return float(sum(cfg["options"][d[slot]] for slot, cfg in slots.items() if slot in d))


# --- the weather-noise SCM ---------------------------------------------------------------------------
def _weather(spec: Mapping, d: Mapping[str, Any], n: int, rng: np.random.Generator, stage: int,
             force: Mapping[str, Any] | None = None) -> Effects:
    """``weather_noise_scm.py``: storms with a per-stage frequency; the SCM decides survival before combat.

    A storm drone survives the environment with ``sigmoid(antenna_def/30*2.5 - 4)``, a clear-weather
    one with ``sigmoid(-antenna_def/30*2.5 - 4)``, each plus ``0.3 * clip((engine_def - 10)/20, 0, 1)``;
    a drone that does not is destroyed (engine damage 1000). A survivor meets combat with detection
    0.5 and ``max(1, int(10 * 0))`` = 1 round.
    """
    p = spec["scm"]
    u = rng.random(n)
    storm = u > 1 - p[f"storm_probability_stage{stage}"]
    wind = np.where(storm, _uniform(rng, 40, 80, n), _uniform(rng, 5, 30, n))
    humidity = np.where(storm, _uniform(rng, 70, 95, n), _uniform(rng, 30, 60, n))
    temperature = np.where(storm, _uniform(rng, 10, 20, n), _uniform(rng, 20, 35, n))
    act = np.where(storm, d["antenna"] / 30.0 * 2.5 - 4, d["antenna"] / 30.0 * -2.5 - 4)
    rate = 1 / (1 + np.exp(-act)) + 0.3 * min(1.0, max(0.0, (d["engine"] - 10) / 20.0))
    dies = ~(rng.random(n) < np.clip(rate, 0, 1))
    damage = {"engine": np.where(dies, 1000.0, 0.0)}
    latent = {"weather_pattern": u, "is_storm": storm, "_damaged_engine": dies}
    visible = {"wind_speed": wind, "humidity": humidity, "temperature": temperature}
    return Effects(damage, np.full(n, 0.5), np.zeros(n), np.ones(n), np.ones(n), visible, latent)


def weather_pre_survival(spec: Mapping, d: Mapping[str, Any], stage: int) -> float:
    """Closed-form probability that a weather-noise drone of (filled) design ``d`` survives the SCM's roll."""
    p = spec["scm"][f"storm_probability_stage{stage}"]
    bonus = 0.3 * min(1.0, max(0.0, (d["engine"] - 10) / 20.0))
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    storm = min(1.0, sig(d["antenna"] / 30.0 * 2.5 - 4) + bonus)
    clear = min(1.0, sig(-d["antenna"] / 30.0 * 2.5 - 4) + bonus)
    return float(p * storm + (1 - p) * clear)


_MODELS = {"antenna": _antenna, "zone": _zone, "weather": _weather}


# --- what the agent is shown ------------------------------------------------------------------------
def agent_view(scn: Scenario, fleet: Fleet, rng: np.random.Generator | None = None,
               design: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A deployment's result as CausalGame's agent sees it (``drone_sheet.filter_result_for_agent``, ``action_space.py``).

    Counts of deployed, returned and destroyed drones; per drone the status, the total hit count,
    whether it was detected and the visible environment (the sheet passes on only the variables
    it lists as visible, ``environment_shown``); destroyed drones' rows are left out when the
    scenario hides failed drones.
    """
    shown = list(scn.spec["environment_shown"])
    noise = scn.spec.get("observation_noise")
    if noise and rng is None:
        raise ValueError(f"{scn.name}: observation_noise: the agent's view of a noisy scenario needs a seeded rng")
    rows = []
    for i in range(len(fleet.returned)):
        ok = bool(fleet.returned[i])
        row: dict[str, Any] = {"drone": i + 1, "status": "RETURNED" if ok else "DESTROYED",
                               "hit_count": int(fleet.hit_count[i]),
                               "was_detected": bool(fleet.detected[i]),
                               "environment": {k: float(fleet.visible[k][i]) if k in fleet.visible and not isinstance(
                                   fleet.visible[k][i], str) else fleet.visible[k][i] for k in shown if k in fleet.visible}}
        if scn.spec.get("show_def_remaining") and design is not None:
            row["def_remaining"] = {c: float(v) for c, v in scn.design(design, False).items() if c in scn.spec["components"]}
        if noise and rng is not None:
            row = _noisy(row, noise["storm"] if fleet.latent["is_storm"][i] else noise["clear"], rng)
        if scn.spec["hide_failed_drones"] and row["status"] != "RETURNED":
            continue
        row["environment"] = {k: _py(v) for k, v in row["environment"].items()}
        rows.append(row)
    n = len(fleet.returned)
    k = int(fleet.returned.sum())
    return {"deployed": n, "survived": k, "destroyed": n - k, "results": rows}


def _noisy(row: dict[str, Any], sd: float, rng: np.random.Generator) -> dict[str, Any]:
    """Add ``drone_sheet.add_observation_noise``'s noise to one agent row.

    Values become ``v + N(0, (v*sd)^2)`` (kept >= 0, zeros stay), the hit count likewise and rounded,
    and the status flips with probability ``sd * 0.1``.
    """
    def jitter(v: float) -> float:
        return 0.0 if v == 0 else max(0.0, v + rng.normal(0.0, abs(v) * sd))

    out = dict(row)
    out["environment"] = {k: jitter(v) if not isinstance(v, str) else v for k, v in row["environment"].items()}
    out["hit_count"] = int(max(0, round(jitter(float(row["hit_count"])))))
    if rng.random() < sd * 0.1:
        out["status"] = "DESTROYED" if row["status"] == "RETURNED" else "RETURNED"
    if "def_remaining" in row:
        out["def_remaining"] = {k: jitter(v) for k, v in row["def_remaining"].items()}
    return out


def _py(v):
    return v if isinstance(v, str) else round(float(v), 3)


# --- the history ------------------------------------------------------------------------------------
# initial_observation_bias -> the designs of the history (action_space.py generate_initial_observations);
# each entry: (share of the rows by i % 3 == 0 or the rest, design overrides, module, forced zone)
_HIGH_DEF = {"engine": 35, "cockpit": 35, "wing": 30, "body": 30, "antenna": 25, "camera": 20, "gun": 20}
_ZONE_HIGH_DEF = {"engine": 30, "cockpit": 30, "wing": 25, "body": 25, "antenna": 20, "camera": 15, "gun": 15, "shield": 0}
_ZONE_LOCAL = {"engine": 35, "cockpit": 30, "wing": 30, "body": 25, "antenna": 15, "camera": 10, "gun": 10, "shield": 5}


def history_groups(scn: Scenario) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """The history's row groups: (``"all"``, ``"third"`` (rows i % 3 == 0) or ``"rest"``; design; forced environment)."""
    std = dict(scn.spec["standard_design"])
    bias = scn.spec["resources"]["initial_observation_bias"]
    if bias == "none":
        return [("all", std, None)]
    if bias == "high_total_def":
        return [("all", {**std, **_HIGH_DEF}, None)]
    if bias == "local_optima":
        return [("all", {**std, "antenna": 5, "camera": 10, "gun": 10}, None)]
    if bias == "simpsons_paradox":
        return [("third", {**std, "antenna": 25}, None), ("rest", {**std, "antenna": 20}, None)]
    if bias == "deployment_zone_high_def":
        return [("all", {**std, **_ZONE_HIGH_DEF, "enhancement_module": "radar_boost"}, None)]
    if bias == "deployment_zone_local_optima":
        return [("all", {**std, **_ZONE_LOCAL, "enhancement_module": "signal_filter"}, None)]
    if bias == "deployment_zone_simpsons_paradox":
        return [("third", {**std, "engine": 25, "shield": 0, "enhancement_module": "radar_boost"},
                 {"zone": "epsilon", "emi": (0.8, 0.1)}),
                ("rest", {**std, "engine": 15, "shield": 0, "enhancement_module": "thermal_shield"},
                 {"zone": "delta", "emi": (0.1, 0.05)})]
    raise ValueError(f"{scn.name}: resources.initial_observation_bias: unknown bias {bias!r}")


def history(scn: Scenario, rng: np.random.Generator, include_failed: bool = False) -> list[dict[str, Any]]:
    """The history of ``initial_observations`` earlier flights, drawn afresh from ``rng`` (one per play).

    Each record: id, design, status, hit count and the SCM's visible environment; destroyed
    drones' records are left out when the scenario hides failed drones (unless ``include_failed``).
    """
    n = int(scn.spec["resources"]["initial_observations"])
    idx = np.arange(n)
    rows: list[dict[str, Any] | None] = [None] * n
    shown = list(scn.spec.get("history_environment_shown", scn.spec["environment_shown"]))
    for part, design, force in history_groups(scn):
        sel = idx if part == "all" else idx[idx % 3 == 0] if part == "third" else idx[idx % 3 != 0]
        if not len(sel):
            continue
        f = fly(scn, design, len(sel), rng, stage=1, enforce_budget=False, force=force)
        for j, i in enumerate(sel):
            rows[i] = {"id": f"INIT-{i + 1:03d}", "design": dict(design),
                       "status": "RETURNED" if f.returned[j] else "DESTROYED", "hit_count": int(f.hit_count[j]),
                       "environment": {k: _py(f.visible[k][j]) for k in shown}}
    out = [r for r in rows if r is not None]
    if scn.spec["hide_failed_drones"] and not include_failed:
        out = [r for r in out if r["status"] == "RETURNED"]
    return out


# --- the best design found by search ------------------------------------------------------------------
def search_best(scn: Scenario, start: Mapping[str, Any], seed: int, n: int = 3000, step: int = 5,
                max_moves: int = 60) -> tuple[dict[str, Any], float]:
    """Hill-climb from ``start`` on Stage-2 survival, all designs flown on the same ``n`` drones.

    A move shifts ``step`` DEF points from one component to another (caps and the DEF budget kept),
    or adds or removes ``step`` points where the budget allows, or changes one equipment choice;
    the best improving move is taken until none improves. Every design is flown from ``seed``
    (common random numbers), so two designs differ only by what the design changes. This is a
    search: its result is the best design found, a lower bound on the optimum, not a proof (the
    exact optimum: :func:`heuresis.causal.games.exact.exact_optimum`).

    Returns
    -------
    tuple
        The best design found (every component and equipment slot named) and its survival on the
        search's drones.
    """
    comps = scn.components
    cap, budget = int(scn.spec["def_cap"]), scn.spec.get("def_budget")

    def value(d: Mapping[str, Any]) -> float:
        return fly(scn, d, n, np.random.default_rng(seed), stage=2).survival

    cur = scn.design(start)
    best = value(cur)
    for _ in range(max_moves):
        cands: list[dict[str, Any]] = []
        total = sum(cur[c] for c in comps)
        for a in comps:
            for b in comps:
                if a != b and cur[a] >= step and cur[b] + step <= cap:
                    cands.append({**cur, a: cur[a] - step, b: cur[b] + step})
            if cur[a] >= step:
                cands.append({**cur, a: cur[a] - step})
            if cur[a] + step <= cap and (budget is None or total + step <= budget):
                cands.append({**cur, a: cur[a] + step})
        for slot, cfg in scn.equipment.items():
            cands += [{**cur, slot: o} for o in cfg["options"] if o != cur[slot]]
        scored = [(value(c), c) for c in cands]
        top, arg = max(scored, key=lambda t: t[0])
        if top <= best:
            break
        best, cur = top, arg
    return cur, best


# --- the environment query ----------------------------------------------------------------------------
class EnvQueryBudgetError(RuntimeError):
    """The environment query was asked more often than the scenario's ``resources.env_query_budget``."""


class EnvQuery:
    """The environment query of a CausalGame scenario, with its budget (``resources.env_query_budget``).

    Each call summarises one visible environment variable over the rows the agent has been shown
    (the history and its deployments' rows): count, mean, minimum and maximum, or the counts of each
    value of a categorical variable. Only the variables the scenario shows (``environment_shown``
    and, for the history, ``history_environment_shown``) can be asked; a hidden variable is refused
    by name, and a call past the budget raises :class:`EnvQueryBudgetError`.
    """

    def __init__(self, scn: Scenario):
        self.scn = scn
        self.budget = int(scn.spec["resources"].get("env_query_budget", 0))
        self.used = 0
        self.shown = sorted(set(scn.spec["environment_shown"]) | set(scn.spec.get("history_environment_shown", [])))

    def __call__(self, variable: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Summarise ``variable`` over the shown ``rows`` (each with an ``environment`` mapping)."""
        if variable not in self.shown:
            raise ValueError(f"{self.scn.name}: env query: {variable!r} is not a visible environment variable; "
                             f"visible: {self.shown}")
        if self.used >= self.budget:
            raise EnvQueryBudgetError(f"{self.scn.name}: env query budget exhausted "
                                      f"({self.used}/{self.budget}, resources.env_query_budget)")
        self.used += 1
        vals = [r["environment"][variable] for r in rows if variable in r.get("environment", {})]
        out: dict[str, Any] = {"variable": variable, "rows": len(vals), "queries_left": self.budget - self.used}
        if vals and isinstance(vals[0], str):
            out["counts"] = {v: vals.count(v) for v in sorted(set(vals))}
        elif vals:
            arr = np.asarray(vals, float)
            out.update(mean=round(float(arr.mean()), 3), min=round(float(arr.min()), 3), max=round(float(arr.max()), 3))
        return out
