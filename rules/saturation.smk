# Figure 1b, saturation (docs/design.md §7): linear-Gaussian data simulated on the anonymized structures of
# public networks (BNLearn .bif files bundled in pgmpy-no-torch, read offline), scored for
# PC-Fisher-z, PC-KCI, GES and the oracle. One job per network; the figure gathers them.


rule saturation:
    wildcard_constraints:
        network=one_of(SATURATION_NETWORKS),
    output:
        P.SATURATION,
    log:
        log_of(P.SATURATION),
    benchmark:
        benchmark_of(P.SATURATION)
    params:
        settings=saturation_params(),
    threads: 1
    resources:
        mem_mb=3000,
        runtime=saturation_runtime,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/saturation.py"
