# Figure 1a, the leakage probe: each LLM agent of config leakage.agents is asked for the public
# networks' graphs from their variable names and from X1..Xd controls (one job per agent and
# network, its answers checkpointed: adding a network asks only about that network); the figure
# rule says so when no LLM agent is configured.


rule leakage:
    wildcard_constraints:
        agent="|".join(LEAKAGE_AGENTS) or "none",
        network="|".join(config["leakage"]["networks"]) or "none",
    output:
        "results/leakage/{agent}/{network}.parquet",
    log:
        "logs/leakage/{agent}/{network}.log",
    params:
        spec=leakage_spec,
        repeats=config["leakage"]["repeats"],
        seed=config["leakage"]["seed"],
        attempt=attempt_of("results/leakage/{agent}/{network}.parquet"),
    threads: 1
    resources:
        mem_mb=1000,
        runtime=leakage_runtime,
        **llm_slots("agent"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/leakage.py"


rule figure1a:
    input:
        expand("results/leakage/{agent}/{network}.parquet", agent=LEAKAGE_AGENTS, network=config["leakage"]["networks"]),
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
