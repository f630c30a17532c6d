"""Offline agents act only through tool calls and compute what an independent computation gives."""

import json

import numpy as np
import pytest
from conftest import agent_episode, chain_instance, pc_episode_input

from heuresis.agents import AGENTS, make_agent
from heuresis.causal.algorithms import make_algorithm
from heuresis.causal.grades import DEFAULT_GRADES
from heuresis.causal.graph import Graph, Relation
from heuresis.harness.budgets import BudgetSettings
from heuresis.harness.conditions import Condition
from heuresis.harness.episode import EpisodeSettings

MENU = {"pc_fisherz": {"alpha": 0.05}, "pc_kci": {"alpha": 0.05}, "ges": {}, "notears": {"lambda1": 0.1, "w_threshold": 0.3}}


@pytest.fixture(scope="module")
def inst():
    """Nonlinear chain-with-fork on 5 variables, n = 200."""
    return chain_instance(1)


def _settings():
    return EpisodeSettings(BudgetSettings("s", 1.0, 30, 4000, 10, 600), MENU, tuple(DEFAULT_GRADES))


def test_registry_and_privilege():
    assert {"shortcut", "merge", "evidence"} <= set(AGENTS)
    a = make_agent("m", {"kind": "merge", "k": 3}, algorithm_map={"algorithm_A": "pc_kci"})
    assert a.privileged and a.k == 3 and a.unmask == {"algorithm_A": "pc_kci"}
    with pytest.raises(ValueError, match="unknown kind"):
        make_agent("x", {"kind": "oracle"})


@pytest.mark.parametrize("guided", [True, False])
def test_shortcut_submits_pc_kci(inst, guided):
    inp, pc = inst
    out = agent_episode("shortcut", {"kind": "shortcut"}, Condition("shortcut", guided=guided), inp, _settings(), 1)
    assert out.row["edges"] == "; ".join(pc.graph.to_lines()) and out.row["finished"]
    assert out.row["privileged"] and json.loads(out.row["algorithm_map"])


def test_merge_matches_an_independent_vote(inst):
    inp, pc = inst
    out = agent_episode("merge", {"kind": "merge", "k": 2}, Condition("merge"), inp, _settings(), 2)
    others = [make_algorithm(a, **p).run(inp.data).graph.skeleton() for a, p in MENU.items() if a != "pc_kci"]
    expected = pc.graph.copy()
    votes = sum(s.astype(int) for s in others)
    for i in range(5):
        for j in range(i + 1, 5):
            if not pc.graph.skeleton()[i, j] and votes[i, j] >= 2:
                expected.set(i, j, Relation.UNDIRECTED)
    assert out.row["edges"] == "; ".join(expected.to_lines())
    assert out.row["algorithm_calls_used"] == len(MENU)


@pytest.mark.parametrize("guided", [True, False])
def test_evidence_agent_stays_within_budget_and_only_restores(inst, guided):
    inp, pc = inst
    out = agent_episode("evidence", {"kind": "evidence"}, Condition("evidence", guided=guided), inp, _settings(), 3)
    r = out.row
    assert r["finished"] and r["test_units_used"] <= r["test_units_limit"]
    # every unit charged is one CI test the agent ran (the guided agent re-tests only borderline deletions)
    assert r["test_units_used"] == sum(c["test_units"] for c in out.calls if c["tool"] in ("ci_test", "stability_check"))
    got = np.array(r["graph"]).reshape(5, 5)
    assert (Graph(got).skeleton() >= pc.graph.skeleton()).all()    # it only restores pairs
    tools = {c["tool"] for c in out.calls}
    assert "submit" in tools and all(c["ok"] for c in out.calls)
    if not guided:
        assert "ci_test" in tools and r["test_units_used"] > 0


# --- the evidence agent's claim: it beats PC-KCI where PC-KCI wrongly deletes most ------
def _config():
    from pathlib import Path

    import yaml

    return yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def hard_instances():
    """Held-out (test-split) instances of the three families where PC-KCI wrongly deletes most, d = 8, n = 400."""
    from heuresis.causal.algorithms.pc import label_deletions
    from heuresis.stages.instances import generate_instance, instance_spec

    cfg = _config()
    cfg["instances"].update(d=8, n=400)
    out = []
    for family in ("wild", "anm", "gauntlet"):
        for index in range(2):
            inst = generate_instance(instance_spec(cfg, family), family, "test", index)
            inp, pc = pc_episode_input(family, "test", index, inst.id, inst.data, inst.dag)
            out.append((inp, pc, inst.dag, sum(label_deletions(pc.pc.deletions, inst.dag))))
    return cfg, out


def _adjacency_f1(dag: np.ndarray, skel: np.ndarray) -> float:
    """Adjacency F1 straight from the truth (independent of heuresis.causal.metrics)."""
    true = (dag != 0) | (dag != 0).T
    iu = np.triu_indices(dag.shape[0], 1)
    tp = int((true & skel)[iu].sum())
    fp = int((~true & skel)[iu].sum())
    fn = int((true & ~skel)[iu].sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def test_evidence_agent_repairs_wrong_deletions_on_hard_families(hard_instances):
    """On six small held-out wild/anm/gauntlet instances (chosen before the run: test indices 0-1)
    the configured agent restores a truly wrongly deleted pair, more right than wrong, and does not
    lower the mean F1.  The paper-scale claim (unseen test instances: gains on wild and gauntlet,
    level on anm, a small loss on lg) is measured in benchmarks/evidence_agent_test.md
    (docs/agents.md): this checks the mechanism, not that claim."""
    cfg, insts = hard_instances
    spec = cfg["agents"]["evidence"]                 # the dev-tuned settings the workflow uses
    settings = EpisodeSettings(BudgetSettings("standard", 1.0, 30, 4000, 10, 600), MENU, tuple(DEFAULT_GRADES))
    assert sum(w for *_, w in insts) >= 3            # the set does hold wrong deletions to repair
    ours, theirs, right, wrong = [], [], 0, 0
    for k, (inp, pc, dag, _) in enumerate(insts):
        out = agent_episode("evidence", spec, Condition("evidence", guided=True), inp, settings, 100 + k)
        r = out.row
        assert r["status"] == "ok" and r["finished"] and r["test_units_used"] <= r["test_units_limit"]
        d = dag.shape[0]
        got = Graph(np.array(r["graph"]).reshape(d, d)).skeleton()
        start = pc.graph.skeleton()
        assert (got >= start).all()                  # it only restores pairs
        added = got & ~start
        true = (dag != 0) | (dag != 0).T
        iu = np.triu_indices(d, 1)
        right += int((added & true)[iu].sum())
        wrong += int((added & ~true)[iu].sum())
        ours.append(_adjacency_f1(dag, got))
        theirs.append(_adjacency_f1(dag, start))
        assert ours[-1] == pytest.approx(r["f1"]) and theirs[-1] == pytest.approx(r["pc_kci_f1"])
    assert right >= 1 and right > wrong
    assert np.mean(ours) >= np.mean(theirs)


def test_evidence_rule_plans_and_decides_from_grades():
    """Chain X1 - X2 - X3 plus isolated X4; the deletion X1 -- X3 | {X2} is borderline."""
    from heuresis.agents.evidence import EvidenceRule, decide_restore, plan_retests

    g = Graph.empty(4)
    g.set(0, 1, Relation.UNDIRECTED)
    g.set(1, 2, Relation.UNDIRECTED)
    rule = EvidenceRule.from_config({"candidate_grades": ["no evidence (borderline)"], "max_set": 3, "checks": [
        {"test": "kci", "sets": ["nbrs", "empty"], "need": "all", "grades": ["strong dependence"]},
        {"test": "fisherz", "sets": ["singles"], "need": "any", "grades": ["strong dependence"]}]})
    log = [(0, 2, (1,), "no evidence (borderline)"), (0, 3, (), "no evidence"), (2, 3, (0,), "no evidence (borderline)")]
    plan = plan_retests(rule, g, log, units=100)
    # X1 -- X3: KCI given {X2} is the logged (failed) test, so the all-check rules it out untested;
    # X1 -- X4: not a candidate grade; X3 -- X4: nbrs {X2} and {}, empty {} (the same), singles {X2}
    assert plan.tests == [(2, 3, (1,), "kci"), (2, 3, (), "kci"), (2, 3, (1,), "fisherz")]
    strong = dict.fromkeys(plan.tests, "strong dependence")
    assert decide_restore(rule, plan, strong) == [(2, 3)]
    assert decide_restore(rule, plan, {**strong, (2, 3, (), "kci"): "weak dependence"}) == []
    assert plan_retests(rule, g, log, units=2).tests == []          # does not fit: skipped, not truncated
    # had X3 -- X4 been deleted given {}, the logged grade there rules it out untested
    assert plan_retests(rule, g, [*log[:2], (2, 3, (), "no evidence (borderline)")], units=100).tests == []
    with pytest.raises(ValueError, match="unknown parameter"):
        EvidenceRule.from_config({"min_grade_all": ["strong dependence"]})
    with pytest.raises(ValueError, match="unknown set kind"):
        EvidenceRule.from_config({"checks": [{"test": "kci", "sets": ["parents"], "need": "all", "grades": ["x"]}]})


# --- the nonlinear path: code-tool programs screen and confirm PC's deletions ------------
def _independent_f_p(D, x, y, Z):
    """The screen's nested F-test rebuilt from scratch (design matrices and least squares)."""
    from scipy import stats

    def feats(v):
        v = (v - v.mean()) / v.std()
        return [v, v ** 2, v ** 3, np.abs(v), np.tanh(2 * v)] + [np.maximum(v - np.quantile(v, q), 0)
                                                                 for q in (0.1, 0.3, 0.5, 0.7, 0.9)]
    out = []
    for a, b in ((x, y), (y, x)):
        base = [np.ones(len(D))] + [f for k in Z for f in feats(D[:, k])]
        base += [f for i, j in [(i, j) for i in range(len(Z)) for j in range(i + 1, len(Z))]
                 for f in (D[:, Z[i]] * D[:, Z[j]], D[:, Z[i]] ** 2 * D[:, Z[j]], D[:, Z[i]] * D[:, Z[j]] ** 2)]
        full = base + feats(D[:, a]) + [f for k in Z for f in (D[:, a] * D[:, k], D[:, a] ** 2 * D[:, k],
                                                               D[:, a] * D[:, k] ** 2)]
        rss = []
        for cols in (base, full):
            M = np.column_stack(cols)
            r = D[:, b] - M @ np.linalg.lstsq(M, D[:, b], rcond=None)[0]
            rss.append(float(r @ r))
        q, dfd = len(full) - len(base), len(D) - len(full)
        out.append(float(stats.f.sf(((rss[0] - rss[1]) / q) / (rss[1] / dfd), q, dfd)))
    return min(out)


def test_nlcode_screen_matches_an_independent_f_test_and_the_sandbox():
    from heuresis.agents import nlcode
    from heuresis.harness.sandbox import run_code

    rng = np.random.default_rng(5)
    n = 300
    z1, z2 = rng.normal(size=n), rng.normal(size=n)
    x = np.tanh(z1) + 0.5 * rng.normal(size=n)
    y = z1 ** 2 + 0.3 * x ** 2 + 0.5 * rng.normal(size=n)        # x -- y dependent given z1 (quadratic)
    w = np.abs(z2) + 0.5 * rng.normal(size=n)                     # w independent of x given z1
    D = np.column_stack([z1, z2, x, y, w])
    D = (D - D.mean(0)) / D.std(0)
    for a, b, Z in [(2, 3, [0]), (2, 4, [0, 1]), (2, 4, []), (3, 4, [0, 1])]:
        assert nlcode.pair_p(D, a, b, Z) == pytest.approx(_independent_f_p(D, a, b, Z), rel=1e-6, abs=1e-12)
    assert nlcode.pair_p(D, 2, 3, [0]) < 1e-6
    jobs = [[2, 3, [[0]]], [2, 4, [[0], [0, 1]]]]
    lines = nlcode.screen(D, jobs)
    assert nlcode.parse("\n".join(lines))[(2, 4)] == pytest.approx(
        max(_independent_f_p(D, 2, 4, [0]), _independent_f_p(D, 2, 4, [0, 1])), rel=1e-3)
    res = run_code(nlcode.program("screen", jobs), D)           # the agent's program prints the same lines
    assert res.returncode == 0 and res.stdout.splitlines() == lines
    # the local permutation test: the minimum p for the dependent pair, not small for the independent one
    assert nlcode.perm_p(D, 2, 3, [0], permutations=50) == pytest.approx(1 / 51)
    assert nlcode.perm_p(D, 2, 4, [0], permutations=50) > 0.05


def _nl_spec(**nl):
    return {"kind": "evidence", "nonlinear": {"screen": 1.0, "confirm": 0.05, **nl}}


def test_evidence_agent_nonlinear_path_matches_independent_values(inst):
    """Guided, full toolbox: one screening program, then confirming programs for the screened pairs
    (``chunk`` per call, no test units); the submitted graph adds exactly the pairs whose confirming
    value, recomputed here in-process, is <= ``confirm`` to what the CI checks restore."""
    from heuresis.agents import nlcode
    from heuresis.agents.evidence import EvidenceRule, plan_confirm, plan_screen

    inp, pc = inst
    spec = _nl_spec(chunk=2)
    out = agent_episode("evidence", spec, Condition("evidence", guided=True), inp, _settings(), 4)
    base = agent_episode("evidence", {"kind": "evidence"}, Condition("evidence", guided=True), inp, _settings(), 4)
    r = out.row
    assert r["status"] == "ok" and r["finished"] and all(c["ok"] for c in out.calls)
    code = [c for c in out.calls if c["tool"] == "run_code"]
    assert code and all(c["test_units"] == 0 for c in code)
    assert r["test_units_used"] == base.row["test_units_used"]
    # recompute independently of the episode: the log and graph the prompt holds, values in-process
    idx = {f"X{k + 1}": k for k in range(5)}
    log = [(idx[d["x"]], idx[d["y"]], tuple(sorted(idx[v] for v in d["sepset"])), d["grade"])
           for d in inp.pc_kci_deletions]
    rule = EvidenceRule.from_config({k: v for k, v in spec.items() if k != "kind"})
    screened = {}
    for x, y, sets in plan_screen(rule, pc.graph, log):
        screened[(x, y)] = max(_independent_f_p(inp.data, x, y, list(s)) for s in sets)
    base_skel = np.array(base.row["graph"]).reshape(5, 5) != 0
    base_skel = base_skel | base_skel.T
    restored = [(x, y) for x, y in zip(*np.nonzero(np.triu(base_skel & ~pc.graph.skeleton())))]
    jobs = plan_confirm(rule, pc.graph, log, screened, skip=restored)
    assert len(code) == 1 + -(-len(jobs) // 2)
    expect = base_skel.copy()
    for x, y, sets in jobs:
        if max(nlcode.perm_p(inp.data, x, y, s) for s in sets) <= 0.05:
            expect[x, y] = expect[y, x] = True
    got = np.array(r["graph"]).reshape(5, 5) != 0
    assert ((got | got.T) == expect).all()


@pytest.mark.parametrize("toolbox,guided", [("minimal", True), ("full", False)])
def test_evidence_agent_nonlinear_path_off_without_code_tool_or_log(inst, toolbox, guided):
    inp, _pc = inst
    cond = Condition("evidence", toolbox=toolbox, guided=guided)
    out = agent_episode("evidence", _nl_spec(), cond, inp, _settings(), 5)
    base = agent_episode("evidence", {"kind": "evidence"}, Condition("evidence", toolbox=toolbox, guided=guided), inp,
                         _settings(), 5)
    assert out.row["finished"] and not [c for c in out.calls if c["tool"] == "run_code"]
    assert out.row["edges"] == base.row["edges"]


def test_evidence_rule_nonlinear_settings_validated():
    from heuresis.agents.evidence import NONLINEAR_DEFAULTS, EvidenceRule

    rule = EvidenceRule.from_config({"nonlinear": {"screen": 1e-6}})
    assert rule.nonlinear == {**NONLINEAR_DEFAULTS, "screen": 1e-6}
    assert EvidenceRule.from_config(rule.as_config()) == rule
    with pytest.raises(ValueError, match="unknown nonlinear key"):
        EvidenceRule.from_config({"nonlinear": {"alpha": 0.1}})
    with pytest.raises(ValueError, match="confirm"):
        EvidenceRule.from_config({"nonlinear": {"confirm": 0}})
