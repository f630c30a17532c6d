"""The workflow's plan (heuresis.preflight.plan): the rules' lists and paths, computed by the package."""

import pytest
from snakemake.io import expand as snakemake_expand

from heuresis.artifacts import paths as P
from heuresis.preflight.plan import expand


@pytest.mark.parametrize("patterns, values", [
    (P.TRUTH_GRAPHS, {"family": ["lg", "wild"], "split": ["dev", "test"]}),
    ([P.INSTANCES, P.TRUTH_GRAPHS, P.TRUTH_NODES], {"family": ["anm", "lg", "mixed"], "split": ["dev", "test"]}),
    (P.TRUTH_GRAPHS, {"family": ["lg", "wild"], "split": "test"}),
    (P.LEAKAGE, {"agent": ["gpt", "claude"], "network": ["asia", "cancer", "sachs"]}),
    (P.GAME_REFERENCES, {"scenario": []}),
])
def test_expand_is_snakemakes_in_the_same_order(patterns, values):
    assert expand(patterns, **values) == snakemake_expand(patterns, **values)
