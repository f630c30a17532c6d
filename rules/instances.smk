# Stage 1, instances (docs/design.md §3): per family and split, the agent-visible data of every instance
# (results/instances/...) and, kept apart, the hidden truth (results/truth/...); beside the truth, the
# run's salt (secrets.salt: drawn; heuresis.sealing).


rule instances:
    output:
        data=directory("results/instances/{family}/{split}"),
        graphs="results/truth/{family}/{split}/graphs.parquet",
        nodes="results/truth/{family}/{split}/nodes.parquet",
    log:
        "logs/instances/{family}/{split}.log",
    benchmark:
        "results/benchmarks/instances/{family}/{split}.tsv"
    params:
        spec=instance_params,
        n_instances=n_instances,
    group:
        "instances"
    threads: 1
    conda:
        "../environment.yml"
    resources:
        mem_mb=1000,  # measured: ~150 MB and seconds per split at paper scale
        runtime=5,
    script:
        "../workflow/scripts/instances.py"


# Drawn once per results tree: write-protected, so the workflow never redraws it (a job that would
# fails instead); delete the file to draw a new salt, which reruns every episode. Only episode jobs
# read it (secrets.salt: drawn).
rule salt:
    output:
        protected(SALT_FILE),
    log:
        "logs/salt.log",
    localrule: True
    script:
        "../workflow/scripts/salt.py"
