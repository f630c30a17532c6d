"""Tune the evidence agent on dev instances, then evaluate it on held-out test instances.

Three steps, each cached under ``--cache`` (default ``/tmp/evidence_cache``) so that nothing is
computed twice::

    # 1. dev: PC-KCI per instance plus the p-values of every candidate re-test (KCI and Fisher-z
    #    given the alternative sets the PC graph implies), with the truth label of each deletion,
    #    and the nonlinear path's screening and confirming values (heuresis.agents.nlcode, the
    #    functions the agent's code-tool programs run)
    PYTHONPATH=src python benchmarks/evidence_agent.py measure --split dev --start 0 --stop 24
    # 2. dev: grid over the rule's settings, replayed from the cached p-values through the
    #    agent's own planning and decision functions; prints the best settings (default ranking:
    #    the worst gain over wild/anm/gauntlet, among rules with no loss over all families)
    PYTHONPATH=src python benchmarks/evidence_agent.py tune --start 0 --stop 24
    PYTHONPATH=src python benchmarks/evidence_agent.py tune --start 0 --stop 24 --unguided
    #    the nonlinear path's thresholds, the configured checks kept (guided only)
    PYTHONPATH=src python benchmarks/evidence_agent.py tune --start 0 --stop 24 --nonlinear
    #    real episodes on dev must reproduce the replayed decisions exactly
    PYTHONPATH=src python benchmarks/evidence_agent.py verify --start 20 --stop 22
    # 3. test: real guided episodes of the configured agent (config.yaml, agents.evidence) through
    #    the harness, against PC-KCI's output on the same instances; per-family table with paired
    #    bootstrap intervals
    PYTHONPATH=src python benchmarks/evidence_agent.py measure --split test --start 20 --stop 40
    PYTHONPATH=src python benchmarks/evidence_agent.py evaluate --start 20 --stop 40 \
        --out benchmarks/evidence_agent_test.md --note "..."   # the note as in that file

Test instances 0-19 were used while choosing settings; the reported table uses test
instances 20-39, which no choice of settings ever saw, with ``--ablate nonlinear`` (the same agent
without the nonlinear path, for attribution); ``benchmarks/evidence_agent_test_40_59.md`` is a
replication on instances 40-59 with the same settings (``measure``/``evaluate --start 40 --stop
60``), ``benchmarks/evidence_agent_test_pooled.md`` both (``evaluate --start 20 --stop 60``).

Run with ``OMP_NUM_THREADS=1`` on a shared machine; ``measure`` takes about 20 s per instance
(PC-KCI plus the candidate re-tests), ``tune`` a few minutes, ``evaluate`` seconds per instance
once PC-KCI is cached.

Instances are the paper's (config.yaml: d = 10, n = 600, global seed 20260101), generated with
:func:`heuresis.stages.instances.generate_instance`; dev and test draw from disjoint seed streams.  The
truth is used only to label deletions (dev) and to score (both); the agent never sees it.
Episodes use seed :func:`heuresis.harness.episode.episode_seed` (global seed, agent, condition,
instance id), so a rerun gives the same numbers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from heuresis.agents import nlcode  # noqa: E402
from heuresis.agents.evidence import (  # noqa: E402
    NONLINEAR_DEFAULTS,
    SET_KINDS,
    Check,
    EvidenceRule,
    decide_nonlinear,
    decide_restore,
    plan_confirm,
    plan_retests,
    plan_screen,
)
from heuresis.artifacts.io import atomic_write_bytes, atomic_write_text  # noqa: E402
from heuresis.artifacts.report import format_interval  # noqa: E402
from heuresis.causal.algorithms import make_algorithm  # noqa: E402
from heuresis.causal.algorithms.pc import label_deletions  # noqa: E402
from heuresis.causal.bootstrap import paired_bootstrap  # noqa: E402
from heuresis.causal.ci import make_ci_test  # noqa: E402
from heuresis.causal.grades import grade_of, validate_grades  # noqa: E402
from heuresis.causal.graph import Graph  # noqa: E402
from heuresis.causal.metrics import adjacency_scores  # noqa: E402
from heuresis.stages.instances import generate_instance, instance_spec  # noqa: E402

FAMILIES = ["lg", "anm", "hetero", "wild", "mixed", "gauntlet"]


def load_config() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def grade_table(cfg: dict):
    return validate_grades([(g["upto"], g["label"]) for g in cfg["grades"]])


# --- step 1: PC-KCI and candidate p-values, cached per instance -----------------------------------
def pc_kci_cached(cfg: dict, family: str, split: str, index: int, cache: Path) -> dict:
    """Instance, PC-KCI output, deletion log with truth labels (pickled per instance)."""
    path = cache / f"pc_{family}_{split}_{index:04d}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    inst = generate_instance(instance_spec(cfg, family), family, split, index)
    res = make_algorithm("pc_kci", **cfg["references"]["algorithms"]["pc_kci"]).run(inst.data)
    wrong = label_deletions(res.pc.deletions, inst.dag)
    rec = {"family": family, "split": split, "index": index, "id": inst.id, "data": inst.data, "dag": inst.dag,
           "graph": res.graph.amat.copy(), "n_tests": int(res.n_tests),
           "deletions": [dict(x=d.x, y=d.y, sepset=tuple(d.sepset), test=d.test, pvalue=d.pvalue, level=d.level,
                              grade=d.grade, wrong=w) for d, w in zip(res.pc.deletions, wrong)]}
    atomic_write_bytes(path, pickle.dumps(rec))
    return rec


def pvalues_cached(rec: dict, cache: Path, tests=("kci", "fisherz"), max_set: int = 6) -> dict:
    """p-values of every (pair, set, test) the rule family can ask for: {(x, y, set, test): p}."""
    path = cache / f"pv_{rec['family']}_{rec['split']}_{rec['index']:04d}.pkl"
    out = pickle.loads(path.read_bytes()) if path.exists() else {}
    ci = {t: make_ci_test(t, rec["data"]) for t in tests}
    g = Graph(rec["graph"])
    n_new = 0
    for dl in rec["deletions"]:
        x, y = dl["x"], dl["y"]
        for s in candidate_sets(g, x, y, dl["sepset"], max_set):
            for t in tests:
                key = (x, y, s, t)
                if key not in out:
                    out[key] = float(ci[t].pvalue(x, y, s))
                    n_new += 1
    if n_new:
        atomic_write_bytes(path, pickle.dumps(out))
    return out


NL_PRESCREEN = 1e-4     # confirming tests are cached for screened pairs up to this p (the grid's widest)


def nonlinear_cached(rec: dict, cache: Path, max_set: int = 3) -> dict:
    """The nonlinear path's values on one instance, computed by the same functions the agent's
    code-tool programs run (and printed/parsed the same way): {"screen": {(x, y): p},
    "confirm": {(x, y): p}}; confirming values for every pair screened at <= NL_PRESCREEN."""
    nl = {k: NONLINEAR_DEFAULTS[k] for k in ("permutations", "block")}
    path = cache / f"nl_{rec['family']}_{rec['split']}_{rec['index']:04d}.pkl"
    key = {"max_set": max_set, "prescreen": NL_PRESCREEN, **nl}
    if path.exists():
        got = pickle.loads(path.read_bytes())
        if got["key"] == key:
            return got
    rule = EvidenceRule(max_set=max_set, nonlinear={"screen": NL_PRESCREEN})
    g = Graph(rec["graph"])
    log = [(d["x"], d["y"], tuple(d["sepset"]), d["grade"]) for d in rec["deletions"]]
    screened = nlcode.parse("\n".join(nlcode.screen(rec["data"], plan_screen(rule, g, log))))
    jobs = plan_confirm(rule, g, log, screened)
    confirmed = nlcode.parse("\n".join(nlcode.confirm(rec["data"], jobs, **nl)))
    out = {"key": key, "screen": screened, "confirm": confirmed}
    atomic_write_bytes(path, pickle.dumps(out))
    return out


def candidate_sets(g: Graph, x: int, y: int, sepset, max_set: int) -> list[tuple[int, ...]]:
    """Every set any rule of the grid may test (a superset of what :func:`plan_retests` asks)."""
    sets = set(EvidenceRule(max_set=max_set).sets_for(g, x, y, SET_KINDS))
    sets.add(tuple(sorted(sepset)))
    return sorted(sets, key=lambda s: (len(s), s))


def measure(args) -> None:
    cfg = load_config()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    for index in range(args.start, args.stop):
        for family in args.families:
            rec = pc_kci_cached(cfg, family, args.split, index, cache)
            if args.split == "dev":
                pvalues_cached(rec, cache)
                nonlinear_cached(rec, cache)
            w = sum(d["wrong"] for d in rec["deletions"])
            print(f"{family} {args.split} {index} tests={rec['n_tests']} deletions={len(rec['deletions'])} "
                  f"wrong={w} t={time.time() - t0:.0f}s", flush=True)


# --- step 2: replay the rule on dev -------------------------------------------------------------
def replay(rule: EvidenceRule, rec: dict, pv: dict, table, guided: bool = True) -> dict:
    """The agent's decisions on one instance, replayed from cached p-values (graded as the tool does)."""
    names = [f"X{k + 1}" for k in range(rec["data"].shape[1])]
    g = Graph(rec["graph"], names)
    log = [(d["x"], d["y"], tuple(d["sepset"]), d["grade"]) for d in rec["deletions"]]
    plan = plan_retests(rule, g, log if guided else None, rec["n_tests"])
    results = {}
    for x, y, s, test in plan.tests:
        key = (x, y, s, test)
        if key not in pv:
            raise KeyError(f"{rec['id']}: no cached p-value for {key}; rerun measure")
        results[(x, y, s, test)] = grade_of(pv[key], table)
    restored = decide_restore(rule, plan, results)
    if rule.nonlinear is not None and guided:
        nlv = nonlinear_cached(rec, Path(rec.get("_cache", "/tmp/evidence_cache")), rule.max_set)
        if rule.nonlinear["screen"] > NL_PRESCREEN or any(rule.nonlinear[k] != NONLINEAR_DEFAULTS[k]
                                                          for k in ("permutations", "block")):
            raise ValueError("replay: the cached nonlinear values cover screen <= "
                             f"{NL_PRESCREEN:g} with the default permutations and block only")
        jobs = plan_confirm(rule, g, log, nlv["screen"], skip=restored)
        confirmed = {(x, y): nlv["confirm"][(x, y)] for x, y, _sets in jobs}
        restored = list(restored) + [k for k in decide_nonlinear(rule, confirmed) if k not in set(restored)]
    out = g.copy()
    from heuresis.causal.graph import Relation
    for x, y in restored:
        out.set(x, y, Relation.UNDIRECTED)
    truth = Graph.from_dag(rec["dag"])
    wrong = {(min(d["x"], d["y"]), max(d["x"], d["y"])) for d in rec["deletions"] if d["wrong"]}
    right = sum((min(p), max(p)) in wrong for p in restored)
    # adjacency F1 (what score_graph reports as f1; its Meek closure only affects SHD)
    return {"f1": adjacency_scores(truth, out).f1, "pc_f1": adjacency_scores(truth, g).f1,
            "restored_right": right, "restored_wrong": len(restored) - right, "units": len(plan.tests),
            "limit": rec["n_tests"]}


def load_dev(args, cfg):
    cache = Path(args.cache)
    recs = []
    for index in range(args.start, args.stop):
        for family in args.families:
            p = cache / f"pc_{family}_{args.split}_{index:04d}.pkl"
            if not p.exists():
                continue
            rec = pickle.loads(p.read_bytes())
            rec["_cache"] = str(cache)
            recs.append((rec, pvalues_cached(rec, cache)))
    return recs


def summarize(rows: list[dict], by="family") -> dict:
    fams = sorted({r[by] for r in rows}, key=lambda f: FAMILIES.index(f) if f in FAMILIES else 99)
    out = {}
    for f in [*fams, "all"]:
        rs = [r for r in rows if f == "all" or r[by] == f]
        out[f] = {"n": len(rs), "f1": float(np.mean([r["f1"] for r in rs])),
                  "pc_f1": float(np.mean([r["pc_f1"] for r in rs])),
                  "right": int(sum(r["restored_right"] for r in rs)),
                  "wrong": int(sum(r["restored_wrong"] for r in rs))}
    return out


S, M, W = "strong dependence", "moderate dependence", "weak dependence"
AT_LEAST = {"S": (S,), "M": (S, M), "W": (S, M, W)}
BORDER, NONE = "no evidence (borderline)", "no evidence"


def grid(guided: bool = True):
    """The dev grid: candidates x one KCI vote x an optional Fisher-z vote x max_set (432 rules;
    unguided: 216, no candidate screen, the checks go to ``unguided_checks``)."""
    for cand, max_set in itertools.product([(BORDER,), (BORDER, NONE)] if guided else [(BORDER,)], [3, 5]):
        for kci_sets, kci_need, kci_g in itertools.product([("nbrs",), ("union",), ("nbrs", "empty")], ["any", "all"],
                                                           "SMW"):
            first = Check("kci", kci_sets, kci_need, AT_LEAST[kci_g])
            seconds = [None] + [Check("fisherz", fs, "all", AT_LEAST[fg])
                                for fs, fg in itertools.product([("singles",), ("nbrs",), ("union",)], "SMW")]
            for second in seconds:
                checks = (first,) if second is None else (first, second)
                if guided:
                    yield EvidenceRule(candidate_grades=cand, max_set=max_set, checks=checks)
                else:
                    yield EvidenceRule(candidate_grades=cand, max_set=max_set, checks=checks, unguided_checks=checks)


def nonlinear_grid(cfg: dict):
    """The configured KCI/Fisher-z checks, with the nonlinear path off or at each of 12 settings."""
    spec = {k: v for k, v in cfg["agents"]["evidence"].items()
            if k not in ("kind", "resamples", "min_dependent_share", "nonlinear")}
    yield EvidenceRule.from_config(spec)
    for screen, confirm in itertools.product([1e-4, 1e-6, 1e-8, 1e-10], [0.011, 0.02, 0.05]):
        yield EvidenceRule.from_config({**spec, "nonlinear": {"screen": screen, "confirm": confirm}})


def tune(args) -> None:
    cfg = load_config()
    table = grade_table(cfg)
    recs = load_dev(args, cfg)
    print(f"{len(recs)} dev instances", flush=True)
    scored = []
    for rule in (nonlinear_grid(cfg) if args.nonlinear else grid(args.guided)):
        rows = [{"family": rec["family"], **replay(rule, rec, pv, table, args.guided)} for rec, pv in recs]
        s = summarize(rows)
        gains = [s[f]["f1"] - s[f]["pc_f1"] for f in args.hard if f in s]
        hard = min(gains) if args.select == "maximin" else np.mean(gains)
        scored.append((s["all"]["f1"] - s["all"]["pc_f1"], hard, rule, s))
    if args.select == "all":
        scored.sort(key=lambda t: (-t[0], -t[1]))
    else:   # the --hard families first (mean or worst gain), among rules with no loss over all families
        scored.sort(key=lambda t: (t[0] < 0, -t[1], -t[0]))
    for gain, hard, rule, s in scored[: args.top]:
        print(f"gain all {gain:+.4f} {args.select} {hard:+.4f}  {rule.describe()}")
        print(f"    config: {json.dumps(rule.as_config())}")
        print("    " + "  ".join(f"{f}: {v['f1']:.3f}/{v['pc_f1']:.3f} ({v['right']}r/{v['wrong']}w)"
                                  for f, v in s.items()))


# --- step 3: real episodes through the harness ------------------------------------------------------
def episode_input(rec: dict):
    """The harness's view of a cached instance: PC-KCI's graph, test count and label-free log."""
    from heuresis.causal.graph import dag_to_cpdag
    from heuresis.harness.episode import EpisodeInput

    names = [f"X{k + 1}" for k in range(rec["data"].shape[1])]
    log = [{"x": names[d["x"]], "y": names[d["y"]], "sepset": [names[k] for k in d["sepset"]], "test": d["test"],
            "grade": d["grade"]} for d in rec["deletions"]]
    return EpisodeInput(rec["family"], rec["split"], rec["index"], rec["id"], rec["data"], Graph.from_dag(rec["dag"]),
                        dag_to_cpdag(rec["dag"]), Graph(rec["graph"], names), rec["n_tests"], log)


def run_real(cfg: dict, rec: dict, guided: bool = True, spec: dict | None = None) -> dict:
    """One episode of the configured evidence agent; restored pairs labelled against the truth."""
    from heuresis.artifacts.sealing import PUBLIC_SALT
    from heuresis.harness.conditions import Condition
    from heuresis.harness.episode import episode_algorithm_map, episode_seed, run_episode
    from heuresis.harness.protocol import make_agent
    from heuresis.stages.episodes import episode_settings

    spec = dict(cfg["agents"]["evidence"] if spec is None else spec)
    settings = episode_settings(cfg["episodes"], cfg["references"]["algorithms"], cfg["grades"], "standard")
    cond = Condition("evidence", toolbox="full", guided=guided, budget="standard", last_turn="once")
    inp = episode_input(rec)
    seed = episode_seed(PUBLIC_SALT, int(cfg["seed"]), "evidence", cond.condition_id, inp.instance_id)
    out = run_episode(make_agent("evidence", spec, algorithm_map=episode_algorithm_map(settings, seed)), cond, inp,
                      settings, seed)
    r = out.row
    if r["status"] != "ok":
        raise RuntimeError(f"{rec['id']}: episode failed: {r['error']}")
    d = rec["data"].shape[1]
    got = Graph(np.array(r["graph"]).reshape(d, d)).skeleton()
    start = Graph(rec["graph"]).skeleton()
    dag = rec["dag"] != 0
    adj = dag | dag.T
    iu = np.triu_indices(d, 1)
    added = got & ~start
    return {"family": rec["family"], "index": rec["index"], "f1": r["f1"], "pc_f1": r["pc_kci_f1"],
            "restored_right": int((added & adj)[iu].sum()), "restored_wrong": int((added & ~adj)[iu].sum()),
            "wrong_deletions": int(sum(x["wrong"] for x in rec["deletions"])),
            "units": int(r["test_units_used"]), "limit": int(r["test_units_limit"]), "edges": r["edges"]}


def _episodes(args, cfg, cache: Path, spec: dict, tag: str = "") -> list[dict]:
    """Real episodes of ``spec`` on the instances of ``args`` (cached per instance, keyed by spec)."""
    rows = []
    t0 = time.time()
    cond = "guided" if args.guided else "unguided"
    for index in range(args.start, args.stop):
        for family in args.families:
            rec = pc_kci_cached(cfg, family, args.split, index, cache)
            path = cache / f"ep_{cond}{tag}_{family}_{args.split}_{index:04d}.json"
            if path.exists() and json.loads(path.read_text())["spec"] == spec:
                row = json.loads(path.read_text())["row"]
            else:
                row = run_real(cfg, rec, guided=args.guided, spec=spec)
                atomic_write_text(path, json.dumps({"spec": spec, "row": row}))
            rows.append(row)
            print(f"{tag or 'configured'} {family} {index} f1={row['f1']:.3f} pc={row['pc_f1']:.3f} "
                  f"right={row['restored_right']} wrong={row['restored_wrong']} units={row['units']}/{row['limit']} "
                  f"t={time.time() - t0:.0f}s", flush=True)
    return rows


def evaluate(args) -> None:
    cfg = load_config()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    spec = dict(cfg["agents"]["evidence"])
    rows = _episodes(args, cfg, cache, spec)
    ablated = {}
    for key in args.ablate:      # the same agent without one setting (e.g. the nonlinear path), same instances
        if key not in spec:
            raise SystemExit(f"--ablate {key}: not a setting of agents.evidence")
        ablated[key] = _episodes(args, cfg, cache, {k: v for k, v in spec.items() if k != key}, tag=f"-no-{key}")
    report(args, cfg, rows, "guided" if args.guided else "unguided", ablated)


def report(args, cfg, rows, cond, ablated=None) -> None:
    s = summarize(rows)
    bcfg = cfg.get("bootstrap", {})
    ablated = ablated or {}
    boot = dict(resamples=int(bcfg.get("resamples", 2000)), seed=int(bcfg.get("seed", 0)))
    extra = "".join(f" --ablate {k}" for k in ablated)
    lines = [f"# Evidence agent vs PC-KCI on {args.split} instances ({cond}, standard budget)", "",
             f"Generated by `benchmarks/evidence_agent.py evaluate --split {args.split} --start {args.start} "
             f"--stop {args.stop}{'' if args.guided else ' --unguided'}{extra}`; "
             f"instances d = {cfg['instances']['d']}, "
             f"n = {cfg['instances']['n']}, seed {cfg['seed']}; agent settings: config.yaml `agents.evidence`; "
             f"paired bootstrap over instances ({boot['resamples']} resamples, seed {boot['seed']}).",
             *([] if not args.note else ["", args.note]),
             "", "| family | n | PC-KCI wrong deletions | evidence F1 | PC-KCI F1 | difference [95% CI] | "
             "restored right | restored wrong |"
             + "".join(f" without {k}: difference | without {k}: right / wrong |" for k in ablated),
             "| --- | --- | --- | --- | --- | --- | --- | --- |" + " --- | --- |" * len(ablated)]
    for f, v in s.items():
        rs = [r for r in rows if f == "all" or r["family"] == f]
        ci = paired_bootstrap([r["f1"] for r in rs], [r["pc_f1"] for r in rs], **boot)
        wd = sum(r["wrong_deletions"] for r in rs)
        line = (f"| {f} | {v['n']} | {wd} | {v['f1']:.3f} | {v['pc_f1']:.3f} | {format_interval(ci, signed=True)} | "
                f"{v['right']} | {v['wrong']} |")
        for _k, arows in ablated.items():
            a = summarize(arows)[f]
            ars = [r for r in arows if f == "all" or r["family"] == f]
            aci = paired_bootstrap([r["f1"] for r in ars], [r["pc_f1"] for r in ars], **boot)
            line += f" {format_interval(aci, signed=True)} | {a['right']} / {a['wrong']} |"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        atomic_write_text(args.out, text)


def verify(args) -> None:
    """Real episodes on dev instances must reproduce the replayed decisions exactly."""
    cfg = load_config()
    table = grade_table(cfg)
    spec = dict(cfg["agents"]["evidence"])
    rule = EvidenceRule.from_config({k: v for k, v in spec.items()
                                     if k not in ("kind", "resamples", "min_dependent_share")})
    bad = 0
    for rec, pv in load_dev(args, cfg):
        a = replay(rule, rec, pv, table, args.guided)
        b = run_real(cfg, rec, guided=args.guided)
        same = (round(a["f1"], 9) == round(b["f1"], 9) and a["restored_right"] == b["restored_right"]
                and a["restored_wrong"] == b["restored_wrong"] and a["units"] == b["units"])
        bad += not same
        print(f"{rec['id']}: replay f1 {a['f1']:.3f} {a['restored_right']}r/{a['restored_wrong']}w {a['units']}u; "
              f"episode f1 {b['f1']:.3f} {b['restored_right']}r/{b['restored_wrong']}w {b['units']}u"
              f"{'' if same else '  MISMATCH'}", flush=True)
    if bad:
        raise SystemExit(f"{bad} instance(s) differ between replay and episode")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("measure", "tune", "evaluate", "verify"):
        p = sub.add_parser(name)
        p.add_argument("--split", default="dev" if name != "evaluate" else "test")
        p.add_argument("--start", type=int, default=0)
        p.add_argument("--stop", type=int, default=10)
        p.add_argument("--families", nargs="+", default=FAMILIES)
        p.add_argument("--cache", default="/tmp/evidence_cache")
        if name == "tune":
            p.add_argument("--top", type=int, default=15)
            p.add_argument("--nonlinear", action="store_true",
                           help="keep the configured checks; grid over the nonlinear path's thresholds")
            p.add_argument("--hard", nargs="+", default=["wild", "anm", "gauntlet", "lg"],
                           help="the families where PC-KCI wrongly deletes most (dev, d=10, n=600)")
            p.add_argument("--select", choices=["all", "hard", "maximin"], default="maximin",
                           help="rank rules by mean F1 gain over all families; or by the mean (hard) or the "
                                "smallest (maximin) per-family gain over --hard, among rules with no mean loss "
                                "over all families")
        if name in ("evaluate", "tune", "verify"):
            p.add_argument("--unguided", dest="guided", action="store_false",
                           help="the unguided condition (no log: every non-adjacent pair a candidate)")
        if name == "evaluate":
            p.add_argument("--out", default=None, help="write the markdown table here")
            p.add_argument("--ablate", nargs="*", default=[],
                           help="also run the configured agent without these settings (e.g. nonlinear) on the "
                                "same instances and add their columns")
            p.add_argument("--note", default="", help="a paragraph written under the header (e.g. which instances "
                                                        "were unseen by every choice)")
    args = ap.parse_args(argv)
    {"measure": measure, "tune": tune, "evaluate": evaluate, "verify": verify}[args.cmd](args)


if __name__ == "__main__":
    main()
