"""The PC checks: oracle PC against the true CPDAG, and our PC-stable against causal-learn's.

``oracle_pc``
    Our PC with :class:`heuresis.causal.algorithms.pc.DSeparationOracle` as the CI test returns the true CPDAG on
    random DAGs.
``pc_vs_causallearn``
    Our PC with our Fisher-z / KCI against causal-learn's ``pc(stable=True, uc_rule=0,
    uc_priority=2)`` with its own test, on generated instances (dev split, indices 0..k-1):
    skeleton and separating sets must be identical (a disagreement is an instance where either
    differs; separating sets compared as causal-learn's collider rule reads them, the union of
    the stored sets), and the CPDAG agreement rate must reach ``tolerances.pc_cpdag_agreement``.
    Every difference, CPDAG-only ones included, is an example.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

from heuresis.causal import graph as G
from heuresis.causal.graph import Graph
from heuresis.stages.verification.base import (
    CheckResult,
    Log,
    check_start,
    dag_edges,
    generated_instances,
    instance_size,
    make_result,
    quiet_blas,
    random_dags,
    register,
)

__all__ = ["check_oracle_pc", "check_pc_vs_causallearn"]


# --- oracle PC -----------------------------------------------------------------------------------------
@register("oracle_pc", "Oracle PC (d-separation as the CI test)", "true CPDAG (dag_to_cpdag)")
def check_oracle_pc(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check that PC with the d-separation oracle as its CI test returns the true CPDAG on random DAGs.

    See the module docstring for what counts as a disagreement.
    """
    from heuresis.causal.algorithms.pc import DSeparationOracle, pc

    sz, rng, ex = check_start(settings)
    n = 0
    for adj in random_dags(rng, sz["dags"], sz["d"]):
        d = adj.shape[0]
        res = pc(np.zeros((1, d)), DSeparationOracle(adj), alpha=float(settings["alpha"]))
        truth = G.dag_to_cpdag(adj)
        n += 1
        if res.graph != truth:
            ex.add(dict(dag=dag_edges(adj), d=d, pc=res.graph.to_lines(), true_cpdag=truth.to_lines(),
                        same_skeleton=bool(np.array_equal(res.skeleton.skeleton(), truth.skeleton()))))
    return make_result(settings, n_cases=n, examples=ex,
                   scale_description=f"{sz['dags']} random DAGs, d in {list(sz['d'])}",
                   finding=f"{n - ex.count}/{n} true CPDAGs recovered")


# --- PC against causal-learn ----------------------------------------------------------------------------
def _sepset_differences(ours: Mapping, cg, d: int) -> list[dict]:
    """Pairs whose separating sets differ, read as causal-learn's collider rule reads them."""
    out = []
    for a in range(d):
        for b in range(a + 1, d):
            stored = cg.sepset[a, b]
            theirs = None if stored is None else sorted({int(v) for S in stored for v in S})
            mine = sorted(ours[(a, b)]) if (a, b) in ours else None
            if mine != theirs:
                out.append(dict(pair=[f"X{a + 1}", f"X{b + 1}"], ours=mine, causallearn=theirs))
    return out


@register("pc_vs_causallearn", "PC-stable (Fisher-z, KCI) on generated instances",
          "causal-learn pc(stable=True)", uses_instances=True)
def check_pc_vs_causallearn(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check our PC-stable (Fisher-z, KCI) against causal-learn's on generated instances: skeleton, sepsets, CPDAG.

    See the module docstring for what counts as a disagreement.
    """
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    from heuresis.causal.algorithms.pc import pc
    from heuresis.causal.ci import make_ci_test

    sz, _, ex = check_start(settings)
    alpha = float(settings["alpha"])
    n = structural = cpdag_same = 0
    per_test: dict[str, list[int]] = {}
    for test in ("fisherz", "kci"):
        per_family = int(sz.get(test, 0))
        for inst in generated_instances(settings, per_family):
            X = inst.data
            d = X.shape[1]
            with quiet_blas(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = pc(X, make_ci_test(test, X), alpha)
                cg = cl_pc(X, alpha, test, stable=True, uc_rule=0, uc_priority=2, show_progress=False)
            theirs = Graph.from_causallearn(cg.G)
            skel_same = bool(np.array_equal(theirs.skeleton(), ours.skeleton.skeleton()))
            sep_diff = _sepset_differences(ours.sepsets, cg, d)
            graph_same = theirs == ours.graph
            n += 1
            cpdag_same += graph_same
            counts = per_test.setdefault(test, [0, 0, 0])
            counts[0] += 1
            counts[1] += graph_same
            if not skel_same or sep_diff:
                structural += 1
                counts[2] += 1
            if not (skel_same and not sep_diff and graph_same):
                ex.add(dict(instance=inst.id, test=test, alpha=alpha, skeleton_identical=skel_same,
                            sepset_differences=sep_diff, cpdag_identical=graph_same,
                            ours=ours.graph.to_lines(), causallearn=theirs.to_lines(),
                            true_dag=dag_edges(inst.dag)))
            if log:
                log(f"pc_vs_causallearn {test} {inst.id}: skeleton {'=' if skel_same else '!='}, "
                    f"{len(sep_diff)} sepset differences, CPDAG {'=' if graph_same else '!='}")
    rate = cpdag_same / n if n else 1.0
    floor = float(settings["tolerances"]["pc_cpdag_agreement"])
    parts = [f"{t}: CPDAG {c[1]}/{c[0]}, skeleton/sepset mismatches {c[2]}" for t, c in per_test.items()]
    return make_result(settings, n_cases=n, examples=ex, disagreements=structural,
                   passed=structural == 0 and rate >= floor,
                   tolerance=f"skeleton, sepsets exact; CPDAG agreement at least {floor:g}",
                   scale_description=(f"{sz.get('fisherz', 0)} Fisher-z + {sz.get('kci', 0)} KCI instances per "
                                      f"family x {len(settings['instances'])} families ({instance_size(settings)})"),
                   finding="; ".join(parts) + f" (CPDAG agreement {rate:.1%})",
                   details={"cpdag_agreement": rate, "per_test": per_test, "examples_total": ex.count})
