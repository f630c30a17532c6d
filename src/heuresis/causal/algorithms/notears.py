"""Linear NOTEARS (Zheng, Aragam, Ravikumar & Xing, NeurIPS 2018), our own scipy implementation.

Problem::

    min_W  F(W) = 0.5/n ||X - X W||_F^2 + lambda1 ||W||_1   subject to   h(W) = tr(exp(W∘W)) - d = 0

with X the column-centred data (optionally standardized: ``standardize=True``; the default
keeps the raw scale, as in the paper).  h(W) = 0 iff W is the weighted adjacency of a DAG
(``W[i, j] != 0``: i -> j).

Solver (the paper's Algorithm 1): an augmented Lagrangian

    L(W, mu) = F(W) + rho/2 h(W)^2 + mu h(W)

minimised over W for fixed (rho, mu); rho is multiplied by 10 until h has dropped below a
quarter of its previous value, then the dual step mu += rho h.  Stops when h <= ``h_tol``,
rho >= ``rho_max`` or after ``max_iter`` dual steps.  The non-smooth L1 term is handled by
splitting W = W+ - W- with W+, W- >= 0, which makes lambda1 ||W||_1 = lambda1 sum(W+ + W-)
smooth on the box; the inner problem is solved by L-BFGS-B with bounds [0, inf) (diagonal fixed
at 0) and the analytic gradient

    grad_W = -1/n X^T (X - X W) + (rho h + mu) exp(W∘W)^T ∘ 2W.

Post-processing: weights with ``|W[i, j]| < w_threshold`` are set to 0.  If the thresholded
matrix still has a directed cycle (possible when the optimisation stopped with h > 0, e.g. at
rho_max), the weakest edge (smallest |weight|) of a cycle is removed, repeatedly, until the
graph is acyclic; the removed edges are listed in ``details["cycle_edges_removed"]``.  The output
is always a DAG.  Deterministic (no randomness).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.optimize as sopt

from heuresis.causal.graph import Graph

from .base import (
    Algorithm,
    AlgorithmResult,
    Param,
    is_nonneg_float,
    is_pos_float,
    is_pos_int,
    register_algorithm,
)

__all__ = ["NOTEARS", "break_cycles", "find_cycle", "notears_h", "notears_linear"]


def notears_h(W: np.ndarray) -> float:
    """The acyclicity function h(W) = tr(exp(W∘W)) - d (0 iff W is acyclic)."""
    W = np.asarray(W, dtype=float)
    return float(np.trace(sla.expm(W * W)) - W.shape[0])


def notears_linear(X: np.ndarray, lambda1: float = 0.1, max_iter: int = 100, h_tol: float = 1e-8,
                   rho_max: float = 1e16) -> tuple[np.ndarray, dict]:
    """Unthresholded linear NOTEARS estimate ``W`` (``W[i, j]``: weight of i -> j) and solver info."""
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    X = X - X.mean(axis=0, keepdims=True)
    dd = d * d

    def split(w: np.ndarray) -> np.ndarray:
        return (w[:dd] - w[dd:]).reshape(d, d)

    def h_and_grad(W: np.ndarray) -> tuple[float, np.ndarray]:
        E = sla.expm(W * W)
        return float(np.trace(E) - d), E.T * W * 2.0

    def objective(w: np.ndarray, rho: float, mu: float) -> tuple[float, np.ndarray]:
        # A line-search trial point far out (large W, large rho) can overflow expm; the objective
        # is then +inf and L-BFGS-B backtracks.
        with np.errstate(over="ignore", invalid="ignore"):
            W = split(w)
            R = X - X @ W
            loss = 0.5 / n * float(np.sum(R * R))
            g_loss = -1.0 / n * (X.T @ R)
            h, g_h = h_and_grad(W)
            obj = loss + 0.5 * rho * h * h + mu * h + lambda1 * float(w.sum())
            g_smooth = g_loss + (rho * h + mu) * g_h
            grad = np.concatenate([(g_smooth + lambda1).ravel(), (-g_smooth + lambda1).ravel()])
        if not np.isfinite(obj):
            return np.inf, np.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)
        return obj, grad

    diag = np.eye(d, dtype=bool).ravel()
    bounds = [(0.0, 0.0) if diag[k % dd] else (0.0, None) for k in range(2 * dd)]
    w = np.zeros(2 * dd)
    rho, mu, h = 1.0, 0.0, np.inf
    n_outer = n_inner = 0
    for _ in range(max_iter):
        n_outer += 1
        w_new, h_new = w, h
        while rho < rho_max:
            n_inner += 1
            sol = sopt.minimize(objective, w, args=(rho, mu), method="L-BFGS-B", jac=True, bounds=bounds)
            w_new = sol.x
            h_new, _ = h_and_grad(split(w_new))
            if h_new > 0.25 * h:
                rho *= 10.0
            else:
                break
        w, h = w_new, h_new
        mu += rho * h
        if h <= h_tol or rho >= rho_max:
            break
    info = {"h": float(h), "rho": float(rho), "dual": float(mu), "n_outer": n_outer, "n_inner": n_inner,
            "converged": bool(h <= h_tol)}
    return split(w), info


def find_cycle(adj: np.ndarray) -> list[int] | None:
    """A directed cycle ``[v0, v1, ..., vk]`` (edges v0->v1->...->vk->v0) of ``adj``, or None."""
    a = np.asarray(adj) != 0
    d = a.shape[0]
    color = [0] * d  # 0 unseen, 1 on stack, 2 done
    for s in range(d):
        if color[s]:
            continue
        path = [s]
        iters = [iter(np.flatnonzero(a[s]).tolist())]
        color[s] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                iters.pop()
            elif color[nxt] == 1:
                return path[path.index(nxt):]
            elif color[nxt] == 0:
                color[nxt] = 1
                path.append(nxt)
                iters.append(iter(np.flatnonzero(a[nxt]).tolist()))
    return None


def break_cycles(W: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, float]]]:
    """Remove the weakest edge of a directed cycle of ``W`` until it is acyclic.

    Returns the acyclic weight matrix and the removed edges ``(i, j, weight)``; ties are broken
    by the first edge along the cycle found (deterministic).
    """
    W = np.array(W, dtype=float)
    np.fill_diagonal(W, 0.0)
    removed: list[tuple[int, int, float]] = []
    while (cyc := find_cycle(W)) is not None:
        edges = [(cyc[k], cyc[(k + 1) % len(cyc)]) for k in range(len(cyc))]
        i, j = min(edges, key=lambda e: abs(W[e]))
        removed.append((int(i), int(j), float(W[i, j])))
        W[i, j] = 0.0
    return W, removed


@register_algorithm("notears")
class NOTEARS(Algorithm):
    """Linear NOTEARS: least squares + L1 under the smooth acyclicity constraint h(W) = 0."""

    param_spec = {
        "lambda1": Param(0.1, is_nonneg_float, "a float >= 0", "L1 penalty"),
        "max_iter": Param(100, is_pos_int, "a positive int", "maximum dual (augmented-Lagrangian) steps"),
        "h_tol": Param(1e-8, is_pos_float, "a positive float", "stop when h(W) <= h_tol"),
        "rho_max": Param(1e16, is_pos_float, "a positive float", "stop when the penalty rho reaches this"),
        "w_threshold": Param(0.3, is_nonneg_float, "a float >= 0", "drop edges with |weight| below this"),
        "standardize": Param(False, lambda v: isinstance(v, bool), "True or False",
                             "scale columns to unit variance before fitting"),
    }

    def _run(self, data: np.ndarray) -> AlgorithmResult:
        p = self.params
        X = data
        if p["standardize"]:
            sd = X.std(axis=0)
            X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        W_raw, info = notears_linear(X, lambda1=float(p["lambda1"]), max_iter=int(p["max_iter"]),
                                     h_tol=float(p["h_tol"]), rho_max=float(p["rho_max"]))
        W = np.where(np.abs(W_raw) < float(p["w_threshold"]), 0.0, W_raw)
        W, removed = break_cycles(W)
        details = {**info, "weights": W.tolist(), "h_output": notears_h(W),
                   "cycle_edges_removed": [list(e) for e in removed]}
        return AlgorithmResult(graph=Graph.from_dag(W != 0), n_tests=0, details=details)
