# Instrument verification (docs/design.md §8): one job per check against its independent truth, then
# Table 5. The sizes come from config `verification.scales[verification.scale]` (small in CI,
# large on a cluster); each job's params are only its check's slice of the config.


rule verification_check:
    output:
        record="results/verification/checks/{check}.parquet",
        examples=directory("results/verification/examples/{check}"),
    log:
        "logs/verification/{check}.log",
    benchmark:
        "results/benchmarks/verification/{check}.tsv"
    params:
        settings=verification_settings,
    wildcard_constraints:
        check="|".join(VERIFICATION_CHECKS),
    threads: verification_threads
    resources:
        mem_mb=verification_mem_mb,
        runtime=verification_runtime,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/verification.py"


rule table5:
    input:
        records=expand("results/verification/checks/{check}.parquet", check=VERIFICATION_CHECKS),
    output:
        checks="results/verification/checks.parquet",
        parquet="results/tables/table5.parquet",
        md=report(
            "results/tables/table5.md",
            caption="../workflow/report/table5.rst",
            category="Tables",
        ),
        tex="results/tables/table5.tex",
    log:
        "logs/tables/table5.log",
    params:
        required=config["verification"]["required"],
        scale=config["verification"]["scale"],
    group:
        "targets"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/table5.py"
