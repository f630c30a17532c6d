"""Study: which unstated generator choice makes the families as hard for PC-KCI as the paper's.

For each *choice* (one departure from the paper configuration at a time) and each family it
affects, this generates dev instances (d = 10, n = 600 by default, the paper config's), runs
PC-KCI at alpha = 0.05 and records per instance the number of true edges PC-KCI wrongly
deleted and the oracle's gain over PC-KCI in adjacency F1 (the quantities of Table 2). The
baseline (the paper configuration with generator version 1's BA reading, ``graph.ba_orientation:
attachment``) runs on every family; a choice runs only on the families whose instances it changes.
Dev instances only: the test split is never generated. The study selected the generator's default
(``ba_random_orientation``, i.e. ``ba_orientation: random``).

Each finished instance is appended to ``--out`` (CSV), so an interrupted run resumes where it
stopped; ``--table`` prints the study table (mean ± standard error over instances) from that
file against the published Table 2 (``src/heuresis/data/table2_published.yaml``).

Usage::

    PYTHONPATH=src nice -n 15 python benchmarks/family_study.py run --instances 12
    PYTHONPATH=src python benchmarks/family_study.py table
    PYTHONPATH=src nice -n 15 python benchmarks/family_study.py router --instances 100
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import dataclasses
import os
import sys
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from heuresis.causal.algorithms.pc import label_deletions, oracle_repair, pc  # noqa: E402
from heuresis.causal.ci import make_ci_test  # noqa: E402
from heuresis.causal.mechanisms import MECHANISMS  # noqa: E402
from heuresis.causal.metrics import adjacency_scores  # noqa: E402
from heuresis.stages.instances import generate_instance, instance_spec  # noqa: E402

FAMILIES = ["lg", "anm", "hetero", "wild", "mixed", "gauntlet"]
LINEAR = ("linear", "linear_t3")
MAPS = ("piecewise", "sigmoid", "sigmoid_hetero", "quadratic", "abs", "fourier")


# --- the choices ---------------------------------------------------------------------------
@contextlib.contextmanager
def _parents(kinds, standardize: bool):
    """Temporarily register ``kinds`` with ``standardize_parents=standardize``."""
    saved = {k: MECHANISMS[k] for k in kinds}
    try:
        for k in kinds:
            dict.__setitem__(MECHANISMS, k, dataclasses.replace(saved[k], standardize_parents=standardize))
        yield
    finally:
        for k, v in saved.items():
            dict.__setitem__(MECHANISMS, k, v)


@contextlib.contextmanager
def _kci_width(factor: float):
    """Temporarily multiply KCI's empirical kernel widths (unconditional and conditional) by ``factor``."""
    import heuresis.causal.ci.kci as kci

    saved = kci.hsic_theta, kci.kci_theta
    try:
        kci.hsic_theta = lambda n, dim=1: saved[0](n, dim) / factor ** 2
        kci.kci_theta = lambda n, dim_z: saved[1](n, dim_z) / factor ** 2
        yield
    finally:
        kci.hsic_theta, kci.kci_theta = saved


@contextlib.contextmanager
def _ba(reading: str):
    """Temporarily replace one prior's reading (``er_k2``: ER's; else BA's); the other prior's draws are
    untouched (the same instances as the baseline's)."""
    import heuresis.stages.instances as inst

    orig = inst.sample_dag

    def sample_dag(rng, d, prior, expected_degree, ba_orientation):
        if reading == "er_k2" and prior == "er":   # ER with k edges per node (about 2d edges), BA untouched
            return orig(rng, d, prior, 2 * float(expected_degree), ba_orientation)
        if prior != "ba" or reading == "er_k2":
            return orig(rng, d, prior, expected_degree, ba_orientation)
        if reading == "m_k":          # each new node attaches to k (not k/2) earlier nodes
            return orig(rng, d, prior, 2 * float(expected_degree), ba_orientation)
        raise ValueError(f"unknown BA reading {reading!r}")

    inst.sample_dag = sample_dag
    try:
        yield
    finally:
        inst.sample_dag = orig


def _set_kind(cfg, kinds, **entry):
    for fam in cfg["families"].values():
        for k in kinds:
            if k in fam["kinds"] and ("noise" in fam["kinds"][k] or "noise" not in entry):
                fam["kinds"][k].update(entry)
    return cfg


def _all_kinds_with_noise(cfg):
    return sorted({k for f in cfg["families"].values() for k, v in f["kinds"].items() if "noise" in v})


def _edit(fn):
    def apply(cfg):
        cfg = copy.deepcopy(cfg)
        fn(cfg)
        return cfg
    return apply


def _gauntlet_map_std(cfg):
    for v in cfg["families"]["gauntlet"]["kinds"].values():
        if "noise" in v:
            v["standardize_output"] = True


# name -> (description, families changed, config edit, context manager factory)
# (the graph prior's mix is read off the baseline rows, split by their recorded prior)
CHOICES = {
    "baseline": ("paper config with generator version 1's BA reading (ba_orientation: attachment)", FAMILIES,
                 _edit(lambda c: None), contextlib.nullcontext),
    "linear_std_parents": ("linear kinds act on standardized parents", ["lg", "wild", "mixed"],
                           _edit(lambda c: None), lambda: _parents(LINEAR, True)),
    "nonlinear_raw_parents": ("nonlinear kinds act on raw parents",
                              ["anm", "hetero", "wild", "mixed", "gauntlet"],
                              _edit(lambda c: None),
                              lambda: _parents([k for k in MECHANISMS if k not in LINEAR], False)),
    "all_signal_std": ("every map output with a noise scale standardized before the noise is added",
                       ["lg", "anm", "wild", "mixed", "gauntlet"],
                       _edit(lambda c: _set_kind(c, _all_kinds_with_noise(c), standardize_output=True)),
                       contextlib.nullcontext),
    "gauntlet_map_std": ("gauntlet map outputs standardized (as wild's)", ["gauntlet"],
                         _edit(_gauntlet_map_std), contextlib.nullcontext),
    "roots_unit": ("every family's roots N(0, 1)", ["lg", "anm", "wild", "mixed"],
                   _edit(lambda c: [f.update(root_noise=[1.0, 1.0]) for f in c["families"].values()]),
                   contextlib.nullcontext),
    "degree_4": ("expected degree 4 (about 2d edges: 'ER2/SF2' of the NOTEARS literature)", FAMILIES,
                 _edit(lambda c: c["graph"].update(expected_degree=4)), contextlib.nullcontext),
    "maps_sharper": ("map constants sharper: Fourier omega ~ U[1, 3], sigmoid gains ~ U[2, 5]",
                     ["wild", "gauntlet"],
                     _edit(lambda c: (c["mechanisms"]["fourier"].update(frequency=[1.0, 3.0]),
                                      c["mechanisms"]["sigmoid"].update(gain=[2.0, 5.0]),
                                      c["mechanisms"]["sigmoid_hetero"].update(gain=[2.0, 5.0]))),
                     contextlib.nullcontext),
    "ba_m_k": ("BA: each new node attaches to k = 2 earlier nodes (not k/2 = 1: no longer a tree)", FAMILIES,
               _edit(lambda c: None), lambda: _ba("m_k")),
    "ba_random_orientation": ("BA tree (k/2 = 1 per new node) oriented by an independent uniformly random causal "
                              "order (colliders at hubs): `graph.ba_orientation: random`, the default since "
                              "generator version 2", FAMILIES, _edit(lambda c: c["graph"].update(ba_orientation="random")),
                              contextlib.nullcontext),
    "er_k2": ("ER with k = 2 edges per node (p = 2k/(d-1), about 2d edges; 'ER2' of the NOTEARS literature), BA "
              "unchanged", FAMILIES, _edit(lambda c: None), lambda: _ba("er_k2")),
    "kci_width_x2": ("KCI kernel widths twice causal-learn's empirical widths (a CI setting)", FAMILIES,
                     _edit(lambda c: None), lambda: _kci_width(2.0)),
}

# choices that change only the instances of one prior; the others are the baseline's
ONE_PRIOR = {"ba_m_k": "ba", "ba_random_orientation": "ba", "er_k2": "er"}

FIELDS = ["choice", "family", "index", "prior", "n_edges", "n_deleted", "wrong_deleted", "f1_pc_kci", "f1_oracle",
          "oracle_gain", "seconds"]


def run_instance(cfg, family, index, alpha):
    spec = instance_spec(cfg, family)
    inst = generate_instance(spec, family, "dev", index)
    t0 = time.perf_counter()
    res = pc(inst.data, make_ci_test("kci", inst.data), alpha)
    secs = time.perf_counter() - t0
    wrong = sum(label_deletions(res.deletions, inst.dag))
    f1_pc = adjacency_scores(inst.dag, res.graph).f1
    f1_or = adjacency_scores(inst.dag, oracle_repair(res, inst.dag)).f1
    return dict(prior=inst.prior, n_edges=int(inst.dag.sum()), n_deleted=len(res.deletions), wrong_deleted=int(wrong),
                f1_pc_kci=f1_pc, f1_oracle=f1_or, oracle_gain=f1_or - f1_pc, seconds=round(secs, 2))


def study_config(args, ba_orientation: str | None = None) -> dict:
    """The config at the study's scale (``ba_orientation``: that BA reading instead of the config's)."""
    from heuresis.preflight import load_config

    cfg = copy.deepcopy(dict(load_config(args.config)))
    cfg["instances"].update(d=args.d, n=args.n)
    if ba_orientation:
        cfg["graph"]["ba_orientation"] = ba_orientation
    return cfg


def cmd_run(args):
    cfg0 = study_config(args, "attachment")   # the baseline: generator version 1's BA reading
    out = Path(args.out)
    done, rows = set(), {}
    if out.exists():
        with open(out) as fh:
            rows = {(r["choice"], r["family"], int(r["index"])): r for r in csv.DictReader(fh)}
        done = set(rows)
    new = not out.exists()
    fh = open(out, "a", newline="")
    w = csv.DictWriter(fh, fieldnames=FIELDS)
    if new:
        w.writeheader()
    choices = args.choices or list(CHOICES)
    for name in choices:
        if name not in CHOICES:
            raise SystemExit(f"unknown choice {name!r}; known: {list(CHOICES)}")
        _, fams, edit, ctx = CHOICES[name]
        cfg = edit(cfg0)
        for fam in fams:
            for i in range(args.instances):
                if (name, fam, i) in done:
                    continue
                if name in ONE_PRIOR and ("baseline", fam, i) in rows:
                    # an instance of the other prior is the baseline's (the prior is drawn first)
                    with ctx():
                        inst = generate_instance(instance_spec(cfg, fam), fam, "dev", i)
                    if inst.prior != ONE_PRIOR[name]:
                        base = generate_instance(instance_spec(cfg0, fam), fam, "dev", i)
                        assert np.array_equal(base.data, inst.data), (name, fam, i)
                        w.writerow({**rows[("baseline", fam, i)], "choice": name, "seconds": 0})
                        fh.flush()
                        continue
                with ctx():
                    row = run_instance(cfg, fam, i, args.alpha)
                w.writerow(dict(choice=name, family=fam, index=i, **row))
                fh.flush()
            print(f"{name} {fam}: done", flush=True)
    fh.close()


def _mean_se(v):
    v = np.asarray(v, float)
    se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
    return v.mean(), se


def cmd_table(args):
    with open(args.out) as fh:
        rows = list(csv.DictReader(fh))
    from heuresis.targets.published import load_published_table2

    pub = load_published_table2()["families"]
    lines = ["| choice | family | dev instances | wrong deletions / instance | share with none | oracle gain (adj. F1) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for fam in FAMILIES:
        p = pub[fam]
        lines.append(f"| **paper (Table 2, test)** | {fam} | – | {p['wrong_deletions']:.1f} | "
                     f"{p['share_none']:.0%} | {p['oracle_gain']:.3f} |")
    # the baseline split by the graph prior each instance drew (the prior mix, read off the baseline)
    names = [(n, None) for n in CHOICES]
    names[1:1] = [("baseline", "er"), ("baseline", "ba")]
    for name, prior in names:
        for fam in FAMILIES:
            r = [x for x in rows if x["choice"] == name and x["family"] == fam and prior in (None, x["prior"])]
            if not r:
                continue
            wd, wse = _mean_se([int(x["wrong_deleted"]) for x in r])
            none, nse = _mean_se([int(x["wrong_deleted"]) == 0 for x in r])
            g, gse = _mean_se([float(x["oracle_gain"]) for x in r])
            label = f"{name}, {prior.upper()} instances only" if prior else name
            lines.append(f"| {label} | {fam} | {len(r)} | {wd:.2f} ± {wse:.2f} | {none:.0%} ± {nse:.0%} | "
                         f"{g:.3f} ± {gse:.3f} |")
    lines += ["", "Distance to the paper over the six families (mean |ours − paper|; a family a choice does not "
              "change keeps the baseline's numbers):", "",
              "| choice | families changed | wrong deletions / instance | share with none | oracle gain |",
              "| --- | --- | --- | --- | --- |"]
    for name, (_, fams, _, _) in CHOICES.items():
        if not any(x["choice"] == name for x in rows):
            continue
        dist = {k: [] for k in ("wrong_deletions", "share_none", "oracle_gain")}
        for fam in FAMILIES:
            r = [x for x in rows if x["choice"] == (name if fam in fams else "baseline") and x["family"] == fam]
            if not r:
                continue
            wd = np.array([int(x["wrong_deleted"]) for x in r])
            dist["wrong_deletions"].append(abs(wd.mean() - pub[fam]["wrong_deletions"]))
            dist["share_none"].append(abs((wd == 0).mean() - pub[fam]["share_none"]))
            dist["oracle_gain"].append(abs(np.mean([float(x["oracle_gain"]) for x in r]) - pub[fam]["oracle_gain"]))
        lines.append(f"| {name} | {', '.join(fams)} | {np.mean(dist['wrong_deletions']):.2f} | "
                     f"{np.mean(dist['share_none']):.0%} | {np.mean(dist['oracle_gain']):.3f} |")
    lines.append("")
    run = {x["choice"] for x in rows}
    lines.append("Choices: " + "; ".join(f"`{k}`: {v[0]}" for k, v in CHOICES.items() if k in run) + ".")
    ran = [float(x["seconds"]) for x in rows if float(x["seconds"]) > 0]   # 0: a row shared with the baseline
    lines.append(f"PC-KCI time over the {len(ran)} instances run: {sum(ran) / 60:.1f} min "
                 f"({sum(ran) / max(len(ran), 1):.1f} s per instance).")
    print("\n".join(lines))


def cmd_router(args):
    """The router's screen (PC-Fisher-z, dCor − |r| on <= 300 rows, gap and tau) on dev instances."""
    from heuresis.causal.algorithms import make_algorithm

    cfg = study_config(args)
    router = make_algorithm("router", **cfg["references"]["baselines"]["router"])
    lines = ["| family | dev instances | routed to KCI | Fisher-z deletions / instance | flagged / instance | "
             "wrong Fisher-z deletions / instance | of them flagged | median gap (wrong) | median gap (right) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    t0 = time.perf_counter()
    for fam in FAMILIES:
        spec = instance_spec(cfg, fam)
        routed, n_del, n_flag, n_wrong, n_wrong_flag, gw, gr = [], [], [], [], [], [], []
        for i in range(args.instances):
            inst = generate_instance(spec, fam, "dev", i)
            scr = router.screen(inst.data)
            wrong = label_deletions(scr["fisherz"].deletions, inst.dag)
            routed.append(scr["branch"] == "kci")
            n_del.append(len(wrong))
            n_flag.append(len(scr["flagged"]))
            n_wrong.append(sum(wrong))
            n_wrong_flag.append(sum(w and g >= router.params["gap"] for w, g in zip(wrong, scr["gaps"])))
            gw += [g for w, g in zip(wrong, scr["gaps"]) if w]
            gr += [g for w, g in zip(wrong, scr["gaps"]) if not w]
        share, se = _mean_se(routed)
        lines.append(f"| {fam} | {len(routed)} | {share:.0%} ± {se:.0%} | {np.mean(n_del):.1f} | {np.mean(n_flag):.2f} | "
                     f"{np.mean(n_wrong):.2f} | {sum(n_wrong_flag)}/{sum(n_wrong)} | "
                     f"{np.median(gw) if gw else float('nan'):.3f} | {np.median(gr) if gr else float('nan'):.3f} |")
        print(lines[-1], flush=True)
    lines.append(f"\n({time.perf_counter() - t0:.0f} s)")
    print("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--instances", type=int, default=12, help="dev instances per family and choice")
    r.add_argument("--choices", nargs="*", help=f"subset of {list(CHOICES)}")
    r.add_argument("--d", type=int, default=10)
    r.add_argument("--n", type=int, default=600)
    r.add_argument("--alpha", type=float, default=0.05)
    t = sub.add_parser("table")
    rt = sub.add_parser("router", help="the router's screen on dev instances (routing share per family)")
    rt.add_argument("--instances", type=int, default=100)
    rt.add_argument("--d", type=int, default=10)
    rt.add_argument("--n", type=int, default=600)
    for p in (r, t, rt):
        p.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
        p.add_argument("--out", default=str(ROOT / "benchmarks" / "family_study.csv"))
    args = ap.parse_args(argv)
    {"run": cmd_run, "table": cmd_table, "router": cmd_router}[args.cmd](args)


if __name__ == "__main__":
    main()
