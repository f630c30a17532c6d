"""Stage 3, headroom (docs/design.md §4.3): BCA selection on dev, the ideal oracle and floors on test.

* **BCA_g** is the menu algorithm with the best mean adjacency F1 over the dev instances of all
  families; **BCA_f** the best on family f's dev instances.  Only dev rows enter the selection
  (ties go to the earlier algorithm in the configured menu order).
* The **oracle** takes PC-KCI's output and restores, as undirected edges, every pair PC-KCI
  wrongly deleted (the hidden label of its deletion log), changing nothing else.
* **Floors** per test instance: the empty graph, the complete graph, PC-KCI, random restoration
  of as many of PC-KCI's deleted pairs as the oracle restores (mean over ``random_restorations``
  draws), and the oracle.

The stage writes per-instance test scores in long form (one row per instance and method), so
every later table computes its means and paired bootstrap intervals from the same numbers.

**Failed runs.**  A reference run that crashed on an instance (``status`` ``failed`` in the
references) is scored as the empty graph, the output a user of that algorithm gets, on dev as on
test (:data:`BCA_FAILURE_RULE`): every algorithm is ranked on the same instances, and an
algorithm that crashes pays for it rather than being ranked on the instances it survived.  The
failures are never silent: the selection table counts them per scope and algorithm
(``dev_n_failed``), every test-score row says whether the run behind it failed (``failed``; the
oracle and random restoration inherit PC-KCI's), and Tables 2, 3, 11 and Figure 1c show the
counts per cell.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from heuresis.artifacts.io import read_table, write_table
from heuresis.artifacts.schemas import HEADROOM_SCORES, HEADROOM_SELECTION
from heuresis.causal.graph import Graph, Relation
from heuresis.causal.metrics import score_graph
from heuresis.stages.instances import load_truth, stable_key
from heuresis.stages.references import graph_of, labelled_log, load_references

__all__ = [
    "BCA_FAILURE_RULE",
    "BCA_RULE_KEY",
    "GLOBAL",
    "build_headroom",
    "config_errors",
    "load_scores",
    "load_selection",
    "restore_pairs",
    "select_bca",
]

GLOBAL = "all"  # the scope name of BCA_g and of rows over all families
BCA_FAILURE_RULE = ("a reference run that crashed on an instance counts as the empty graph (its F1) in the "
                    "BCA selection on dev and in every test score; failures are counted per cell")
BCA_RULE_KEY = "heuresis.bca_failure_rule"   # Parquet metadata of the selection table


def select_bca(refs: pd.DataFrame, menu: Sequence[str]) -> pd.DataFrame:
    """Mean dev F1 per scope (each family, and ``all``) and algorithm, with the chosen one marked.

    Raises if a menu algorithm has no dev rows for a family: a selection over an incomplete sweep
    would silently favour the algorithms that happened to finish.
    """
    dev = refs[(refs["split"] == "dev") & refs["algorithm"].isin(menu)]
    if dev.empty:
        raise ValueError("BCA selection needs dev references; none found (is instances.n_dev 0?)")
    families = sorted(dev["family"].unique())
    rows = []
    for scope in [*families, GLOBAL]:
        part = dev if scope == GLOBAL else dev[dev["family"] == scope]
        # a failed run's row holds the empty graph's scores (references.run_shard): BCA_FAILURE_RULE
        means = part.assign(failed=part["status"] == "failed").groupby("algorithm").agg(
            mean=("f1", "mean"), count=("f1", "count"), failed=("failed", "sum"))
        missing = [a for a in menu if a not in means.index]
        if missing:
            raise ValueError(f"no dev references of {missing} for scope {scope!r}")
        best = max(menu, key=lambda a: (means.loc[a, "mean"], -list(menu).index(a)))
        for a in menu:
            rows.append(dict(scope=scope, algorithm=a, dev_f1=float(means.loc[a, "mean"]),
                             dev_n=int(means.loc[a, "count"]), dev_n_failed=int(means.loc[a, "failed"]),
                             chosen=a == best))
    return pd.DataFrame(rows)


def restore_pairs(graph: Graph, pairs: Sequence[tuple[int, int]]) -> Graph:
    """``graph`` with each pair set to an undirected edge (existing relations elsewhere kept)."""
    out = graph.copy()
    for x, y in pairs:
        out.set(x, y, Relation.UNDIRECTED)
    return out


def _deleted_pairs(row: Mapping, names: Sequence[str], dag: Graph) -> tuple[list[tuple[int, int]], list[bool]]:
    if row["status"] == "failed":   # a crashed PC-KCI run deleted nothing: the oracle restores nothing
        return [], []
    index = {n: k for k, n in enumerate(names)}
    if row["deletions"] is None:
        raise ValueError(f"{row['algorithm']} row of {row['instance_id']} has no deletion log")
    log = labelled_log(row["deletions"], dag)
    return [(index[d["x"]], index[d["y"]]) for d in log], [d["wrong"] for d in log]


def _score_row(family, index, method, algorithm, truth, graph, failed=False, **extra) -> dict:
    s = score_graph(truth.dag, truth.cpdag, graph)
    return dict(family=family, instance=int(index), method=method, algorithm=algorithm, failed=bool(failed), f1=s.f1,
                precision=s.precision, recall=s.recall, shd=float(s.shd), nshd=s.nshd,
                n_deletions=extra.get("n_deletions"), n_wrong_deletions=extra.get("n_wrong_deletions"),
                routed_to_kci=extra.get("routed_to_kci"))


def _routing(row: Mapping) -> dict:
    """``routed_to_kci`` of a router reference row (its details record the branch taken), else nothing."""
    details = json.loads(row.get("details") or "{}")
    return {"routed_to_kci": float(details["branch"] == "kci")} if "branch" in details else {}


def build_headroom(ref_paths: Sequence[str | Path], truth_dirs: Mapping[str, str | Path], menu: Sequence[str],
                   baselines: Sequence[str], *, random_restorations: int, seed: int,
                   pc_algorithm: str = "pc_kci") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Selection table and per-instance test scores (see module docstring).

    ``truth_dirs`` maps each family to its *test* truth folder.
    """
    refs = load_references(ref_paths)
    selection = select_bca(refs, menu)
    chosen = selection[selection["chosen"]].set_index("scope")["algorithm"].to_dict()
    test = refs[refs["split"] == "test"]
    rows = []
    for family, truth_dir in truth_dirs.items():
        truths = load_truth(truth_dir)
        fam = test[test["family"] == family].set_index(["algorithm", "instance"]).sort_index()
        for index, truth in sorted(truths.items()):
            def ref(algorithm, fam=fam, index=index, truth=truth):
                try:
                    return fam.loc[(algorithm, index)]
                except KeyError:
                    raise ValueError(f"no {algorithm} reference for {truth.instance_id}") from None

            pc_row = ref(pc_algorithm).to_dict()
            pc_row.update(algorithm=pc_algorithm, instance_id=truth.instance_id)
            pc_graph = graph_of(pc_row)
            pc_failed = pc_row["status"] == "failed"
            pairs, wrong = _deleted_pairs(pc_row, pc_graph.names, truth.dag)
            n_wrong = int(sum(wrong))
            # a failed PC-KCI run has no deletion log: its counts are unknown, not 0
            stats = (dict(n_deletions=np.nan, n_wrong_deletions=np.nan) if pc_failed else
                     dict(n_deletions=len(pairs), n_wrong_deletions=n_wrong))

            def failed(a):
                return ref(a)["status"] == "failed"

            for a in [*menu, *baselines]:
                r = ref(a)
                rows.append(_score_row(family, index, a, a, truth, graph_of(r), failed(a),
                                       **(stats if a == pc_algorithm else _routing(r))))
            for method, scope in (("bca_g", GLOBAL), ("bca_f", family)):
                a = chosen.get(scope, chosen[GLOBAL])  # a family without dev instances falls back to BCA_g
                rows.append(_score_row(family, index, method, a, truth, graph_of(ref(a)), failed(a)))
            rows.append(_score_row(family, index, "oracle", pc_algorithm, truth,
                                   restore_pairs(pc_graph, [p for p, w in zip(pairs, wrong) if w]), pc_failed,
                                   **stats))
            rows.append(_score_row(family, index, "empty", "", truth, Graph.empty(truth.dag.d)))
            rows.append(_score_row(family, index, "complete", "", truth, Graph.complete(truth.dag.d)))
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stable_key(family), index)))
            draws = []
            for _ in range(random_restorations):
                pick = rng.choice(len(pairs), size=n_wrong, replace=False) if n_wrong else []  # type: ignore[var-annotated]
                draws.append(_score_row(family, index, "random_restoration", pc_algorithm, truth,
                                        restore_pairs(pc_graph, [pairs[k] for k in pick]), pc_failed))
            mean = {k: float(np.mean([d[k] for d in draws])) for k in ("f1", "precision", "recall", "shd", "nshd")}
            rows.append({**draws[0], **mean, **stats})
    scores = pd.DataFrame(rows)
    return selection, scores


def write_headroom(selection: pd.DataFrame, scores: pd.DataFrame, selection_path, scores_path, meta) -> None:
    """Write the stage's two artifacts atomically: the BCA selection and the per-instance test scores.

    Parameters
    ----------
    selection, scores : pandas.DataFrame
        The selection table and the long-form test scores, as :func:`build_headroom` returns them.
    selection_path, scores_path : str or Path
        Destination Parquet files.
    meta : Mapping
        Provenance metadata stored in both; the selection also records :data:`BCA_FAILURE_RULE`.
    """
    write_table(pa.Table.from_pandas(selection, schema=HEADROOM_SELECTION.schema, preserve_index=False),
                selection_path, HEADROOM_SELECTION, {**meta, BCA_RULE_KEY: BCA_FAILURE_RULE})
    write_table(pa.Table.from_pandas(scores, schema=HEADROOM_SCORES.schema, preserve_index=False),
                scores_path, HEADROOM_SCORES, meta)


def load_scores(path) -> pd.DataFrame:
    """Read a ``headroom_scores`` artifact (one row per test instance and method), checked against its schema."""
    return read_table(path, HEADROOM_SCORES).to_pandas()


def load_selection(path) -> pd.DataFrame:
    """Read a ``headroom_selection`` artifact (mean dev F1 per scope and algorithm, the chosen BCA marked)."""
    return read_table(path, HEADROOM_SELECTION).to_pandas()


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of the ``headroom`` section: every foundation model of Table 2 is a known one."""
    from heuresis.causal.foundation import FOUNDATION_MODELS

    return [f"config key headroom.foundation_models.{k}: unknown foundation model {m!r}; "
            f"known: {sorted(FOUNDATION_MODELS)}"
            for k, m in enumerate(config["headroom"]["foundation_models"]) if m not in FOUNDATION_MODELS]
