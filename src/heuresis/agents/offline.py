"""Offline agents (docs/design.md §5.5): scripted policies that act only through tool calls.

They drive the same interface an LLM agent does — OpenAI-format tool calls with JSON-string
arguments — and need no network.  They read the task and the tool results as the structured
data the harness hands every agent (:class:`~heuresis.agents.base.Observation`: the same facts
as the text, never the prose), so rewording a tool's text cannot change what they do.  They are **privileged
baselines**: the harness passes them the episode's unmasking map (masked name -> menu name) in
the constructor (recorded in the episode as ``privileged``), because a baseline must know which
masked algorithm is PC-KCI; an agent under study never gets it.

* ``shortcut`` — run PC-KCI, submit its output.
* ``merge`` — run every menu algorithm, add to PC-KCI's output (as undirected) every pair that at
  least ``k`` of the other algorithms join, submit.
* ``evidence`` — start from PC-KCI's output (guided: the starting graph and deletion log of the
  prompt, candidates the deletions with the chosen logged grades; unguided: run PC-KCI, every
  non-adjacent pair a candidate), re-test each candidate through ``ci_test`` calls under the
  alternative conditioning sets the current graph implies, and restore it, undirected, when every
  check of its :class:`EvidenceRule` passes (e.g. KCI dependent given both endpoints' neighbour
  sets and Fisher-z dependent given each single neighbour), optionally confirmed by a stability
  check — within the test budget left (the observed budgets); guided and with the code tool offered,
  also restore the deletions a nonlinear screen and a local permutation test find dependent
  (programs of :mod:`heuresis.agents.nlcode` sent through ``run_code``); then submit.  The planning and the
  decision are pure functions (:func:`plan_retests`, :func:`decide_restore`) that
  ``benchmarks/evidence_agent.py`` replays on cached p-values to choose the settings on dev.

When offered only ``submit`` (the last turn) every agent submits the best graph it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from heuresis.agents import nlcode
from heuresis.agents.base import Agent, AgentReply, Observation, register_agent, tool_call
from heuresis.causal.graph import Graph, Relation
from heuresis.harness.parse import ParseError, parse_edge_list

__all__ = [
    "NONLINEAR_DEFAULTS",
    "Check",
    "EvidenceAgent",
    "EvidenceRule",
    "MergeAgent",
    "RetestPlan",
    "ShortcutAgent",
    "decide_nonlinear",
    "decide_restore",
    "plan_confirm",
    "plan_retests",
    "plan_screen",
]

# --- reading what the harness observed (structured results, never the prose) ---------------------
def _graph_of(obs: Observation | None, names: list[str]) -> Graph | None:
    """The graph of a run_algorithm / view_graph result, or None for an error (or no result)."""
    if obs is None or not obs.ok:
        return None
    edges = obs.data.get("edges") or []
    if not edges:
        return Graph.empty(len(names), names)
    try:
        return parse_edge_list("\n".join(edges), names)
    except ParseError:
        return None


def _msg(calls: list[dict], content: str | None = None) -> AgentReply:
    return AgentReply({"role": "assistant", "content": content, "tool_calls": calls})


def _submit(g: Graph | None) -> AgentReply:
    args = {} if g is None else {"edges": g.to_lines()}
    return _msg([tool_call("submit", args)])


def _only_submit(tools: list[dict]) -> bool:
    return [t["function"]["name"] for t in tools] == ["submit"]


class _Offline(Agent):
    """Base of the offline agents: the unmasking map, and the task and results as observed data."""

    privileged = True

    def __init__(self, name: str, algorithm_map: Mapping[str, str] | None = None, **params) -> None:
        super().__init__(name, **params)
        self.unmask = dict(algorithm_map or {})
        self.mask = {v: k for k, v in self.unmask.items()}
        self.best: Graph | None = None
        self.step = 0
        self.pending: dict[str, tuple] = {}
        self.task: dict = {}
        self.budgets: dict = {}
        self._inbox: dict[str, Observation] = {}

    def masked(self, algorithm: str) -> str:
        """The masked name of menu algorithm ``algorithm`` in this episode."""
        if algorithm not in self.mask:
            raise ValueError(f"{self.name}: {algorithm!r} is not on the menu of this episode")
        return self.mask[algorithm]

    @property
    def names(self) -> list[str]:
        """The variables, as the task names them."""
        if "names" not in self.task:
            raise ValueError(f"{self.name}: the task does not name the variables")
        return list(self.task["names"])

    def observe(self, observation: Observation) -> None:
        """Keep the task, the latest budgets and the results of the current turn's calls."""
        if observation.key == "task":
            self.task = dict(observation.data)
        else:
            self._inbox[observation.key] = observation
        if observation.budgets is not None:
            self.budgets = dict(observation.budgets)

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """Submit the best graph in the last turn, else the next step of :meth:`act`."""
        results, self._inbox = self._inbox, {}
        if _only_submit(tools):
            return _submit(self.best)
        self.step += 1
        return self.act(results)

    def act(self, results: dict[str, Observation]) -> AgentReply:
        """The next reply, given the results of the previous turn's calls by call id."""
        raise NotImplementedError


@register_agent("shortcut")
class ShortcutAgent(_Offline):
    """Runs PC-KCI through the masked tool and submits its output."""

    def act(self, results):
        """The next reply (see the class), given the previous turn's results by call id."""
        names = self.names
        if self.step == 1:
            tc = tool_call("run_algorithm", {"algorithm": self.masked("pc_kci")})
            self.pending = {tc["id"]: ("pc_kci",)}
            return _msg([tc])
        for cid in self.pending:
            self.best = _graph_of(results.get(cid), names) or self.best
        return _submit(self.best)


@register_agent("merge")
class MergeAgent(_Offline):
    """PC-KCI plus every pair at least ``k`` other menu algorithms join (undirected)."""

    def __init__(self, name: str, algorithm_map=None, k: int = 2, **params) -> None:
        super().__init__(name, algorithm_map, k=k, **params)
        self.k = int(k)

    def act(self, results):
        """The next reply (see the class), given the previous turn's results by call id."""
        names = self.names
        if self.step == 1:
            calls = []
            for masked, real in sorted(self.unmask.items()):
                tc = tool_call("run_algorithm", {"algorithm": masked})
                self.pending[tc["id"]] = real
                calls.append(tc)
            return _msg(calls)
        graphs = {real: _graph_of(results.get(cid), names) for cid, real in self.pending.items()}
        base = graphs.get("pc_kci")
        if base is None:
            return _submit(None)
        merged = base.copy()
        others = [g for a, g in graphs.items() if a != "pc_kci" and g is not None]
        skel = base.skeleton()
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                if not skel[i, j] and sum(bool(g.skeleton()[i, j]) for g in others) >= self.k:
                    merged.set(i, j, Relation.UNDIRECTED)
        self.best = merged
        return _submit(merged)


# --- the evidence rule: pure planning and decision, shared by the agent and the dev tuner ---------
SET_KINDS = ("nbrs", "nbrs_all", "union", "singles", "empty")
#: The nonlinear path (:mod:`heuresis.agents.nlcode` through the code tool); ``screen`` and
#: ``confirm`` are the p-value thresholds, ``chunk`` the pairs per confirming ``run_code`` call.
NONLINEAR_DEFAULTS = {"screen": 1e-6, "confirm": 0.011, "permutations": 100, "block": 8, "chunk": 2}
_LOG_TEST = "kci"     # the test of PC-KCI's deletion log: its logged grade stands for a re-test at the deleting set


@dataclass(frozen=True)
class Check:
    """One vote of the evidence rule: ``test`` given the ``sets`` of a pair, graded.

    ``need = "all"``: every set's grade must be in ``grades``; ``need = "any"``: at least one.
    A check for which no set exists (e.g. ``singles`` of two isolated nodes) fails.
    """

    test: str
    sets: tuple[str, ...]
    need: str
    grades: tuple[str, ...]

    def __post_init__(self) -> None:
        sets = (self.sets,) if isinstance(self.sets, str) else tuple(self.sets)
        for k in sets:
            if k not in SET_KINDS:
                raise ValueError(f"evidence check: unknown set kind {k!r}; known: {list(SET_KINDS)}")
        if self.need not in ("all", "any"):
            raise ValueError(f"evidence check: need must be 'all' or 'any', got {self.need!r}")
        if self.test not in ("kci", "fisherz"):
            raise ValueError(f"evidence check: unknown test {self.test!r}; known: ['fisherz', 'kci']")
        if isinstance(self.grades, str) or not self.grades:
            raise ValueError(f"evidence check: grades must be a non-empty list, got {self.grades!r}")
        object.__setattr__(self, "sets", sets)
        object.__setattr__(self, "grades", tuple(str(g) for g in self.grades))

    @classmethod
    def from_config(cls, spec: Mapping) -> Check:
        """A check from its config entry ``{test, sets, need, grades}``."""
        unknown = sorted(set(spec) - {"test", "sets", "need", "grades"})
        if unknown:
            raise ValueError(f"evidence check: unknown key(s) {unknown} in {dict(spec)!r}")
        return cls(**dict(spec))

    def passes(self, got: Sequence[str | None]) -> bool:
        """Whether the grades ``got`` (one per set; None: a failed test) pass the check."""
        if not got:
            return False
        ok = [g in self.grades for g in got]
        return all(ok) if self.need == "all" else any(ok)


@dataclass(frozen=True)
class EvidenceRule:
    """The evidence agent's settings (config ``agents.evidence``; chosen on dev instances).

    Parameters
    ----------
    candidate_grades
        Guided condition: re-test only deletions whose logged grade is one of these, in this
        priority order (empty: every deletion); ties broken by larger deleting set first.
        Unguided: every non-adjacent pair of PC-KCI's output.
    checks
        The votes (:class:`Check`); a candidate is restored when every check passes.  The set
        kinds, from the current graph (PC-KCI's output): ``nbrs`` — the neighbours of x (without
        y) and, separately, those of y (without x), each minus the common children c with
        x -> c <- y (conditioning on a common child makes non-adjacent x, y dependent);
        ``nbrs_all`` — the same with common children; ``union`` — the two ``nbrs`` sets joined;
        ``singles`` — each variable of that union alone; ``empty`` — no conditioning.
    max_set
        Sets larger than this are not tested (and do not count).
    unguided_checks
        The checks of the unguided condition, where no log screens the candidates (every
        non-adjacent pair is one); empty: the same as ``checks``.
    nonlinear
        None (off), or the second, alternative path of the guided condition (keys and defaults
        :data:`NONLINEAR_DEFAULTS`): every logged deletion is screened with the nested-regression
        F-test of :mod:`heuresis.agents.nlcode` given both ``nbrs`` sets (the larger p counts), and
        a pair whose screen p is <= ``screen`` is confirmed by the local permutation test given its
        deleting set and both ``nbrs`` sets (the largest p counts); it is restored when that p is
        <= ``confirm``.  Both run as programs through the code tool (not charged to the test
        budget); without the code tool (minimal toolbox) or without a log (unguided) the path is off.
    """

    candidate_grades: tuple[str, ...] = ("no evidence (borderline)",)
    checks: tuple[Check, ...] = (Check("kci", ("nbrs",), "all", ("strong dependence", "moderate dependence",
                                                                    "weak dependence")),
                                 Check("kci", ("nbrs",), "any", ("strong dependence",)))
    max_set: int = 3
    unguided_checks: tuple[Check, ...] = ()
    nonlinear: Mapping | None = None

    def __post_init__(self) -> None:
        if isinstance(self.candidate_grades, str):
            raise ValueError(f"evidence rule: candidate_grades must be a list, got {self.candidate_grades!r}")
        object.__setattr__(self, "candidate_grades", tuple(str(g) for g in (self.candidate_grades or ())))
        checks = tuple(c if isinstance(c, Check) else Check.from_config(c) for c in self.checks)
        if not checks:
            raise ValueError("evidence rule: at least one check is needed")
        object.__setattr__(self, "checks", checks)
        object.__setattr__(self, "unguided_checks", tuple(c if isinstance(c, Check) else Check.from_config(c)
                                                          for c in (self.unguided_checks or ())))
        if self.nonlinear is not None:
            spec = dict(self.nonlinear)
            unknown = sorted(set(spec) - set(NONLINEAR_DEFAULTS))
            if unknown:
                raise ValueError(f"evidence rule: unknown nonlinear key(s) {unknown}; "
                                 f"known: {sorted(NONLINEAR_DEFAULTS)}")
            spec = {**NONLINEAR_DEFAULTS, **spec}
            for k in ("screen", "confirm"):
                if not 0.0 < float(spec[k]) <= 1.0:
                    raise ValueError(f"evidence rule: nonlinear.{k} must be in (0, 1], got {spec[k]!r}")
            for k in ("permutations", "block", "chunk"):
                if int(spec[k]) < 1:
                    raise ValueError(f"evidence rule: nonlinear.{k} must be a positive integer, got {spec[k]!r}")
            object.__setattr__(self, "nonlinear", {"screen": float(spec["screen"]), "confirm": float(spec["confirm"]),
                                                   "permutations": int(spec["permutations"]),
                                                   "block": int(spec["block"]), "chunk": int(spec["chunk"])})

    def checks_for(self, guided: bool) -> tuple[Check, ...]:
        """The checks of the guided or the unguided condition."""
        return self.checks if guided or not self.unguided_checks else self.unguided_checks

    @classmethod
    def from_config(cls, spec: Mapping) -> EvidenceRule:
        """The rule from the agent's config parameters (unknown keys are an error)."""
        keys = {f.name for f in fields(cls)}
        unknown = sorted(set(spec) - keys)
        if unknown:
            raise ValueError(f"evidence rule: unknown parameter(s) {unknown}; known: {sorted(keys)}")
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.items()})  # type: ignore[arg-type]

    def as_config(self) -> dict:
        """The rule as config parameters (what :meth:`from_config` reads)."""
        def conf(cs):
            return [{"test": c.test, "sets": list(c.sets), "need": c.need, "grades": list(c.grades)} for c in cs]
        out = {"candidate_grades": list(self.candidate_grades), "max_set": self.max_set, "checks": conf(self.checks)}
        if self.unguided_checks:
            out["unguided_checks"] = conf(self.unguided_checks)
        if self.nonlinear is not None:
            out["nonlinear"] = dict(self.nonlinear)
        return out

    def describe(self) -> str:
        """A one-line summary of the rule (for logs and benchmark tables)."""
        short = {"strong dependence": "S", "moderate dependence": "M", "weak dependence": "W",
                 "no evidence (borderline)": "B", "no evidence": "N"}
        def desc(checks):
            return " & ".join(f"{c.test}[{'+'.join(c.sets)}] {c.need} in {''.join(short.get(g, g) for g in c.grades)}"
                              for c in checks)
        out = f"cand {''.join(short.get(g, g) for g in self.candidate_grades) or 'all'}; max_set {self.max_set}; "
        out += desc(self.checks)
        out += f"; unguided: {desc(self.unguided_checks)}" if self.unguided_checks else ""
        if self.nonlinear is not None:
            nl = self.nonlinear
            out += (f"; OR nonlinear screen <= {nl['screen']:g} & permutation p <= {nl['confirm']:g} "
                    f"({nl['permutations']} perms, blocks of {nl['block']})")
        return out

    def sets_for(self, g: Graph, x: int, y: int, kinds: Sequence[str]) -> list[tuple[int, ...]]:
        """The conditioning sets of kinds ``kinds`` for pair x, y in graph ``g`` (ordered, unique)."""
        a = g.amat != 0
        d = a.shape[0]
        child = {k for k in range(d) if a[x, k] and not a[k, x] and a[y, k] and not a[k, y]}
        nb = {u: [k for k in range(d) if k not in (x, y) and (a[u, k] or a[k, u])] for u in (x, y)}
        out: list[tuple[int, ...]] = []

        def add(s) -> None:
            s = tuple(sorted(s))
            if len(s) <= self.max_set and s not in out:
                out.append(s)

        for kind in kinds:
            if kind == "nbrs":
                for u in (x, y):
                    add(k for k in nb[u] if k not in child)
            elif kind == "nbrs_all":
                for u in (x, y):
                    add(nb[u])
            elif kind == "union":
                add({k for u in (x, y) for k in nb[u] if k not in child})
            elif kind == "singles":
                for k in sorted({k for u in (x, y) for k in nb[u] if k not in child}):
                    add((k,))
            elif kind == "empty":
                add(())
        return out


@dataclass
class RetestPlan:
    """What the rule asks: per candidate pair, per check, the (set, test) keys it reads."""

    reads: dict[tuple[int, int], list[list[tuple[tuple[int, ...], str]]]] = field(default_factory=dict)
    known: dict[tuple[int, int], dict[tuple[tuple[int, ...], str], str]] = field(default_factory=dict)
    tests: list[tuple[int, int, tuple[int, ...], str]] = field(default_factory=list)
    guided: bool = True


def plan_retests(rule: EvidenceRule, g: Graph, log: Sequence[tuple[int, int, tuple[int, ...], str]] | None,
                 units: int) -> RetestPlan:
    """Candidates and their re-tests within ``units`` test units, in priority order.

    ``log`` is the guided deletion log as ``(x, y, deleting set, grade)``; None means unguided
    (every non-adjacent pair of ``g`` is a candidate, no deleting set known).  A KCI test at the
    deleting set is not re-run: its logged grade is used.  A candidate that a known grade already
    rules out is not tested at all; one whose tests do not all fit in what is left is skipped.
    """
    plan = RetestPlan(guided=log is not None)
    if log is None:
        skel = g.skeleton()
        d = skel.shape[0]
        cands = [(i, j, None, "") for i in range(d) for j in range(i + 1, d) if not skel[i, j]]
    else:
        rank = {gr: k for k, gr in enumerate(rule.candidate_grades)}
        cands = [c for c in log if not rule.candidate_grades or c[3] in rank]  # type: ignore[misc]
        cands.sort(key=lambda c: (rank.get(c[3], len(rank)), -len(c[2]), min(c[0], c[1]), max(c[0], c[1])))  # type: ignore[arg-type]
    checks = rule.checks_for(plan.guided)
    left = int(units)
    for x, y, sep, grade in cands:
        x, y = min(x, y), max(x, y)
        known = {} if sep is None else {(tuple(sorted(sep)), _LOG_TEST): grade}  # type: ignore[var-annotated]
        reads = [[(s, c.test) for s in rule.sets_for(g, x, y, c.sets)] for c in checks]
        if any(not r for r in reads):
            continue                                      # a check without sets fails
        if any(c.need == "all" and any(k in known and known[k] not in c.grades for k in r)
               for c, r in zip(checks, reads)):
            continue                                      # ruled out by the logged grade
        todo = list(dict.fromkeys(k for r in reads for k in r if k not in known))
        if len(todo) > left:
            continue
        left -= len(todo)
        plan.reads[(x, y)] = reads
        plan.known[(x, y)] = known
        plan.tests += [(x, y, s, t) for s, t in todo]
    return plan


def decide_restore(rule: EvidenceRule, plan: RetestPlan,
                   grades: Mapping[tuple[int, int, tuple[int, ...], str], str | None]) -> list[tuple[int, int]]:
    """The candidate pairs to restore, given the grade of every planned test (None: the call failed)."""
    out = []
    checks = rule.checks_for(plan.guided)
    for (x, y), reads in plan.reads.items():
        known = plan.known[(x, y)]
        if all(c.passes([known.get(k, grades.get((x, y, *k))) for k in r]) for c, r in zip(checks, reads)):
            out.append((x, y))
    return out


def _pair_key(x: int, y: int) -> tuple[int, int]:
    return (min(x, y), max(x, y))


def plan_screen(rule: EvidenceRule, g: Graph, log: Sequence[tuple[int, int, tuple[int, ...], str]] | None
                ) -> list[list]:
    """Return the nonlinear path's screening jobs ``[[x, y, [set, ...]], ...]``.

    Every logged deletion with its two ``nbrs`` sets (pairs without such a set are left out); []
    when the path is off or unguided.
    """
    if rule.nonlinear is None or log is None:
        return []
    jobs, seen = [], set()
    for x, y, _sep, _grade in log:
        x, y = _pair_key(x, y)
        sets = rule.sets_for(g, x, y, ("nbrs",))
        if sets and (x, y) not in seen:
            seen.add((x, y))
            jobs.append([x, y, [list(s) for s in sets]])
    return jobs


def plan_confirm(rule: EvidenceRule, g: Graph, log: Sequence[tuple[int, int, tuple[int, ...], str]] | None,
                 screened: Mapping[tuple[int, int], float], skip: Sequence[tuple[int, int]] = ()) -> list[list]:
    """Return the confirming jobs for the pairs whose screen value is <= ``screen``.

    Most significant first, pairs in ``skip`` (already restored) left out; each is given its
    deleting set and its ``nbrs`` sets.
    """
    if rule.nonlinear is None or log is None:
        return []
    sep = {}  # type: ignore[var-annotated]
    for x, y, s, _grade in log:
        sep.setdefault(_pair_key(x, y), tuple(sorted(s)))
    skip = {_pair_key(x, y) for x, y in skip}  # type: ignore[assignment]
    hits = sorted((p, k) for k, p in screened.items() if p <= rule.nonlinear["screen"] and k in sep and k not in skip)
    jobs = []
    for _p, (x, y) in hits:
        sets = [sep[(x, y)]] + [s for s in rule.sets_for(g, x, y, ("nbrs",)) if s != sep[(x, y)]]
        jobs.append([x, y, [list(s) for s in sets]])
    return jobs


def decide_nonlinear(rule: EvidenceRule, confirmed: Mapping[tuple[int, int], float]) -> list[tuple[int, int]]:
    """The pairs the nonlinear path restores: confirming permutation p <= ``confirm``."""
    if rule.nonlinear is None:
        return []
    return sorted(k for k, p in confirmed.items() if p <= rule.nonlinear["confirm"])


@register_agent("evidence")
class EvidenceAgent(_Offline):
    """Re-tests PC-KCI's doubtful deletions under alternative sets; restores robustly dependent pairs.

    1. *Candidates* and 2. *re-tests*: :func:`plan_retests` with the :class:`EvidenceRule` built
       from the agent's parameters (guided: the logged deletions with the chosen grades; unguided:
       run PC-KCI through the masked tool, every non-adjacent pair), within the test budget read
       from the observed budgets; every test is one ``ci_test`` tool call.
       With the nonlinear path on (guided, code tool offered), the same turn sends one ``run_code``
       program that screens every logged deletion (:func:`plan_screen`, :mod:`.nlcode`).
    3. *Decide*: :func:`decide_restore` on the grades read back from the tool results.
    4. *Stability* (optional, ``resamples`` > 0 and the tool offered): pairs that pass are
       re-tested on ``resamples`` subsamples at their weakest alternative set and kept when at
       least ``min_dependent_share`` of them come out dependent.
    5. *Nonlinear path*: the screened pairs below the threshold (:func:`plan_confirm`) go to local
       permutation tests, ``chunk`` pairs per ``run_code`` call; :func:`decide_nonlinear` adds the
       confirmed ones.  A failed or truncated program confirms nothing.
    6. Restore the pairs, undirected, and submit.

    The settings in config.yaml (``agents.evidence``) were chosen on dev instances by
    ``benchmarks/evidence_agent.py``; the measured numbers are in docs/agents.md.
    """

    def __init__(self, name: str, algorithm_map=None, resamples: int = 0, min_dependent_share: float = 0.5,
                 **params) -> None:
        self.rule = EvidenceRule.from_config(params)
        super().__init__(name, algorithm_map, resamples=resamples, min_dependent_share=min_dependent_share,
                         **self.rule.as_config())
        self.resamples, self.min_share = int(resamples), float(min_dependent_share)
        self.phase = "start"
        self.log: list[tuple[int, int, tuple[int, ...], str]] | None = None
        self.plan: RetestPlan | None = None
        self.passed: list[tuple[int, int]] = []
        self.screened: dict[tuple[int, int], float] = {}
        self._tools: list[dict] | None = None

    def _start_guided(self, names) -> None:
        """The guided start: PC-KCI's output and deletion log, as the task gives them."""
        edges = self.task.get("start_edges") or []
        self.best = parse_edge_list("\n".join(edges), names) if edges else Graph.empty(len(names), names)
        idx = {n: k for k, n in enumerate(names)}
        self.log = [(idx[d["x"]], idx[d["y"]], tuple(sorted(idx[v] for v in d["sepset"])), str(d["grade"]))
                    for d in self.task["deletion_log"]]

    @staticmethod
    def _grade(obs: Observation | None) -> str | None:
        """The grade of a ``ci_test`` result (None for an error)."""
        return str(obs.data["grade"]) if obs is not None and obs.ok else None

    def _offered(self, tool: str) -> bool:
        return tool in {t["function"]["name"] for t in (self._tools or [])}

    def act(self, results):
        """The next reply (see the class), given the previous turn's results by call id."""
        names = self.names
        if self.phase == "start":
            if self.task.get("deletion_log") is not None:
                self._start_guided(names)
                self.phase = "retest"
            else:
                tc = tool_call("run_algorithm", {"algorithm": self.masked("pc_kci")})
                self.pending = {tc["id"]: ("pc_kci",)}
                self.phase = "candidates"
                return _msg([tc])
        if self.phase == "candidates":
            g = _graph_of(next((results.get(cid) for cid in self.pending), None), names)
            if g is None:
                return _submit(None)
            self.best = g
            self.phase = "retest"
        left = self.budgets.get("test_units") or 0
        if self.phase == "retest":
            self.plan = plan_retests(self.rule, self.best, self.log, left)
            left -= len(self.plan.tests)
            self.pending = {}
            calls = []
            for x, y, s, test in self.plan.tests:
                self._queue(calls, (x, y, s, test), "ci_test",
                            {"x": names[x], "y": names[y], "given": [names[k] for k in s], "test": test})
            jobs = plan_screen(self.rule, self.best, self.log) if self._offered("run_code") else []
            if jobs:   # the nonlinear screen: one program through the code tool (no test units)
                self._queue(calls, ("screen",), "run_code", {"code": nlcode.program("screen", jobs)})
            self.phase = "decide"
            if calls:
                return _msg(calls)
        if self.phase == "decide":
            grades, self.screened = {}, {}
            for cid, key in self.pending.items():
                if key == ("screen",):
                    self.screened = self._code_values(results.get(cid))
                else:
                    grades[key] = self._grade(results.get(cid))
            self.passed = decide_restore(self.rule, self.plan, grades)
            self.pending = {}
            if self.resamples > 0 and self._offered("stability_check"):
                calls = []
                for x, y in self.passed:
                    if self.resamples > left:
                        break
                    left -= self.resamples
                    # the first set of the first check, under that check's test
                    s, test = self.plan.reads[(x, y)][0][0]
                    self._queue(calls, (x, y), "stability_check", {"x": names[x], "y": names[y],
                                                                   "given": [names[k] for k in s], "test": test,
                                                                   "resamples": self.resamples})
                self.phase = "stability"
                if calls:
                    return _msg(calls)
            self.phase = "nonlinear"
        if self.phase == "stability":
            keep = []
            for cid, (x, y) in self.pending.items():
                obs = results.get(cid)
                if obs is not None and obs.ok:
                    dep_n, ind_n = int(obs.data["dependent"]), int(obs.data["independent"])
                    if dep_n / max(1, dep_n + ind_n) >= self.min_share:
                        keep.append((x, y))
            self.passed = keep
            self.phase = "nonlinear"
        if self.phase == "nonlinear":
            jobs = plan_confirm(self.rule, self.best, self.log, self.screened, skip=self.passed)
            self.pending = {}
            calls = []
            if jobs:
                nl = self.rule.nonlinear
                for k in range(0, len(jobs), nl["chunk"]):
                    self._queue(calls, ("confirm",), "run_code",
                                {"code": nlcode.program("confirm", jobs[k:k + nl["chunk"]],
                                                        permutations=nl["permutations"], block=nl["block"])})
            self.phase = "confirm"
            if calls:
                return _msg(calls)
        if self.phase == "confirm":
            confirmed: dict[tuple[int, int], float] = {}
            for cid in self.pending:
                confirmed.update(self._code_values(results.get(cid)))
            done = set(self.passed)
            self.passed = list(self.passed) + [k for k in decide_nonlinear(self.rule, confirmed) if k not in done]
            self.pending = {}
            self.phase = "restore"
        if self.phase == "restore":
            g = self.best.copy()
            for x, y in self.passed:
                g.set(x, y, Relation.UNDIRECTED)
            self.best = g
            self.phase = "done"
        return _submit(self.best)

    def _queue(self, calls: list[dict], key: tuple, tool: str, args: dict) -> None:
        """Append a call of ``tool`` to ``calls``; its result is read back under ``key``."""
        tc = tool_call(tool, args)
        self.pending[tc["id"]] = key
        calls.append(tc)

    @staticmethod
    def _code_values(obs: Observation | None) -> dict[tuple[int, int], float]:
        """The ``x y value`` lines of a code-tool run that exited 0 ({} when it failed or was killed)."""
        if obs is None or not obs.ok or obs.data.get("timed_out") or obs.data.get("exit_code") != 0:
            return {}
        return nlcode.parse(obs.data.get("stdout") or "")

    def respond(self, messages: list[dict], tools: list[dict]) -> AgentReply:
        """Note the tools offered (the code and stability tools are optional), then act."""
        self._tools = tools
        return super().respond(messages, tools)
