"""heuresis.causal.ci.FisherZ must reproduce causal-learn's ``CIT(data, "fisherz")``."""
from __future__ import annotations

import numpy as np
import pytest

cit = pytest.importorskip("causallearn.utils.cit")

from heuresis.causal.ci import CI_TESTS, CITest, FisherZ, make_ci_test, register_ci_test  # noqa: E402

D = 8


def _data(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n, D))
    X = e.copy()
    for j in range(1, D):
        k = rng.integers(0, j)
        if kind == "linear":
            X[:, j] += rng.uniform(-1.5, 1.5) * X[:, k]
        else:
            X[:, j] += np.sin(X[:, k]) + 0.3 * X[:, k] * X[:, rng.integers(0, j)]
    return X


@pytest.mark.parametrize("n", [150, 600, 1300])
@pytest.mark.parametrize("kind", ["linear", "nonlinear"])
@pytest.mark.parametrize("size", [0, 1, 2, 3, 4])
def test_matches_causallearn(kind, n, size):
    data = _data(kind, n, n + size)
    ref, ours = cit.CIT(data, "fisherz"), FisherZ(data)
    rng = np.random.default_rng(size)
    worst = 0.0
    for _ in range(40):
        v = rng.choice(D, size + 2, replace=False)
        x, y, S = int(v[0]), int(v[1]), [int(s) for s in v[2:]]
        worst = max(worst, abs(ref(x, y, S) - ours.pvalue(x, y, S)))
    assert worst <= 1e-12


def test_deterministic_and_near_deterministic_relation():
    data = _data("linear", 150, 1)
    data[:, 3] = 2 * data[:, 1] + 1e-9 * data[:, 2]  # |r| -> 1 clipping branch
    ref = cit.CIT(data, "fisherz")
    a, b = FisherZ(data), FisherZ(data)
    for x, y, S in [(1, 3, []), (1, 3, [0]), (3, 5, [1, 2]), (0, 4, [1, 2, 5, 6]), (3, 4, [1])]:
        try:
            p_ref = ref(x, y, S)
        except ValueError:  # causal-learn: singular correlation submatrix
            with pytest.raises(ValueError, match="singular"):
                a.pvalue(x, y, S)
            continue
        pa = a.pvalue(x, y, S)
        assert pa == b.pvalue(x, y, S)  # deterministic
        assert abs(pa - p_ref) <= 1e-12


def test_counter_cache_and_registry():
    data = _data("linear", 150, 2)
    t = make_ci_test("fisherz", data)
    assert isinstance(t, FisherZ) and t.name == "fisherz" and CI_TESTS["fisherz"] is FisherZ
    p = t.pvalue(2, 5, [1, 0])
    assert t.pvalue(5, 2, [0, 1]) == p
    assert (t.n_tests, t.n_computed, t.n_cache_hits) == (2, 1, 1)
    with pytest.raises(ValueError) as ei:
        make_ci_test("kcii", data)
    assert str(ei.value).startswith("unknown CI test 'kcii'; known: ")
    assert "fisherz" in str(ei.value) and "kci" in str(ei.value)


def test_register_custom_test():
    @register_ci_test("_always_half")
    class Half(CITest):
        def _compute(self, x, y, S):
            return 0.5

    try:
        t = make_ci_test("_always_half", np.zeros((10, 3)))
        assert t.name == "_always_half" and t.pvalue(0, 2, [1]) == 0.5 and t.n_tests == 1
        with pytest.raises(TypeError):
            register_ci_test("_bad")(object)
    finally:
        CI_TESTS.pop("_always_half", None)
