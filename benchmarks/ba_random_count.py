"""One more reading of the BA prior for the family study: a random number of attachments with mean k/2.

The generator's BA prior attaches the t-th node of the causal order to m = k/2 earlier nodes
(at k = 2 exactly one: an out-tree). "Attaches to about k/2 earlier nodes" can also be read as a
random count with mean k/2; this draws m_t uniformly from {0, ..., k} (capped at t; at k = 2:
none, one or two parents with equal probability, so the tree's expected number of edges, with
colliders) and keeps everything else of ``heuresis.stages.instances.sample_dag`` (preferential choice by
degree + 1 among the earlier nodes). The graph prior is drawn before the graph, so every index
keeps the baseline's prior: only the BA instances change, and only they are run. PC-KCI at
alpha = 0.05 on dev instances (as ``benchmarks/family_study.py``, whose ``run_instance`` this
uses); rows go to ``--out`` (CSV, the study's fields, choice ``ba_random_count``), an interrupted
run resumes, and the summary compares the BA instances with the baseline's BA instances of the
same indices (from ``benchmarks/family_study.csv``).

Usage::

    PYTHONPATH=src nice -n 19 python benchmarks/ba_random_count.py --instances 12
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("family_study", ROOT / "benchmarks/family_study.py")
fs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fs)

CHOICE = "ba_random_count"


@contextlib.contextmanager
def random_count():
    """BA with m_t ~ U{0, ..., k} attachments (mean k/2) for the t-th node; ER untouched."""
    import heuresis.stages.instances as inst

    orig = inst.sample_dag

    def sample_dag(rng, d, prior, expected_degree, ba_orientation):
        if prior != "ba":
            return orig(rng, d, prior, expected_degree, ba_orientation)
        k = float(expected_degree)
        if k != int(k):
            raise ValueError(f"ba_random_count needs an integer expected degree, got {k}")
        order = rng.permutation(d)
        adj = np.zeros((d, d), dtype=np.int8)
        degree = np.zeros(d)
        for t in range(1, d):
            m = min(t, int(rng.integers(0, int(k) + 1)))
            if m == 0:
                continue
            earlier = order[:t]
            w = degree[earlier] + 1.0
            chosen = rng.choice(earlier, size=m, replace=False, p=w / w.sum())
            adj[chosen, order[t]] = 1
            degree[chosen] += 1
            degree[order[t]] += m
        return adj, order

    inst.sample_dag = sample_dag
    try:
        yield
    finally:
        inst.sample_dag = orig


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=12, help="dev indices per family (only the BA ones run)")
    ap.add_argument("--config", default=str(ROOT / "config/config.yaml"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/ba_random_count.csv"))
    ap.add_argument("--baseline", default=str(ROOT / "benchmarks/family_study.csv"))
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args(argv)
    cfg = fs.study_config(argparse.Namespace(config=args.config, d=10, n=600), "attachment")
    out = Path(args.out)
    rows = list(csv.DictReader(open(out))) if out.exists() else []
    done = {(r["family"], int(r["index"])) for r in rows}
    with open(out, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fs.FIELDS)
        if not rows:
            w.writeheader()
        for i in range(args.instances):          # round-robin over families: a partial run is balanced
            for fam in fs.FAMILIES:
                if (fam, i) in done:
                    continue
                with random_count():
                    inst = fs.generate_instance(fs.instance_spec(cfg, fam), fam, "dev", i)
                    if inst.prior != "ba":
                        continue
                    row = dict(choice=CHOICE, family=fam, index=i, **fs.run_instance(cfg, fam, i, args.alpha))
                w.writerow(row)
                fh.flush()
                rows.append({k: str(v) for k, v in row.items()})
                print(f"{fam} dev {i}: {row['n_edges']} edges, {row['wrong_deleted']} wrong deletions "
                      f"({row['seconds']} s)", flush=True)
    base = {(r["family"], int(r["index"])): r for r in csv.DictReader(open(args.baseline))
            if r["choice"] == "baseline" and r["prior"] == "ba"}
    print("| family | BA dev instances | edges | wrong deletions / BA instance: random count | tree (baseline) |")
    print("| --- | --- | --- | --- | --- |")
    for fam in fs.FAMILIES:
        r = [x for x in rows if x["family"] == fam and int(x["index"]) < args.instances]
        b = [base[(fam, int(x["index"]))] for x in r if (fam, int(x["index"])) in base]
        if not r:
            continue
        m, se = fs._mean_se([int(x["wrong_deleted"]) for x in r])
        bm, bse = fs._mean_se([int(x["wrong_deleted"]) for x in b]) if b else (np.nan, np.nan)
        edges = np.mean([int(x["n_edges"]) for x in r])
        print(f"| {fam} | {len(r)} | {edges:.1f} | {m:.2f} ± {se:.2f} | {bm:.2f} ± {bse:.2f} ({len(b)}) |")


if __name__ == "__main__":
    main()
