"""Instance generation (docs/design.md §3): random DAG, per-node mechanisms, anonymous standardized data.

Every random draw of an instance comes from one ``numpy.random.Generator`` seeded by
``SeedSequence(entropy=config.seed, spawn_key=(family_key, split_key, index))``, where the keys
are stable hashes of the family and split *names*.  So an instance depends only on the global
seed, its family's config entry, the instance settings (d, n, graph prior) and its index:
adding a family, reordering families or raising the instance count changes no existing byte.
A sealed test split (config ``secrets.test_seed: sealed``) takes each instance's entropy from the
sealed seed instead of ``config.seed``, derived one-way for that instance alone
(:func:`heuresis.artifacts.sealing.sealed_entropy` of ``"instance:<instance id>"``), with the same
spawn keys: the dev split is unchanged, no public value reproduces the test split, and the entropy a
truth row records rebuilds that instance only.

The draw order within an instance (fixed; changing it changes every instance):
prior, causal order, edges, then per node in causal order its kind, parameters and noise, and
last the column permutation.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from heuresis.artifacts.io import read_table, write_table
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.schemas import INSTANCE_INDEX, TRUTH_GRAPHS, TRUTH_NODES, data_schema
from heuresis.artifacts.sealing import SecretUnavailable, sealed_entropy, test_seed_spec, verify_seed
from heuresis.causal.graph import Graph, dag_to_cpdag, topological_order
from heuresis.causal.mechanisms import MECHANISMS, standardize
from heuresis.causal.realdata import CAVEAT, SOURCES, RealDataUnavailable, load_source, source_digest
from heuresis.config.loading import (
    SPLITS,
    StrictValidator,
    config_key,
    constants_schema,
    format_errors,
    range_errors,
    scale_errors,
    schema,
)

__all__ = [
    "GENERATOR_VERSION",
    "Instance",
    "config_errors",
    "family_caveat",
    "family_kinds",
    "generate_instance",
    "instance_entropy",
    "instance_id",
    "instance_seed",
    "instance_spec",
    "load_data",
    "load_truth",
    "r2_sortability",
    "sample_dag",
    "sample_rows",
    "sample_scm",
    "split_entropy",
    "stable_key",
    "var_sortability",
    "write_split",
]


#: The instance generator's version: raised whenever a change of the generator's code changes any instance
#: drawn from the same config and seed. It is part of every instance spec (the instance rule's params and
#: its provenance record), so a new version reruns the instance stage and everything downstream, and the
#: leaderboard refuses to rank results of different versions together.
GENERATOR_VERSION = 2


def stable_key(name: str) -> int:
    """A 32-bit integer derived from a name's bytes (independent of Python's hash seed)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def instance_id(family: str, split: str, index: int) -> str:
    """Return the instance id ``family/split/NNNN`` (index zero-padded to four digits), as paths and tables name it."""
    return f"{family}/{split}/{index:04d}"


def instance_seed(seed: int, family: str, split: str, index: int) -> np.random.SeedSequence:
    """The SeedSequence of one instance; dev and test keys differ, so their streams are disjoint."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {list(SPLITS)}")
    if index < 0:
        raise ValueError(f"instance index must be >= 0, got {index}")
    return np.random.SeedSequence(entropy=seed, spawn_key=(stable_key(family), stable_key(split), index))


# --- graphs ------------------------------------------------------------------------------
def sample_dag(rng: np.random.Generator, d: int, prior: str, expected_degree: float,
               ba_orientation: str) -> tuple[np.ndarray, np.ndarray]:
    """Draw a DAG from a random-graph prior over a uniformly random causal order.

    Returns ``(adj, order)`` with ``adj[i, j] = 1`` for ``i -> j`` in node space and ``order``
    the causal order (a permutation of 0..d-1).

    * ``er``: each forward pair of the order is an edge with probability k / (d - 1), so the
      expected number of edges is k d / 2.
    * ``ba``: the t-th node of the order attaches to min(m_t, t) distinct earlier nodes chosen
      with probability proportional to (degree + 1); m_t = floor(k/2) plus one with probability
      frac(k/2), so each new node attaches to about k/2 earlier nodes.  ``ba_orientation`` says
      which order orients the skeleton: ``attachment`` keeps the attachment order as the causal
      order (at k = 2 every instance is then an out-tree, without a collider); ``random`` orients the
      same skeleton by a second, independent uniformly random causal order (hubs become colliders).
      docs/families.md, "Calibration", shows how the default was chosen.
    """
    order = rng.permutation(d)
    adj = np.zeros((d, d), dtype=np.int8)
    k = float(expected_degree)
    if prior == "er":
        p = min(1.0, k / (d - 1)) if d > 1 else 0.0
        upper = np.triu(rng.random((d, d)) < p, 1)
        ii, jj = np.nonzero(upper)
        adj[order[ii], order[jj]] = 1
    elif prior == "ba":
        half = k / 2.0
        base, frac = int(np.floor(half)), half - np.floor(half)
        degree = np.zeros(d)
        for t in range(1, d):
            m = min(t, base + int(rng.random() < frac))
            if m == 0:
                continue
            earlier = order[:t]
            w = degree[earlier] + 1.0
            chosen = rng.choice(earlier, size=m, replace=False, p=w / w.sum())
            node = order[t]
            adj[chosen, node] = 1
            degree[chosen] += 1
            degree[node] += m
        if ba_orientation == "random":
            skeleton = (adj | adj.T).astype(bool)
            order = rng.permutation(d)
            rank = np.empty(d, dtype=int)
            rank[order] = np.arange(d)
            adj[:] = skeleton & (rank[:, None] < rank[None, :])
        elif ba_orientation != "attachment":
            raise ValueError(f"unknown BA orientation {ba_orientation!r}; known: ['random', 'attachment']")
    else:
        raise ValueError(f"unknown graph prior {prior!r}; known: ['er', 'ba']")
    return adj, order


# --- sortability diagnostics ----------------------------------------------------------------
def _ancestor_pairs(adj: np.ndarray) -> np.ndarray:
    """Boolean matrix R with R[i, j] when a directed path i -> ... -> j exists."""
    d = adj.shape[0]
    reach = adj.astype(bool)
    for k in range(d):  # Warshall's transitive closure
        reach |= reach[:, [k]] & reach[[k], :]
    return reach


def _sortability(scores: np.ndarray, adj: np.ndarray, tol: float = 1e-9) -> float:
    """Share of (ancestor, descendant) pairs whose score increases along the path; ties count 1/2.

    Reisach, Seiler & Weichwald (2021): 0.5 is chance; near 1 lets sorting by the score recover
    the causal order.  Scores within ``tol`` (relative) are ties.  NaN when the DAG has no edge.
    """
    reach = _ancestor_pairs(adj)
    i, j = np.nonzero(reach)
    if len(i) == 0:
        return float("nan")
    a, b = scores[i], scores[j]
    close = np.abs(b - a) <= tol * np.maximum(np.abs(a), np.abs(b))
    return float(np.mean(np.where(close, 0.5, (b > a).astype(float))))


def var_sortability(x: np.ndarray, adj: np.ndarray) -> float:
    """Var-sortability of data ``x`` (n, d) with respect to the DAG ``adj`` over its columns."""
    return _sortability(np.var(x, axis=0), adj)


def r2_sortability(x: np.ndarray, adj: np.ndarray) -> float:
    """R^2-sortability: the score of node j is the R^2 of regressing it on all other columns.

    Computed in closed form from the inverse correlation matrix, R^2_j = 1 - 1 / (C^-1)_jj.
    """
    c = np.corrcoef(x, rowvar=False)
    r2 = 1.0 - 1.0 / np.diag(np.linalg.pinv(c))
    return _sortability(r2, adj)


# --- one instance -----------------------------------------------------------------------------
@dataclass
class Instance:
    """One generated instance: agent-visible data and the hidden truth."""

    family: str
    split: str
    index: int
    data: np.ndarray  # (n, d) standardized, columns X1..Xd
    dag: np.ndarray  # (d, d) int8 over X1..Xd
    prior: str
    causal_order: list[str]
    nodes: list[dict] = field(default_factory=list)
    spawn_key: tuple[int, ...] = ()
    entropy: int = 0
    var_sortability_raw: float = float("nan")
    var_sortability: float = float("nan")
    r2_sortability: float = float("nan")

    @property
    def id(self) -> str:
        """The instance id ``family/split/NNNN``."""
        return instance_id(self.family, self.split, self.index)

    @property
    def names(self) -> list[str]:
        """Column names of the data, ``X1..Xd``."""
        return [f"X{k + 1}" for k in range(self.data.shape[1])]

    def cpdag(self) -> Graph:
        """Return the CPDAG of the true DAG (its Markov equivalence class, the target PC estimates)."""
        return dag_to_cpdag(self.dag)


def _kind_constants(config: Mapping, family: Mapping, kind: str) -> dict:
    constants = dict(config["mechanisms"].get(kind, {}))
    constants.update(family["kinds"][kind].get("params", {}))
    return constants


def sample_scm(rng: np.random.Generator, adj: np.ndarray, order: Sequence[int], fam: Mapping,
               mechanisms: Mapping[str, Mapping], n: int) -> tuple[np.ndarray, dict[int, dict]]:
    """Sample ``n`` rows of an SCM over the DAG ``adj`` (node space) with a family's mechanisms.

    Per node in causal ``order``: roots get ``root_noise`` x N(0, 1); every other node draws a
    kind from the family's mixture weights, then its parameters and noise (docs/design.md §3.2).  Returns
    the raw (unstandardized) data and a record per node (kind, noise scale, drawn parameters,
    causal rank, parents).  ``mechanisms`` holds each kind's resolved constants.
    """
    d = adj.shape[0]
    kinds = list(fam["kinds"])
    weights = np.array([fam["kinds"][k]["weight"] for k in kinds], dtype=float)
    weights /= weights.sum()

    x = np.zeros((n, d))
    node_records: dict[int, dict] = {}
    for rank, j in enumerate(order):
        parents = np.flatnonzero(adj[:, j])
        if len(parents) == 0:
            s = float(rng.uniform(*fam["root_noise"]))
            x[:, j] = s * rng.standard_normal(n)
            node_records[j] = dict(kind="root", noise_scale=s, standardize_output=False, params={}, rank=rank,
                                   parents=parents)
            continue
        kind = kinds[int(rng.choice(len(kinds), p=weights))]
        mk = MECHANISMS[kind]
        kspec = fam["kinds"][kind]
        sigma = float(rng.uniform(*kspec["noise"])) if mk.uses_noise_scale else None
        u = x[:, parents]
        if mk.standardize_parents:
            u = standardize(u)
        signal, noise, params = mk.fn(rng, u, sigma, mechanisms[kind])
        if kspec.get("standardize_output", False):
            signal = standardize(signal)
        x[:, j] = signal + noise
        node_records[j] = dict(kind=kind, noise_scale=sigma, standardize_output=bool(kspec.get("standardize_output")),
                               params=params, rank=rank, parents=parents)

    return x, node_records


def split_entropy(spec: Mapping, split: str, test_seed: str | None = None) -> int | None:
    """The ``SeedSequence`` entropy of a public split (``spec["seed"]``); None for a sealed one, once its seed is checked.

    A sealed spec (``{"sealed": commitment}``, :func:`instance_spec` of a sealed test split) needs
    ``test_seed``, the seed whose commitment it records; another seed is refused. Its instances each
    have their own entropy (:func:`instance_entropy`), never one of the whole split.
    """
    seed = spec["seed"]
    if not isinstance(seed, Mapping):
        return int(seed)
    if split != "test":
        raise ValueError(f"split {split!r}: only the test split is sealed")
    if test_seed is None:
        raise SecretUnavailable("the test split is sealed: its seed must be given (secrets.test_seed)")
    if seed["sealed"] is None or not verify_seed(test_seed, seed["sealed"]):
        raise SecretUnavailable(f"the given test seed does not match the commitment {seed['sealed']} the "
                                "instance spec records (a rotated seed needs a fresh spec)")
    return None


def instance_entropy(spec: Mapping, family: str, split: str, index: int, test_seed: str | None = None) -> int:
    """The entropy of one instance: the public seed, or the sealed seed's derivation for this instance alone."""
    entropy = split_entropy(spec, split, test_seed)
    if entropy is not None:
        return entropy
    assert test_seed is not None                       # split_entropy refused a sealed split without it
    return sealed_entropy(test_seed, f"instance:{instance_id(family, split, index)}")


def sample_rows(rng: np.random.Generator, fam: Mapping, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Draw ``n`` distinct rows of a real-data family's source, uniformly without replacement.

    Returns the rows (log-transformed when ``transform: log``, in the source's row order), the
    source's DAG, a causal order of it (the first topological order by column) and a record per node
    (``kind: measured``, the source's variable name in ``params``), as :func:`sample_scm` does.
    """
    src = load_source(fam["source"])
    rows = np.sort(rng.choice(src.data.shape[0], size=n, replace=False))
    x = src.data[rows]
    if fam["transform"] == "log":
        x = np.log(x)
    topo = topological_order(src.adjacency)
    assert topo is not None                           # the source's graph is checked acyclic on load
    order = np.array(topo)
    rank = {int(j): r for r, j in enumerate(order)}
    records = {j: dict(kind="measured", noise_scale=None, standardize_output=False, rank=rank[j],
                       params={"variable": src.variables[j], "column": src.columns[j]},
                       parents=np.flatnonzero(src.adjacency[:, j])) for j in range(len(src.variables))}
    return x, src.adjacency, order, records


def family_kinds(fam: Mapping) -> str:
    """A family's make-up in a table cell: its mechanism kinds, or its real-data source.

    The kinds carry their shares when the family's weights differ (``sigmoid 67%, piecewise 33%``).
    """
    if "source" in fam:
        return f"real data: {fam['source']}"
    weights = {k: float(v.get("weight", 1)) if isinstance(v, Mapping) else 1.0 for k, v in fam["kinds"].items()}
    if len(set(weights.values())) <= 1:
        return ", ".join(fam["kinds"])
    total = sum(weights.values())
    return ", ".join(f"{k} {w / total:.0%}" for k, w in weights.items())


def family_caveat(families: Mapping, shown: Sequence[str]) -> str:
    """The caveat a table's caption states when any of the ``shown`` families is real data ('' when none is)."""
    real = [f for f in shown if "source" in families.get(f, {})]
    return f"{', '.join(real)}: {CAVEAT}." if real else ""


def generate_instance(spec: Mapping, family: str, split: str, index: int, test_seed: str | None = None) -> Instance:
    """Generate one instance from an instance spec (see :func:`instance_spec`; ``test_seed``: :func:`split_entropy`)."""
    fam = spec["family"]
    d, n = int(spec["instances"]["d"]), int(spec["instances"]["n"])
    ss = instance_seed(instance_entropy(spec, family, split, index, test_seed), family, split, index)
    rng = np.random.default_rng(ss)

    if "source" in fam:
        x, adj, order, node_records = sample_rows(rng, fam, n)
        prior = "real"
    else:
        priors = list(spec["graph"]["priors"])
        prior = priors[int(rng.integers(len(priors)))]
        adj, order = sample_dag(rng, d, prior, spec["graph"]["expected_degree"], spec["graph"]["ba_orientation"])
        x, node_records = sample_scm(rng, adj, order, fam, spec["mechanisms"], n)  # type: ignore[arg-type]

    if not np.all(np.isfinite(x)):
        raise FloatingPointError(f"instance {instance_id(family, split, index)}: non-finite values generated")
    vs_raw = var_sortability(x, adj)

    # anonymize: column k of the stored data is node perm[k], named X{k+1}
    perm = rng.permutation(d)
    inv = np.argsort(perm)
    data = standardize(x[:, perm])
    dag = adj[np.ix_(perm, perm)]
    names = [f"X{k + 1}" for k in range(d)]
    nodes = []
    for k in range(d):
        rec = node_records[int(perm[k])]
        nodes.append(dict(node=names[k], causal_rank=rec["rank"], kind=rec["kind"],
                          parents=[names[int(inv[p])] for p in rec["parents"]],
                          noise_scale=rec["noise_scale"], standardize_output=rec["standardize_output"],
                          params=json.dumps(rec["params"], sort_keys=True)))
    return Instance(family=family, split=split, index=index, data=data, dag=dag, prior=prior,
                    causal_order=[names[int(inv[j])] for j in order], nodes=nodes,
                    spawn_key=tuple(int(v) for v in ss.spawn_key), entropy=int(ss.entropy),  # type: ignore[arg-type]
                    var_sortability_raw=vs_raw, var_sortability=var_sortability(data, dag),
                    r2_sortability=r2_sortability(data, dag))


def instance_spec(config: Mapping, family: str, split: str | None = None,
                  environ: Mapping[str, str] | None = None) -> dict:
    """The slice of the config that a family's instances depend on (and nothing else).

    The workflow passes this as the rule's ``params`` so that editing another family, or an
    unrelated setting, does not regenerate this family's instances.  Mechanism constants are
    resolved per kind (global constants merged with the family's overrides).  For the test split
    of a sealed config (``secrets.test_seed: sealed``) ``seed`` is ``{"sealed": commitment}``, the
    commitment of the seed in ``environ`` (None when it is absent); never the seed itself.
    """
    if family not in config["families"]:
        raise ValueError(f"unknown family {family!r}; configured: {sorted(config['families'])}")
    fam = config["families"][family]
    seed = config["seed"]
    if split == "test" and config["secrets"]["test_seed"] == "sealed":
        seed = {"sealed": test_seed_spec(config, environ)["commitment"]}
    if "source" in fam:        # real data: the source's file (by digest) and the row count, no generator settings
        return {"generator": GENERATOR_VERSION, "seed": seed,
                "instances": {"d": len(load_source(fam["source"]).variables), "n": config["instances"]["n"]},
                "family": fam, "data_sha256": source_digest(fam["source"])}
    return {
        "generator": GENERATOR_VERSION,
        "seed": seed,
        "instances": {"d": config["instances"]["d"], "n": config["instances"]["n"]},
        "graph": dict(config["graph"]),
        "family": fam,
        "mechanisms": {k: _kind_constants(config, fam, k) for k in fam["kinds"]},
    }


def write_split(spec: Mapping, family: str, split: str, n_instances: int, data_dir: str | Path,
                truth_dir: str | Path, log=None, test_seed: str | None = None) -> None:
    """Generate ``n_instances`` instances of one family and split and write them.

    Writes the agent-visible ``data_dir/{index:04d}/data.parquet`` files and
    ``data_dir/index.parquet``, and, apart from them, the hidden truth
    ``truth_dir/graphs.parquet`` (one row per instance) and ``truth_dir/nodes.parquet`` (one row
    per node).  Data files carry no seed, family or time in their metadata: they are
    byte-identical across runs, and nothing in them leaks the truth.  ``test_seed``: the sealed
    seed of a sealed spec (:func:`split_entropy`); the provenance records its commitment only.
    """
    entropy = split_entropy(spec, split, test_seed)
    started = utc_now()
    data_dir, truth_dir = Path(data_dir), Path(truth_dir)
    index_rows, graph_rows, node_rows = [], [], []
    t0 = time.perf_counter()
    for i in range(n_instances):
        inst = generate_instance(spec, family, split, i, test_seed)
        rel = f"{i:04d}/data.parquet"
        schema = data_schema(inst.data.shape[1])
        table = pa.table({name: inst.data[:, k] for k, name in enumerate(schema.schema.names)})
        path = write_table(table, data_dir / rel, schema)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        index_rows.append(dict(family=family, split=split, instance=i, instance_id=inst.id, path=rel,
                               n=inst.data.shape[0], d=inst.data.shape[1], data_sha256=digest))
        graph_rows.append(dict(family=family, split=split, instance=i, instance_id=inst.id,
                               seed_entropy=str(inst.entropy), seed_spawn_key=list(inst.spawn_key), prior=inst.prior,
                               d=inst.data.shape[1], n=inst.data.shape[0], n_edges=int(inst.dag.sum()),
                               dag=inst.dag.ravel().tolist(), cpdag=inst.cpdag().amat.ravel().tolist(),
                               causal_order=inst.causal_order, var_sortability_raw=inst.var_sortability_raw,
                               var_sortability=inst.var_sortability, r2_sortability=inst.r2_sortability,
                               data_sha256=digest))
        for rec in inst.nodes:
            node_rows.append(dict(family=family, split=split, instance=i, **rec))
        if log is not None and (i + 1) % 25 == 0:
            log(f"{family}/{split}: {i + 1}/{n_instances} instances ({time.perf_counter() - t0:.1f} s)")
    sealed = isinstance(spec["seed"], Mapping)
    seeds = {"entropy": "sealed" if sealed else entropy, "spawn_key": [stable_key(family), stable_key(split), "index"]}
    if sealed:
        seeds["test_seed_commitment"] = spec["seed"]["sealed"]
    prov = dumps(provenance_record(stage="instances", config=dict(spec), seeds=seeds, started=started))
    meta = {PROVENANCE_KEY: prov}
    write_table(_rows_to_table(graph_rows, TRUTH_GRAPHS), truth_dir / "graphs.parquet", TRUTH_GRAPHS, meta)
    write_table(_rows_to_table(node_rows, TRUTH_NODES), truth_dir / "nodes.parquet", TRUTH_NODES, meta)
    write_table(_rows_to_table(index_rows, INSTANCE_INDEX), data_dir / "index.parquet", INSTANCE_INDEX, meta)
    if log is not None:
        log(f"{family}/{split}: wrote {n_instances} instances in {time.perf_counter() - t0:.1f} s")


def _rows_to_table(rows: Sequence[dict], schema) -> pa.Table:
    cols = {name: [r[name] for r in rows] for name in schema.schema.names}
    return pa.table(cols, schema=schema.schema)


# --- readers ----------------------------------------------------------------------------------
def load_data(data_dir: str | Path, index: int) -> np.ndarray:
    """The agent-visible data matrix (n, d) of one instance."""
    path = Path(data_dir) / f"{index:04d}" / "data.parquet"
    meta_d = pq.read_schema(path).names
    table = read_table(path, data_schema(len(meta_d)))
    return np.column_stack([table.column(c).to_numpy() for c in table.column_names])


@dataclass(frozen=True)
class Truth:
    """The hidden truth of one instance."""

    instance_id: str
    dag: Graph
    cpdag: Graph
    record: dict


def load_truth(truth_dir: str | Path) -> dict[int, Truth]:
    """Truth of every instance of a family and split, keyed by instance index."""
    rows = read_table(Path(truth_dir) / "graphs.parquet", TRUTH_GRAPHS).to_pylist()
    out = {}
    for r in rows:
        d = r["d"]
        dag = Graph.from_dag(np.array(r["dag"], dtype=np.int8).reshape(d, d))
        cpdag = Graph(np.array(r["cpdag"], dtype=np.int8).reshape(d, d))
        out[r["instance"]] = Truth(r["instance_id"], dag, cpdag, r)
    return out


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of the instance settings a schema cannot say, each naming its config key.

    The expected degree fits the node count; mechanism kinds are registered; a family's mixture
    is not empty or all-zero, gives a noise range exactly to the kinds that take one, and its
    ``params`` overrides fit the kind's declared constants; ranges are ordered.

    Parameters
    ----------
    config
        A config the schema accepted (defaults filled in).
    """
    msgs: list[str] = []
    d, k = config["instances"]["d"], config["graph"]["expected_degree"]
    if k > d - 1:
        msgs.append(f"config key graph.expected_degree: {k} exceeds instances.d - 1 = {d - 1} (a node has at most "
                    f"d - 1 neighbours; allowed: 0 < expected_degree <= {d - 1})")
    for kind in config["mechanisms"]:
        if kind not in MECHANISMS:
            msgs.append(f"config key mechanisms.{kind}: unknown mechanism kind {kind!r}; "
                        f"known: {sorted(MECHANISMS)}")
        elif constants_schema(kind) is not None:   # declared: the schema checked types and signs
            for c, v in config["mechanisms"][kind].items():
                if isinstance(v, list) and len(v) == 2:
                    msgs.extend(range_errors(f"mechanisms.{kind}.{c}", v, allow_negative=True))
    for name, fam in config["families"].items():
        msgs.extend(_family_errors(config, name, fam))
    return msgs


def _source_errors(config: Mapping, name: str, fam: Mapping) -> list[str]:
    """Problems of a real-data family (``families.<name>.source``): no simulation keys, data installed, enough rows."""
    base = f"families.{name}"
    extra = [k for k in ("root_noise", "kinds") if k in fam]
    if extra:
        return [f"config key {base}: a real-data family (source {fam['source']!r}) takes no {' or '.join(extra)}"]
    try:
        rows = load_source(fam["source"]).data.shape[0]
    except RealDataUnavailable as exc:
        return [f"config key {base}.source: {exc}"]
    n = int(config["instances"]["n"])
    if n > rows:
        return [f"config key instances.n: {n} exceeds the {rows} rows of family {name!r}'s source "
                f"{fam['source']!r} (its instances are subsamples without replacement)"]
    return []


def _family_errors(config: Mapping, name: str, fam: Mapping) -> list[str]:
    """Problems of one family's mixture (``families.<name>``)."""
    base = f"families.{name}"
    if "source" in fam:
        return _source_errors(config, name, fam)
    missing = [k for k in ("root_noise", "kinds") if k not in fam]
    if missing:
        return [f"config key {base}.{k}: missing: a simulated family needs it (or give family {name!r} a `source`: "
                f"a real-data family; known: {sorted(SOURCES)})" for k in missing]
    msgs = scale_errors(f"{base}.root_noise", fam["root_noise"])
    kinds = fam["kinds"]
    if not kinds:
        return [*msgs, f"config key {base}.kinds: empty mixture (family {name!r} names no mechanism kind)"]
    if sum(k["weight"] for k in kinds.values()) <= 0:
        msgs.append(f"config key {base}.kinds: all mixture weights are zero in family {name!r}")
    for kind, spec in kinds.items():
        key = f"{base}.kinds.{kind}"
        if kind not in MECHANISMS:
            msgs.append(f"config key {key}: unknown mechanism kind {kind!r} in family {name!r}; "
                        f"known: {sorted(MECHANISMS)}")
            continue
        if MECHANISMS[kind].uses_noise_scale and "noise" not in spec:
            msgs.append(f"config key {key}.noise: missing (kind {kind!r} needs a noise-scale range)")
        if "noise" in spec:
            if not MECHANISMS[kind].uses_noise_scale:
                msgs.append(f"config key {key}.noise: kind {kind!r} has an input-dependent noise "
                            f"scale and takes no noise range")
            else:
                msgs.extend(scale_errors(f"{key}.noise", spec["noise"]))
        if kind not in config["mechanisms"]:
            msgs.append(f"config key mechanisms.{kind}: missing (constants of kind {kind!r}, "
                        f"used by family {name!r})")
            continue
        signed = MECHANISMS[kind].signed_constants
        if constants_schema(kind) is None:   # a kind without declared constants: generic checks
            msgs.extend(_constant_errors(f"mechanisms.{kind}", config["mechanisms"][kind], signed))
            msgs.extend(_constant_errors(f"{key}.params", spec["params"], signed))
        else:
            msgs.extend(_override_errors(f"{key}.params", kind, config["mechanisms"][kind], spec["params"]))
    return msgs


def _override_errors(key: str, kind: str, constants: Mapping, params: Mapping) -> list[str]:
    """A family's ``params`` checked against the kind's declared constants (merged over ``mechanisms``)."""
    node = constants_schema(kind)
    known = sorted(node.get("properties", {}))  # type: ignore[union-attr]
    msgs = [f"config key {key}.{k}: not a constant of kind {kind!r}; known: {known}" for k in params if k not in known]
    merged = {**constants, **{k: v for k, v in params.items() if k in known}}
    validator = StrictValidator({"$defs": schema()["$defs"], **node})  # type: ignore[dict-item]
    msgs.extend(format_errors(validator.iter_errors(merged), lambda path: f"config key {key}.{config_key(path)}"))
    if not msgs:   # ordering of the merged ranges (sign and type are the schema's)
        for k, v in params.items():
            if isinstance(v, list) and len(v) == 2:
                msgs.extend(range_errors(f"{key}.{k}", v, allow_negative=True))
    return msgs


def _constant_errors(key: str, constants: Mapping, signed: tuple[str, ...] = ()) -> list[str]:
    """Range-valued constants (two numbers) must be ordered; only ``signed`` ones may be negative."""
    msgs: list[str] = []
    for k, v in constants.items():
        if isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
            msgs.extend(range_errors(f"{key}.{k}", v, allow_negative=k in signed))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            msgs.append(f"config key {key}.{k}: negative value {v}")
    return msgs
