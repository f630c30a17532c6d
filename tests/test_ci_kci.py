"""heuresis.causal.ci.KCI must reproduce causal-learn's default ``CIT(data, "kci")``.

Every comparison is live against causal-learn on random data (linear,
nonlinear, mixed and near-deterministic SCMs), unconditional and with
conditioning sets of size 1-4, at n = 150, 600 and 1300. Sizes are chosen so
the file runs in well under a minute on 2 cores (causal-learn's conditional
test costs ~0.2 s at n = 600 and ~1.5 s at n = 1300, so most queries are at
n = 150).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

cit = pytest.importorskip("causallearn.utils.cit")

from heuresis.causal.ci import CI_TESTS, KCI, CITest, make_ci_test  # noqa: E402

TOL = 1e-9
D = 7


def _scm(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n, D))
    X = np.empty((n, D))
    X[:, 0] = e[:, 0]
    X[:, 1] = e[:, 1]
    if kind == "linear":
        X[:, 2] = 0.8 * X[:, 0] - 0.5 * X[:, 1] + 0.6 * e[:, 2]
        X[:, 3] = 1.2 * X[:, 2] + 0.5 * e[:, 3]
        X[:, 4] = 0.7 * X[:, 3] - 0.4 * X[:, 0] + 0.5 * e[:, 4]
        X[:, 5] = 0.9 * X[:, 1] + e[:, 5]
        X[:, 6] = 0.5 * X[:, 4] + 0.5 * X[:, 5] + 0.5 * e[:, 6]
    elif kind == "nonlinear":
        X[:, 2] = np.sin(X[:, 0]) + 0.3 * e[:, 2]                 # X2 = sin(X1) + noise
        X[:, 3] = X[:, 0] * X[:, 1] + 0.3 * e[:, 3]               # product
        X[:, 4] = np.tanh(2 * X[:, 2]) + 0.5 * X[:, 3] ** 2 / 4 + 0.3 * e[:, 4]
        X[:, 5] = np.cos(X[:, 1]) * X[:, 3] + 0.4 * e[:, 5]
        X[:, 6] = np.abs(X[:, 4]) - np.exp(-X[:, 5] ** 2) + 0.3 * e[:, 6]
    elif kind == "mixed":
        X[:, 2] = 0.9 * X[:, 0] + 0.5 * e[:, 2]
        X[:, 3] = np.sin(2 * X[:, 2]) + X[:, 1] ** 2 / 3 + 0.4 * e[:, 3]
        X[:, 4] = X[:, 3] * X[:, 1] + 0.5 * e[:, 4]
        X[:, 5] = 0.6 * X[:, 4] + 0.8 * e[:, 5] ** 3 / 3
        X[:, 6] = rng.exponential(size=n)                         # skewed, independent
    elif kind == "neardet":
        # strongly explained variables: Rz/KxR nearly singular directions
        X[:, 2] = np.sin(X[:, 0]) + 1e-3 * e[:, 2]
        X[:, 3] = X[:, 2] + 1e-4 * e[:, 3]                        # near-duplicate of X2
        X[:, 4] = X[:, 0] * X[:, 1] + 1e-2 * e[:, 4]
        X[:, 5] = np.round(X[:, 1], 1)                            # ties / discretised
        X[:, 6] = X[:, 3] ** 2 + 0.1 * e[:, 6]
    else:  # pragma: no cover
        raise ValueError(kind)
    return X


@functools.cache
def _pair(kind: str, n: int, seed: int):
    data = _scm(kind, n, seed)
    return data, cit.CIT(data, "kci"), KCI(data)


def _queries(n_q: int, size: int, seed: int):
    rng = np.random.default_rng(1000 * size + seed)
    out = []
    for _ in range(n_q):
        v = rng.choice(D, size + 2, replace=False)
        out.append((int(v[0]), int(v[1]), [int(s) for s in v[2:]]))
    return out


def _check(kind: str, n: int, size: int, n_q: int, seed: int = 0) -> float:
    _data, ref, ours = _pair(kind, n, seed)
    diffs = []
    for x, y, S in _queries(n_q, size, seed + n):
        p_ref = ref(x, y, S)
        p_us = ours.pvalue(x, y, S)
        assert 0.0 <= p_us <= 1.0 + 1e-12
        diffs.append(abs(p_ref - p_us))
    worst = max(diffs)
    assert worst <= TOL, f"{kind} n={n} |S|={size}: max |dp| = {worst:.3e}"
    return worst


# ---------------------------------------------------------------- agreement
# n = 150: 4 kinds x 5 sizes x 12 queries = 240 tests
@pytest.mark.parametrize("size", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["linear", "nonlinear", "mixed", "neardet"])
def test_matches_causallearn_n150(kind, size):
    _check(kind, 150, size, 12)


# n = 600: 2 kinds x (8 unconditional + 3 per size 1..4) = 40 tests
@pytest.mark.parametrize("size,n_q", [(0, 8), (1, 3), (2, 3), (3, 3), (4, 3)])
@pytest.mark.parametrize("kind", ["nonlinear", "mixed"])
def test_matches_causallearn_n600(kind, size, n_q):
    _check(kind, 600, size, n_q)


# n = 1300 (width rules switch at 1200): 6 unconditional, 2 + 1 conditional
@pytest.mark.parametrize("size,n_q", [(0, 6), (1, 2), (2, 1)])
def test_matches_causallearn_n1300(size, n_q):
    _check("nonlinear", 1300, size, n_q)


def test_width_rule_boundaries():
    """n = 199/200 and 1199/1200 switch causal-learn's empirical widths."""
    from heuresis.causal.ci.kci import hsic_theta, kci_theta

    assert hsic_theta(199) == 1 / 0.8 ** 2 and hsic_theta(200) == 1 / 0.5 ** 2
    assert hsic_theta(1200) == 1 / 0.3 ** 2
    assert kci_theta(199, 2) == 1 / 1.2 ** 2 / 2 and kci_theta(1199, 1) == 1 / 0.7 ** 2
    assert kci_theta(1200, 3) == 1 / 0.4 ** 2 / 3
    for n in (199, 200):
        data = _scm("mixed", n, 3)
        ref, ours = cit.CIT(data, "kci"), KCI(data)
        for x, y, S in [(0, 2, []), (3, 1, [2]), (4, 5, [1, 3])]:
            assert abs(ref(x, y, S) - ours.pvalue(x, y, S)) <= TOL


def test_roles_follow_causallearn_order():
    """X-role is min(x, y): the conditional statistic is asymmetric, so the
    reversed query must give causal-learn's canonical answer, not a new one."""
    data, ref, ours = _pair("nonlinear", 150, 0)
    p1 = ours.pvalue(5, 2, [0, 3])
    p2 = ours.pvalue(2, 5, [3, 0])
    assert p1 == p2
    assert abs(p1 - ref(2, 5, [0, 3])) <= TOL
    # and the raw (uncached) computation with swapped roles really differs
    fresh = KCI(data)
    s_canon = fresh.statistic(2, 5, (0, 3))
    s_swap = fresh._cond(5, 2, (0, 3))
    assert s_canon[0] != pytest.approx(s_swap[0], rel=1e-6)


def test_dense_and_lowrank_paths_agree():
    """Low-rank factors (rank cap n) and the dense path (rank cap 0) agree."""
    data, ref, _ = _pair("mixed", 150, 0)
    low = KCI(data, rank_frac=1.0)
    dense = KCI(data, rank_frac=0.0)
    for x, y, S in _queries(10, 1, 7) + _queries(10, 2, 7):
        p_low, p_dense = low.pvalue(x, y, S), dense.pvalue(x, y, S)
        assert abs(p_low - p_dense) <= TOL
        assert abs(p_low - ref(x, y, S)) <= TOL
    assert low.stats["lowrank_x"] > 0 and dense.stats["lowrank_x"] == 0


def test_bounded_cache_still_exact():
    """A tiny cache budget forces evictions but changes nothing."""
    data, ref, _ = _pair("nonlinear", 150, 0)
    small = KCI(data, max_cache_mb=0.5)
    for x, y, S in _queries(15, 2, 11):
        assert abs(small.pvalue(x, y, S) - ref(x, y, S)) <= TOL
    assert small.cache_bytes <= 0.5 * 2 ** 20 or len(small._mats) == 1


# ---------------------------------------------------------------- interface
def test_counter_and_cache():
    data = _scm("linear", 150, 5)
    t = KCI(data)
    assert t.name == "kci" and isinstance(t, CITest)
    p = t.pvalue(1, 4, [3, 2])
    assert (t.n_tests, t.n_computed, t.n_cache_hits) == (1, 1, 0)
    # same test: unordered pair, any order / duplicates of S -> cache hit, still counted
    assert t.pvalue(4, 1, (2, 3)) == p
    assert t(1, 4, [2, 3, 3]) == p
    assert (t.n_tests, t.n_computed, t.n_cache_hits) == (3, 1, 2)
    t.pvalue(1, 4, [2])
    assert (t.n_tests, t.n_computed) == (4, 2)
    assert t.cache_key(4, 1, [3, 2]) == (1, 4, (2, 3))


def test_invalid_queries():
    t = KCI(_scm("linear", 150, 5))
    with pytest.raises(ValueError):
        t.pvalue(1, 1, [])
    with pytest.raises(ValueError):
        t.pvalue(1, 2, [2])
    with pytest.raises(ValueError):
        t.pvalue(1, 2, [D])
    assert t.n_tests == 0


def test_registry():
    assert CI_TESTS["kci"] is KCI
    data = _scm("linear", 150, 5)
    t = make_ci_test("kci", data, max_cache_mb=64)
    assert isinstance(t, KCI) and t.name == "kci"
    with pytest.raises(ValueError, match=r"unknown CI test 'nope'; known: .*fisherz.*kci"):
        make_ci_test("nope", data)


# ---------------------------------------------------------------- building blocks
def test_top_eigh_matches_full_eigh():
    """Partial eigensolver = eigh + causal-learn's cut (kept part of A)."""
    from heuresis.causal.ci.kci import _top_eigh

    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 3))
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.exp(-0.5 * sq)
    K -= K.mean(0)
    K -= K.mean(1)[:, None]
    for thresh in (1e-5, 1e-3):
        w, V = _top_eigh(K, thresh)
        w0, V0 = np.linalg.eigh(K)
        keep = w0 > w0.max() * thresh
        assert len(w) == keep.sum() and 0 < len(w) < 300
        A, A0 = (V * w) @ V.T, (V0[:, keep] * w0[keep]) @ V0[:, keep].T
        assert np.abs(A - A0).max() <= 1e-12 * w0.max()
        assert np.abs(V.T @ V - np.eye(len(w))).max() <= 1e-12


def test_projector_paths_agree():
    """Factored and dense P (Cholesky inverse) give the same P K P."""
    from heuresis.causal.ci.kci import kci_theta

    data = _scm("nonlinear", 150, 0)
    low, dense = KCI(data, rank_frac=1.0), KCI(data, rank_frac=0.0)
    S = (0, 3)
    Pl, Pd = low._projector(S), dense._projector(S)
    assert Pl.Rz is None and Pd.Rz is not None
    th = kci_theta(150, 2)
    K = low._prodkernel((2, th), S, 0.25 * th)
    ref = Pd.apply(Pd.apply(K).T)
    for P in (Pl, Pd):  # sandwich consumes K and defines only the lower triangle
        assert np.abs(np.tril(P.sandwich(K.copy())) - np.tril(ref)).max() <= 1e-10 * np.abs(ref).max()


def test_queries_run_on_one_blas_thread_and_restore_the_callers(monkeypatch):
    """Every computed query runs with BLAS at one thread (faster: small products), whatever the caller set,
    and gives the caller's thread counts back; the p-values still match causal-learn's."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    seen = []

    def spy(real):
        def wrapped(self, *args):
            seen.append(blas_threads())
            return real(self, *args)
        return wrapped

    monkeypatch.setattr(KCI, "_uncond", spy(KCI._uncond))
    monkeypatch.setattr(KCI, "_cond", spy(KCI._cond))
    data, ref, _ = _pair("mixed", 150, 0)
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        t = KCI(data)
        queries = [(0, 1, []), (0, 2, [1]), (2, 4, [1, 3])]
        for x, y, S in queries:
            assert abs(t.pvalue(x, y, S) - ref(x, y, S)) <= TOL
        t.statistic(3, 5, [0])
        after = blas_threads()
    assert seen == [{1}] * 4
    assert after == before and len(before) >= 1


# ---------------------------------------------------------------- a PC level side by side
def _pc_run(data: np.ndarray, workers: int):
    from heuresis.causal.algorithms.pc import pc

    test = KCI(data, workers=workers)
    res = pc(data, test, 0.05)
    return res, test, [(t.x, t.y, t.sepset, t.pvalue) for t in res.tests]


def test_prefetch_in_processes_gives_the_sequential_pvalues_bit_for_bit(monkeypatch):
    """PC-stable hands each level's tests to ``KCI.prefetch``, which runs them in forked processes: the tests, their
    p-values (bit for bit), the graph and the counters are those of one process asking one query at a time, and
    the p-values are causal-learn's."""
    import os

    data, ref, _ = _pair("nonlinear", 300, 0)
    res1, seq, tests1 = _pc_run(data, 1)
    forks = []
    real_fork = os.fork

    def counting_fork():
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(os, "fork", counting_fork)
    res2, par, tests2 = _pc_run(data, 2)
    assert forks, "prefetch ran no process"
    assert max(len(t[2]) for t in tests1) >= 2
    assert tests2 == tests1
    assert res2.graph == res1.graph and res2.sepsets == res1.sepsets
    assert (par.n_tests, par.n_computed, par.n_cache_hits) == (seq.n_tests, seq.n_computed, seq.n_cache_hits)
    assert par.stats == seq.stats and seq.stats["dense_x"] > 0  # the children's factors counted in the parent
    for x, y, S, p in tests2[::4]:
        assert abs(p - ref(x, y, list(S))) <= TOL


def test_prefetch_computes_a_failed_processs_share_itself(monkeypatch):
    """A worker process that fails leaves its queries to the caller: same p-values, nothing lost."""
    import os

    data, _, _ = _pair("mixed", 150, 0)
    _, _, expected = _pc_run(data, 1)
    parent = os.getpid()
    real_p = KCI._p

    def failing_in_children(self, x, y, S):
        if os.getpid() != parent:
            raise RuntimeError("worker died")
        return real_p(self, x, y, S)

    monkeypatch.setattr(KCI, "_p", failing_in_children)
    _, _, got = _pc_run(data, 2)
    assert got == expected


def test_prefetch_follows_the_callers_thread_limit():
    """Under a one-thread BLAS limit (the workflow's algorithm runs) prefetch computes nothing ahead: no process."""
    from threadpoolctl import threadpool_limits

    data, _, _ = _pair("linear", 150, 0)
    t = KCI(data)
    with threadpool_limits(limits=1):
        assert t.worker_count() == 1
        assert t.prefetch([(0, 1, [2]), (0, 3, [2])]) == 0
    assert t.n_computed == 0
    with pytest.raises(ValueError, match="workers"):
        KCI(data, workers=0)


def test_a_fresh_process_runs_levels_in_as_many_processes_as_it_allows_blas_threads():
    """In a new process (no pools looked up yet) asking for the worker count changes no thread setting, and PC-stable
    with a default KCI forks when two BLAS threads are allowed (what a user's first call meets)."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import os
        import numpy as np
        from threadpoolctl import threadpool_info, threadpool_limits
        from heuresis.causal.algorithms.pc import pc
        from heuresis.causal.ci import KCI
        with threadpool_limits(limits=2, user_api="blas"):
            data = np.random.default_rng(0).standard_normal((150, 5))
            data[:, 2] += data[:, 0] + data[:, 1]
            data[:, 3] += np.sin(data[:, 2])
            test = KCI(data)
            blas = lambda: sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
            before = blas()
            workers = test.worker_count()
            after = blas()
            forks = []
            real = os.fork
            os.fork = lambda: (forks.append(1), real())[1]
            pc(data, test, 0.05)
            print(before, after, workers, len(forks) > 0)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, ["src", os.environ.get("PYTHONPATH")]))}
    cpus = len(os.sched_getaffinity(0))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout.split()
    assert out[:2] == ["[2]", "[2]"]                  # unchanged by the lookup
    assert int(out[2]) == min(2, cpus)
    assert out[3] == ("True" if cpus >= 2 else "False")
