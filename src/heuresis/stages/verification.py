"""Instrument verification (docs/design.md §8, Table 5): every instrument checked against an independent truth.

Each check is one registered function ``check(settings, workers=1, log=None) -> CheckResult``.
``settings`` is the config slice of that check (:func:`check_settings`): the scale name and its
sizes, the seed, alpha, the tolerances and — for checks that need data — the instance spec of
every family.  A result carries the number of cases, the number of disagreements with the
reference, pass/fail, the tolerance, a one-line finding, and up to ``max_examples`` examples of
disagreements (written as JSON files next to the record).  The checks:

``dsep``
    d-separation by the moralized ancestral graph (:func:`heuresis.causal.graph.d_separated`), by path
    blocking (:func:`heuresis.causal.graph.d_separated_bayes_ball`) and by ``networkx.is_d_separator``
    on random DAGs and random queries (singletons and sets for x and y); a disagreement is a
    query where the three answers are not all equal.
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
``shd_gadjid``
    :func:`heuresis.causal.metrics.shd` / :func:`~heuresis.causal.metrics.nshd` against ``gadjid.shd`` on
    random pairs of DAGs and CPDAGs.
``kci_causallearn``
    Our KCI against causal-learn's ``CIT(data, "kci")`` on random queries over generated
    instances: ``|p - p_cl| <= tolerances.kci_pvalue`` and no verdict flip at alpha.
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
``determinism``
    The same seeded PC-Fisher-z runs and a set of KCI p-values, each computed in a fresh child
    process for every combination of BLAS/OpenMP thread count (``OPENBLAS_NUM_THREADS``,
    ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) and ``PYTHONHASHSEED``: Fisher-z p-values and PC
    graphs must be bit-identical, KCI ``log10 p`` within ``tolerances.kci_log10p`` of the first
    run, with no verdict flip at alpha.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from heuresis.causal import graph as G
from heuresis.causal.graph import Graph

__all__ = [
    "A003024",
    "CHECKS",
    "ESSENTIAL_GRAPHS",
    "CheckResult",
    "check_settings",
    "config_errors",
    "enumerate_dags",
    "read_checks",
    "run_check",
    "table5",
    "write_check",
    "write_checks_table",
]

#: Labeled DAGs on d nodes, d = 0..6 (OEIS A003024).
A003024 = (1, 1, 3, 25, 543, 29281, 3781503)
#: Markov equivalence classes (essential graphs) of labeled DAGs on d nodes, d = 0..6
#: (Gillispie & Perlman 2002, Table 1).
ESSENTIAL_GRAPHS = (1, 1, 2, 11, 185, 8782, 1067825)
MAX_EXHAUSTIVE_D = 6

Log = Callable[[str], None]


# --- records --------------------------------------------------------------------------------
@dataclass
class CheckResult:
    """Outcome of one check: what was compared with what, at which scale, and what was found."""

    check: str
    title: str
    reference: str
    scale: str
    scale_description: str
    n_cases: int
    disagreements: int
    passed: bool
    tolerance: str
    finding: str
    examples: list[dict] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    runtime_s: float = 0.0


@dataclass(frozen=True)
class _Check:
    name: str
    title: str
    reference: str
    fn: Callable
    uses_instances: bool = False


CHECKS: dict[str, _Check] = {}


def _register(name: str, title: str, reference: str, uses_instances: bool = False):
    def deco(fn):
        CHECKS[name] = _Check(name, title, reference, fn, uses_instances)
        return fn

    return deco


class _Examples:
    """Counts disagreements and keeps the first ``cap`` of them as examples."""

    def __init__(self, cap: int) -> None:
        self.cap = int(cap)
        self.count = 0
        self.items: list[dict] = []

    def add(self, example: Mapping) -> None:
        self.count += 1
        if len(self.items) < self.cap:
            self.items.append(_jsonable(dict(example)))


def _jsonable(obj):
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def _rng(settings: Mapping) -> np.random.Generator:
    from heuresis.stages.instances import stable_key

    return np.random.default_rng(np.random.SeedSequence(entropy=int(settings["seed"]),
                                                        spawn_key=(stable_key(settings["check"]),)))


def _random_dag(rng: np.random.Generator, d: int, p: float) -> np.ndarray:
    """An Erdős–Rényi DAG over a random order (i -> j at [i, j])."""
    perm = rng.permutation(d)
    a = np.triu(rng.random((d, d)) < p, 1).astype(np.int8)
    return a[np.ix_(perm, perm)]


def _random_dags(rng: np.random.Generator, count: int, d_range: Sequence[int]):
    lo, hi = int(d_range[0]), int(d_range[1])
    for _ in range(int(count)):
        d = int(rng.integers(lo, hi + 1))
        yield _random_dag(rng, d, float(rng.uniform(0.1, 0.7)))


def _edges(adj: np.ndarray) -> list[str]:
    return Graph.from_dag(adj).to_lines()


def _result(settings: Mapping, *, n_cases: int, examples: _Examples, passed: bool | None = None,
            tolerance: str = "exact", finding: str = "", scale_description: str = "",
            details: Mapping | None = None, disagreements: int | None = None) -> CheckResult:
    info = CHECKS[settings["check"]]
    dis = examples.count if disagreements is None else int(disagreements)
    return CheckResult(check=info.name, title=info.title, reference=info.reference, scale=str(settings["scale"]),
                       scale_description=scale_description, n_cases=int(n_cases), disagreements=dis,
                       passed=(dis == 0) if passed is None else bool(passed), tolerance=tolerance,
                       finding=finding, examples=examples.items, details=_jsonable(dict(details or {})))


def _quiet_blas():
    """One BLAS thread for in-process runs (small matrices; see heuresis.causal.algorithms.base)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


# --- instances ----------------------------------------------------------------------------------
def _instances(settings: Mapping, per_family: int):
    """Generated instances (dev split, indices 0..per_family-1) of every configured family."""
    from heuresis.stages.instances import generate_instance

    for family, spec in settings["instances"].items():
        for index in range(int(per_family)):
            yield generate_instance(spec, family, "dev", index)


def _instance_size(settings: Mapping) -> str:
    spec = next(iter(settings["instances"].values()))
    return f"d={spec['instances']['d']}, n={spec['instances']['n']}"


# --- d-separation ----------------------------------------------------------------------------
@_register("dsep", "d-separation: moralized ancestral graph vs path blocking",
           "each other and networkx.is_d_separator")
def check_dsep(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check d-separation three ways (moralized ancestral graph, path blocking, networkx) on random DAGs and queries.

    See the module docstring for what counts as a disagreement.
    """
    import networkx as nx

    sz = settings["sizes"]
    rng = _rng(settings)
    ex = _Examples(settings["max_examples"])
    n = 0
    for adj in _random_dags(rng, sz["dags"], sz["d"]):
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
                ex.add(dict(dag=_edges(adj), d=d, x=x, y=y, z=z, moralized=moral, path_blocking=ball,
                            networkx=witness))
    return _result(settings, n_cases=n, examples=ex,
                   scale_description=f"{sz['dags']} random DAGs, d in {list(sz['d'])}, {sz['queries']} queries each",
                   finding=f"{n - ex.count}/{n} queries answered alike by all three")


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


def _bruteforce_d(d: int, workers: int, ex: _Examples) -> dict:
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
        ex.add(dict(d=d, dag=_edges(_decode(codes[[k]], d)[0]), class_size=len(members),
                    ours=Graph(_decode(ours[[k]], d)[0]).to_lines(),
                    expected=Graph(_decode(expected[[k]], d)[0]).to_lines(),
                    class_members=[_edges(m) for m in _decode(members[:12], d)]))
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


@_register("cpdag_bruteforce", "DAG -> CPDAG, exhaustive over all labeled DAGs",
           "brute-force Markov equivalence classes; OEIS A003024")
def check_cpdag_bruteforce(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check DAG -> CPDAG on every labeled DAG up to ``max_d`` nodes against brute-force equivalence classes.

    See the module docstring for what counts as a disagreement.
    """
    max_d = int(settings["sizes"]["max_d"])
    ex = _Examples(settings["max_examples"])
    per_d = []
    for d in range(1, max_d + 1):
        per_d.append(_bruteforce_d(d, workers, ex))
        if log:
            log(f"cpdag_bruteforce d={d}: {per_d[-1]}")
    n = sum(r["dags"] for r in per_d)
    counts = ", ".join(str(r["dags"]) for r in per_d)
    classes = ", ".join(str(r["classes"]) for r in per_d)
    return _result(settings, n_cases=n, examples=ex,
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


@_register("cpdag_causallearn", "DAG -> CPDAG on random DAGs", "causal-learn dag2cpdag")
def check_cpdag_causallearn(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check :func:`~heuresis.causal.graph.dag_to_cpdag` against causal-learn's ``dag2cpdag`` on random DAGs.

    See the module docstring for what counts as a disagreement.
    """
    from causallearn.utils.DAG2CPDAG import dag2cpdag

    sz = settings["sizes"]
    rng = _rng(settings)
    ex = _Examples(settings["max_examples"])
    n = 0
    for adj in _random_dags(rng, sz["dags"], sz["d"]):
        ours = G.dag_to_cpdag(adj)
        theirs = Graph.from_causallearn(dag2cpdag(_causallearn_dag(adj)))
        n += 1
        if ours != theirs:
            ex.add(dict(dag=_edges(adj), d=adj.shape[0], ours=ours.to_lines(), causallearn=theirs.to_lines()))
    return _result(settings, n_cases=n, examples=ex,
                   scale_description=f"{sz['dags']} random DAGs, d in {list(sz['d'])}",
                   finding=f"{n - ex.count}/{n} CPDAGs identical")


# --- oracle PC -----------------------------------------------------------------------------------------
@_register("oracle_pc", "Oracle PC (d-separation as the CI test)", "true CPDAG (dag_to_cpdag)")
def check_oracle_pc(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check that PC with the d-separation oracle as its CI test returns the true CPDAG on random DAGs.

    See the module docstring for what counts as a disagreement.
    """
    from heuresis.causal.algorithms.pc import DSeparationOracle, pc

    sz = settings["sizes"]
    rng = _rng(settings)
    ex = _Examples(settings["max_examples"])
    n = 0
    for adj in _random_dags(rng, sz["dags"], sz["d"]):
        d = adj.shape[0]
        res = pc(np.zeros((1, d)), DSeparationOracle(adj), alpha=float(settings["alpha"]))
        truth = G.dag_to_cpdag(adj)
        n += 1
        if res.graph != truth:
            ex.add(dict(dag=_edges(adj), d=d, pc=res.graph.to_lines(), true_cpdag=truth.to_lines(),
                        same_skeleton=bool(np.array_equal(res.skeleton.skeleton(), truth.skeleton()))))
    return _result(settings, n_cases=n, examples=ex,
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


@_register("pc_vs_causallearn", "PC-stable (Fisher-z, KCI) on generated instances",
           "causal-learn pc(stable=True)", uses_instances=True)
def check_pc_vs_causallearn(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check our PC-stable (Fisher-z, KCI) against causal-learn's on generated instances: skeleton, sepsets, CPDAG.

    See the module docstring for what counts as a disagreement.
    """
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    from heuresis.causal.algorithms.pc import pc
    from heuresis.causal.ci import make_ci_test

    sz = settings["sizes"]
    alpha = float(settings["alpha"])
    ex = _Examples(settings["max_examples"])
    n = structural = cpdag_same = 0
    per_test: dict[str, list[int]] = {}
    for test in ("fisherz", "kci"):
        per_family = int(sz.get(test, 0))
        for inst in _instances(settings, per_family):
            X = inst.data
            d = X.shape[1]
            with _quiet_blas(), warnings.catch_warnings():
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
                            true_dag=_edges(inst.dag)))
            if log:
                log(f"pc_vs_causallearn {test} {inst.id}: skeleton {'=' if skel_same else '!='}, "
                    f"{len(sep_diff)} sepset differences, CPDAG {'=' if graph_same else '!='}")
    rate = cpdag_same / n if n else 1.0
    floor = float(settings["tolerances"]["pc_cpdag_agreement"])
    parts = [f"{t}: CPDAG {c[1]}/{c[0]}, skeleton/sepset mismatches {c[2]}" for t, c in per_test.items()]
    return _result(settings, n_cases=n, examples=ex, disagreements=structural,
                   passed=structural == 0 and rate >= floor,
                   tolerance=f"skeleton, sepsets exact; CPDAG agreement at least {floor:g}",
                   scale_description=(f"{sz.get('fisherz', 0)} Fisher-z + {sz.get('kci', 0)} KCI instances per "
                                      f"family x {len(settings['instances'])} families ({_instance_size(settings)})"),
                   finding="; ".join(parts) + f" (CPDAG agreement {rate:.1%})",
                   details={"cpdag_agreement": rate, "per_test": per_test, "examples_total": ex.count})


# --- SHD against gadjid ------------------------------------------------------------------------------------
@_register("shd_gadjid", "SHD and nSHD", "gadjid.shd")
def check_shd_gadjid(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check SHD and nSHD against ``gadjid.shd`` on random pairs of DAGs and CPDAGs.

    See the module docstring for what counts as a disagreement.
    """
    import gadjid

    from heuresis.causal.metrics import nshd, shd

    sz = settings["sizes"]
    rng = _rng(settings)
    ex = _Examples(settings["max_examples"])
    n = 0
    lo, hi = (int(v) for v in sz["d"])
    for _ in range(int(sz["pairs"])):
        d = int(rng.integers(lo, hi + 1))
        graphs = []
        for _side in range(2):
            adj = _random_dag(rng, d, float(rng.uniform(0.1, 0.7)))
            graphs.append(G.dag_to_cpdag(adj) if rng.random() < 0.5 else Graph.from_dag(adj))
        a, b = graphs
        normalized, count = gadjid.shd(a.to_gadjid(), b.to_gadjid())
        ours, ours_n = shd(a, b), nshd(a, b)
        n += 1
        if ours != count or abs(ours_n - normalized) > 1e-12:
            ex.add(dict(d=d, a=a.to_lines(), b=b.to_lines(), ours=[ours, ours_n], gadjid=[int(count), normalized]))
    return _result(settings, n_cases=n, examples=ex, tolerance="SHD exact; nSHD within 1e-12",
                   scale_description=f"{sz['pairs']} pairs of random DAGs/CPDAGs, d in {list(sz['d'])}",
                   finding=f"{n - ex.count}/{n} pairs identical")


# --- KCI against causal-learn --------------------------------------------------------------------------------
def _random_queries(rng: np.random.Generator, d: int, count: int, max_cond: int) -> list[tuple[int, int, list[int]]]:
    out = []
    for _ in range(int(count)):
        k = int(rng.integers(0, min(max_cond, d - 2) + 1))
        v = [int(t) for t in rng.choice(d, k + 2, replace=False)]
        out.append((v[0], v[1], sorted(v[2:])))
    return out


@_register("kci_causallearn", "KCI p-values", "causal-learn CIT(data, 'kci')", uses_instances=True)
def check_kci_causallearn(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check our KCI p-values against causal-learn's on random queries over generated instances.

    See the module docstring for what counts as a disagreement.
    """
    from causallearn.utils.cit import CIT

    from heuresis.causal.ci import make_ci_test

    sz = settings["sizes"]
    rng = _rng(settings)
    alpha = float(settings["alpha"])
    tol = float(settings["tolerances"]["kci_pvalue"])
    ex = _Examples(settings["max_examples"])
    n = flips = 0
    worst = 0.0
    for inst in _instances(settings, sz["instances"]):
        X = inst.data
        ours = make_ci_test("kci", X)
        with _quiet_blas(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = CIT(X, "kci")
            for x, y, S in _random_queries(rng, X.shape[1], sz["tests"], sz["max_cond"]):
                p_ours, p_ref = float(ours.pvalue(x, y, S)), float(ref(x, y, S))
                diff = abs(p_ours - p_ref)
                worst = max(worst, diff)
                flip = (p_ours > alpha) != (p_ref > alpha)
                flips += flip
                n += 1
                if diff > tol or flip:
                    ex.add(dict(instance=inst.id, x=f"X{x + 1}", y=f"X{y + 1}", S=[f"X{s + 1}" for s in S],
                                ours=p_ours, causallearn=p_ref, abs_difference=diff, verdict_flip=bool(flip)))
    return _result(settings, n_cases=n, examples=ex, tolerance=f"p within {tol:g}; no verdict flip",
                   scale_description=(f"{sz['tests']} random tests (set size up to {sz['max_cond']}) on {sz['instances']} "
                                      f"instance(s) per family ({_instance_size(settings)})"),
                   finding=f"largest p difference {worst:.1e}; {flips} verdict flips at alpha = {alpha:g}",
                   details={"max_abs_difference": worst, "verdict_flips": flips})


# --- invariances ----------------------------------------------------------------------------------------------
@_register("invariance_no_repair", "Invariance: 'no repair' equals PC",
           "PC's own output", uses_instances=True)
def check_invariance_no_repair(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check that the oracle repair with no wrong deletion, and restoring no pair, return PC's graph.

    See the module docstring for what counts as a disagreement.
    """
    from heuresis.causal.algorithms.pc import DSeparationOracle, label_deletions, oracle_repair, pc
    from heuresis.causal.ci import make_ci_test
    from heuresis.stages.headroom import restore_pairs

    sz = settings["sizes"]
    alpha = float(settings["alpha"])
    ex = _Examples(settings["max_examples"])
    n = 0
    for inst in _instances(settings, sz["instances"]):
        X = inst.data
        d = X.shape[1]
        with _quiet_blas():
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
    return _result(settings, n_cases=n, examples=ex,
                   scale_description=(f"{sz['instances']} instances per family x 3 cases "
                                      f"({_instance_size(settings)})"),
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


@_register("invariance_relabel", "Invariance: PC under relabeled columns",
           "the permuted output of the unpermuted run", uses_instances=True)
def check_invariance_relabel(settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Check that PC on column-permuted data returns the permuted skeleton, separating sets and graph.

    See the module docstring for what counts as a disagreement.
    """
    from heuresis.causal.algorithms.pc import DSeparationOracle, pc
    from heuresis.causal.ci import make_ci_test

    sz = settings["sizes"]
    rng = _rng(settings)
    alpha = float(settings["alpha"])
    ex = _Examples(settings["max_examples"])
    n = orient_diff = explained = 0
    runs = []
    for inst in _instances(settings, sz["instances"]):
        runs.append((inst.id, inst.data, None))
    for k, adj in enumerate(_random_dags(rng, sz["dags"], sz["d"])):
        runs.append((f"random-dag-{k:04d}", None, adj))
    for run_id, X, adj in runs:
        d = X.shape[1] if X is not None else adj.shape[0]  # type: ignore[attr-defined]
        perm = rng.permutation(d)
        with _quiet_blas():
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
                ex.items.append(_jsonable(example))  # kept for inspection, not counted
    return _result(settings, n_cases=n, examples=ex,
                   tolerance="skeleton, sepsets exact; CPDAG exact unless colliders conflict",
                   scale_description=(f"Fisher-z PC on {sz['instances']} instances per family "
                                      f"({_instance_size(settings)}) + oracle PC on {sz['dags']} random DAGs"),
                   finding=(f"skeleton and sepsets equivariant; CPDAG differs on {orient_diff}/{n} runs, "
                            f"{explained} of them with conflicting colliders (order-dependent by design)"),
                   details={"cpdag_differences": orient_diff, "explained_by_conflicts": explained})


# --- determinism -----------------------------------------------------------------------------------------------
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _determinism_payload(settings: Mapping) -> dict:
    """What every child process computes: instances, alpha and the KCI queries (fixed here)."""
    sz = settings["sizes"]
    rng = _rng(settings)
    families = list(settings["instances"])
    picks = [(families[k % len(families)], k // len(families)) for k in range(int(sz["instances"]))]
    d = int(next(iter(settings["instances"].values()))["instances"]["d"])
    per = max(1, math.ceil(int(sz["kci_tests"]) / max(len(picks), 1)))
    queries = {f"{f}/{i}": _random_queries(rng, d, per, 3) for f, i in picks}
    return dict(instances={f: settings["instances"][f] for f, _ in picks}, picks=picks, queries=queries,
                alpha=float(settings["alpha"]))


def _determinism_child() -> None:
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
    code = "from heuresis.stages.verification import _determinism_child; _determinism_child()"
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), capture_output=True, text=True,
                          env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"determinism child (threads={threads}, PYTHONHASHSEED={hash_seed}) failed:\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def _log10(p: float) -> float:
    return math.log10(max(p, 1e-300))


@_register("determinism", "Determinism across BLAS threads and hash seeds",
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
    ex = _Examples(settings["max_examples"])
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
    return _result(settings, n_cases=n, examples=ex,
                   tolerance=f"Fisher-z bit-identical; KCI log10 p within {tol:g}; no flips",
                   scale_description=(f"{len(combos)} child runs (threads {list(sz['thread_counts'])} x "
                                      f"PYTHONHASHSEED {list(sz['hash_seeds'])}); {len(payload['picks'])} PC-Fisher-z "
                                      f"runs + {n_kci} KCI tests each ({_instance_size(settings)})"),
                   finding=(f"Fisher-z: {fz_mismatch} runs not bit-identical; KCI largest log10 p difference {worst:.1e}, "
                            f"{flips} verdict flips"),
                   details={"combos": combos, "max_abs_log10_difference": worst, "fisherz_mismatches": fz_mismatch,
                            "kci_outside_tolerance": kci_out, "verdict_flips": flips,
                            "blas_threads_reported": [r["blas_threads"] for r in runs]})


# --- config, running, writing ----------------------------------------------------------------------------------
def check_settings(config: Mapping, check: str) -> dict:
    """Return the config slice one check depends on.

    It is the workflow's ``params`` of the check, so editing another check's sizes, or an
    unrelated section, does not rerun this one.
    """
    if check not in CHECKS:
        raise ValueError(f"unknown verification check {check!r}; known: {list(CHECKS)}")
    v = config["verification"]
    scale = v["scale"]
    if scale not in v["scales"]:
        raise ValueError(f"verification.scale {scale!r} is not one of verification.scales: {sorted(v['scales'])}")
    out = {"check": check, "scale": scale, "seed": int(v["seed"]), "alpha": float(v["alpha"]),
           "max_examples": int(v["max_examples"]), "tolerances": dict(v["tolerances"]),
           "sizes": dict(v["scales"][scale][check])}
    if CHECKS[check].uses_instances:
        from heuresis.stages.instances import instance_spec

        out["instances"] = {f: instance_spec(config, f) for f in config["families"]}
    return out


def run_check(check: str, settings: Mapping, workers: int = 1, log: Log | None = None) -> CheckResult:
    """Run one check with its settings (:func:`check_settings`) and time it."""
    if check not in CHECKS:
        raise ValueError(f"unknown verification check {check!r}; known: {list(CHECKS)}")
    settings = {**settings, "check": check}
    t0 = time.perf_counter()
    result = CHECKS[check].fn(settings, workers=max(1, int(workers)), log=log)
    result.runtime_s = time.perf_counter() - t0
    return result


def write_check(result: CheckResult, record_path: str | Path, examples_dir: str | Path,
                meta: Mapping[str, str] | None = None) -> None:
    """Write the one-row record (schema ``VERIFICATION_CHECKS``) and one JSON file per example."""
    import pyarrow as pa

    from heuresis.artifacts.io import atomic_write_text, write_table
    from heuresis.artifacts.schemas import VERIFICATION_CHECKS

    examples_dir = Path(examples_dir)
    if examples_dir.exists():
        shutil.rmtree(examples_dir)
    examples_dir.mkdir(parents=True)
    for k, example in enumerate(result.examples):
        atomic_write_text(examples_dir / f"{result.check}-{k:03d}.json", json.dumps(example, indent=2, sort_keys=True))
    row = dict(check=result.check, title=result.title, reference=result.reference, scale=result.scale,
               scale_description=result.scale_description, n_cases=result.n_cases,
               disagreements=result.disagreements, passed=result.passed, required=None, tolerance=result.tolerance,
               finding=result.finding, n_examples=len(result.examples), examples_dir=str(examples_dir),
               runtime_s=float(result.runtime_s), details=json.dumps(result.details, sort_keys=True))
    table = pa.table({c: [row[c]] for c in VERIFICATION_CHECKS.schema.names}, schema=VERIFICATION_CHECKS.schema)
    write_table(table, record_path, VERIFICATION_CHECKS, meta)


def write_checks_table(checks, path: str | Path, meta: Mapping[str, str] | None = None) -> None:
    """Write all check records (with ``required`` set) as ``checks.parquet``."""
    import pyarrow as pa

    from heuresis.artifacts.io import write_table
    from heuresis.artifacts.schemas import VERIFICATION_CHECKS

    cols = VERIFICATION_CHECKS.schema.names
    table = pa.Table.from_pandas(checks[cols], schema=VERIFICATION_CHECKS.schema, preserve_index=False)
    write_table(table, path, VERIFICATION_CHECKS, meta)


def read_checks(paths: Sequence[str | Path]):
    """The records of several checks as one DataFrame, in registry order."""
    import pandas as pd

    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import VERIFICATION_CHECKS

    df = pd.concat([read_table(p, VERIFICATION_CHECKS).to_pandas() for p in paths], ignore_index=True)
    rank = {name: k for k, name in enumerate(CHECKS)}
    return df.sort_values("check", key=lambda s: s.map(rank)).reset_index(drop=True)


def table5(checks, required: Sequence[str]):
    """Table 5 from the check records: ``(numbers, display, highlight, failed_required)``.

    ``highlight`` marks failing rows (red in LaTeX); ``failed_required`` names the failing checks
    that the config requires to pass.
    """
    import pandas as pd

    required = set(required)  # type: ignore[assignment]
    numbers = checks.copy()
    numbers["required"] = numbers["check"].isin(required).astype(bool)

    def verdict(row) -> str:
        if row.passed:
            return "pass"
        return "FAIL" if row.required else "FAIL (not required)"

    display = pd.DataFrame({
        "Check": numbers["title"],
        "Reference": numbers["reference"],
        "Scale": [f"{r.scale}: {r.scale_description}" for r in numbers.itertuples()],
        "Cases": numbers["n_cases"].map(lambda v: f"{v:,}"),
        "Disagreements": numbers["disagreements"].map(lambda v: f"{v:,}"),
        "Tolerance": numbers["tolerance"],
        "Finding": numbers["finding"],
        "Result": [verdict(r) for r in numbers.itertuples()],
    })
    highlight = (~numbers["passed"]).tolist()
    failed_required = numbers.loc[~numbers["passed"] & numbers["required"], "check"].tolist()
    return numbers, display, highlight, failed_required


# --- config checks (heuresis.config.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of ``verification``: the chosen scale exists; node-count ranges are ordered; determinism compares runs."""
    from heuresis.config.loading import range_errors

    msgs: list[str] = []
    v = config.get("verification")
    if not v:
        return msgs
    if v["scale"] not in v["scales"]:
        msgs.append(f"config key verification.scale: {v['scale']!r} is not one of verification.scales "
                    f"({sorted(v['scales'])})")
    for name, sizes in v["scales"].items():
        for check, spec in sizes.items():
            key = f"verification.scales.{name}.{check}"
            if "d" in spec:   # integers in [2, 1000]: the schema's node_range
                msgs.extend(range_errors(f"{key}.d", spec["d"]))
        det = sizes.get("determinism", {})
        if det and len(det["thread_counts"]) * len(det["hash_seeds"]) < 2:
            msgs.append(f"config key verification.scales.{name}.determinism: one thread count and one hash seed "
                        f"make a single run, nothing to compare")
    return msgs
