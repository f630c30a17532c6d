"""Exact optima of CausalGame's games against the hill-climb that preceded them.

For each scenario: the time of :func:`heuresis.causal.games.exact.exact_optimum` over the lattice
of DEF steps of 5 (its designs, those valued, those valued again with every piece of the damage
modifier) and its exact optimum; beside it the hill-climb
(:func:`heuresis.causal.games.causalgame.search_best`, moves of 5 DEF points and equipment changes,
from the standard design and the first published strategy within the budget, on 2,000
common-random-number drones), its time, the survival it reports on its own drones and the exact
survival of the design it found. Then one design's cost: its exact survival against one
1,000-drone fleet of the simulator (whose standard error is about 0.015).

With ``--integer``: the optimum over the full integer lattice
(:func:`heuresis.causal.games.exact_integer.integer_optimum`, branch and bound started from the
lattice's optimum) beside the lattice's, its bound, the boxes bounded and designs valued, and both
times.

    PYTHONPATH=src python benchmarks/bench_exact.py                 # the four base scenarios
    PYTHONPATH=src python benchmarks/bench_exact.py --all           # all fourteen
    PYTHONPATH=src python benchmarks/bench_exact.py --blas-threads 1
    PYTHONPATH=src python benchmarks/bench_exact.py --integer       # the full integer lattice
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="every scenario of config/games/causalgame (default: the four bases)")
    ap.add_argument("--no-search", action="store_true", help="skip the hill-climb (the exact side only)")
    ap.add_argument("--blas-threads", type=int, default=0, help="limit BLAS threads (0: the library's default)")
    ap.add_argument("--integer", action="store_true", help="the optimum over the full integer lattice and its bound")
    args = ap.parse_args()
    if args.blas_threads:
        for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[v] = str(args.blas_threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import numpy as np

    from heuresis.causal.games import causalgame as cg
    from heuresis.causal.games.exact import exact_optimum, exact_survival
    from heuresis.causal.games.references import seed_of

    names = sorted(cg.load_cg_all()) if args.all else ["antenna_trap", "deployment_zone_trap_categorical",
                                                         "deployment_zone_trap_env_shift", "weather_noise"]
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, BLAS threads "
          f"{args.blas_threads or 'default'}")
    if args.integer:
        return integer_table(names)
    print("| scenario | lattice designs | valued (re-valued) | exact optimum | exact time | hill-climb (own drones) "
          "| its design, exact | hill-climb time | time ratio | one design: exact / 1,000-drone fleet |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    total_exact = total_search = 0.0
    for name in names:
        scn = cg.load_cg(name)
        t0 = time.perf_counter()
        opt = exact_optimum(scn)
        t_exact = time.perf_counter() - t0
        total_exact += t_exact
        search = "—"
        found_exact = "—"
        t_search = float("nan")
        if not args.no_search:
            seed = int(seed_of(int(scn["seed"]), scn.name, "search").generate_state(1)[0])
            heads = [scn.spec["standard_design"]]
            for s in (scn.spec.get("strategies") or {}).values():
                try:
                    heads.append(scn.design(s["design"]))
                except cg.DesignError:
                    continue
            t0 = time.perf_counter()
            best, value = None, -1.0
            for start in heads[:2]:
                d, v = cg.search_best(scn, start, seed, n=2000)
                if v > value:
                    best, value = d, v
            t_search = time.perf_counter() - t0
            total_search += t_search
            search = f"{value:.4f}"
            found_exact = f"{exact_survival(scn, best):.4f}"
        t0 = time.perf_counter()
        exact_survival(scn, scn.spec["standard_design"])
        t_one = time.perf_counter() - t0
        t0 = time.perf_counter()
        cg.fly(scn, scn.spec["standard_design"], 1000, np.random.default_rng(0), stage=2)
        t_fly = time.perf_counter() - t0
        ratio = f"{t_search / t_exact:.1f}×" if t_search == t_search else "—"
        search_time = f"{t_search:.1f} s" if t_search == t_search else "—"
        print(f"| {name} | {opt.lattice_size:,} | {opt.evaluated:,} ({opt.refined}) | {opt.value:.4f} | {t_exact:.1f} s "
              f"| {search} | {found_exact} | {search_time} | {ratio} | {1000 * t_one:.0f} ms / {1000 * t_fly:.0f} ms |",
              flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nexact {total_exact:.1f} s in all" + ("" if args.no_search else f", hill-climb {total_search:.1f} s")
          + f"; peak RSS {peak:.0f} MB")
    return 0


def integer_table(names: list[str]) -> int:
    """The optimum over the full integer lattice beside the lattice's (one Markdown row per scenario)."""
    from heuresis.causal.games import causalgame as cg
    from heuresis.causal.games.exact import exact_optimum
    from heuresis.causal.games.exact_integer import integer_optimum

    print("| scenario | integer lattice designs | boxes bounded | designs valued | integer optimum | bound "
          "| its design | step-5 optimum | step-5 time | integer time |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    total = 0.0
    for name in names:
        scn = cg.load_cg(name)
        opt = exact_optimum(scn)
        got = integer_optimum(scn, start=opt.design)
        total += got.seconds
        design = ", ".join(f"{k} {v}" for k, v in got.design.items() if v and k in scn.components)
        extra = ", ".join(f"{k} {v}" for k, v in got.design.items() if k not in scn.components and v)
        bound = "exact" if got.exact else f"{got.bound:.4f}"
        print(f"| {name} | {got.lattice_size:,} | {got.bounded:,} | {got.valued:,} | {got.value:.4f} | {bound} "
              f"| {design}{'; ' + extra if extra else ''} | {opt.value:.4f} | {opt.seconds:.1f} s | {got.seconds:.1f} s |",
              flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ninteger {total:.1f} s in all; peak RSS {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
