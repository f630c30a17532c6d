"""Instrument verification (heuresis.stages.verification): every check passes at a tiny scale, the
exhaustive enumeration reproduces OEIS A003024, and a deliberately broken instrument makes its
check fail with examples."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from heuresis.causal import graph as G
from heuresis.causal.graph import Graph
from heuresis.config import ConfigError
from heuresis.preflight import validate_config
from heuresis.stages.verification import (
    A003024,
    CHECKS,
    ESSENTIAL_GRAPHS,
    check_settings,
    enumerate_dags,
    read_checks,
    run_check,
    table5,
    write_check,
)

TINY = {
    "dsep": {"dags": 25, "queries": 8, "d": [3, 8]},
    "cpdag_bruteforce": {"max_d": 4},
    "cpdag_causallearn": {"dags": 40, "d": [2, 8]},
    "oracle_pc": {"dags": 10, "d": [3, 6]},
    "pc_vs_causallearn": {"fisherz": 1, "kci": 0},
    "shd_gadjid": {"pairs": 60, "d": [2, 10]},
    "kci_causallearn": {"instances": 1, "tests": 2, "max_cond": 2},
    "invariance_no_repair": {"instances": 1},
    "invariance_relabel": {"instances": 1, "dags": 10, "d": [3, 6]},
    "determinism": {"instances": 1, "kci_tests": 2, "thread_counts": [1, 2], "hash_seeds": [3]},
}


@pytest.fixture(scope="module")
def tiny_config(quick_config):
    cfg = copy.deepcopy(quick_config)
    cfg["instances"].update(d=5, n=150)
    cfg["verification"]["scales"]["tiny"] = TINY
    cfg["verification"]["scale"] = "tiny"
    return validate_config(cfg)


def _settings(cfg, check, **sizes):
    s = check_settings(cfg, check)
    s["sizes"].update(sizes)
    return s


def test_the_registry_keeps_the_order_of_table5():
    """Importing the package registers the checks in Table 5's row order (the workflow's job order too)."""
    assert list(CHECKS) == list(TINY)


def test_every_check_is_configured_at_both_scales(paper_config, quick_config):
    for cfg in (paper_config, quick_config):
        v = cfg["verification"]
        assert set(v["required"]) == set(CHECKS)
        for scale in ("small", "large"):
            assert set(v["scales"][scale]) == set(CHECKS)
    assert paper_config["verification"]["scale"] == "large" and quick_config["verification"]["scale"] == "small"
    assert paper_config["verification"]["scales"]["large"]["cpdag_bruteforce"]["max_d"] == 6


@pytest.mark.parametrize("d", range(5))
def test_enumeration_counts_are_oeis_a003024(d):
    codes = enumerate_dags(d)
    assert len(codes) == A003024[d] == (1, 1, 3, 25, 543)[d]
    assert len(np.unique(codes)) == len(codes)
    for code in codes[:: max(1, len(codes) // 50)]:  # every code is a DAG
        adj = ((int(code) >> np.arange(d * d)) & 1).reshape(d, d)
        assert G.is_dag(adj)


@pytest.mark.parametrize("check", list(CHECKS))
def test_check_passes_at_tiny_scale(tiny_config, check):
    res = run_check(check, check_settings(tiny_config, check))
    assert res.passed, f"{check}: {res.finding}; examples {res.examples[:2]}"
    assert res.disagreements == 0 and res.n_cases > 0
    assert res.scale == "tiny" and res.reference and res.scale_description


def test_exhaustive_check_counts_and_classes(tiny_config):
    res = run_check("cpdag_bruteforce", check_settings(tiny_config, "cpdag_bruteforce"))
    per_d = res.details["per_d"]
    assert [r["dags"] for r in per_d] == [1, 3, 25, 543]
    assert [r["classes"] for r in per_d] == list(ESSENTIAL_GRAPHS[1:5]) == [1, 2, 11, 185]
    assert res.n_cases == 1 + 3 + 25 + 543


# --- the checks can fail --------------------------------------------------------------------------
def _undirected_skeleton(adj):
    a = np.asarray(adj) != 0
    return Graph((a | a.T).astype(np.int8))


def test_broken_cpdag_fails_the_exhaustive_and_causallearn_checks(tiny_config, monkeypatch):
    monkeypatch.setattr(G, "dag_to_cpdag", _undirected_skeleton)  # forgets every v-structure
    brute = run_check("cpdag_bruteforce", _settings(tiny_config, "cpdag_bruteforce", max_d=3))
    # d = 3: exactly the three colliders a -> c <- b (each its own class) get a wrong CPDAG
    assert not brute.passed and brute.disagreements == 3
    assert all(set(e) >= {"dag", "ours", "expected", "class_members"} for e in brute.examples)
    cl = run_check("cpdag_causallearn", check_settings(tiny_config, "cpdag_causallearn"))
    assert not cl.passed and cl.disagreements > 0 and cl.examples
    oracle = run_check("oracle_pc", check_settings(tiny_config, "oracle_pc"))
    assert not oracle.passed


def test_broken_dsep_fails(tiny_config, monkeypatch):
    monkeypatch.setattr(G, "d_separated", lambda adj, x, y, z=(): not z)  # "conditioning always separates"
    res = run_check("dsep", check_settings(tiny_config, "dsep"))
    assert not res.passed and res.disagreements > 0
    ex = res.examples[0]
    assert ex["moralized"] != ex["networkx"] and ex["path_blocking"] == ex["networkx"]
    assert len(res.examples) <= tiny_config["verification"]["max_examples"]


def test_broken_shd_and_kci_fail(tiny_config, monkeypatch):
    import heuresis.causal.metrics
    from heuresis.causal.ci.kci import KCI

    monkeypatch.setattr(heuresis.causal.metrics, "shd", lambda a, b: 0)
    assert not run_check("shd_gadjid", check_settings(tiny_config, "shd_gadjid")).passed
    compute = KCI._compute
    monkeypatch.setattr(KCI, "_compute", lambda self, x, y, S: min(1.0, compute(self, x, y, S) * (1 + 1e-6) + 1e-8))
    res = run_check("kci_causallearn", check_settings(tiny_config, "kci_causallearn"))
    assert not res.passed and res.disagreements == res.n_cases
    assert res.examples[0]["abs_difference"] > 1e-9


# --- records, Table 5, config -------------------------------------------------------------------------
def test_records_and_table5_mark_failures(tiny_config, tmp_path, monkeypatch):
    from heuresis.artifacts.report import write_paper_table

    ok = run_check("shd_gadjid", check_settings(tiny_config, "shd_gadjid"))
    monkeypatch.setattr(G, "dag_to_cpdag", _undirected_skeleton)
    bad = run_check("cpdag_causallearn", check_settings(tiny_config, "cpdag_causallearn"))
    paths = []
    for res in (bad, ok):
        paths.append(tmp_path / f"{res.check}.parquet")
        write_check(res, paths[-1], tmp_path / "examples" / res.check)
    assert len(list((tmp_path / "examples" / bad.check).glob("*.json"))) == len(bad.examples) > 0
    checks = read_checks(paths)
    assert list(checks["check"]) == ["cpdag_causallearn", "shd_gadjid"]  # registry order
    numbers, display, highlight, failed = table5(checks, required=["shd_gadjid"])
    assert failed == [] and highlight == [True, False]
    assert list(display["Result"]) == ["FAIL (not required)", "pass"]
    numbers, display, highlight, failed = table5(checks, required=list(CHECKS))
    assert failed == ["cpdag_causallearn"] and display["Result"][0] == "FAIL"
    write_paper_table(numbers, display, tmp_path / "table5", caption="Table 5.", provenance={}, highlight=highlight)
    tex = (tmp_path / "table5.tex").read_text()
    assert r"\textcolor{red}{FAIL}" in tex and tex.count(r"\textcolor{red}") == len(display.columns)
    assert "| **FAIL** |" in (tmp_path / "table5.md").read_text()


@pytest.mark.parametrize("edit, key", [
    (lambda v: v.update(scale="huge"), "verification.scale"),
    (lambda v: v["scales"]["small"]["dsep"].update(d=[8, 3]), "verification.scales.small.dsep.d"),
    (lambda v: v["scales"]["small"]["cpdag_bruteforce"].update(max_d=7), "verification.scales.small.cpdag_bruteforce.max_d"),
    (lambda v: v.update(required=["dsep", "typo"]), "verification.required.1"),
    (lambda v: v["scales"]["small"]["determinism"].update(thread_counts=[1], hash_seeds=[0]),
     "verification.scales.small.determinism"),
])
def test_bad_verification_config_names_the_key(quick_config, edit, key):
    cfg = copy.deepcopy(quick_config)
    edit(cfg["verification"])
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate_config(cfg)
