"""One play of a scenario (docs/games.md §1): free history, Stage 1, one Stage-2 submission, report.

Observation rules (what :meth:`Game.deploy` and :attr:`Game.history` show, as CausalGame's agent sees them,
:func:`~heuresis.causal.games.causalgame.agent_view`):

* per deployment the **exact** counts of returned and destroyed drones;
* per drone a row with its status, hit count, whether it was detected and the scenario's visible
  environment (``environment_shown``); destroyed drones' rows are left out where the scenario hides
  failed drones;
* in the weather scenario the per-drone values pass through its measurement noise; the counts stay exact;
* hidden variables are never shown, except through the ablations' extra disclosures
  (``component_hits``, ``hidden_measurements``).

Budgets are enforced here, server-side: Stage 1 allows ``stage1_deployments`` deployments of
1..``max_per_deployment`` drones and ``stage1_drones`` drones in all; one submission, after at
least one deployment where the exploration guard applies (``guard``: the agentic mode); the
report is committed once, with or before the submission and never after it, so no report is
written once the Stage-2 outcome is known.  A refused action raises :class:`GameError` and
changes nothing.  The measurement query (:meth:`Game.measure`, the ``hidden_measurements``
ablation) reports hidden variables for the drones of a flight whose rows the agent sees (exact
values, no draw).  Every draw derives from ``(scenario seed, play seed)`` through
:func:`~heuresis.causal.games.references.seed_of`; the free history is drawn per play (as CausalGame
draws one per game), so every agent's play of the same seed sees the same history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from heuresis.causal.games import causalgame as cg
from heuresis.causal.games.design import DesignError
from heuresis.causal.games.references import seed_of

__all__ = ["REPORT_MAX_CHARS", "Deployment", "Game", "GameError", "Stage2"]

REPORT_MAX_CHARS = 6000


class GameError(ValueError):
    """A refused action (budget, second submission, invalid design); the state is unchanged."""


@dataclass
class Deployment:
    """A flown deployment as the agent sees it (``rows``) plus the hidden truth (``survived``)."""

    index: int                     # 1.. for Stage 1, 0 for history groups
    source: str                    # "history" or "stage1"
    design: dict
    count: int
    returned: int
    destroyed: int
    rows: list[dict]
    survived: np.ndarray = field(repr=False)
    measures: dict[str, list] = field(repr=False, default_factory=dict)   # per shown row, on request only
    counts_shown: bool = True      # False: a history of survivors only (CausalGame), its losses never counted

    def summary(self) -> dict:
        """Return the deployment without its per-drone rows: design, counts and survival rate (where shown)."""
        out = {"deployment": self.index, "source": self.source, "design": self.design, "count": self.count}
        if not self.counts_shown:
            return {**{k: v for k, v in out.items() if k != "count"}, "records": len(self.rows)}
        return {**out, "returned": self.returned, "destroyed": self.destroyed,
                "survival_rate": round(self.returned / self.count, 4)}

    def public(self) -> dict:
        """Return what the agent sees of the deployment: :meth:`summary` plus the per-drone rows."""
        return {**self.summary(), "drones": self.rows}


@dataclass
class Stage2:
    """The scored submission: the final design flown on the Stage-2 fleet.

    Attributes
    ----------
    design : dict
        The submitted design, validated.
    fleet : int
        Drones flown in Stage 2.
    survived : int
        Of those, the drones that returned.
    survival : float
        ``survived / fleet``, the play's score.
    threshold : float or None
        Win threshold the play was held to (None: no threshold given).
    won : bool or None
        Whether ``survival`` reached ``threshold`` (None without a threshold).
    """

    design: dict
    fleet: int
    survived: int
    survival: float
    threshold: float | None
    won: bool | None


class Game:
    """State of one play: history, Stage-1 deployments, the submission, the report."""

    def __init__(self, scn: cg.Scenario, seed: int = 0, threshold: float | None = None, *,
                 guard: bool = True) -> None:
        self.scn = scn
        self.seed = int(seed)
        self.threshold = threshold
        self.guard = bool(guard)
        self.space = scn.space
        self.env_query = cg.EnvQuery(scn)
        self.history: list[Deployment] = self._history()
        self.deployments: list[Deployment] = []
        self.stage2: Stage2 | None = None
        self.report: str | None = None

    # --- state -------------------------------------------------------------------------------------
    @property
    def drones_used(self) -> int:
        """Drones flown in Stage 1 so far."""
        return sum(d.count for d in self.deployments)

    @property
    def drones_left(self) -> int:
        """Stage-1 drones still available under the ``stage1_drones`` budget."""
        return int(self.scn.budgets["stage1_drones"]) - self.drones_used

    @property
    def deployments_left(self) -> int:
        """Stage-1 deployments still available under the ``stage1_deployments`` budget."""
        return int(self.scn.budgets["stage1_deployments"]) - len(self.deployments)

    @property
    def stage(self) -> str:
        """Phase of the play: ``stage1`` until the submission (the report committed with or before it), then ``done``."""
        return "stage1" if self.stage2 is None else "done"

    def _budgets_left(self) -> dict:
        """The status's budgets (Stage 1 left, the Stage-2 fleet and threshold) and the designs flown so far."""
        b = self.scn.budgets
        return {"stage1": {"drones_left": self.drones_left, "drones_total": b["stage1_drones"],
                           "deployments_left": self.deployments_left, "deployments_total": b["stage1_deployments"],
                           "max_per_deployment": b["max_per_deployment"]},
                "stage2": {"fleet": b["stage2_fleet"], "submitted": self.stage2 is not None,
                           "threshold": self.threshold},
                "deployed_designs": [d.summary() for d in self.deployments]}

    def status(self) -> dict:
        """Return the play's state as the agent may see it: design space, visible variables, budgets left, designs flown."""
        scn = self.scn
        comps = scn.spec["components"]
        return {
            "scenario": scn.name, "stage": self.stage,
            "design_space": {
                "components": {c: {"cap": int(scn.spec["def_cap"]), "default": int(v["default_def"])}
                               for c, v in comps.items()},
                "equipment": {}, "def_budget": self.space.budget,
                "modules": {slot: {"options": list(v["options"]), "default": v["default"]}
                            for slot, v in scn.equipment.items()},
                "note": "a component or module left out of a design keeps its default",
            },
            "visible_variables": scn.visible_variables(),
            **({"measurable_variables": scn.measurable_variables()} if scn.measurable_variables() else {}),
            **({"per_drone_details": "returned drones only" if scn.spec["hide_failed_drones"]
                else "every drone, with its status"} if "returned_only_note" in scn.disclosures else {}),
            "report_committed": self.report is not None,
            "history_records": sum(len(h.rows) for h in self.history),
            "env_queries_left": self.env_query.budget - self.env_query.used,
            **self._budgets_left(),
        }

    # --- actions -------------------------------------------------------------------------------------
    def _fly(self, design: dict, count: int, ss, *, source: str, index: int) -> Deployment:
        """Fly ``count`` drones of ``design`` from seed ``ss``: the deployment as the agent sees it, and its truth."""
        scn = self.scn
        fly_ss, view_ss = ss.spawn(2)
        f = cg.fly(scn, design, count, np.random.default_rng(fly_ss))
        view = cg.agent_view(scn, f, np.random.default_rng(view_ss), design)
        rows = []
        for r in view["results"]:
            row = {"drone": r["drone"], "status": r["status"], "hit_count": r["hit_count"],
                   **self._component_hits(f, r["drone"] - 1), "was_detected": r["was_detected"], **r["environment"]}
            row.update({f"{c}_def": round(v, 3) for c, v in r.get("def_remaining", {}).items()})
            rows.append(row)
        measures = self._measures(f, [r["drone"] - 1 for r in view["results"]])
        return Deployment(index, source, design, count, view["survived"], view["destroyed"], rows, f.returned,
                          measures)

    def validate_design(self, design) -> dict:
        """Return ``design`` validated against the scenario's design space; a :class:`GameError` if it is invalid.

        A CausalGame design names DEF per component and one choice per equipment slot; what it
        leaves out keeps the drone sheet's default (``default_def``, the slot's ``default``).
        """
        if not isinstance(design, Mapping):
            raise GameError(f"a design must be an object mapping components to DEF points, got "
                            f"{type(design).__name__}")
        try:
            return self.scn.design(design)
        except DesignError as exc:
            raise GameError(str(exc)) from None

    @property
    def choices(self) -> dict[str, dict]:
        """The scenario's equipment slots (one choice each): slot -> ``{default, options}``; empty when it has none."""
        return self.scn.equipment

    def vector(self, design: Mapping) -> np.ndarray:
        """A validated design as the design space's vector (DEF per component, then equipment; module choices left out)."""
        space = self.space
        return space.vector({k: v for k, v in design.items() if k in (*space.components, *space.equipment)})

    def deploy(self, design, count) -> Deployment:
        """Fly ``count`` drones of ``design`` in Stage 1 (refused beyond any budget)."""
        if self.stage2 is not None:
            raise GameError("Stage 1 is over: the final design has been submitted")
        b = self.scn.budgets
        if isinstance(count, bool) or not isinstance(count, int):
            raise GameError(f"count must be a whole number, got {count!r}")
        if not 1 <= count <= b["max_per_deployment"]:
            raise GameError(f"count {count} is outside 1..{b['max_per_deployment']} drones per deployment")
        if self.deployments_left <= 0:
            raise GameError(f"no deployments left: all {b['stage1_deployments']} Stage-1 deployments are used")
        if count > self.drones_left:
            raise GameError(f"count {count} exceeds the {self.drones_left} Stage-1 drones left "
                            f"(budget {b['stage1_drones']})")
        design = self.validate_design(design)
        k = len(self.deployments) + 1
        dep = self._fly(design, count, seed_of(self.scn["seed"], self.scn.seed_name, "play", self.seed, "stage1", k),
                        source="stage1", index=k)
        self.deployments.append(dep)
        return dep

    def submit(self, design, report: str | None = None) -> Stage2:
        """Submit the final design once, with the report (here or committed before); a Stage-2 fleet is flown and scored."""
        if self.stage2 is not None:
            raise GameError("the final design was already submitted; the submission is irreversible")
        if self.guard and not self.deployments:
            raise GameError("deploy at least once in Stage 1 before submitting the final design")
        design = self.validate_design(design)
        if report is not None and self.report is not None:
            raise GameError("the report was already committed; submit the design without a report")
        if report is None and self.report is None:
            raise GameError("commit the report with or before the submission (it cannot be written after the "
                            "Stage-2 outcome is shown)")
        if report is not None:
            self.write_report(report)
        n = int(self.scn.budgets["stage2_fleet"])
        ss = seed_of(self.scn["seed"], self.scn.seed_name, "play", self.seed, "stage2")
        surv = int(cg.fly(self.scn, design, n, np.random.default_rng(ss), stage=2).returned.sum())
        rate = surv / n
        won = None if self.threshold is None else bool(rate >= self.threshold)
        self.stage2 = Stage2(design, n, surv, rate, self.threshold, won)
        return self.stage2

    def write_report(self, text) -> None:
        """Commit the report (once, before the Stage-2 outcome is shown, non-empty, at most :data:`REPORT_MAX_CHARS`)."""
        if self.stage2 is not None:
            raise GameError("the final design is submitted and its outcome shown: the report was due with or before "
                            "the submission")
        if self.report is not None:
            raise GameError("the report was already committed")
        if not isinstance(text, str) or not text.strip():
            raise GameError("the report must be non-empty text")
        if len(text) > REPORT_MAX_CHARS:
            raise GameError(f"the report has {len(text)} characters; at most {REPORT_MAX_CHARS}")
        self.report = text

    def flight(self, source: str, index: int) -> Deployment:
        """The observed flight group ``index`` (1-based) of ``source`` (``history`` or ``stage1``)."""
        groups = {"history": self.history, "stage1": self.deployments}.get(source)
        if groups is None:
            raise GameError(f"source must be 'history' or 'stage1', got {source!r}")
        if isinstance(index, bool) or not isinstance(index, int) or not 1 <= index <= len(groups):
            raise GameError(f"no {source} flight group {index!r}; there are {len(groups)} (numbered from 1)")
        return groups[index - 1]

    def measure(self, variable: str, source: str, index: int) -> dict:
        """The hidden ``variable`` measured on the drones of one flight group whose rows the agent sees."""
        known = self.scn.measurable_variables()
        if variable not in known:
            raise GameError(f"variable {variable!r} cannot be measured in this scenario; measurable: {known}")
        d = self.flight(source, index)
        return {"variable": variable, "source": source, "deployment": d.index,
                "drones": [r["drone"] for r in d.rows], "values": list(d.measures[variable])}

    def query_environment(self, variable: str) -> dict:
        """CausalGame's environment query: a visible variable summarised over every row shown so far, within its budget."""
        rows = [{"environment": r} for d in self.observed() for r in d.rows]
        try:
            return self.env_query(variable, rows)
        except (ValueError, cg.EnvQueryBudgetError) as exc:
            raise GameError(str(exc)) from None

    # --- flights ---------------------------------------------------------------------------------
    def _history(self) -> list[Deployment]:
        """The free history, drawn afresh for this play from its seed (as CausalGame draws one per game).

        One flight group per design of the scenario's history bias; rows carry the history's
        visible environment; destroyed drones' rows (and the group's losses) are left out where
        the scenario hides failed drones.
        """
        scn = self.scn
        n = int(scn.spec["resources"]["initial_observations"])
        idx = np.arange(n)
        shown = list(scn.spec.get("history_environment_shown", scn.spec["environment_shown"]))
        hide = bool(scn.spec["hide_failed_drones"])
        out = []
        for k, (part, design, force) in enumerate(cg.history_groups(scn)):
            sel = idx if part == "all" else idx[idx % 3 == 0] if part == "third" else idx[idx % 3 != 0]
            if not len(sel):
                continue
            rng = np.random.default_rng(seed_of(scn["seed"], scn.seed_name, "play", self.seed, "history", k))
            f = cg.fly(scn, design, len(sel), rng, stage=1, enforce_budget=False, force=force)
            kept = [j for j in range(len(sel)) if f.returned[j] or not hide]
            rows = [{"drone": m + 1, "status": "RETURNED" if f.returned[j] else "DESTROYED",   # numbered after the
                     "hit_count": int(f.hit_count[j]), **self._component_hits(f, j),            # filter: no gaps
                     **{v: cg._py(f.visible[v][j]) for v in shown}}
                    for m, j in enumerate(kept)]
            n_ret = int(f.returned.sum())
            out.append(Deployment(k + 1, "history", scn.design(design, False), len(sel), n_ret, len(sel) - n_ret,
                                  rows, f.returned, self._measures(f, kept), counts_shown=not hide))
        return out

    def _component_hits(self, f: cg.Fleet, j: int) -> dict:
        """Hits per component of drone ``j`` where the ``component_hits`` ablation shows them, else nothing."""
        if "component_hits" not in self.scn.disclosures:
            return {}
        return {f"hits_{c}": int(v[j]) for c, v in f.hits_by.items()}

    def _measures(self, f: cg.Fleet, shown: list[int]) -> dict[str, list]:
        """The hidden variables the ``hidden_measurements`` ablation measures, per shown row (else nothing)."""
        return {v: [cg._py(f.latent[v][j]) for j in shown] for v in self.scn.measurable_variables()}

    # --- what an agent has seen ------------------------------------------------------------------------
    def observed(self) -> list[Deployment]:
        """Return every deployment the agent has seen: the free history, then its Stage-1 deployments."""
        return [*self.history, *self.deployments]
