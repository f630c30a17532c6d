# Stage 2, reference sweeps (SPEC §4.1-4.2): each menu algorithm and baseline on each shard of
# instances; PC variants also write their deletion log with the hidden wrong/right label.


wildcard_constraints:
    algorithm="|".join(SWEPT),


rule references:
    input:
        data="results/instances/{family}/{split}",
        truth="results/truth/{family}/{split}/graphs.parquet",
    output:
        "results/references/{algorithm}/{family}/{split}/shard-{shard}.parquet",
    log:
        "logs/references/{algorithm}/{family}/{split}/shard-{shard}.log",
    benchmark:
        "results/benchmarks/references/{algorithm}/{family}/{split}/shard-{shard}.tsv"
    params:
        algorithm_params=reference_params,
        indices=reference_indices,
        grades=config["grades"],
    threads: 1
    resources:
        mem_mb=3000,
        runtime=reference_runtime,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/references.py"
