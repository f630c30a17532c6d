"""The DAG -> CPDAG checks: against brute-force equivalence classes of every small DAG, and against causal-learn.

``cpdag_bruteforce``
    Every labeled DAG over d = 1..``max_d`` nodes is enumerated (all upper-triangular patterns
    in every node order, de-duplicated as 64-bit codes); the counts must be OEIS A003024.  DAGs
    are grouped by skeleton and v-structures (Verma & Pearl 1990); the class count must equal
    the number of essential graphs (Gillispie & Perlman 2002: 1, 2, 11, 185, 8782, 1067825), and
    for every member :func:`heuresis.causal.graph.dag_to_cpdag` must return the graph whose directed
    edges are exactly those oriented the same way in every member of the class (the rest of
    the skeleton undirected).  A disagreement is a DAG whose CPDAG differs, or a wrong count.
``cpdag_causallearn``
    :func:`~heuresis.causal.graph.dag_to_cpdag` against ``causallearn.utils.DAG2CPDAG.dag2cpdag`` on
    random DAGs.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping

import numpy as np

from heuresis.causal import graph as G
from heuresis.causal.graph import Graph
from heuresis.stages.verification.base import (
    CheckResult,
    Examples,
    Log,
    check_start,
    dag_edges,
    make_result,
    random_dags,
    register,
)

__all__ = ["A003024", "ESSENTIAL_GRAPHS", "MAX_EXHAUSTIVE_D", "check_cpdag_bruteforce", "check_cpdag_causallearn",
           "enumerate_dags"]

#: Labeled DAGs on d nodes, d = 0..6 (OEIS A003024).
A003024 = (1, 1, 3, 25, 543, 29281, 3781503)
#: Markov equivalence classes (essential graphs) of labeled DAGs on d nodes, d = 0..6
#: (Gillispie & Perlman 2002, Table 1).
ESSENTIAL_GRAPHS = (1, 1, 2, 11, 185, 8782, 1067825)
MAX_EXHAUSTIVE_D = 6


# --- DAG -> CPDAG, exhaustive ------------------------------------------------------------------
def enumerate_dags(d: int) -> np.ndarray:
    """Every labeled DAG over d nodes as a sorted array of 64-bit codes (bit i*d+j set: i -> j).

    Every DAG is an upper-triangular pattern in some node order; all 2^(d(d-1)/2) patterns are
    mapped through all d! orders with one integer matrix product per order and de-duplicated.
    d = 6 makes 23.6 million codes (190 MB) before de-duplication.
    """
    if not 0 <= d <= MAX_EXHAUSTIVE_D:
        raise ValueError(f"exhaustive DAG enumeration supports d = 0..{MAX_EXHAUSTIVE_D}, got d={d}")
    if d <= 1:
        return np.zeros(1, dtype=np.int64)
    pairs = [(a, b) for a in range(d) for b in range(a + 1, d)]
    m = len(pairs)
    bits = ((np.arange(1 << m, dtype=np.int64)[:, None] >> np.arange(m, dtype=np.int64)) & 1)
    chunks = []
    for perm in itertools.permutations(range(d)):
        w = np.array([1 << (perm[a] * d + perm[b]) for a, b in pairs], dtype=np.int64)
        chunks.append(bits @ w)
    return np.unique(np.concatenate(chunks))


def _bit(codes: np.ndarray, d: int, i: int, j: int) -> np.ndarray:
    return (codes >> np.int64(i * d + j)) & 1


def _transpose_codes(codes: np.ndarray, d: int) -> np.ndarray:
    out = np.zeros_like(codes)
    for i in range(d):
        for j in range(d):
            if i != j:
                out |= _bit(codes, d, i, j) << np.int64(j * d + i)
    return out


def _decode(codes: np.ndarray, d: int) -> np.ndarray:
    shifts = np.arange(d * d, dtype=np.int64)
    return ((codes[:, None] >> shifts) & 1).astype(np.int8).reshape(-1, d, d)


def _encode(mats: np.ndarray) -> np.ndarray:
    n, d, _ = mats.shape
    weights = np.left_shift(np.int64(1), np.arange(d * d, dtype=np.int64))
    return (mats.reshape(n, d * d).astype(np.int64) * weights).sum(axis=1)


def _cpdag_codes(args: tuple[np.ndarray, int]) -> np.ndarray:
    """Our dag_to_cpdag on every coded DAG, re-coded (mark matrix bits)."""
    codes, d = args
    mats = _decode(codes, d)
    out = np.empty_like(mats)
    for k in range(len(mats)):
        out[k] = G.dag_to_cpdag(mats[k]).amat
    return _encode(out)


def _map_chunks(codes: np.ndarray, d: int, workers: int) -> np.ndarray:
    if len(codes) == 0:
        return codes.copy()
    if workers <= 1 or len(codes) < 20000:
        return _cpdag_codes((codes, d))
    import multiprocessing as mp

    chunks = np.array_split(codes, max(workers * 8, 1))
    with mp.get_context("fork").Pool(workers) as pool:
        parts = pool.map(_cpdag_codes, [(c, d) for c in chunks])
    return np.concatenate(parts)


def _skeleton_and_vstructures(codes: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Per DAG: skeleton bits (one per unordered pair) and v-structure bits (one per a < b, c)."""
    adj = {(i, j): _bit(codes, d, i, j) for i in range(d) for j in range(d) if i != j}
    skel = np.zeros_like(codes)
    und = {}
    for t, (i, j) in enumerate(itertools.combinations(range(d), 2)):
        und[(i, j)] = und[(j, i)] = adj[(i, j)] | adj[(j, i)]
        skel |= und[(i, j)] << np.int64(t)
    vs = np.zeros_like(codes)
    t = 0
    for c in range(d):
        others = [v for v in range(d) if v != c]
        for a, b in itertools.combinations(others, 2):
            vs |= (adj[(a, c)] & adj[(b, c)] & (1 - und[(a, b)])) << np.int64(t)
            t += 1
    return skel, vs


def _bruteforce_d(d: int, workers: int, ex: Examples) -> dict:
    t0 = time.perf_counter()
    codes = enumerate_dags(d)
    skel, vs = _skeleton_and_vstructures(codes, d)
    order = np.lexsort((vs, skel))
    codes, skel, vs = codes[order], skel[order], vs[order]
    start = np.flatnonzero(np.r_[True, (skel[1:] != skel[:-1]) | (vs[1:] != vs[:-1])])
    sizes = np.diff(np.r_[start, len(codes)])
    compelled = np.bitwise_and.reduceat(codes, start)  # i -> j in every member of the class
    sym = codes[start] | _transpose_codes(codes[start], d)
    expected_class = compelled | (sym & ~_transpose_codes(compelled, d))
    expected = np.repeat(expected_class, sizes)
    ours = _map_chunks(codes, d, workers)
    wrong = np.flatnonzero(ours != expected)
    class_of = np.repeat(np.arange(len(start)), sizes)
    n_cpdags = np.array([len(np.unique(ours[s:s + k])) for s, k in zip(start, sizes)]) if len(wrong) else None
    for k in wrong:
        if len(ex.items) >= ex.cap:
            ex.count += 1
            continue
        members = codes[start[class_of[k]]:start[class_of[k]] + sizes[class_of[k]]]
        ex.add(dict(d=d, dag=dag_edges(_decode(codes[[k]], d)[0]), class_size=len(members),
                    ours=Graph(_decode(ours[[k]], d)[0]).to_lines(),
                    expected=Graph(_decode(expected[[k]], d)[0]).to_lines(),
                    class_members=[dag_edges(m) for m in _decode(members[:12], d)]))
    count_ok = len(codes) == A003024[d]
    classes_ok = len(start) == ESSENTIAL_GRAPHS[d]
    for name, got, want, ok in (("DAGs", len(codes), A003024[d], count_ok),
                                ("equivalence classes", len(start), ESSENTIAL_GRAPHS[d], classes_ok)):
        if not ok:
            ex.add(dict(d=d, count=name, enumerated=int(got), known=int(want)))
    return dict(d=d, dags=len(codes), known_dags=A003024[d], classes=len(start),
                known_classes=ESSENTIAL_GRAPHS[d], dags_with_wrong_cpdag=len(wrong),
                classes_with_several_cpdags=int((n_cpdags > 1).sum()) if n_cpdags is not None else 0,
                seconds=round(time.perf_counter() - t0, 2))


@register("cpdag_bruteforce", "DAG -> CPDAG, exhaustive over all labeled DAGs",
          "brute-force Markov equivalence classes; OEIS A003024")
def check_cpdag_bruteforce(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check DAG -> CPDAG on every labeled DAG up to ``max_d`` nodes against brute-force equivalence classes.

    See the module docstring for what counts as a disagreement.
    """
    sz, _, ex = check_start(settings)
    max_d = int(sz["max_d"])
    per_d = []
    for d in range(1, max_d + 1):
        per_d.append(_bruteforce_d(d, workers, ex))
        if log:
            log(f"cpdag_bruteforce d={d}: {per_d[-1]}")
    n = sum(r["dags"] for r in per_d)
    counts = ", ".join(str(r["dags"]) for r in per_d)
    classes = ", ".join(str(r["classes"]) for r in per_d)
    return make_result(settings, n_cases=n, examples=ex,
                   scale_description=f"all labeled DAGs, d = 1..{max_d}",
                   finding=f"DAG counts {counts} (A003024); classes {classes}",
                   details={"per_d": per_d})


# --- DAG -> CPDAG against causal-learn ---------------------------------------------------------------
def _causallearn_dag(adj: np.ndarray):
    from causallearn.graph.Dag import Dag
    from causallearn.graph.GraphNode import GraphNode

    nodes = [GraphNode(f"X{i + 1}") for i in range(adj.shape[0])]
    g = Dag(nodes)
    for i, j in zip(*np.nonzero(adj)):
        g.add_directed_edge(nodes[i], nodes[j])
    return g


@register("cpdag_causallearn", "DAG -> CPDAG on random DAGs", "causal-learn dag2cpdag")
def check_cpdag_causallearn(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check :func:`~heuresis.causal.graph.dag_to_cpdag` against causal-learn's ``dag2cpdag`` on random DAGs.

    See the module docstring for what counts as a disagreement.
    """
    from causallearn.utils.DAG2CPDAG import dag2cpdag

    sz, rng, ex = check_start(settings)
    n = 0
    for adj in random_dags(rng, sz["dags"], sz["d"]):
        ours = G.dag_to_cpdag(adj)
        theirs = Graph.from_causallearn(dag2cpdag(_causallearn_dag(adj)))
        n += 1
        if ours != theirs:
            ex.add(dict(dag=dag_edges(adj), d=adj.shape[0], ours=ours.to_lines(), causallearn=theirs.to_lines()))
    return make_result(settings, n_cases=n, examples=ex,
                   scale_description=f"{sz['dags']} random DAGs, d in {list(sz['d'])}",
                   finding=f"{n - ex.count}/{n} CPDAGs identical")
