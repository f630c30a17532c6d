"""The harness: conditions, budgets, tools against independent computations, last turn, parser."""

import json

import numpy as np
import pytest
from conftest import agent_episode

from heuresis.causal.ci import make_ci_test
from heuresis.causal.grades import DEFAULT_GRADES, grade_of
from heuresis.causal.graph import Graph, Relation
from heuresis.harness.budgets import Budgets, BudgetSettings
from heuresis.harness.conditions import Condition, expand_conditions
from heuresis.harness.episode import EpisodeInput, EpisodeSettings, algorithm_mapping
from heuresis.harness.parse import ParseError, parse_edge_list
from heuresis.harness.protocol import Agent, AgentReply, Usage, register_agent, tool_call
from heuresis.harness.tools import MINIMAL_EXCLUDED, TOOLS, ToolContext, ToolError, toolbox

NAMES = ("X1", "X2", "X3", "X4")
MENU = {"pc_fisherz": {"alpha": 0.05}, "ges": {}, "notears": {"lambda1": 0.1, "w_threshold": 0.3}}


@pytest.fixture(scope="module")
def chain_data():
    """X1 -> X2 -> X3, X4 independent noise (linear Gaussian, n = 300)."""
    rng = np.random.default_rng(0)
    x1 = rng.normal(size=300)
    x2 = 0.9 * x1 + rng.normal(size=300)
    x3 = 0.9 * x2 + rng.normal(size=300)
    x4 = rng.normal(size=300)
    return np.column_stack([x1, x2, x3, x4])


def _ctx(data, units=50, calls=5):
    b = Budgets(BudgetSettings("t", 1.0, 30, 4000, calls, 600), units)
    return ToolContext(data=data, names=NAMES, working=Graph.complete(4), budgets=b,
                       algorithm_map={"algorithm_A": "pc_fisherz", "algorithm_B": "ges"}, menu=MENU,
                       grades=tuple(DEFAULT_GRADES), alpha=0.05)


# --- conditions ------------------------------------------------------------------------------------
def test_condition_id_round_trips_and_grid_expands(quick_config):
    c = Condition("merge", "minimal", True, 3, "cpdag", "tight", "retry", 2)
    assert Condition.from_id("merge", c.condition_id) == c
    cfg = {"families": {"lg": {}, "wild": {}}, "episodes": {"run": ["a", "b"], "grids": {
        "a": {"agents": ["x", "y"], "guided": [True, False], "last_turn": ["none", "once", "retry"], "repeats": 2},
        "b": {"agents": ["x"], "guided": [True], "families": ["wild"]}}}}
    cells = expand_conditions(cfg)
    assert len(cells) == 2 * 2 * 3 * 2          # grid b's cells are already in grid a
    assert len({(c.condition, c.split) for c in cells}) == len(cells)
    with pytest.raises(ValueError, match="toolbox"):
        Condition("x", toolbox="huge")


# --- budgets ----------------------------------------------------------------------------------------
def test_budgets_count_and_report_each_limit():
    clock = iter([0.0, 1.0, 2.0, 1000.0]).__next__
    b = Budgets(BudgetSettings("s", 0.5, 2, 100, 1, 500), pc_kci_tests=9, clock=clock)
    assert b.test_units == 5 and "test units 5/5" in b.line()
    b.charge_tests(4)
    assert b.exhausted() is None
    b.charge_tests(1)
    assert b.exhausted() == "test_units"


# --- tools against independent computations ------------------------------------------------------
@pytest.mark.parametrize("x,y,given,test", [("X1", "X3", [], "fisherz"), ("X1", "X3", ["X2"], "fisherz"),
                                            ("X1", "X4", [], "kci"), ("X2", "X3", ["X1"], "kci")])
def test_ci_verdict_is_the_grade_of_the_direct_pvalue(chain_data, x, y, given, test):
    ctx = _ctx(chain_data)
    out = TOOLS["ci_test"].call(ctx, json.dumps({"x": x, "y": y, "given": given, "test": test}))
    idx = {n: k for k, n in enumerate(NAMES)}
    p = make_ci_test(test, chain_data).pvalue(idx[x], idx[y], [idx[g] for g in given])
    assert grade_of(p, tuple(DEFAULT_GRADES)) in out.text
    assert ("verdict: dependent" in out.text) == (p <= 0.05)
    assert out.test_units == 1 and ctx.budgets.used_test_units == 1
    assert f"{p:.3f}" not in out.text and "p=" not in out.text     # never a raw p-value


def test_masked_algorithm_returns_that_algorithms_graph(chain_data):
    from heuresis.causal.algorithms import make_algorithm

    ctx = _ctx(chain_data)
    for masked, real in ctx.algorithm_map.items():
        out = TOOLS["run_algorithm"].call(ctx, {"algorithm": masked})
        expected = make_algorithm(real, **MENU[real]).run(chain_data).graph
        assert parse_edge_list("\n".join(out.text.splitlines()[1:]) or "[]", NAMES) == expected
        assert real not in out.text.replace("edges", "")     # the identity stays masked
    assert ctx.budgets.used_algorithm_calls == 2


def test_masking_is_a_fresh_permutation_per_seed():
    menu = ["a", "b", "c", "d", "e", "f", "g"]
    maps = [algorithm_mapping(menu, np.random.default_rng(s)) for s in range(20)]
    assert all(sorted(m.values()) == menu for m in maps)
    assert len({tuple(m.values()) for m in maps}) > 10


def test_stability_counts_match_direct_subsample_tests(chain_data):
    ctx = _ctx(chain_data)
    ctx.rng = np.random.default_rng(5)
    out = TOOLS["stability_check"].call(ctx, {"x": "X1", "y": "X3", "given": ["X2"], "test": "fisherz", "resamples": 8})
    rng = np.random.default_rng(5)
    dep = sum(make_ci_test("fisherz", chain_data[np.sort(rng.choice(300, 240, replace=False))]).pvalue(0, 2, [1]) <= 0.05
              for _ in range(8))
    assert f"dependent {dep}, independent {8 - dep}" in out.text
    assert ctx.budgets.used_test_units == 8


def test_parent_fit_and_direction_probe_and_summary_run(chain_data):
    from sklearn.linear_model import LinearRegression

    ctx = _ctx(chain_data)
    out = TOOLS["parent_fit"].call(ctx, {"target": "X2", "parents": ["X1"]})
    r2 = LinearRegression().fit(chain_data[:, [0]], chain_data[:, 1]).score(chain_data[:, [0]], chain_data[:, 1])
    got = float(out.text.split("linear R^2 ")[1].split(",")[0])
    assert abs(got - r2) < 0.05                     # cross-validated vs in-sample R^2
    assert "X1 -> X2" in TOOLS["direction_probe"].call(ctx, {"x": "X1", "y": "X2"}).text
    assert TOOLS["data_summary"].call(ctx, {}).text.count("\n") == 5


@pytest.mark.parametrize("tool,args,msg", [
    ("ci_test", {"x": "X1", "y": "X1"}, "must differ"),
    ("ci_test", {"x": "X1", "y": "X9"}, "unknown variable"),
    ("ci_test", {"x": "X1", "y": "X2", "given": ["X1"]}, "may not contain"),
    ("ci_test", {"x": "X1"}, "'y' is a required property"),
    ("ci_test", {"x": "X1", "y": "X2", "test": "magic"}, "is not one of"),
    ("ci_test", "{not json", "not valid JSON"),
    ("run_algorithm", {"algorithm": "pc_kci"}, "unknown algorithm"),
    ("set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "=>"}]}, "is not one of"),
    ("submit", {"edges": "hello world"}, "no edge found"),
    ("stability_check", {"x": "X1", "y": "X2", "resamples": 500}, "maximum"),
])
def test_bad_arguments_give_clear_errors(chain_data, tool, args, msg):
    with pytest.raises(ToolError, match=msg):
        TOOLS[tool].call(_ctx(chain_data), args if isinstance(args, str) else json.dumps(args))


def test_test_budget_refuses_an_unaffordable_call(chain_data):
    ctx = _ctx(chain_data, units=3)
    with pytest.raises(ToolError, match="needs 5 test unit"):
        TOOLS["stability_check"].call(ctx, {"x": "X1", "y": "X2", "resamples": 5})
    assert ctx.budgets.used_test_units == 0


def test_minimal_toolbox_drops_code_stability_and_direction():
    assert {t.name for t in toolbox("full")} - {t.name for t in toolbox("minimal")} == set(MINIMAL_EXCLUDED)
    assert {"ci_test", "run_algorithm", "submit", "set_edges", "view_graph"} <= {t.name for t in toolbox("minimal")}


def test_set_edges_and_view(chain_data):
    ctx = _ctx(chain_data)
    TOOLS["set_edges"].call(ctx, {"changes": [{"x": "X1", "y": "X2", "relation": "->"},
                                              {"x": "X3", "y": "X4", "relation": "none"}]})
    assert ctx.working.relation(0, 1) == Relation.FORWARD and ctx.working.relation(2, 3) == Relation.NONE
    assert "X1 -> X2" in TOOLS["view_graph"].call(ctx, {}).text


# --- parser -----------------------------------------------------------------------------------------
TRUE = Graph.from_edges(4, [(0, 1, Relation.FORWARD), (1, 2, Relation.UNDIRECTED)])


@pytest.mark.parametrize("submission", [
    "X1 -> X2\nX2 -- X3",
    "Final answer:\n```\nX1 -> X2, X3 -- X2\n```",
    "X2 <- X1; X2 - X3",
    ["X1 -> X2", "X2 -- X3"],
    [["X1", "X2"], ["X2", "--", "X3"]],
    [{"from": "X1", "to": "X2"}, {"source": "X2", "target": "X3", "type": "undirected"}],
    {"edges": ["X1 -> X2", "X2 -- X3"]},
    'Here it is: ```json\n{"edges": [{"from": "X1", "to": "X2", "type": "->"}, {"from": "X2", "to": "X3", "type": "--"}]}\n```',
    '["X1 -> X2", "X2 -- X3"]',
])
def test_parser_accepts_the_forms(submission):
    assert parse_edge_list(submission, NAMES) == TRUE


def test_parser_reads_chains_and_empty_lists():
    g = parse_edge_list("X1 -> X2 -> X3", NAMES)
    assert g.relation(0, 1) == Relation.FORWARD and g.relation(1, 2) == Relation.FORWARD and g.n_edges() == 2
    assert parse_edge_list("[]", NAMES).n_edges() == 0 and parse_edge_list({"X1": ["X4"]}, NAMES).n_edges() == 1


@pytest.mark.parametrize("garbage,msg", [("I think the graph is sparse.", "no edge found"), ("", "empty"),
                                         ("X1 -> X7", "unknown variable"), ("X1 -> X1", "self-loop"),
                                         ("X1 -> X2\nX2 -> X1", "two different relations"),
                                         ([42], "cannot read edge"), ([{"a": 1}], "needs 'from' and 'to'")])
def test_parser_rejects_garbage_with_a_message(garbage, msg):
    with pytest.raises(ParseError, match=msg):
        parse_edge_list(garbage, NAMES)


# --- the loop: budgets lead to the last turn; none / once / retry ---------------------------------
@register_agent("scripted_test")
class Scripted(Agent):
    """Plays a fixed list of replies (each a list of tool calls, a text, or (calls, tokens_out))."""

    def __init__(self, name, script=(), last=(), **params):
        super().__init__(name, **params)
        self.script, self.last = list(script), list(last)
        self.seen_tools = []

    def respond(self, messages, tools):
        names = [t["function"]["name"] for t in tools]
        self.seen_tools.append(names)
        queue = self.last if names == ["submit"] else self.script
        item = queue.pop(0) if queue else [tool_call("view_graph", {})]
        tokens = 10
        if item == "RAISE":
            raise RuntimeError("the model server went away")
        if isinstance(item, tuple):
            item, tokens = item
        if isinstance(item, str):
            return AgentReply({"role": "assistant", "content": item}, Usage(tokens_out=tokens))
        return AgentReply({"role": "assistant", "content": None, "tool_calls": item}, Usage(tokens_out=tokens))


def _input(chain_data):
    dag = Graph.from_dag(np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]]))
    from heuresis.causal.graph import dag_to_cpdag

    start = Graph.from_edges(4, [(0, 1, Relation.UNDIRECTED)])
    log = [{"x": "X2", "y": "X3", "sepset": ["X1"], "test": "kci", "grade": "no evidence"}]
    return EpisodeInput("lg", "test", 0, "lg/test/0000", chain_data, dag, dag_to_cpdag(dag.amat), start, 4, log)


def _run(chain_data, script=(), last=(), cond=None, **budget):
    spec = dict(test_units_factor=1.0, turns=5, output_tokens_per_turn=100, algorithm_calls=2, wall_seconds=60)
    spec.update(budget)
    settings = EpisodeSettings(BudgetSettings("t", **spec), MENU, tuple(DEFAULT_GRADES))
    cond = cond or Condition("scripted_test", guided=True, last_turn="once")
    return agent_episode("scripted", {"kind": "scripted_test", "script": script, "last": last}, cond,
                         _input(chain_data), settings, seed=3)


CI = lambda: tool_call("ci_test", {"x": "X1", "y": "X2", "test": "fisherz"})  # noqa: E731
SUBMIT = lambda: [tool_call("submit", {"edges": ["X1 -> X2", "X2 -> X3"]})]  # noqa: E731


@pytest.mark.parametrize("kind,script,budget", [
    ("test_units", [[CI(), CI(), CI(), CI()]], {}),
    ("turns", [], {"turns": 3}),
    ("output_tokens", [([CI()], 5000)], {}),
    ("algorithm_calls", [[tool_call("run_algorithm", {"algorithm": "algorithm_A"})] * 2], {}),
    ("wall_time", [], {"wall_seconds": 1e-9}),
])
def test_each_exhausted_budget_leads_to_the_last_turn(chain_data, kind, script, budget):
    out = _run(chain_data, script=script, last=[SUBMIT()], **budget)
    r = out.row
    assert r["exhausted"] == kind and r["termination"] == "submitted_last_turn" and r["finished"]
    assert r["edges"] == "X1 -> X2; X2 -> X3"
    last_user = [m for m in out.transcript.messages if m["role"] == "user"][-1]["content"]
    assert "last turn" in last_user
    assert [t["function"]["name"] for t in out.transcript.tools] == [t.name for t in toolbox("full")]


def test_last_turn_none_scores_the_working_graph_unfinished(chain_data):
    cond = Condition("scripted_test", guided=True, last_turn="none")
    r = _run(chain_data, last=[SUBMIT()], cond=cond, turns=2).row
    assert not r["finished"] and r["termination"] == "unsubmitted" and r["exhausted"] == "turns"
    assert r["edges"] == "X1 -- X2"           # the guided start, untouched
    assert r["turns"] == 2


def test_last_turn_once_gives_one_chance(chain_data):
    cond = Condition("scripted_test", guided=True, last_turn="once")
    out = _run(chain_data, last=["nothing useful", SUBMIT()], cond=cond, turns=1)
    assert not out.row["finished"] and out.row["termination"] == "unsubmitted"


def test_last_turn_retry_accepts_the_second_try_and_only_submit_runs(chain_data):
    cond = Condition("scripted_test", guided=True, last_turn="retry")
    out = _run(chain_data, last=[[tool_call("ci_test", {"x": "X1", "y": "X2"})], "X1 -> X2\nX2 -> X3"],
               cond=cond, turns=1)
    r = out.row
    assert r["finished"] and r["termination"] == "submitted_retry" and r["edges"] == "X1 -> X2; X2 -> X3"
    rejected = [c for c in out.calls if c["last_turn"] and not c["ok"]]
    assert rejected and "only submit" in rejected[0]["error"]
    assert any("one retry" in (m["content"] or "") for m in out.transcript.messages if m["role"] == "user")
    out2 = _run(chain_data, last=["garbage", "more garbage", SUBMIT()], cond=cond, turns=1)
    assert not out2.row["finished"]


def test_every_tool_call_answered_once_with_the_budget_line(chain_data):
    script = [[CI(), tool_call("ci_test", {"x": "X1"}), tool_call("nonsense", {})], SUBMIT()]
    out = _run(chain_data, script=script)
    msgs = out.transcript.messages
    ids = [tc["id"] for m in msgs if m["role"] == "assistant" for tc in (m.get("tool_calls") or [])]
    answered = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
    assert sorted(ids) == sorted(answered)
    assert all("[budgets left: test units" in m["content"] for m in msgs if m["role"] == "tool")
    assert out.row["termination"] == "submitted" and out.row["n_errors"] == 2
    assert [c["test_units"] for c in out.calls] == [1, 0, 0, 0]


def test_guided_prompt_has_log_without_truth_and_budgets(chain_data):
    out = _run(chain_data, script=[SUBMIT()])
    prompt = out.transcript.messages[1]["content"]
    assert "X2 -- X3 | given {X1} | kci | no evidence" in prompt and "wrong" not in prompt
    assert "test units 4/4" in prompt and "algorithm_A" in prompt
    for level in range(4):
        cond = Condition("scripted_test", prompt_level=level, target="dag")
        p = _run(chain_data, script=[SUBMIT()], cond=cond).transcript.messages[1]["content"]
        assert ("Scoring" in p) == (level >= 1) and ("heteroscedastic" in p) == (level >= 2)
        assert ("level by level" in p) == (level >= 3) and "orient every edge" in p and "deletion log" not in p


def test_crashing_agent_is_a_failed_episode(chain_data):
    out = _run(chain_data, script=[[tool_call("view_graph", {})], "RAISE"])
    r = out.row
    assert r["status"] == "failed" and r["error"] == "RuntimeError: the model server went away"
    assert not r["finished"] and r["edges"] == "X1 -- X2" and r["turns"] == 2
    assert "RuntimeError" in out.transcript.error["error"]


# --- hostile input -----------------------------------------------------------------------------------
def test_deeply_nested_json_is_a_parse_error_not_a_crash(chain_data):
    deep = "[" * 200000 + "]" * 200000
    with pytest.raises(ParseError, match="no edge found|nested too deeply"):
        parse_edge_list(deep, NAMES)
    nested: list = []
    for _ in range(100000):
        nested = [nested]
    with pytest.raises(ParseError, match="nested too deeply|deeply nested list"):
        parse_edge_list(nested, NAMES)
    with pytest.raises(ToolError, match="nested too deeply|not valid JSON"):
        TOOLS["submit"].call(_ctx(chain_data), '{"edges": ' + deep + "}")


def test_error_messages_cap_what_they_echo(chain_data):
    huge = "Z" * 10**6
    for tool, args in [("ci_test", {"x": huge, "y": "X2"}), ("run_algorithm", {"algorithm": huge}),
                       ("submit", {"edges": [f"{huge} -> X1"]}), ("set_edges", {"changes": [{"x": "X1", "y": "X2",
                                                                                            "relation": huge}]})]:
        with pytest.raises(ToolError) as exc:
            TOOLS[tool].call(_ctx(chain_data), json.dumps(args))
        assert len(str(exc.value)) < 1000, (tool, len(str(exc.value)))


def test_fisherz_refuses_a_set_without_degrees_of_freedom_and_nothing_is_charged():
    rng = np.random.default_rng(1)
    small = rng.normal(size=(8, 7))
    with pytest.raises(ValueError, match="degrees of freedom"):
        make_ci_test("fisherz", small).pvalue(0, 1, [2, 3, 4, 5, 6])         # 8 - 5 - 3 = 0
    assert 0 <= make_ci_test("fisherz", small).pvalue(0, 1, [2, 3, 4, 5]) <= 1   # one degree of freedom left
    names = tuple(f"X{k + 1}" for k in range(7))
    ctx = ToolContext(data=small, names=names, working=Graph.complete(7),
                      budgets=Budgets(BudgetSettings("t", 1.0, 30, 4000, 5, 600), 50), algorithm_map={}, menu=MENU,
                      grades=tuple(DEFAULT_GRADES))
    for tool in ("ci_test", "stability_check"):
        with pytest.raises(ToolError, match="refused"):
            TOOLS[tool].call(ctx, {"x": "X1", "y": "X2", "given": ["X3", "X4", "X5", "X6", "X7"], "test": "fisherz"})
    assert ctx.budgets.used_test_units == 0
    out = TOOLS["ci_test"].call(ctx, {"x": "X1", "y": "X2", "test": "fisherz"})
    assert out.test_units == 1 and ctx.budgets.used_test_units == 1


# --- the code tool's isolation mode ----------------------------------------------------------------
def test_code_isolation_modes_are_recorded_and_required_fails_closed(chain_data, tmp_path, monkeypatch):
    from heuresis.harness import sandbox

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(fake))     # a host where bubblewrap cannot isolate
    spec = dict(test_units_factor=1.0, turns=5, output_tokens_per_turn=100, algorithm_calls=2, wall_seconds=60)
    code = [tool_call("run_code", {"code": "import os\nprint('ran as', os.getcwd())"})]
    cond = Condition("scripted_test", toolbox="full", guided=True, last_turn="once")

    def run(mode):
        settings = EpisodeSettings(BudgetSettings("t", **spec), MENU, tuple(DEFAULT_GRADES), code_isolation=mode)
        return agent_episode("scripted", {"kind": "scripted_test", "script": [code, SUBMIT()], "last": ()}, cond,
                             _input(chain_data), settings, seed=3)

    with pytest.raises(sandbox.IsolationUnavailable, match=r"episodes\.code_tool\.isolation"):
        run("required")
    weak = run("best_effort")
    assert weak.row["code_isolation"] == "none"
    rc = next(c for c in weak.calls if c["tool"] == "run_code")
    assert rc["ok"] and "ran as" in rc["result"] and json.loads(rc["details"])["isolation"] == "none"
    desc = {t["function"]["name"]: t["function"]["description"] for t in weak.transcript.tools}
    assert "sandbox" not in desc["run_code"] and "No network" not in desc["run_code"]
    off = run("off")
    assert off.row["code_isolation"] == "off"
    assert "run_code" not in {t["function"]["name"] for t in off.transcript.tools}
    rc = next(c for c in off.calls if c["tool"] == "run_code")
    assert not rc["ok"] and "unknown tool" in rc["error"]
    minimal = agent_episode("scripted", {"kind": "scripted_test", "script": [SUBMIT()], "last": ()},
                            Condition("scripted_test", toolbox="minimal", guided=True, last_turn="once"),
                            _input(chain_data), EpisodeSettings(BudgetSettings("t", **spec), MENU, tuple(DEFAULT_GRADES)),
                            seed=3)
    assert minimal.row["code_isolation"] == "off"          # no code tool: nothing to isolate, nothing probed


def test_refused_and_suspicious_calls_are_counted_as_integrity_events(chain_data):
    """Each refusal the loop answers gets its category; a refusal sent again is also a repeat; the episode counts them."""
    algo = lambda: tool_call("run_algorithm", {"algorithm": "algorithm_A"})  # noqa: E731
    script = [[tool_call("admin_reset_budget", {}), tool_call("ci_test", {"x": "X1"}), tool_call("ci_test", {"x": "X1"}),
               CI(), tool_call("run_code", {"code": "import os\nprint(sorted(os.environ))"}),
               algo(), algo(), algo()], SUBMIT()]
    out = _run(chain_data, script=script, last=[SUBMIT()], algorithm_calls=2, turns=3)
    got = [(c["tool"], c["ok"], c["integrity"]) for c in out.calls]
    assert got == [("admin_reset_budget", False, ["refused_tool"]), ("ci_test", False, ["malformed_call"]),
                   ("ci_test", False, ["malformed_call", "repeated_refusal"]), ("ci_test", True, []),
                   ("run_code", True, ["probe"]), ("run_algorithm", True, []), ("run_algorithm", True, []),
                   ("run_algorithm", False, ["over_budget"]), ("submit", True, [])], got
    r = out.row
    assert json.loads(r["integrity_counts"]) == {"refused_tool": 1, "malformed_call": 2, "over_budget": 1, "probe": 1,
                                                 "repeated_refusal": 1}
    assert r["integrity_events"] == 6 and r["n_errors"] == 4


@pytest.mark.parametrize("result, events", [
    ("exit code 1\nstdout:\n(empty)\nstderr (end):\nPermissionError: [Errno 13] Permission denied: '/root'",
     ["sandbox_refusal"]),
    ("exit code 1\nstdout:\n(empty)\nstderr (end):\nOSError: [Errno 101] Network is unreachable", ["sandbox_refusal"]),
    ("exit code 0\nstdout:\n0.25\n", []),
])
def test_a_code_run_that_hits_the_sandbox_is_a_refusal(result, events):
    from heuresis.harness.integrity import call_events

    call = {"tool": "run_code", "ok": True, "error": "", "arguments": json.dumps({"code": "print(1)"}), "result": result}
    assert call_events(call) == events


def test_the_spend_curve_replays_the_working_graph_turn_by_turn(chain_data):
    """F1 of the working graph per turn, counted by hand: the truth is X1 -> X2 -> X3 (two edges, d = 4)."""
    import pandas as pd

    from heuresis.stages.analysis.scores import spend_curve

    set_ = lambda *ch: [tool_call("set_edges", {"changes": [{"x": x, "y": y, "relation": r} for x, y, r in ch]})]  # noqa: E731
    script = [set_(("X2", "X3", "->")), [CI()], set_(("X1", "X4", "--")), SUBMIT()]
    out = _run(chain_data, script=script, turns=6)
    inp = _input(chain_data)
    calls = pd.DataFrame(out.calls)
    requests = pd.DataFrame([{"turn": t, "tokens_in": 100, "tokens_out": 10 * t, "cost": 0.001} for t in range(1, 5)])
    final = Graph(np.asarray(out.row["graph"], dtype=np.int8).reshape(4, 4))
    curve = spend_curve(out.row, calls, requests, inp.pc_kci_graph.copy(), final,
                        type("T", (), {"dag": inp.true_dag})())
    # start (guided): X1 -- X2 only: 1 of 2 true edges, no false one -> F1 2/3; turn 1 adds X2 -> X3 -> 1;
    # turn 2 tests only; turn 3 adds the false X1 -- X4 -> 2 tp, 1 fp: 0.8; turn 4 submits X1 -> X2, X2 -> X3 -> 1
    assert curve["f1_by_turn"] == pytest.approx([2 / 3, 1.0, 1.0, 0.8, 1.0])
    assert curve["tokens_by_turn"] == [0, 110, 230, 360, 500]
    assert curve["usd_by_turn"] == pytest.approx([0, 0.001, 0.002, 0.003, 0.004])
