"""The hidden SCM of a drone flight (docs/games.md §1-2), vectorized over drones and designs.

A flight, in causal order (every constant from the scenario file):

1. **environment** — drawn by the scenario's *family* (:data:`FAMILIES`): a storm intensity
   ``s`` in [0, 1] that drives environmental damage, detection and combat; the EMI level of
   the zone (zone family); the visible variables (wind, humidity, temperature, altitude, a
   terrain label) derived from the latent ones;
2. **environmental damage** — per component a Poisson number of storm events
   (``env_damage.storm[c] * s``), each ``event_damage``; in EMI zones a Poisson number of
   communication failures (``emi_events * emi``), each prevented by fitted equipment with its
   ``emi_reduction`` and otherwise dealing ``emi_damage / (1 + shield_absorb * shield DEF)`` to a
   random critical component;
3. **combat** in ``waves``: a drone still flying is detected with probability
   ``sigmoid(base + storm*s + emi*failures + emitting*[antenna works])``; a detected drone takes
   ``Poisson(shots_base * (1 + shots_storm*s))`` shots (at most ``max_shots``), each hitting with
   probability ``hit_base * (1 + agility_penalty * load/def_budget) * (1 + hit_storm*s) *
   (1 - camera_effect * camera condition)`` a component drawn by ``target_weight``, for a
   Gamma(``damage_shape``) damage of mean ``damage_mean * (1 - gun_effect * gun condition)``;
4. a component has ``hp + hp_per_def * DEF`` hit points; the drone is **destroyed** as soon as a
   critical component's damage reaches them.  A component's *condition* is the fraction of its
   hit points left.

All random numbers of a fleet are drawn first, independently of the design (:func:`draw`), and
the design enters only through deterministic thresholds (:func:`simulate`); so evaluating many
designs on one :class:`Draws` uses **common random numbers**, and a 1,000-drone fleet of one
design takes milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from heuresis.registry import Registry

__all__ = ["FAMILIES", "STAGES", "Draws", "Family", "Flight", "draw", "simulate", "survival"]

STAGES = (1, 2)
_EMI_MAX = 8


@dataclass
class Env:
    """The environment of a fleet of ``n`` drones as a family draws it: latent causes and visible values."""

    storm: np.ndarray                     # (n,) latent storm intensity in [0, 1]
    emi: np.ndarray                       # (n,) latent EMI level (0 outside the zone family)
    visible: dict[str, np.ndarray]        # true values of the visible variables
    latent: dict[str, np.ndarray]         # latent variables (never shown; kept for audits)
    weather: np.ndarray                   # (n,) 0 calm / 1 storm: scales measurement error


@dataclass
class Draws:
    """Every random number of a fleet of ``n`` drones, drawn independently of the design."""

    n: int
    stage: int
    env: Env
    storm_damage: np.ndarray              # (n, C) environmental damage per component
    emi_count: np.ndarray                 # (n,) communication failures before prevention
    u_filter: np.ndarray                  # (n, E) uniforms: a failure prevented when < reduction
    emi_target: np.ndarray                # (n, E) index of the critical component a failure hits
    u_detect: np.ndarray                  # (n, W)
    shots: np.ndarray                     # (n, W) shots fired at a detected drone
    u_hit: np.ndarray                     # (n, W, S)
    target: np.ndarray                    # (n, W, S) component index a hit lands on
    damage: np.ndarray                    # (n, W, S) damage of a hit before the gun factor
    u_obs: np.random.SeedSequence = field(repr=False, default=None)  # type: ignore[assignment]  # observation noise seed


@dataclass
class Flight:
    """Outcome of ``B`` designs on one set of draws."""

    survived: np.ndarray                  # (B, n) bool
    hits: np.ndarray                      # (B, n, C) hits per component
    failures: np.ndarray                  # (B, n) communication failures that got through
    detected_waves: np.ndarray            # (B, n) waves in which the drone was detected


# --- families --------------------------------------------------------------------------------------
class Family:
    """How one family draws the environment and corrupts the observations.

    ``measurable`` names the hidden environment variables a scenario of the family may expose to
    the agentic mode's measurement query (name shown to the agent -> key of :attr:`Env.latent`);
    ``default_measurable`` those a scenario exposes when its file declares no ``measurable`` list:
    none, so that no hidden value is shown unless a scenario names the look as its ablation.
    """

    name = ""
    measurable: dict[str, str] = {}
    default_measurable: tuple[str, ...] = ()

    def visible(self, spec: Mapping) -> list[str]:
        """List the visible environment variables of a scenario of this family, in display order."""
        raise NotImplementedError

    def check(self, spec: Mapping) -> list[str]:
        """Problems of ``spec['environment']`` as ``'<key>: <problem>'`` strings."""
        return []

    def environment(self, spec: Mapping, rng: np.random.Generator, n: int, stage: int,
                    force: Mapping | None = None) -> Env:
        """Draw the environment of ``n`` drones.

        Parameters
        ----------
        spec : Mapping
            The scenario; its ``environment`` section holds the family's constants.
        rng : numpy.random.Generator
            Source of every draw.
        n : int
            Number of drones.
        stage : int
            1 or 2; a family may draw Stage 2 from another distribution (a shift).
        force : Mapping, optional
            Values a history group pins (a storm range, a zone, storm or calm).

        Returns
        -------
        Env
            Latent and visible variables per drone.
        """
        raise NotImplementedError

    def observe(self, spec: Mapping, env: Env, hits: np.ndarray, survived: np.ndarray,
                rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """(visible values, hits per component, reported returned flag) as reported; exact by default."""
        return dict(env.visible), hits.copy(), survived.copy()


FAMILIES = Registry("game family")


def _family(name: str):
    """Class decorator: register one instance of a :class:`Family` under ``name``."""
    def deco(cls):
        cls.name = name
        FAMILIES.add(name, cls())
        return cls
    return deco


def _need(env: Mapping, keys: dict[str, type]) -> list[str]:
    out = []
    for k, t in keys.items():
        if k not in env:
            out.append(f"{k}: missing (required)")
        elif t is float and (isinstance(env[k], bool) or not isinstance(env[k], (int, float))):
            out.append(f"{k}: must be a number, got {env[k]!r}")
        elif t is list and not isinstance(env[k], list):
            out.append(f"{k}: must be a list, got {env[k]!r}")
        elif t is dict and not isinstance(env[k], Mapping):
            out.append(f"{k}: must be a mapping, got {env[k]!r}")
    return out


def _linear(spec: Mapping, key: str) -> list[str]:
    """A visible variable ``{base, storm, noise}`` (value = base + storm*s + N(0, noise))."""
    v = spec.get(key)
    if not isinstance(v, Mapping):
        return [f"{key}: must be a mapping with base, storm, noise"]
    out = [f"{key}.{k}: missing (required)" for k in ("base", "storm", "noise") if k not in v]
    if "noise" in v and v["noise"] < 0:
        out.append(f"{key}.noise: negative noise scale {v['noise']}")
    return out


def _visible_linear(spec: Mapping, storm: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for key in spec["environment"]["visible"]:
        v = spec["environment"][key]
        out[key] = v["base"] + v["storm"] * storm + rng.normal(0.0, v["noise"], storm.shape)
    return out


@_family("antenna")
class AntennaFamily(Family):
    """Latent storm intensity ~ Beta(a, b) drives wind, humidity, damage, detection and combat."""

    measurable = {"storm_intensity": "storm"}
    default_measurable: tuple[str, ...] = ()   # no free look: a scenario declares `measurable` (an ablation)

    def visible(self, spec):
        """List the variables of ``environment.visible``, each linear in the storm intensity plus noise."""
        return list(spec["environment"]["visible"])

    def check(self, spec):
        """List problems of ``storm_beta`` and of each visible variable's ``{base, storm, noise}``."""
        env = spec["environment"]
        out = _need(env, {"storm_beta": list, "visible": list})
        if not out:
            a = env["storm_beta"]
            if len(a) != 2 or min(a) <= 0:
                out.append(f"storm_beta: must be two positive numbers, got {a!r}")
            for key in env["visible"]:
                out += _linear(env, key)
        return out

    def environment(self, spec, rng, n, stage, force=None):
        """Draw storm ~ Beta(a, b) (rescaled into ``force['storm']`` when forced) and the visible variables from it."""
        a, b = spec["environment"]["storm_beta"]
        storm = rng.beta(a, b, n)
        if force and "storm" in force:
            lo, hi = force["storm"]
            storm = lo + (hi - lo) * storm
        return Env(storm, np.zeros(n), _visible_linear(spec, storm, rng), {"storm": storm}, np.zeros(n))


@_family("zone")
class ZoneFamily(Family):
    """A hidden deployment zone sets EMI, altitude and wind; temperature falls with altitude."""

    measurable = {"emi_level": "emi", "deployment_zone": "zone", "storm_intensity": "storm"}
    default_measurable: tuple[str, ...] = ()   # no free look: a scenario declares `measurable` (an ablation)

    def visible(self, spec):
        """List temperature, altitude and wind, plus the (possibly mislabelled) terrain when ``categorical``."""
        out = ["temperature", "altitude", "wind"]
        return out + (["terrain"] if spec["environment"].get("categorical") else [])

    def check(self, spec):
        """List problems of the zones (probabilities, EMI, altitude, wind), ``stage2_p`` and ``label_accuracy``."""
        env = spec["environment"]
        out = _need(env, {"zones": dict, "temperature": dict, "wind_to_storm": float})
        if out:
            return out
        zones = env["zones"]
        if not zones:
            return ["zones: no zone"]
        for z, v in zones.items():
            for k in ("p", "emi", "altitude", "wind"):
                if k not in v:
                    out.append(f"zones.{z}.{k}: missing (required)")
                elif v[k] < 0:
                    out.append(f"zones.{z}.{k}: negative value {v[k]}")
        if not out and sum(v["p"] for v in zones.values()) <= 0:
            out.append("zones: all zone probabilities are zero")
        p2 = env.get("stage2_p")
        if p2 is not None:
            for z in p2:
                if z not in zones:
                    out.append(f"stage2_p.{z}: unknown zone {z!r}; known: {list(zones)}")
            if sum(p2.values()) <= 0:
                out.append("stage2_p: all zone probabilities are zero")
        acc = env.get("label_accuracy", 1.0)
        if not 0 <= acc <= 1:
            out.append(f"label_accuracy: {acc} is not a probability")
        return out

    def environment(self, spec, rng, n, stage, force=None):
        """Draw a zone per drone (``stage2_p`` in Stage 2 when given); EMI, altitude, wind and storm follow from it."""
        env = spec["environment"]
        names = list(env["zones"])
        zones = env["zones"]
        p = np.array([zones[z]["p"] for z in names], float)
        if stage == 2 and env.get("stage2_p"):
            p = np.array([env["stage2_p"].get(z, 0.0) for z in names], float)
        z = rng.choice(len(names), size=n, p=p / p.sum())
        if force and "zone" in force:
            z[:] = names.index(force["zone"])
        pick = lambda key: np.array([zones[nm][key] for nm in names], float)[z]  # noqa: E731
        emi = pick("emi") * rng.uniform(0.7, 1.3, n)
        altitude = pick("altitude") + rng.normal(0, env.get("altitude_noise", 50.0), n)
        wind = np.maximum(0.0, pick("wind") + rng.normal(0, env.get("wind_noise", 3.0), n))
        t = env["temperature"]
        temperature = t["base"] - t["lapse"] * altitude + rng.normal(0, t.get("noise", 1.0), n)
        storm = np.clip(wind * env["wind_to_storm"], 0.0, 1.0)
        visible = {"temperature": temperature, "altitude": altitude, "wind": wind}
        if env.get("categorical"):
            acc = env.get("label_accuracy", 1.0)
            wrong = rng.random(n) >= acc
            shift = rng.integers(1, max(2, len(names)), n)
            label = np.where(wrong, (z + shift) % len(names), z)
            visible["terrain"] = np.array(names, dtype=object)[label]
        return Env(storm, emi, visible, {"zone": np.array(names, dtype=object)[z], "emi": emi, "storm": storm},
                   np.zeros(n))


@_family("weather")
class WeatherFamily(Family):
    """Calm or storm weather (storm frequency per stage); observations are noisier in storms."""

    measurable = {"weather": "weather", "storm_intensity": "storm"}
    default_measurable: tuple[str, ...] = ()   # no free look: a scenario declares `measurable` (an ablation)

    def visible(self, spec):
        """List the variables of ``environment.visible``, each linear in the storm intensity plus noise."""
        return list(spec["environment"]["visible"])

    def check(self, spec):
        """List problems of the storm frequencies and intensity ranges, visible variables and observation noise."""
        env = spec["environment"]
        out = _need(env, {"storm_p": list, "calm_intensity": list, "storm_intensity": list, "visible": list})
        if out:
            return out
        if len(env["storm_p"]) != 2 or not all(0 <= p <= 1 for p in env["storm_p"]):
            out.append(f"storm_p: must be two probabilities (stage 1, stage 2), got {env['storm_p']!r}")
        for key in ("calm_intensity", "storm_intensity"):
            lo_hi = env[key]
            if len(lo_hi) != 2 or not 0 <= lo_hi[0] <= lo_hi[1] <= 1:
                out.append(f"{key}: must be a range within [0, 1], got {lo_hi!r}")
        for key in env["visible"]:
            out += _linear(env, key)
        obs = spec.get("observation", {})
        for key in ("visible_noise", "hits_noise", "status_flip"):
            if key not in obs:
                out.append(f"(observation) {key}: missing (required by the weather family)")
        return out

    def environment(self, spec, rng, n, stage, force=None):
        """Draw calm or storm per drone with the stage's storm frequency, then an intensity in its range."""
        env = spec["environment"]
        stormy = rng.random(n) < env["storm_p"][stage - 1]
        if force and "storm" in force:
            stormy[:] = bool(force["storm"])
        lo_c, hi_c = env["calm_intensity"]
        lo_s, hi_s = env["storm_intensity"]
        u = rng.random(n)
        storm = np.where(stormy, lo_s + (hi_s - lo_s) * u, lo_c + (hi_c - lo_c) * u)
        return Env(storm, np.zeros(n), _visible_linear(spec, storm, rng),
                   {"storm": storm, "stormy": stormy, "weather": np.where(stormy, "storm", "calm").astype(object)},
                   stormy.astype(float))

    def observe(self, spec, env, hits, survived, rng):
        """Report noisy visible values, noisy or lost hit counts and flipped statuses, noisier in storms."""
        obs = spec["observation"]
        w = env.weather.astype(bool)
        vis = {}
        for key, val in env.visible.items():
            scale = np.where(w, obs["visible_noise"]["storm"], obs["visible_noise"]["calm"])
            sd = float(spec["environment"][key]["noise"]) + 1.0
            vis[key] = val + rng.normal(0.0, 1.0, val.shape) * scale * sd
        lam = np.where(w, obs["hits_noise"]["storm"], obs["hits_noise"]["calm"])
        noisy = hits + rng.poisson(np.repeat(lam[:, None], hits.shape[1], axis=1))
        lost = rng.random(hits.shape) < np.where(w, obs["hits_noise"].get("lost_storm", 0.0), 0.0)[:, None]
        noisy = np.where(lost, 0, noisy)
        flip = rng.random(len(survived)) < np.where(w, obs["status_flip"]["storm"], obs["status_flip"]["calm"])
        return vis, noisy, np.where(flip, ~survived, survived)


# --- draws and simulation ----------------------------------------------------------------------------
def draw(scn, seed, n: int, stage: int, force: Mapping | None = None) -> Draws:
    """All random numbers of ``n`` drones of scenario ``scn`` in ``stage`` (1 or 2)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be 1 or 2, got {stage!r}")
    spec = scn.spec
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_env, s_dmg, s_cmb, s_obs = ss.spawn(4)
    env = FAMILIES.lookup(spec["family"]).environment(spec, np.random.default_rng(s_env), n, stage, force)
    rng = np.random.default_rng(s_dmg)
    comps = list(spec["components"])
    ed = spec["env_damage"]
    rates = np.array([ed["storm"].get(c, 0.0) for c in comps], float)
    events = rng.poisson(env.storm[:, None] * rates[None, :])
    storm_damage = events * ed["event_damage"] * rng.uniform(0.7, 1.3, events.shape)
    emi_count = np.minimum(rng.poisson(ed["emi_events"] * env.emi), _EMI_MAX)
    crit = np.flatnonzero([spec["components"][c]["critical"] for c in comps])
    u_filter = rng.random((n, _EMI_MAX))
    emi_target = crit[rng.integers(0, len(crit), (n, _EMI_MAX))]
    c = spec["combat"]
    W, S = int(c["waves"]), int(c["max_shots"])
    rng = np.random.default_rng(s_cmb)
    u_detect = rng.random((n, W))
    mean_shots = c["shots_base"] * (1 + c.get("shots_storm", 0.0) * env.storm)
    shots = np.minimum(rng.poisson(np.repeat(mean_shots[:, None], W, axis=1)), S)
    u_hit = rng.random((n, W, S))
    w = np.array([spec["components"][k]["target_weight"] for k in comps], float)
    cum = np.cumsum(w / w.sum())
    target = np.minimum(np.searchsorted(cum, rng.random((n, W, S)), side="right"), len(comps) - 1)
    shape = c.get("damage_shape", 4.0)
    damage = rng.gamma(shape, c.get("damage_mean", 1.0) / shape, (n, W, S))
    return Draws(n, stage, env, storm_damage, emi_count, u_filter, emi_target, u_detect, shots, u_hit, target,
                 damage, s_obs)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def simulate(scn, draws: Draws, vecs) -> Flight:
    """Fly the designs ``vecs`` (B x P integer vectors, or one vector) on ``draws``."""
    spec = scn.spec
    space = scn.space
    vecs = np.atleast_2d(np.asarray(vecs, dtype=np.int64))
    B, n, C = len(vecs), draws.n, space.n_components
    comps = list(space.components)
    defs = vecs[:, :C].astype(float)
    base_hp = np.array([spec["components"][k]["hp"] for k in comps], float)
    hp = base_hp[None, :] + spec["hp_per_def"] * defs                    # (B, C)
    load = defs.sum(1) + (vecs[:, C:] * np.array(space.costs, dtype=np.int64)).sum(1)
    agility = 1.0 + spec["agility_penalty"] * load / space.budget       # (B,)
    crit = np.array([spec["components"][k]["critical"] for k in comps])
    dmg = np.repeat(draws.storm_damage[None], B, axis=0)                 # (B, n, C)
    ed = spec["env_damage"]
    failures = np.zeros((B, n))
    if ed["emi_events"] > 0 and draws.emi_count.any():
        red = np.zeros(B)
        for k, e in enumerate(space.equipment):
            r = spec["equipment"][e].get("emi_reduction", 0.0)
            red = 1 - (1 - red) * (1 - r * vecs[:, C + k])
        shield = defs[:, comps.index("shield")] if "shield" in comps else np.zeros(B)
        per = ed["emi_damage"] / (1.0 + ed["shield_absorb"] * shield)    # (B,)
        rows = np.arange(n)
        for e in range(_EMI_MAX):
            live = (e < draws.emi_count)[None, :] & (draws.u_filter[None, :, e] >= red[:, None])
            failures += live
            dmg[:, rows, draws.emi_target[:, e]] += live * per[:, None]
    alive = np.all(dmg[:, :, crit] < hp[:, None, crit], axis=-1)
    hits = np.zeros((B, n, C), dtype=np.int32)
    detected_waves = np.zeros((B, n), dtype=np.int32)
    det, cmb = spec["detection"], spec["combat"]
    ant = comps.index("antenna") if "antenna" in comps else None
    cam = comps.index("camera") if "camera" in comps else None
    gun = comps.index("gun") if "gun" in comps else None
    storm = draws.env.storm[None, :]
    base_logit = det["base"] + det.get("storm", 0.0) * storm + det.get("emi", 0.0) * failures
    hit_env = cmb["hit_base"] * agility[:, None] * (1 + cmb.get("hit_storm", 0.0) * storm)
    rows = np.arange(n)
    for w in range(int(cmb["waves"])):
        logit = base_logit
        if ant is not None:
            logit = logit + det.get("emitting", 0.0) * (dmg[:, :, ant] < hp[:, None, ant])
        detected = alive & (draws.u_detect[None, :, w] < _sigmoid(logit))
        detected_waves += detected
        for k in range(int(cmb["max_shots"])):
            active = detected & (k < draws.shots[None, :, w]) & alive
            if not active.any():
                break
            p = hit_env
            if cam is not None:
                p = p * (1 - cmb.get("camera_effect", 0.0) * np.clip(1 - dmg[:, :, cam] / hp[:, None, cam], 0, 1))
            hit = active & (draws.u_hit[None, :, w, k] < p)
            tgt = draws.target[:, w, k]
            amount = np.broadcast_to(draws.damage[None, :, w, k], (B, n))
            if gun is not None:
                amount = amount * (1 - cmb.get("gun_effect", 0.0) * np.clip(1 - dmg[:, :, gun] / hp[:, None, gun], 0, 1))
            dmg[:, rows, tgt] += hit * amount
            hits[:, rows, tgt] += hit
            alive &= ~(hit & crit[tgt][None, :] & (dmg[:, rows, tgt] >= hp[:, tgt]))
    return Flight(alive, hits, failures, detected_waves)


def survival(scn, draws: Draws, vecs) -> np.ndarray:
    """Survival rate of each design on the same draws (common random numbers)."""
    return simulate(scn, draws, vecs).survived.mean(axis=1)
