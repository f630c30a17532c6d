"""The games' test variants: drawn from the test seed, unlike every public scenario, with a real trap."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from heuresis.artifacts.sealing import SecretUnavailable, commitment, draw_secret
from heuresis.causal.games import causalgame as cg
from heuresis.causal.games.design import follows_pattern
from heuresis.causal.games.references import seed_of
from heuresis.causal.games.scenario import ScenarioError, load_scenario
from heuresis.stages.games import variants as V
from heuresis.stages.games.workflow import config_errors, game_scenario, load_references, run_references, scenario_names

ROOT = Path(__file__).resolve().parents[1]
CG = ROOT / "config" / "games" / "causalgame"
BASES = ["antenna_trap", "deployment_zone_trap_categorical", "deployment_zone_trap_env_shift"]   # weather: no trap
SEARCH = {"verify_fleets": 4}
PUBLIC = {"test_seed": "public", "seed": 20260101}


def _fresh_survival(scn, design, fleets: int = 4, size: int = 1000) -> np.ndarray:
    """Survival of a design on fleets no reference computation flew (an independent draw)."""
    return np.array([cg.fly(scn, design, size, np.random.default_rng(seed_of("independent", scn.name, f)), stage=2,
                            enforce_budget=False).survival for f in range(fleets)])


@pytest.mark.parametrize("base_name", BASES)
def test_a_test_variant_differs_from_every_public_scenario_and_its_optimum_beats_its_trap(base_name):
    """Each drawn value lies in its stated range; the hidden SCM differs from every public scenario of the
    model; the recomputed optimum beats the trap on fresh fleets and avoids the trap pattern."""
    base = load_scenario(base_name, CG)
    scn, ref = V.build_variant(base, 0, V.variant_entropy(PUBLIC), SEARCH)
    assert scn.name == f"{base_name}@test0" and scn.spec["split"] == "test" and scn.spec["seed"] != base.spec["seed"]
    ranges = base.spec["perturb"]
    assert set(scn.spec["perturbed"]) == set(ranges)
    for path, (lo, hi, *step) in ranges.items():
        value = V._get(scn.spec, path)
        assert lo <= value <= hi, path
        if step:
            assert (value - lo) / step[0] == pytest.approx(round((value - lo) / step[0])), path
    public = [s for s in cg.load_cg_all(CG).values() if s.model == base.model]
    for other in public:
        assert any(V._get(other.spec, p) != V._get(scn.spec, p) for p in ranges
                   if isinstance(V._get(other.spec, p), (int, float))), other.name
    optimum, trap = _fresh_survival(scn, ref.optimum_design), _fresh_survival(scn, ref.trap_design)
    diff = optimum - trap
    assert diff.mean() - 3 * diff.std(ddof=1) / np.sqrt(len(diff)) > 0, (optimum, trap)
    assert not follows_pattern(scn.spec["trap_pattern"], ref.optimum_design)
    if "trap_design.antenna" in ranges:                                # the trap of the drawn values
        assert ref.trap_design["antenna"] == scn.spec["perturbed"]["trap_design.antenna"]


def test_variants_are_reproducible_rebuilt_from_their_references_and_redrawn_by_another_seed(tmp_path):
    """The same seed draws the same variant; the references row rebuilds it exactly (plays need no seed);
    another sealed seed draws other values; a sealed draw needs the seed its commitment names."""
    base = load_scenario("deployment_zone_trap_categorical", CG)
    out = tmp_path / "deployment_zone_trap_categorical@test1.parquet"
    run_references("deployment_zone_trap_categorical@test1", CG, SEARCH, out, variants=PUBLIC)
    refs = load_references([out])
    row = refs["deployment_zone_trap_categorical@test1"]
    assert row["split"] == "test" and row["variant_of"] == "deployment_zone_trap_categorical"
    assert row["variant_attempt"] >= 0 and row["optimum_method"] == "exact"
    rebuilt = game_scenario("deployment_zone_trap_categorical@test1", CG, refs)
    drawn = V.draw_variant(base, 1, V.variant_entropy(PUBLIC), row["variant_attempt"])
    assert rebuilt.spec == drawn.spec
    with pytest.raises(ScenarioError, match="a test variant has no file"):    # never from a file of that name
        load_scenario("deployment_zone_trap_categorical@test1", CG)
    assert json.loads(row["perturbed"]) == drawn.spec["perturbed"]
    other = V.draw_variant(base, 0, V.variant_entropy(PUBLIC), 0)
    assert other.spec["perturbed"] != drawn.spec["perturbed"]          # variant 0 is not variant 1
    seed = draw_secret()
    sealed = {"test_seed": "sealed", "commitment": commitment(seed)}
    a = V.draw_variant(base, 1, V.variant_entropy(sealed, seed), 0).spec["perturbed"]
    b = V.draw_variant(base, 1, V.variant_entropy({"test_seed": "sealed", "commitment": commitment(s2 := draw_secret())},
                                                  s2), 0).spec["perturbed"]
    assert a != b and a != V.draw_variant(base, 1, V.variant_entropy(PUBLIC), 0).spec["perturbed"]
    with pytest.raises(SecretUnavailable, match="needs the sealed seed"):
        V.variant_entropy(sealed)
    with pytest.raises(SecretUnavailable, match="does not match the commitment"):
        V.variant_entropy(sealed, draw_secret())


def test_a_scenario_without_a_trap_has_no_test_variant():
    """weather_noise has no trap (its Stage-1 and Stage-2 optima are one design): a variant of it is refused
    before any draw, naming the scenario and the key (docs/games.md, divergence 5)."""
    base = load_scenario("weather_noise", CG)
    with pytest.raises(ScenarioError, match=r"'weather_noise': trap_design: the scenario has no trap"):
        V.build_variant(base, 0, V.variant_entropy(PUBLIC), SEARCH)


def test_bad_test_variant_settings_are_named_at_start(quick_config, tmp_path):
    """A scenario without ranges, a key the scenario lacks, a reversed range."""
    cfg = copy.deepcopy(quick_config)
    (tmp_path / "no_ranges.yaml").write_text("extends: antenna_trap\nname: no_ranges\nperturb: {}\n")
    (tmp_path / "bad_ranges.yaml").write_text(
        "extends: antenna_trap\nname: bad_ranges\nperturb: {scm.nope: [1, 2], def_budget: [100, 90]}\n")
    for f in ("antenna_trap.yaml",):
        (tmp_path / f).write_text((CG / f).read_text())
    cfg["games"].update(scenarios_dir=str(tmp_path), scenarios=["antenna_trap"],
                        test_variants={"count": 2, "of": ["no_ranges", "bad_ranges"]})
    msgs = "\n".join(config_errors(cfg))
    assert "config key games.test_variants.of: scenario 'no_ranges': perturb: a test variant needs the ranges" in msgs
    assert "scenario 'bad_ranges': perturb.scm.nope: the scenario has no such key" in msgs
    assert "scenario 'bad_ranges': perturb.def_budget: [100, 90]: lo must not exceed hi" in msgs
    assert scenario_names(cfg)[-4:] == ["no_ranges@test0", "no_ranges@test1", "bad_ranges@test0", "bad_ranges@test1"]


def test_games_tables_say_whether_their_test_variants_are_sealed():
    from heuresis.stages.games.analysis import split_caption

    dev = {"antenna_trap": {"split": "dev"}}
    both = {**dev, "antenna_trap@test0": {"split": "test"}}
    assert "public scenario files only" in split_caption(dev, {"test_seed": "sealed", "commitment": "ab" * 32})
    assert split_caption(both, {"test_seed": "public", "salt": "public"}) == (
        "Games test variants (1: antenna_trap@test0) drawn from the test seed. UNSEALED: the test split derives from "
        "the public config seed (secrets.test_seed: public); anyone can regenerate it.")
    sealed = split_caption(both, {"test_seed": "sealed", "commitment": "cd" * 32, "committed": "2026-12-01"})
    assert sealed == (f"Games test variants (1: antenna_trap@test0) drawn from the test seed. Test split sealed, seed "
                      f"commitment sha256:{'cd' * 32}, committed 2026-12-01.")
