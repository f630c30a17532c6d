"""The SHD check: our SHD and normalized SHD against gadjid.

``shd_gadjid``
    :func:`heuresis.causal.metrics.shd` / :func:`~heuresis.causal.metrics.nshd` against ``gadjid.shd`` on
    random pairs of DAGs and CPDAGs.
"""

from __future__ import annotations

from collections.abc import Mapping

from heuresis.causal import graph as G
from heuresis.causal.graph import Graph
from heuresis.stages.verification.base import (
    CheckResult,
    Log,
    check_start,
    make_result,
    random_dag,
    register,
)

__all__ = ["check_shd_gadjid"]


# --- SHD against gadjid ------------------------------------------------------------------------------------
@register("shd_gadjid", "SHD and nSHD", "gadjid.shd")
def check_shd_gadjid(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check SHD and nSHD against ``gadjid.shd`` on random pairs of DAGs and CPDAGs.

    See the module docstring for what counts as a disagreement.
    """
    import gadjid

    from heuresis.causal.metrics import nshd, shd

    sz, rng, ex = check_start(settings)
    n = 0
    lo, hi = (int(v) for v in sz["d"])
    for _ in range(int(sz["pairs"])):
        d = int(rng.integers(lo, hi + 1))
        graphs = []
        for _side in range(2):
            adj = random_dag(rng, d, float(rng.uniform(0.1, 0.7)))
            graphs.append(G.dag_to_cpdag(adj) if rng.random() < 0.5 else Graph.from_dag(adj))
        a, b = graphs
        normalized, count = gadjid.shd(a.to_gadjid(), b.to_gadjid())
        ours, ours_n = shd(a, b), nshd(a, b)
        n += 1
        if ours != count or abs(ours_n - normalized) > 1e-12:
            ex.add(dict(d=d, a=a.to_lines(), b=b.to_lines(), ours=[ours, ours_n], gadjid=[int(count), normalized]))
    return make_result(settings, n_cases=n, examples=ex, tolerance="SHD exact; nSHD within 1e-12",
                   scale_description=f"{sz['pairs']} pairs of random DAGs/CPDAGs, d in {list(sz['d'])}",
                   finding=f"{n - ex.count}/{n} pairs identical")
