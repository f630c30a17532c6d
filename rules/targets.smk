# Paper targets built from the headroom stage: each table (Parquet + Markdown + LaTeX) and
# figure (PDF + PNG) is its own rule, named after it. Changing the bootstrap settings reruns
# only these.

for _table in HEADROOM_TABLES:

    rule:
        name:
            _table
        input:
            scores="results/headroom/test_scores.parquet",
            selection="results/headroom/selection.parquet",
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
            families={f: config["families"][f] for f in FAMILIES},
            bootstrap=config["bootstrap"],
            foundation_models=config["headroom"]["foundation_models"],
            secrets=TEST_SEED,
        group:
            "targets"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/targets.py"


for _figure in HEADROOM_FIGURES:

    rule:
        name:
            _figure
        input:
            scores="results/headroom/test_scores.parquet",
            selection="results/headroom/selection.parquet",
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
            families={f: config["families"][f] for f in FAMILIES},
            bootstrap=config["bootstrap"],
            secrets=TEST_SEED,
        group:
            "targets"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/targets.py"


rule table1:
    output:
        parquet="results/tables/table1.parquet",
        md=report(
            "results/tables/table1.md",
            caption="../workflow/report/table1.rst",
            category="Tables",
        ),
        tex="results/tables/table1.tex",
    log:
        "logs/tables/table1.log",
    params:
        data=table1_data(),
    group:
        "targets"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/table1.py"


rule table2_paper:
    """Our Table 2 beside the published one (heuresis.targets.published; the data file names its source)."""
    input:
        table2="results/tables/table2.parquet",
        published=published_table2_file(),
    output:
        parquet="results/tables/table2_paper.parquet",
        md=report(
            "results/tables/table2_paper.md",
            caption="../workflow/report/table2_paper.rst",
            category="Tables",
        ),
        tex="results/tables/table2_paper.tex",
    log:
        "logs/tables/table2_paper.log",
    group:
        "targets"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/table2_paper.py"
