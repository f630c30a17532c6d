"""Figure 1b, saturation: standard algorithms on linear-Gaussian data over public network structures.

For each public network (:mod:`heuresis.causal.networks`) and dataset index, the structure's SCM is
sampled with a configured family's mechanisms (``lg`` by default: linear weights ±U[0.5, 2],
noise U[0.5, 2], the paper's constants) by the instance generator's own sampler
(:func:`heuresis.stages.instances.sample_scm`), then **anonymized** as every benchmark instance is:
columns permuted in a fresh random order, named X1..Xd, standardized.  The configured menu
algorithms (PC-Fisher-z, PC-KCI, GES) run on the data, and the **oracle** (docs/design.md §4.3: PC-KCI's
output plus every pair PC-KCI wrongly deleted, as an undirected edge) is scored beside them by
adjacency F1.  The point of the figure: on such data the menu is already near the ceiling, so
a benchmark built from public networks and linear-Gaussian data cannot tell an agent that
uses the data apart from one that picks a standard algorithm.

Seeds: dataset ``k`` of network ``net`` draws from
``SeedSequence(seed, spawn_key=(stable_key("saturation"), stable_key(net), k))`` in the order
mechanisms (per node in a fixed topological order), then the column permutation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from heuresis.artifacts.io import Checkpoint, read_table, write_table
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.report import pyplot
from heuresis.artifacts.schemas import SATURATION
from heuresis.causal.algorithms.pc import oracle_repair
from heuresis.causal.graph import Graph, dag_to_cpdag
from heuresis.causal.mechanisms import standardize
from heuresis.causal.metrics import score_graph
from heuresis.causal.networks import load_network
from heuresis.config.loading import config_digest
from heuresis.config.settings import Bootstrap
from heuresis.stages.instances import instance_spec, sample_scm, stable_key

__all__ = [
    "ORACLE",
    "config_errors",
    "dataset_seed",
    "figure1b",
    "figure1b_table",
    "load_saturation",
    "oracle_gain_share",
    "run_network",
    "saturation_settings",
    "saturation_summary",
    "simulate",
    "topological_order",
]

ORACLE = "oracle"
_PC = "pc_kci"


def dataset_seed(seed: int, network: str, dataset: int) -> np.random.SeedSequence:
    """The SeedSequence of one dataset of one network (disjoint from every instance stream)."""
    return np.random.SeedSequence(entropy=int(seed), spawn_key=(stable_key("saturation"), stable_key(network),
                                                                int(dataset)))


def topological_order(adj: np.ndarray) -> list[int]:
    """A topological order of a DAG, smallest index first among the available nodes (deterministic)."""
    adj = np.asarray(adj) != 0
    indeg = adj.sum(axis=0).astype(int)
    ready = sorted(int(k) for k in np.flatnonzero(indeg == 0))
    order = []
    while ready:
        k = ready.pop(0)
        order.append(k)
        for j in np.flatnonzero(adj[k]):
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(int(j))
        ready.sort()
    if len(order) != adj.shape[0]:
        raise ValueError("graph has a directed cycle; no topological order")
    return order


def simulate(network: str, dataset: int, *, n: int, seed: int, family: Mapping,
             mechanisms: Mapping[str, Mapping]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Anonymized data of one dataset.

    Returns ``(data, dag, perm)``: ``data`` (n, d) standardized with columns X1..Xd, ``dag`` the
    true DAG over those columns, and ``perm`` with column ``X{k+1}`` = network variable ``perm[k]``.
    """
    net = load_network(network)
    adj = np.array(net.adjacency, dtype=np.int8)
    rng = np.random.default_rng(dataset_seed(seed, network, dataset))
    x, _ = sample_scm(rng, adj, topological_order(adj), family, mechanisms, int(n))
    if not np.all(np.isfinite(x)):
        raise FloatingPointError(f"saturation {network}/{dataset}: non-finite values generated")
    perm = rng.permutation(net.d)
    return standardize(x[:, perm]), adj[np.ix_(perm, perm)], perm


def _row(network, dataset, n, dag, perm, ss, method, algorithm, graph: Graph, *, status="ok", error="",
         runtime_s=0.0, n_tests=0, n_deletions=None, n_wrong=None) -> dict:
    truth = Graph.from_dag(dag)
    s = score_graph(truth, dag_to_cpdag(dag), graph)
    return dict(network=network, dataset=int(dataset), d=int(dag.shape[0]), n=int(n), n_arcs=int(dag.sum()),
                method=method, algorithm=algorithm, status=status, error=error, f1=s.f1, precision=s.precision,
                recall=s.recall, shd=int(s.shd), nshd=s.nshd, n_edges=s.n_edges, runtime_s=float(runtime_s),
                n_tests=int(n_tests), n_deletions=n_deletions, n_wrong_deletions=n_wrong,
                graph=graph.amat.ravel().tolist(), dag=np.asarray(dag).ravel().tolist(),
                permutation=[int(p) for p in perm], seed_entropy=int(ss.entropy),
                seed_spawn_key=[int(k) for k in ss.spawn_key])


def run_dataset(network: str, dataset: int, *, n: int, seed: int, family: Mapping, mechanisms: Mapping,
                algorithms: Mapping[str, Mapping]) -> list[dict]:
    """Every configured algorithm and the oracle (when ``pc_kci`` is configured) on one dataset."""
    from heuresis.causal.algorithms import make_algorithm

    data, dag, perm = simulate(network, dataset, n=n, seed=seed, family=family, mechanisms=mechanisms)
    ss = dataset_seed(seed, network, dataset)
    rows = []
    for name, params in algorithms.items():
        try:
            res = make_algorithm(name, **dict(params)).run(data)
        except Exception as exc:  # a crash is a recorded result (empty graph), never a lost dataset
            rows.append(_row(network, dataset, n, dag, perm, ss, name, name, Graph.empty(dag.shape[0]),
                             status="failed", error=f"{type(exc).__name__}: {exc}"))
            continue
        extra = {}
        if res.pc is not None:
            wrong = sum(bool(dag[dl.x, dl.y] or dag[dl.y, dl.x]) for dl in res.pc.deletions)  # type: ignore[attr-defined]
            extra = dict(n_deletions=len(res.pc.deletions), n_wrong=int(wrong))  # type: ignore[attr-defined]
        rows.append(_row(network, dataset, n, dag, perm, ss, name, name, res.graph, runtime_s=res.runtime_s,
                         n_tests=res.n_tests, **extra))
        if name == _PC:
            rows.append(_row(network, dataset, n, dag, perm, ss, ORACLE, _PC, oracle_repair(res.pc, dag),  # type: ignore[arg-type]
                             runtime_s=res.runtime_s, n_tests=res.n_tests, **extra))
    return rows


def run_network(network: str, settings: Mapping, out: str | Path, *,
                log: Callable[[str], None] = lambda m: None) -> Path:
    """Run every dataset of one network and write ``out`` (schema :data:`SATURATION`).

    ``settings`` is :func:`saturation_settings`'s slice: ``n``, ``datasets``,
    ``seed``, ``family`` (the family's config entry), ``mechanisms`` and ``algorithms``.  Each
    finished dataset is checkpointed, so a killed job resumes.
    """
    started = utc_now()
    ckpt = Checkpoint(out, config_digest({"network": network, **dict(settings)}))
    t0 = time.perf_counter()
    rows = []
    for k in range(int(settings["datasets"])):
        if k not in ckpt:
            ckpt.save(k, run_dataset(network, k, n=settings["n"], seed=settings["seed"], family=settings["family"],
                                     mechanisms=settings["mechanisms"], algorithms=settings["algorithms"]))
        part = ckpt.get(k)
        rows.extend(part)
        log(f"saturation {network}: dataset {k + 1}/{settings['datasets']} ({time.perf_counter() - t0:.1f} s) "
            + ", ".join(f"{r['method']} F1={r['f1']:.3f}" for r in part))
    prov = provenance_record(stage="saturation", config={"network": network, **dict(settings)},
                             seeds={"entropy": int(settings["seed"]),
                                    "spawn_key": [stable_key("saturation"), stable_key(network), "dataset"]},
                             inputs=[load_network(network).source], started=started)
    cols = {c: [r[c] for r in rows] for c in SATURATION.schema.names}
    write_table(pa.table(cols, schema=SATURATION.schema), out, SATURATION, {PROVENANCE_KEY: dumps(prov)})
    ckpt.finish()
    return Path(out)


def load_saturation(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Read and concatenate ``saturation`` artifacts (an empty frame of the schema for no paths)."""
    frames = [read_table(p, SATURATION).to_pandas() for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SATURATION.schema.names)


def saturation_summary(df: pd.DataFrame, networks: Sequence[str], methods: Sequence[str],
                       boot: Bootstrap | Mapping) -> pd.DataFrame:
    """Mean adjacency F1 per network and method with a bootstrap interval over datasets."""
    from heuresis.causal.bootstrap import bootstrap_mean

    boot = Bootstrap.coerce(boot)

    rows = []
    for net in networks:
        for m in methods:
            part = df[(df["network"] == net) & (df["method"] == m)].sort_values("dataset")
            iv = bootstrap_mean(part["f1"].to_numpy(), **boot.kwargs())
            rows.append(dict(network=net, method=m, d=int(part["d"].iloc[0]) if len(part) else 0,
                             n_arcs=int(part["n_arcs"].iloc[0]) if len(part) else 0, datasets=len(part),
                             failed=int((part["status"] != "ok").sum()), f1=iv.estimate, f1_lo=iv.lo, f1_hi=iv.hi))
    return pd.DataFrame(rows)


def oracle_gain_share(summary: pd.DataFrame, method: str, baseline: str = "pc_kci") -> pd.Series:
    """Per network, the share of the oracle's F1 gain over ``baseline`` that ``method`` recovers.

    ``(F1_method − F1_baseline) / (F1_oracle − F1_baseline)`` on the mean F1s over datasets (a ratio
    of means, as "GES recovers x% of what the oracle gains over PC-KCI"); above 1 when the method
    beats the oracle, NaN when the oracle gains nothing or a method is missing.
    """
    f1 = summary.pivot_table(index="network", columns="method", values="f1", sort=False)
    if method not in f1 or baseline not in f1 or ORACLE not in f1:
        return pd.Series(np.nan, index=f1.index, name=f"{method}_share_of_oracle_gain")
    gain = f1[ORACLE] - f1[baseline]
    share = (f1[method] - f1[baseline]) / gain.where(gain > 0)
    return share.rename(f"{method}_share_of_oracle_gain")


def figure1b_table(summary: pd.DataFrame, networks: Sequence[str], methods: Sequence[str],
                   share_of: str = "ges") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build Figure 1b's numbers as a table: per network the mean F1 of each method.

    Also ``share_of``'s share of the oracle's gain over PC-KCI (:func:`oracle_gain_share`).
    """
    share = oracle_gain_share(summary, share_of)
    rows, disp = [], []
    for net in networks:
        part = summary[summary["network"] == net].set_index("method")
        first = part.iloc[0]
        r = {"network": net, "d": int(first["d"]), "n_arcs": int(first["n_arcs"]), "datasets": int(first["datasets"])}
        d = {"network": net, "d": r["d"], "arcs": r["n_arcs"], "datasets": r["datasets"]}
        for m in methods:
            r[f"f1_{m}"] = float(part.loc[m, "f1"]) if m in part.index else float("nan")
            d[f"{_LABELS.get(m, m)} F1"] = f"{r[f'f1_{m}']:.3f}"
        v = float(share.get(net, np.nan))
        r[share.name] = v
        d[f"{_LABELS.get(share_of, share_of)} share of oracle − PC-KCI"] = "n/a" if np.isnan(v) else f"{v:.0%}"
        rows.append(r)
        disp.append(d)
    return pd.DataFrame(rows), pd.DataFrame(disp)


_LABELS = {"pc_fisherz": "PC-Fisher-z", "pc_kci": "PC-KCI", "ges": "GES", ORACLE: "oracle"}
_COLORS = {"pc_fisherz": "#4c72b0", "pc_kci": "#55a868", "ges": "#8172b2", ORACLE: "#dd8452"}


def figure1b(summary: pd.DataFrame, networks: Sequence[str], methods: Sequence[str], *, n: int):
    """Grouped bars: mean adjacency F1 per network (x) and method, 95% bootstrap whiskers."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(1.1 * len(networks) + 2.4, 3.2))
    width = 0.8 / max(len(methods), 1)
    x0 = np.arange(len(networks))
    for k, m in enumerate(methods):
        part = summary[summary["method"] == m].set_index("network").loc[list(networks)]
        est = part["f1"].to_numpy()
        err = np.array([est - part["f1_lo"].to_numpy(), part["f1_hi"].to_numpy() - est])
        ax.bar(x0 + (k - (len(methods) - 1) / 2) * width, est, width, yerr=err, capsize=2,
               label=_LABELS.get(m, m), color=_COLORS.get(m))
    first = summary.drop_duplicates("network").set_index("network")
    ax.set_xticks(x0, [f"{net}\n(d={first.loc[net, 'd']}, {first.loc[net, 'n_arcs']} arcs)" for net in networks],
                  fontsize=7)
    ax.set_ylabel("adjacency F1 (mean ± 95% CI)")
    ax.set_xlabel(f"public network structure, anonymized; linear-Gaussian data, n = {n}")
    ax.set_ylim(0, 1.05)
    ax.legend(frameon=False, ncol=len(methods), loc="upper center", bbox_to_anchor=(0.5, 1.16), fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of ``saturation``: Figure 1b names a configured family and algorithms on the menu."""
    msgs: list[str] = []
    sat = config["saturation"]
    if sat["family"] not in config["families"]:
        msgs.append(f"config key saturation.family: unknown family {sat['family']!r}; "
                    f"configured: {sorted(config['families'])}")
    menu = config["references"]["algorithms"]
    for a in sat["algorithms"]:
        if a not in menu:
            msgs.append(f"config key saturation.algorithms: {a!r} is not on the menu (references.algorithms: "
                        f"{sorted(menu)})")
    return msgs


# --- job planning -----------------------------------------------------------------------------------
def saturation_settings(config: Mapping) -> dict:
    """The config slice Figure 1b's datasets depend on: sizes, seed, the family's mechanisms, algorithms."""
    sat = config["saturation"]
    fam = config["families"][sat["family"]]
    menu = config["references"]["algorithms"]
    return {"n": int(sat["n"]), "datasets": int(sat["datasets"]), "seed": int(sat["seed"]),
            "family_name": sat["family"], "family": dict(fam),
            "mechanisms": instance_spec(config, sat["family"])["mechanisms"],
            "algorithms": {a: dict(menu[a]) for a in sat["algorithms"]}}
