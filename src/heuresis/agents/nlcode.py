"""A nonlinear re-test of PC's deletions that the evidence agent runs through the code tool.

KCI misses some dependences that a flexible regression finds (in ``wild`` and
``gauntlet`` most of PC-KCI's wrong deletions have a deleting-set p-value above 0.2).  This module
is a self-contained numpy/scipy program: the evidence agent sends its source, followed by one
call, to ``run_code`` (so it runs in the sandbox on the episode's data and only its printed lines
come back), and ``benchmarks/evidence_agent.py`` imports the same functions to replay the agent's
decisions on dev instances.  It must therefore import nothing but numpy and scipy.

Two steps per deleted pair x, y and conditioning set Z (|Z| <= 3):

* :func:`screen` — a nested-regression F-test: y on a rich basis of Z (per variable: v, v^2,
  v^3, |v|, tanh 2v and five hinge functions at quantiles; pairwise products of Z), against the
  same plus the basis of x and its products with Z; and the same with x and y swapped.  The
  pair's value is the smaller p-value of the two directions; over several sets, the largest
  (dependence must hold given every set).  Misspecified regressions on Z make this F-test
  anticonservative, so it only screens.
* :func:`confirm` — a local permutation test of the same statistic: x is permuted within blocks
  of about ``block`` rows that are close in Z (k-d splits at the median), which keeps the
  x-Z relation and breaks any x-y relation given Z.  p = (1 + #(T_perm >= T)) / (1 + B); the
  pair's value is the largest p over its sets.

Output lines: ``x y value`` (0-based column indices, value printed with ``%.4e``).
"""

import json

import numpy as np
from scipy import stats


def _basis(v):
    v = (v - v.mean()) / (v.std() + 1e-12)
    cols = [v, v ** 2, v ** 3, np.abs(v), np.tanh(2 * v)]
    for q in (0.1, 0.3, 0.5, 0.7, 0.9):
        cols.append(np.maximum(v - np.quantile(v, q), 0.0))
    return np.column_stack(cols)


def _zbasis(D, Z):
    n = D.shape[0]
    B = [np.ones((n, 1))] + [_basis(D[:, k]) for k in Z]
    for i in range(len(Z)):
        for j in range(i + 1, len(Z)):
            a, b = D[:, Z[i]], D[:, Z[j]]
            B.append(np.column_stack([a * b, a * a * b, a * b * b]))
    return np.column_stack(B)


def _fstat(Q0, k0, xv, yv, D, Z):
    """F statistic of adding the basis of xv (and its products with Z) to yv ~ span(Q0)."""
    E = np.column_stack([_basis(xv)] + [np.column_stack([xv * D[:, k], xv ** 2 * D[:, k], xv * D[:, k] ** 2])
                                        for k in Z])
    E = E - Q0 @ (Q0.T @ E)
    r0 = yv - Q0 @ (Q0.T @ yv)
    Qe, _ = np.linalg.qr(E)
    proj = Qe.T @ r0
    ss = float(proj @ proj)
    q = E.shape[1]
    dfd = len(yv) - k0 - q
    return (ss / q) / (max(float(r0 @ r0) - ss, 1e-300) / dfd), q, dfd


def _prepare(D, Z):
    B0 = _zbasis(D, Z)
    Q0, _ = np.linalg.qr(B0)
    return Q0, B0.shape[1]


def pair_p(D, x, y, Z):
    """Nested F-test p-value of x -- y given Z, the smaller of the two directions."""
    Z = list(Z)
    Q0, k0 = _prepare(D, Z)
    out = []
    for a, b in ((x, y), (y, x)):
        F, q, dfd = _fstat(Q0, k0, D[:, a], D[:, b], D, Z)
        out.append(float(stats.f.sf(F, q, dfd)))
    return min(out)


def _blocks(Zd, size):
    todo, out = [np.arange(Zd.shape[0])], []
    while todo:
        b = todo.pop()
        if len(b) <= size or Zd.shape[1] == 0:
            out.append(b)
            continue
        sub = Zd[b]
        c = int(np.argmax(sub.max(0) - sub.min(0)))
        o = b[np.argsort(sub[:, c], kind="stable")]
        h = len(o) // 2
        todo += [o[:h], o[h:]]
    return out


def perm_p(D, x, y, Z, permutations=100, block=8, seed=0):
    """Local permutation p-value of the two-direction F statistic of x -- y given Z."""
    Z = list(Z)
    rng = np.random.default_rng(seed)
    Q0, k0 = _prepare(D, Z)

    def stat(xv):
        return max(_fstat(Q0, k0, xv, D[:, y], D, Z)[0], _fstat(Q0, k0, D[:, y], xv, D, Z)[0])

    t0 = stat(D[:, x])
    blocks = _blocks(D[:, Z], block) if Z else [np.arange(D.shape[0])]
    hits = 0
    for _ in range(permutations):
        xp = D[:, x].copy()
        for b in blocks:
            xp[b] = D[rng.permutation(b), x]
        hits += stat(xp) >= t0
    return (1 + hits) / (1 + permutations)


def screen(D, jobs):
    """``jobs``: [[x, y, [Z1, Z2, ...]], ...] -> lines ``x y max_Z pair_p``."""
    return [f"{x} {y} {max(pair_p(D, x, y, Z) for Z in sets):.4e}" for x, y, sets in jobs if sets]


def confirm(D, jobs, permutations=100, block=8):
    """``jobs`` as for :func:`screen` -> lines ``x y max_Z perm_p``."""
    return [f"{x} {y} {max(perm_p(D, x, y, Z, permutations, block) for Z in sets):.4e}"
            for x, y, sets in jobs if sets]


def parse(text):
    """{(x, y): value} from the printed lines (other lines ignored)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            try:
                out[(int(parts[0]), int(parts[1]))] = float(parts[2])
            except ValueError:
                pass
    return out


def run(D, step, jobs, **params):
    """What the program sent to the code tool does: print the lines of ``step`` on ``jobs``."""
    lines = screen(D, jobs) if step == "screen" else confirm(D, jobs, **params)
    for line in lines:
        print(line)


def program(step, jobs, **params):
    """The Python source the agent sends to ``run_code``: this module, then one call on data.npy."""
    import inspect
    import sys

    src = inspect.getsource(sys.modules[__name__])
    call = (f"\n\nrun(np.load('data.npy'), {step!r}, json.loads({json.dumps(json.dumps(jobs))}), "
            f"**json.loads({json.dumps(json.dumps(params))}))\n")
    return src + call
