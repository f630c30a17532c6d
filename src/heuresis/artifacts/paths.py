"""Every artifact's path, written once: the templates the rules, the CLI, the scripts and the docs use.

A template is a path relative to the workflow's folder with ``{wildcard}`` fields, in Snakemake's
syntax: ``INSTANCES.format(family="lg", split="dev")`` is a concrete path, and a rule names the
template itself as an output. Each stage's artifacts are one block below, in the order the stages
run, each declared with the rule that writes it, the package function that computes it and its
Parquet schema (:data:`ARTIFACTS`); docs/artifacts.md names the same (a test keeps the two in step,
and checks that every file of a run's ``results/`` matches a documented path).

The shard index is formatted with three digits (:func:`shard`); the log and benchmark files of a
job mirror its first output under ``logs/`` and ``results/benchmarks/`` (:func:`log_of`,
:func:`benchmark_of`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ARTIFACTS",
    "FIGURE",
    "FIGURE_EXTS",
    "RESULTS",
    "TABLE",
    "TABLE_EXTS",
    "TEMPLATES",
    "Artifact",
    "benchmark_of",
    "figure_files",
    "log_of",
    "one_of",
    "shard",
    "table_files",
]

RESULTS = "results"


@dataclass(frozen=True)
class Artifact:
    """What wrote an artifact: its rule, the package function that computes it, its Parquet schema.

    ``schema`` names a :class:`heuresis.artifacts.schemas.Schema` of that module (empty: a folder,
    a paper table or a figure, whose columns are the target's own).
    """

    template: str
    rule: str
    function: str
    schema: str = ""


ARTIFACTS: dict[str, Artifact] = {}


def _declare(name: str, template: str, rule: str, function: str, schema: str = "") -> str:
    ARTIFACTS[name] = Artifact(template, rule, function, schema)
    return template


# instances: the data an agent sees, and the hidden truth it never does
INSTANCES = _declare("INSTANCES", "results/instances/{family}/{split}", "instances",
                     "heuresis.stages.instances.write_split")
TRUTH_GRAPHS = _declare("TRUTH_GRAPHS", "results/truth/{family}/{split}/graphs.parquet", "instances",
                        "heuresis.stages.instances.write_split", "TRUTH_GRAPHS")
TRUTH_NODES = _declare("TRUTH_NODES", "results/truth/{family}/{split}/nodes.parquet", "instances",
                       "heuresis.stages.instances.write_split", "TRUTH_NODES")

# references: one Parquet per algorithm, family, split and shard
REFERENCES = _declare("REFERENCES", "results/references/{algorithm}/{family}/{split}/shard-{shard}.parquet",
                      "references_{first}", "heuresis.stages.references.run_shard", "REFERENCES")

# headroom: BCA selection on dev and every method's test scores
HEADROOM_SELECTION = _declare("HEADROOM_SELECTION", "results/headroom/selection.parquet", "headroom",
                              "heuresis.stages.headroom.write_headroom", "HEADROOM_SELECTION")
HEADROOM_SCORES = _declare("HEADROOM_SCORES", "results/headroom/test_scores.parquet", "headroom",
                           "heuresis.stages.headroom.write_headroom", "HEADROOM_SCORES")

# episodes: the episodes, their tool calls and their model requests per shard; transcripts
_SHARD = "results/episodes/{agent}/{condition_id}/{family}/{split}/shard-{shard}"
EPISODES = _declare("EPISODES", _SHARD + ".parquet", "episodes", "heuresis.stages.episodes.run_episode_shard",
                    "EPISODES")
EPISODE_CALLS = _declare("EPISODE_CALLS", _SHARD + ".calls.parquet", "episodes",
                         "heuresis.stages.episodes.run_episode_shard", "CALLS")
EPISODE_REQUESTS = _declare("EPISODE_REQUESTS", _SHARD + ".requests.parquet", "episodes",
                            "heuresis.stages.episodes.run_episode_shard", "REQUESTS")
EPISODE_TRANSCRIPTS = _declare("EPISODE_TRANSCRIPTS", "results/transcripts/{agent}/{condition_id}/{family}/{split}",
                               "episodes", "heuresis.stages.episodes.run_episode_shard")
EPISODE_SCORES = _declare("EPISODE_SCORES", "results/analysis/episode_scores.parquet", "episode_scores",
                          "heuresis.stages.analysis.scores.write_episode_scores", "EPISODE_SCORES")
SPEND = _declare("SPEND", "results/spend", "episodes", "heuresis.agents.spend.SpendLedger")
#: the run's plan, written when a run starts (Snakemake's onstart, no rule: heuresis.view.live.write_plan),
#: what a served view follows
RUN_PLAN = "results/run/plan.json"

# the pilot of a paid run (k episodes per LLM agent and budget setting) and the forecast drawn from it
PILOT = _declare("PILOT", "results/pilot/k{k}/{agent}.parquet", "pilot", "heuresis.stages.pilot.run_pilot", "PILOT")
PILOT_SHARD = _declare("PILOT_SHARD", "results/pilot/k{k}/episodes/{agent}/{condition_id}/{family}/{split}/{index}.parquet",
                       "pilot", "heuresis.stages.pilot.run_pilot", "EPISODES")
FORECAST = _declare("FORECAST", "results/pilot/k{k}/forecast.parquet", "forecast",
                    "heuresis.stages.pilot.write_forecast", "FORECAST")
FORECAST_TEXT = _declare("FORECAST_TEXT", "results/pilot/k{k}/forecast.md", "forecast",
                         "heuresis.stages.pilot.write_forecast")

# verification: one record and an examples folder per check, then all checks in one table
VERIFICATION_CHECK = _declare("VERIFICATION_CHECK", "results/verification/checks/{check}.parquet",
                              "verification_check", "heuresis.stages.verification.runner.write_check",
                              "VERIFICATION_CHECKS")
VERIFICATION_EXAMPLES = _declare("VERIFICATION_EXAMPLES", "results/verification/examples/{check}",
                                 "verification_check", "heuresis.stages.verification.runner.write_check")
VERIFICATION_CHECKS = _declare("VERIFICATION_CHECKS", "results/verification/checks.parquet", "table5",
                               "heuresis.stages.verification.tables.write_checks_table", "VERIFICATION_CHECKS")

# leakage probe, saturation, scripted repairs
LEAKAGE = _declare("LEAKAGE", "results/leakage/{agent}/{network}.parquet", "leakage",
                   "heuresis.stages.leakage.run_leakage", "LEAKAGE")
SATURATION = _declare("SATURATION", "results/saturation/{network}.parquet", "saturation",
                      "heuresis.stages.saturation.run_network", "SATURATION")
REPAIR_FEATURES = _declare("REPAIR_FEATURES", "results/repairs/features/{family}/{split}/shard-{shard}.parquet",
                           "repair_features", "heuresis.stages.repairs.write_features", "REPAIR_FEATURES")
FIGURE8_NUMBERS = _declare("FIGURE8_NUMBERS", "results/repairs/figure8.{ext}", "figure8",
                           "heuresis.stages.repairs.evaluate")

# games track
_PLAY = "results/games/plays/{agent}/{mode}/{scenario}"
_JUDGEMENT = "results/games/judgements/{judge}/{agent}/{mode}/{scenario}"
GAME_REFERENCES = _declare("GAME_REFERENCES", "results/games/references/{scenario}.parquet", "games_references",
                           "heuresis.stages.games.workflow.run_references", "GAME_REFERENCES")
GAME_PLAYS = _declare("GAME_PLAYS", _PLAY + ".parquet", "games_plays", "heuresis.stages.games.workflow.run_plays",
                      "GAME_PLAYS")
GAME_PLAY_CALLS = _declare("GAME_PLAY_CALLS", _PLAY + ".calls.parquet", "games_plays",
                           "heuresis.stages.games.workflow.run_plays", "GAME_CALLS")
GAME_PLAY_REQUESTS = _declare("GAME_PLAY_REQUESTS", _PLAY + ".requests.parquet", "games_plays",
                              "heuresis.stages.games.workflow.run_plays", "GAME_PLAY_REQUESTS")
GAME_TRANSCRIPTS = _declare("GAME_TRANSCRIPTS", "results/games/transcripts/{agent}/{mode}/{scenario}", "games_plays",
                            "heuresis.stages.games.workflow.run_plays")
GAME_JUDGEMENTS = _declare("GAME_JUDGEMENTS", _JUDGEMENT + ".parquet", "games_judgements",
                           "heuresis.stages.games.workflow.run_judgements", "GAME_JUDGEMENTS")
GAME_JUDGEMENT_REQUESTS = _declare("GAME_JUDGEMENT_REQUESTS", _JUDGEMENT + ".requests.parquet", "games_judgements",
                                   "heuresis.stages.games.workflow.run_judgements", "GAME_JUDGEMENT_REQUESTS")

# the paper's tables and figures (heuresis.targets: one rule per target, named after it), the viewer's site
TABLE = _declare("TABLE", "results/tables/{name}.{ext}", "{name}", "heuresis.targets.build.build")
FIGURE = _declare("FIGURE", "results/figures/{name}.{ext}", "{name}", "heuresis.targets.build.build")
TABLE_EXTS = ("parquet", "md", "tex")
FIGURE_EXTS = ("pdf", "png")
VIEW = _declare("VIEW", "results/view", "view", "heuresis.view.export_site")

TEMPLATES = {name: artifact.template for name, artifact in ARTIFACTS.items()}

# written by no rule: the run's drawn salt (planned once, never a job's output), and what the
# `heuresis serve-episode` / `serve-play` commands write beside the workflow's own files
SALT = "results/truth/salt.json"
SERVED_EPISODE = "results/episodes/{agent}/{condition_id}/{family}/{split}/served-{index}.parquet"
SERVED_PLAY = "results/games/plays/{agent}/agentic/served-{scenario}.parquet"


def located(template: str, results: str | Path, **fields: object) -> Path:
    """``template`` with its fields filled, in the results folder ``results`` instead of ``results/``."""
    return Path(results) / template.format(**fields).removeprefix(RESULTS + "/")


def shard(index: int) -> str:
    """The ``{shard}`` field of shard ``index``: three digits."""
    return f"{int(index):03d}"


def table_files(name: str) -> dict[str, str]:
    """A table's files by extension: Parquet (the numbers), Markdown and LaTeX (the display)."""
    return {ext: TABLE.format(name=name, ext=ext) for ext in TABLE_EXTS}


def figure_files(name: str) -> dict[str, str]:
    """A figure's files by extension: PDF and PNG (its numbers go to ``<name>.provenance.json``)."""
    return {ext: FIGURE.format(name=name, ext=ext) for ext in FIGURE_EXTS}


def _mirror(template: str, root: str, suffix: str) -> str:
    stem = template.removeprefix(RESULTS + "/")
    for ext in (".calls.parquet", ".requests.parquet", ".parquet", ".md", ".tex", ".pdf", ".png"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    return f"{root}/{stem}{suffix}"


def log_of(template: str) -> str:
    """The log file of the job whose first output is ``template``: the same path under ``logs/``."""
    return _mirror(template, "logs", ".log")


def benchmark_of(template: str) -> str:
    """The benchmark file (Snakemake's ``benchmark:``) of the job whose first output is ``template``."""
    return _mirror(template, f"{RESULTS}/benchmarks", ".tsv")


def one_of(values) -> str:
    """A wildcard constraint that matches exactly the given values (``none`` when there are none).

    An empty alternation would match the empty string; ``none`` matches no configured name, so a
    rule of a stage with nothing configured matches no path.
    """
    return "|".join(re.escape(str(v)) for v in values) or "none"
