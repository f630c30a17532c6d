"""Stage 2, reference sweeps (docs/design.md §4.1-4.2): every menu algorithm on every instance.

One job runs one algorithm on one shard of a family's split and writes one Parquet
(:data:`heuresis.artifacts.schemas.REFERENCES`): the output graph, runtime, CI-test count, scores against
the truth and, for PC variants, the deletion log (pair, set, test, p-value, grade).  Finished
instances are checkpointed, so a killed job resumes where it stopped; a crash on an instance is
recorded as ``failed`` (empty graph, scored as such), never dropped, and counted wherever it
enters a number (:mod:`heuresis.stages.headroom`: the BCA selection and Tables 2, 3, 11, Figure 1c).
A crash is a property of the algorithm on that data, not of the infrastructure: rerunning does
not retry it.

The hidden label of a deletion — *wrong*: the pair is adjacent in the true DAG — is not stored
here: it is a fact of the truth (``results/truth/...``), read with :func:`labelled_log` by the
stages that may see the truth (headroom, repairs, analysis).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from heuresis.artifacts.io import Checkpoint, read_table, write_table
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.schemas import REFERENCES
from heuresis.causal.grades import grade_of, validate_grades
from heuresis.causal.graph import Graph
from heuresis.causal.metrics import score_graph
from heuresis.config.loading import config_digest
from heuresis.stages.instances import Truth, load_data, load_truth

__all__ = [
    "config_errors",
    "grade_table",
    "labelled_log",
    "load_references",
    "reference_batches",
    "reference_row",
    "reference_shard_indices",
    "reference_shards",
    "run_shard",
    "shard_indices",
    "shards",
]


def shards(n_instances: int, shard_size: int) -> list[int]:
    """Shard numbers of a split (instances ``[k * size, (k + 1) * size)`` form shard k)."""
    return list(range(math.ceil(n_instances / shard_size))) if n_instances else []


def shard_indices(shard: int, n_instances: int, shard_size: int) -> list[int]:
    """List the instance indices of ``shard`` (a ValueError when the shard lies beyond the split)."""
    lo = shard * shard_size
    if not 0 <= lo < max(n_instances, 1):
        raise ValueError(f"shard {shard} is out of range for {n_instances} instances of size {shard_size}")
    return list(range(lo, min(n_instances, lo + shard_size)))


def grade_table(grades: Sequence[Mapping]) -> tuple[tuple[float, str], ...]:
    """Config grades (list of {upto, label}) as the validated table :mod:`heuresis.causal.grades` uses."""
    return validate_grades([(g["upto"], g["label"]) for g in grades])


def reference_row(algorithm: str, family: str, split: str, index: int, truth: Truth, graph: Graph, *,
                  status: str = "ok", error: str = "", runtime_s: float = 0.0, n_tests: int = 0,
                  details: Mapping | None = None, deletions=None, grades=None) -> dict:
    """One row of the references table: the graph, its scores and the (unlabelled) deletion log."""
    s = score_graph(truth.dag, truth.cpdag, graph)
    names = graph.names
    log = None
    if deletions is not None:
        log = [dict(x=names[dl.x], y=names[dl.y], sepset=[names[k] for k in dl.sepset], test=dl.test,
                    pvalue=float(dl.pvalue), level=int(dl.level),
                    grade=grade_of(dl.pvalue, grades) if grades else dl.grade)
               for dl in deletions]
    return dict(algorithm=algorithm, family=family, split=split, instance=index, instance_id=truth.instance_id,
                status=status, error=error, graph=graph.amat.ravel().tolist(), edges="; ".join(graph.to_lines()),
                runtime_s=float(runtime_s), n_tests=int(n_tests), f1=s.f1, precision=s.precision, recall=s.recall,
                shd=s.shd, nshd=s.nshd, n_edges=s.n_edges, details=json.dumps(details or {}, sort_keys=True,
                                                                              default=str),
                deletions=log)


def run_shard(algorithm: str, params: Mapping, family: str, split: str, indices: Sequence[int],
              data_dir: str | Path, truth_dir: str | Path, out: str | Path, *, grades: Sequence[Mapping],
              log: Callable[[str], None] = lambda m: None) -> Path:
    """Run one algorithm on the given instances and write the shard's references table."""
    from heuresis.causal.algorithms import make_algorithm

    started = utc_now()
    algo = make_algorithm(algorithm, **dict(params))
    table = grade_table(grades)
    truth = load_truth(truth_dir)
    key = config_digest({"algorithm": algorithm, "params": dict(params), "grades": list(grades),
                         "truth": [truth[i].record["data_sha256"] for i in indices]})
    ckpt = Checkpoint(out, key)
    if len(ckpt):
        log(f"{algorithm} {family}/{split}: resuming, {len(ckpt)} of {len(indices)} instances already done")
    t0 = time.perf_counter()
    for done, i in enumerate(indices, 1):
        if i in ckpt:
            continue
        data = load_data(data_dir, i)
        try:
            res = algo.run(data)
        except Exception as exc:  # a crash is a recorded result, not a lost instance
            row = reference_row(algorithm, family, split, i, truth[i], Graph.empty(data.shape[1]), status="failed",
                                error=f"{type(exc).__name__}: {exc}")
            log(f"{algorithm} {truth[i].instance_id}: FAILED {type(exc).__name__}: {exc}")
        else:
            pcres = getattr(res, "pc", None)
            row = reference_row(algorithm, family, split, i, truth[i], res.graph, runtime_s=res.runtime_s,
                                n_tests=res.n_tests, details=res.details,
                                deletions=pcres.deletions if pcres is not None else None, grades=table)
        ckpt.save(i, row)
        log(f"{algorithm} {family}/{split}: {done}/{len(indices)} instances ({time.perf_counter() - t0:.1f} s), "
            f"{truth[i].instance_id} F1={row['f1']:.3f} in {row['runtime_s']:.2f} s")
    rows = ckpt.values(indices)
    prov = provenance_record(stage="references", config={"algorithm": algorithm, "params": dict(params),
                                                         "grades": list(grades)},
                             inputs=[Path(truth_dir) / "graphs.parquet", Path(data_dir) / "index.parquet"],
                             started=started)
    cols = {name: [r[name] for r in rows] for name in REFERENCES.schema.names}
    write_table(pa.table(cols, schema=REFERENCES.schema), out, REFERENCES, {PROVENANCE_KEY: dumps(prov)})
    ckpt.finish()
    return Path(out)


def load_references(paths: Sequence[str | Path]) -> pd.DataFrame:  # type: ignore[name-defined]  # noqa: F821
    """Concatenate reference shards into one DataFrame (graph as an int8 array per row)."""
    import pandas as pd

    frames = [read_table(p, REFERENCES).to_pandas() for p in paths]
    if not frames:
        return pd.DataFrame(columns=REFERENCES.schema.names)
    df = pd.concat(frames, ignore_index=True)
    return df


def labelled_log(deletions, dag: Graph) -> list[dict]:
    """Return a references row's deletion log, each entry with its hidden label ``wrong``.

    Labels come from :func:`heuresis.causal.algorithms.pc.label_deletions` against ``dag``, the true DAG from
    ``results/truth``.
    """
    from types import SimpleNamespace

    from heuresis.causal.algorithms.pc import label_deletions

    log = list(deletions if deletions is not None else [])
    names = list(dag.names)
    pairs = [SimpleNamespace(x=names.index(d["x"]), y=names.index(d["y"])) for d in log]
    return [{**d, "wrong": w} for d, w in zip(log, label_deletions(pairs, dag))]  # type: ignore[arg-type]


def graph_of(row: Mapping) -> Graph:
    """The output graph stored in a references row."""
    g = np.asarray(row["graph"], dtype=np.int8)
    d = int(round(math.sqrt(g.size)))
    return Graph(g.reshape(d, d))


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of ``references`` and ``grades`` a schema cannot say, each naming its config key.

    The menu and the baselines name registered algorithms with valid parameters and do not
    overlap; each batch names swept algorithms, none twice; the grades are ordered.
    """
    from heuresis.causal.algorithms import ALGORITHMS, make_algorithm
    from heuresis.causal.algorithms.base import COST_CLASSES

    msgs: list[str] = []
    refs = config["references"]
    for section in ("algorithms", "baselines"):
        for name, params in refs[section].items():
            key = f"references.{section}.{name}"
            if name not in ALGORITHMS:
                msgs.append(f"config key {key}: unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
                continue
            try:
                make_algorithm(name, **params)
            except ValueError as exc:
                msgs.append(f"config key {key}: {exc}")
            cost = ALGORITHMS.lookup(name).cost_class
            if cost not in COST_CLASSES:
                msgs.append(f"config key {key}: algorithm {name!r} declares cost_class {cost!r}; known: "
                            f"{sorted(COST_CLASSES)}")
    overlap = set(refs["algorithms"]) & set(refs["baselines"])
    if overlap:
        msgs.append(f"config key references.baselines: {sorted(overlap)} also on the menu (references.algorithms)")
    swept = [*refs["algorithms"], *refs["baselines"]]
    seen: dict[str, int] = {}
    for k, batch in enumerate(refs["batches"]):
        for name in batch:
            if name not in swept:
                msgs.append(f"config key references.batches.{k}: {name!r} is neither on the menu nor a baseline")
            elif name in seen:
                msgs.append(f"config key references.batches.{k}: {name!r} is already in batch {seen[name]}")
            seen.setdefault(name, k)
    try:
        validate_grades([(g["upto"], g["label"]) for g in config["grades"]])
    except ValueError as exc:
        msgs.append(f"config key grades: {exc}")
    return msgs


# --- job planning -----------------------------------------------------------------------------------
def reference_batches(config: Mapping) -> list[list[str]]:
    """The swept algorithms grouped into jobs: the configured batches, then each unlisted one alone."""
    refs = config["references"]
    swept = [*refs["algorithms"], *refs["baselines"]]
    batches = [[a for a in b if a in swept] for b in refs["batches"]]
    listed = {a for b in batches for a in b}
    return [b for b in batches if b] + [[a] for a in swept if a not in listed]


def reference_shards(config: Mapping, split: str) -> list[int]:
    """The shard numbers of a split's reference jobs (``references.shard_size`` instances each)."""
    return shards(int(config["instances"][f"n_{split}"]), int(config["references"]["shard_size"]))


def reference_shard_indices(config: Mapping, split: str, shard: int) -> list[int]:
    """The instance indices of one reference shard of a split."""
    return shard_indices(int(shard), int(config["instances"][f"n_{split}"]), int(config["references"]["shard_size"]))
