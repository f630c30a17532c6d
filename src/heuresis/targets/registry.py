"""The paper's tables and figures, each declared once; the workflow's target rules are generated from here.

A :class:`Target` names what a table or figure is built from (its inputs, by name), the config
slice it depends on (its params, by name: a change of that slice reruns the target, a change
elsewhere does not), the function that builds it (in :mod:`heuresis.targets.builders`), the
stage its provenance records, and its caption file, ``workflow/report/<caption>.rst``, the only
caption it has: the report shows it, and the table's Markdown, LaTeX and Parquet metadata carry
it. ``rules/targets.smk`` turns each into one rule named after it, so that ``snakemake
results/tables/table7.md`` builds Table 7; :class:`heuresis.preflight.plan.WorkflowPlan` says what each
input and param name is (:data:`INPUT_NAMES`, :data:`PARAM_NAMES`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from heuresis.artifacts.paths import FIGURE8_NUMBERS, VERIFICATION_CHECKS, figure_files, table_files

__all__ = ["INPUT_NAMES", "PARAM_NAMES", "TARGETS", "Target", "caption_file", "paper_targets", "target_files",
           "target_named"]

# every input and param name a target may use (heuresis.preflight.plan maps each to paths and values)
INPUT_NAMES = ("headroom_scores", "headroom_selection", "episode_scores", "verification_records", "leakage",
               "saturation", "repair_features", "table2", "published_table2", "game_references", "game_plays",
               "game_judgements", "published_table13", "published_games")
PARAM_NAMES = ("family_specs", "families", "bootstrap", "foundation_models", "test_seed", "secrets", "agents",
               "disclosure", "table1", "verification", "leakage", "saturation", "repairs", "judges", "game_bootstrap",
               "leaderboard")


@dataclass(frozen=True)
class Target:
    """One table or figure of the paper.

    Attributes
    ----------
    name : str
        The rule's name and the files' stem (``results/tables/<name>.*`` or ``results/figures/<name>.*``).
    kind : str
        ``table`` (Parquet, Markdown, LaTeX) or ``figure`` (PDF, PNG).
    stage : str
        The stage its provenance records: the stage whose results it summarizes.
    builder : str
        The function of :mod:`heuresis.targets.builders` that computes it.
    inputs, params : tuple of str
        Input and param names (:data:`INPUT_NAMES`, :data:`PARAM_NAMES`).
    category : str
        The report's category (Tables, Figures, Games).
    caption : str
        The stem of its caption file under ``workflow/report/`` (default: ``name``).
    also : dict
        Further outputs by name (e.g. the numbers behind a figure), as paths.
    group, mem_mb, runtime
        The rule's Snakemake group, memory (MB) and runtime (minutes).
    """

    name: str
    kind: str
    stage: str
    builder: str
    inputs: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    category: str = ""
    caption: str = ""
    also: dict[str, str] = field(default_factory=dict)
    group: str = "targets"
    mem_mb: int = 2000
    runtime: int = 10

    def __post_init__(self) -> None:
        if self.kind not in ("table", "figure"):
            raise ValueError(f"target {self.name!r}: kind {self.kind!r} is neither 'table' nor 'figure'")
        unknown = [n for n in (*self.inputs, *self.params) if n not in INPUT_NAMES + PARAM_NAMES]
        if unknown:
            raise ValueError(f"target {self.name!r}: unknown input or param names {unknown}")
        if not self.category:
            object.__setattr__(self, "category", "Tables" if self.kind == "table" else "Figures")
        if not self.caption:
            object.__setattr__(self, "caption", self.name)


def _headroom(name: str, kind: str, *extra: str) -> Target:
    return Target(name, kind, "headroom", "headroom_target", ("headroom_scores", "headroom_selection"),
                  ("family_specs", "bootstrap", *extra, "test_seed"))


def _analysis(name: str, kind: str, *inputs: str, params: tuple[str, ...] = ("families", "bootstrap", "agents",
                                                                               "secrets")) -> Target:
    return Target(name, kind, "analysis", "analysis_target", ("episode_scores", *inputs), params, group="analysis")


_GAMES_INPUTS = ("game_references", "game_plays", "game_judgements")


def _games(name: str, kind: str, caption: str = "", extra: tuple[str, ...] = ()) -> Target:
    return Target(name, kind, "games", "games_target", (*_GAMES_INPUTS, *extra), ("judges", "game_bootstrap", "secrets"),
                  category="Games", caption=caption, group="games_targets")


TARGETS: dict[str, Target] = {t.name: t for t in [
    Target("table1", "table", "targets", "table1", (), ("table1",), mem_mb=1000, runtime=5),
    _headroom("table2", "table"),
    Target("table2_paper", "table", "targets", "table2_paper", ("table2", "published_table2"), (),
           mem_mb=1000, runtime=5),
    _headroom("table3", "table", "foundation_models"),
    _headroom("table11", "table"),
    _headroom("figure1c", "figure"),
    Target("table5", "table", "verification", "table5", ("verification_records",), ("verification",),
           also={"checks": VERIFICATION_CHECKS}, mem_mb=1000, runtime=5),
    Target("figure1a", "figure", "leakage", "figure1a", ("leakage",), ("leakage",), group="", mem_mb=1000),
    Target("figure1b", "figure", "saturation", "figure1b", ("saturation",), ("saturation", "bootstrap"),
           also={f"table_{ext}": path for ext, path in table_files("figure1b").items()}, group=""),
    Target("figure8", "figure", "repairs", "figure8", ("repair_features",), ("repairs", "bootstrap"),
           also={ext: FIGURE8_NUMBERS.format(ext=ext) for ext in ("parquet", "md", "tex")}, group="", mem_mb=3000,
           runtime=20),
    *(_analysis(t, "table") for t in ("table4", "table6", "table7", "table8", "table9", "table10", "table13")),
    _analysis("table12", "table", params=("families", "agents", "secrets", "disclosure")),
    _analysis("figure6", "figure", "headroom_scores"),
    *(Target(name, kind, "analysis", "leaderboard_target", ("episode_scores", "headroom_scores", "published_table13"),
             ("families", "bootstrap", "agents", "secrets", "leaderboard"), group="analysis")
      for name, kind in (("leaderboard", "table"), ("leaderboard_cost", "figure"), ("leaderboard_spend", "figure"))),
    *(_analysis(f, "figure") for f in ("figure7a", "figure7b", "figure9")),
    _games("games_leaderboard", "table", extra=("published_games",)),
    *(_games(t, "table") for t in ("games_optima", "games_expectations", "games_judges",
                                   "games_criteria", "games_failure_modes", "games_trap_fall", "games_bias_control",
                                   "games_ablations", "games_protocols")),
    *(_games(f, "figure") for f in ("games_survival_rubric", "games_paths", "games_criteria_tiers",
                                    "games_survival_cr")),
]}

# the games track has one table per scenario family of the configured scenarios (paper_targets)
GAMES_FAMILY_TABLE = _games("games_family", "table")


def paper_targets(game_families: Iterable[str] = ()) -> list[Target]:
    """Every target of a run: :data:`TARGETS`, then one ``games_<family>`` table per games family."""
    per_family = [replace(GAMES_FAMILY_TABLE, name=f"games_{f}", caption="games_family") for f in game_families]
    return [*TARGETS.values(), *per_family]


def target_named(name: str) -> Target:
    """The target called ``name``: one of :data:`TARGETS`, or a games family table ``games_<family>``."""
    if name in TARGETS:
        return TARGETS[name]
    if name.startswith("games_"):
        return paper_targets([name.removeprefix("games_")])[-1]
    raise KeyError(f"no target named {name!r} (heuresis.targets.registry.TARGETS)")


def target_files(target: Target) -> dict[str, str]:
    """A target's output files by name (``parquet``/``md``/``tex`` or ``pdf``/``png``, then ``also``)."""
    main = table_files(target.name) if target.kind == "table" else figure_files(target.name)
    return {**main, **target.also}


def caption_file(target: Target) -> str:
    """The caption file, relative to the workflow's folder."""
    return f"workflow/report/{target.caption}.rst"
