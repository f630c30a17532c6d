"""The agent's tools (docs/design.md §5.2): a registry of name, description, JSON schema, handler.

Four kinds of action:

=================  =========================================================  =========  ===========
tool               what it does                                               cost       toolbox
=================  =========================================================  =========  ===========
run_algorithm      run a masked menu algorithm, return its whole graph         1 call     both
ci_test            CI test of a pair given a set: verdict + coarse grade       1 unit     both
stability_check    the same test on row subsamples: verdict counts             1/resample full
data_summary       per column moments, skew, kurtosis, normality               --         both
parent_fit         linear and nonlinear fit of a target on candidate parents   --         both
direction_probe    additive-noise residual independence in both directions     --         full
run_code           short numpy/scipy program on the data in the sandbox        --         full
set_edges          set relations of pairs in the working graph                 --         both
view_graph         show the working graph                                      --         both
submit             submit the final edge list (or the working graph)           --         both
=================  =========================================================  =========  ===========

Arguments are validated against the schema and then semantically (known variables, distinct
pair, conditioning set without x and y); a bad call raises :class:`ToolError`, which the episode
loop answers to the agent as an error message — the episode goes on.  Verdicts carry grades,
never raw p-values.

Every handler returns a :class:`ToolResult`: the ``text`` the agent reads and the same facts as
``data`` (values an offline agent reads instead of parsing the text), plus what only the
harness records (``details``: e.g. the p-value behind a grade, the unmasked algorithm).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator

from heuresis.causal.grades import grade_of
from heuresis.causal.graph import Graph, Relation
from heuresis.config.loading import schema_default
from heuresis.harness.budgets import BudgetError, Budgets
from heuresis.harness.parse import ParseError, echo, parse_edge_list
from heuresis.harness.sandbox import SandboxLimits, run_code

__all__ = ["MINIMAL_EXCLUDED", "TOOLS", "Tool", "ToolContext", "ToolError", "ToolResult", "register_tool",
           "replay_call", "set_pairs", "toolbox"]

#: Tools the minimal toolbox leaves out (docs/design.md §5.1: no code tool, no stability test, no orientation probes).
MINIMAL_EXCLUDED = ("run_code", "stability_check", "direction_probe")
_REL = {"none": Relation.NONE, "--": Relation.UNDIRECTED, "->": Relation.FORWARD, "<-": Relation.BACKWARD}


class ToolError(ValueError):
    """A bad tool call; the message goes back to the agent."""


@dataclass
class ToolResult:
    """What a tool call returns: the text the agent reads and the same facts as data.

    Attributes
    ----------
    text
        The result as the agent reads it (the loop appends the budgets line).
    data
        The facts of ``text`` as JSON-like values, handed to the agent's
        :meth:`~heuresis.harness.protocol.Agent.observe`: never more than ``text`` says (no truth,
        no p-value, no unmasked name).
    test_units
        Test units the call was charged.
    submitted
        The graph a ``submit`` call submitted.
    details
        What only the harness records with the call (the calls table's ``details``).
    ends
        Whether the call ends the run (set for every submission).
    """

    text: str
    data: dict
    test_units: int = 0
    submitted: Graph | None = None
    details: dict = field(default_factory=dict)
    ends: bool = False

    def __post_init__(self) -> None:
        if self.submitted is not None:
            self.ends = True


def _node(names: tuple[str, ...], name: Any) -> int:
    if not isinstance(name, str) or name not in names:
        raise ToolError(f"unknown variable {echo(name)}; the variables are {names[0]}..{names[-1]}")
    return names.index(name)


@dataclass
class ToolContext:
    """What tools act on: the instance's data, the working graph, budgets, masked menu."""

    data: np.ndarray
    names: tuple[str, ...]
    working: Graph
    budgets: Budgets
    algorithm_map: Mapping[str, str]            # masked name -> menu name
    menu: Mapping[str, Mapping]                 # menu name -> parameters
    grades: tuple[tuple[float, str], ...]
    alpha: float = schema_default("episodes", "alpha")
    code_limits: SandboxLimits = SandboxLimits()
    code_isolation: str = "bwrap"               # bwrap | none (not isolated) | off
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    ci_cache: dict = field(default_factory=dict)
    algorithm_cache: dict = field(default_factory=dict)

    def node(self, name: Any) -> int:
        """The index of variable ``name``; :class:`ToolError` for anything else."""
        return _node(self.names, name)

    def pair_and_set(self, args: Mapping) -> tuple[int, int, list[int]]:
        """``x``, ``y`` and the conditioning set ``given`` of a call, validated."""
        x, y = self.node(args["x"]), self.node(args["y"])
        if x == y:
            raise ToolError(f"x and y must differ (both {self.names[x]})")
        given = [self.node(v) for v in args.get("given", [])]
        if x in given or y in given:
            raise ToolError("the conditioning set may not contain x or y")
        if len(set(given)) != len(given):
            raise ToolError("the conditioning set lists a variable twice")
        return x, y, given

    def ci(self, test: str):
        """The CI test ``test`` on the episode's data (built once)."""
        if test not in self.ci_cache:
            from heuresis.causal.ci import make_ci_test
            self.ci_cache[test] = make_ci_test(test, self.data)
        return self.ci_cache[test]


@dataclass(frozen=True)
class Tool:
    """A tool: its function-calling schema and its handler ``(ctx, args) -> ToolResult``."""

    name: str
    description: str
    parameters: dict
    handler: Callable[[ToolContext, dict], ToolResult]

    def spec(self, ctx: ToolContext | None = None) -> dict:
        """OpenAI function-calling spec (masked algorithm names filled in when ``ctx`` is given)."""
        params = json.loads(json.dumps(self.parameters))
        if self.name == "run_algorithm" and ctx is not None:
            params["properties"]["algorithm"]["enum"] = sorted(ctx.algorithm_map)
        if ctx is not None:
            for prop in ("x", "y", "target"):
                if prop in params.get("properties", {}):
                    params["properties"][prop]["enum"] = list(ctx.names)
        desc = self.description
        if self.name == "run_code" and ctx is not None and ctx.code_isolation != "bwrap":
            desc = _RUN_CODE_UNISOLATED
        return {"type": "function", "function": {"name": self.name, "description": desc,
                                                 "parameters": params}}

    def call(self, ctx: ToolContext, arguments: str | Mapping) -> ToolResult:
        """Parse, validate and run; bad arguments raise :class:`ToolError`."""
        args = _arguments(arguments)
        try:
            errors = sorted(Draft202012Validator(self.parameters).iter_errors(args), key=lambda e: list(e.path))
        except RecursionError:
            raise ToolError("arguments are nested too deeply to read") from None
        if errors:
            e = errors[0]
            where = echo(".".join(str(p) for p in e.absolute_path), 80)[1:-1] or "arguments"
            msg = e.message if len(e.message) <= 300 else f"{e.message[:300]}... ({len(e.message)} characters)"
            raise ToolError(f"invalid arguments for {self.name}: {where}: {msg}")
        try:
            return self.handler(ctx, args)
        except BudgetError as exc:
            raise ToolError(f"budget: {exc}") from None


def _arguments(arguments: str | Mapping) -> dict:
    """A call's arguments as a dict: JSON text parsed, a mapping copied; :class:`ToolError` otherwise."""
    if isinstance(arguments, str):
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
        except RecursionError:
            raise ToolError("arguments are nested too deeply to read") from None
    else:
        args = dict(arguments)
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(args).__name__}")
    return args


TOOLS: dict[str, Tool] = {}


def register_tool(name: str, description: str, parameters: dict):
    """Decorator: register a handler as the tool ``name`` of :data:`TOOLS`."""
    def deco(fn):
        if name in TOOLS:
            raise ValueError(f"tool {name!r} registered twice")
        TOOLS[name] = Tool(name, description, {"type": "object", "additionalProperties": False, **parameters}, fn)
        return fn
    return deco


def toolbox(name: str) -> list[Tool]:
    """Tools offered under toolbox ``full`` or ``minimal``."""
    if name == "full":
        return list(TOOLS.values())
    if name == "minimal":
        return [t for n, t in TOOLS.items() if n not in MINIMAL_EXCLUDED]
    raise ValueError(f"unknown toolbox {name!r}; known: ['full', 'minimal']")


# --- shared schema pieces ----------------------------------------------------------------------
_VAR = {"type": "string", "description": "a variable name, e.g. X1"}
_SET = {"type": "array", "items": {"type": "string"}, "default": [],
        "description": "conditioning set (variable names), may be empty"}
_TEST = {"type": "string", "enum": ["fisherz", "kci"], "default": "kci",
         "description": "fisherz (partial correlation, linear-Gaussian) or kci (kernel, nonlinear)"}


def _graph_text(g: Graph) -> str:
    lines = g.to_lines()
    return "\n".join(lines) if lines else "(no edges)"


def _pvalue(test, x: int, y: int, given) -> float:
    """A CI test's p-value; a test that refuses (e.g. too few rows for the set) is a bad call, not charged."""
    try:
        return test.pvalue(x, y, given)
    except ValueError as exc:
        raise ToolError(f"{test.name} test refused: {exc}") from None


def _verdict(p: float, alpha: float) -> str:
    return "dependent" if p <= alpha else "independent (no evidence of dependence)"


# --- graph level ---------------------------------------------------------------------------------
@register_tool("run_algorithm", "Run a causal-discovery algorithm on the data and return its complete output graph. "
               "Algorithm identities are masked. With adopt=true the output replaces the working graph.",
               {"properties": {"algorithm": {"type": "string", "description": "a masked algorithm name"},
                               "adopt": {"type": "boolean", "default": False,
                                         "description": "replace the working graph with the output"}},
                "required": ["algorithm"]})
def _run_algorithm(ctx: ToolContext, args: dict) -> ToolResult:
    masked = args["algorithm"]
    if masked not in ctx.algorithm_map:
        raise ToolError(f"unknown algorithm {echo(masked)}; available: {sorted(ctx.algorithm_map)}")
    ctx.budgets.charge_algorithm_call()
    real = ctx.algorithm_map[masked]
    if real not in ctx.algorithm_cache:
        from heuresis.causal.algorithms import make_algorithm
        ctx.algorithm_cache[real] = make_algorithm(real, **dict(ctx.menu[real])).run(ctx.data).graph
    g = ctx.algorithm_cache[real]
    if args.get("adopt"):
        ctx.working = g.copy()
    note = "; adopted as the working graph" if args.get("adopt") else ""
    return ToolResult(f"{masked} output ({g.n_edges()} edges{note}):\n{_graph_text(g)}",
                      {"algorithm": masked, "edges": g.to_lines(), "adopted": bool(args.get("adopt"))},
                      details={"algorithm": real, "edges": g.to_lines()})


# --- edge level ------------------------------------------------------------------------------------
@register_tool("ci_test", "Conditional-independence test of x and y given a set: returns a verdict and a coarse "
               "strength grade (never a p-value). Costs one test unit.",
               {"properties": {"x": _VAR, "y": _VAR, "given": _SET, "test": _TEST}, "required": ["x", "y"]})
def _ci_test(ctx: ToolContext, args: dict) -> ToolResult:
    x, y, given = ctx.pair_and_set(args)
    test = args.get("test", "kci")
    ctx.budgets.check_tests(1)
    p = _pvalue(ctx.ci(test), x, y, given)
    ctx.budgets.charge_tests(1)          # charged once the test has completed
    grade = grade_of(p, ctx.grades)
    s = ", ".join(ctx.names[k] for k in given)
    verdict = _verdict(p, ctx.alpha)
    return ToolResult(f"{test} test of {ctx.names[x]} and {ctx.names[y]} given {{{s}}}: {grade} "
                      f"(verdict: {verdict})",
                      {"test": test, "x": ctx.names[x], "y": ctx.names[y], "given": [ctx.names[k] for k in given],
                       "grade": grade, "dependent": p <= ctx.alpha, "verdict": verdict}, test_units=1,
                      details={"pvalue": p, "grade": grade})


@register_tool("stability_check", "Repeat a CI test on random subsamples (80% of the rows, without replacement) and "
               "report how often each verdict and grade came out. Costs one test unit per resample.",
               {"properties": {"x": _VAR, "y": _VAR, "given": _SET, "test": _TEST,
                               "resamples": {"type": "integer", "minimum": 2, "maximum": 50, "default": 10}},
                "required": ["x", "y"]})
def _stability(ctx: ToolContext, args: dict) -> ToolResult:
    from heuresis.causal.ci import make_ci_test

    x, y, given = ctx.pair_and_set(args)
    test, r = args.get("test", "kci"), int(args.get("resamples", 10))
    ctx.budgets.check_tests(r)
    n = ctx.data.shape[0]
    m = int(round(0.8 * n))
    verdicts: dict[str, int] = {}
    grades: dict[str, int] = {}
    ps = []
    for _ in range(r):
        rows = np.sort(ctx.rng.choice(n, size=m, replace=False))
        p = _pvalue(make_ci_test(test, ctx.data[rows]), x, y, given)
        ps.append(p)
        v = "dependent" if p <= ctx.alpha else "independent"
        verdicts[v] = verdicts.get(v, 0) + 1
        g = grade_of(p, ctx.grades)
        grades[g] = grades.get(g, 0) + 1
    ctx.budgets.charge_tests(r)          # charged once every resample has completed
    s = ", ".join(ctx.names[k] for k in given)
    order = [label for _, label in ctx.grades]
    shown = {label: grades[label] for label in order if label in grades}
    gtxt = "; ".join(f"{label}: {n}" for label, n in shown.items())
    dep, ind = verdicts.get("dependent", 0), verdicts.get("independent", 0)
    return ToolResult(f"{test} test of {ctx.names[x]} and {ctx.names[y]} given {{{s}}} on {r} subsamples of {m} rows: "
                      f"dependent {dep}, independent {ind} (grades: {gtxt})",
                      {"test": test, "x": ctx.names[x], "y": ctx.names[y], "given": [ctx.names[k] for k in given],
                       "resamples": r, "rows": m, "dependent": dep, "independent": ind, "grades": shown},
                      test_units=r, details={"pvalues": ps})


# --- mechanism level ----------------------------------------------------------------------------------
@register_tool("data_summary", "Per column: mean, standard deviation, skewness, excess kurtosis, and whether the "
               "marginal looks normal (D'Agostino-Pearson test at level 0.01).", {"properties": {}})
def _summary(ctx: ToolContext, args: dict) -> ToolResult:
    from scipy import stats

    x = ctx.data
    lines = [f"{x.shape[0]} rows, {x.shape[1]} columns", "column  mean    sd     skew   ex.kurt  marginal"]
    columns = []
    for k, name in enumerate(ctx.names):
        c = x[:, k]
        normal = "normal-looking" if stats.normaltest(c).pvalue > 0.01 else "non-normal"
        mean, sd, skew, kurt = float(c.mean()), float(c.std()), float(stats.skew(c)), float(stats.kurtosis(c))
        lines.append(f"{name:<7} {mean:+.2f}  {sd:.2f}  {skew:+.2f}  {kurt:+6.2f}  {normal}")
        columns.append({"column": name, "mean": round(mean, 2), "sd": round(sd, 2), "skew": round(skew, 2),
                        "excess_kurtosis": round(kurt, 2), "marginal": normal})
    return ToolResult("\n".join(lines), {"rows": int(x.shape[0]), "columns": columns})


def _cv_r2(X: np.ndarray, y: np.ndarray, model) -> tuple[float, np.ndarray]:
    from sklearn.model_selection import KFold, cross_val_predict

    pred = cross_val_predict(model, X, y, cv=KFold(5, shuffle=True, random_state=0))
    return 1.0 - float(np.mean((y - pred) ** 2) / np.var(y)), y - pred


def _nonlinear():
    from sklearn.ensemble import RandomForestRegressor
    return RandomForestRegressor(n_estimators=60, min_samples_leaf=10, random_state=0, n_jobs=1)


@register_tool("parent_fit", "How well a target variable is explained by a candidate parent set: 5-fold "
               "cross-validated R^2 of a linear and a nonlinear (random forest) regression, with residual "
               "diagnostics (heteroscedasticity, heavy tails) of the better one.",
               {"properties": {"target": _VAR, "parents": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
                "required": ["target", "parents"]})
def _parent_fit(ctx: ToolContext, args: dict) -> ToolResult:
    from scipy import stats
    from sklearn.linear_model import LinearRegression

    t = ctx.node(args["target"])
    ps = [ctx.node(v) for v in args["parents"]]
    if t in ps:
        raise ToolError("the target cannot be among its own parents")
    if len(set(ps)) != len(ps):
        raise ToolError("a parent is listed twice")
    X, y = ctx.data[:, ps], ctx.data[:, t]
    r2_lin, res_lin = _cv_r2(X, y, LinearRegression())
    r2_nl, res_nl = _cv_r2(X, y, _nonlinear())
    res = res_nl if r2_nl > r2_lin else res_lin
    rho = abs(stats.spearmanr(np.abs(res), y - res).statistic)
    het = "strong" if rho > 0.3 else "moderate" if rho > 0.15 else "none apparent"
    kurt = float(stats.kurtosis(res))
    tails = "heavy" if kurt > 1.0 else "light/normal"
    better = "nonlinear" if r2_nl > r2_lin else "linear"
    return ToolResult(f"{args['target']} on {{{', '.join(args['parents'])}}}: linear R^2 {r2_lin:.2f}, "
                      f"nonlinear R^2 {r2_nl:.2f}; residuals of the {better} "
                      f"fit: heteroscedasticity {het}, tails {tails} (excess kurtosis {kurt:+.1f})",
                      {"target": args["target"], "parents": list(args["parents"]), "linear_r2": round(r2_lin, 2),
                       "nonlinear_r2": round(r2_nl, 2), "better_fit": better, "heteroscedasticity": het,
                       "tails": tails, "excess_kurtosis": round(kurt, 1)})


@register_tool("direction_probe", "Additive-noise direction probe for a pair: regress each variable on the other "
               "(nonlinear, out-of-fold) and grade the dependence between residual and input in both directions "
               "(the causal direction tends to leave independent residuals).",
               {"properties": {"x": _VAR, "y": _VAR}, "required": ["x", "y"]})
def _direction(ctx: ToolContext, args: dict) -> ToolResult:
    from heuresis.causal.ci import make_ci_test

    x, y, _ = ctx.pair_and_set(args)
    out = {}
    for a, b in ((x, y), (y, x)):
        _, res = _cv_r2(ctx.data[:, [a]], ctx.data[:, b], _nonlinear())
        p = make_ci_test("kci", np.column_stack([ctx.data[:, a], res])).pvalue(0, 1, ())
        out[(a, b)] = p
    g = {k: grade_of(v, ctx.grades) for k, v in out.items()}
    fx, bx = out[(x, y)], out[(y, x)]
    if fx > ctx.alpha >= bx:
        favoured: list[str] | None = [ctx.names[x], ctx.names[y]]
    elif bx > ctx.alpha >= fx:
        favoured = [ctx.names[y], ctx.names[x]]
    else:
        favoured = None
    lean = f"favours {favoured[0]} -> {favoured[1]}" if favoured else "inconclusive"
    return ToolResult(f"{ctx.names[x]} -> {ctx.names[y]}: residual vs cause {g[(x, y)]}; "
                      f"{ctx.names[y]} -> {ctx.names[x]}: residual vs cause {g[(y, x)]}; {lean}",
                      {"x": ctx.names[x], "y": ctx.names[y], "forward_grade": g[(x, y)], "backward_grade": g[(y, x)],
                       "favoured": favoured})


_RUN_CODE_UNISOLATED = ("Run a short Python program (numpy and scipy available) on the data: the data are in the "
                        "working folder as data.npy (n x d array) and data.csv (header X1..Xd). CPU, memory, output "
                        "and time are limited. Returns stdout (truncated).")


@register_tool("run_code", "Run a short Python program (numpy and scipy available) on the data in a sandbox: the "
               "data are in the working folder as data.npy (n x d array) and data.csv (header X1..Xd). No "
               "network, no other files; CPU, memory, processes, output and time are limited. Returns stdout "
               "(truncated).", {"properties": {"code": {"type": "string", "minLength": 1}}, "required": ["code"]})
def _run_code(ctx: ToolContext, args: dict) -> ToolResult:
    if ctx.code_isolation not in ("bwrap", "none"):
        raise ToolError("the code tool is not offered in this episode")
    lim = ctx.code_limits
    wall = min(lim.wall_seconds, max(1.0, ctx.budgets.remaining_wall()))
    res = run_code(args["code"], ctx.data, replace(lim, wall_seconds=wall), isolation=ctx.code_isolation)
    return ToolResult(res.render(), res.shown(),
                      details={k: v for k, v in res.as_dict().items() if k not in ("stdout", "stderr")})


# --- edit and submit ---------------------------------------------------------------------------------
@register_tool("set_edges", "Set the relation of one or more pairs in the working graph: 'none', '--' (undirected), "
               "'->' (x causes y) or '<-' (y causes x).",
               {"properties": {"changes": {"type": "array", "minItems": 1, "items": {
                   "type": "object", "additionalProperties": False, "required": ["x", "y", "relation"],
                   "properties": {"x": _VAR, "y": _VAR, "relation": {"type": "string", "enum": list(_REL)}}}}},
                "required": ["changes"]})
def _set_edges(ctx: ToolContext, args: dict) -> ToolResult:
    n = set_pairs(ctx.working, ctx.names, args["changes"])
    return ToolResult(f"set {n} pair(s); the working graph has {ctx.working.n_edges()} edges",
                      {"pairs_set": n, "n_edges": ctx.working.n_edges()})


def set_pairs(graph: Graph, names: tuple[str, ...], changes: list[Mapping]) -> int:
    """Set the relations ``set_edges`` asks for in ``graph`` (all or nothing: validated first); returns their count."""
    todo = []
    for ch in changes:
        x, y = _node(names, ch["x"]), _node(names, ch["y"])
        if x == y:
            raise ToolError(f"x and y must differ (both {names[x]})")
        todo.append((x, y, _REL[ch["relation"]]))
    for x, y, rel in todo:
        graph.set(x, y, rel)
    return len(todo)


@register_tool("view_graph", "Show the working graph as edge lines.", {"properties": {}})
def _view(ctx: ToolContext, args: dict) -> ToolResult:
    return ToolResult(f"working graph ({ctx.working.n_edges()} edges):\n{_graph_text(ctx.working)}",
                      {"edges": ctx.working.to_lines()})


@register_tool("submit", "Submit the final graph and end the episode. 'edges' is the final edge list (a list of "
               "'Xi -> Xj' / 'Xi -- Xj' strings, or such lines in one string); without it the working graph is "
               "submitted.",
               {"properties": {"edges": {"type": ["array", "string"], "description": "the final edge list"}}})
def _submit(ctx: ToolContext, args: dict) -> ToolResult:
    if "edges" not in args:
        g = ctx.working.copy()
    else:
        try:
            g = parse_edge_list(args["edges"], ctx.names)
        except ParseError as exc:
            raise ToolError(f"edge list rejected: {exc}") from None
    return ToolResult(f"submitted {g.n_edges()} edges", {"n_edges": g.n_edges(), "edges": g.to_lines()}, submitted=g,
                      details={"edges": g.to_lines()})


def replay_call(working: Graph, call: Mapping) -> Graph | None:
    """The working graph after a recorded call, as its tool changed it; None when the call left it as it was.

    ``call`` is a call as the harness records it (a ``calls`` row or a transcript call: ``tool``,
    ``arguments``, ``ok``, ``details``). Only a call that succeeded changes the working graph:
    ``set_edges`` sets its pairs (:func:`set_pairs`, as the tool does) and ``run_algorithm`` with
    ``adopt`` replaces the graph by the algorithm's output, read from the call's details (the
    output the agent was shown). Every other tool, ``submit`` included, leaves it alone.
    ``working`` itself is not modified.
    """
    if not call.get("ok"):
        return None
    tool = call.get("tool")
    if tool not in ("set_edges", "run_algorithm"):
        return None
    args = _arguments(call.get("arguments") or "{}")
    if tool == "set_edges":
        g = working.copy()
        set_pairs(g, tuple(working.names), args["changes"])
        return g
    if not args.get("adopt"):
        return None
    details = json.loads(call.get("details") or "{}")
    return parse_edge_list(list(details["edges"]), working.names)
