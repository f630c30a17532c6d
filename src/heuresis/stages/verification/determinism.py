"""The determinism check: seeded PC and KCI runs in fresh processes against the first such run.

``determinism``
    The same seeded PC-Fisher-z runs and a set of KCI p-values, each computed in a fresh child
    process for every combination of BLAS/OpenMP thread count (``OPENBLAS_NUM_THREADS``,
    ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) and ``PYTHONHASHSEED``: Fisher-z p-values and PC
    graphs must be bit-identical, KCI ``log10 p`` within ``tolerances.kci_log10p`` of the first
    run, with no verdict flip at alpha.

A child runs :func:`determinism_child` (``python -c``): the payload as JSON on stdin, the results
as JSON on stdout.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping

from heuresis.stages.verification.base import (
    CheckResult,
    Examples,
    Log,
    check_rng,
    instance_size,
    make_result,
    random_queries,
    register,
)

__all__ = ["check_determinism", "determinism_child"]


# --- determinism -----------------------------------------------------------------------------------------------
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _determinism_payload(settings: Mapping) -> dict:
    """What every child process computes: instances, alpha and the KCI queries (fixed here)."""
    sz = settings["sizes"]
    rng = check_rng(settings)
    families = list(settings["instances"])
    picks = [(families[k % len(families)], k // len(families)) for k in range(int(sz["instances"]))]
    d = int(next(iter(settings["instances"].values()))["instances"]["d"])
    per = max(1, math.ceil(int(sz["kci_tests"]) / max(len(picks), 1)))
    queries = {f"{f}/{i}": random_queries(rng, d, per, 3) for f, i in picks}
    return dict(instances={f: settings["instances"][f] for f, _ in picks}, picks=picks, queries=queries,
                alpha=float(settings["alpha"]))


def determinism_child() -> None:
    """Entry point of a determinism child: payload JSON on stdin, results JSON on stdout."""
    from threadpoolctl import threadpool_info

    from heuresis.causal.algorithms.pc import pc
    from heuresis.causal.ci import make_ci_test
    from heuresis.stages.instances import generate_instance

    payload = json.load(sys.stdin)
    out = {"fisherz": {}, "kci": {}, "blas_threads": sorted({i.get("num_threads") for i in threadpool_info()
                                                             if i.get("user_api") in ("blas", "openmp")})}
    for family, index in payload["picks"]:
        inst = generate_instance(payload["instances"][family], family, "dev", int(index))
        X = inst.data
        res = pc(X, make_ci_test("fisherz", X), payload["alpha"])
        key = f"{family}/{index}"
        out["fisherz"][key] = dict(pvalues=[float(t.pvalue).hex() for t in res.tests], graph=res.graph.amat.tolist(),  # type: ignore[index]
                                   data=[float(v).hex() for v in X.ravel()[:50]])
        kci = make_ci_test("kci", X)
        out["kci"][key] = [float(kci.pvalue(x, y, S)) for x, y, S in payload["queries"][key]]  # type: ignore[index]
    json.dump(out, sys.stdout)


def _run_child(payload: dict, threads: int, hash_seed: int, timeout: float = 1800) -> dict:
    env = dict(os.environ)
    for var in _THREAD_VARS:
        env[var] = str(threads)
    env["PYTHONHASHSEED"] = str(hash_seed)
    code = "from heuresis.stages.verification.determinism import determinism_child; determinism_child()"
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), capture_output=True, text=True,
                          env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"determinism child (threads={threads}, PYTHONHASHSEED={hash_seed}) failed:\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def _log10(p: float) -> float:
    return math.log10(max(p, 1e-300))


@register("determinism", "Determinism across BLAS threads and hash seeds",
          "the first seeded run", uses_instances=True)
def check_determinism(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check that seeded PC and KCI results do not depend on BLAS thread counts or the hash seed.

    See the module docstring for what counts as a disagreement.
    """
    sz = settings["sizes"]
    tol = float(settings["tolerances"]["kci_log10p"])
    alpha = float(settings["alpha"])
    payload = _determinism_payload(settings)
    combos = [(int(t), int(h)) for t in sz["thread_counts"] for h in sz["hash_seeds"]]
    runs = []
    for threads, hash_seed in combos:
        t0 = time.perf_counter()
        runs.append(_run_child(payload, threads, hash_seed))
        if log:
            log(f"determinism child threads={threads} PYTHONHASHSEED={hash_seed}: "
                f"{time.perf_counter() - t0:.1f} s, BLAS threads reported {runs[-1]['blas_threads']}")
    ex = Examples(settings["max_examples"])
    first = runs[0]
    n = fz_mismatch = kci_out = flips = 0
    worst = 0.0
    for (threads, hash_seed), run in zip(combos[1:], runs[1:]):
        env = dict(threads=threads, PYTHONHASHSEED=hash_seed)
        for key, ref in first["fisherz"].items():
            n += 1
            got = run["fisherz"][key]
            if got != ref:
                fz_mismatch += 1
                diff = [k for k, (a, b) in enumerate(zip(ref["pvalues"], got["pvalues"])) if a != b]
                ex.add(dict(kind="fisherz", instance=key, run=env, first_run=dict(threads=combos[0][0],
                            PYTHONHASHSEED=combos[0][1]), differing_tests=diff[:20],
                            graphs_identical=got["graph"] == ref["graph"], data_identical=got["data"] == ref["data"]))
        for key, ref in first["kci"].items():
            for q, (p0, p1) in enumerate(zip(ref, run["kci"][key])):
                n += 1
                diff = abs(_log10(p0) - _log10(p1))  # type: ignore[arg-type]
                worst = max(worst, diff)  # type: ignore[assignment]
                flip = (p0 > alpha) != (p1 > alpha)
                flips += flip
                if diff > tol or flip:  # type: ignore[operator]
                    kci_out += 1
                    ex.add(dict(kind="kci", instance=key, query=payload["queries"][key][q], run=env,
                                pvalue_first=p0, pvalue=p1, abs_log10_difference=diff, verdict_flip=bool(flip)))
    n_kci = sum(len(v) for v in first["kci"].values())
    return make_result(settings, n_cases=n, examples=ex,
                   tolerance=f"Fisher-z bit-identical; KCI log10 p within {tol:g}; no flips",
                   scale_description=(f"{len(combos)} child runs (threads {list(sz['thread_counts'])} x "
                                      f"PYTHONHASHSEED {list(sz['hash_seeds'])}); {len(payload['picks'])} PC-Fisher-z "
                                      f"runs + {n_kci} KCI tests each ({instance_size(settings)})"),
                   finding=(f"Fisher-z: {fz_mismatch} runs not bit-identical; KCI largest log10 p difference {worst:.1e}, "
                            f"{flips} verdict flips"),
                   details={"combos": combos, "max_abs_log10_difference": worst, "fisherz_mismatches": fz_mismatch,
                            "kci_outside_tolerance": kci_out, "verdict_flips": flips,
                            "blas_threads_reported": [r["blas_threads"] for r in runs]})
