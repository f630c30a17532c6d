# Figure 8, scripted repairs of PC-KCI from its deletion log (docs/design.md §4.4): per deleted pair, nine
# signals (log-only and new tests) computed per references shard; the figure rule scores each
# signal's AUC, the F1 change of a dev-chosen threshold on test, and a family-held-out classifier.


rule repair_features:
    input:
        ref="results/references/pc_kci/{family}/{split}/shard-{shard}.parquet",
        data="results/instances/{family}/{split}",
        truth="results/truth/{family}/{split}/graphs.parquet",
    output:
        "results/repairs/features/{family}/{split}/shard-{shard}.parquet",
    log:
        "logs/repairs/features/{family}/{split}/shard-{shard}.log",
    benchmark:
        "results/benchmarks/repairs/features/{family}/{split}/shard-{shard}.tsv"
    params:
        settings=repair_settings(),
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/repair_features.py"


rule figure8:
    input:
        repair_feature_outputs(),
    output:
        pdf="results/figures/figure8.pdf",
        png=report(
            "results/figures/figure8.png",
            caption="../workflow/report/figure8.rst",
            category="Figures",
        ),
        parquet="results/repairs/figure8.parquet",
        md="results/repairs/figure8.md",
        tex="results/repairs/figure8.tex",
    log:
        "logs/figures/figure8.log",
    params:
        bootstrap=config["bootstrap"],
        seed=config["repairs"]["seed"],
        classifier=config["repairs"]["classifier"],
    threads: 1
    resources:
        mem_mb=3000,
        runtime=20,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/figure8.py"
