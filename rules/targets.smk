# Paper targets built from the headroom stage: each table (Parquet + Markdown + LaTeX) and
# figure (PDF + PNG) is its own rule. Changing the bootstrap settings reruns only these.


rule table:
    input:
        scores="results/headroom/test_scores.parquet",
        selection="results/headroom/selection.parquet",
    output:
        parquet="results/tables/{table}.parquet",
        md=report("results/tables/{table}.md", caption="../workflow/report/{table}.rst", category="Tables"),
        tex="results/tables/{table}.tex",
    log:
        "logs/tables/{table}.log",
    wildcard_constraints:
        table="|".join(HEADROOM_TABLES),
    params:
        families={f: config["families"][f] for f in FAMILIES},
        bootstrap=config["bootstrap"],
        foundation_models=config["headroom"]["foundation_models"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/targets.py"


rule figure:
    input:
        scores="results/headroom/test_scores.parquet",
        selection="results/headroom/selection.parquet",
    output:
        pdf="results/figures/{figure}.pdf",
        png=report("results/figures/{figure}.png", caption="../workflow/report/{figure}.rst", category="Figures"),
    log:
        "logs/figures/{figure}.log",
    wildcard_constraints:
        figure="|".join(HEADROOM_FIGURES),
    params:
        families={f: config["families"][f] for f in FAMILIES},
        bootstrap=config["bootstrap"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/targets.py"
