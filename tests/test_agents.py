"""Offline agents act only through tool calls and compute what an independent computation gives."""

import json

import numpy as np
import pytest

from heuresis.agents import AGENTS, make_agent
from heuresis.algorithms import make_algorithm
from heuresis.grades import DEFAULT_GRADES
from heuresis.graph import Graph, Relation, dag_to_cpdag
from heuresis.harness.budgets import BudgetSettings
from heuresis.harness.conditions import Condition
from heuresis.harness.episode import EpisodeInput, EpisodeSettings, run_episode

MENU = {"pc_fisherz": {"alpha": 0.05}, "pc_kci": {"alpha": 0.05}, "ges": {}, "notears": {"lambda1": 0.1, "w_threshold": 0.3}}


@pytest.fixture(scope="module")
def inst():
    """Nonlinear chain-with-fork on 5 variables, n = 200."""
    rng = np.random.default_rng(1)
    n = 200
    x1 = rng.normal(size=n)
    x2 = np.tanh(2 * x1) + 0.3 * rng.normal(size=n)
    x3 = x2 ** 2 + 0.3 * rng.normal(size=n)
    x4 = np.sin(x1) + 0.3 * rng.normal(size=n)
    x5 = x3 + x4 + 0.3 * rng.normal(size=n)
    data = np.column_stack([x1, x2, x3, x4, x5])
    data = (data - data.mean(0)) / data.std(0)
    dag = np.zeros((5, 5), int)
    for a, b in [(0, 1), (1, 2), (0, 3), (2, 4), (3, 4)]:
        dag[a, b] = 1
    pc = make_algorithm("pc_kci").run(data)
    names = [f"X{k + 1}" for k in range(5)]
    log = [{"x": names[d.x], "y": names[d.y], "sepset": [names[k] for k in d.sepset], "test": d.test,
            "grade": d.grade} for d in pc.pc.deletions]
    return EpisodeInput("t", "test", 0, "t/test/0000", data, Graph.from_dag(dag), dag_to_cpdag(dag), pc.graph,
                        pc.n_tests, log), pc


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
    out = run_episode("shortcut", {"kind": "shortcut"}, Condition("shortcut", guided=guided), inp, _settings(), 1)
    assert out.row["edges"] == "; ".join(pc.graph.to_lines()) and out.row["finished"]
    assert out.row["privileged"] and json.loads(out.row["algorithm_map"])


def test_merge_matches_an_independent_vote(inst):
    inp, pc = inst
    out = run_episode("merge", {"kind": "merge", "k": 2}, Condition("merge"), inp, _settings(), 2)
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
    out = run_episode("evidence", {"kind": "evidence"}, Condition("evidence", guided=guided), inp, _settings(), 3)
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
