"""The invariance checks: PC against its own output, with nothing repaired and with the columns relabeled.

``invariance_no_repair``
    "No repair" equals PC: the oracle repair under a truth with no wrong deletion (the empty
    DAG for PC-Fisher-z on data; the true DAG for oracle PC, which deletes only rightly) and
    restoring no pair (:func:`heuresis.stages.headroom.restore_pairs` with no pair) return PC's graph.
``invariance_relabel``
    PC on column-permuted data (and oracle PC on the permuted DAG) returns the permuted
    skeleton, separating sets and graph.  PC-stable's skeleton and separating sets do not
    depend on the column order, but the collider step does when two colliders claim the same
    edge in opposite directions (Colombo & Maathuis 2014; causal-learn's ``uc_priority=2`` keeps
    the first one visited).  So a CPDAG difference counts as a disagreement only on an instance
    *without* conflicting colliders; differences explained by a conflict are reported in the
    finding and kept as examples.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from heuresis.causal.graph import Graph
from heuresis.stages.verification.base import (
    CheckResult,
    Log,
    check_start,
    generated_instances,
    instance_size,
    jsonable,
    make_result,
    quiet_blas,
    random_dags,
    register,
)

__all__ = ["check_invariance_no_repair", "check_invariance_relabel"]


# --- invariances ----------------------------------------------------------------------------------------------
@register("invariance_no_repair", "Invariance: 'no repair' equals PC",
          "PC's own output", uses_instances=True)
def check_invariance_no_repair(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check that the oracle repair with no wrong deletion, and restoring no pair, return PC's graph.

    See the module docstring for what counts as a disagreement.
    """
    from heuresis.causal.algorithms.pc import DSeparationOracle, label_deletions, oracle_repair, pc
    from heuresis.causal.ci import make_ci_test
    from heuresis.stages.headroom import restore_pairs

    sz, _, ex = check_start(settings)
    alpha = float(settings["alpha"])
    n = 0
    for inst in generated_instances(settings, sz["instances"]):
        X = inst.data
        d = X.shape[1]
        with quiet_blas():
            res = pc(X, make_ci_test("fisherz", X), alpha)
        oracle = pc(np.zeros((1, d)), DSeparationOracle(inst.dag), alpha)
        empty = np.zeros((d, d), dtype=np.int8)
        cases = {
            "oracle repair of PC-Fisher-z under a truth with no wrong deletion (empty DAG)":
                (oracle_repair(res, empty), res.graph, not any(label_deletions(res.deletions, empty))),
            "restoring no pair of PC-Fisher-z's deletions":
                (restore_pairs(res.graph, []), res.graph, True),
            "oracle repair of oracle PC under the true DAG (no deletion is wrong)":
                (oracle_repair(oracle, inst.dag), oracle.graph, not any(label_deletions(oracle.deletions, inst.dag))),
        }
        for name, (repaired, original, labels_ok) in cases.items():
            n += 1
            if repaired != original or not labels_ok:
                ex.add(dict(instance=inst.id, case=name, pc=original.to_lines(), repaired=repaired.to_lines(),
                            labels_all_right=labels_ok))
    return make_result(settings, n_cases=n, examples=ex,
                   scale_description=(f"{sz['instances']} instances per family x 3 cases "
                                      f"({instance_size(settings)})"),
                   finding=f"{n - ex.count}/{n} repairs that restore nothing returned PC's graph")


def _collider_conflicts(skeleton: Graph, sepsets: Mapping) -> list[tuple[str, str]]:
    """Edges that two unshielded colliders (middle node outside the separating set) orient oppositely."""
    skel = skeleton.skeleton()
    d = skel.shape[0]
    heads = np.zeros((d, d), dtype=bool)  # heads[a, c]: some collider claims a -> c
    for c in range(d):
        nb = np.flatnonzero(skel[c])
        for a, b in itertools.combinations(nb, 2):
            a, b = int(a), int(b)
            if not skel[a, b] and c not in sepsets.get((min(a, b), max(a, b)), ()):
                heads[a, c] = heads[b, c] = True
    return [(skeleton.names[a], skeleton.names[c]) for a, c in zip(*np.nonzero(np.triu(heads & heads.T, 1)))]


def _relabel_sepsets(sepsets: Mapping, perm: np.ndarray) -> dict:
    """Separating sets of the permuted run in original labels (new node k is old perm[k])."""
    out = {}
    for (a, b), S in sepsets.items():
        x, y = int(perm[a]), int(perm[b])
        out[(min(x, y), max(x, y))] = tuple(sorted(int(perm[s]) for s in S))
    return out


@register("invariance_relabel", "Invariance: PC under relabeled columns",
          "the permuted output of the unpermuted run", uses_instances=True)
def check_invariance_relabel(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check that PC on column-permuted data returns the permuted skeleton, separating sets and graph.

    See the module docstring for what counts as a disagreement.
    """
    from heuresis.causal.algorithms.pc import DSeparationOracle, pc
    from heuresis.causal.ci import make_ci_test

    sz, rng, ex = check_start(settings)
    alpha = float(settings["alpha"])
    n = orient_diff = explained = 0
    runs = []
    for inst in generated_instances(settings, sz["instances"]):
        runs.append((inst.id, inst.data, None))
    for k, adj in enumerate(random_dags(rng, sz["dags"], sz["d"])):
        runs.append((f"random-dag-{k:04d}", None, adj))
    for run_id, X, adj in runs:
        d = X.shape[1] if X is not None else adj.shape[0]  # type: ignore[attr-defined]
        perm = rng.permutation(d)
        with quiet_blas():
            if X is not None:
                base = pc(X, make_ci_test("fisherz", X), alpha)
                moved = pc(X[:, perm], make_ci_test("fisherz", X[:, perm]), alpha)
            else:
                base = pc(np.zeros((1, d)), DSeparationOracle(adj), alpha)  # type: ignore[arg-type]
                moved = pc(np.zeros((1, d)), DSeparationOracle(adj[np.ix_(perm, perm)]), alpha)  # type: ignore[index]
        inv = np.argsort(perm)  # moved's output relabeled back to the original columns
        # relabel() also permutes the names; the comparison and the examples use the original ones
        back_graph, back_skel = Graph(moved.graph.relabel(inv).amat), Graph(moved.skeleton.relabel(inv).amat)  # type: ignore[arg-type]
        skel_same = back_skel == base.skeleton
        sep_same = _relabel_sepsets(moved.sepsets, perm) == dict(base.sepsets)
        graph_same = back_graph == base.graph
        conflicts = _collider_conflicts(base.skeleton, base.sepsets)
        n += 1
        structural = not (skel_same and sep_same)
        unexplained = structural or (not graph_same and not conflicts)
        if not graph_same:
            orient_diff += 1
            explained += bool(conflicts) and not structural
        if not (skel_same and sep_same and graph_same):
            example = dict(run=run_id, test="fisherz" if X is not None else "dsep", permutation=perm,
                           skeleton_identical=skel_same, sepsets_identical=sep_same, cpdag_identical=graph_same,
                           conflicting_colliders=conflicts, counted_as_disagreement=unexplained,
                           original=base.graph.to_lines(), relabeled_back=back_graph.to_lines())
            if unexplained:
                ex.add(example)
            elif len(ex.items) < ex.cap:
                ex.items.append(jsonable(example))  # kept for inspection, not counted
    return make_result(settings, n_cases=n, examples=ex,
                   tolerance="skeleton, sepsets exact; CPDAG exact unless colliders conflict",
                   scale_description=(f"Fisher-z PC on {sz['instances']} instances per family "
                                      f"({instance_size(settings)}) + oracle PC on {sz['dags']} random DAGs"),
                   finding=(f"skeleton and sepsets equivariant; CPDAG differs on {orient_diff}/{n} runs, "
                            f"{explained} of them with conflicting colliders (order-dependent by design)"),
                   details={"cpdag_differences": orient_diff, "explained_by_conflicts": explained})
