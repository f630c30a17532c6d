"""Table 2 beside the published one at any scale, from PC-KCI and the oracle on test instances alone.

The workflow's ``results/tables/table2_paper.md`` needs the whole reference sweep (every menu
algorithm and the router on dev and test), because the headroom stage selects BCA on dev before
it scores anything. Table 2's three compared columns — PC-KCI's wrongly deleted true edges per
test instance, the share of test instances with none, and the oracle's adjacency-F1 gain over
PC-KCI with its paired bootstrap interval — depend only on PC-KCI and the oracle on the test
instances. This script computes exactly those, through the code paths the workflow runs:

* instances: :func:`heuresis.stages.instances.write_split` on :func:`heuresis.stages.instances.instance_spec`
  (the ``instances`` rule; same seeds, byte-identical data files);
* PC-KCI: :func:`heuresis.stages.references.run_shard` with the config's ``references.algorithms.pc_kci``
  parameters and ``grades`` (the reference sweep; the algorithm registry builds PC-KCI);
* wrong deletions and the oracle: :func:`heuresis.stages.references.labelled_log`,
  :func:`heuresis.stages.headroom.restore_pairs` and :func:`heuresis.causal.metrics.score_graph`, as the headroom
  stage does (a failed PC-KCI run deletes nothing and has unknown counts);
* the tables: :func:`heuresis.stages.headroom_targets.table2` on those score rows with the config's ``bootstrap``
  settings, then :func:`heuresis.targets.published.table2_vs_paper` (the ``table2`` and ``table2_paper``
  rules). ``tests/test_table2_scale.py`` checks on the tests' tiny config that the numbers equal
  the workflow's own ``table2_paper``.

Checkpointing: each finished instance's score rows go to ``<out>/<family>.csv`` (written
atomically after every instance, with a key over the instance's data digest and PC-KCI's
settings), so an interrupted run resumes at the next instance; a row whose key no longer matches
(another config) is redone. Instances are visited round-robin over the families (instance 0 of
every family, then instance 1, ...), so a partial run has about as many instances per family.
The work files (instances, truth, per-instance PC-KCI references) live under ``--work``.

Usage (paper config: 32 test instances x 6 families)::

    PYTHONPATH=src nice -n 19 python benchmarks/table2_scale.py run
    PYTHONPATH=src python benchmarks/table2_scale.py table      # tables from what is done so far
    PYTHONPATH=src python benchmarks/table2_scale.py priors     # the same columns per graph prior

``run`` ends by writing the tables; ``table`` writes them from the finished instances at any
time (a partial run says how many instances each family has). Outputs in ``--out``:
``<family>.csv`` (score rows, two per instance: ``pc_kci`` and ``oracle``), ``table2.{parquet,md,tex}``
and ``table2_paper.{parquet,md,tex}``.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

from heuresis.artifacts.provenance import provenance_record  # noqa: E402
from heuresis.artifacts.report import atomic_write_text, write_paper_table  # noqa: E402
from heuresis.causal.metrics import score_graph  # noqa: E402
from heuresis.config import config_digest  # noqa: E402
from heuresis.preflight import load_config  # noqa: E402
from heuresis.stages.headroom import restore_pairs  # noqa: E402
from heuresis.stages.headroom_targets import table2  # noqa: E402
from heuresis.stages.instances import instance_spec, load_truth, write_split  # noqa: E402
from heuresis.stages.references import graph_of, labelled_log, load_references, run_shard  # noqa: E402
from heuresis.targets.published import load_published_table2, table2_vs_paper  # noqa: E402

ALGORITHM = "pc_kci"   # the algorithm of Table 2 (and the one the oracle repairs)
SPLIT = "test"         # Table 2 is on test instances
#: the score-row columns the headroom stage writes (heuresis.artifacts.schemas.HEADROOM_SCORES), then ours
SCORE_COLUMNS = ["family", "instance", "method", "algorithm", "failed", "f1", "precision", "recall", "shd", "nshd",
                 "n_deletions", "n_wrong_deletions", "routed_to_kci"]
EXTRA_COLUMNS = ["instance_id", "prior", "status", "runtime_s", "n_tests", "key"]


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())} UTC] {msg}", flush=True)


def score_rows(family: str, index: int, ref: dict, truth) -> list[dict]:
    """The headroom stage's ``pc_kci`` and ``oracle`` score rows of one test instance.

    ``ref`` is PC-KCI's references row, ``truth`` the instance's :class:`heuresis.stages.instances.Truth`.
    As in :func:`heuresis.stages.headroom.build_headroom`: the deletion log is labelled against the true
    DAG (:func:`heuresis.stages.references.labelled_log`); the oracle restores every wrongly deleted pair
    as an undirected edge; a failed run has no log, so its counts are unknown (NaN) and the oracle
    restores nothing.
    """
    graph = graph_of(ref)
    failed = ref["status"] == "failed"
    if failed:
        pairs, wrong = [], []
    else:
        if ref["deletions"] is None:
            raise ValueError(f"{ALGORITHM} row of {truth.instance_id} has no deletion log")
        pos = {name: k for k, name in enumerate(graph.names)}
        log = labelled_log(ref["deletions"], truth.dag)
        pairs, wrong = [(pos[d["x"]], pos[d["y"]]) for d in log], [bool(d["wrong"]) for d in log]
    stats = (dict(n_deletions=np.nan, n_wrong_deletions=np.nan) if failed else
             dict(n_deletions=len(pairs), n_wrong_deletions=int(sum(wrong))))
    oracle = restore_pairs(graph, [p for p, w in zip(pairs, wrong) if w])
    rows = []
    for method, g in ((ALGORITHM, graph), ("oracle", oracle)):
        s = score_graph(truth.dag, truth.cpdag, g)
        rows.append(dict(family=family, instance=int(index), method=method, algorithm=ALGORITHM, failed=bool(failed),
                         f1=s.f1, precision=s.precision, recall=s.recall, shd=float(s.shd), nshd=s.nshd,
                         routed_to_kci=np.nan, **stats))
    return rows


def _csv(out: Path, family: str) -> Path:
    return out / f"{family}.csv"


def read_scores(out: Path, families) -> pd.DataFrame:
    """Score rows of every finished instance of ``families`` (their CSVs under ``out``)."""
    frames = [pd.read_csv(_csv(out, f), float_precision="round_trip") for f in families if _csv(out, f).exists()]
    if not frames:
        return pd.DataFrame(columns=SCORE_COLUMNS + EXTRA_COLUMNS)
    df = pd.concat(frames, ignore_index=True)
    df["failed"] = df["failed"].astype(bool)
    return df


def _write_csv(out: Path, family: str, rows: list[dict]) -> None:
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS + EXTRA_COLUMNS).sort_values(["instance", "method"], kind="stable")
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    atomic_write_text(_csv(out, family), buf.getvalue())


def _instance_key(cfg: dict, family: str, truth) -> str:
    """What one instance's score rows depend on: its data and truth, PC-KCI's settings, the grades."""
    return config_digest({"algorithm": ALGORITHM, "params": dict(cfg["references"]["algorithms"][ALGORITHM]),
                          "grades": list(cfg["grades"]), "spec": instance_spec(cfg, family),
                          "data_sha256": truth.record["data_sha256"], "instance_id": truth.instance_id})


def run(cfg: dict, families: list[str], n: int, out: Path, work: Path) -> None:
    """Generate each family's first ``n`` test instances, run PC-KCI on each, checkpoint per instance."""
    params = dict(cfg["references"]["algorithms"][ALGORITHM])
    state = {}
    for fam in families:
        data_dir, truth_dir = work / "instances" / fam / SPLIT, work / "truth" / fam / SPLIT
        # the instances rule's call: deterministic, byte-identical files on every run
        write_split(instance_spec(cfg, fam), fam, SPLIT, int(cfg["instances"][f"n_{SPLIT}"]), data_dir, truth_dir)
        truths = load_truth(truth_dir)
        old = read_scores(out, [fam])
        keys = {i: _instance_key(cfg, fam, t) for i, t in truths.items()}
        kept = old[[keys.get(int(r.instance)) == r.key for r in old.itertuples()]] if len(old) else old
        state[fam] = dict(data=data_dir, truth=truth_dir, truths=truths, keys=keys,
                          rows=kept.to_dict("records"), done={int(i) for i in kept["instance"]})
        _say(f"{fam}: {len(state[fam]['done'])} of {n} test instances already done")
    t0, ran = time.perf_counter(), 0
    for i in range(n):                      # round-robin: a partial run is balanced over families
        for fam in families:
            st = state[fam]
            if i in st["done"]:
                continue
            truth = st["truths"][i]
            ref_path = work / "references" / ALGORITHM / fam / SPLIT / f"instance-{i:04d}.parquet"
            run_shard(ALGORITHM, params, fam, SPLIT, [i], st["data"], st["truth"], ref_path, grades=cfg["grades"])
            ref = load_references([ref_path]).iloc[0].to_dict()
            rows = score_rows(fam, i, ref, truth)
            extra = dict(instance_id=truth.instance_id, prior=truth.record["prior"], status=ref["status"],
                         runtime_s=float(ref["runtime_s"]), n_tests=int(ref["n_tests"]), key=st["keys"][i])
            st["rows"] += [{**r, **extra} for r in rows]
            st["done"].add(i)
            _write_csv(out, fam, st["rows"])
            ran += 1
            _say(f"{truth.instance_id}: {ref['status']}, {rows[0]['n_wrong_deletions']} wrong deletions, "
                 f"F1 {rows[0]['f1']:.3f} -> oracle {rows[1]['f1']:.3f}, PC-KCI {ref['runtime_s']:.1f} s "
                 f"({ran} run, {time.perf_counter() - t0:.0f} s)")


def tables(cfg: dict, families: list[str], out: Path) -> pd.DataFrame:
    """Write Table 2 and Table 2 beside the published one from the finished instances; return the latter."""
    scores = read_scores(out, families)
    present = [f for f in families if (scores["family"] == f).any()]
    if not present:
        raise SystemExit(f"no finished instance of {families} under {out}")
    scores = scores[SCORE_COLUMNS]
    boot = dict(cfg["bootstrap"])
    numbers, display = table2(scores, {f: cfg["families"][f] for f in present}, boot)
    published = load_published_table2()
    cmp_numbers, cmp_display = table2_vs_paper(numbers, published)
    prov = provenance_record(stage="benchmarks/table2_scale", config={"bootstrap": boot, "published_table2": published},
                             seeds={"bootstrap": boot["seed"]}, inputs=[_csv(out, f) for f in present])
    counts = ", ".join(f"{f} {int(((scores['family'] == f) & (scores['method'] == ALGORITHM)).sum())}" for f in present)
    write_paper_table(numbers, display, out / "table2", provenance=prov,
                      caption=f"Table 2 from PC-KCI and the oracle alone (test instances: {counts}).")
    write_paper_table(cmp_numbers, cmp_display, out / "table2_paper", provenance=prov,
                      caption=f"Table 2 beside the published one (test instances: {counts}; source: "
                              f"{published['source']}).")
    return cmp_numbers


def by_prior(out: Path, families: list[str]) -> pd.DataFrame:
    """Per family and graph prior (the truth's ``prior``): instances, mean wrong deletions, share
    with none and mean oracle - PC-KCI F1 (no interval: a diagnostic of the finished instances)."""
    scores = read_scores(out, families)
    pc = scores[scores["method"] == ALGORITHM].set_index(["family", "instance"])
    oracle = scores[scores["method"] == "oracle"].set_index(["family", "instance"])
    df = pc.assign(gain=oracle["f1"] - pc["f1"]).reset_index()
    rows = []
    for (fam, prior), part in df.groupby(["family", "prior"], sort=False):
        w = part.loc[~part["failed"], "n_wrong_deletions"].astype(float)
        rows.append(dict(family=fam, prior=prior, n_instances=len(part), wrong_deletions_mean=w.mean(),
                         share_without_wrong_deletion=float((w == 0).mean()), oracle_minus_pc_kci=part["gain"].mean()))
    order = {f: k for k, f in enumerate(families)}
    return pd.DataFrame(rows).sort_values(["family", "prior"], key=lambda c: c.map(order) if c.name == "family" else c)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["run", "table", "priors"])
    ap.add_argument("--configfile", nargs="+", default=[str(ROOT / "config/config.yaml")],
                    help="config files, later ones merged over earlier ones (as snakemake's --configfile "
                         "over the Snakefile's config/config.yaml: list config/config.yaml first)")
    ap.add_argument("--families", nargs="+", help="default: every configured family")
    ap.add_argument("--instances", type=int, help="first N test instances per family (default: instances.n_test)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/table2_scale",
                    help="per-family CSVs (the checkpoint) and the tables")
    ap.add_argument("--work", type=Path, default=ROOT / "results/table2_scale",
                    help="instances, truth and PC-KCI references")
    args = ap.parse_args(argv)
    cfg = load_config(*args.configfile)
    families = args.families or list(cfg["families"])
    unknown = [f for f in families if f not in cfg["families"]]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; configured: {list(cfg['families'])}")
    n_test = int(cfg["instances"][f"n_{SPLIT}"])
    n = n_test if args.instances is None else args.instances
    if not 0 < n <= n_test:
        raise SystemExit(f"--instances {n}: must be in 1..{n_test} (instances.n_{SPLIT})")
    if args.command == "priors":
        print(by_prior(args.out, families).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return
    if args.command == "run":
        t0 = time.perf_counter()
        run(cfg, families, n, args.out, args.work)
        _say(f"run finished in {time.perf_counter() - t0:.0f} s")
    cmp = tables(cfg, families, args.out)
    print((args.out / "table2_paper.md").read_text())
    print(cmp[["family", "n_instances"]].to_string(index=False))


if __name__ == "__main__":
    sys.exit(main())
