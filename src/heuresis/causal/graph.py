"""Graphs over the columns X1..Xd with one relation per pair.

Every graph in Heuresis (true DAG, CPDAG, algorithm output, an agent's working graph) is a
:class:`Graph`: a square ``int8`` *mark matrix* ``amat`` over d nodes where

* ``amat[i, j] == 1 and amat[j, i] == 0`` means ``i -> j``;
* ``amat[i, j] == amat[j, i] == 1`` means ``i -- j`` (undirected);
* ``amat[i, j] == amat[j, i] == 0`` means no edge.

So each unordered pair has exactly one of the four relations of docs/design.md §5.1: none, undirected,
i->j or j->i.  Conversions exist to and from plain DAG adjacency matrices, gadjid's encoding and
causal-learn's ``GeneralGraph``.

The module also holds the graph algorithms every stage uses: d-separation (two independent
implementations, docs/design.md §8), DAG -> CPDAG, and Meek's orientation rules.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

__all__ = [
    "Graph",
    "Relation",
    "column_names",
    "d_separated",
    "d_separated_bayes_ball",
    "dag_to_cpdag",
    "has_directed_path",
    "is_dag",
    "meek_closure",
    "topological_order",
    "v_structures",
]


class Relation(IntEnum):
    """Relation of an ordered pair (i, j) in a graph."""

    NONE = 0
    UNDIRECTED = 1
    FORWARD = 2  # i -> j
    BACKWARD = 3  # j -> i


def column_names(d: int) -> list[str]:
    """Agent-visible column names ``X1..Xd``."""
    return [f"X{k + 1}" for k in range(d)]


def _as_marks(amat: np.ndarray) -> np.ndarray:
    a = np.asarray(amat)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"a graph needs a square matrix, got shape {a.shape}")
    if not np.isin(a, (0, 1)).all():
        bad = sorted(set(np.unique(a).tolist()) - {0, 1})
        raise ValueError(f"mark matrix entries must be 0 or 1, found {bad}")
    if np.any(np.diag(a) != 0):
        raise ValueError("a graph may not have self-loops (non-zero diagonal)")
    return a.astype(np.int8, copy=True)


@dataclass(eq=False)
class Graph:
    """A graph with one :class:`Relation` per pair of nodes.

    Parameters
    ----------
    amat : array (d, d) of 0/1
        Mark matrix: ``amat[i, j] = 1`` says there is a mark from i towards j; an undirected edge
        has both marks.
    names : sequence of str, optional
        Node names; default ``X1..Xd``.
    """

    amat: np.ndarray
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.amat = _as_marks(self.amat)
        if not self.names:
            self.names = tuple(column_names(self.d))
        self.names = tuple(self.names)
        if len(self.names) != self.d:
            raise ValueError(f"{len(self.names)} names for a graph over {self.d} nodes")

    # --- construction -------------------------------------------------------------------
    @classmethod
    def empty(cls, d: int, names: Sequence[str] = ()) -> Graph:
        """Graph over ``d`` nodes with no edge."""
        return cls(np.zeros((d, d), dtype=np.int8), tuple(names))

    @classmethod
    def complete(cls, d: int, names: Sequence[str] = ()) -> Graph:
        """Complete undirected graph (the start of PC and of an unguided episode)."""
        return cls(1 - np.eye(d, dtype=np.int8), tuple(names))

    @classmethod
    def from_dag(cls, adj: np.ndarray, names: Sequence[str] = ()) -> Graph:
        """From a DAG adjacency matrix with ``adj[i, j] != 0`` meaning ``i -> j``."""
        a = (np.asarray(adj) != 0).astype(np.int8)
        if np.any(a & a.T):
            raise ValueError("DAG adjacency matrix has a pair with edges in both directions")
        return cls(a, tuple(names))

    @classmethod
    def from_edges(cls, d: int, edges: Iterable[tuple[int, int, Relation]], names: Sequence[str] = ()) -> Graph:
        """Graph over ``d`` nodes from ``(i, j, relation)`` triples (a later triple for a pair overrides an earlier one)."""
        g = cls.empty(d, names)
        for i, j, rel in edges:
            g.set(i, j, rel)
        return g

    # --- relations -----------------------------------------------------------------------
    @property
    def d(self) -> int:
        """Number of nodes."""
        return int(self.amat.shape[0])

    def relation(self, i: int, j: int) -> Relation:
        """Return the relation of pair (i, j) seen from ``i``: none, undirected, ``i -> j`` (FORWARD) or ``j -> i`` (BACKWARD)."""
        a, b = self.amat[i, j], self.amat[j, i]
        if a and b:
            return Relation.UNDIRECTED
        if a:
            return Relation.FORWARD
        if b:
            return Relation.BACKWARD
        return Relation.NONE

    def set(self, i: int, j: int, rel: Relation | int) -> None:
        """Set the relation of pair (i, j); ``FORWARD`` means ``i -> j``."""
        if i == j:
            raise ValueError(f"no relation of a node with itself (node {self.names[i]})")
        rel = Relation(rel)
        self.amat[i, j] = rel in (Relation.UNDIRECTED, Relation.FORWARD)
        self.amat[j, i] = rel in (Relation.UNDIRECTED, Relation.BACKWARD)

    def skeleton(self) -> np.ndarray:
        """Symmetric boolean adjacency (edges without direction)."""
        return (self.amat | self.amat.T).astype(bool)

    def n_edges(self) -> int:
        """Number of adjacent pairs (directed and undirected edges alike)."""
        return int(np.triu(self.skeleton(), 1).sum())

    def pairs(self) -> list[tuple[int, int, Relation]]:
        """All adjacent pairs ``(i, j, relation)`` with ``i < j``."""
        s = self.skeleton()
        return [(i, j, self.relation(i, j)) for i, j in zip(*np.nonzero(np.triu(s, 1)))]

    def directed_adjacency(self) -> np.ndarray:
        """``1`` where ``i -> j`` is directed (undirected edges excluded)."""
        return (self.amat & (1 - self.amat.T)).astype(np.int8)

    def undirected_adjacency(self) -> np.ndarray:
        """``1`` at both (i, j) and (j, i) where the pair is undirected."""
        return (self.amat & self.amat.T).astype(np.int8)

    def is_dag(self) -> bool:
        """Whether every edge is directed and there is no directed cycle."""
        return not self.undirected_adjacency().any() and is_dag(self.amat)

    def copy(self) -> Graph:
        """Return an independent copy (marks copied, names shared, they are immutable)."""
        return Graph(self.amat.copy(), self.names)

    def relabel(self, perm: Sequence[int]) -> Graph:
        """Graph on permuted nodes: new node ``k`` is old node ``perm[k]``."""
        p = np.asarray(perm)
        return Graph(self.amat[np.ix_(p, p)], tuple(self.names[k] for k in p))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Graph) and np.array_equal(self.amat, other.amat)

    def __repr__(self) -> str:
        return f"Graph(d={self.d}, edges={self.to_lines()})"

    # --- conversions ---------------------------------------------------------------------
    def to_lines(self) -> list[str]:
        """Edges as ``Xi -> Xj`` / ``Xi -- Xj`` lines (the format agents may submit)."""
        out = []
        for i, j, rel in self.pairs():
            a, b = self.names[i], self.names[j]
            out.append({Relation.UNDIRECTED: f"{a} -- {b}", Relation.FORWARD: f"{a} -> {b}",
                        Relation.BACKWARD: f"{b} -> {a}"}[rel])
        return out

    def to_gadjid(self) -> np.ndarray:
        """gadjid's row-to-column encoding: 1 for ``r -> c``, 2 for an undirected ``r -- c``."""
        out = self.directed_adjacency().astype(np.int8)
        und = np.triu(self.undirected_adjacency(), 1)
        out[und.astype(bool)] = 2
        return out

    def to_causallearn(self):
        """causal-learn ``GeneralGraph`` (tails and arrows)."""
        from causallearn.graph.Edge import Edge
        from causallearn.graph.Endpoint import Endpoint
        from causallearn.graph.GeneralGraph import GeneralGraph
        from causallearn.graph.GraphNode import GraphNode

        nodes = [GraphNode(n) for n in self.names]
        g = GeneralGraph(nodes)
        for i, j, rel in self.pairs():
            if rel == Relation.UNDIRECTED:
                g.add_edge(Edge(nodes[i], nodes[j], Endpoint.TAIL, Endpoint.TAIL))
            elif rel == Relation.FORWARD:
                g.add_edge(Edge(nodes[i], nodes[j], Endpoint.TAIL, Endpoint.ARROW))
            else:
                g.add_edge(Edge(nodes[j], nodes[i], Endpoint.TAIL, Endpoint.ARROW))
        return g

    @classmethod
    def from_causallearn(cls, g, names: Sequence[str] = ()) -> Graph:
        """From a causal-learn ``GeneralGraph`` (or its endpoint matrix).

        causal-learn stores ``graph[j, i] = 1, graph[i, j] = -1`` for ``i -> j``.  Every other
        adjacency — undirected, bidirected (``<->``) and FCI's circle marks (``o->``, ``o-o``) —
        becomes undirected: only a tail-arrow pair is a directed claim.
        """
        m = np.asarray(getattr(g, "graph", g))
        d = m.shape[0]
        amat = np.zeros((d, d), dtype=np.int8)
        for i in range(d):
            for j in range(i + 1, d):
                if m[i, j] == 0 and m[j, i] == 0:
                    continue
                if m[i, j] == -1 and m[j, i] == 1:
                    amat[i, j] = 1
                elif m[j, i] == -1 and m[i, j] == 1:
                    amat[j, i] = 1
                else:
                    amat[i, j] = amat[j, i] = 1
        if not names and hasattr(g, "get_nodes"):
            names = [n.get_name() for n in g.get_nodes()]
        return cls(amat, tuple(names))


# --- DAG helpers ------------------------------------------------------------------------
def topological_order(adj: np.ndarray) -> list[int] | None:
    """A topological order of the directed graph ``adj`` (i -> j where adj[i, j]), or None."""
    a = np.asarray(adj) != 0
    indeg = a.sum(axis=0).astype(int)
    queue = deque(int(k) for k in np.flatnonzero(indeg == 0))
    order: list[int] = []
    while queue:
        k = queue.popleft()
        order.append(k)
        for c in np.flatnonzero(a[k]):
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(int(c))
    return order if len(order) == a.shape[0] else None


def is_dag(adj: np.ndarray) -> bool:
    """Whether the adjacency matrix (``adj[i, j] != 0``: ``i -> j``) is a directed acyclic graph; a 2-cycle is a cycle."""
    a = np.asarray(adj) != 0
    return not np.any(a & a.T) and topological_order(a) is not None


def _ancestors(adj: np.ndarray, nodes: Iterable[int]) -> set[int]:
    """The given nodes and all their ancestors."""
    seen = set(nodes)
    stack = list(seen)
    while stack:
        k = stack.pop()
        for p in np.flatnonzero(adj[:, k]):
            if int(p) not in seen:
                seen.add(int(p))
                stack.append(int(p))
    return seen


def _check_query(d: int, x: Iterable[int], y: Iterable[int], z: Iterable[int]) -> tuple[set, set, set]:
    xs, ys, zs = set(map(int, x)), set(map(int, y)), set(map(int, z))
    for name, s in (("x", xs), ("y", ys), ("z", zs)):
        bad = [k for k in s if not 0 <= k < d]
        if bad:
            raise ValueError(f"d-separation query: node(s) {bad} in {name} out of range 0..{d - 1}")
    if xs & ys or xs & zs or ys & zs:
        raise ValueError(f"d-separation query: x={sorted(xs)}, y={sorted(ys)}, z={sorted(zs)} overlap")
    return xs, ys, zs


def d_separated(adj: np.ndarray, x: Iterable[int], y: Iterable[int], z: Iterable[int] = ()) -> bool:
    """d-separation by the moralized ancestral graph (Lauritzen et al. 1990).

    ``x`` and ``y`` are d-separated by ``z`` in the DAG ``adj`` iff they are disconnected in the
    moral graph of the ancestral set of x, y and z after removing z.
    """
    a = np.asarray(adj) != 0
    xs, ys, zs = _check_query(a.shape[0], x, y, z)
    keep = sorted(_ancestors(a, xs | ys | zs))
    idx = {k: t for t, k in enumerate(keep)}
    sub = a[np.ix_(keep, keep)]
    moral = sub | sub.T
    for c in range(len(keep)):  # marry the parents of every node
        ps = np.flatnonzero(sub[:, c])
        moral[np.ix_(ps, ps)] = True
    np.fill_diagonal(moral, False)
    blocked = {idx[k] for k in zs}
    targets = {idx[k] for k in ys}
    seen = {idx[k] for k in xs}
    stack = list(seen)
    while stack:
        k = stack.pop()
        if k in targets:
            return False
        for nb in np.flatnonzero(moral[k]):
            nb = int(nb)
            if nb not in seen and nb not in blocked:
                seen.add(nb)
                stack.append(nb)
    return True


def d_separated_bayes_ball(adj: np.ndarray, x: Iterable[int], y: Iterable[int], z: Iterable[int] = ()) -> bool:
    """d-separation by path blocking: reachability over (node, direction) states.

    An independent implementation of :func:`d_separated` (Koller & Friedman 2009, Alg. 3.1): a
    trail is active iff every collider on it is in z or has a descendant in z and no non-collider
    is in z.
    """
    a = np.asarray(adj) != 0
    xs, ys, zs = _check_query(a.shape[0], x, y, z)
    anc_z = _ancestors(a, zs)  # colliders that are open: in z or ancestors of z
    # state (node, came_from_child): True = arrived against an edge (from a child), False = along it
    visited: set[tuple[int, bool]] = set()
    queue = deque((k, True) for k in xs)
    while queue:
        node, up = queue.popleft()
        if (node, up) in visited:
            continue
        visited.add((node, up))
        if node not in zs and node in ys:
            return False
        if up and node not in zs:
            for p in np.flatnonzero(a[:, node]):
                queue.append((int(p), True))
            for c in np.flatnonzero(a[node]):
                queue.append((int(c), False))
        elif not up:
            if node not in zs:
                for c in np.flatnonzero(a[node]):
                    queue.append((int(c), False))
            if node in anc_z:
                for p in np.flatnonzero(a[:, node]):
                    queue.append((int(p), True))
    return True


# --- CPDAG and Meek's rules -----------------------------------------------------------------
def v_structures(adj: np.ndarray) -> list[tuple[int, int, int]]:
    """Unshielded colliders ``(a, c, b)`` with ``a -> c <- b``, a < b, a and b non-adjacent."""
    a = np.asarray(adj) != 0
    skel = a | a.T
    out = []
    for c in range(a.shape[0]):
        ps = np.flatnonzero(a[:, c])
        for s, p in enumerate(ps):
            for q in ps[s + 1:]:
                if not skel[p, q]:
                    out.append((int(p), c, int(q)))
    return out


def dag_to_cpdag(adj: np.ndarray) -> Graph:
    """The CPDAG (essential graph) of a DAG: its v-structures plus Meek's rules R1-R3.

    Meek (1995) shows that the pattern (skeleton with the v-structures oriented) closed under
    R1-R3 is the completed PDAG representing the Markov equivalence class.
    """
    a = (np.asarray(adj) != 0)
    if not is_dag(a):
        raise ValueError("dag_to_cpdag needs a DAG; the matrix has a directed cycle")
    skel = (a | a.T).astype(np.int8)
    amat = skel.copy()
    for p, c, q in v_structures(a):
        amat[c, p] = amat[c, q] = 0
    return meek_closure(Graph(amat), rules=(1, 2, 3))


def has_directed_path(directed: np.ndarray, src: int, dst: int) -> bool:
    """Whether a directed path src -> ... -> dst exists in the boolean matrix ``directed``.

    Used to refuse orientations that would close a directed cycle (Meek's rules, PC).
    """
    seen = {src}
    stack = [src]
    while stack:
        k = stack.pop()
        if k == dst:
            return True
        for c in np.flatnonzero(directed[k]):
            if int(c) not in seen:
                seen.add(int(c))
                stack.append(int(c))
    return False


def meek_closure(graph: Graph, rules: Sequence[int] = (1, 2, 3, 4)) -> Graph:
    """Orient undirected edges implied by Meek's rules until nothing changes.

    R1: a -> b -- c, a and c non-adjacent  =>  b -> c.
    R2: a -> b -> c and a -- c              =>  a -> c.
    R3: a -- b, a -- c, a -- d, c -> b <- d, c and d non-adjacent  =>  a -> b.
    R4: a -- b, a -- c (or a adj c), c -> d -> b, c and b non-adjacent, a adj d  =>  a -> b.

    An orientation that would close a directed cycle is skipped (as causal-learn does), so the
    function is total on any partially directed graph, including inconsistent agent submissions.
    Returns a new graph; the input is unchanged.
    """
    g = graph.copy()
    m = g.amat
    d = g.d
    rules = set(rules)  # type: ignore[assignment]
    changed = True
    while changed:
        changed = False
        und = (m & m.T).astype(bool)
        dirc = (m & (1 - m.T)).astype(bool)
        adj = (m | m.T).astype(bool)
        for b in range(d):
            for c in np.flatnonzero(und[b]):
                c = int(c)
                if not und[b, c]:
                    continue  # oriented earlier in this sweep
                hit = False
                if 1 in rules:  # some a -> b with a not adjacent to c
                    pa = np.flatnonzero(dirc[:, b])
                    hit = any(not adj[a, c] and a != c for a in pa)
                if not hit and 2 in rules:  # b -> a -> c
                    hit = bool(np.any(dirc[b] & dirc[:, c]))
                if not hit and 3 in rules:  # b -- e, b -- f, e -> c <- f, e, f non-adjacent
                    cand = np.flatnonzero(und[b] & dirc[:, c])
                    hit = any(not adj[e, f] for s, e in enumerate(cand) for f in cand[s + 1:])
                if not hit and 4 in rules:  # b adj e, e -> f -> c, e not adj c, b adj f (b -- c)
                    for f in np.flatnonzero(dirc[:, c] & adj[b]):
                        es = np.flatnonzero(dirc[:, f] & adj[b])
                        if any(not adj[e, c] and e != c for e in es):
                            hit = True
                            break
                if hit and not has_directed_path(dirc, c, b):
                    m[c, b] = 0
                    und[b, c] = und[c, b] = False
                    dirc[b, c] = True
                    changed = True
    return g
