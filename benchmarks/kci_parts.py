"""Where one conditional KCI query's time goes, and two other routes to its kept eigenpairs.

For the X role of a conditional query (x, S) the exact KCI builds the residual kernel
``KxR = P Kx P`` and the eigenpairs of KxR whose eigenvalues exceed ``1e-5`` times the largest
(``heuresis.causal.ci.kci``). This script times each piece on one thread, best of ``--repeat``,
for the first variables and conditioning sets of a pipeline test instance (paper config, d = 10,
n = 600; ``bench_kci.family_instance``):

* ``sandwich``: ``P Kx P`` (a factored P while Kz's rank fits, else two n^3 products);
* the exact path ``_top_eigh``: tridiagonalisation (``dsytrd``), all eigenvalues (``dsterf``),
  inverse iteration for the kept ones (``dstein``), back-transformation (``dormqr``);
* two alternatives, for comparison only: MRRR (``dstemr``) for the kept vectors in place of
  ``dstein``, and randomized subspace iteration (``--oversample`` vectors beyond the kept ones,
  ``--power`` power steps) with the largest entry of its truncated kernel's difference to
  ``numpy.linalg.eigh``'s.

Usage::

    PYTHONPATH=src python benchmarks/kci_parts.py
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import scipy.linalg as sl
from scipy.linalg import blas, lapack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from bench_kci import family_instance

from heuresis.causal.ci import kci


def best_ms(f, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def randomized(A: np.ndarray, thresh: float, p: int, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs above thresh * max from p random directions and q power steps (Rayleigh-Ritz)."""
    Y = blas.dsymm(1.0, A, np.random.default_rng(0).standard_normal((A.shape[0], p)), lower=1)
    for _ in range(q + 1):
        Q = sl.qr(Y, mode="economic", overwrite_a=True, check_finite=False)[0]
        Y = blas.dsymm(1.0, A, Q, lower=1)
    w, U = np.linalg.eigh(Q.T @ Y)
    keep = w > w[-1] * thresh
    return w[keep], Q @ U[:, keep]


COLUMNS = ("sandwich", " dsytrd", " dsterf", " dstein", " dormqr", "  exact", " dstemr", " random")


def pieces(test: kci.KCI, x: int, S: tuple[int, ...], args) -> tuple[str, int, dict, float]:
    """(P's kind, eigenpairs kept, milliseconds per piece, randomized route's largest error) for (x, S)."""
    n, thresh, r = test.n_samples, test.eig_thresh, args.repeat
    P = test._projector(S)
    theta = kci.kci_theta(n, len(S))
    Kx = test._prodkernel((x, theta), S, 0.25 * theta)
    KxR = P.sandwich(Kx.copy())
    A = np.asfortranarray(np.tril(KxR) + np.tril(KxR, -1).T)
    lwork = max(int(lapack.dsytrd_lwork(n)[0]), n)
    c, d, e, tau, _ = lapack.dsytrd(A, lower=1, lwork=lwork)
    w_all, _ = lapack.dsterf(d.copy(), e.copy())
    k = n - int(np.searchsorted(w_all, w_all[-1] * thresh, side="right"))
    iblock = np.zeros(n, dtype=np.int32)
    iblock[:k] = 1
    isplit = np.zeros(n, dtype=np.int32)
    isplit[0] = n
    Z, _ = lapack.dstein(d, e, w_all[n - k:], iblock, isplit)
    calls = (
        lambda: P.sandwich(Kx.copy()),
        lambda: lapack.dsytrd(A, lower=1, lwork=lwork),
        lambda: lapack.dsterf(d.copy(), e.copy()),
        lambda: lapack.dstein(d, e, w_all[n - k:], iblock, isplit),
        lambda: lapack.dormqr("L", "N", c[1:, :n - 1], tau, Z[1:, :k], lwork=64 * k + 4224),
        lambda: kci._top_eigh(A, thresh),
        lambda: lapack.dstemr(d.copy(), np.append(e, 0.0), 1, w_all[-1] * thresh, 2 * w_all[-1], 1, n),
        lambda: randomized(A, thresh, k + args.oversample, args.power),
    )
    t = {name: best_ms(f, r) for name, f in zip(COLUMNS, calls, strict=True)}
    w0, V0 = np.linalg.eigh(A)
    keep = w0 > w0[-1] * thresh
    w1, V1 = randomized(A, thresh, k + args.oversample, args.power)
    exact = (V0[:, keep] * w0[keep]) @ V0[:, keep].T
    diff = float(np.abs((V1 * w1) @ V1.T - exact).max()) if len(w1) == k else float("inf")
    return ("factored" if P.Rz is None else "dense"), k, t, diff


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instance", type=int, default=0, help="bench_kci.py's instance index")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--oversample", type=int, default=80)
    ap.add_argument("--power", type=int, default=2)
    args = ap.parse_args(argv)
    family, data = family_instance(args.instance, 10, 600)
    test = kci.KCI(data)
    print(f"instance {args.instance} ({family}), n = {test.n_samples}; milliseconds, best of {args.repeat}, one thread")
    print(f"{'x':>2} {'S':<10} {'P':<9} {'kept':>4} " + " ".join(COLUMNS) + f" {'|dAx|':>8}")
    with kci.one_blas_thread():
        for S, x in [((1, 2), 0), ((2, 4), 0), ((1, 2, 3), 0), ((4, 5, 6), 1)]:
            kind, k, t, diff = pieces(test, x, S, args)
            print(f"{x:>2} {S!s:<10} {kind:<9} {k:>4} " + " ".join(f"{v:{len(name)}.2f}" for name, v in t.items())
                  + f" {diff:8.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
