# Figure 1b, saturation (docs/design.md §7): linear-Gaussian data simulated on the anonymized structures of
# public networks (BNLearn .bif files bundled in pgmpy-no-torch, read offline), scored for
# PC-Fisher-z, PC-KCI, GES and the oracle. One job per network; the figure gathers them.


rule saturation:
    wildcard_constraints:
        network="|".join(SATURATION_NETWORKS),
    output:
        "results/saturation/{network}.parquet",
    log:
        "logs/saturation/{network}.log",
    benchmark:
        "results/benchmarks/saturation/{network}.tsv"
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


rule figure1b:
    input:
        expand("results/saturation/{network}.parquet", network=SATURATION_NETWORKS),
    output:
        pdf="results/figures/figure1b.pdf",
        png=report(
            "results/figures/figure1b.png",
            caption="../workflow/report/figure1b.rst",
            category="Figures",
        ),
        # the figure's numbers per network, with GES's share of the oracle's gain over PC-KCI
        table=multiext("results/tables/figure1b", ".parquet", ".md", ".tex"),
    log:
        "logs/figures/figure1b.log",
    params:
        networks=SATURATION_NETWORKS,
        methods=saturation_methods(),
        n=config["saturation"]["n"],
        bootstrap=config["bootstrap"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/figure1b.py"
