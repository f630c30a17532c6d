"""Benchmark: causal-learn PC-stable with causal-learn's KCI vs. with heuresis' KCI.

Both runs use causal-learn's own ``pc(..., stable=True)``; only the CI test
object differs. Our test is plugged in through causal-learn's custom-CIT
registry (``causallearn.utils.cit.register_ci_test``) via a thin adapter that
keeps causal-learn's canonicalisation and p-value caching, so the PC
algorithm is identical. Runs are interleaved per instance after a warm-up.

Instances (``--source``): ``families`` (default) are the pipeline's own test instances of the
paper config (``config/config.yaml``: d = 10, n = 600), cycling through its families, so instance
i is family ``families[i % 6]``, test index ``i // 6``; ``random`` is a denser random SCM of mixed
nonlinear mechanisms (edge probability 0.3, about 13.5 edges at d = 10, against about 10 in the
families), kept to compare with earlier measurements.

A third run per instance (column ``PC``) is the pipeline's own PC-stable
(``heuresis.causal.algorithms.pc``, causal-learn's decision procedure re-implemented with a deletion
log) with our KCI: it hands each level's tests, all known once the level's adjacencies are frozen,
to ``KCI.prefetch``, which runs them in as many processes as the process allows BLAS threads
(``KCI.worker_count``; one process under ``--blas-threads 1``). Its graph, its tests (in order) and
their p-values are compared with causal-learn's run.

Threads: our KCI limits BLAS to one thread inside every query (``kci.one_blas_thread``);
``--blas-threads`` limits the whole process (causal-learn too) and ``--unpinned`` adds a run
per instance, ours with that limit switched off, so that one run shows what the limit saves at the
process's thread count.

Usage::

    PYTHONPATH=src python benchmarks/bench_kci.py --instances 6 --unpinned       # threads as the machine has them
    PYTHONPATH=src python benchmarks/bench_kci.py --instances 12 --blas-threads 1
    PYTHONPATH=src python benchmarks/bench_kci.py --instances 10 --source random --blas-threads 1
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import time
import tracemalloc
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from causallearn.search.ConstraintBased.PC import pc
from causallearn.utils import cit as cl_cit

from heuresis.causal.ci import KCI
from heuresis.causal.ci import kci as kci_module


# --------------------------------------------------------------------- data
def random_scm(d: int, n: int, seed: int, p_edge: float = 0.3) -> np.ndarray:
    """Random DAG with mixed nonlinear / linear mechanisms and Gaussian noise."""
    rng = np.random.default_rng(seed)
    A = np.triu(rng.random((d, d)) < p_edge, 1)
    funcs = [np.sin, np.tanh, lambda u: 0.5 * u ** 2, lambda u: u, lambda u: u,
             np.abs, np.cos, lambda u: u * np.exp(-0.25 * u ** 2)]
    X = np.zeros((n, d))
    for j in range(d):
        val = rng.uniform(0.3, 1.0) * rng.standard_normal(n)
        for i in np.nonzero(A[:, j])[0]:
            f = funcs[rng.integers(len(funcs))]
            val = val + rng.uniform(0.5, 1.5) * rng.choice([-1.0, 1.0]) * f(X[:, i])
        if rng.random() < 0.2:  # occasional multiplicative interaction
            pa = np.nonzero(A[:, j])[0]
            if len(pa) >= 2:
                val = val + 0.5 * X[:, pa[0]] * X[:, pa[1]]
        X[:, j] = val
    return X[:, rng.permutation(d)]


def family_instance(i: int, d: int, n: int):
    """Test instance ``i // F`` of family ``i % F`` (paper config, families in config order)."""
    from pathlib import Path

    import yaml

    from heuresis.stages.instances import generate_instance, instance_spec

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())
    cfg["instances"]["d"], cfg["instances"]["n"] = d, n
    fams = list(cfg["families"])
    fam = fams[i % len(fams)]
    return fam, generate_instance(instance_spec(cfg, fam), fam, "test", i // len(fams)).data


def make_data(args, i: int):
    if args.source == "random":
        return "random", random_scm(args.d, args.n, args.seed + i, args.p_edge)
    return family_instance(args.seed + i, args.d, args.n)


# --------------------------------------------------------------------- CIT adapters
LOG: list = []  # (key, depth, p, seconds) for every cache-miss evaluation
IMPLS: list = []  # heuresis KCI objects of the runs (for cache statistics; caches freed after each run)


class LoggedCausalLearnKCI(cl_cit.KCI):
    """causal-learn's KCI, logging every computed test."""

    def __call__(self, X, Y, condition_set=None):
        _, _, cs, key = self.get_formatted_XYZ_and_cachekey(X, Y, condition_set)
        if key in self.pvalue_cache:
            return self.pvalue_cache[key]
        t0 = time.perf_counter()
        p = super().__call__(X, Y, condition_set)
        LOG.append((key, len(cs), p, time.perf_counter() - t0))
        return p


class HeuresisKCIAdapter(cl_cit.CIT_Base):
    """heuresis' KCI behind causal-learn's CIT interface (same keys, same cache)."""

    def __init__(self, data, **kwargs):
        super().__init__(data, **kwargs)
        self.check_cache_method_consistent("kci", "heuresis-kci")
        self.assert_input_data_is_valid()
        self.impl = KCI(data)
        IMPLS.append(self.impl)

    def __call__(self, X, Y, condition_set=None):
        Xs, Ys, cs, key = self.get_formatted_XYZ_and_cachekey(X, Y, condition_set)
        if key in self.pvalue_cache:
            return self.pvalue_cache[key]
        t0 = time.perf_counter()
        p = self.impl.pvalue(Xs[0], Ys[0], cs)
        LOG.append((key, len(cs), p, time.perf_counter() - t0))
        self.pvalue_cache[key] = p
        return p


cl_cit.register_ci_test("bench_cl_kci", LoggedCausalLearnKCI)
cl_cit.register_ci_test("bench_heuresis_kci", HeuresisKCIAdapter)


def run_heuresis_pc(data: np.ndarray):
    """The pipeline's PC-stable with our KCI: (graph, [(causal-learn key, depth, p)], seconds, workers)."""
    from heuresis.causal.algorithms.pc import pc as heuresis_pc

    test = KCI(data)
    t0 = time.perf_counter()
    res = heuresis_pc(data, test, 0.05)
    dt = time.perf_counter() - t0
    log = []
    for r in res.tests:
        x, y = min(r.x, r.y), max(r.x, r.y)
        key = f"{x};{y}|{'.'.join(map(str, r.sepset))}" if r.sepset else f"{x};{y}"
        log.append((key, len(r.sepset), r.pvalue))
    return res.graph, log, dt, test.worker_count()


def run_pc(data: np.ndarray, method: str):
    LOG.clear()
    t0 = time.perf_counter()
    cg = pc(data, alpha=0.05, indep_test=method, stable=True, show_progress=False)
    dt = time.perf_counter() - t0
    return cg.G.graph.copy(), list(LOG), dt, cg


# --------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="first instance (families) or seed (random)")
    ap.add_argument("--source", choices=["families", "random"], default="families",
                    help="the pipeline's generated instances of the paper families, or the random SCM")
    ap.add_argument("--p-edge", type=float, default=0.3, help="edge probability of --source random")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="limit BLAS threads (threadpoolctl) for both libraries; 0 = leave as is. "
                         "1 is much more stable on a shared/oversubscribed machine")
    ap.add_argument("--unpinned", action="store_true",
                    help="also run ours without its one-thread BLAS limit (at the process's thread count)")
    ap.add_argument("--no-tracemalloc", action="store_true",
                    help="skip the separate (untimed) tracemalloc pass")
    args = ap.parse_args(argv)
    if args.blas_threads > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)

    # warm-up (imports, BLAS threads, caches of the libraries)
    warm = random_scm(5, min(args.n, 200), 12345)
    run_pc(warm, "bench_cl_kci")
    run_pc(warm, "bench_heuresis_kci")
    run_heuresis_pc(warm)

    from threadpoolctl import threadpool_info

    pools = sorted({f"{i['internal_api']}:{i['num_threads']}" for i in threadpool_info()})
    env = {v: os.environ.get(v, "unset") for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    print(f"PC-stable, KCI, alpha=0.05, d={args.d}, n={args.n}, {args.instances} instances "
          f"({args.source}), BLAS threads: {args.blas_threads or 'default'} (pools {', '.join(pools)}; {env}), "
          f"load average at start {os.getloadavg()[0]:.2f}")
    unp = f" {'unpinned':>8} {'unp/ours':>8}" if args.unpinned else ""
    print(f"{'inst':>4} {'family':>8} {'#tests':>6} {'cl [s]':>8} {'ours [s]':>8} {'ratio':>6}{unp} "
          f"{'graph':>5} {'tests':>5} {'max|dp|':>9} {'PC [s]':>7} {'ratio':>6} {'PC same':>7}")
    from heuresis.causal.graph import Graph

    t_pc_all: list[float] = []
    all_pc_eq = True
    pc_workers = 1
    t_unp_all: list[float] = []
    IMPLS.clear()
    t_cl_all, t_us_all, ratios = [], [], []
    depth_cl, depth_us, depth_n = defaultdict(float), defaultdict(float), defaultdict(int)
    all_graph_eq = all_tests_eq = True
    max_dp = 0.0
    for i in range(args.instances):
        fam, data = make_data(args, i)
        g_cl, log_cl, t_cl, cg_cl = run_pc(data, "bench_cl_kci")
        g_us, log_us, t_us, _ = run_pc(data, "bench_heuresis_kci")
        IMPLS[-1]._mats.clear()  # keep the counters, free the matrices (peak RSS = one run's)
        unp = ""
        if args.unpinned:
            pinned = kci_module.one_blas_thread
            kci_module.one_blas_thread = contextlib.nullcontext  # type: ignore[assignment]
            try:
                g_unp, log_unp, t_unp, _ = run_pc(data, "bench_heuresis_kci")
            finally:
                kci_module.one_blas_thread = pinned
            IMPLS.pop()._mats.clear()
            t_unp_all.append(t_unp)
            unp = f" {t_unp:>8.3f} {t_unp / t_us:>8.2f}"
            if not np.array_equal(g_unp, g_us) or [k for k, *_ in log_unp] != [k for k, *_ in log_us]:
                unp += " (unpinned: DIFF)"
        graph_eq = bool(np.array_equal(g_cl, g_us))
        keys_cl = [k for k, *_ in log_cl]
        keys_us = [k for k, *_ in log_us]
        tests_eq = keys_cl == keys_us
        pcl = {k: p for k, _, p, _ in log_cl}
        dps = [abs(pcl[k] - p) for k, _, p, _ in log_us if k in pcl]
        dp = max(dps) if dps else 0.0
        max_dp = max(max_dp, dp)
        all_graph_eq &= graph_eq
        all_tests_eq &= tests_eq
        for _, depth, _, s in log_cl:
            depth_cl[depth] += s
            depth_n[depth] += 1
        for _, depth, _, s in log_us:
            depth_us[depth] += s
        t_cl_all.append(t_cl)
        t_us_all.append(t_us)
        ratios.append(t_cl / t_us)
        g_pc, log_pc, t_pc, pc_workers = run_heuresis_pc(data)
        t_pc_all.append(t_pc)
        pc_eq = (g_pc == Graph.from_causallearn(cg_cl.G) and [k for k, *_ in log_pc] == keys_cl
                 and max((abs(pcl[k] - p) for k, _, p in log_pc), default=0.0) <= 1e-9)
        all_pc_eq &= pc_eq
        print(f"{i:>4} {fam:>8} {len(log_cl):>6} {t_cl:>8.2f} {t_us:>8.3f} {t_cl / t_us:>6.1f}{unp} "
              f"{'same' if graph_eq else 'DIFF':>5} {'same' if tests_eq else 'DIFF':>5} {dp:>9.2e} "
              f"{t_pc:>7.3f} {t_cl / t_pc:>6.1f} {'yes' if pc_eq else 'NO':>7}", flush=True)

    print()
    print(f"total causal-learn {sum(t_cl_all):.2f} s, ours {sum(t_us_all):.2f} s "
          f"(load average at end {os.getloadavg()[0]:.2f})")
    print(f"ratio of sums      {sum(t_cl_all) / sum(t_us_all):.1f}x")
    if t_unp_all:
        print(f"ours unpinned      {sum(t_unp_all):.2f} s: {sum(t_unp_all) / sum(t_us_all):.2f}x ours, "
              f"causal-learn / unpinned {sum(t_cl_all) / sum(t_unp_all):.1f}x")
    print(f"median ratio       {statistics.median(ratios):.1f}x  (min {min(ratios):.1f}x, max {max(ratios):.1f}x)")
    print(f"heuresis PC        {sum(t_pc_all):.2f} s with each level's tests in {pc_workers} process(es): "
          f"{sum(t_cl_all) / sum(t_pc_all):.1f}x causal-learn, {sum(t_us_all) / sum(t_pc_all):.2f}x ours in "
          f"causal-learn's PC; graphs, tests and p-values (within 1e-9) the same as causal-learn's: {all_pc_eq}")
    print("per depth (time in computed tests only):")
    for depth in sorted(depth_cl):
        print(f"  |S|={depth}: {depth_n[depth]:>5} tests, causal-learn {depth_cl[depth]:8.2f} s, "
              f"ours {depth_us[depth]:7.3f} s, ratio {depth_cl[depth] / max(depth_us[depth], 1e-12):6.1f}x")
    print(f"graphs identical: {all_graph_eq}; sets of tests identical: {all_tests_eq}; "
          f"max |p_ours - p_causallearn| = {max_dp:.3e}")
    cond = sum(v for k, v in depth_n.items() if k > 0)
    built = sum(t.stats["dense_x"] + t.stats["lowrank_x"] for t in IMPLS)
    peak_cache = max((t.peak_cache_bytes for t in IMPLS), default=0)
    print(f"X-role (x, S) factors built {built} for {cond} conditional tests "
          f"(cache hit rate {1 - built / max(cond, 1):.0%}); peak matrix cache {peak_cache / 2**20:.0f} MB")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (both libraries): {rss:.0f} MB")

    if not args.no_tracemalloc:
        _, data = make_data(args, 0)
        tracemalloc.start()
        run_pc(data, "bench_heuresis_kci")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        tracemalloc.start()
        run_pc(data, "bench_cl_kci")
        _, peak_cl = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"tracemalloc peak over one PC run (instance 0): ours {peak / 2**20:.0f} MB, "
              f"causal-learn {peak_cl / 2**20:.0f} MB")
    return 0 if (all_graph_eq and all_tests_eq and all_pc_eq) else 1


if __name__ == "__main__":
    sys.exit(main())
