# Figure 8, scripted repairs of PC-KCI from its deletion log (docs/design.md §4.4): per deleted pair, nine
# signals (log-only and new tests) computed per references shard; the figure rule scores each
# signal's AUC, the F1 change of a dev-chosen threshold on test, and a family-held-out classifier.


rule repair_features:
    input:
        ref=reference_template("pc_kci"),
        data=P.INSTANCES,
        truth=P.TRUTH_GRAPHS,
    output:
        P.REPAIR_FEATURES,
    log:
        log_of(P.REPAIR_FEATURES),
    benchmark:
        benchmark_of(P.REPAIR_FEATURES)
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
