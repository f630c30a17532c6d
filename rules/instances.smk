# Stage 1, instances (docs/design.md §3): per family and split, the agent-visible data of every instance
# (results/instances/...) and, kept apart, the hidden truth (results/truth/...).


rule instances:
    output:
        data=directory(P.INSTANCES),
        graphs=P.TRUTH_GRAPHS,
        nodes=P.TRUTH_NODES,
    log:
        log_of(P.INSTANCES),
    benchmark:
        benchmark_of(P.INSTANCES)
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

