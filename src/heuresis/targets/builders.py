"""The function that computes each target of :data:`heuresis.targets.registry.TARGETS`.

Every builder takes the target's name, its inputs (name -> list of paths) and its params
(name -> config slice) and returns what :func:`heuresis.targets.build.build` writes: a
:class:`Table` or a :class:`Figure`, or a list of them (a figure and the table of its numbers).
A builder computes; it writes only what is particular to it (Table 5's checks table); the caption, the provenance
record and the files are :func:`~heuresis.targets.build.build`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["BUILDERS", "Figure", "Own", "Table"]


@dataclass
class Table:
    """A table to write: its numbers (Parquet), its display (Markdown, LaTeX) and what its provenance records.

    ``note`` is appended to the caption (facts of this run: a scale, a data source); ``output`` is
    the name of the output it goes to (``parquet``: the target's own table; else a name of the
    target's ``also``); ``failure`` makes the job fail after writing, with that message.
    """

    numbers: pd.DataFrame
    display: pd.DataFrame
    config: Mapping
    inputs: Sequence[str]
    seeds: Mapping = field(default_factory=dict)
    secrets: Mapping | None = None
    highlight: Sequence[bool] | None = None
    note: str = ""
    output: str = "parquet"
    log: str = ""
    failure: str = ""
    log_table: bool = False
    provenance: Mapping = field(default_factory=dict)   # more entries of its provenance record


@dataclass
class Figure:
    """A figure to write (PDF and PNG), with the numbers it plots and what its provenance records."""

    fig: Any
    numbers: Any
    config: Mapping
    inputs: Sequence[str]
    seeds: Mapping = field(default_factory=dict)
    secrets: Mapping | None = None
    log: str = ""
    provenance: Mapping = field(default_factory=dict)   # more entries of its provenance record


@dataclass
class Own:
    """An output the builder writes itself: ``write(path, caption, provenance)`` returns a log line.

    ``output`` names the output (empty: the target's first file).
    """

    write: Any
    output: str
    config: Mapping = field(default_factory=dict)
    inputs: Sequence[str] = ()
    seeds: Mapping = field(default_factory=dict)
    provenance: Mapping = field(default_factory=dict)   # more entries of its provenance record


def _seeds(boot: Mapping) -> dict:
    return {"bootstrap": boot["seed"]} if boot else {}


def headroom_target(name: str, inputs: Mapping, params: Mapping):
    """Tables 2, 3, 11 and Figure 1c, from the headroom stage's scores and selection."""
    from heuresis.stages import headroom_targets as T
    from heuresis.stages.headroom import BCA_FAILURE_RULE, load_scores, load_selection

    scores = load_scores(inputs["headroom_scores"][0])
    selection = load_selection(inputs["headroom_selection"][0])
    families, boot = params["family_specs"], params["bootstrap"]
    common: dict[str, Any] = {"config": {"families": families, "bootstrap": boot}, "seeds": {"bootstrap": boot["seed"]},
              "inputs": [*inputs["headroom_scores"], *inputs["headroom_selection"]], "secrets": params["test_seed"]}
    if name == "figure1c":
        fig, numbers = T.figure1c(scores, list(families), boot)
        return Figure(fig, numbers.to_dict("records"), **common, log=f"{name}: written")
    if name == "table2":
        numbers, display = T.table2(scores, families, boot)
    elif name == "table3":
        numbers, display = T.table3(scores, selection, list(families), boot, params["foundation_models"])
    else:
        numbers, display = T.table11(scores, list(families), boot)
    from heuresis.targets.published import scale_note

    n_dev = int(selection["dev_n"].min()) if len(selection) else 0
    n_test = int(scores.groupby("family")["instance"].nunique().min()) if len(scores) else 0
    from heuresis.stages.instances import GENERATOR_VERSION, family_caveat

    note = " ".join(filter(None, [f"Failed runs: {BCA_FAILURE_RULE}." if name == "table3" else "",
                                  f"Instances: generator version {GENERATOR_VERSION}." if name == "table2" else "",
                                  scale_note(n_dev, n_test), family_caveat(families, list(families))]))
    return Table(numbers, display, **common, note=note, log=f"{name}: {len(numbers)} rows")


def analysis_target(name: str, inputs: Mapping, params: Mapping):
    """Tables 4, 6-10, 12, 13 and Figures 6, 7a, 7b, 9, from the episode scores."""
    from heuresis.stages.analysis import figures, tables
    from heuresis.stages.analysis.scores import load_episode_scores
    from heuresis.stages.headroom import load_scores

    scores = load_episode_scores(inputs["episode_scores"][0])
    families, agents = list(params["families"]), list(params["agents"])
    boot = dict(params.get("bootstrap", {}))   # Table 12 has no intervals: the bootstrap settings leave it alone
    disclosure = dict(params.get("disclosure", {}))
    common: dict[str, Any] = {"config": {"families": families, "bootstrap": boot, "agents": agents, **disclosure},
              "seeds": _seeds(boot), "inputs": [p for paths in inputs.values() for p in paths],
              "secrets": params["secrets"]}
    if name == "table12":
        numbers, display = tables.table12(scores, disclosure["cells"], disclosure["agent_specs"], disclosure["budgets"])
    elif name.startswith("table"):
        numbers, display = getattr(tables, name)(scores, families, boot, agents)
    elif name == "figure6":
        fig, numbers = figures.figure6(scores, load_scores(inputs["headroom_scores"][0]), families, boot, agents)
    else:
        fig, numbers = getattr(figures, name)(scores, families, boot, agents)
    if name.startswith("table"):
        return Table(numbers, display, **common, log=f"{name}: {len(numbers)} rows")
    return Figure(fig, numbers.to_dict("records"), **common, log=f"{name}: {len(numbers)} plotted numbers")


def leaderboard_target(name: str, inputs: Mapping, params: Mapping):
    """The leaderboard and its cost–score figure, from the episode scores, the headroom and the published Table 13."""
    from heuresis.stages.analysis.leaderboard import cost_figure, leaderboard, spend_figure
    from heuresis.stages.analysis.scores import load_episode_scores
    from heuresis.stages.headroom import load_scores
    from heuresis.targets.published import load_published_table13

    published = load_published_table13(inputs["published_table13"][0])
    boot, settings = dict(params["bootstrap"]), dict(params["leaderboard"])
    scores = load_episode_scores(inputs["episode_scores"][0])
    numbers, display = leaderboard(scores,
                                   load_scores(inputs["headroom_scores"][0]), list(params["families"]), boot,
                                   list(params["agents"]), settings, published)
    common: dict[str, Any] = {"config": {"families": list(params["families"]), "bootstrap": boot,
                                         "agents": list(params["agents"]), "leaderboard": settings},
                              "seeds": _seeds(boot), "inputs": [p for paths in inputs.values() for p in paths],
                              "secrets": params["secrets"]}
    if name == "leaderboard_spend":
        fig, plotted = spend_figure(scores, list(params["agents"]), settings.get("conditions") or ())
        return Figure(fig, plotted.to_dict("records"), **common, log=f"{name}: {len(plotted)} points plotted")
    if name == "leaderboard_cost":
        fig, plotted = cost_figure(numbers)
        return Figure(fig, plotted.to_dict("records"), **common, log=f"{name}: {len(plotted)} results plotted")
    note = (f"Ties: two-sided paired sign-flip permutation tests of the F1 difference on shared instances, Holm "
            f"over each scope's pairs at alpha {settings.get('alpha', 0.05)}. Published rows: {published['source']}; "
            "not ranked with this run's rows (measured on the paper's instances).")
    return Table(numbers, display, **common, note=note, log=f"{name}: {len(numbers)} rows")


def table1(name: str, inputs: Mapping, params: Mapping):
    """Table 1, from its data file (existing benchmarks against the design requirements)."""
    from heuresis.targets.table1 import table1 as build_table1
    from heuresis.targets.table1 import table1_path

    data = params["table1"]
    numbers, display = build_table1(data)
    legend = "; ".join(f"{k} {v['title']}" for k, v in data["requirements"].items())
    return Table(numbers, display, config={"table1": data}, inputs=[str(table1_path())],
                 note=f"Requirements: {legend}.", log=f"table1: {len(numbers)} benchmarks")


def table2_paper(name: str, inputs: Mapping, params: Mapping):
    """Table 2 beside the published one."""
    import pyarrow.parquet as pq

    from heuresis.targets.published import load_published_table2, table2_vs_paper

    published = load_published_table2(inputs["published_table2"][0])
    numbers, display = table2_vs_paper(pq.read_table(inputs["table2"][0]).to_pandas(), published)
    return Table(numbers, display, config={"published_table2": published},
                 inputs=[*inputs["table2"], *inputs["published_table2"]], note=f"Source: {published['source']}.",
                 log=f"table2_paper: {len(numbers)} rows")


def table5(name: str, inputs: Mapping, params: Mapping):
    """Table 5 from the check records; the checks table beside it. A failed required check fails the job."""
    from heuresis.stages import verification as V

    settings = params["verification"]
    required, scale = list(settings["required"]), settings["scale"]
    checks = V.read_checks(inputs["verification_records"])
    numbers, display, highlight, failed = V.table5(checks, required)
    failure = (f"required check(s) failed: {', '.join(failed)}; examples under results/verification/examples/; "
               "Snakemake removes the failed job's outputs (the table is above; --keep-incomplete keeps them)"
               if failed else "")
    common: dict[str, Any] = {"config": {"required": required, "scale": scale}, "inputs": list(inputs["verification_records"])}

    def write_checks(path, caption, provenance):
        from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps

        V.write_checks_table(numbers, path, {PROVENANCE_KEY: dumps(provenance)})
        return ""

    return [Own(write_checks, "checks", **common),
            Table(numbers, display, **common, highlight=highlight, note=f"Scale: {scale}.", failure=failure,
                  log_table=True,
                  log=f"{len(numbers)} checks, {int((~numbers['passed']).sum())} failing (none required)")]


def figure1a(name: str, inputs: Mapping, params: Mapping):
    """Figure 1a from the leakage probes."""
    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import LEAKAGE
    from heuresis.stages.leakage import figure1a as build_figure1a

    agents, networks = list(params["leakage"]["agents"]), list(params["leakage"]["networks"])
    frames = [read_table(p, LEAKAGE).to_pandas() for p in inputs["leakage"]]
    results = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LEAKAGE.schema.names)
    fig, numbers = build_figure1a(results, agents, networks)
    log = ("figure1a: " + (f"{len(results)} probes of {len(agents)} agents" if agents
                           else "no LLM agent configured (leakage.agents is empty); the figure says so"))
    return Figure(fig, numbers.to_dict("records"), config={"agents": agents, "networks": networks},
                  inputs=list(inputs["leakage"]), log=log)


def figure1b(name: str, inputs: Mapping, params: Mapping):
    """Figure 1b and the table of its numbers, from the saturation runs."""
    from heuresis.stages.saturation import figure1b as build_figure1b
    from heuresis.stages.saturation import figure1b_table, load_saturation, saturation_summary

    sat, boot = params["saturation"], params["bootstrap"]
    networks, methods = sat["networks"], sat["methods"]
    summary = saturation_summary(load_saturation(inputs["saturation"]), networks, methods, boot)
    common: dict[str, Any] = {"config": {"networks": networks, "methods": methods, "bootstrap": boot},
              "seeds": {"bootstrap": boot["seed"]}, "inputs": list(inputs["saturation"])}
    numbers, display = figure1b_table(summary, networks, methods)
    log = "figure1b: " + "; ".join(f"{r.network} {r.method} {r.f1:.3f}" for r in summary.itertuples())
    return [Figure(build_figure1b(summary, networks, methods, n=sat["n"]), summary.to_dict("records"), **common),
            Table(numbers, display, **common, output="table_parquet", log=log)]


def figure8(name: str, inputs: Mapping, params: Mapping):
    """Figure 8 and its numbers, from the repair signals of every PC-KCI shard."""
    from heuresis.stages.repairs import evaluate, load_features, summary_display
    from heuresis.stages.repairs import figure8 as build_figure8

    rep, boot = params["repairs"], params["bootstrap"]
    summary = evaluate(load_features(inputs["repair_features"]), boot, seed=rep["seed"],
                       classifier_params=rep["classifier"])
    common: dict[str, Any] = {"config": {"bootstrap": boot, "seed": rep["seed"], "classifier": rep["classifier"]},
              "seeds": {"bootstrap": boot["seed"], "classifier": rep["seed"]}, "inputs": list(inputs["repair_features"])}
    log = "figure8: " + "; ".join(f"{r.method} AUC={r.auc:.3f} dF1={r.f1_change:+.3f}" for r in summary.itertuples())
    return [Table(summary, summary_display(summary), **common),
            Figure(build_figure8(summary), summary.to_dict("records"), **common, log=log)]


def games_target(name: str, inputs: Mapping, params: Mapping):
    """A games table or figure (:func:`heuresis.stages.games.analysis.compute_target`)."""
    from heuresis.stages.games.analysis import compute_target
    from heuresis.targets.published import load_causalgame_leaderboard

    boot = dict(params["game_bootstrap"])
    published = load_causalgame_leaderboard(inputs["published_games"][0]) if "published_games" in inputs else None
    res = compute_target(name, references=list(inputs["game_references"]), plays=list(inputs["game_plays"]),
                         judgements=list(inputs["game_judgements"]), judges=list(params["judges"]), bootstrap=boot,
                         secrets=dict(params["secrets"]), published=published)
    config = {"target": name, "judges": list(params["judges"]), "bootstrap": res.bootstrap}
    seeds = {"bootstrap": int(res.bootstrap["seed"])}
    paths = [p for key in ("game_references", "game_plays", "game_judgements", "published_games") for p in inputs.get(key, [])]
    if res.kind == "figure":
        return Figure(res.fig, res.numbers, config, paths, seeds, log=res.log, provenance={"games_split": res.split})
    assert res.display is not None
    return Table(res.numbers, res.display, config, paths, seeds, note=res.note, log=res.log,
                 provenance={"games_split": res.split})


BUILDERS = {f.__name__: f for f in (headroom_target, analysis_target, leaderboard_target, table1, table2_paper, table5, figure1a,
                                    figure1b, figure8, games_target)}
