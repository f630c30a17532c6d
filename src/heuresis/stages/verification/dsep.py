"""The d-separation check: our two d-separation tests against each other and networkx.

``dsep``
    d-separation by the moralized ancestral graph (:func:`heuresis.causal.graph.d_separated`), by path
    blocking (:func:`heuresis.causal.graph.d_separated_bayes_ball`) and by ``networkx.is_d_separator``
    on random DAGs and random queries (singletons and sets for x and y); a disagreement is a
    query where the three answers are not all equal.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from heuresis.causal import graph as G
from heuresis.stages.verification.base import (
    CheckResult,
    Log,
    check_start,
    dag_edges,
    make_result,
    random_dags,
    register,
)

__all__ = ["check_dsep"]


# --- d-separation ----------------------------------------------------------------------------
@register("dsep", "d-separation: moralized ancestral graph vs path blocking",
          "each other and networkx.is_d_separator")
def check_dsep(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check d-separation three ways (moralized ancestral graph, path blocking, networkx) on random DAGs and queries.

    See the module docstring for what counts as a disagreement.
    """
    import networkx as nx

    sz, rng, ex = check_start(settings)
    n = 0
    for adj in random_dags(rng, sz["dags"], sz["d"]):
        d = adj.shape[0]
        g = nx.DiGraph()
        g.add_nodes_from(range(d))
        g.add_edges_from((int(i), int(j)) for i, j in zip(*np.nonzero(adj)))
        for _ in range(int(sz["queries"])):
            order = [int(v) for v in rng.permutation(d)]
            kx = 1 if d < 5 or rng.random() < 0.75 else 2
            ky = 1 if d < 5 or rng.random() < 0.75 else 2
            x, y, rest = order[:kx], order[kx:kx + ky], order[kx + ky:]
            pz = rng.uniform(0.0, 0.6)
            z = sorted(v for v in rest if rng.random() < pz)
            moral = G.d_separated(adj, x, y, z)
            ball = G.d_separated_bayes_ball(adj, x, y, z)
            witness = nx.is_d_separator(g, set(x), set(y), set(z))
            n += 1
            if not moral == ball == witness:
                ex.add(dict(dag=dag_edges(adj), d=d, x=x, y=y, z=z, moralized=moral, path_blocking=ball,
                            networkx=witness))
    return make_result(settings, n_cases=n, examples=ex,
                   scale_description=f"{sz['dags']} random DAGs, d in {list(sz['d'])}, {sz['queries']} queries each",
                   finding=f"{n - ex.count}/{n} queries answered alike by all three")
