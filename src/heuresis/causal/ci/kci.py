"""Kernel-based conditional independence test (KCI), exact and fast.

This reproduces the p-values of causal-learn's ``CIT(data, "kci")`` with its
default options (``KCI_UInd`` for an empty conditioning set, ``KCI_CInd``
otherwise; Gaussian kernels; empirical kernel widths; gamma approximation of
the null; ``epsilon = 1e-3``; eigenvalue threshold ``1e-5``) while caching and
factorising everything that causal-learn recomputes from scratch per test.

What causal-learn computes (and we reproduce)
---------------------------------------------
Roles: causal-learn canonicalises a query so that the X-role variable is
``min(x, y)`` and the Y-role variable ``max(x, y)``; the conditional statistic
is not symmetric, so this matters.

Every variable is z-scored (``ddof=1``, constant columns -> 0).

Unconditional (``KCI_UInd``): ``K = exp(-0.5 * sqdist * theta)`` with
``theta = 1 / w**2`` and ``w = 0.8 / 0.5 / 0.3`` for ``n < 200 / n < 1200 /
otherwise`` (the "empirical HSIC" rule, times the data dimension 1). Kernels
are centred (``HKH``); statistic ``sum(Kxc * Kyc)``; gamma parameters from
``mean = tr(Kxc) tr(Kyc) / n`` and ``var = 2 sum(Kxc^2) sum(Kyc^2) / n^2``.

Conditional (``KCI_CInd``): ``theta = (1 / w**2) / |S|`` with ``w = 1.2 / 0.7
/ 0.4`` (same n thresholds, "empirical KCI" rule) for all three kernels. The
X-role kernel is built on ``[x, 0.5 * Z]`` (X concatenated with half the
z-scored conditioning data), the Y-role kernel on ``y`` alone, and ``Kz`` on
``Z``. With ``Kzc = H Kz H`` and ``Rz = eps * (Kzc + eps I)^-1`` the residual
kernels are ``KxR = Rz Kxc Rz`` and ``KyR = Rz Kyc Rz``; the statistic is
``sum(KxR * KyR)``. The null uses the eigenpairs of ``KxR`` and ``KyR`` whose
eigenvalues exceed ``1e-5`` times the largest one; with ``Fx = V sqrt(w)``
(kept pairs), ``Ax = Fx Fx^T`` (likewise for y) the gamma parameters are
``mean = sum_t Ax[t,t] Ay[t,t]`` and ``var = 2 ||Ax o Ay||_F^2`` (these are
``tr(uu_prod)`` and ``2 tr(uu_prod^2)`` of causal-learn's ``get_uuprod``).
causal-learn's ``pinv`` never truncates here: the singular values of
``Kzc + eps I`` are >= eps (up to rounding), far above ``1e-15 * max``.

How we are faster (no change of any decision)
---------------------------------------------
* ``Rz H = H Rz`` (``Kzc`` annihilates the constant vector), so with
  ``P = Rz H`` we have ``KxR = P Kx P`` and ``KyR = P Ky P``.
* Kernels of concatenated columns are products of cached per-column kernels
  (``exp(-a - b) = exp(-a) exp(-b)`` to a few ulp): the X-role kernel on
  ``[x, 0.5 Z]`` is ``K_x(theta) o prod_s K_s(theta / 4)``, ``Kz`` is
  ``prod_s K_s(theta)``; no per-test ``exp`` over n^2 entries.
* Gaussian kernels on 1-2 dimensions have low numerical rank. We factor
  ``K = L L^T`` by pivoted Cholesky (LAPACK ``dpstrf``), stopped only when every
  residual diagonal entry is below ``chol_tol`` (default 1e-15, i.e. at the
  rounding level of the kernel entries, which are <= 1; the residual is PSD so
  its norm is bounded by its trace). Then ``P = H - B diag(1/(s+eps)) B^T``
  (Woodbury, ``B`` from the eigenpairs of the small Gram matrix of ``H Lz``),
  and the eigenpairs of ``KxR = Mx Mx^T`` with ``Mx = P Lx`` come from the
  small Gram matrix ``Mx^T Mx``. When a factor's rank would exceed
  ``rank_frac * n`` (|S| >= 2 for the X role, |S| >= 3 for Kz at n = 600) we use
  the dense computation, still exact: ``Rz = eps (Kzc + eps I)^-1`` by Cholesky
  inversion (``dpotrf``/``dpotri``, ~5x cheaper than the eigendecomposition),
  ``KxR = P Kx P`` (with a factored P: one n^2 r product and one symmetric
  rank-2r update of the lower triangle, instead of four n^2 r products),
  and only the kept eigenpairs of ``KxR`` (``_top_eigh``: tridiagonalisation,
  all eigenvalues without vectors, inverse iteration for the ~100 kept ones,
  back-transformation; ~60% of a full ``eigh``).
* Caches (LRU, bounded in bytes) hold per-column kernels, unconditional
  centred kernels per variable, the ``P`` operator per conditioning set, the
  Y-role factor per (variable, |S|) and the X-role eigen-factor per (x, S).

Threads: every query runs with the BLAS and OpenMP pools limited to one thread
(``threadpoolctl``, restored on return). Its products are small (n x r with r
in the tens, or one n x n matrix) and its LAPACK calls mostly sequential, so
threads only add synchronisation: at n = 600, two OpenBLAS threads made PC-KCI
about 3x slower than one (docs/performance.md). The limit covers both pools a
query uses, numpy's OpenBLAS and scipy's bundled one, whatever the caller or
``OPENBLAS_NUM_THREADS`` set, and costs about 25 us per computed query.

The cores go to queries instead: a caller that knows its next queries (PC-stable
knows a whole level's) passes them to :meth:`KCI.prefetch`, which runs them in as
many processes as the caller allows BLAS threads (forked, one BLAS thread each;
OpenBLAS serialises calls from threads of one process). Under a one-thread limit,
as in the workflow's algorithm runs, it runs nothing ahead.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import signal
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from scipy import special, stats
from scipy.linalg import blas as _blas
from scipy.linalg import lapack as _lapack

from .base import CITest, register_ci_test

__all__ = ["KCI", "hsic_theta", "kci_theta", "one_blas_thread"]


# ----------------------------------------------------------------- width rules
def hsic_theta(n: int, dim: int = 1) -> float:
    """causal-learn ``GaussianKernel.set_width_empirical_hsic`` (returns 1/sigma^2)."""
    width = 0.8 if n < 200 else (0.5 if n < 1200 else 0.3)
    theta = 1.0 / (width ** 2)
    return theta * dim


def kci_theta(n: int, dim_z: int) -> float:
    """causal-learn ``GaussianKernel.set_width_empirical_kci`` (returns 1/sigma^2)."""
    width = 1.2 if n < 200 else (0.7 if n < 1200 else 0.4)
    theta = 1.0 / (width ** 2)
    return theta / dim_z


# ----------------------------------------------------------------- helpers
def _center(K: np.ndarray) -> np.ndarray:
    """H K H for symmetric K (same formula as causal-learn)."""
    n = K.shape[0]
    cs = K.sum(axis=0)
    return K - (cs[None, :] + cs[:, None]) / n + (cs.sum() / n ** 2)


def _gauss_col(v: np.ndarray, theta: float) -> np.ndarray:
    """exp(-0.5 theta (v_i - v_j)^2): the Gaussian kernel of one column."""
    diff = v[:, None] - v[None, :]
    diff *= diff
    diff *= -0.5 * theta
    return np.exp(diff, out=diff)


def _pchol(K: np.ndarray, tol: float, max_rank: int) -> np.ndarray | None:
    """Pivoted Cholesky (LAPACK ``dpstrf``) of a PSD kernel: K ~= L L^T, L (n, r).

    Stops once every residual diagonal entry is <= tol (the residual is PSD, so
    it is then negligible). Returns None if the rank exceeds ``max_rank``.
    """
    c, piv, rank, info = _lapack.dpstrf(K, tol=tol, lower=1)
    if info < 0:  # pragma: no cover - invalid argument
        raise RuntimeError(f"dpstrf failed (info={info})")
    if rank > max_rank:
        return None
    L = np.empty((K.shape[0], rank))
    L[piv - 1] = np.tril(c[:, :rank])
    return L


_SYTRD_LWORK: dict = {}


def _top_eigh(A: np.ndarray, thresh: float, max_frac: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    """Return the eigenpairs (w, V) of symmetric A with w > thresh * max(w).

    Only the lower triangle of A is read.

    Same eigenpairs as ``eigh`` followed by causal-learn's cut, but only the kept
    eigenvectors are computed: Householder tridiagonalisation (``dsytrd``), all
    eigenvalues of the tridiagonal matrix (``dsterf``, no vectors), inverse
    iteration for the kept ones (``dstein``) and back-transformation
    (``dormqr``). Costs about 60% of a full ``eigh`` when few are kept; falls
    back to ``numpy.linalg.eigh`` when many are kept or LAPACK reports a
    problem.
    """
    n = A.shape[0]
    if n >= 96:
        lw = _SYTRD_LWORK.get(n)
        if lw is None:
            lw = _SYTRD_LWORK[n] = max(int(_lapack.dsytrd_lwork(n)[0]), n)
        c, d, e, tau, info = _lapack.dsytrd(A, lower=1, lwork=lw)
        if info == 0 and np.all(e != 0.0):
            w, info = _lapack.dsterf(d.copy(), e.copy())
            if info == 0 and w[-1] > 0.0:
                k = n - int(np.searchsorted(w, w[-1] * thresh, side="right"))
                if 0 < k <= max_frac * n:
                    wk = w[n - k:]
                    iblock = np.zeros(n, dtype=np.int32)
                    iblock[:k] = 1
                    isplit = np.zeros(n, dtype=np.int32)
                    isplit[0] = n
                    Z, info = _lapack.dstein(d, e, wk, iblock, isplit)
                    if info == 0:
                        V = np.empty((n, k))
                        V[0] = Z[0, :k]
                        cq, _, info = _lapack.dormqr("L", "N", c[1:, :n - 1], tau, Z[1:, :k],
                                                     lwork=64 * k + 4224)
                        if info == 0:
                            V[1:] = cq
                            return wk, V
    w, V = np.linalg.eigh(A)
    keep = w > w.max() * thresh
    return w[keep], V[:, keep]


class _LRU:
    """Byte-bounded LRU cache."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.peak_bytes = 0
        self._d: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()

    def get(self, key: Hashable) -> Any:
        item = self._d.get(key)
        if item is None:
            return None
        self._d.move_to_end(key)
        return item[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        old = self._d.pop(key, None)
        if old is not None:
            self.nbytes -= old[1]
        self._d[key] = (value, nbytes)
        self.nbytes += nbytes
        while self.nbytes > self.max_bytes and len(self._d) > 1:
            _, (_, nb) = self._d.popitem(last=False)
            self.nbytes -= nb
        self.peak_bytes = max(self.peak_bytes, self.nbytes)

    def clear(self) -> None:
        self._d.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._d)


def _nb(*arrays: np.ndarray | None) -> int:
    return sum(a.nbytes for a in arrays if a is not None) + 200


class _Projector:
    """P = Rz H with Rz = eps (H Kz H + eps I)^-1, factored or dense.

    Factored: ``P = H - B diag(dinv) B^T`` with centred ``B`` (Woodbury on a
    pivoted-Cholesky factor of Kz). Dense: explicit ``Rz``.
    """

    __slots__ = ("B", "Rz", "dinv")

    def __init__(self, B=None, dinv=None, Rz=None):
        self.B, self.dinv, self.Rz = B, dinv, Rz

    def apply(self, M: np.ndarray) -> np.ndarray:
        """P M."""
        Mc = M - M.mean(axis=0)
        if self.Rz is not None:
            return self.Rz @ Mc
        return Mc - self.B @ (self.dinv[:, None] * (self.B.T @ Mc))

    def sandwich(self, K: np.ndarray) -> np.ndarray:
        """P K P for symmetric K (the residual kernel KR = Rz (H K H) Rz).

        Consumes ``K`` (the factored path overwrites it). Only the **lower
        triangle** of the result is defined (it is read as LAPACK's ``dsytrd`` and
        BLAS ``dsymm`` with ``lower=1`` read it): the factored path writes it with
        one symmetric rank-2k update. The result is in Fortran order.
        """
        if self.Rz is not None:
            return ((self.Rz @ _center(K)) @ self.Rz).T  # symmetric: Fortran order, no copy
        # P = H - B D B^T with H B = B, D = diag(dinv). With m the column means
        # of K and mu their mean, H K H = K - (m' 1^T + 1 m'^T), m' = m - mu/2,
        # and P K P = K - (V + V^T) with
        #   V = B E^T + m' 1^T,  E = G D - B (D C D) / 2,
        #   G = (H K H) B = K B - 1 (m^T B),  C = B^T G
        # (one n^2 r product and one rank-2r update of the lower triangle,
        # instead of four n^2 r products for applying P twice).
        B, dinv = self.B, self.dinv
        n = K.shape[0]
        m = K.mean(axis=0)
        G = K @ B
        G -= m @ B
        C = B.T @ G
        E = G * dinv
        E -= B @ (0.5 * (dinv[:, None] * C * dinv[None, :]))
        Ba = np.empty((n, B.shape[1] + 1), order="F")
        Ba[:, :-1] = B
        Ba[:, -1] = m - 0.5 * m.mean()
        Ea = np.empty((n, B.shape[1] + 1), order="F")
        Ea[:, :-1] = E
        Ea[:, -1] = 1.0
        # K is symmetric, so K.T is the same matrix in Fortran order (no copy)
        return _blas.dsyr2k(-1.0, Ba, Ea, beta=1.0, c=K.T, lower=1, overwrite_c=1)

    @property
    def nbytes(self) -> int:
        return _nb(self.B, self.dinv, self.Rz)


class _XRole:
    """Cached X-role quantities: factor Mx (KxR = Mx Mx^T) or dense KxR, plus Fx.

    ``A = Fx Fx^T`` is kept too when Fx has more than sqrt(n) columns: the variance of every test
    of this X role then costs one n^2 ky product instead of n^2 (kx + ky).
    """

    __slots__ = ("A", "F", "K", "M", "diagA")

    def __init__(self, M, K, F):
        self.M, self.K, self.F = M, K, F
        self.diagA = np.einsum("ij,ij->i", F, F)
        n, k = F.shape
        self.A = F @ F.T if k * k > n else None

    @property
    def nbytes(self) -> int:
        return _nb(self.M, self.K, self.F, self.diagA, self.A)


class _YRole:
    """Cached Y-role quantities per (y, S): My = P Ly (KyR = My My^T), Fy and diag(Fy Fy^T)."""

    __slots__ = ("F", "M", "diagA")

    def __init__(self, M, F):
        self.M, self.F = M, F
        self.diagA = np.einsum("ij,ij->i", F, F)

    @property
    def nbytes(self) -> int:
        return _nb(self.M, self.F, self.diagA)


def _truncated_from_gram(M: np.ndarray, thresh: float) -> np.ndarray:
    """Fx = V_k sqrt(w_k) for the eigenpairs of M M^T with w > max(w) * thresh."""
    _, V = _top_eigh(M.T @ M, thresh)
    return M @ V


def _truncated_from_dense(K: np.ndarray, thresh: float) -> np.ndarray:
    w, V = _top_eigh(K, thresh)
    return V * np.sqrt(w)


# ----------------------------------------------------------------- threads
_THREADPOOLS: Any = None


def _threadpools() -> Any:
    """The process's BLAS and OpenMP pools (``threadpoolctl.ThreadpoolController``, found once, ~1 ms)."""
    global _THREADPOOLS
    if _THREADPOOLS is None:
        from threadpoolctl import ThreadpoolController

        _THREADPOOLS = ThreadpoolController()
    return _THREADPOOLS


def one_blas_thread() -> Any:
    """A context that limits every loaded BLAS and OpenMP pool to one thread, restoring them on exit.

    The limit applies when this is called (use it in a ``with`` statement); numpy and scipy, whose
    pools the queries use, are loaded when this module is imported.
    """
    return _threadpools().limit(limits=1)


# ----------------------------------------------------------------- the test
@register_ci_test("kci")
class KCI(CITest):
    """Exact, cached KCI (causal-learn default ``kci`` p-values).

    Parameters
    ----------
    data : (n, d) array.
    epsilon : ridge of the conditional residualisation (causal-learn: 1e-3).
    eig_thresh : relative eigenvalue cut for the conditional null (1e-5).
    chol_tol : pivoted-Cholesky stopping tolerance on the residual diagonal.
    rank_frac : use low-rank factors only while rank <= rank_frac * n,
        otherwise the dense (still exact) path.
    max_cache_mb : byte budget of the internal matrix caches (LRU).
    workers : processes :meth:`prefetch` runs queries in (None: the number of BLAS threads the
        process allows at the call, at most the CPUs it may run on; 1: nothing runs ahead).
    """

    def __init__(self, data: np.ndarray, *, epsilon: float = 1e-3, eig_thresh: float = 1e-5,
                 chol_tol: float = 1e-15, rank_frac: float = 0.45,
                 max_cache_mb: float = 256.0, workers: int | None = None) -> None:
        super().__init__(data)
        self.epsilon = float(epsilon)
        self.eig_thresh = float(eig_thresh)
        self.chol_tol = float(chol_tol)
        self.rank_frac = float(rank_frac)
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be a positive integer or None, got {workers!r}")
        self.workers = workers
        n = self.n_samples
        self._max_rank = max(8, int(self.rank_frac * n))
        self._mats = _LRU(int(max_cache_mb * 2 ** 20))
        # z-scored columns exactly as causal-learn (scipy zscore, ddof=1, NaN -> 0)
        z = np.empty_like(self.data)
        for j in range(self.n_vars):
            zj = stats.zscore(self.data[:, [j]], ddof=1, axis=0)
            zj[np.isnan(zj)] = 0.0
            z[:, j] = zj[:, 0]
        self._z = np.asfortranarray(z)
        self.stats = {"dense_x": 0, "lowrank_x": 0, "dense_z": 0, "lowrank_z": 0}
        # Per (role, |S|): whether a low-rank factor of the X-role / Kz kernel is tried. The first
        # kernel of that size decides (a factor within the rank cap: try it for every kernel of
        # the size, falling back to the dense path when one exceeds the cap; otherwise dense).
        # Both paths are exact, but their p-values differ in the last digits, so the choice is a
        # function of the queries' order alone, the same whether prefetch() runs them in threads.
        self._policy: dict[tuple[str, int], bool] = {}

    # ------------------------------------------------------------ dispatch
    def _compute(self, x: int, y: int, S: tuple[int, ...]) -> float:
        with one_blas_thread():
            return self._p(x, y, S)

    def _p(self, x: int, y: int, S: tuple[int, ...]) -> float:
        """The p-value of a canonical query, in the calling thread's BLAS setting."""
        stat, k, th = self._uncond(x, y) if not S else self._cond(x, y, S)
        return float(1.0 - special.gammainc(k, stat / th))

    def worker_count(self) -> int:
        """Processes :meth:`prefetch` would use now (see ``workers``)."""
        if self.workers is not None:
            return self.workers if hasattr(os, "fork") else 1
        if not hasattr(os, "fork"):
            return 1
        blas = [c.num_threads for c in _threadpools().lib_controllers if c.user_api == "blas"]
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return max(1, min(min(blas, default=1), cpus))

    def prefetch(self, queries: Sequence[tuple[int, int, Sequence[int]]]) -> int:
        """Compute ``queries`` in :meth:`worker_count` processes, each with one BLAS thread.

        OpenBLAS serialises calls made from several threads of one process, so the work is
        shared by forked processes: queries sharing a conditioning set go to one process (they
        share its projector and X-role factors), the groups spread over the processes by size,
        largest first; the caller's process takes one share and reads the others' p-values
        from pipes. The first query of each conditioning-set size whose factor policy is not set
        yet runs before the fork, as it would in a sequential run, so the p-values are bit for
        bit those of :meth:`pvalue` called in order; a share whose process fails is computed in
        the caller. With one worker nothing is computed ahead. Returns the number of queries
        computed.
        """
        keys = [k for k in dict.fromkeys(self.cache_key(*q) for q in queries) if k not in self._pcache]
        workers = self.worker_count()
        # unconditional tests cost a dot product each once the kernels exist: not worth a process
        if workers < 2 or sum(1 for k in keys if k[2]) < 2:
            return 0
        values: dict = {}
        groups: dict[Any, list] = defaultdict(list)
        with one_blas_thread():
            for key in keys:
                dz = len(key[2])
                if dz and (("x", dz) not in self._policy or ("z", dz) not in self._policy):
                    values[key] = self._p(*key)
                else:
                    groups[key[2] or ("u", key[0])].append(key)
            values.update(self._forked(sorted(groups.values(), key=len, reverse=True), workers))
        return self._store_prefetched({k: values[k] for k in keys})

    def _forked(self, groups: list[list], workers: int) -> dict:
        """p-values of every group's queries, in this process and ``workers - 1`` forked children.

        Each process takes the next group from a shared counter until none is left; a child sends
        its p-values through a pipe and leaves without running the parent's exit handlers.
        """
        import multiprocessing

        if len(groups) < 2:
            return {k: self._p(*k) for g in groups for k in g}
        nxt = multiprocessing.get_context("fork").Value("i", 0)

        def work() -> dict:
            out: dict = {}
            while True:
                with nxt.get_lock():
                    i = nxt.value
                    nxt.value += 1
                if i >= len(groups):
                    return out
                out.update((k, self._p(*k)) for k in groups[i])

        children: list[tuple[int, int]] = []
        try:
            for _ in range(min(workers, len(groups)) - 1):
                r, w = os.pipe()
                with warnings.catch_warnings():  # Python >= 3.12 warns of BLAS's idle threads
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
                if pid == 0:  # the child
                    code = 1
                    try:
                        os.close(r)
                        before = dict(self.stats)
                        done = work()
                        with os.fdopen(w, "wb") as out:
                            out.write(pickle.dumps((done, {k: v - before[k] for k, v in self.stats.items()})))
                        code = 0
                    finally:
                        os._exit(code)
                os.close(w)
                children.append((pid, r))
            values = work()
            while children:
                pid, r = children[0]
                with os.fdopen(r, "rb") as f:
                    data = f.read()
                _, status = os.waitpid(pid, 0)
                children.pop(0)
                if status == 0 and data:
                    done, built = pickle.loads(data)
                    values.update(done)
                    for what, count in built.items():
                        self.stats[what] += count
        finally:  # interrupted: no child outlives the call
            for pid, r in children:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    os.close(r)
        # a group a failed child took: computed here
        values.update((k, self._p(*k)) for g in groups for k in g if k not in values)
        return values

    def statistic(self, x: int, y: int, S=()) -> tuple[float, float, float]:
        """(test statistic, gamma shape, gamma scale) for a query (uncached)."""
        x, y, S = self.cache_key(x, y, S)
        with one_blas_thread():
            return self._uncond(x, y) if not S else self._cond(x, y, S)

    @property
    def cache_bytes(self) -> int:
        """Bytes of kernel matrices and factors held in the LRU cache now."""
        return self._mats.nbytes

    @property
    def peak_cache_bytes(self) -> int:
        """Largest size the kernel cache has reached, in bytes (bounded by ``max_cache_mb``)."""
        return self._mats.peak_bytes

    # ------------------------------------------------------------ kernels
    def _colkernel(self, v: int, theta: float) -> np.ndarray:
        """Gaussian kernel of z-scored column v (cached per (v, theta))."""
        key = ("k", v, theta)
        K = self._mats.get(key)
        if K is None:
            K = _gauss_col(self._z[:, v], theta)
            self._mats.put(key, K, _nb(K))
        return K

    def _prodkernel(self, first: tuple[int, float], rest: tuple[int, ...], theta: float) -> np.ndarray:
        """Gaussian kernel of concatenated columns as the product of column kernels.

        ``exp(-a - b) = exp(-a) exp(-b)`` up to rounding (a few ulp per entry).
        """
        K = self._colkernel(*first).copy()
        for s in rest:
            K *= self._colkernel(s, theta)
        return K

    # ------------------------------------------------------------ unconditional
    def _ukernel(self, v: int):
        key = ("u", v)
        ent = self._mats.get(key)
        if ent is None:
            K = _center(_gauss_col(self._z[:, v], hsic_theta(self.n_samples, 1)))
            ent = (K, float(np.trace(K)), float(np.sum(K ** 2)))
            self._mats.put(key, ent, _nb(K))
        return ent

    def _uncond(self, x: int, y: int):
        Kx, trx, ssx = self._ukernel(x)
        Ky, try_, ssy = self._ukernel(y)
        stat = float(np.dot(Kx.ravel(), Ky.ravel()))
        T = self.n_samples
        mean = trx * try_ / T
        var = 2 * ssx * ssy / T / T
        return stat, mean ** 2 / var, var / mean

    # ------------------------------------------------------------ conditional
    def _try_factor(self, role: str, dz: int, K: np.ndarray) -> np.ndarray | None:
        """A low-rank factor of K within the rank cap, or None (the dense path); see ``_policy``."""
        policy = self._policy.get((role, dz))
        if policy is False:
            return None
        L = _pchol(K, self.chol_tol, self._max_rank)
        if policy is None:
            self._policy[(role, dz)] = L is not None
        return L

    def _projector(self, S: tuple[int, ...]) -> _Projector:
        key = ("P", S)
        P = self._mats.get(key)
        if P is not None:
            return P
        n, eps = self.n_samples, self.epsilon
        theta = kci_theta(n, len(S))
        Kz = self._prodkernel((S[0], theta), S[1:], theta)
        Lz = self._try_factor("z", len(S), Kz)
        if Lz is not None:
            C = Lz - Lz.mean(axis=0)
            s, V = np.linalg.eigh(C.T @ C)
            P = _Projector(B=C @ V, dinv=1.0 / (s + eps))
            self.stats["lowrank_z"] += 1
        else:
            A = _center(Kz)
            A.flat[:: n + 1] += eps
            c, info = _lapack.dpotrf(A, lower=1, clean=0, overwrite_a=1)
            if info == 0:
                Rz, info = _lapack.dpotri(c, lower=1, overwrite_c=1)
            if info == 0:
                Rz = np.tril(Rz)
                Rz += np.tril(Rz, -1).T
                Rz *= eps
            else:  # pragma: no cover - (Kzc + eps I) is PD by construction
                lam, U = np.linalg.eigh(_center(Kz))
                Rz = (U * (eps / (lam + eps))) @ U.T
            P = _Projector(Rz=Rz)
            self.stats["dense_z"] += 1
        self._mats.put(key, P, P.nbytes)
        return P

    def _yfactor(self, v: int, dz: int) -> np.ndarray:
        key = ("Ly", v, dz)
        L = self._mats.get(key)
        if L is None:
            L = _pchol(self._colkernel(v, kci_theta(self.n_samples, dz)), self.chol_tol, self.n_samples)
            self._mats.put(key, L, _nb(L))
        return L

    def _xrole(self, x: int, S: tuple[int, ...], P: _Projector) -> _XRole:
        key = ("X", x, S)
        ent = self._mats.get(key)
        if ent is not None:
            return ent
        theta = kci_theta(self.n_samples, len(S))
        # kernel on [x, 0.5 Z]: exp(-theta/2 (dx^2 + dz^2 / 4))
        Kx = self._prodkernel((x, theta), S, 0.25 * theta)
        Lx = self._try_factor("x", len(S), Kx)
        if Lx is not None:
            M = P.apply(Lx)
            ent = _XRole(M, None, _truncated_from_gram(M, self.eig_thresh))
            self.stats["lowrank_x"] += 1
        else:
            KxR = P.sandwich(Kx)
            ent = _XRole(None, KxR, _truncated_from_dense(KxR, self.eig_thresh))
            self.stats["dense_x"] += 1
        self._mats.put(key, ent, ent.nbytes)
        return ent

    def _yrole(self, y: int, S: tuple[int, ...], P: _Projector) -> _YRole:
        key = ("Y", y, S)
        ent = self._mats.get(key)
        if ent is None:
            My = P.apply(self._yfactor(y, len(S)))
            ent = _YRole(My, _truncated_from_gram(My, self.eig_thresh))
            self._mats.put(key, ent, ent.nbytes)
        return ent

    def _cond(self, x: int, y: int, S: tuple[int, ...]):
        P = self._projector(S)
        X = self._xrole(x, S, P)
        Y = self._yrole(y, S, P)
        My, Fy = Y.M, Y.F
        # statistic sum(KxR * KyR) with KyR = My My^T
        if X.M is not None:
            stat = float(np.sum((X.M.T @ My) ** 2))
        else:
            stat = float(np.sum(My * _blas.dsymm(1.0, X.K, My, lower=1)))  # X.K: lower triangle
        # gamma parameters from the truncated factors
        mean = float(X.diagA @ Y.diagA)
        n = self.n_samples
        kx, ky = X.F.shape[1], Fy.shape[1]
        if n * (kx * ky) ** 2 < n * n * (ky + 2 + (kx if X.A is None else 0)):
            # ||Ax o Ay||_F^2 = ||U^T U||_F^2, U the row-wise Khatri-Rao product
            U = (X.F[:, :, None] * Fy[:, None, :]).reshape(n, kx * ky)
            var = 2.0 * float(np.sum((U.T @ U) ** 2))
        else:
            A = Fy @ Fy.T
            A *= X.F @ X.F.T if X.A is None else X.A
            var = 2.0 * float(np.vdot(A, A))
        return stat, mean ** 2 / var, var / mean
