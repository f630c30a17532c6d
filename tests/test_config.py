"""A bad configuration fails with the offending key named."""

import copy

import pytest

from heuresis.config import ConfigError, validate_config


def _broken(cfg, edit):
    c = copy.deepcopy(cfg)
    edit(c)
    return c


CASES = [
    ("unknown kind", lambda c: c["families"]["wild"]["kinds"].update({"wavelet": {"weight": 1, "noise": [0.1, 0.2]}}),
     "families.wild.kinds.wavelet", "unknown mechanism kind 'wavelet'"),
    ("empty mixture", lambda c: c["families"]["lg"].update(kinds={}), "families.lg.kinds", "empty mixture"),
    ("negative range", lambda c: c["families"]["anm"]["kinds"]["mlp"].update(noise=[-0.5, 1.5]),
     "families.anm.kinds.mlp.noise", "negative"),
    ("inverted range", lambda c: c["families"]["mixed"].update(root_noise=[2.0, 0.5]),
     "families.mixed.root_noise", "inverted"),
    ("missing key", lambda c: c["families"]["gauntlet"].pop("root_noise"), "families.gauntlet.root_noise", "missing"),
    ("missing noise", lambda c: c["families"]["lg"]["kinds"]["linear"].pop("noise"),
     "families.lg.kinds.linear.noise", "needs a noise-scale range"),
    ("noise on hetero", lambda c: c["families"]["hetero"]["kinds"]["mlp_hetero"].update(noise=[0.1, 0.2]),
     "families.hetero.kinds.mlp_hetero.noise", "input-dependent"),
    ("zero weights", lambda c: c["families"]["lg"]["kinds"]["linear"].update(weight=0), "families.lg.kinds",
     "weights are zero"),
    ("typo at top", lambda c: c.update(sede=1), "<top level>", "sede"),
    ("missing instances key", lambda c: c["instances"].pop("n"), "instances.n", "missing"),
    ("unknown prior", lambda c: c["graph"].update(priors=["sf"]), "graph.priors.0", "sf"),
    ("bad constant range", lambda c: c["mechanisms"]["sigmoid"].update(gain=[3.0, 1.0]), "mechanisms.sigmoid.gain",
     "inverted"),
    ("bad family override", lambda c: c["families"]["wild"]["kinds"]["fourier"].update(params={"frequency": [-1, 2]}),
     "families.wild.kinds.fourier.params.frequency", "negative"),
    ("short range", lambda c: c["families"]["lg"].update(root_noise=[1.0]), "families.lg.root_noise", "short"),
]


@pytest.mark.parametrize("name,edit,key,words", CASES, ids=[c[0] for c in CASES])
def test_bad_config_names_the_key(paper_config, name, edit, key, words):
    with pytest.raises(ConfigError) as info:
        validate_config(_broken(paper_config, edit))
    msg = str(info.value)
    assert f"config key {key}" in msg, msg
    assert words in msg, msg


def test_valid_configs_and_defaults(paper_config, quick_config):
    assert set(paper_config["families"]) == {"lg", "anm", "hetero", "wild", "mixed", "gauntlet"}
    assert paper_config["instances"] == {"d": 10, "n": 600, "n_dev": 100, "n_test": 32}
    assert quick_config["families"] == paper_config["families"]
    # schema defaults filled in per mixture entry
    assert paper_config["families"]["lg"]["kinds"]["linear"]["standardize_output"] is False
    assert paper_config["families"]["wild"]["kinds"]["abs"]["standardize_output"] is True


def test_seventh_family_is_one_entry(paper_config):
    c = copy.deepcopy(paper_config)
    c["families"]["smooth"] = {"root_noise": [1.0, 1.0],
                               "kinds": {"sigmoid": {"weight": 3, "noise": [0.2, 0.3]}, "abs": {"weight": 1, "noise": [0.2, 0.3]}}}
    assert "smooth" in validate_config(c)["families"]
