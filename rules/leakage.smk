# Figure 1a, the leakage probe: each LLM agent of config leakage.agents is asked for the public
# networks' graphs from their variable names and from X1..Xd controls (one job per agent, its
# answers checkpointed); the figure rule says so when no LLM agent is configured.


rule leakage:
    wildcard_constraints:
        agent="|".join(LEAKAGE_AGENTS) or "none",
    output:
        "results/leakage/{agent}.parquet",
    log:
        "logs/leakage/{agent}.log",
    params:
        spec=leakage_spec,
        networks=config["leakage"]["networks"],
        repeats=config["leakage"]["repeats"],
        seed=config["leakage"]["seed"],
    threads: 1
    resources:
        mem_mb=1000,
        runtime=120,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/leakage.py"


rule figure1a:
    input:
        expand("results/leakage/{agent}.parquet", agent=LEAKAGE_AGENTS),
    output:
        pdf="results/figures/figure1a.pdf",
        png=report(
            "results/figures/figure1a.png",
            caption="../workflow/report/figure1a.rst",
            category="Figures",
        ),
    log:
        "logs/figures/figure1a.log",
    params:
        agents=LEAKAGE_AGENTS,
        networks=config["leakage"]["networks"],
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/figure1a.py"
