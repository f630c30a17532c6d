# Analysis stage (docs/design.md §6-7): every episode scored once (results/analysis/episode_scores.parquet),
# then each table (Parquet + Markdown + LaTeX) and figure (PDF + PNG) is its own rule reading it.
# The scores do not depend on the bootstrap settings: changing them reruns only the tables and figures.


rule episode_scores:
    input:
        episodes=episode_outputs(),
        calls=episode_calls(),
        pc_kci=episode_references(),
        truth=episode_truth(),
        headroom="results/headroom/test_scores.parquet",
    output:
        scores="results/analysis/episode_scores.parquet",
    log:
        "logs/analysis/episode_scores.log",
    params:
        menu=MENU,
    group:
        "analysis"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/episode_scores.py"


for _table in ANALYSIS_TABLES:

    rule:
        name:
            _table
        input:
            scores="results/analysis/episode_scores.parquet",
        output:
            parquet=f"results/tables/{_table}.parquet",
            md=report(
                f"results/tables/{_table}.md",
                caption=f"../workflow/report/{_table}.rst",
                category="Tables",
            ),
            tex=f"results/tables/{_table}.tex",
        log:
            f"logs/tables/{_table}.log",
        params:
            target=_table,
            **analysis_params(),
            extra={},
        group:
            "analysis"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/analysis.py"


rule table12:
    input:
        scores="results/analysis/episode_scores.parquet",
    output:
        parquet="results/tables/table12.parquet",
        md=report(
            "results/tables/table12.md",
            caption="../workflow/report/table12.rst",
            category="Tables",
        ),
        tex="results/tables/table12.tex",
    log:
        "logs/tables/table12.log",
    params:
        target="table12",
        families=FAMILIES,
        bootstrap={},  # no intervals: changing the bootstrap settings leaves Table 12 alone
        agents=EPISODE_AGENTS,
        secrets=SECRETS,
        extra={
            "cells": episode_cells(),
            "agent_specs": {a: dict(config["agents"][a]) for a in EPISODE_AGENTS},
            "budgets": dict(config["episodes"]["budgets"]),
        },
    group:
        "analysis"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/analysis.py"


rule figure6:
    input:
        scores="results/analysis/episode_scores.parquet",
        headroom="results/headroom/test_scores.parquet",
    output:
        pdf="results/figures/figure6.pdf",
        png=report(
            "results/figures/figure6.png",
            caption="../workflow/report/figure6.rst",
            category="Figures",
        ),
    log:
        "logs/figures/figure6.log",
    params:
        target="figure6",
        **analysis_params(),
        extra={},
    group:
        "analysis"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/analysis.py"


for _figure in ANALYSIS_FIGURES:

    rule:
        name:
            _figure
        input:
            scores="results/analysis/episode_scores.parquet",
        output:
            pdf=f"results/figures/{_figure}.pdf",
            png=report(
                f"results/figures/{_figure}.png",
                caption=f"../workflow/report/{_figure}.rst",
                category="Figures",
            ),
        log:
            f"logs/figures/{_figure}.log",
        params:
            target=_figure,
            **analysis_params(),
            extra={},
        group:
            "analysis"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/analysis.py"
