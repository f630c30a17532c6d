"""PC-stable with a deletion log (docs/design.md §4.2).

The decision procedure is that of causal-learn's
``pc(data, alpha, indep_test, stable=True, uc_rule=0, uc_priority=2)`` (version 0.1.4.x),
re-implemented here so that every CI test and every deletion is recorded.

Skeleton (level ``l = 0, 1, 2, ...``)
    A level runs while some node has at least ``l + 1`` neighbours.  The adjacencies are frozen
    at the start of the level.  For ``x = 0..d-1``, for every neighbour ``y`` of ``x`` (ascending),
    every ``S`` in ``combinations(adj(x) \\ {y}, l)`` (lexicographic) is tested; then the same
    pair is visited again from ``y``'s side with ``S`` drawn from ``adj(y) \\ {x}``.  causal-learn
    does **not** stop at the first separating set: in stable mode it runs every candidate set of
    the level from both sides and records, per side, the *union* of all sets with ``p > alpha``.
    We do the same, except that a set already tested for the pair at this level (a subset of
    both neighbourhoods) is not tested again (causal-learn's CIT answers it from its cache).
    All pairs with some ``p > alpha`` are deleted together at the end of the level.

Separating sets
    causal-learn stores in ``cg.sepset[x, y]`` a list of one or two tuples (one per side that
    ran after the pair was marked for removal), each the union of the separating sets found on
    that side; the collider rule asks whether the middle node lies in *any* of them.  Hence our
    ``sepsets[(x, y)]`` is the sorted union of every conditioning set of the deletion level with
    ``p > alpha`` (from both sides): the set the collider rule reads.  ``separating_sets`` keeps
    the individual sets in test order, and the deletion log records the *first* one found.

Orientation
    * Unshielded triples ``x - z - y`` (``x < y``) in causal-learn's enumeration order (middle
      node, then x, then y ascending): if ``z`` is in no separating set of ``(x, y)`` and neither
      ``z -> x`` nor ``z -> y`` is already oriented ("prioritise existing colliders"), orient
      ``x -> z <- y``.
    * Meek's R1, R2, R3 swept in causal-learn's order over the unshielded triples, triangles
      and kites of the graph (enumerated once), repeated until nothing changes.  An orientation
      that would close a directed cycle is skipped.  (causal-learn tests this with an
      incrementally maintained ancestor matrix that can miss some ancestors; we use exact
      reachability, so on rare inconsistent patterns the outputs may differ.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from heuresis.causal.grades import DEFAULT_GRADES, grade_of, validate_grades
from heuresis.causal.graph import Graph, Relation, d_separated, has_directed_path

__all__ = [
    "CIRecord",
    "DSeparationOracle",
    "Deletion",
    "PCResult",
    "label_deletions",
    "oracle_repair",
    "orient",
    "pc",
]

Pair = tuple[int, int]


@dataclass(frozen=True)
class CIRecord:
    """One CI test PC ran: ``x _||_ y | sepset`` with its p-value, at level ``len(sepset)``."""

    x: int
    y: int
    sepset: tuple[int, ...]
    pvalue: float
    level: int


@dataclass(frozen=True)
class Deletion:
    """One edge deletion: the pair (``x < y``), the first separating set found, and its test."""

    x: int
    y: int
    sepset: tuple[int, ...]
    test: str
    pvalue: float
    level: int
    grade: str

    @property
    def pair(self) -> Pair:
        """The deleted pair as ``(min, max)``, the key of :attr:`PCResult.sepsets`."""
        return (min(self.x, self.y), max(self.x, self.y))


@dataclass
class PCResult:
    """Output of :func:`pc`.

    ``sepsets`` is keyed ``(min, max)`` and holds, for every deleted pair, the union of the
    separating sets found at its deletion level (the set the collider rule reads);
    ``separating_sets`` lists those sets individually, in test order.
    """

    graph: Graph
    skeleton: Graph
    sepsets: dict[Pair, tuple[int, ...]]
    deletions: list[Deletion]
    tests: list[CIRecord]
    n_tests: int
    separating_sets: dict[Pair, list[tuple[int, ...]]] = field(default_factory=dict)
    alpha: float = 0.05
    test: str = ""


class DSeparationOracle:
    """A CI "test" answering from a DAG: p = 1.0 if d-separated, else 0.0 (oracle PC)."""

    name = "dsep"

    def __init__(self, dag: np.ndarray) -> None:
        self.dag = (np.asarray(dag) != 0).astype(np.int8)
        if self.dag.ndim != 2 or self.dag.shape[0] != self.dag.shape[1]:
            raise ValueError(f"DSeparationOracle needs a square DAG matrix, got shape {self.dag.shape}")
        self.n_vars = int(self.dag.shape[0])
        self.n_tests = 0

    def pvalue(self, x: int, y: int, S: Sequence[int] = ()) -> float:
        """Return 1.0 if ``x`` and ``y`` are d-separated given ``S`` in the DAG, else 0.0 (and count the test)."""
        self.n_tests += 1
        return 1.0 if d_separated(self.dag, [x], [y], S) else 0.0


# --- skeleton -----------------------------------------------------------------------------
def _level_queries(nbrs: list[list[int]], level: int):
    """The tests ``(x, y, S)`` of one level, in causal-learn's order, each pair and set once."""
    tested: dict[Pair, set] = defaultdict(set)
    for x in range(len(nbrs)):
        if len(nbrs[x]) - 1 < level:
            continue
        for y in nbrs[x]:
            seen = tested[(x, y) if x < y else (y, x)]
            others = [v for v in nbrs[x] if v != y]
            for S in combinations(others, level):  # sorted tuples, lexicographic
                if S not in seen:
                    seen.add(S)
                    yield x, y, S


def _skeleton(d: int, ci_test, alpha: float, table) -> tuple:
    """Level-wise PC-stable skeleton search; see the module docstring for the exact order."""
    name = str(getattr(ci_test, "name", type(ci_test).__name__))
    adj = ~np.eye(d, dtype=bool)
    tests: list[CIRecord] = []
    deletions: list[Deletion] = []
    separating: dict[Pair, list[tuple[int, ...]]] = {}
    level = 0
    while d > 0 and int(adj.sum(axis=1).max()) - 1 >= level:
        nbrs = [[int(v) for v in np.flatnonzero(adj[x])] for x in range(d)]  # frozen for the level
        queries = list(_level_queries(nbrs, level))
        prefetch = getattr(ci_test, "prefetch", None)
        if callable(prefetch):  # every test of the level is known now: let the test run them side by side
            prefetch(queries)
        found: dict[Pair, list[tuple[int, ...]]] = {}  # pairs to delete at the end of the level
        for x, y, S in queries:
            pair = (x, y) if x < y else (y, x)
            p = float(ci_test.pvalue(x, y, S))
            tests.append(CIRecord(x, y, S, p, level))
            if p > alpha:
                if pair not in found:
                    found[pair] = []
                    deletions.append(Deletion(pair[0], pair[1], S, name, p, level, grade_of(p, table)))
                found[pair].append(S)
        for (a, b), sets in found.items():
            adj[a, b] = adj[b, a] = False
            separating[(a, b)] = sets
        level += 1
    sepsets = {pair: tuple(sorted({v for S in sets for v in S})) for pair, sets in separating.items()}
    return adj, sepsets, separating, deletions, tests


# --- orientation --------------------------------------------------------------------------
def _adjacency_list(m: np.ndarray) -> list[Pair]:
    """Ordered adjacencies ``(a, b)`` (each pair in both directions) in causal-learn's order.

    causal-learn's ``find_adj`` lists tails then arrowheads of its endpoint matrix; in our mark
    matrix a tail at ``r`` on edge r-c is ``m[r, c] = 1`` and an arrowhead at ``r`` is
    ``m[r, c] = 0, m[c, r] = 1``.  Entries are scanned row-major and reported as ``(c, r)``.
    """
    tails = np.argwhere(m == 1)
    heads = np.argwhere((m == 0) & (m.T == 1))
    return [(int(c), int(r)) for r, c in tails] + [(int(c), int(r)) for r, c in heads]


def _triples(m: np.ndarray, shielded: bool) -> list[tuple[int, int, int]]:
    """Triples ``(a, b, c)`` with a-b, b-c adjacent, a != c, and a-c adjacent iff ``shielded``.

    Order as causal-learn's ``permutations(find_adj(), 2)`` filter.
    """
    adjl = _adjacency_list(m)
    skel = (m | m.T).astype(bool)
    by_first: dict[int, list[int]] = defaultdict(list)
    for a, b in adjl:
        by_first[a].append(b)
    out = []
    for a, b in adjl:
        for c in by_first[b]:
            if c != a and bool(skel[a, c]) == shielded:
                out.append((a, b, c))
    return out


def _kites(m: np.ndarray, triangles: list[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Kites ``(i, j, k, l)``: triangles (i, j, l) and (i, k, l), j < k, j and k non-adjacent."""
    skel = (m | m.T).astype(bool)
    by_ends: dict[Pair, list[int]] = defaultdict(list)
    for i, j, l in triangles:
        by_ends[(i, l)].append(j)
    out = []
    for i, j, l in triangles:
        for k in by_ends[(i, l)]:
            if j < k and not skel[j, k]:
                out.append((i, j, k, l))
    return out


def _reaches(m: np.ndarray, src: int, dst: int) -> bool:
    """Whether a directed path ``src -> ... -> dst`` exists in mark matrix ``m``."""
    return has_directed_path((m == 1) & (m.T == 0), src, dst)


def orient(skeleton: Graph, sepsets: dict[Pair, Sequence[int]]) -> Graph:
    """Collider orientation (priority to existing colliders) then Meek R1-R3, as causal-learn.

    ``sepsets[(a, b)]`` (``a < b``) must be given for every non-adjacent pair that forms an
    unshielded triple; its members block the collider at the middle node.
    """
    m = (skeleton.skeleton()).astype(np.int8)  # all undirected

    def directed(a: int, b: int) -> bool:
        return m[a, b] == 1 and m[b, a] == 0

    def undirected(a: int, b: int) -> bool:
        return m[a, b] == 1 and m[b, a] == 1

    # unshielded colliders
    for x, z, y in _triples(m, shielded=False):
        if x >= y:
            continue
        if z in sepsets[(x, y)]:
            continue
        if not directed(z, x) and not directed(z, y):
            m[x, z], m[z, x] = 1, 0
            m[y, z], m[z, y] = 1, 0

    # Meek R1-R3 over structures enumerated once on the collider-oriented graph
    ut = _triples(m, shielded=False)
    tri = _triples(m, shielded=True)
    kites = _kites(m, tri)
    changed = True
    while changed:
        changed = False
        for i, j, k in ut:  # R1: i -> j - k, i, k non-adjacent  =>  j -> k
            if directed(i, j) and undirected(j, k) and not _reaches(m, k, j):
                m[k, j] = 0
                changed = True
        for i, j, k in tri:  # R2: i -> j -> k, i - k  =>  i -> k
            if directed(i, j) and directed(j, k) and undirected(i, k) and not _reaches(m, k, i):
                m[k, i] = 0
                changed = True
        for i, j, k, l in kites:  # R3: i - j, i - k, j -> l <- k, i - l  =>  i -> l
            if (undirected(i, j) and undirected(i, k) and directed(j, l) and directed(k, l)
                    and undirected(i, l) and not _reaches(m, l, i)):
                m[l, i] = 0
                changed = True
    return Graph(m, skeleton.names)


# --- PC -----------------------------------------------------------------------------------
def pc(data: np.ndarray, ci_test, alpha: float = 0.05, grades=DEFAULT_GRADES, orient: bool = True) -> PCResult:
    """PC-stable with a deletion log.

    Parameters
    ----------
    data : array (n, d)
        The data matrix; only its number of columns is used (``ci_test`` holds the data).
    ci_test : object with ``pvalue(x, y, S) -> float`` and ``name``
        The CI test (e.g. ``heuresis.causal.ci.make_ci_test("fisherz", data)`` or
        :class:`DSeparationOracle`).
    alpha : float in (0, 1)
        Level: an edge is deleted when some test returns ``p > alpha``.
    grades : grade table (see :mod:`heuresis.causal.grades`), used for the deletion log.
    orient : bool
        If False, ``graph`` is the undirected skeleton.
    """
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    shape = np.shape(data)
    if len(shape) != 2:
        raise ValueError(f"data must be a 2-D array (n, d), got shape {shape}")
    d = int(shape[1])
    table = validate_grades(grades)
    adj, sepsets, separating, deletions, tests = _skeleton(d, ci_test, float(alpha), table)
    skeleton = Graph(adj.astype(np.int8))
    graph = _orient(skeleton, sepsets) if orient else skeleton.copy()
    return PCResult(graph=graph, skeleton=skeleton, sepsets=sepsets, deletions=deletions, tests=tests,
                    n_tests=len(tests), separating_sets=separating, alpha=float(alpha),
                    test=str(getattr(ci_test, "name", type(ci_test).__name__)))


_orient = orient  # `pc`'s parameter `orient` shadows the function inside `pc`


# --- hidden truth -------------------------------------------------------------------------
def label_deletions(deletions: Sequence[Deletion], true_dag: np.ndarray) -> list[bool]:
    """Truth label of each deletion: True = wrong (x and y adjacent in the true DAG)."""
    dag = np.asarray(getattr(true_dag, "amat", true_dag)) != 0
    return [bool(dag[dl.x, dl.y] or dag[dl.y, dl.x]) for dl in deletions]


def oracle_repair(result: PCResult, true_dag) -> Graph:
    """docs/design.md §4.3: restore, as undirected edges, every pair PC wrongly deleted; nothing else."""
    g = result.graph.copy()
    for dl, wrong in zip(result.deletions, label_deletions(result.deletions, true_dag)):
        if wrong:
            g.set(dl.x, dl.y, Relation.UNDIRECTED)
    return g
