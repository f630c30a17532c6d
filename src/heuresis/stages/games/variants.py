"""Test variants of the games (docs/games.md, "Test variants"): hidden SCMs no file publishes.

The scenario files are public, so every hidden SCM, trap and optimum in them is known to anyone
who reads the repository: they are the games' **development set**.  The **test set** is drawn
from the test seed (config ``secrets.test_seed``, the same seed the causal track's test split
uses): test variant ``k`` of a scenario, named ``NAME@testK`` (:func:`variant_name`), is the
scenario with every value its file's ``perturb:`` section names drawn uniformly in the stated
range, and with its own scenario seed (so its Stage-1 history and every play's draws differ too).

``perturb:`` maps a dotted key of the scenario file to a range: ``[lo, hi]`` (a float drawn in
``[lo, hi)``; integers when both ends are integers, ``hi`` included) or ``[lo, hi, step]`` (a
multiple of ``step`` from ``lo``).  A variant inherits the section through ``extends:``; a
scenario may replace it whole.  Published expectations (``strategies``) belong to the public
scenario: a variant has none (its optimum is exact, :mod:`heuresis.causal.games.exact`).

Each draw is checked after its references are computed (:func:`accepted`): the optimum
must beat the trap design (their 95% intervals over the verification fleets disjoint, optimum
above) and must not follow the trap pattern.  A draw that fails is drawn again (attempt ``a``
derives from the same seed), up to :data:`MAX_ATTEMPTS`; the accepted attempt and its values are
recorded in the variant's references (columns ``perturbed``, ``variant_attempt``), from which the
plays and judgements rebuild it (:func:`from_references`), so only the references job reads the
test seed.

Sealed (``secrets.test_seed: sealed``): the draws derive from the sealed seed
(:func:`~heuresis.artifacts.sealing.sealed_entropy`), which the references job takes from the
environment once its commitment record exists; nobody can recompute a variant before the seed is
revealed.  Public: they derive from the config's ``seed``, and the games tables say UNSEALED.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from heuresis.causal.games.causalgame import Scenario
from heuresis.causal.games.design import VARIANT_SEP, follows_pattern
from heuresis.causal.games.references import References, scenario_references, seed_of, with_integer
from heuresis.causal.games.scenario import ScenarioError

__all__ = [
    "MAX_ATTEMPTS",
    "VARIANT_SEP",
    "accepted",
    "base_of",
    "build_variant",
    "draw_values",
    "from_references",
    "is_variant",
    "make_variant",
    "perturbation_errors",
    "split_of",
    "variant_entropy",
    "variant_index",
    "variant_name",
    "variant_names",
    "variant_spec",
]

MAX_ATTEMPTS = 8
_NAME = re.compile(r"^(?P<base>[a-z][a-z0-9_]*)@test(?P<k>0|[1-9][0-9]*)$")
_PUBLIC_PREFIX = "heuresis-games-public-test"


def variant_name(base: str, k: int) -> str:
    """The name of test variant ``k`` of scenario ``base``: ``base@testK``."""
    return f"{base}{VARIANT_SEP}{int(k)}"


def is_variant(name: str) -> bool:
    """Whether a scenario name is a test variant's."""
    return _NAME.match(str(name)) is not None


def base_of(name: str) -> str:
    """The public scenario a test variant is drawn from (the name itself for any other scenario)."""
    m = _NAME.match(str(name))
    return m["base"] if m else str(name)


def split_of(name: str) -> str:
    """``test`` for a test variant, ``dev`` for a public scenario (and its ablations)."""
    return "test" if is_variant(name) else "dev"


def variant_index(name: str) -> int:
    """``K`` of a test variant's name ``NAME@testK``."""
    m = _NAME.match(str(name))
    if m is None:
        raise ScenarioError(f"scenario {name!r}: not a test variant's name (NAME{VARIANT_SEP}K)")
    return int(m["k"])


def variant_names(games: Mapping) -> list[str]:
    """The test variants ``games.test_variants`` asks for: ``count`` of each scenario of ``of`` (in order)."""
    tv = games.get("test_variants") or {}
    return [variant_name(b, k) for b in tv.get("of") or [] for k in range(int(tv.get("count", 0)))]


def variant_spec(config: Mapping) -> dict:
    """What the variants' draws depend on besides the scenario files, never the seed itself.

    ``{"test_seed": "public", "seed": S}`` (the config's ``seed``) or ``{"test_seed": "sealed",
    "commitment": C}``: a job parameter, so a rotated seed redraws every variant.
    """
    from heuresis.artifacts.sealing import test_seed_spec

    spec = test_seed_spec(config)
    return {**spec, "seed": int(config["seed"])} if spec["test_seed"] == "public" else spec


def variant_entropy(spec: Mapping, test_seed: str | None = None) -> int:
    """The entropy of every variant's draws: the sealed seed's own derivation for them, or the public config seed's."""
    from heuresis.artifacts.sealing import SecretUnavailable, sealed_entropy, verify_seed

    if spec["test_seed"] == "public":
        return int.from_bytes(seed_of(_PUBLIC_PREFIX, int(spec["seed"])).generate_state(8, np.uint32).tobytes(), "little")
    if test_seed is None:
        raise SecretUnavailable("the games' test variants are sealed (secrets.test_seed: sealed): the references job "
                                "needs the sealed seed")
    if spec.get("commitment") is None or not verify_seed(test_seed, spec["commitment"]):
        raise SecretUnavailable(f"the given test seed does not match the commitment {spec.get('commitment')} "
                                "the variants' job records")
    return sealed_entropy(test_seed, "games-test-variants")


# --- the perturbation ---------------------------------------------------------------------------
def _get(spec: Mapping, path: str) -> Any:
    node: Any = spec
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def _set(spec: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = spec
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def perturbation_errors(scn: Scenario) -> list[str]:
    """Problems of a scenario's ``perturb:`` section (each message names the scenario and the key)."""
    section = scn.spec.get("perturb")
    where = f"scenario {scn.name!r}: perturb"
    if scn.spec.get("trap_design") is None:
        return [f"scenario {scn.name!r}: trap_design: the scenario has no trap, and a test variant is a game with a "
                "trap (its optimum must clearly beat the trap)"]
    if not isinstance(section, Mapping) or not section:
        return [f"{where}: a test variant needs the ranges its values are drawn from (a perturb: mapping of "
                "dotted keys to [lo, hi] or [lo, hi, step])"]
    msgs = []
    for path, rng in section.items():
        try:
            value = _get(scn.spec, str(path))
        except KeyError:
            msgs.append(f"{where}.{path}: the scenario has no such key")
            continue
        if not _is_number(value):
            msgs.append(f"{where}.{path}: the scenario's value {value!r} is not a number")
        ok = isinstance(rng, list) and len(rng) in (2, 3) and all(_is_number(x) for x in rng)
        if not ok:
            msgs.append(f"{where}.{path}: {rng!r} is not [lo, hi] or [lo, hi, step]")
        elif rng[0] > rng[1] or (len(rng) == 3 and rng[2] <= 0):
            msgs.append(f"{where}.{path}: {rng!r}: lo must not exceed hi and the step must be positive")
    return msgs


def draw_values(section: Mapping, rng: np.random.Generator) -> dict[str, int | float]:
    """One value per key of a ``perturb:`` section, in sorted key order (the draw order is part of the seed's meaning)."""
    out: dict[str, int | float] = {}
    for path in sorted(section):
        lo, hi, *step = section[path]
        if step:
            n = int(np.floor((hi - lo) / step[0] + 1e-9))
            v: int | float = lo + step[0] * int(rng.integers(n + 1))
            out[path] = int(v) if all(isinstance(x, int) for x in (lo, hi, *step)) else round(float(v), 12)
        elif isinstance(lo, int) and isinstance(hi, int):
            out[path] = int(rng.integers(lo, hi + 1))
        else:
            out[path] = round(float(lo + (hi - lo) * rng.random()), 6)
    return out


def make_variant(base: Scenario, k: int, values: Mapping[str, Any], seed: int, attempt: int) -> Scenario:
    """Test variant ``k`` of ``base`` with the given drawn values and scenario seed (no draw: a rebuild)."""
    spec = copy.deepcopy(base.spec)
    for path, v in values.items():
        _set(spec, path, v)
    spec.update(name=variant_name(base.name, k), seed=int(seed), variant=f"{spec['variant']}{VARIANT_SEP}{int(k)}",
                variant_of=base.name, split="test", perturbed=dict(values), variant_attempt=int(attempt),
                strategies={}, control=None)
    return Scenario(spec, base.path)


def draw_variant(base: Scenario, k: int, entropy: int, attempt: int) -> Scenario:
    """Attempt ``attempt`` at test variant ``k`` of ``base``: its values and seed drawn from ``entropy``."""
    rng = np.random.default_rng(seed_of(entropy, "games-test-variant", base.name, int(k), int(attempt)))
    values = draw_values(base.spec["perturb"], rng)
    return make_variant(base, k, values, int(rng.integers(2**31 - 1)), attempt)


def accepted(ref: References, scn: Scenario) -> str:
    """Why a drawn variant is refused ('' when accepted): its optimum must clearly beat its trap and avoid the trap pattern."""
    if not ref.optimum_lo > ref.trap_hi:
        return (f"the optimum found ({ref.optimum:.3f}, 95% [{ref.optimum_lo:.3f}, {ref.optimum_hi:.3f}]) does not "
                f"clearly beat the trap ({ref.trap:.3f}, [{ref.trap_lo:.3f}, {ref.trap_hi:.3f}])")
    pattern = scn.spec.get("trap_pattern") or []
    if pattern and follows_pattern(pattern, ref.optimum_design):
        return f"the optimum found {ref.optimum_design} follows the trap pattern {pattern}"
    return ""


def build_variant(base: Scenario, k: int, entropy: int, search: Mapping | None = None,
                  log: Callable[[str], None] = lambda _m: None) -> tuple[Scenario, References]:
    """The first accepted attempt at test variant ``k`` of ``base`` and its references.

    Raises :class:`~heuresis.causal.games.scenario.ScenarioError` naming the variant and the last reason
    when no attempt of :data:`MAX_ATTEMPTS` is accepted (the ranges then admit no real trap).
    """
    errors = perturbation_errors(base)
    if errors:
        raise ScenarioError("\n".join(errors))
    why = ""
    for attempt in range(MAX_ATTEMPTS):
        scn = draw_variant(base, k, entropy, attempt)
        ref = scenario_references(scn, search, integer=False)
        why = accepted(ref, scn)
        if not why:
            return scn, with_integer(scn, ref)      # the optimum over the integer lattice: the accepted draw's only
        log(f"{scn.name}: attempt {attempt} refused: {why}; drawing again")
    raise ScenarioError(f"scenario {variant_name(base.name, k)!r}: no draw of {MAX_ATTEMPTS} within {base.name}'s perturb "
                        f"ranges is a game with a trap: {why}")


def from_references(base: Scenario, name: str, ref: Mapping) -> Scenario:
    """The variant a references row records (its values, seed and attempt), rebuilt without the test seed."""
    perturbed = ref["perturbed"]
    values = json.loads(perturbed) if isinstance(perturbed, str) else perturbed
    return make_variant(base, variant_index(name), values, int(ref["seed"]), int(ref["variant_attempt"]))
