"""The evidence rule (docs/agents.md): which of PC-KCI's deletions to re-test, and which to restore.

The rule (:class:`EvidenceRule`) is the evidence agent's settings: the candidate pairs (guided:
the deletions of PC-KCI's log with the chosen logged grades; unguided: every non-adjacent pair of
PC-KCI's output), and the votes (:class:`Check`) a candidate must all pass to be restored — a
test (KCI or Fisher-z) given conditioning sets the current graph implies (the endpoints'
neighbour sets, their union, each single neighbour, the empty set), graded like the ``ci_test``
tool.  An optional second path of the guided condition screens every logged deletion with a
nonlinear test and confirms the screened pairs with a local permutation test (programs of
:mod:`heuresis.agents.nlcode` through the code tool).

It plans, as pure functions of the graph, the log and the grades (no tool calls, no data):

* :func:`plan_retests` — the candidates and the ``ci_test`` calls that fit in the test budget
  left (a :class:`RetestPlan`); :func:`decide_restore` — the candidates to restore, given the
  grades those calls returned;
* :func:`plan_screen` and :func:`plan_confirm` — the nonlinear path's screening and confirming
  jobs; :func:`decide_nonlinear` — the pairs it restores, given the confirming p-values.

The evidence agent (:class:`heuresis.agents.offline.EvidenceAgent`) sends what they plan as tool
calls; ``benchmarks/evidence_agent.py`` replays them on cached p-values to choose the settings
on dev instances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from heuresis.causal.graph import Graph

__all__ = [
    "NONLINEAR_DEFAULTS",
    "SET_KINDS",
    "Check",
    "EvidenceRule",
    "RetestPlan",
    "decide_nonlinear",
    "decide_restore",
    "plan_confirm",
    "plan_retests",
    "plan_screen",
]

#: The kinds of conditioning set a :class:`Check` may name (:meth:`EvidenceRule.sets_for`).
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
